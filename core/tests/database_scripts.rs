//! Tests of the database Jobs' scripts: ShellCheck, and runs under bash against stub commands on
//! PATH and a temporary directory standing in for the volumes, checking what they call, what
//! they write, and how they fail. The password re-hash also runs against a real PostgreSQL 18
//! (`real_postgres::servers`): only a server shows that psql's quoting does its work.

use crate::common;
use crate::real_postgres::servers;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use uyuni_core::scripts::JobScript;
use uyuni_core::scripts::database::{
    MIGRATION_SQL, SQL_CONNECT_ATTEMPTS, SQL_CONNECT_INTERVAL_SECONDS, SQL_CONNECT_TIMEOUT_SECONDS,
    render_fixup, render_migration_sql, render_passwords, render_upgrade,
};

/// Every stub appends its name and arguments to $STUB_LOG.
const LOGGING: &str = "printf '%s' \"$(basename \"$0\")\" >>\"$STUB_LOG\"; printf ' %s' \"$@\" >>\"$STUB_LOG\"; echo >>\"$STUB_LOG\"\n";

fn write_exe(path: &Path, body: &str) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, format!("#!/bin/bash\n{LOGGING}{body}")).expect("write stub");
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod");
}

struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let s = Sandbox {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        // Ownership changes need root; the stub records them instead.
        write_exe(&s.bin().join("chown"), "exit 0\n");
        // Dropping privileges is the image's business; the stub runs the command as is.
        write_exe(
            &s.bin().join("setpriv"),
            "while [ \"$1\" != -- ]; do shift; done; shift; exec \"$@\"\n",
        );
        s
    }
    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }
    fn bin(&self) -> PathBuf {
        self.dir.path().join("bin")
    }
    fn path(&self, p: &str) -> PathBuf {
        self.root().join(p.trim_start_matches('/'))
    }
    fn write(&self, p: &str, content: &str) {
        let path = self.path(p);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, content).expect("write");
    }
    fn read(&self, p: &str) -> String {
        fs::read_to_string(self.path(p)).unwrap_or_else(|e| panic!("{p}: {e}"))
    }
    fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("stub.log")).unwrap_or_default()
    }
    fn run(&self, script: &JobScript) -> Output {
        self.run_with(script, &[])
    }
    fn run_with(&self, script: &JobScript, env: &[(&str, &str)]) -> Output {
        let path = format!(
            "{}:{}",
            self.bin().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Command::new("bash")
            .arg("-c")
            .arg(&script.text)
            .envs(script.env.iter().map(|(k, v)| (*k, v)))
            .envs(env.iter().copied())
            .env("PATH", path)
            .env("STUB_LOG", self.dir.path().join("stub.log"))
            .env("TMPDIR", self.dir.path())
            .env_remove("LC_CTYPE")
            .stdin(Stdio::null())
            .output()
            .expect("bash runs")
    }
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn scripts_are_shellcheck_clean() {
    for file in [
        "db-fixup.sh",
        "db-upgrade.sh",
        "db-passwords.sh",
        "db-migration-sql.sh",
        "db-verify.sh",
    ] {
        common::shellcheck_file(file);
    }
}

#[test]
fn the_scripts_text_does_not_depend_on_their_parameters() {
    let (a, b) = (render_fixup(Some(14), ""), render_fixup(None, ""));
    assert_eq!(a.text, b.text);
    assert_ne!(a.env, b.env);
    let (a, b) = (render_upgrade(14, ""), render_upgrade(16, ""));
    assert_eq!(a.text, b.text);
    assert_ne!(a.env, b.env);
    // The tests' prefix is a parameter like the others.
    let (a, b) = (render_passwords(""), render_passwords("/tmp/root"));
    assert_eq!(a.text, b.text);
    assert!(b.env.contains(&("LOCAL_ROOT", "/tmp/root".to_owned())));
    assert!(!a.env.iter().any(|(k, _)| *k == "LOCAL_ROOT"));
}

#[test]
fn the_fixed_paths_of_the_scripts_are_the_shared_constants() {
    use uyuni_core::scripts::database::{
        FIXUP_SCRIPT, LEGACY_SETUP_MARKER, PGDATA, SETUP_MARKER, UPGRADE_SCRIPT, UPGRADE_SOURCE,
        UPGRADE_TARGET,
    };
    assert!(FIXUP_SCRIPT.contains(&format!("\nPGDATA=$ROOT{PGDATA}\n")));
    assert!(FIXUP_SCRIPT.contains(&format!("\nMARKER=$ROOT{SETUP_MARKER}\n")));
    assert!(FIXUP_SCRIPT.contains(&format!("\nLEGACY_MARKER=$ROOT{LEGACY_SETUP_MARKER}\n")));
    assert!(UPGRADE_SCRIPT.contains(&format!("\nSOURCE=$ROOT{UPGRADE_SOURCE}\n")));
    assert!(UPGRADE_SCRIPT.contains(&format!("\nTARGET=$ROOT{UPGRADE_TARGET}\n")));
}

// ---------------------------------------------------------------------------------------------
// Fix-up

/// A classic configuration with SSL off and the key somewhere the `db` pod does not have it.
const CLASSIC_PG_CONF: &str = "# classic\nlisten_addresses = 'localhost'\n#ssl = on\nssl = off\nssl_key_file = 'server.key'\nssl_ca_file = 'root.crt'\nmax_connections = 400\n";
const RHN_CONF: &str = "db_backend = postgresql\ndb_user = spacewalk\ndb_password = p@ss #1\ndb_host = localhost\ndb_port = 5433\nreport_db_host = localhost\nserver.no_ssl = 0\n";

fn fixup_sandbox(legacy_layout: bool) -> Sandbox {
    let s = Sandbox::new();
    let data = if legacy_layout {
        "/var/lib/pgsql/data/data"
    } else {
        "/var/lib/pgsql/data"
    };
    s.write(&format!("{data}/PG_VERSION"), "16\n");
    s.write(&format!("{data}/postgresql.conf"), CLASSIC_PG_CONF);
    s.write(&format!("{data}/base/1/1234"), "table data");
    s.write("/etc/rhn/rhn.conf", RHN_CONF);
    s.write("/root/.MANAGER_SETUP_COMPLETE", "");
    fs::create_dir_all(s.path("/var/spacewalk")).expect("mkdir");
    s
}

#[test]
fn fixup_flattens_fixes_the_configuration_and_moves_the_marker() {
    let s = fixup_sandbox(true);
    let script = render_fixup(Some(16), &s.root().display().to_string());
    let out = s.run(&script);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Flattening"), "{}", text(&out));
    assert_eq!(s.read("/var/lib/pgsql/data/PG_VERSION"), "16\n");
    assert_eq!(s.read("/var/lib/pgsql/data/base/1/1234"), "table data");
    assert!(!s.path("/var/lib/pgsql/data/data").exists());

    let pg = s.read("/var/lib/pgsql/data/postgresql.conf");
    assert!(pg.contains("listen_addresses = '*'\n"), "{pg}");
    // TLS for external report-database clients, with the files the db pod mounts from db-cert.
    assert!(
        pg.contains("\nssl = on\n") && !pg.contains("\nssl = off"),
        "{pg}"
    );
    assert!(
        pg.contains("ssl_cert_file = '/etc/pki/tls/certs/spacewalk.crt'\n"),
        "{pg}"
    );
    assert!(
        pg.contains("ssl_key_file = '/etc/pki/tls/private/pg-spacewalk.key'\n")
            && !pg.contains("server.key"),
        "{pg}"
    );
    // No client-certificate or revocation file the pod does not have.
    for key in ["ssl_ca_file", "ssl_crl_file", "ssl_crl_dir"] {
        assert!(pg.contains(&format!("\n{key} = ''\n")), "{key}: {pg}");
    }
    assert!(!pg.contains("root.crt"), "{pg}");
    assert!(pg.contains("#ssl = on\n"), "comments stay: {pg}");
    assert!(pg.contains("max_connections = 400"), "{pg}");

    let rhn = s.read("/etc/rhn/rhn.conf");
    for line in [
        "db_host = db\n",
        "db_port = 5432\n",
        "report_db_host = reportdb\n",
        "report_db_port = 5432\n",
        "db_ssl_enabled = 0\n",
        "report_db_ssl_enabled = 0\n",
        "server.no_ssl = 1\n",
        "db_password = p@ss #1\n",
    ] {
        assert!(rhn.contains(line), "{line:?} missing:\n{rhn}");
    }
    assert_eq!(
        rhn.lines().filter(|l| l.starts_with("db_host ")).count(),
        1,
        "{rhn}"
    );

    assert!(s.path("/var/spacewalk/.MANAGER_SETUP_COMPLETE").exists());
    assert!(!s.path("/root/.MANAGER_SETUP_COMPLETE").exists());
    assert!(
        s.log().contains(&format!(
            "chown -R 999:999 -- {}",
            s.path("/var/lib/pgsql/data").display()
        )),
        "{}",
        s.log()
    );

    // A second run changes nothing.
    let before = (
        s.read("/var/lib/pgsql/data/postgresql.conf"),
        s.read("/etc/rhn/rhn.conf"),
    );
    let again = s.run(&script);
    assert!(again.status.success(), "{}", text(&again));
    assert!(!text(&again).contains("Flattening"));
    assert_eq!(
        before,
        (
            s.read("/var/lib/pgsql/data/postgresql.conf"),
            s.read("/etc/rhn/rhn.conf"),
        )
    );
    assert!(text(&again).contains("The setup marker exists"));
}

#[test]
fn fixup_writes_the_marker_when_the_source_had_none() {
    let s = fixup_sandbox(false);
    fs::remove_file(s.path("/root/.MANAGER_SETUP_COMPLETE")).expect("rm");
    let out = s.run(&render_fixup(None, &s.root().display().to_string()));
    assert!(out.status.success(), "{}", text(&out));
    assert!(s.path("/var/spacewalk/.MANAGER_SETUP_COMPLETE").exists());
}

#[test]
fn fixup_fails_on_missing_or_unexpected_data() {
    let s = fixup_sandbox(false);
    // The Job gets the final sync's name from the planner (builders::database::SYNC_JOB_ENV).
    let out = s.run_with(
        &render_fixup(Some(14), &s.root().display().to_string()),
        &[("UYUNI_DATA_SYNC_JOB", "uyuni-data-sync-20261129180000")],
    );
    assert!(!out.status.success());
    assert!(
        text(&out).contains("PostgreSQL 16, the data sync reported 14"),
        "{}",
        text(&out)
    );
    // Retrying the fix-up meets the same data: the advice is the new sync that clears it.
    assert!(
        text(&out).contains("running again alone does not clear this: delete the final data-sync Job uyuni-data-sync-20261129180000"),
        "{}",
        text(&out)
    );

    let s = fixup_sandbox(false);
    fs::remove_file(s.path("/etc/rhn/rhn.conf")).expect("rm");
    let out = s.run(&render_fixup(None, &s.root().display().to_string()));
    assert!(!out.status.success());
    assert!(
        text(&out).contains("no /etc/rhn/rhn.conf")
            && text(&out).contains("delete the final data-sync Job (kubectl get jobs -l kubectl-uyuni.io/step=data-sync)"),
        "{}",
        text(&out)
    );

    let s = fixup_sandbox(false);
    fs::remove_file(s.path("/var/lib/pgsql/data/PG_VERSION")).expect("rm");
    let out = s.run(&render_fixup(Some(16), &s.root().display().to_string()));
    assert!(!out.status.success());
    assert!(text(&out).contains("no PG_VERSION"), "{}", text(&out));
    assert!(
        s.path("/root/.MANAGER_SETUP_COMPLETE").exists(),
        "nothing else is touched after a failure"
    );

    let s = fixup_sandbox(false);
    fs::remove_file(s.path("/etc/rhn/rhn.conf")).expect("rm");
    let out = s.run(&render_fixup(Some(16), &s.root().display().to_string()));
    assert!(!out.status.success());
    assert!(
        text(&out).contains("no /etc/rhn/rhn.conf"),
        "{}",
        text(&out)
    );
}

// ---------------------------------------------------------------------------------------------
// Upgrade

fn upgrade_sandbox(from: u32) -> Sandbox {
    let s = Sandbox::new();
    let source = "/migration/source";
    s.write(&format!("{source}/PG_VERSION"), &format!("{from}\n"));
    s.write(
        &format!("{source}/postgresql.conf"),
        "listen_addresses = '*'\n",
    );
    s.write(&format!("{source}/pg_hba.conf"), "local all all peer\n");
    s.write(
        &format!("{source}/postgresql.conf.d/x.conf"),
        "work_mem = 4MB\n",
    );
    s.write(&format!("{source}/base/1/1"), "old data");
    s.write("/migration/target/stale-from-an-earlier-attempt", "x");
    s.write(
        "/etc/sysconfig/postgresql",
        "POSTGRES_LANG=\"de_DE.UTF-8\"\n",
    );
    let old = s.path(&format!("/usr/lib/postgresql{from}/bin"));
    let new = s.path("/usr/lib/postgresql18/bin");
    write_exe(&old.join("postgres"), "exit 0\n");
    write_exe(
        &old.join("pg_controldata"),
        "echo 'Database cluster state:               shut down'\necho 'Data page checksum version:           0'\n",
    );
    // The image's locales (the machine's may lack them).
    write_exe(
        &s.bin().join("locale"),
        "printf '%s\\n' C C.utf8 POSIX de_DE.utf8 en_US.utf8\n",
    );
    write_exe(&new.join("postgres"), "exit 0\n");
    // The target's checksum state follows pg_checksums.
    write_exe(
        &new.join("pg_controldata"),
        "for d; do :; done\nif [ -f \"$d/checksums-enabled\" ]; then echo 'Data page checksum version:           1'; else echo 'Data page checksum version:           0'; fi\n",
    );
    write_exe(&new.join("pg_ctl"), "exit 0\n");
    write_exe(
        &new.join("vacuumdb"),
        "[ \"$1\" != --help ] || echo '      --missing-stats-only        only analyze relations with missing statistics'\n",
    );
    write_exe(
        &new.join("initdb"),
        "for a; do case $a in -D) next=1 ;; *) [ -n \"${next:-}\" ] && d=$a; next= ;; esac; done\n[ -z \"$(ls -A \"$d\")\" ] || { echo 'initdb: directory not empty' >&2; exit 1; }\necho 18 >\"$d/PG_VERSION\"\necho 'listen_addresses = localhost' >\"$d/postgresql.conf\"\n: >\"$d/checksums-enabled\"\n",
    );
    write_exe(
        &new.join("pg_checksums"),
        "for a; do case $a in -D) next=1 ;; *) [ -n \"${next:-}\" ] && d=$a; next= ;; esac; done\ncase $1 in --enable) : >\"$d/checksums-enabled\" ;; --disable) rm -f \"$d/checksums-enabled\" ;; esac\n",
    );
    write_exe(
        &new.join("pg_upgrade"),
        "for a; do case $a in --new-datadir=*) d=${a#*=} ;; esac; done\necho upgraded >\"$d/upgraded\"\n",
    );
    s
}

fn tree(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("readdir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push((
                    p.display().to_string(),
                    fs::read_to_string(&p).unwrap_or_default(),
                ));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn upgrade_empties_the_target_copies_and_never_writes_the_source() {
    let s = upgrade_sandbox(16);
    let source_before = tree(&s.path("/migration/source"));
    let out = s.run(&render_upgrade(16, &s.root().display().to_string()));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(tree(&s.path("/migration/source")), source_before);
    assert!(
        !s.path("/migration/target/stale-from-an-earlier-attempt")
            .exists()
    );
    assert_eq!(s.read("/migration/target/upgraded"), "upgraded\n");
    assert_eq!(s.read("/migration/target/PG_VERSION"), "18\n");
    assert_eq!(
        s.read("/migration/target/postgresql.conf"),
        "listen_addresses = '*'\n",
        "the source's configuration goes with the data"
    );
    assert_eq!(
        s.read("/migration/target/postgresql.conf.d/x.conf"),
        "work_mem = 4MB\n"
    );

    let log = s.log();
    let calls: Vec<&str> = log
        .lines()
        .map(|l| l.split(' ').next().unwrap_or_default())
        .filter(|c| !["chown", "setpriv", "locale"].contains(c))
        .collect();
    assert_eq!(
        calls,
        [
            "pg_controldata",
            "initdb",
            "pg_controldata",
            "pg_checksums",
            "pg_upgrade",
            "pg_controldata",
            "pg_checksums",
            "pg_controldata",
            "vacuumdb",
            "pg_ctl",
            "vacuumdb",
            "pg_ctl",
        ],
        "{log}"
    );
    assert!(log.contains("--locale=de_DE.UTF-8"), "{log}");
    assert!(log.contains("pg_checksums --disable"), "{log}");
    assert!(log.contains("pg_checksums --enable"), "{log}");
    assert!(
        log.contains("vacuumdb -h ")
            && log.contains(" --all --analyze-in-stages --missing-stats-only"),
        "{log}"
    );
    let upgrade = log
        .lines()
        .find(|l| l.starts_with("pg_upgrade"))
        .expect("pg_upgrade");
    // The fixed-up source says `ssl = on`; neither server of the upgrade has the certificate.
    for side in ["--old-options=", "--new-options="] {
        let options = upgrade
            .split(" --")
            .map(|a| format!("--{}", a.trim_start_matches("--")))
            .find(|a| a.starts_with(side))
            .unwrap_or_else(|| panic!("{side} missing: {upgrade}"));
        assert!(options.contains("-c ssl=off"), "{options}");
    }
    assert!(!upgrade.contains("--link"), "copy mode: {upgrade}");
    assert!(log.contains("setpriv --reuid=999"), "{log}");

    // Re-runnable: the target is emptied again.
    let again = s.run(&render_upgrade(16, &s.root().display().to_string()));
    assert!(again.status.success(), "{}", text(&again));
    assert_eq!(tree(&s.path("/migration/source")), source_before);
}

/// D1: a source with data checksums keeps them, and pg_checksums is not asked to enable them
/// again (it fails on a cluster that has them).
#[test]
fn upgrade_keeps_the_checksums_of_a_source_that_has_them() {
    let s = upgrade_sandbox(16);
    write_exe(
        &s.path("/usr/lib/postgresql16/bin/pg_controldata"),
        "echo 'Database cluster state:               shut down'\necho 'Data page checksum version:           1'\n",
    );
    let out = s.run(&render_upgrade(16, &s.root().display().to_string()));
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Data checksums: enabled, as in the source"),
        "{}",
        text(&out)
    );
    assert!(!s.log().contains("pg_checksums"), "{}", s.log());
    assert!(s.path("/migration/target/checksums-enabled").exists());
}

