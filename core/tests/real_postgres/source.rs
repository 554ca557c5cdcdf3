//! A classic Uyuni server's PostgreSQL 16 data directory, made once per test binary and kind
//! (data checksums off or on) as a template that each test copies: initdb'ed by PostgreSQL 16
//! as its own uid, a SUSE-style `postgresql.conf` and `pg_hba.conf`, the roles `spacewalk` and
//! `pythia_susemanager` with md5 passwords holding spaces and quotes, and in database
//! `susemanager` the types Uyuni's schema uses and the tables `MIGRATION_SQL` touches (their
//! columns as in uyuni-project/uyuni `schema/spacewalk/common/tables/rhnTaskQueue.sql`,
//! `rhnKickstartableTree.sql`, `rhnTaskoRun.sql`, with the `id` column and sequence
//! `rhn_task_queue_id_seq` of today's schema; only the columns the SQL uses and a few others).
//! Also [`digest`], each table's count and content, for comparing two clusters.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::servers::{self, Installs, pg_user, sh_as_pg, text};

/// The migrated roles' passwords, as the credential Secrets carry them.
pub const DB_USER: &str = "spacewalk";
pub const DB_PASSWORD: &str = "s3cret pass#1 'quoted' \"too\"";
pub const REPORT_DB_USER: &str = "pythia_susemanager";
pub const REPORT_DB_PASSWORD: &str = "another one with spaces and a ' quote";
/// Servers in `rhnServer`: the system-overview tasks the migration SQL queues.
pub const SERVERS: usize = 40;

/// What a classic SUSE server adds to initdb's `postgresql.conf` (smdba's tuning and
/// mgr-setup's TLS and logging): SSL on with files the pods do not have, listening everywhere,
/// the collector logging into the data directory.
const SUSE_POSTGRESQL_CONF: &str = "
# Added by the classic server's setup
listen_addresses = '*'
max_connections = 400
password_encryption = md5
# ssl = on: see WHEELS_WITHOUT_SSL
ssl_cert_file = '/etc/pki/tls/certs/spacewalk.crt'
ssl_key_file = '/etc/pki/tls/private/pg-spacewalk.key'
ssl_ca_file = '/etc/pki/trust/anchors/RHN-ORG-TRUSTED-SSL-CERT'
logging_collector = on
log_directory = 'log'
log_line_prefix = '%m %d %u [%p] '
unix_socket_directories = '/run/postgresql'
timezone = 'Europe/Berlin'
fsync = off
";

const SUSE_PG_HBA_CONF: &str =
    "# TYPE  DATABASE        USER            ADDRESS                 METHOD
local   all             postgres                                peer
local   all             all                                     peer
host    all             all             127.0.0.1/32            md5
host    all             all             ::1/128                 md5
";

/// The wheels' PostgreSQL is built without OpenSSL (`pg_config --configure`: neither has
/// `--with-ssl`), and refuses to start with `ssl = on` in its configuration file even when the
/// command line says `-c ssl=off` ("SSL is not supported by this build": the file's settings are
/// checked before the command line's win). A classic source and the fixed-up data have
/// `ssl = on`; the tests set it off where a server of the wheels starts on them, and the stub
/// tests of `database_scripts.rs` check that the scripts start every server with `-c ssl=off`.
pub const WHEELS_WITHOUT_SSL: &str = "ssl = off # the tests' PostgreSQL has no SSL\n";

/// `postgresql.conf` of `data` with `ssl = on` replaced by [`WHEELS_WITHOUT_SSL`].
pub fn ssl_off(data: &Path) {
    let conf = data.join("postgresql.conf");
    let text = fs::read_to_string(&conf).expect("postgresql.conf");
    assert!(text.contains("\nssl = on\n"), "{text}");
    fs::write(
        &conf,
        text.replace("\nssl = on\n", &format!("\n{WHEELS_WITHOUT_SSL}")),
    )
    .expect("write");
}

/// The roles and the databases, as the superuser.
fn roles_sql() -> String {
    let q = |s: &str| s.replace('\'', "''");
    format!(
        "SET password_encryption = 'md5';
CREATE ROLE {DB_USER} LOGIN PASSWORD '{}';
CREATE ROLE {REPORT_DB_USER} LOGIN PASSWORD '{}';
CREATE DATABASE susemanager OWNER {DB_USER} ENCODING 'UTF8';
CREATE DATABASE reportdb OWNER {REPORT_DB_USER} ENCODING 'UTF8';
",
        q(DB_PASSWORD),
        q(REPORT_DB_PASSWORD)
    )
}

