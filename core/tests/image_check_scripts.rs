//! Tests of the image checks' scripts: ShellCheck, and runs under bash against a temporary
//! directory standing in for the image's file system, for each verdict.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use uyuni_core::inspect::{CaCopy, Inspection};
use uyuni_core::scripts::JobScript;
use uyuni_core::scripts::database::SETUP_MARKER;
use uyuni_core::scripts::image_check::{
    FIRST_SERVER_IMAGE, SALT_CA_FILE, render_database, render_database_for_install,
    render_database_upgrade, render_server,
};
use uyuni_core::scripts::image_inspect::TERMINATION_LOG;

const SERVER: &str = "registry.example.com/uyuni/server:5.2.9";
const DB: &str = "registry.example.com/uyuni/server-postgresql:5.2.7";
const UPGRADE: &str = "registry.example.com/uyuni/server-database-migration:5.2.7";

struct Image {
    dir: tempfile::TempDir,
}

impl Image {
    fn new() -> Image {
        let image = Image {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        image.file(
            "/etc/os-release",
            "NAME=\"SLES\"\nPRETTY_NAME=\"SUSE Linux Enterprise Server 16.0\"\n",
        );
        image.dir("/dev");
        image
    }
    /// What the check left in the termination message, read as the planner reads it.
    fn report(&self) -> (Inspection, String) {
        let path = Path::new(&self.root()).join(TERMINATION_LOG.trim_start_matches('/'));
        let text = fs::read_to_string(path).unwrap_or_default();
        (Inspection::parse(&text), text)
    }
    fn root(&self) -> String {
        self.dir.path().join("root").display().to_string()
    }
    fn file(&self, path: &str, content: &str) {
        let p = Path::new(&self.root()).join(path.trim_start_matches('/'));
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        fs::write(&p, content).expect("write");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    fn dir(&self, path: &str) {
        fs::create_dir_all(Path::new(&self.root()).join(path.trim_start_matches('/')))
            .expect("mkdir");
    }
    /// A `postgres` on PATH that reports `version`.
    fn postgres_binary(&self, version: &str) {
        self.file(
            "/stub-bin/postgres",
            &format!("#!/bin/bash\necho 'postgres (PostgreSQL) {version}'\n"),
        );
    }
    fn run(&self, script: &JobScript, pg_major: Option<&str>) -> Output {
        // Only the system's basic tools besides the stubs: a PostgreSQL of the machine running
        // the tests must not answer for the image.
        let path = format!("{}/stub-bin:/usr/bin:/bin", self.root());
        let mut cmd = Command::new("bash");
        cmd.arg("-c")
            .arg(&script.text)
            .envs(script.env.iter().map(|(k, v)| (*k, v)))
            .env("PATH", path)
            .env_remove("PG_MAJOR")
            .stdin(Stdio::null());
        if let Some(major) = pg_major {
            cmd.env("PG_MAJOR", major);
        }
        cmd.output().expect("bash runs")
    }
}

fn stdout(out: &Output) -> String {
    format!(
        "status {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn scripts_are_shellcheck_clean() {
    common::shellcheck_file("image-check-server.sh");
    common::shellcheck_file("image-check-db.sh");
    common::shellcheck_file("image-check-db-upgrade.sh");
}

#[test]
fn the_image_is_a_parameter_and_the_text_stays_the_same() {
    let a = render_server(SERVER, "");
    let b = render_server("registry.example.com/other/server:9.9.9", "");
    assert_eq!(a.text, b.text);
    assert_ne!(a.env, b.env);
    assert_eq!(
        render_database(DB, "").text,
        render_database("db:other", "").text
    );
    assert_eq!(
        render_database_upgrade(UPGRADE, "").text,
        render_database_upgrade("upgrade:other", "").text
    );
}

/// The setup library of server-image 5.2.9 (`containers/server-image/root/usr/lib/
/// entrypoint-lib.sh@18abb310`), in the part the check reads.
const ENTRYPOINT_LIB_5_2_9: &str = "MANAGER_COMPLETE_LEGACY=\"/root/.MANAGER_SETUP_COMPLETE\"\nMANAGER_COMPLETE=\"/var/spacewalk/.MANAGER_SETUP_COMPLETE\"\n";

/// A server image as 5.2.9 and later ship it.
fn server_image() -> Image {
    let image = Image::new();
    image.file("/usr/lib/entrypoint-lib.sh", ENTRYPOINT_LIB_5_2_9);
    image.file("/usr/bin/startup-check.sh", "");
    image.file(
        "/docker-entrypoint-init.d/00-mgrSetup.sh",
        ". /usr/lib/entrypoint-lib.sh\ncheck_current_installation\n",
    );
    image
}

#[test]
fn the_first_supported_server_image_is_the_one_with_the_startup_check() {
    assert_eq!(FIRST_SERVER_IMAGE, "5.2.9");
    // The marker the check looks for is the one the fix-up Job writes.
    assert!(ENTRYPOINT_LIB_5_2_9.contains(SETUP_MARKER));
}

#[test]
fn server_images_5_2_7_and_5_2_8_are_refused_with_the_release_to_use() {
    // Their setup (`docker-entrypoint-init.d/00-mgrSetup.sh@927a5945`) keeps its marker in /root
    // and sources no library; they have no startup check.
    let image = Image::new();
    image.file(
        "/docker-entrypoint-init.d/00-mgrSetup.sh",
        "MANAGER_COMPLETE=\"/root/.MANAGER_SETUP_COMPLETE\"\n",
    );
    let tag = "registry.example.com/uyuni/server:5.2.8";
    let out = image.run(&render_server(tag, &image.root()), None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "UNSUPPORTED: server image {tag} lacks /usr/lib/entrypoint-lib.sh /usr/bin/startup-check.sh"
        )),
        "{text}"
    );
    assert!(text.contains("server images before 5.2.9"), "{text}");
    assert!(
        text.contains("Use a server image of 5.2.9 or later"),
        "{text}"
    );
    assert!(!text.contains("5.2.7 or later"), "{text}");
}

#[test]
fn a_server_image_that_reads_its_marker_elsewhere_is_refused() {
    let image = server_image();
    image.file(
        "/usr/lib/entrypoint-lib.sh",
        "MANAGER_COMPLETE=\"/root/.MANAGER_SETUP_COMPLETE\"\n",
    );
    let out = image.run(&render_server(SERVER, &image.root()), None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "does not read its setup marker at {SETUP_MARKER} (/usr/lib/entrypoint-lib.sh does not name it)"
        )),
        "{text}"
    );
}

