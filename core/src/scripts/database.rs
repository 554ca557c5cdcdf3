//! The database Jobs' scripts (images-today §E.1 #3, #4, #6): the fix-up of the synced data,
//! the PostgreSQL major upgrade, the re-hash of md5 passwords, and the migration-only SQL.
//! Each is a file of `core/scripts/` whose parameters are environment variables
//! ([`JobScript`]). No script holds a secret: passwords reach them as `secretKeyRef` environment.
//!
//! Like the data-sync script, each takes a `local_root` (`LOCAL_ROOT`) that prefixes every path
//! of the pod's file system, so tests can run it against a temporary directory with stub
//! commands on PATH. The fixed paths below are written in the scripts too; a test keeps them
//! equal.

use super::{JobScript, records};
use crate::pg;

/// The PostgreSQL data directory, where the DB image mounts its volume (images-today §B.1).
pub const PGDATA: &str = "/var/lib/pgsql/data";
/// Where the upgrade Job mounts the synced data (the image's fixed paths, §B.4).
pub const UPGRADE_SOURCE: &str = "/migration/source";
/// Where the upgrade Job mounts the new, empty volume.
pub const UPGRADE_TARGET: &str = "/migration/target";
/// The setup-complete marker today's server image checks (images-today §A.3).
pub const SETUP_MARKER: &str = "/var/spacewalk/.MANAGER_SETUP_COMPLETE";
/// The marker classic `mgr-setup` wrote; the image moves it, we do too.
pub const LEGACY_SETUP_MARKER: &str = "/root/.MANAGER_SETUP_COMPLETE";
/// UID and GID of `postgres` in the DB and migration images (images-today §B.1, §B.4).
pub const POSTGRES_UID: u32 = 999;

/// Where the `db` pod mounts Secret `db-cert` (the official chart's layout, images-today §C.2),
/// and the files in it that PostgreSQL reads: the image's own convention (§B.2
/// `uyuni-postgres-config.sh`), also what a classic server used.
pub const DB_PKI_DIR: &str = "/etc/pki";
pub const DB_TLS_CERT_FILE: &str = "/etc/pki/tls/certs/spacewalk.crt";
pub const DB_TLS_KEY_FILE: &str = "/etc/pki/tls/private/pg-spacewalk.key";
pub const DB_TLS_CA_FILE: &str = "/etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT";

/// Settings the fix-up Job writes into the synced `postgresql.conf` (images-today §E.5 #2: it is
/// not known whether the DB image accepts a classic configuration as it is). In one place: the
/// server reaches the database through the `db` Service, so it must listen on every address;
/// external report-database clients still connect with TLS (images-today §A.7), so SSL is on
/// with the certificate and key the `db` pod mounts from Secret `db-cert` (whatever paths the
/// source used). Internal connections run without SSL anyway (`RHN_CONF_SETTINGS`). Every other
/// server started on the data (the upgrade, the password re-hash) has no certificate and starts
/// with `-c ssl=off`. A source's client-certificate and revocation files are not in the pod
/// (it mounts the server certificate and key only), and PostgreSQL would refuse to start on a
/// missing one: they are emptied (all three settings exist since PostgreSQL 14).
pub const POSTGRESQL_CONF_SETTINGS: &[(&str, &str)] = &[
    ("listen_addresses", "'*'"),
    ("ssl", "on"),
    ("ssl_cert_file", "'/etc/pki/tls/certs/spacewalk.crt'"),
    ("ssl_key_file", "'/etc/pki/tls/private/pg-spacewalk.key'"),
    ("ssl_ca_file", "''"),
    ("ssl_crl_file", "''"),
    ("ssl_crl_dir", "''"),
];

/// `rhn.conf` settings the fix-up Job makes sure of (the data-sync sets them already; checked
/// again because a later sync or a hand edit may have changed them). The ports are the `db` and
/// `reportdb` Services' ports, whatever the source used.
pub const RHN_CONF_SETTINGS: &[(&str, &str)] = &[
    ("db_host", "db"),
    ("db_port", "5432"),
    ("report_db_host", "reportdb"),
    ("report_db_port", "5432"),
    ("db_ssl_enabled", "0"),
    ("report_db_ssl_enabled", "0"),
    ("server.no_ssl", "1"),
];

