//! The upgrade's scripts, run under bash on temporary directories standing in for the image and
//! the volumes: the image inspection's report, and the database copy (backup and restore).

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use proptest::prelude::*;
use uyuni_core::inspect::{CaCopy, Inspection, Product};
use uyuni_core::scripts::JobScript;
use uyuni_core::scripts::database::{BACKUP_MARKER, Copy, render_copy};
use uyuni_core::scripts::image_inspect::{TERMINATION_LOG, render, render_server};

fn write(root: &Path, path: &str, content: &str) {
    let p = root.join(path.trim_start_matches('/'));
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(&p, content).expect("write");
}

fn run(script: &JobScript, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(&script.text)
        .envs(script.env.iter().map(|(k, v)| (*k, v)))
        .env("PATH", "/usr/bin:/bin")
        .env_remove("PG_MAJOR")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("bash runs")
}

fn inspect(files: &[(&str, &str)], env: &[(&str, &str)]) -> (Inspection, String) {
    inspect_with(render, files, env)
}

fn inspect_with(
    render: fn(&str, &str) -> JobScript,
    files: &[(&str, &str)],
    env: &[(&str, &str)],
) -> (Inspection, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "/etc/os-release", "NAME=\"SLES\"\n");
    write(root, TERMINATION_LOG, "");
    for (path, content) in files {
        write(root, path, content);
    }
    let out = run(
        &render(
            "registry.example.com/uyuni/server:x",
            &root.display().to_string(),
        ),
        env,
    );
    assert!(out.status.success(), "{out:?}");
    let report =
        fs::read_to_string(root.join(TERMINATION_LOG.trim_start_matches('/'))).expect("report");
    (Inspection::parse(&report), report)
}

#[test]
fn the_inspection_reports_the_release_file_of_each_product() {
    let (uyuni, _) = inspect(
        &[("/etc/uyuni-release", "Uyuni release 2025.10 (Fun)\n")],
        &[],
    );
    assert_eq!(uyuni.product, Some(Product::Uyuni));
    assert_eq!(uyuni.release.as_deref(), Some("2025.10"));
    assert_eq!(uyuni.pg_major, None);
    let (manager, _) = inspect(
        &[(
            "/etc/susemanager-release",
            "SUSE Multi-Linux Manager release 5.1 (5.1.0 Beta2)\n",
        )],
        &[],
    );
    assert_eq!(manager.product, Some(Product::SuseManager));
    assert_eq!(manager.release.as_deref(), Some("5.1.0"));
    let (db, report) = inspect(&[], &[("PG_MAJOR", "18")]);
    assert_eq!(db.pg_major, Some(18));
    assert_eq!(db.product, None);
    assert_eq!(report, "pg_major=18\n");
    // An image that tells nothing: an empty report, and the planner names what is missing.
    let (nothing, report) = inspect(&[], &[]);
    assert_eq!(nothing.release, None);
    assert_eq!(report, "");
}

/// A server image's inspection also tells which kind of server image it is, as the server
/// image check does (`ca_copy`): an upgrade's server Deployment mounts the CA into the Salt file
/// root by it. A database image's inspection does not say.
#[test]
fn the_inspection_of_a_server_image_reports_whether_it_copies_the_ca_into_the_salt_file_root() {
    let release = ("/etc/uyuni-release", "Uyuni release 2026.04 (Fun)\n");
    // `15-setup-trust-store.sh` as uyuni-project/uyuni stores it at `@4d6fcfde95d9`, in the
    // part the inspection reads.
    let trust_store = (
        "/docker-entrypoint-init.d/15-setup-trust-store.sh",
        "cp /etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT \\\n   /usr/share/susemanager/salt/certs/RHN-ORG-TRUSTED-SSL-CERT\n",
    );
    let other_start_script = (
        "/docker-entrypoint-init.d/20-setup-gpg-dir.sh",
        "mkdir -p /var/lib/spacewalk/gpgdir\n",
    );
    let (copying, report) = inspect_with(
        render_server,
        &[release, trust_store, other_start_script],
        &[],
    );
    assert_eq!(copying.ca_copy, Some(CaCopy::SaltFileRoot), "{report}");
    assert_eq!(copying.release.as_deref(), Some("2026.04"), "{report}");
    assert_eq!(
        report,
        "product=uyuni\nrelease=2026.04\nca_copy=salt-file-root\n"
    );
    let (not_copying, report) = inspect_with(render_server, &[release, other_start_script], &[]);
    assert_eq!(not_copying.ca_copy, Some(CaCopy::None), "{report}");
    let (database, report) = inspect_with(render, &[trust_store], &[("PG_MAJOR", "18")]);
    assert_eq!(database.ca_copy, None, "{report}");
    assert_eq!(report, "pg_major=18\n");
}