#[test]
fn upgrade_failures_name_the_cause_and_leave_the_source() {
    // The image lacks the old binaries.
    let s = upgrade_sandbox(14);
    let script = render_upgrade(14, &s.root().display().to_string());
    let out = s.run(&JobScript {
        text: script.text.replace("postgresql$FROM", "postgresql13"),
        ..script
    });
    assert!(!out.status.success());
    assert!(text(&out).contains("is missing"), "{}", text(&out));

    // The volume holds another major than the sync reported.
    let s = upgrade_sandbox(16);
    let out = s.run(&render_upgrade(14, &s.root().display().to_string()));
    assert!(!out.status.success());
    assert!(
        text(&out).contains("holds PostgreSQL 16, expected 14")
            && text(&out).contains("running again alone does not clear this"),
        "{}",
        text(&out)
    );
    assert!(
        s.path("/migration/target/stale-from-an-earlier-attempt")
            .exists(),
        "nothing is touched before the checks pass"
    );

    // pg_upgrade itself fails.
    let s = upgrade_sandbox(16);
    let source_before = tree(&s.path("/migration/source"));
    write_exe(
        &s.path("/usr/lib/postgresql18/bin/pg_upgrade"),
        "echo 'There seems to be a postmaster servicing the old cluster.' >&2; exit 1\n",
    );
    let out = s.run(&render_upgrade(16, &s.root().display().to_string()));
    assert!(!out.status.success());
    assert!(
        text(&out).contains("postmaster servicing"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("complete"), "{}", text(&out));
    assert_eq!(tree(&s.path("/migration/source")), source_before);
}

#[test]
fn upgrade_defaults_the_locale() {
    let s = upgrade_sandbox(14);
    fs::remove_file(s.path("/etc/sysconfig/postgresql")).expect("rm");
    let out = s.run(&render_upgrade(14, &s.root().display().to_string()));
    assert!(out.status.success(), "{}", text(&out));
    assert!(s.log().contains("--locale=en_US.UTF-8"), "{}", s.log());
}

// ---------------------------------------------------------------------------------------------
// Password re-hash

const DB_PASSWORD: &str = "s3cret pass#1 'quoted'";
const REPORT_PASSWORD: &str = "another one with spaces";

/// The credentials as the Job's `secretKeyRef` environment carries them.
fn credentials() -> [(&'static str, &'static str); 4] {
    [
        ("MANAGER_USER", "spacewalk"),
        ("MANAGER_PASS", DB_PASSWORD),
        ("REPORT_DB_USER", "pythia_susemanager"),
        ("REPORT_DB_PASS", REPORT_PASSWORD),
    ]
}

/// Upgraded data, and stubs of PostgreSQL: `pg_ctl` keeps a pid file while "running"; `psql`
/// answers from a directory with a file per role holding its stored password, changes it on
/// ALTER ROLE, and records the password it received (through its environment) per role.
struct PgSandbox {
    s: Sandbox,
}

impl PgSandbox {
    fn new(roles: &[(&str, &str)]) -> PgSandbox {
        let s = Sandbox::new();
        s.write("/var/lib/pgsql/data/PG_VERSION", "18\n");
        s.write("/var/lib/pgsql/data/postgresql.conf", "ssl = on\n");
        fs::create_dir_all(s.dir.path().join("received")).expect("mkdir");
        let p = PgSandbox { s };
        for (role, stored) in roles {
            p.set_role(role, stored);
        }
        p.pg_ctl("");
        p.psql("");
        p
    }
    fn roles(&self) -> PathBuf {
        self.s.dir.path().join("roles")
    }
    fn set_role(&self, role: &str, stored: &str) {
        fs::create_dir_all(self.roles()).expect("mkdir");
        fs::write(self.roles().join(role), stored).expect("write");
    }
    fn stored(&self, role: &str) -> String {
        fs::read_to_string(self.roles().join(role)).expect("role")
    }
    fn received(&self, role: &str) -> Option<String> {
        fs::read_to_string(self.s.dir.path().join("received").join(role)).ok()
    }
    fn pid_file(&self) -> PathBuf {
        self.s.path("/var/lib/pgsql/data/postmaster.pid")
    }
    /// `on_start` runs first when the server is started.
    fn pg_ctl(&self, on_start: &str) {
        write_exe(
            &self.s.bin().join("pg_ctl"),
            &format!(
                r#"action=$1; shift
while [ $# -gt 0 ]; do case $1 in -D) d=$2; shift 2 ;; -l) log=$2; shift 2 ;; *) shift ;; esac; done
case $action in
  start) {on_start}
    echo 4242 >"$d/postmaster.pid"; echo 'LOG:  database system is ready to accept connections' >>"$log" ;;
  status) [ -f "$d/postmaster.pid" ] || exit 3 ;;
  stop) [ -f "$d/postmaster.pid" ] || exit 1; rm -f -- "$d/postmaster.pid" ;;
esac
"#
            ),
        );
    }
    /// `on_alter` runs first on ALTER ROLE.
    fn psql(&self, on_alter: &str) {
        write_exe(
            &self.s.bin().join("psql"),
            &format!(
                r#"sql=$(cat)
[ -f {pid} ] || {{ echo 'psql: error: connection to server failed: No such file or directory' >&2; exit 2; }}
roles={roles}
if [[ $sql == *'ALTER ROLE'* ]]; then
  {on_alter}
  [[ $sql == *"SET password_encryption = 'scram-sha-256'"* && $sql == *'\getenv role_password ROLE_PASSWORD'* ]] || {{ echo 'unexpected statement' >&2; exit 3; }}
  [ -f "$roles/$ROLE_NAME" ] || {{ echo "ERROR:  role \"$ROLE_NAME\" does not exist" >&2; exit 1; }}
  printf 'SCRAM-SHA-256$4096:c2FsdA==$stored:server' >"$roles/$ROLE_NAME"
  printf '%s' "$ROLE_PASSWORD" >{received}/"$ROLE_NAME"
else
  [ -f "$roles/$ROLE_NAME" ] || exit 0
  v=$(cat "$roles/$ROLE_NAME")
  case $v in '') echo none ;; md5*) echo md5 ;; SCRAM-SHA-256\$*) echo scram ;; *) echo other ;; esac