#[test]
fn a_server_image_that_sets_itself_up_is_supported() {
    let image = server_image();
    let out = image.run(&render_server(SERVER, &image.root()), None);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("SUPPORTED: server image {SERVER}")),
        "{text}"
    );
    assert!(text.contains("SUSE Linux Enterprise Server 16.0"), "{text}");
}

#[test]
fn a_server_image_without_setup_inside_is_refused_with_what_it_lacks() {
    let image = Image::new();
    image.file("/usr/bin/startup-check.sh", "");
    let out = image.run(&render_server(SERVER, &image.root()), None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("UNSUPPORTED: server image"), "{text}");
    assert!(text.contains("/usr/lib/entrypoint-lib.sh"), "{text}");
    assert!(!text.contains("lacks /usr/bin/startup-check.sh"), "{text}");
    assert!(text.contains("--image/--tag"), "{text}");
}

/// `15-setup-trust-store.sh` as uyuni-project/uyuni stores it at `@2ca715b5` (PR #12133, open),
/// in the part the check reads: under `set -eo pipefail`, a `cp` onto the Salt file root.
const TRUST_STORE_2CA715B5: &str = "set -eo pipefail\nif [ -f \"${MANAGER_COMPLETE}\" ]; then\n    if [ -f \"/etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT\" ]; then\n        cp /etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT \\\n           /usr/share/susemanager/salt/certs/RHN-ORG-TRUSTED-SSL-CERT\n    fi\n    /usr/sbin/update-ca-certificates\nfi\n";

#[test]
fn a_server_image_that_copies_the_ca_into_the_salt_file_root_is_reported_so() {
    assert!(TRUST_STORE_2CA715B5.contains(SALT_CA_FILE));
    let image = server_image();
    image.file(
        "/docker-entrypoint-init.d/15-setup-trust-store.sh",
        TRUST_STORE_2CA715B5,
    );
    let out = image.run(&render_server(SERVER, &image.root()), None);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("ca_copy=salt-file-root"), "{text}");
    assert!(
        text.contains("/docker-entrypoint-init.d/15-setup-trust-store.sh copies the CA"),
        "{text}"
    );
    // The verdict stays the last line.
    assert!(
        text.trim_end()
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("SUPPORTED: ")),
        "{text}"
    );
    let (report, raw) = image.report();
    assert_eq!(report.ca_copy, Some(CaCopy::SaltFileRoot), "{raw}");
}

#[test]
fn a_server_image_whose_start_scripts_leave_the_salt_file_root_alone_is_reported_so() {
    // 5.2.9's start scripts as the check sees them: none names the Salt file root's CA.
    let image = server_image();
    image.file(
        "/docker-entrypoint-init.d/20-setup-gpg-dir.sh",
        "mkdir -p /var/lib/spacewalk/gpgdir\n",
    );
    let out = image.run(&render_server(SERVER, &image.root()), None);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("ca_copy=none"), "{text}");
    let (report, raw) = image.report();
    assert_eq!(report.ca_copy, Some(CaCopy::None), "{raw}");
}

