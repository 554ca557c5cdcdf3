//! The database Jobs' scripts against real PostgreSQL 16 and 18 (`servers` says where they come
//! from): each script run as its Job runs it — its rendered text and environment, as its uid —
//! on temporary roots laid out as the pods' file systems. A volume is a directory that moves
//! (a rename) from one pod's root to the next one's mount path, as a claim is mounted by the
//! next Job. The classic source is `source`'s template.

pub mod servers;
pub mod source;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use uyuni_core::scripts::JobScript;
use uyuni_core::scripts::database::{
    BACKUP_MARKER, Copy, render_copy, render_fixup, render_migration_sql, render_passwords,
    render_upgrade,
};

use servers::{Installs, free_port, pg_tempdir, pg_user, run_as_root, sh_as_pg, text};
use source::{DB_PASSWORD, DB_USER, Digest, REPORT_DB_PASSWORD, REPORT_DB_USER, SERVERS};

/// Every tool the upgrade, the re-hash and the tests use is in both wheels and runs as the
/// servers' user, with the major it claims.
#[test]
fn both_wheels_carry_every_tool_the_database_jobs_use() {
    let Some(installs) = servers::installs("the wheels' check") else {
        return;
    };
    let user = pg_user();
    for (major, version) in [(16, "16."), (18, "18.")] {
        for tool in [
            "postgres",
            "initdb",
            "pg_ctl",
            "pg_upgrade",
            "pg_checksums",
            "pg_controldata",
            "psql",
            "vacuumdb",
            "pg_dump",
        ] {
            let path = installs.bin(major).join(tool);
            let out = if servers::is_root() {
                Command::new("setpriv")
                    .arg(format!("--reuid={}", user.uid))
                    .arg(format!("--regid={}", user.gid))
                    .args(["--clear-groups", "--"])
                    .arg(&path)
                    .arg("--version")
                    .output()
            } else {
                Command::new(&path).arg("--version").output()
            }
            .expect("runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains(&format!("(PostgreSQL) {version}")),
                "{}: {}",
                path.display(),
                text(&out)
            );
        }
    }
    // vacuumdb 18 has the option the upgrade's statistics use.
    let help = Command::new(installs.bin(18).join("vacuumdb"))
        .arg("--help")
        .output()
        .expect("runs");
    assert!(String::from_utf8_lossy(&help.stdout).contains("--missing-stats-only"));
}

// ---------------------------------------------------------------------------------------------
// The pods

/// The credentials as the Jobs' `secretKeyRef` environment carries them.
fn credentials() -> [(&'static str, &'static str); 4] {
    [
        ("MANAGER_USER", DB_USER),
        ("MANAGER_PASS", DB_PASSWORD),
        ("REPORT_DB_USER", REPORT_DB_USER),
        ("REPORT_DB_PASS", REPORT_DB_PASSWORD),
    ]
}

/// A test's directory: the pods' roots and the volumes in them.
struct Case {
    dir: tempfile::TempDir,
    installs: &'static Installs,
}

impl Case {
    fn new(installs: &'static Installs) -> Case {
        Case {
            dir: pg_tempdir(),
            installs,
        }
    }
    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }
    /// A pod's root named `name`, with the images' PostgreSQL bin directories.
    fn pod(&self, name: &str) -> PathBuf {
        let root = self.path(name);
        for major in [16, 18] {
            let link = root.join(format!("usr/lib/postgresql{major}/bin"));
            if !link.exists() {
                fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
                std::os::unix::fs::symlink(self.installs.bin(major), &link).expect("symlink");
            }
        }
        let tmp = root.join("tmp");
        fs::create_dir_all(&tmp).expect("mkdir");
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777)).expect("chmod");
        root
    }
    /// Mounts volume directory `from` at `to`: the next pod gets the claim.
    fn mount(&self, from: &Path, to: &Path) {
        fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        fs::rename(from, to)
            .unwrap_or_else(|e| panic!("{} -> {}: {e}", from.display(), to.display()));
    }
    /// A copy of the template's data directory at `to`, owned as it was.
    fn copy_template(&self, template: &Path, to: &Path) {
        fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
        let out = Command::new("cp")
            .arg("-a")
            .arg(template)
            .arg(to)
            .output()
            .expect("cp");
        assert!(out.status.success(), "{}", text(&out));
    }
}

/// Runs a Job's script as the servers' user (the re-hash and the copy run as postgres).
fn run_as_postgres(
    installs: &Installs,
    root: &Path,
    script: &JobScript,
    extra: &[(&str, &str)],
) -> Output {
    let mut env: Vec<(&str, &str)> = script.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.extend(extra.iter().copied());
    let tmp = root.join("tmp");
    sh_as_pg(installs.bin(18), &tmp, &script.text, &env)
}