/// The scripts (`core/scripts/db-*.sh`), run after [`super::LIB`].
pub const FIXUP_SCRIPT: &str = include_str!("../../scripts/db-fixup.sh");
pub const UPGRADE_SCRIPT: &str = include_str!("../../scripts/db-upgrade.sh");
pub const PASSWORDS_SCRIPT: &str = include_str!("../../scripts/db-passwords.sh");
pub const MIGRATION_SQL_SCRIPT: &str = include_str!("../../scripts/db-migration-sql.sh");

/// A settings table as `key<TAB>value` lines, for the fix-up's `conf_set_all`.
fn settings(table: &[(&str, &str)]) -> String {
    let rows: Vec<[&str; 2]> = table.iter().map(|(k, v)| [*k, *v]).collect();
    records(rows.iter().map(|r| &r[..]))
}

/// The fix-up of the synced data: flattens an old `data/data` layout, makes the data
/// PostgreSQL's (UID 999, mode 0700), makes the classic `postgresql.conf` usable in the DB pod,
/// points `rhn.conf` at the `db`/`reportdb` Services, and makes sure the setup marker exists so
/// the server image never runs first-start setup on migrated data. Safe to run again.
pub fn render_fixup(expected_major: Option<u32>, local_root: &str) -> JobScript {
    JobScript::new(
        FIXUP_SCRIPT,
        vec![
            (
                "EXPECTED_MAJOR",
                expected_major.map(|m| m.to_string()).unwrap_or_default(),
            ),
            (
                "POSTGRESQL_CONF_SETTINGS",
                settings(POSTGRESQL_CONF_SETTINGS),
            ),
            ("RHN_CONF_SETTINGS", settings(RHN_CONF_SETTINGS)),
        ],
        local_root,
    )
}

/// The copy of the stopped database's directory: an upgrade's backup, or a rollback's restore
/// (`core/scripts/db-copy.sh`).
pub const COPY_SCRIPT: &str = include_str!("../../scripts/db-copy.sh");

/// The file that marks a complete backup, in its top directory.
pub const BACKUP_MARKER: &str = ".kubectl-uyuni-backup";

/// Which way the copy goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copy {
    /// The database's volume into the backup; `of` says what it is a backup of.
    Backup,
    /// The backup into the database's volume.
    Restore,
}

/// The copy script with its parameters: `of`, what a backup is of (the images before the
/// upgrade), written into its marker.
pub fn render_copy(mode: Copy, of: &str, local_root: &str) -> JobScript {
    let mut env = vec![
        (
            "MODE",
            match mode {
                Copy::Backup => "backup",
                Copy::Restore => "restore",
            }
            .to_owned(),
        ),
        ("BACKUP_MARKER", BACKUP_MARKER.to_owned()),
    ];
    if mode == Copy::Backup {
        env.push(("BACKUP_OF", of.to_owned()));
    }
    JobScript::new(COPY_SCRIPT, env, local_root)
}

/// The PostgreSQL major upgrade from `from` to `to` (see [`render_upgrade`]), for an upgrade of
/// the images to a new PostgreSQL major.
pub fn render_upgrade_between(from: u32, to: u32, local_root: &str) -> JobScript {
    JobScript::new(
        UPGRADE_SCRIPT,
        vec![
            ("FROM_MAJOR", from.to_string()),
            ("TO_MAJOR", to.to_string()),
        ],
        local_root,
    )
}

/// The PostgreSQL major upgrade from `from` to [`pg::TARGET_MAJOR`], run as root in the
/// `server-database-migration` image: the target volume is emptied first (a re-run starts
/// over), `pg_upgrade` copies (no `--link`), and the source stays as the backup: a cleanly shut
/// down cluster of the old major with the same data, though `pg_upgrade`'s start of the old
/// server writes a few of its files (`core/scripts/db-upgrade.sh` says which). Then data
/// checksums as the target has them (enabled when it has none) and the statistics `pg_upgrade`
/// does not carry over.
pub fn render_upgrade(from: u32, local_root: &str) -> JobScript {
    JobScript::new(
        UPGRADE_SCRIPT,
        vec![
            ("FROM_MAJOR", from.to_string()),
            ("TO_MAJOR", pg::TARGET_MAJOR.to_string()),
        ],
        local_root,
    )
}

/// The roles whose passwords the re-hash Job checks: the variable with the role's name, the
/// variable with its password (both `secretKeyRef` environment of the Job), and the Secret they
/// come from, for messages. The names are the `db` container's (images-today §E.3).
pub const REHASHED_ROLES: [(&str, &str, &str); 2] = [
    (
        "MANAGER_USER",
        "MANAGER_PASS",
        crate::catalogue::names::DB_SECRET,
    ),
    (
        "REPORT_DB_USER",
        "REPORT_DB_PASS",
        crate::catalogue::names::REPORTDB_SECRET,
    ),
];