fi
"#,
                pid = self.pid_file().display(),
                roles = self.roles().display(),
                received = self.s.dir.path().join("received").display(),
            ),
        );
    }
    fn run(&self) -> Output {
        self.s.run_with(
            &render_passwords(&self.s.root().display().to_string()),
            &credentials(),
        )
    }
    /// Neither password in any stub's arguments nor in the Job's output.
    fn assert_no_password(&self, out: &Output) {
        for password in [DB_PASSWORD, REPORT_PASSWORD] {
            assert!(!self.s.log().contains(password), "argv: {}", self.s.log());
            assert!(!text(out).contains(password), "{}", text(out));
        }
    }
}

const MD5: &str = "md5a3556571e93b0d20722ba62be61e8c2d";
const SCRAM: &str = "SCRAM-SHA-256$4096:b2xk$old:old";

#[test]
fn passwords_rehashes_md5_roles_and_leaves_scram_ones() {
    let p = PgSandbox::new(&[("spacewalk", MD5), ("pythia_susemanager", SCRAM)]);
    let out = p.run();
    assert!(out.status.success(), "{}", text(&out));
    assert!(p.stored("spacewalk").starts_with("SCRAM-SHA-256$"));
    assert_eq!(
        p.received("spacewalk").as_deref(),
        Some(DB_PASSWORD),
        "the migrated password, exactly, through psql's environment"
    );
    assert_eq!(p.stored("pythia_susemanager"), SCRAM, "left alone");
    assert_eq!(p.received("pythia_susemanager"), None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Re-hashed the password of role spacewalk: md5 to scram-sha-256"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Role pythia_susemanager already has a scram-sha-256 password"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Re-hashed to scram-sha-256: spacewalk\n"),
        "{stdout}"
    );
    assert!(!p.pid_file().exists(), "the server is stopped");
    p.assert_no_password(&out);

    let log = p.s.log();
    let start = log
        .lines()
        .find(|l| l.starts_with("pg_ctl start"))
        .expect("started");
    for option in [
        "-c listen_addresses=''",
        "-c ssl=off",
        "-c hba_file='",
        "-c unix_socket_directories='",
        "-c shared_preload_libraries=''",
    ] {
        assert!(start.contains(option), "{option} missing: {start}");
    }
    let calls: Vec<&str> = log
        .lines()
        .map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .map(|c| match c.as_str() {
            c if c.starts_with("psql") => "psql",
            "pg_ctl start" => "pg_ctl start",
            "pg_ctl stop" => "pg_ctl stop",
            _ => "other",
        })
        .filter(|c| *c != "other")
        .collect();
    assert_eq!(
        calls,
        [
            "pg_ctl start",
            "psql",
            "psql",
            "psql",
            "psql",
            "pg_ctl stop"
        ],
        "query, alter, check for the md5 role; query for the scram one:\n{log}"
    );
    assert!(
        log.lines()
            .filter(|l| l.starts_with("psql"))
            .all(|l| l.contains(" -h ") && l.contains(" -U postgres ")),
        "{log}"
    );

    // Again: nothing left to re-hash.
    let again = p.run();
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("nothing re-hashed"),
        "{}",
        text(&again)
    );
    assert!(!p.pid_file().exists());
}