/// The user's uid as the scripts' POSTGRES_UID: the image's postgres is 999, this machine's
/// another.
fn uid_env() -> String {
    pg_user().uid.to_string()
}

/// A PostgreSQL server of `major` on `data`, on a socket in `socket` and, with `tcp_port`, on
/// 127.0.0.1 with scram-sha-256 for every TCP login (as the DB image's `pg_hba.conf` has it);
/// stopped when dropped.
struct Server<'a> {
    installs: &'a Installs,
    major: u32,
    data: PathBuf,
    socket: PathBuf,
    work: PathBuf,
}

impl<'a> Server<'a> {
    fn start(
        installs: &'a Installs,
        major: u32,
        data: &Path,
        work: &Path,
        tcp_port: Option<u16>,
    ) -> Server<'a> {
        let socket = work.join(format!("sock-{}", free_port()));
        let listen = match tcp_port {
            Some(p) => format!("-c listen_addresses=127.0.0.1 -c port={p}"),
            None => "-c listen_addresses='' -c port=5432".to_owned(),
        };
        let out = sh_as_pg(
            installs.bin(major),
            work,
            &format!(
                r#"set -euo pipefail
mkdir -p {socket}
printf 'local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n' >{socket}.hba
pg_ctl start -D {data} -w -l {socket}.log -o "{listen} -c unix_socket_directories='{socket}' -c hba_file='{socket}.hba' -c ssl=off" >/dev/null || {{ cat {socket}.log; exit 1; }}
"#,
                socket = socket.display(),
                data = data.display(),
            ),
            &[],
        );
        assert!(
            out.status.success(),
            "PostgreSQL {major} on {}: {}",
            data.display(),
            text(&out)
        );
        Server {
            installs,
            major,
            data: data.to_owned(),
            socket,
            work: work.to_owned(),
        }
    }
    /// `sql` as `user` on the socket, to database `db`: psql's unaligned, tuples-only output.
    fn sql(&self, db: &str, user: &str, sql: &str) -> String {
        let out = sh_as_pg(
            self.installs.bin(self.major),
            &self.work,
            &format!(
                "psql -X -q -tA -v ON_ERROR_STOP=1 -h {} -p {} -U {user} -d {db} <<'SQL'\n{sql}\nSQL",
                self.socket.display(),
                self.port()
            ),
            &[],
        );
        assert!(out.status.success(), "{sql}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
    fn port(&self) -> String {
        // The socket's name carries the port: .s.PGSQL.PORT.
        fs::read_dir(&self.socket)
            .expect("socket dir")
            .flatten()
            .find_map(|e| {
                let n = e.file_name().to_string_lossy().to_string();
                n.strip_prefix(".s.PGSQL.")
                    .filter(|p| !p.ends_with(".lock"))
                    .map(str::to_owned)
            })
            .expect("a socket")
    }
    fn digest(&self) -> Digest {
        source::digest(
            self.installs.bin(self.major),
            &self.work,
            &self.socket,
            &self.port(),
        )
    }
    fn verify(&self) -> String {
        source::verify(
            self.installs.bin(self.major),
            &self.work,
            &self.socket,
            &self.port(),
        )
    }
    fn stop(self) {
        drop(self);
    }
}

impl Drop for Server<'_> {
    fn drop(&mut self) {
        let out = sh_as_pg(
            self.installs.bin(self.major),
            &self.work,
            &format!(
                "pg_ctl stop -D {} -m fast -w >/dev/null",
                self.data.display()
            ),
            &[],
        );
        if !std::thread::panicking() {
            assert!(
                out.status.success(),
                "stopping {}: {}",
                self.data.display(),
                text(&out)
            );
        }
    }
}

/// Each file under `dir` (its relative path) with its mode and a hash of its content.
fn tree(dir: &Path) -> BTreeMap<String, String> {
    use sha2::Digest as _;
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.expect("entry").path();
            let meta = fs::symlink_metadata(&p).expect("stat");
            if meta.is_dir() {
                stack.push(p);
            } else {
                let content = fs::read(&p).unwrap_or_default();
                let hash = sha2::Sha256::digest(&content);
                out.insert(
                    p.strip_prefix(dir)
                        .expect("under dir")
                        .display()
                        .to_string(),
                    format!("{:o} {hash:x}", meta.mode() & 0o7777),
                );
            }
        }
    }
    out
}