/// The inspection Jobs an upgrade runs, their scripts and environment taken from their specs
/// and run on an image that does not copy the CA: the server images' report their kind, the
/// database images' do not.
#[test]
fn the_server_images_inspection_jobs_report_their_kind() {
    use uyuni_core::builders::image_inspect::{Role, job};
    let params = crate::common::params();
    for role in Role::ALL {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(root, TERMINATION_LOG, "");
        write(root, "/etc/uyuni-release", "Uyuni release 2026.04 (Fun)\n");
        write(
            root,
            "/docker-entrypoint-init.d/20-setup-gpg-dir.sh",
            "mkdir -p /var/lib/spacewalk/gpgdir\n",
        );
        let job = job(&params, role, "registry.example.com/uyuni/server:2026.04");
        let container = &job
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod")
            .containers[0];
        let command = container.command.clone().expect("command");
        let mut cmd = Command::new(&command[0]);
        cmd.args(&command[1..])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LOCAL_ROOT", root)
            .stdin(Stdio::null());
        for var in container.env.iter().flatten() {
            cmd.env(&var.name, var.value.clone().unwrap_or_default());
        }
        let out = cmd.output().expect("bash runs");
        assert!(out.status.success(), "{role:?}: {out:?}");
        let report =
            fs::read_to_string(root.join(TERMINATION_LOG.trim_start_matches('/'))).expect("report");
        let expected = role.is_server().then_some(CaCopy::None);
        assert_eq!(
            Inspection::parse(&report).ca_copy,
            expected,
            "{role:?}: {report}"
        );
    }
}

proptest! {
    #[test]
    fn reading_a_report_never_panics(text in ".{0,300}") {
        let report = Inspection::parse(&text);
        prop_assert!(!report.placeholder || text.contains("placeholder=true"));
        prop_assert!(report.ca_copy.is_none() || text.contains("ca_copy"));
    }

    /// A kind among any other lines (a log, another tool's keys) is read as written; an
    /// unknown value is no kind.
    #[test]
    fn a_server_images_kind_is_read_among_any_lines(
        before in "[^\n]{0,60}",
        after in "[^\n]{0,60}",
        value in prop_oneof![
            Just("none".to_owned()),
            Just("salt-file-root".to_owned()),
            "[a-z-]{0,16}",
        ],
    ) {
        prop_assume!(!before.contains("ca_copy") && !after.contains("ca_copy"));
        let report = Inspection::parse(&format!("{before}\nca_copy= {value} \n{after}"));
        let expected = match value.as_str() {
            "none" => Some(CaCopy::None),
            "salt-file-root" => Some(CaCopy::SaltFileRoot),
            _ => None,
        };
        prop_assert_eq!(report.ca_copy, expected);
    }
}

/// A database directory with `files`.
fn database(root: &Path, dir: &str, files: &[(&str, &str)]) {
    fs::create_dir_all(root.join(dir)).expect("mkdir");
    for (path, content) in files {
        write(&root.join(dir), path, content);
    }
}

fn copy(root: &Path, mode: Copy) -> Output {
    run(
        &render_copy(
            mode,
            "server:2025.10 and server-postgresql:2025.10",
            &root.display().to_string(),
        ),
        &[],
    )
}

#[test]
fn the_backup_copies_the_database_and_marks_it_last_and_the_restore_needs_the_mark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    database(
        root,
        "migration/source",
        &[
            ("PG_VERSION", "18\n"),
            ("base/1/1259", "table"),
            ("postmaster.pid", "42"),
        ],
    );
    database(
        root,
        "migration/target",
        &[("stale", "from an interrupted copy")],
    );
    let out = copy(root, Copy::Backup);
    assert!(out.status.success(), "{out:?}");
    let target = root.join("migration/target");
    assert_eq!(
        fs::read_to_string(target.join("base/1/1259")).expect("copied"),
        "table"
    );
    assert!(
        !target.join("stale").exists(),
        "the target is emptied first"
    );
    assert!(!target.join("postmaster.pid").exists());
    assert!(
        fs::read_to_string(target.join(BACKUP_MARKER))
            .expect("marked")
            .contains("2025.10")
    );
    assert!(
        root.join("migration/source/postmaster.pid").exists(),
        "the source is only read"
    );

    // A restore from a volume without the mark (an interrupted backup) changes nothing.
    let dir = tempfile::tempdir().expect("tempdir");
    let other = dir.path();
    database(other, "migration/source", &[("PG_VERSION", "18\n")]);
    database(
        other,
        "migration/target",
        &[("PG_VERSION", "18\n"), ("base/1/1259", "newer")],
    );
    let out = copy(other, Copy::Restore);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(BACKUP_MARKER),
        "{out:?}"
    );
    assert_eq!(
        fs::read_to_string(other.join("migration/target/base/1/1259")).expect("kept"),
        "newer"
    );

    // With the mark, the restore puts the backup back, without the mark.
    fs::rename(root.join("migration/target"), other.join("backup")).expect("move");
    fs::remove_dir_all(other.join("migration/source")).expect("rm");
    fs::rename(other.join("backup"), other.join("migration/source")).expect("move");
    let out = copy(other, Copy::Restore);
    assert!(out.status.success(), "{out:?}");
    let restored = other.join("migration/target");
    assert_eq!(
        fs::read_to_string(restored.join("base/1/1259")).expect("restored"),
        "table"
    );
    assert!(!restored.join(BACKUP_MARKER).exists());
}

#[test]
fn the_copy_refuses_a_source_without_a_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    database(root, "migration/source", &[]);
    database(root, "migration/target", &[("keep", "x")]);
    let out = copy(root, Copy::Backup);
    assert!(!out.status.success());
    assert!(root.join("migration/target/keep").exists());
}