#[test]
fn passwords_stop_the_server_when_its_start_fails() {
    let p = PgSandbox::new(&[("spacewalk", MD5), ("pythia_susemanager", MD5)]);
    // The postmaster came up, but not in time: pg_ctl -w gives up.
    p.pg_ctl(
        "echo 4242 >\"$d/postmaster.pid\"; echo 'FATAL:  could not map anonymous shared memory' >>\"$log\"; echo 'pg_ctl: server did not start in time' >&2; exit 1",
    );
    let out = p.run();
    assert!(!out.status.success(), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did not start"), "{err}");
    assert!(
        err.contains("could not map anonymous shared memory"),
        "its log: {err}"
    );
    assert!(!p.pid_file().exists(), "left running:\n{}", p.s.log());
    assert!(p.s.log().contains("pg_ctl stop"), "{}", p.s.log());
    assert_eq!(p.stored("spacewalk"), MD5, "nothing changed");
    p.assert_no_password(&out);

    // A start that fails without a server: nothing to stop, the same failure.
    let p = PgSandbox::new(&[("spacewalk", MD5), ("pythia_susemanager", MD5)]);
    p.pg_ctl("echo 'pg_ctl: could not start server' >&2; exit 1");
    let out = p.run();
    assert!(!out.status.success());
    assert!(text(&out).contains("did not start"), "{}", text(&out));
    assert!(!p.s.log().contains("pg_ctl stop"), "{}", p.s.log());
}

#[test]
fn passwords_fail_and_stop_the_server_on_a_missing_role_or_a_failed_alter() {
    // The report role is not in the data: the Secret and the data do not match.
    let p = PgSandbox::new(&[("spacewalk", SCRAM)]);
    let out = p.run();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(
            "role pythia_susemanager (the username of Secret reportdb-credentials) does not exist"
        ) && text(&out).contains("running again alone does not clear this"),
        "{}",
        text(&out)
    );
    assert!(!p.pid_file().exists(), "left running");
    assert!(!text(&out).contains("DONE"));

    let p = PgSandbox::new(&[("spacewalk", MD5), ("pythia_susemanager", MD5)]);
    p.psql("echo 'ERROR:  permission denied' >&2; exit 1");
    let out = p.run();
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("ALTER ROLE failed for role spacewalk"),
        "{}",
        text(&out)
    );
    assert!(!p.pid_file().exists(), "left running");
    assert_eq!(p.stored("spacewalk"), MD5);
    p.assert_no_password(&out);
}