fn controldata(installs: &Installs, major: u32, data: &Path, work: &Path, field: &str) -> String {
    let out = sh_as_pg(
        installs.bin(major),
        work,
        &format!("pg_controldata {}", data.display()),
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| {
            l.strip_prefix(&format!("{field}:"))
                .map(|v| v.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no {field} in pg_controldata's output"))
}

/// The `spacewalk-sql` of the server image as the migration-SQL Job calls it (`--select-mode
/// -`: the SQL on stdin), reading the connection from rhn.conf as the real one does
/// (uyuni-project/uyuni `spacewalk/admin/spacewalk-sql`: db_host, db_port, db_user,
/// db_password, db_name); host `db`, the Service, is 127.0.0.1 and its port $DB_SERVICE_PORT.
const SPACEWALK_SQL: &str = r#"#!/bin/bash
set -euo pipefail
conf=$LOCAL_ROOT/etc/rhn/rhn.conf
get() { sed -n "s/^[[:space:]]*$1[[:space:]]*=[[:space:]]*//p" "$conf" | tail -n 1; }
[ "$(get db_host)" = db ] || { echo "rhn.conf's db_host is $(get db_host), not the db Service" >&2; exit 1; }
PGPASSWORD=$(get db_password) exec psql -X -h 127.0.0.1 -p "$DB_SERVICE_PORT" -U "$(get db_user)" -d "$(get db_name)" -f -
"#;

fn rhn_conf() -> String {
    format!(
        "db_backend = postgresql\ndb_user = {DB_USER}\ndb_password = {DB_PASSWORD}\ndb_name = susemanager\ndb_host = localhost\ndb_port = 5432\nreport_db_user = {REPORT_DB_USER}\nreport_db_password = {REPORT_DB_PASSWORD}\nreport_db_name = reportdb\nreport_db_host = localhost\n"
    )
}

/// Runs the migration-SQL Job's script against `port` on 127.0.0.1, in pod `root` (which has
/// rhn.conf), with the `spacewalk-sql` stand-in on PATH.
fn run_migration_sql(root: &Path, port: &str) -> Output {
    let bin = root.join("usr/bin");
    fs::create_dir_all(&bin).expect("mkdir");
    let exe = bin.join("spacewalk-sql");
    fs::write(&exe, SPACEWALK_SQL).expect("write");
    fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).expect("chmod");
    let script = render_migration_sql(&root.display().to_string());
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("bash")
        .arg("-c")
        .arg(&script.text)
        .env_clear()
        .envs(script.env.iter().map(|(k, v)| (*k, v)))
        .env("PATH", path)
        .env("DB_SERVICE_PORT", port)
        .env("TMPDIR", root.join("tmp"))
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .output()
        .expect("bash runs")
}

/// The rows the migration SQL changes are compared on their own.
fn changed_by_migration_sql(key: &str) -> bool {
    key.ends_with("public.rhnkickstartabletree")
        || key.ends_with("public.rhntaskqueue")
        || key.ends_with("public.rhn_task_queue_id_seq")
}

// ---------------------------------------------------------------------------------------------
// A migration: fix-up, upgrade 16 → 18, re-hash, migration SQL

/// The whole database path of a migration on a classic source with data checksums
/// `checksums`, in the old `data/data` layout when `legacy_layout`.
fn migrate(checksums: bool, legacy_layout: bool) {
    let what = format!("a migration with checksums {checksums}");
    let Some(installs) = servers::installs(&what).filter(|_| servers::root_for(&what)) else {
        return;
    };
    let template = source::template(installs, checksums);
    let case = Case::new(installs);
    let uid = uid_env();

    // The fix-up Job (root), on the synced var-pgsql and etc-rhn volumes.
    let fixup = case.pod("fixup");
    let pgdata = fixup.join("var/lib/pgsql/data");
    if legacy_layout {
        fs::create_dir_all(&pgdata).expect("mkdir");
        case.copy_template(&template.data, &pgdata.join("data"));
    } else {
        case.copy_template(&template.data, &pgdata);
    }
    fs::create_dir_all(fixup.join("etc/rhn")).expect("mkdir");
    fs::write(fixup.join("etc/rhn/rhn.conf"), rhn_conf()).expect("write");
    fs::create_dir_all(fixup.join("var/spacewalk")).expect("mkdir");
    fs::create_dir_all(fixup.join("root")).expect("mkdir");
    fs::write(fixup.join("root/.MANAGER_SETUP_COMPLETE"), "").expect("write");
    let out = run_as_root(
        &fixup,
        &render_fixup(Some(16), &fixup.display().to_string()),
        &[("POSTGRES_UID", &uid)],
    );
    assert!(out.status.success(), "fix-up: {}", text(&out));
    // The fix-up turned SSL on for the db pod; the wheels cannot start with it.
    source::ssl_off(&pgdata);
    assert_eq!(fs::metadata(&pgdata).expect("pgdata").uid(), pg_user().uid);
    let source_before = tree(&pgdata);

    // The upgrade Job (root, dropping to postgres), var-pgsql at /migration/source, the new
    // claim at /migration/target (a stale file of an earlier attempt in it).
    let up = case.pod("upgrade");
    let source = up.join("migration/source");
    let target = up.join("migration/target");
    case.mount(&pgdata, &source);
    fs::create_dir_all(&target).expect("mkdir");
    fs::write(target.join("stale-from-an-earlier-attempt"), "x").expect("write");
    fs::create_dir_all(up.join("etc/sysconfig")).expect("mkdir");
    fs::write(
        up.join("etc/sysconfig/postgresql"),
        "POSTGRES_LANG=\"C.UTF-8\"\n",
    )
    .expect("write");
    let started = std::time::Instant::now();
    let out = run_as_root(
        &up,
        &render_upgrade(16, &up.display().to_string()),
        &[("POSTGRES_UID", &uid)],
    );
    println!("the upgrade Job's script took {:?}", started.elapsed());
    assert!(out.status.success(), "upgrade: {}", text(&out));
    let log = text(&out);
    assert!(!target.join("stale-from-an-earlier-attempt").exists());
    if checksums {
        assert!(
            log.contains("Data checksums: enabled, as in the source"),
            "{log}"
        );
    } else {
        assert!(log.contains("Data checksums: enabling them"), "{log}");
    }
    assert!(log.contains("--missing-stats-only"), "{log}");
    // The checksums the docs promise: on, whatever the source had.
    assert_eq!(
        controldata(
            installs,
            18,
            &target,
            &up.join("tmp"),
            "Data page checksum version"
        ),
        "1"
    );

    // The old volume: a cleanly shut down PostgreSQL 16 cluster. pg_upgrade started its server,
    // which rewrote a few files (docs/phases.md says so): the relations' files are the same.
    assert_eq!(
        controldata(
            installs,
            16,
            &source,
            &up.join("tmp"),
            "Database cluster state"
        ),
        "shut down"
    );
    assert_eq!(
        fs::read_to_string(source.join("PG_VERSION")).expect("PG_VERSION"),
        "16\n"
    );
    let source_after = tree(&source);
    let changed: Vec<&String> = source_after
        .iter()
        .filter(|(k, v)| source_before.get(*k) != Some(v))
        .map(|(k, _)| k)
        .collect();
    println!(
        "files of the source that pg_upgrade's start of the old server changed or added: {} of {}",
        changed.len(),
        source_after.len()
    );
    println!("{changed:?}");

    // The re-hash Job (postgres, DB image) on the new claim, now the db's /var/lib/pgsql/data.
    let db = case.pod("db");
    let data = db.join("var/lib/pgsql/data");
    case.mount(&target, &data);
    let out = run_as_postgres(
        installs,
        &db,
        &render_passwords(&db.display().to_string()),
        &credentials(),
    );
    assert!(out.status.success(), "re-hash: {}", text(&out));
    assert!(
        text(&out).contains(&format!(
            "Re-hashed to scram-sha-256: {DB_USER} {REPORT_DB_USER}"
        )),
        "{}",
        text(&out)
    );
    for secret in [DB_PASSWORD, REPORT_DB_PASSWORD] {
        assert!(!text(&out).contains(secret), "a password in the log");
    }

    // The db pod: PostgreSQL 18 on the result, scram-sha-256 for every TCP login.
    let port = free_port();
    let server = Server::start(installs, 18, &data, &db.join("tmp"), Some(port));
    let login = sh_as_pg(
        installs.bin(18),
        &db.join("tmp"),
        &format!(
            "psql -X -tA -h 127.0.0.1 -p {port} -U {DB_USER} -d susemanager -c 'SELECT current_user, count(*) FROM rhnServer'"
        ),
        &[("PGPASSWORD", DB_PASSWORD)],
    );
    assert!(login.status.success(), "{}", text(&login));
    assert_eq!(
        String::from_utf8_lossy(&login.stdout).trim(),
        format!("{DB_USER}|{SERVERS}")
    );
    assert_eq!(
        server.sql(
            "postgres",
            "postgres",
            "SELECT string_agg(rolname || ' ' || split_part(rolpassword, '$', 1), ',' ORDER BY rolname) FROM pg_authid WHERE rolname IN ('spacewalk', 'pythia_susemanager')"
        ),
        "pythia_susemanager SCRAM-SHA-256,spacewalk SCRAM-SHA-256"
    );
    // The optimizer statistics the source did not have (the template checks it had none).
    let stats: u32 = server
        .sql(
            "susemanager",
            "postgres",
            "SELECT count(*) FROM pg_stats WHERE tablename = 'susetypes'",
        )
        .parse()
        .expect("count");
    assert!(stats > 0, "no statistics after the upgrade");

    // Every table, view, sequence, large object, function and trigger as in the source.
    let result = server.digest();
    let expected: Digest = template.digest.clone();
    assert_eq!(
        result.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>()
    );
    for (k, v) in &expected {
        assert_eq!(result.get(k), Some(v), "{k}");
    }
    // The verification Job's report is the same on PostgreSQL 18 as on the source's 16.
    let verified = server.verify();
    assert_eq!(verified, template.verify);
    assert!(
        verified.contains("susemanager\tpublic.susetypes\t2001\t"),
        "{verified}"
    );

    // The migration SQL (server image, spacewalk-sql as rhn.conf says), twice: a retry after a
    // COMMIT whose reply was lost must leave the rows of one run.
    fs::create_dir_all(db.join("etc/rhn")).expect("mkdir");
    fs::copy(fixup.join("etc/rhn/rhn.conf"), db.join("etc/rhn/rhn.conf")).expect("cp");
    let once = run_migration_sql(&db, &port.to_string());
    assert!(once.status.success(), "migration SQL: {}", text(&once));
    let queued = |server: &Server<'_>| {
        server.sql(
            "susemanager",
            "postgres",
            "SELECT count(*) || ' ' || count(DISTINCT task_data) FROM rhnTaskQueue WHERE task_name = 'update_system_overview'",
        )
    };
    assert_eq!(queued(&server), format!("{SERVERS} {SERVERS}"));
    let trees = |server: &Server<'_>| {
        server.sql(
            "susemanager",
            "postgres",
            "SELECT string_agg(id || ' ' || base_path, ',' ORDER BY id) FROM rhnKickstartableTree",
        )
    };
    assert_eq!(
        trees(&server),
        "1 /srv/www/distributions/1-sles15sp6,2 /srv/www/distributions/1-sles15sp6,3 /srv/www/distributions/1-leap15.6"
    );
    let after_once = server.digest();
    let twice = run_migration_sql(&db, &port.to_string());
    assert!(
        twice.status.success(),
        "migration SQL again: {}",
        text(&twice)
    );
    assert_eq!(
        queued(&server),
        format!("{SERVERS} {SERVERS}"),
        "queued twice"
    );
    let after_twice = server.digest();
    for (k, v) in &after_once {
        if !k.ends_with("public.rhn_task_queue_id_seq") {
            assert_eq!(after_twice.get(k), Some(v), "{k} changed by a second run");
        }
    }
    // The rest is untouched by it.
    for (k, v) in &expected {
        if !changed_by_migration_sql(k) {
            assert_eq!(after_twice.get(k), Some(v), "{k}");
        }
    }
    // The function and its trigger run on PostgreSQL 18.
    assert_eq!(
        server.sql(
            "susemanager",
            DB_USER,
            "INSERT INTO suseTypes (label) VALUES ('after the upgrade') RETURNING modified AT TIME ZONE 'UTC'"
        ),
        "2000-01-01 00:00:00"
    );
    // One changed value in one row changes its table's line of the verification, and only it.
    let before = server.verify();
    server.sql(
        "susemanager",
        DB_USER,
        "UPDATE suseTypes SET amount = amount + 0.000001 WHERE id = 1000",
    );
    let after = server.verify();
    let differ: Vec<(&str, &str)> = before
        .lines()
        .zip(after.lines())
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(differ.len(), 1, "{differ:?}");
    assert!(
        differ[0]
            .0
            .starts_with("susemanager\tpublic.susetypes\t2002\t"),
        "{differ:?}"
    );
    server.stop();

    // The old volume still holds the source's data, for PostgreSQL 16.
    let old = Server::start(installs, 16, &source, &up.join("tmp"), None);
    assert_eq!(old.digest(), expected);
    old.stop();
}