#[test]
fn the_server_and_database_check_jobs_report_and_their_reports_are_copied_onto_them() {
    let params = common::params();
    let jobs = uyuni_core::builders::image_check::jobs(&params);
    let produces: Vec<Option<String>> = jobs
        .iter()
        .map(|j| {
            j.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(uyuni_core::labels::PRODUCES_ANNOTATION))
                .cloned()
        })
        .collect();
    assert_eq!(
        produces,
        [
            Some(uyuni_core::catalogue::products::INSPECTION.to_owned()),
            Some(uyuni_core::catalogue::products::INSPECTION.to_owned()),
            None
        ]
    );
}

#[test]
fn a_refused_server_image_reports_nothing() {
    let image = Image::new();
    let out = image.run(&render_server(SERVER, &image.root()), None);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let (report, raw) = image.report();
    assert_eq!(report.ca_copy, None, "{raw}");
}

fn database_image() -> Image {
    let image = Image::new();
    image.file("/uyuni-entrypoint.sh", "");
    image.dir("/docker-entrypoint-upgdb.d");
    image.dir("/dev");
    image
}

/// A new server takes the major its database image reports, 18 or newer; a migration, whose
/// PostgreSQL upgrade goes to 18, only 18. Either reports the major as an inspection does.
#[test]
fn a_newer_postgresql_is_supported_for_a_new_server_and_refused_for_a_migration() {
    let image = database_image();
    let out = image.run(&render_database_for_install(DB, &image.root()), Some("19"));
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert_eq!(image.report().0.pg_major, Some(19), "{text}");

    let out = image.run(&render_database(DB, &image.root()), Some("19"));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("the migration targets PostgreSQL 18"),
        "{text}"
    );

    let out = image.run(&render_database_for_install(DB, &image.root()), Some("16"));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("PostgreSQL 18 or newer"), "{text}");

    let out = image.run(&render_database(DB, &image.root()), Some("18"));
    assert!(out.status.success(), "{}", stdout(&out));
    assert_eq!(image.report().0.pg_major, Some(18));
}

#[test]
fn a_postgresql_18_database_image_with_its_hooks_is_supported() {
    let image = database_image();
    let out = image.run(&render_database(DB, &image.root()), Some("18"));
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("runs PostgreSQL 18"), "{text}");
}

#[test]
fn without_pg_major_the_postgres_binary_tells_the_version() {
    let image = database_image();
    image.postgres_binary("18.1");
    let out = image.run(&render_database(DB, &image.root()), None);
    assert!(out.status.success(), "{}", stdout(&out));

    image.postgres_binary("16.9");
    let out = image.run(&render_database(DB, &image.root()), None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("runs PostgreSQL 16"), "{text}");
}

#[test]
fn a_postgresql_16_database_image_is_refused() {
    let image = database_image();
    let out = image.run(&render_database(DB, &image.root()), Some("16"));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("UNSUPPORTED: database image") && text.contains("runs PostgreSQL 16"),
        "{text}"
    );
    assert!(text.contains("--db-image/--pgsql-tag"), "{text}");
}

#[test]
fn a_database_image_without_version_or_hooks_is_refused() {
    let image = Image::new();
    let out = image.run(&render_database(DB, &image.root()), None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("tells no PostgreSQL version"), "{text}");

    let out = image.run(&render_database(DB, &image.root()), Some("18"));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("/uyuni-entrypoint.sh") && text.contains("/docker-entrypoint-upgdb.d"),
        "{text}"
    );
}

#[test]
fn the_upgrade_image_needs_pg_upgrade_of_the_target_and_a_supported_source() {
    let image = Image::new();
    let out = image.run(&render_database_upgrade(UPGRADE, &image.root()), None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("/usr/lib/postgresql18/bin/pg_upgrade"),
        "{text}"
    );

    image.file("/usr/lib/postgresql18/bin/pg_upgrade", "");
    let out = image.run(&render_database_upgrade(UPGRADE, &image.root()), None);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("none of PostgreSQL 14 or 16"), "{text}");

    image.file("/usr/lib/postgresql16/bin/postgres", "");
    let out = image.run(&render_database_upgrade(UPGRADE, &image.root()), None);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("upgrades PostgreSQL 16 to 18"), "{text}");
}

/// An upgrade's check of the same image between its two majors: `pg_upgrade` of the new one and
/// the binaries of the one the database runs; another source major does not do.
#[test]
fn the_upgrade_image_is_checked_between_an_upgrades_majors() {
    use uyuni_core::scripts::image_check::render_database_upgrade_between;
    let image = Image::new();
    image.file("/usr/lib/postgresql19/bin/pg_upgrade", "");
    image.file("/usr/lib/postgresql16/bin/postgres", "");
    let out = image.run(
        &render_database_upgrade_between(UPGRADE, 18, 19, &image.root()),
        None,
    );
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("none of PostgreSQL 18"), "{text}");
    image.file("/usr/lib/postgresql18/bin/postgres", "");
    let out = image.run(
        &render_database_upgrade_between(UPGRADE, 18, 19, &image.root()),
        None,
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("upgrades PostgreSQL 18 to 19"), "{text}");
}