/// The data in `susemanager`, as `spacewalk`.
const SUSEMANAGER_SQL: &str = r#"
CREATE TABLE web_customer (id NUMERIC PRIMARY KEY, name VARCHAR(128) NOT NULL);
INSERT INTO web_customer VALUES (1, 'SUSE'), (2, 'Zweite Organisation – Größe, ÄÖÜ, 日本語');
CREATE TABLE rhnServer (
  id NUMERIC PRIMARY KEY,
  org_id NUMERIC NOT NULL REFERENCES web_customer (id) ON DELETE CASCADE,
  name VARCHAR(128) NOT NULL,
  created TIMESTAMPTZ DEFAULT current_timestamp NOT NULL
);
INSERT INTO rhnServer (id, org_id, name, created)
  SELECT 1000010000 + i, 1 + i % 2, 'minion-' || i || '.example.com',
         timestamptz '2025-03-30 01:30:00+01' + i * interval '17 minutes'
  FROM generate_series(1, 40) i;
CREATE SEQUENCE rhn_task_queue_id_seq;
CREATE TABLE rhnTaskQueue (
  id NUMERIC NOT NULL PRIMARY KEY,
  org_id NUMERIC NOT NULL REFERENCES web_customer (id) ON DELETE CASCADE,
  task_name VARCHAR(64) NOT NULL,
  task_data NUMERIC,
  priority NUMERIC DEFAULT (0),
  earliest TIMESTAMPTZ DEFAULT (current_timestamp) NOT NULL
);
INSERT INTO rhnTaskQueue (id, org_id, task_name, task_data, earliest)
  VALUES (nextval('rhn_task_queue_id_seq'), 1, 'update_errata_cache_by_channel', 101, timestamptz '2025-01-01 00:00:00+00');
CREATE TABLE rhnTaskoBunch (id NUMERIC PRIMARY KEY, name VARCHAR(80) NOT NULL UNIQUE);
INSERT INTO rhnTaskoBunch VALUES (1, 'update-system-overview-bunch'), (2, 'cleanup-data-bunch');
CREATE TABLE rhnTaskoTemplate (
  id NUMERIC PRIMARY KEY,
  bunch_id NUMERIC NOT NULL REFERENCES rhnTaskoBunch (id),
  ordering NUMERIC DEFAULT (0) NOT NULL
);
INSERT INTO rhnTaskoTemplate VALUES (11, 1, 0), (12, 2, 0);
CREATE TABLE rhnTaskoRun (
  id NUMERIC NOT NULL PRIMARY KEY,
  template_id NUMERIC NOT NULL REFERENCES rhnTaskoTemplate (id),
  org_id NUMERIC,
  start_time TIMESTAMPTZ,
  status VARCHAR(12)
);
-- Only another bunch has run: the overview is still to be computed.
INSERT INTO rhnTaskoRun VALUES (21, 12, NULL, timestamptz '2025-06-01 03:00:00+02', 'FINISHED');
CREATE TABLE rhnKickstartableTree (
  id NUMERIC NOT NULL PRIMARY KEY,
  org_id NUMERIC REFERENCES web_customer (id) ON DELETE CASCADE,
  label VARCHAR(64) NOT NULL,
  base_path VARCHAR(256) NOT NULL,
  boot_image VARCHAR(128) DEFAULT ('spacewalk-koan'),
  last_modified TIMESTAMPTZ DEFAULT (current_timestamp) NOT NULL
);
CREATE UNIQUE INDEX rhn_kstree_oid_label_uq ON rhnKickstartableTree (org_id, label);
INSERT INTO rhnKickstartableTree (id, org_id, label, base_path, last_modified) VALUES
  (1, 1, 'sles15sp6', '/var/spacewalk/mnt/sles15sp6', timestamptz '2024-01-01 00:00:00+00'),
  (2, 2, 'sles15sp6', '/var/spacewalk/mnt/sles15sp6', timestamptz '2024-01-01 00:00:00+00'),
  (3, 1, 'leap15.6', '/srv/isos/leap-15.6', timestamptz '2024-01-01 00:00:00+00');

-- The types of Uyuni's schema, a view, a sequence, a plpgsql function and its trigger.
CREATE FUNCTION suse_touch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.modified := timestamptz '2000-01-01 00:00:00+00';
  RETURN NEW;
END
$$;
CREATE TABLE suseTypes (
  id BIGSERIAL PRIMARY KEY,
  small SERIAL NOT NULL,
  label TEXT NOT NULL,
  blob BYTEA,
  at TIMESTAMPTZ,
  amount NUMERIC(20, 6),
  doc JSONB,
  tags TEXT[],
  nums INTEGER[],
  modified TIMESTAMPTZ
);
CREATE TRIGGER suse_types_touch BEFORE INSERT OR UPDATE ON suseTypes
  FOR EACH ROW EXECUTE FUNCTION suse_touch();