#[test]
fn a_classic_source_without_checksums_migrates_intact() {
    migrate(false, false);
}

/// D1: with the source's checksums on, pg_checksums --enable after pg_upgrade failed ("data
/// checksums are already enabled in cluster") on every retry.
#[test]
fn a_classic_source_with_checksums_in_the_old_layout_migrates_intact() {
    migrate(true, true);
}

// ---------------------------------------------------------------------------------------------
// The upgrade's failures

/// An upgrade pod whose source is a copy of the template (as the fix-up leaves it: owned by the
/// servers' user) and whose target holds a file of an earlier attempt.
fn upgrade_pod(case: &Case, template: &Path, lang: Option<&str>) -> PathBuf {
    let up = case.pod("upgrade");
    case.copy_template(template, &up.join("migration/source"));
    fs::create_dir_all(up.join("migration/target")).expect("mkdir");
    fs::write(
        up.join("migration/target/stale-from-an-earlier-attempt"),
        "x",
    )
    .expect("write");
    if let Some(lang) = lang {
        fs::create_dir_all(up.join("etc/sysconfig")).expect("mkdir");
        fs::write(
            up.join("etc/sysconfig/postgresql"),
            format!("POSTGRES_LANG=\"{lang}\"\n"),
        )
        .expect("write");
    }
    up
}

