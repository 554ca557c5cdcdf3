//! The database path of a migration on real PostgreSQL 16 and 18, on generated rows, beside a
//! plain `pg_dump | psql` of the same data in the same run:
//! `cargo bench -p kubectl-uyuni-core --bench database_path` (as root, with `UYUNI_PG16_BIN` and
//! `UYUNI_PG18_BIN` set as scripts/test.sh sets them; size: `UYUNI_BENCH_PG_MB`, default 256).
//! Each figure is one run's wall time and MiB/s of the data directory's size; the steps are
//! those of the Jobs: the fix-up script, `pg_upgrade` in copy mode, `pg_checksums --enable`,
//! `vacuumdb --missing-stats-only`, and the whole upgrade script (all three, as the Job runs
//! them). It prints figures; it asserts nothing but that each step succeeded.

#[path = "../tests/real_postgres/servers.rs"]
mod servers;

use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use servers::{pg_user, sh_as_pg, text};
use uyuni_core::scripts::database::{render_fixup, render_upgrade};

fn ok(out: Output, what: &str) {
    assert!(out.status.success(), "{what}: {}", text(&out));
}

fn du_mib(dir: &Path) -> f64 {
    let out = Command::new("du").arg("-sk").arg(dir).output().expect("du");
    let kib: f64 = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn report(what: &str, took: Duration, mib: f64) {
    let s = took.as_secs_f64();
    println!("{what:<50} {s:>8.2} s  {:>8.1} MiB/s", mib / s.max(1e-9));
}

/// A Job's script as root, with this machine's postgres as the scripts' POSTGRES_UID.
fn as_root(script: &uyuni_core::scripts::JobScript, root: &Path) -> Output {
    let uid = pg_user().uid.to_string();
    servers::run_as_root(root, script, &[("POSTGRES_UID", &uid)])
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Some(installs) = servers::installs("the database benchmark") else {
        return;
    };
    assert!(
        servers::is_root(),
        "the benchmark runs the Jobs' scripts as root"
    );
    let mb: u64 = std::env::var("UYUNI_BENCH_PG_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let dir = servers::pg_tempdir();
    let d = dir.path();
    let (b16, b18) = (installs.bin(16), installs.bin(18));
    let pod = d.join("pod");
    for major in [16, 18] {
        let link = pod.join(format!("usr/lib/postgresql{major}/bin"));
        fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(installs.bin(major), &link).expect("symlink");
    }
    fs::create_dir_all(pod.join("tmp")).expect("mkdir");
    fs::create_dir_all(pod.join("migration")).expect("mkdir");
    let u = pg_user();
    let chown = |p: &Path| std::os::unix::fs::chown(p, Some(u.uid), Some(u.gid)).expect("chown");
    chown(&pod.join("tmp"));

    // The source: rows of the kinds Uyuni's big tables hold (text, bytea, timestamps, jsonb),
    // about 600 bytes each, in PostgreSQL 16 without checksums, as classic servers have it.
    let rows = mb * 1024 * 1024 / 600;
    let started = Instant::now();
    ok(
        sh_as_pg(
            b16,
            d,
            &format!(
                r#"set -euo pipefail
initdb -D {d}/source -U postgres -A trust --locale=C.UTF-8 -E UTF8 --no-sync >/dev/null
mkdir -p {d}/s16
pg_ctl start -D {d}/source -w -l {d}/s16.log -o "-c listen_addresses='' -c unix_socket_directories='{d}/s16' -c fsync=off -c max_wal_size=4GB" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -h {d}/s16 -U postgres -d postgres <<'SQL'
CREATE DATABASE susemanager;
\c susemanager
CREATE TABLE rhnPackageBench (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL, checksum TEXT,
  header BYTEA, built TIMESTAMPTZ, extra JSONB);
INSERT INTO rhnPackageBench (name, checksum, header, built, extra)
  SELECT 'package-' || i || '-' || md5(i::text), md5(i::text) || md5((i * 7)::text),
         decode(repeat(md5(i::text), 6), 'hex'), timestamptz '2020-01-01' + i * interval '1 minute',
         jsonb_build_object('i', i, 'arch', 'x86_64', 'v', md5((i * 3)::text))
  FROM generate_series(1, {rows}) i;
CREATE INDEX ON rhnPackageBench (name);
SQL
pg_ctl stop -D {d}/source -m fast -w >/dev/null
"#,
                d = d.display()
            ),
            &[],
        ),
        "generating the source",
    );
    // The rates are of the tables' files (base/): what pg_upgrade copies and pg_checksums
    // rewrites; the directory's WAL is neither.
    let source_mib = du_mib(&d.join("source/base"));
    println!(
        "database path benchmark: {rows} rows, {source_mib:.0} MiB of table files (base/; the data directory {:.0} MiB), generated in {:.1} s, {} cores",
        du_mib(&d.join("source")),
        started.elapsed().as_secs_f64(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );

    // pg_dump | psql into a new PostgreSQL 18 cluster (with checksums, its default), both
    // servers on sockets: what a dump-and-restore migration would cost.
    let started = Instant::now();
    ok(
        sh_as_pg(
            b18,
            d,
            &format!(
                r#"set -euo pipefail
initdb -D {d}/dumped -U postgres -A trust --locale=C.UTF-8 -E UTF8 --no-sync >/dev/null
mkdir -p {d}/s18
{b16}/pg_ctl start -D {d}/source -w -l {d}/s16.log -o "-c listen_addresses='' -c unix_socket_directories='{d}/s16'" >/dev/null
pg_ctl start -D {d}/dumped -w -l {d}/s18.log -o "-c listen_addresses='' -c unix_socket_directories='{d}/s18' -c max_wal_size=4GB" >/dev/null
psql -X -q -h {d}/s18 -U postgres -d postgres -c 'CREATE DATABASE susemanager'
pg_dump -h {d}/s16 -U postgres -d susemanager | psql -X -q -v ON_ERROR_STOP=1 -h {d}/s18 -U postgres -d susemanager >/dev/null
pg_ctl stop -D {d}/dumped -m fast -w >/dev/null
{b16}/pg_ctl stop -D {d}/source -m fast -w >/dev/null
"#,
                d = d.display(),
                b16 = b16.display()
            ),
            &[],
        ),
        "pg_dump | psql",
    );
    report(
        "pg_dump | psql (PostgreSQL 18, checksums on)",
        started.elapsed(),
        source_mib,
    );
    let _ = fs::remove_dir_all(d.join("dumped"));

    // The fix-up Job's script (root): the ownership of every file, the configuration.
    let fixroot = d.join("fixup");
    fs::create_dir_all(fixroot.join("var/lib/pgsql")).expect("mkdir");
    fs::create_dir_all(fixroot.join("etc/rhn")).expect("mkdir");
    fs::create_dir_all(fixroot.join("var/spacewalk")).expect("mkdir");
    fs::create_dir_all(fixroot.join("tmp")).expect("mkdir");
    fs::write(fixroot.join("etc/rhn/rhn.conf"), "db_host = localhost\n").expect("write");
    fs::rename(d.join("source"), fixroot.join("var/lib/pgsql/data")).expect("mv");
    let started = Instant::now();
    ok(
        as_root(
            &render_fixup(Some(16), &fixroot.display().to_string()),
            &fixroot,
        ),
        "the fix-up",
    );
    report("fix-up script", started.elapsed(), source_mib);
    // Its configuration asks for SSL, which the benchmark's servers do not have.
    let conf = fixroot.join("var/lib/pgsql/data/postgresql.conf");
    let text_conf = fs::read_to_string(&conf)
        .expect("conf")
        .replace("ssl = on", "ssl = off");
    fs::write(&conf, text_conf).expect("write");
    fs::rename(fixroot.join("var/lib/pgsql/data"), d.join("source")).expect("mv");

    // The steps one by one, on a copy.
    let copy = |to: &str| {
        ok(
            Command::new("cp")
                .arg("-a")
                .arg(d.join("source"))
                .arg(d.join(to))
                .output()
                .expect("cp"),
            "copying the source",
        );
    };
    copy("old");
    let started = Instant::now();
    ok(
        sh_as_pg(
            b18,
            d,
            &format!(
                r#"set -euo pipefail
initdb -D {d}/new -U postgres -A trust --locale=C.UTF-8 -E UTF8 --no-data-checksums >/dev/null
mkdir -p {d}/up && cd {d}/up
printf 'local all all trust\n' >{d}/hba
pg_upgrade -b {b16} -B {b18} -d {d}/old -D {d}/new -o "-c hba_file={d}/hba -c ssl=off" -O "-c hba_file={d}/hba -c ssl=off" >/dev/null
"#,
                d = d.display(),
                b16 = b16.display(),
                b18 = b18.display()
            ),
            &[],
        ),
        "pg_upgrade",
    );
    report(
        "initdb + pg_upgrade (copy mode)",
        started.elapsed(),
        source_mib,
    );
    let new_mib = du_mib(&d.join("new/base"));
    let started = Instant::now();
    ok(
        sh_as_pg(
            b18,
            d,
            &format!("pg_checksums --enable -D {}/new >/dev/null", d.display()),
            &[],
        ),
        "pg_checksums",
    );
    report("pg_checksums --enable", started.elapsed(), new_mib);
    let started = Instant::now();
    ok(
        sh_as_pg(
            b18,
            d,
            &format!(
                r#"set -euo pipefail
mkdir -p {d}/sv
pg_ctl start -D {d}/new -w -l {d}/sv.log -o "-c listen_addresses='' -c unix_socket_directories='{d}/sv' -c hba_file={d}/hba -c ssl=off" >/dev/null
vacuumdb -q -h {d}/sv --all --analyze-in-stages --missing-stats-only >/dev/null
pg_ctl stop -D {d}/new -m fast -w >/dev/null
"#,
                d = d.display()
            ),
            &[],
        ),
        "vacuumdb",
    );
    report(
        "vacuumdb --missing-stats-only (with start, stop)",
        started.elapsed(),
        new_mib,
    );
    let started = Instant::now();
    ok(
        sh_as_pg(
            b18,
            d,
            &format!(
                r#"set -euo pipefail
pg_ctl start -D {d}/new -w -l {d}/sv.log -o "-c listen_addresses='' -c unix_socket_directories='{d}/sv' -c hba_file={d}/hba -c ssl=off" >/dev/null
vacuumdb -q -h {d}/sv --all --analyze-only >/dev/null
pg_ctl stop -D {d}/new -m fast -w >/dev/null
"#,
                d = d.display()
            ),
            &[],
        ),
        "vacuumdb --analyze-only",
    );
    report(
        "vacuumdb --analyze-only (not in the Job)",
        started.elapsed(),
        new_mib,
    );
    let _ = fs::remove_dir_all(d.join("old"));
    let _ = fs::remove_dir_all(d.join("new"));

    // The whole upgrade Job's script, as the Job runs it.
    fs::rename(d.join("source"), pod.join("migration/source")).expect("mv");
    fs::create_dir_all(pod.join("migration/target")).expect("mkdir");
    fs::create_dir_all(pod.join("etc/sysconfig")).expect("mkdir");
    fs::write(
        pod.join("etc/sysconfig/postgresql"),
        "POSTGRES_LANG=\"C.UTF-8\"\n",
    )
    .expect("write");
    let started = Instant::now();
    ok(
        as_root(&render_upgrade(16, &pod.display().to_string()), &pod),
        "the upgrade script",
    );
    report(
        "db-upgrade.sh (pg_upgrade, checksums, statistics)",
        started.elapsed(),
        source_mib,
    );
}