INSERT INTO suseTypes (label, blob, at, amount, doc, tags, nums)
  SELECT 'Zeile ' || i || ' – größer, 日本語 ✓ "quoted" ''single''',
         decode(md5(i::text), 'hex') || '\x00ff'::bytea,
         timestamptz '2024-02-29 12:00:00.123456+01' + i * interval '1 hour 1 second',
         i * 3.141593,
         jsonb_build_object('i', i, 'name', 'ü' || i, 'list', jsonb_build_array(i, i * 2, null), 'f', i / 7.0),
         ARRAY['a' || i, 'ö', NULL],
         ARRAY[i, -i]
  FROM generate_series(1, 2000) i;
INSERT INTO suseTypes (label) VALUES ('');
CREATE VIEW suseTypesView AS SELECT id, label, amount FROM suseTypes WHERE id % 7 = 0;
CREATE SEQUENCE suse_standalone_seq START 100;
SELECT nextval('suse_standalone_seq'), nextval('suse_standalone_seq');
CREATE TABLE suseBlobs (id SERIAL PRIMARY KEY, content OID NOT NULL);
INSERT INTO suseBlobs (content)
  SELECT lo_from_bytea(0, convert_to('large object ' || repeat('ä€', 20000), 'UTF8'));
"#;

/// The report database's data, as its owner.
const REPORTDB_SQL: &str = r#"
CREATE TABLE system (system_id BIGINT PRIMARY KEY, hostname TEXT NOT NULL, synced TIMESTAMPTZ NOT NULL);
INSERT INTO system SELECT i, 'host-' || i || '.example.com', timestamptz '2025-01-01 00:00:00+00' + i * interval '1 day'
  FROM generate_series(1, 100) i;
"#;