fn assert_refused_before_anything(
    up: &Path,
    before: &BTreeMap<String, String>,
    out: &Output,
    says: &str,
) {
    assert!(!out.status.success(), "{}", text(out));
    assert!(text(out).contains(says), "{}", text(out));
    assert!(text(out).contains("nothing was changed"), "{}", text(out));
    assert!(
        up.join("migration/target/stale-from-an-earlier-attempt")
            .exists(),
        "the target was emptied"
    );
    assert_eq!(
        &tree(&up.join("migration/source")),
        before,
        "the source changed"
    );
}

#[test]
fn an_upgrade_refuses_a_source_that_was_not_shut_down_cleanly() {
    let Some(installs) = servers::installs("the unclean source's upgrade")
        .filter(|_| servers::root_for("the unclean source's upgrade"))
    else {
        return;
    };
    let template = source::template(installs, false);
    let case = Case::new(installs);
    let up = upgrade_pod(&case, &template.data, Some("C.UTF-8"));
    let source = up.join("migration/source");
    // A server killed outright: its pid file stays, the control file says "in production".
    let kill = sh_as_pg(
        installs.bin(16),
        &up.join("tmp"),
        &format!(
            r#"set -euo pipefail
S=$(mktemp -d)
pg_ctl start -D {d} -w -l "$S/log" -o "-c listen_addresses='' -c port=5432 -c unix_socket_directories='$S' -c ssl=off" >/dev/null
kill -KILL "$(head -n 1 {d}/postmaster.pid)"
for _ in $(seq 50); do pg_ctl status -D {d} >/dev/null || break; sleep 0.1; done
"#,
            d = source.display()
        ),
        &[],
    );
    assert!(kill.status.success(), "{}", text(&kill));
    assert_eq!(
        controldata(
            installs,
            16,
            &source,
            &up.join("tmp"),
            "Database cluster state"
        ),
        "in production"
    );
    let before = tree(&source);
    let out = run_as_root(
        &up,
        &render_upgrade(16, &up.display().to_string()),
        &[
            ("POSTGRES_UID", &uid_env()),
            ("UYUNI_DATA_SYNC_JOB", "uyuni-data-sync-1"),
        ],
    );
    assert_refused_before_anything(
        &up,
        &before,
        &out,
        "was not shut down cleanly (pg_controldata: 'in production')",
    );
    assert!(
        text(&out).contains("delete the final data-sync Job uyuni-data-sync-1"),
        "{}",
        text(&out)
    );
}