#[test]
fn passwords_never_start_postgresql_on_data_that_was_not_upgraded() {
    let p = PgSandbox::new(&[("spacewalk", MD5), ("pythia_susemanager", MD5)]);
    p.s.write("/var/lib/pgsql/data/PG_VERSION", "16\n");
    let out = p.run();
    assert!(!out.status.success());
    // This Job runs after the fix-up and the upgrade succeeded, which a re-run does not
    // repeat: the advice is the new final sync that does.
    assert!(
        text(&out).contains("holds PostgreSQL 16, not 18")
            && text(&out).contains("running again alone does not clear this"),
        "{}",
        text(&out)
    );
    assert!(!p.s.log().contains("pg_ctl"), "{}", p.s.log());

    // A credential Secret without its password.
    let p = PgSandbox::new(&[("spacewalk", MD5), ("pythia_susemanager", MD5)]);
    let mut env = credentials();
    env[3].1 = "";
    let out =
        p.s.run_with(&render_passwords(&p.s.root().display().to_string()), &env);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("REPORT_DB_PASS is empty: Secret reportdb-credentials"),
        "{}",
        text(&out)
    );
    assert!(
        !p.s.log().contains("pg_ctl"),
        "checked before the start: {}",
        p.s.log()
    );
}

// ---------------------------------------------------------------------------------------------
// Migration SQL