/// The query listing one statement per table, view, sequence and catalogue part to compare:
/// `\gexec` runs each, and each prints `NAME<TAB>COUNT<TAB>MD5` (rows in their text form,
/// sorted in C order, which is the same whatever the major).
const DIGEST_SQL: &str = r#"\set ON_ERROR_STOP on
SET timezone = 'UTC';
SET DateStyle = 'ISO';
SELECT format(CASE WHEN c.relkind = 'S'
                THEN 'SELECT %L, 1, last_value || '' '' || is_called FROM %I.%I'
                ELSE 'SELECT %L, count(*), md5(coalesce(string_agg(t::text, E''\n'' ORDER BY t::text COLLATE "C"), '''')) FROM %I.%I t' END,
              c.relkind::text || ' ' || n.nspname || '.' || c.relname, n.nspname, c.relname)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S')
    AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  ORDER BY 1
\gexec
SELECT 'large objects', count(*), md5(coalesce(string_agg(m.oid::text || ':' || md5(lo_get(m.oid)), ',' ORDER BY m.oid), ''))
  FROM pg_largeobject_metadata m;
SELECT 'functions', count(*), md5(coalesce(string_agg(proname || ':' || md5(prosrc), ',' ORDER BY proname), ''))
  FROM pg_proc WHERE pronamespace = 'public'::regnamespace;
SELECT 'triggers', count(*), coalesce(string_agg(tgname || ' on ' || tgrelid::regclass::text, ',' ORDER BY tgname), '')
  FROM pg_trigger WHERE NOT tgisinternal;
"#;

/// Each database's [`DIGEST_SQL`] lines, keyed `DATABASE NAME`: count and content hash.
pub type Digest = BTreeMap<String, String>;

/// Digests `susemanager` and `reportdb` on a server listening on socket directory `socket` and
/// `port`, through `psql` of `bin`.
pub fn digest(bin: &Path, dir: &Path, socket: &Path, port: &str) -> Digest {
    let mut digest = Digest::new();
    for db in ["susemanager", "reportdb"] {
        let out = sh_as_pg(
            bin,
            dir,
            &format!(
                "psql -X -q -tA -F \"$(printf '\\t')\" -h {} -p {port} -U postgres -d {db} <<'SQL'\n{DIGEST_SQL}SQL",
                socket.display()
            ),
            &[],
        );
        assert!(out.status.success(), "digest of {db}: {}", text(&out));
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let (name, rest) = line.split_once('\t').unwrap_or((line, ""));
            digest.insert(format!("{db} {name}"), rest.to_owned());
        }
    }
    digest
}

/// The verification Job's script (`db-verify.sh`) on `susemanager` and `reportdb` of the server
/// on socket directory `socket` and `port`, with psql of `bin`: its output.
pub fn verify(bin: &Path, dir: &Path, socket: &Path, port: &str) -> String {
    let script = uyuni_core::scripts::database::render_verify(&["susemanager", "reportdb"], "");
    let socket = socket.display().to_string();
    let mut env: Vec<(&str, &str)> = script.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    env.extend([
        ("PGHOST", socket.as_str()),
        ("PGPORT", port),
        ("PGUSER", "postgres"),
    ]);
    let out = sh_as_pg(bin, dir, &script.text, &env);
    assert!(out.status.success(), "db-verify.sh: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A template data directory, the digest of its data and the verification's output.
pub struct Template {
    pub data: PathBuf,
    pub digest: Digest,
    pub verify: String,
}

/// The template of a classic source with data checksums `checksums`, made on first use.
pub fn template(installs: &'static Installs, checksums: bool) -> &'static Template {
    static OFF: OnceLock<Template> = OnceLock::new();
    static ON: OnceLock<Template> = OnceLock::new();
    let cell = if checksums { &ON } else { &OFF };
    cell.get_or_init(|| make_template(installs, checksums))
}

/// Where the templates live: a directory of this process under /tmp (the servers' user must
/// reach it); those of processes that ended are removed first.
fn templates_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        const PREFIX: &str = "kubectl-uyuni-pgsource-";
        if let Ok(entries) = fs::read_dir("/tmp") {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().to_string();
                if let Some(pid) = name.strip_prefix(PREFIX)
                    && !Path::new(&format!("/proc/{pid}")).exists()
                {
                    let _ = fs::remove_dir_all(e.path());
                }
            }
        }
        let dir = PathBuf::from(format!("/tmp/{PREFIX}{}", std::process::id()));
        fs::create_dir_all(&dir).expect("mkdir");
        if servers::is_root() {
            let u = pg_user();
            std::os::unix::fs::chown(&dir, Some(u.uid), Some(u.gid)).expect("chown");
        }
        dir
    })
    .clone()
}

fn make_template(installs: &Installs, checksums: bool) -> Template {
    let dir = templates_dir().join(if checksums { "on" } else { "off" });
    let data = dir.join("data");
    let _ = fs::remove_dir_all(&dir);
    let bin = installs.bin(16);
    let work = templates_dir();
    let script = format!(
        r#"set -euo pipefail
D={data}
mkdir -p {dir} {dir}/sock
initdb -D "$D" -U postgres -A peer --locale=C.UTF-8 -E UTF8 --no-sync {checksums} >/dev/null
cat >>"$D/postgresql.conf" <<'EOF'
{SUSE_POSTGRESQL_CONF}EOF
cat >"$D/pg_hba.conf" <<'EOF'
{SUSE_PG_HBA_CONF}EOF
printf 'local all all trust\n' >{dir}/hba
pg_ctl start -D "$D" -w -l {dir}/log -o "-c listen_addresses='' -c port=5432 -c unix_socket_directories='{dir}/sock' -c hba_file='{dir}/hba' -c ssl=off" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -h {dir}/sock -U postgres -d postgres <<'SQL'
{roles}SQL
psql -X -q -v ON_ERROR_STOP=1 -h {dir}/sock -U {DB_USER} -d susemanager <<'SQL'
{SUSEMANAGER_SQL}SQL
psql -X -q -v ON_ERROR_STOP=1 -h {dir}/sock -U {REPORT_DB_USER} -d reportdb <<'SQL'
{REPORTDB_SQL}SQL
"#,
        data = data.display(),
        dir = dir.display(),
        checksums = if checksums { "--data-checksums" } else { "" },
        roles = roles_sql(),
    );
    let out = sh_as_pg(bin, &work, &script, &[]);
    assert!(out.status.success(), "the classic source: {}", text(&out));
    let digest = digest(bin, &work, &dir.join("sock"), "5432");
    let verify = verify(bin, &work, &dir.join("sock"), "5432");
    // No statistics yet: those the upgrade has after it are its own.
    let stats = sh_as_pg(
        bin,
        &work,
        &format!(
            "psql -X -tA -h {}/sock -U postgres -d susemanager -c \"SELECT count(*) FROM pg_stats WHERE tablename = 'susetypes'\"",
            dir.display()
        ),
        &[],
    );
    assert_eq!(
        String::from_utf8_lossy(&stats.stdout).trim(),
        "0",
        "{}",
        text(&stats)
    );
    let stop = sh_as_pg(
        bin,
        &work,
        &format!("pg_ctl stop -D {} -m fast -w >/dev/null", data.display()),
        &[],
    );
    assert!(stop.status.success(), "{}", text(&stop));
    assert!(
        digest
            .get("susemanager r public.susetypes")
            .is_some_and(|v| v.starts_with("2001\t")),
        "{digest:?}"
    );
    Template {
        data,
        digest,
        verify,
    }
}