#[test]
fn an_upgrade_without_a_binary_says_which_and_leaves_the_source() {
    let Some(installs) = servers::installs("the upgrade without a binary")
        .filter(|_| servers::root_for("the upgrade without a binary"))
    else {
        return;
    };
    let template = source::template(installs, false);
    let case = Case::new(installs);
    let up = upgrade_pod(&case, &template.data, Some("C.UTF-8"));
    // The image's PostgreSQL 16 without its server binary.
    let bin16 = up.join("usr/lib/postgresql16/bin");
    fs::remove_file(&bin16).expect("rm link");
    fs::create_dir_all(&bin16).expect("mkdir");
    for e in fs::read_dir(installs.bin(16)).expect("bin").flatten() {
        if e.file_name() != "postgres" {
            std::os::unix::fs::symlink(e.path(), bin16.join(e.file_name())).expect("symlink");
        }
    }
    let before = tree(&up.join("migration/source"));
    let out = run_as_root(
        &up,
        &render_upgrade(16, &up.display().to_string()),
        &[("POSTGRES_UID", &uid_env())],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("{}/postgres is missing", bin16.display())),
        "{}",
        text(&out)
    );
    assert!(
        up.join("migration/target/stale-from-an-earlier-attempt")
            .exists()
    );
    assert_eq!(tree(&up.join("migration/source")), before);
}