#[test]
fn migration_sql_feeds_spacewalk_sql_and_fails_with_it() {
    let s = Sandbox::new();
    s.write("/etc/rhn/rhn.conf", RHN_CONF);
    let received = s.dir.path().join("sql.txt");
    write_exe(
        &s.bin().join("spacewalk-sql"),
        &format!("cat >{}\n", received.display()),
    );
    let script = render_migration_sql(&s.root().display().to_string());
    let out = s.run(&script);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(fs::read_to_string(&received).expect("sql"), MIGRATION_SQL);
    assert!(
        s.log().contains("spacewalk-sql --select-mode -"),
        "{}",
        s.log()
    );
    assert!(MIGRATION_SQL.contains("ON_ERROR_STOP"));
    assert!(MIGRATION_SQL.contains("/srv/www/distributions/"));
    assert!(MIGRATION_SQL.contains("update-system-overview-bunch"));

    // An error that is not about reaching the database fails at once, with psql's message.
    write_exe(&s.bin().join("sleep"), "exit 0\n");
    write_exe(
        &s.bin().join("spacewalk-sql"),
        "cat >/dev/null; echo 'psql: error: connection to server at \"db\" (10.43.0.10), port 5432 failed: FATAL:  password authentication failed for user \"spacewalk\"' >&2; exit 2\n",
    );
    let out = s.run(&script);
    assert!(!out.status.success());
    assert!(!text(&out).contains("DONE"), "{}", text(&out));
    assert!(
        text(&out).contains("password authentication failed")
            && text(&out).contains("the migration SQL failed (spacewalk-sql exit code 2"),
        "{}",
        text(&out)
    );
    assert!(!s.log().contains("sleep"), "not retried: {}", s.log());

    let s = Sandbox::new();
    let out = s.run(&render_migration_sql(&s.root().display().to_string()));
    assert!(!out.status.success());
    assert!(
        text(&out).contains("no /etc/rhn/rhn.conf"),
        "{}",
        text(&out)
    );
}