/// The superuser the re-hash connects as: the user `initdb` ran as, on a classic server and in
/// the upgrade image alike.
pub const PG_SUPERUSER: &str = "postgres";

/// The re-hash of md5 passwords. Today's DB image enforces `host all all all
/// scram-sha-256` in `pg_hba.conf` at every image change (images-today §B.3 `01-pg_hba.sh`);
/// a classic source may store its roles' passwords as md5 hashes, which `pg_upgrade` copies,
/// and such roles could not log in any more. Run as postgres (UID 999) in the DB image on the
/// data the `db` Deployment will use, after the upgrade and with the database stopped: a
/// temporary server without TCP, SSL or the data's `pg_hba.conf` (local trust, a socket in a
/// private directory), and for each migrated role with an md5 password, `ALTER ROLE` with the
/// migrated password under `password_encryption = 'scram-sha-256'`. Roles with a scram
/// password are left alone. The server is stopped on every exit. Safe to run again.
pub fn render_passwords(local_root: &str) -> JobScript {
    let roles = REHASHED_ROLES.map(|(user, password, secret)| [user, password, secret]);
    JobScript::new(
        PASSWORDS_SCRIPT,
        vec![
            ("TARGET_MAJOR", pg::TARGET_MAJOR.to_string()),
            ("PG_SUPERUSER", PG_SUPERUSER.to_owned()),
            ("REHASHED_ROLES", records(roles.iter().map(|r| &r[..]))),
        ],
        local_root,
    )
}

/// Repoints the auto-installable distributions to where the data-sync copied them, and queues
/// a system overview refresh until taskomatic has run one (reference §4.3 step 3; today's image
/// no longer does this, images-today §E.1 #6). The whole is idempotent, so that a second run
/// (the Job retries a connection that broke, which may follow a COMMIT that went through) leaves
/// the rows of one: the distributions' new paths map onto themselves, and a server that already
/// has an `update_system_overview` task queued gets no second one (as Uyuni's own schema
/// upgrades queue tasks, `schema/spacewalk/upgrade/`: `AND NOT EXISTS (SELECT 1 FROM
/// rhnTaskQueue ...)`). `core/tests/real_postgres.rs` runs it twice on a real server.
pub const MIGRATION_SQL: &str = r"\set ON_ERROR_STOP on
BEGIN;
SELECT MIN(CONCAT(org_id, '-', label)) AS target, base_path INTO TEMP TABLE dist_map
  FROM rhnKickstartableTree GROUP BY base_path;
UPDATE rhnKickstartableTree SET base_path = CONCAT('/srv/www/distributions/', target)
  FROM dist_map WHERE dist_map.base_path = rhnKickstartableTree.base_path;
DROP TABLE dist_map;
INSERT INTO rhnTaskQueue (id, org_id, task_name, task_data)
  SELECT nextval('rhn_task_queue_id_seq'), 1, 'update_system_overview', s.id
  FROM rhnServer s
  WHERE NOT EXISTS (SELECT 1 FROM rhnTaskoRun r
    JOIN rhnTaskoTemplate t ON r.template_id = t.id
    JOIN rhnTaskoBunch b ON t.bunch_id = b.id
    WHERE b.name = 'update-system-overview-bunch' LIMIT 1)
  AND NOT EXISTS (SELECT 1 FROM rhnTaskQueue q
    WHERE q.org_id = 1 AND q.task_name = 'update_system_overview' AND q.task_data = s.id);
COMMIT;
";

/// How often the migration-SQL Job tries to reach the database, and how long it waits between
/// two tries: about ten minutes in all, well within the Job's step timeout (`SHORT_JOB`).
pub const SQL_CONNECT_ATTEMPTS: u32 = 60;
pub const SQL_CONNECT_INTERVAL_SECONDS: u32 = 10;
/// libpq's limit on one connection attempt (`PGCONNECT_TIMEOUT`), so that a connection that
/// hangs instead of being refused also ends and is tried again.
pub const SQL_CONNECT_TIMEOUT_SECONDS: u32 = 10;

/// What libpq and psql print when the database cannot be reached over TCP (`db_host` is the
/// `db` Service) or does not take sessions yet; only these are tried again. Any other error (a wrong password, a failing statement) ends
/// the Job at once.
const SQL_RETRIED_ERRORS: &str = "connection refused|could not connect|the database system is (starting up|not yet accepting connections|shutting down|in recovery mode)|timeout expired|could not translate host name|server closed the connection unexpectedly|connection to server .* failed: no route to host";