/// pg_upgrade itself fails, after the target was emptied and initdb'ed: the source has a
/// column of a `reg*` type, which pg_upgrade cannot carry over (its check "Checking for reg*
/// data types in user tables"). Its reason is in the log, and the source is still a cleanly
/// shut down PostgreSQL 16 cluster with its data.
#[test]
fn a_failed_pg_upgrade_says_why_and_leaves_the_source() {
    let Some(installs) = servers::installs("the failed pg_upgrade")
        .filter(|_| servers::root_for("the failed pg_upgrade"))
    else {
        return;
    };
    let template = source::template(installs, false);
    let case = Case::new(installs);
    let up = upgrade_pod(&case, &template.data, Some("C.UTF-8"));
    let expected = {
        let server = Server::start(
            installs,
            16,
            &up.join("migration/source"),
            &up.join("tmp"),
            None,
        );
        server.sql(
            "susemanager",
            DB_USER,
            "CREATE TABLE suseRegproc (id INTEGER PRIMARY KEY, fn REGPROC); INSERT INTO suseRegproc VALUES (1, 'suse_touch');",
        );
        server.digest()
    };
    let before = tree(&up.join("migration/source"));
    let out = run_as_root(
        &up,
        &render_upgrade(16, &up.display().to_string()),
        &[("POSTGRES_UID", &uid_env())],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("reg* data types in user tables"),
        "{}",
        text(&out)
    );
    assert!(!text(&out).contains("complete"), "{}", text(&out));
    // pg_upgrade had started and stopped the old server for its checks: a few files changed,
    // the cluster is cleanly shut down and holds the same data.
    let source = up.join("migration/source");
    let after = tree(&source);
    println!(
        "files of the source the failed pg_upgrade changed: {} of {}",
        after
            .iter()
            .filter(|(k, v)| before.get(*k) != Some(v))
            .count(),
        after.len()
    );
    assert_eq!(
        controldata(
            installs,
            16,
            &source,
            &up.join("tmp"),
            "Database cluster state"
        ),
        "shut down"
    );
    let old = Server::start(installs, 16, &source, &up.join("tmp"), None);
    assert_eq!(old.digest(), expected);
    old.stop();
}

/// The locale: the source's, as the script reads it, must exist in the image before anything is
/// emptied. This machine's only UTF-8 locale is C.UTF-8 (`locale -a`: C.utf8), as the tests'
/// machines are; en_US.UTF-8 is refused with the list of what exists.
#[test]
fn an_upgrade_refuses_a_locale_the_image_lacks_before_emptying_the_target() {
    let Some(installs) =
        servers::installs("the locale check").filter(|_| servers::root_for("the locale check"))
    else {
        return;
    };
    let locales = Command::new("locale")
        .arg("-a")
        .output()
        .expect("locale -a");
    let locales = String::from_utf8_lossy(&locales.stdout).to_lowercase();
    if locales.lines().any(|l| l == "en_us.utf8") {
        println!("this machine has en_US.UTF-8: the missing locale was not tried");
        return;
    }
    let template = source::template(installs, false);
    for lang in [Some("en_US.UTF-8"), None] {
        let case = Case::new(installs);
        let up = upgrade_pod(&case, &template.data, lang);
        let before = tree(&up.join("migration/source"));
        let out = run_as_root(
            &up,
            &render_upgrade(16, &up.display().to_string()),
            &[("POSTGRES_UID", &uid_env())],
        );
        assert_refused_before_anything(
            &up,
            &before,
            &out,
            "the source database's locale en_US.UTF-8 (POSTGRES_LANG in /etc/sysconfig/postgresql, else LC_CTYPE, else en_US.UTF-8) is not installed in the upgrade image",
        );
        assert!(text(&out).contains("C.utf8"), "{}", text(&out));
        assert!(!text(&out).contains("initdb"), "{}", text(&out));
    }
}

// ---------------------------------------------------------------------------------------------
// upgrade's backup and --rollback (db-copy.sh), on a real data directory