/// libpq's message for a TCP connection the db Service's pod refuses.
const REFUSED: &str = "psql: error: connection to server at \"db\" (10.43.0.10), port 5432 failed: Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?";
/// PostgreSQL's answer while it starts (the image's hooks may restart it).
const STARTING_UP: &str = "psql: error: connection to server at \"db\" (10.43.0.10), port 5432 failed: FATAL:  the database system is starting up";

/// A sandbox for the migration SQL: `spacewalk-sql` hands its input to `psql`, as the real one
/// does; `psql` refuses the connection `refusals` times (`None`: always), alternating libpq's
/// two messages, then takes the SQL; `sleep` returns at once and is logged.
fn sql_sandbox(refusals: Option<u32>) -> Sandbox {
    let s = Sandbox::new();
    s.write("/etc/rhn/rhn.conf", RHN_CONF);
    write_exe(&s.bin().join("sleep"), "exit 0\n");
    write_exe(
        &s.bin().join("spacewalk-sql"),
        "exec psql -h db -p 5432 -v ON_ERROR_STOP=1\n",
    );
    let state = s.dir.path();
    let limit = refusals.map_or("-1".to_owned(), |n| n.to_string());
    write_exe(
        &s.bin().join("psql"),
        &format!(
            r#"n=$(cat {count} 2>/dev/null || echo 0)
echo $((n + 1)) >{count}
echo "PGCONNECT_TIMEOUT=${{PGCONNECT_TIMEOUT-unset}}" >>{env}
if [ {limit} -lt 0 ] || [ "$n" -lt {limit} ]; then
  cat >/dev/null
  if [ $((n % 2)) -eq 0 ]; then printf '%s\n' {refused} >&2; else printf '%s\n' {starting} >&2; fi
  exit 2
fi
cat >{received}
echo 'UPDATE 1'
"#,
            count = state.join("psql.count").display(),
            env = state.join("psql.env").display(),
            received = state.join("sql.txt").display(),
            refused = shell_quote(REFUSED),
            starting = shell_quote(STARTING_UP),
        ),
    );
    s
}

fn shell_quote(s: &str) -> String {
    uyuni_core::scripts::data_sync::shell_quote(s)
}

fn count_lines(log: &str, prefix: &str) -> usize {
    log.lines().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn migration_sql_retries_a_refused_connection_until_the_database_takes_it() {
    let s = sql_sandbox(Some(3));
    let out = s.run(&render_migration_sql(&s.root().display().to_string()));
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("DONE"), "{t}");
    // psql's own output still reaches the log, on stdout.
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("UPDATE 1\n"),
        "{t}"
    );
    assert_eq!(
        fs::read_to_string(s.dir.path().join("sql.txt")).expect("the SQL reached psql"),
        MIGRATION_SQL
    );
    let log = s.log();
    assert_eq!(count_lines(&log, "psql"), 4, "{log}");
    assert_eq!(
        count_lines(&log, &format!("sleep {SQL_CONNECT_INTERVAL_SECONDS}")),
        3,
        "{log}"
    );
    assert!(
        t.contains(&format!(
            "The database does not accept connections yet (attempt 1 of {SQL_CONNECT_ATTEMPTS})"
        )),
        "{t}"
    );
    // Both of libpq's messages were taken for "not yet", and are in the log for the reader.
    assert!(
        t.contains("Connection refused") && t.contains("is starting up"),
        "{t}"
    );
    // Each attempt has a bounded connect time, also when the connection hangs.
    let env = fs::read_to_string(s.dir.path().join("psql.env")).expect("env");
    assert!(
        env.lines()
            .all(|l| l == format!("PGCONNECT_TIMEOUT={SQL_CONNECT_TIMEOUT_SECONDS}")),
        "{env}"
    );
}

#[test]
fn migration_sql_gives_up_on_a_database_that_keeps_refusing() {
    let s = sql_sandbox(None);
    let out = s.run(&render_migration_sql(&s.root().display().to_string()));
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    assert!(!t.contains("DONE"), "{t}");
    assert!(
        t.contains(&format!(
            "ERROR: the database did not accept connections after {SQL_CONNECT_ATTEMPTS} attempts, {SQL_CONNECT_INTERVAL_SECONDS} seconds apart: check the db pod (kubectl logs deployment/db), then run the migration again"
        )),
        "{t}"
    );
    let log = s.log();
    assert_eq!(
        count_lines(&log, "psql"),
        SQL_CONNECT_ATTEMPTS as usize,
        "bounded: {log}"
    );
    assert_eq!(
        count_lines(&log, "sleep"),
        SQL_CONNECT_ATTEMPTS as usize - 1,
        "{log}"
    );
    assert!(!s.dir.path().join("sql.txt").exists());
    // About ten minutes in all: within the Job's step timeout of 30 minutes even with every
    // attempt hanging until its connect timeout.
    let worst = SQL_CONNECT_ATTEMPTS * (SQL_CONNECT_INTERVAL_SECONDS + SQL_CONNECT_TIMEOUT_SECONDS);
    assert!(worst < 1800, "{worst}");
}