/// The migration-only SQL Job: runs [`MIGRATION_SQL`] through `spacewalk-sql`, which
/// reads the connection from `rhn.conf` (pointing at the `db` Service by then). The `db` pod can
/// refuse connections for a while although it was ready once: the image runs its start-up and
/// upgrade hooks (server-postgresql's `uyuni-entrypoint.sh` and `docker-entrypoint-upgdb.d`,
/// marked by `/run/postgresql/upgrade_in_progress` in newer images) before PostgreSQL listens,
/// and a pod restarted meanwhile starts them again. A refused connection is therefore tried
/// again for a bounded time ([`SQL_CONNECT_ATTEMPTS`]); the SQL runs in one transaction and is
/// idempotent, so running it again after a broken connection is safe.
pub fn render_migration_sql(local_root: &str) -> JobScript {
    JobScript::new(
        MIGRATION_SQL_SCRIPT,
        vec![
            ("MIGRATION_SQL", MIGRATION_SQL.to_owned()),
            ("SQL_CONNECT_ATTEMPTS", SQL_CONNECT_ATTEMPTS.to_string()),
            (
                "SQL_CONNECT_INTERVAL",
                SQL_CONNECT_INTERVAL_SECONDS.to_string(),
            ),
            ("RETRIED_ERRORS", SQL_RETRIED_ERRORS.to_owned()),
            ("PGCONNECT_TIMEOUT", SQL_CONNECT_TIMEOUT_SECONDS.to_string()),
        ],
        local_root,
    )
}

/// The verification of a database's data (`core/scripts/db-verify.sh`): per table, the row
/// count and a hash of its rows in primary-key order (`pgcopydb compare`'s method), so that
/// the same data gives the same lines on the source's major and on the target's. Not wired into
/// a plan yet.
pub const VERIFY_SCRIPT: &str = include_str!("../../scripts/db-verify.sh");

/// The statements of the verification, for one database: fixed output settings (the rows' text
/// form depends on them, not on the major), one repeatable-read, read-only transaction, then
/// for every table outside the system schemas `SCHEMA.TABLE<TAB>ROWS<TAB>MD5`, where MD5 is
/// the md5 of the concatenated md5s of the rows' text, in primary-key order (all columns in
/// text order, `C` collation, for a table without one). Large objects count as one table,
/// `pg_largeobject`, hashed by object id and content. `\gexec` runs the statement each table's
/// row of the first query spells.
pub const VERIFY_SQL: &str = r#"\set ON_ERROR_STOP on
SET client_encoding = 'UTF8';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET TimeZone = 'UTC';
SET extra_float_digits = 1;
SET bytea_output = 'hex';
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;
SELECT format(
    'SELECT %L, count(*), md5(coalesce(string_agg(md5(t::text), '''' ORDER BY %s), '''')) FROM %I.%I t',
    n.nspname || '.' || c.relname,
    coalesce(
      (SELECT string_agg(format('t.%I', a.attname), ', ' ORDER BY array_position(i.indkey::int2[], a.attnum))
         FROM pg_index i
         JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY (i.indkey::int2[])
         WHERE i.indrelid = c.oid AND i.indisprimary),
      't::text COLLATE "C"'),
    n.nspname, c.relname)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 'p', 'm')
    AND n.nspname NOT IN ('pg_catalog', 'information_schema')
    AND n.nspname NOT LIKE 'pg\_%'
  ORDER BY n.nspname, c.relname
\gexec
SELECT 'pg_largeobject', count(*),
       md5(coalesce(string_agg(md5(m.oid::text || ':' || md5(lo_get(m.oid))), '' ORDER BY m.oid), ''))
  FROM pg_largeobject_metadata m;
COMMIT;
"#;

/// The verification script with its parameters: the databases to verify. The connection is
/// libpq's environment (`PGHOST`, `PGPORT`, `PGUSER`, and `PGPASSWORD` from a Secret), which
/// the Job sets.
pub fn render_verify(databases: &[&str], local_root: &str) -> JobScript {
    JobScript::new(
        VERIFY_SCRIPT,
        vec![
            ("VERIFY_DATABASES", databases.join("\n")),
            ("VERIFY_SQL", VERIFY_SQL.to_owned()),
        ],
        local_root,
    )
}