#[test]
fn a_backup_and_its_restore_bring_back_a_database_that_starts_with_its_data() {
    let Some(installs) = servers::installs("the backup and restore") else {
        return;
    };
    let template = source::template(installs, false);
    let case = Case::new(installs);
    // The backup Job: the stopped database's volume at /migration/source, the backup volume
    // at /migration/target.
    let backup_pod = case.pod("backup");
    let database = backup_pod.join("migration/source");
    case.copy_template(&template.data, &database);
    let backup = backup_pod.join("migration/target");
    fs::create_dir_all(&backup).expect("mkdir");
    if servers::is_root() {
        let u = pg_user();
        std::os::unix::fs::chown(&backup, Some(u.uid), Some(u.gid)).expect("chown");
    }
    let out = run_as_postgres(
        installs,
        &backup_pod,
        &render_copy(
            Copy::Backup,
            "server-postgresql:2025.10",
            &backup_pod.display().to_string(),
        ),
        &[],
    );
    assert!(out.status.success(), "backup: {}", text(&out));
    assert_eq!(
        fs::read_to_string(backup.join(BACKUP_MARKER)).expect("marker"),
        "server-postgresql:2025.10\n"
    );

    // The upgrade goes wrong after it: the database's volume changes.
    {
        let server = Server::start(installs, 16, &database, &backup_pod.join("tmp"), None);
        server.sql(
            "susemanager",
            DB_USER,
            "DELETE FROM rhnServer WHERE id % 3 = 0; UPDATE suseTypes SET label = 'changed' WHERE id < 10;",
        );
        assert_ne!(server.digest(), template.digest);
    }

    // --rollback's restore Job: the backup at /migration/source, the database's volume at
    // /migration/target.
    let restore_pod = case.pod("restore");
    case.mount(&backup, &restore_pod.join("migration/source"));
    case.mount(&database, &restore_pod.join("migration/target"));
    let restored = restore_pod.join("migration/target");
    let out = run_as_postgres(
        installs,
        &restore_pod,
        &render_copy(Copy::Restore, "", &restore_pod.display().to_string()),
        &[],
    );
    assert!(out.status.success(), "restore: {}", text(&out));
    assert!(!restored.join(BACKUP_MARKER).exists());
    assert_eq!(
        controldata(
            installs,
            16,
            &restored,
            &restore_pod.join("tmp"),
            "Database cluster state"
        ),
        "shut down"
    );
    let server = Server::start(installs, 16, &restored, &restore_pod.join("tmp"), None);
    assert_eq!(server.digest(), template.digest, "the restored data");
    server.stop();
}

/// D2 alone, on PostgreSQL 16: the migration SQL run twice queues one overview task per server,
/// and repoints the distributions the same way.
#[test]
fn the_migration_sql_run_twice_leaves_the_rows_of_one_run() {
    let Some(installs) = servers::installs("the migration SQL") else {
        return;
    };
    let template = source::template(installs, false);
    let case = Case::new(installs);
    let pod = case.pod("server");
    let data = case.path("var-pgsql");
    case.copy_template(&template.data, &data);
    fs::create_dir_all(pod.join("etc/rhn")).expect("mkdir");
    let conf = rhn_conf().replace("db_host = localhost", "db_host = db");
    fs::write(pod.join("etc/rhn/rhn.conf"), conf).expect("write");
    let port = free_port();
    let server = Server::start(installs, 16, &data, &pod.join("tmp"), Some(port));
    // This server asks scram-sha-256 over TCP, which an md5-stored password cannot answer (the
    // re-hash's business): spacewalk gets its password stored as scram first.
    server.sql(
        "postgres",
        "postgres",
        &format!(
            "SET password_encryption = 'scram-sha-256'; ALTER ROLE {DB_USER} PASSWORD '{}';",
            DB_PASSWORD.replace('\'', "''")
        ),
    );
    let before = server.digest();
    for run in 1..=2 {
        let out = run_migration_sql(&pod, &port.to_string());
        assert!(out.status.success(), "run {run}: {}", text(&out));
        assert_eq!(
            server.sql(
                "susemanager",
                "postgres",
                "SELECT count(*) || ' ' || count(DISTINCT task_data) FROM rhnTaskQueue WHERE task_name = 'update_system_overview'"
            ),
            format!("{SERVERS} {SERVERS}"),
            "after run {run}"
        );
    }
    let after = server.digest();
    for (k, v) in &before {
        if !changed_by_migration_sql(k) {
            assert_eq!(after.get(k), Some(v), "{k}");
        }
    }
    // The task that was queued before is still there, once.
    assert_eq!(
        server.sql(
            "susemanager",
            "postgres",
            "SELECT count(*) FROM rhnTaskQueue WHERE task_name <> 'update_system_overview'"
        ),
        "1"
    );
    server.stop();
}