// ---------------------------------------------------------------------------------------------
// Password re-hash against a real PostgreSQL 18 (the wheel scripts/test.sh installs)

/// Runs shell commands as a user PostgreSQL accepts (it refuses root), in a directory that user
/// owns, with the PostgreSQL 18 tools first on PATH.
struct RealPg {
    dir: tempfile::TempDir,
    bin: PathBuf,
    major: String,
}

impl RealPg {
    /// `None` (and a note) without the tests' PostgreSQL, except in CI, where that fails.
    fn new() -> Option<RealPg> {
        let installs = servers::installs("the password re-hash")?;
        Some(RealPg {
            dir: servers::pg_tempdir(),
            bin: installs.pg18.clone(),
            major: "18".to_owned(),
        })
    }
    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }
    fn data(&self) -> PathBuf {
        self.root().join("var/lib/pgsql/data")
    }
    fn sh(&self, script: &str, env: &[(&str, &str)]) -> Output {
        servers::sh_as_pg(&self.bin, self.dir.path(), script, env)
    }
    fn ok(&self, script: &str) -> String {
        let out = self.sh(&format!("set -euo pipefail\n{script}"), &[]);
        assert!(out.status.success(), "{script}\n{}", text(&out));
        String::from_utf8_lossy(&out.stdout).to_string()
    }
    /// Runs SQL as the superuser on a server of its own on a socket, with `hba`.
    fn with_server(&self, hba: &str, script: &str) -> String {
        self.ok(&format!(
            r#"D={data}
S=$(mktemp -d)
printf '{hba}' >"$S/hba"
pg_ctl start -D "$D" -w -l "$S/log" -o "-c listen_addresses='' -c port=5432 -c unix_socket_directories='$S' -c hba_file='$S/hba' -c ssl=off" >/dev/null
trap 'pg_ctl stop -D "$D" -m fast -w >/dev/null' EXIT
{script}"#,
            data = self.data().display(),
        ))
    }
}

#[test]
fn passwords_rehash_against_a_real_postgresql() {
    let Some(pg) = RealPg::new() else { return };
    pg.ok(&format!(
        "mkdir -p {data} && initdb -D {data} -U postgres -A trust --no-sync >/dev/null",
        data = pg.data().display()
    ));
    // A classic configuration: SSL files this pod does not have, another port, and every
    // statement logged. (Not `ssl = on`: the wheels' PostgreSQL has no SSL and refuses to
    // start with it even under `-c ssl=off`, real_postgres::source::WHEELS_WITHOUT_SSL; the stub
    // test above checks the script's `-c ssl=off`.)
    pg.ok(&format!(
        "cat >>{}/postgresql.conf <<'EOF'\nssl_cert_file = '/etc/pki/tls/certs/spacewalk.crt'\nssl_key_file = '/etc/pki/tls/private/pg-spacewalk.key'\nport = 5433\nlog_statement = 'all'\nEOF",
        pg.data().display()
    ));
    pg.with_server(
        r"local all all trust\n",
        r#"psql -X -q -v ON_ERROR_STOP=1 -h "$S" -U postgres -d postgres <<'SQL'
SET password_encryption = 'md5';
CREATE ROLE spacewalk LOGIN PASSWORD 'the old one';
SET password_encryption = 'scram-sha-256';
CREATE ROLE pythia_susemanager LOGIN PASSWORD 'another one with spaces';
SQL"#,
    );
    let stored = |pg: &RealPg| {
        pg.with_server(
            r"local all all trust\n",
            r#"psql -X -h "$S" -U postgres -d postgres -tA -c "SELECT rolname || ' ' || rolpassword FROM pg_authid WHERE rolname IN ('spacewalk', 'pythia_susemanager') ORDER BY 1""#,
        )
    };
    let before = stored(&pg);
    assert!(before.contains("spacewalk md5"), "{before}");

    // The local tools' major stands for the image's.
    let script = render_passwords(&pg.root().display().to_string());
    let mut env: Vec<(&str, &str)> = script
        .env
        .iter()
        .map(|(k, v)| match *k {
            "TARGET_MAJOR" => (*k, pg.major.as_str()),
            _ => (*k, v.as_str()),
        })
        .collect();
    env.extend(credentials());
    let out = pg.sh(&script.text, &env);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Re-hashed to scram-sha-256: spacewalk\n"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains(DB_PASSWORD));
    assert!(!pg.data().join("postmaster.pid").exists(), "left running");

    let after = stored(&pg);
    assert!(after.contains("spacewalk SCRAM-SHA-256$"), "{after}");
    let report = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("pythia_susemanager "))
            .map(str::to_owned)
    };
    assert_eq!(
        report(&after),
        report(&before),
        "the scram role is left alone"
    );
    // The migrated password, with its quote and spaces, now logs in under scram-sha-256.
    let login = pg.sh(
        &format!(
            r#"set -euo pipefail
D={data}
S=$(mktemp -d)
printf 'local all postgres trust\nlocal all all scram-sha-256\n' >"$S/hba"
pg_ctl start -D "$D" -w -l "$S/log" -o "-c listen_addresses='' -c port=5432 -c unix_socket_directories='$S' -c hba_file='$S/hba' -c ssl=off" >/dev/null
trap 'pg_ctl stop -D "$D" -m fast -w >/dev/null' EXIT
PGPASSWORD=$MANAGER_PASS psql -X -h "$S" -U spacewalk -d postgres -tA -c "SELECT 'logged in'""#,
            data = pg.data().display()
        ),
        &credentials(),
    );
    assert!(
        String::from_utf8_lossy(&login.stdout).contains("logged in"),
        "{}",
        text(&login)
    );
}
