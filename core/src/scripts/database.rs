//! The database Jobs' scripts (images-today §E.1 #3, #4, #6): the fix-up of the synced data,
//! the PostgreSQL major upgrade, and the migration-only SQL. Rendered for `bash -c`; every
//! rendered value goes through [`shell_quote`] into a variable first.
//!
//! Like the data-sync script, each takes a `local_root` that prefixes every path of the pod's
//! file system, so tests can run it against a temporary directory with stub commands on PATH.

use super::data_sync::shell_quote;
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
/// with `-c ssl=off`.
pub const POSTGRESQL_CONF_SETTINGS: &[(&str, &str)] = &[
    ("listen_addresses", "'*'"),
    ("ssl", "on"),
    ("ssl_cert_file", "'/etc/pki/tls/certs/spacewalk.crt'"),
    ("ssl_key_file", "'/etc/pki/tls/private/pg-spacewalk.key'"),
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

/// Helpers shared by the scripts: static text, no rendered values.
const HELPERS: &str = r#"
fail() {
  echo "ERROR: $*" >&2
  exit 1
}

trim_var() {
  local -n ref=$1
  ref=${ref#"${ref%%[![:space:]]*}"}
  ref=${ref%"${ref##*[![:space:]]}"}
}

# Sets key $1 to $2 in the `key = value` file $3: every active line of that key is replaced
# (commented lines are left alone), the line is appended when there is none. A second run
# changes nothing. Rewritten in place, which keeps the file's owner and mode.
conf_set() {
  local key=$1 value=$2 file=$3 line k found=0 tmp
  tmp=$(mktemp)
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ $line == *=* ]]; then
      k=${line%%=*}
      trim_var k
      if [ "$k" = "$key" ]; then
        printf '%s = %s\n' "$key" "$value"
        found=1
        continue
      fi
    fi
    printf '%s\n' "$line"
  done <"$file" >"$tmp"
  if [ "$found" -eq 0 ]; then
    printf '%s = %s\n' "$key" "$value" >>"$tmp"
  fi
  cat "$tmp" >"$file"
  rm -f -- "$tmp"
}

# The first line of PG_VERSION in directory $1, trimmed.
pg_major() {
  local v=''
  [ -f "$1/PG_VERSION" ] || return 1
  read -r v <"$1/PG_VERSION" || true
  trim_var v
  printf '%s' "$v"
}
"#;

struct Out(String);

impl Out {
    fn line(&mut self, s: &str) {
        self.0.push_str(s);
        self.0.push('\n');
    }
}

fn prelude(o: &mut Out, title: &str, local_root: &str) {
    o.line(&format!("# kubectl-uyuni: {title}. Rendered for bash."));
    o.line("set -euo pipefail");
    o.line("shopt -s inherit_errexit");
    o.line(&format!(
        "ROOT={}",
        shell_quote(local_root.trim_end_matches('/'))
    ));
    o.0.push_str(HELPERS);
    o.line("");
}

/// Renders the fix-up of the synced data: flattens an old `data/data` layout, makes the data
/// PostgreSQL's (UID 999, mode 0700), makes the classic `postgresql.conf` usable in the DB pod,
/// points `rhn.conf` at the `db`/`reportdb` Services, and makes sure the setup marker exists so
/// the server image never runs first-start setup on migrated data. Safe to run again.
pub fn render_fixup(expected_major: Option<u32>, local_root: &str) -> String {
    let q = shell_quote;
    let mut o = Out(String::new());
    prelude(
        &mut o,
        "fix-up of the synced database and configuration",
        local_root,
    );
    o.line(&format!("PGDATA=\"$ROOT\"{}", q(PGDATA)));
    o.line(&format!("RHN_CONF=\"$ROOT\"{}", q("/etc/rhn/rhn.conf")));
    o.line(&format!("MARKER=\"$ROOT\"{}", q(SETUP_MARKER)));
    o.line(&format!(
        "LEGACY_MARKER=\"$ROOT\"{}",
        q(LEGACY_SETUP_MARKER)
    ));
    o.line("");
    o.line("# A 5.0-style volume keeps the cluster in a data/ subdirectory: hard-link it up one");
    o.line("# level (no extra space; -f makes a re-run after an interruption finish the job).");
    o.line("if [ -f \"$PGDATA/data/PG_VERSION\" ]; then");
    o.line("  echo 'Flattening the data/data layout of the database'");
    o.line("  cp -alf -- \"$PGDATA/data/.\" \"$PGDATA/\"");
    o.line("  rm -rf -- \"$PGDATA/data\"");
    o.line("fi");
    o.line("major=$(pg_major \"$PGDATA\") || fail \"the synced database has no PG_VERSION\"");
    if let Some(expected) = expected_major {
        o.line(&format!("EXPECTED_MAJOR={}", q(&expected.to_string())));
        o.line("[ \"$major\" = \"$EXPECTED_MAJOR\" ] ||");
        o.line("  fail \"the synced database is PostgreSQL $major, the data sync reported $EXPECTED_MAJOR: run the migration again\"");
    }
    o.line("echo \"The synced database is PostgreSQL $major\"");
    o.line("");
    o.line(
        "# PostgreSQL runs as postgres (UID 999) in the images and wants its directory private.",
    );
    o.line(&format!(
        "chown -R {uid}:{uid} -- \"$PGDATA\"",
        uid = POSTGRES_UID
    ));
    o.line("chmod 0700 -- \"$PGDATA\"");
    o.line(
        "[ -f \"$PGDATA/postgresql.conf\" ] || fail \"the synced database has no postgresql.conf\"",
    );
    for (key, value) in POSTGRESQL_CONF_SETTINGS {
        o.line(&format!(
            "conf_set {} {} \"$PGDATA/postgresql.conf\"",
            q(key),
            q(value)
        ));
    }
    o.line("");
    o.line("[ -f \"$RHN_CONF\" ] || fail \"no /etc/rhn/rhn.conf in the etc-rhn volume: run the migration again to sync it\"");
    o.line("echo 'Pointing rhn.conf at the db and reportdb Services'");
    for (key, value) in RHN_CONF_SETTINGS {
        o.line(&format!("conf_set {} {} \"$RHN_CONF\"", q(key), q(value)));
    }
    o.line("");
    o.line("# Without the marker the server image would run first-start setup on migrated data.");
    o.line("if [ -e \"$MARKER\" ]; then");
    o.line("  echo 'The setup marker exists'");
    o.line("elif [ -e \"$LEGACY_MARKER\" ]; then");
    o.line("  echo 'Moving the setup marker from /root to /var/spacewalk'");
    o.line("  mv -- \"$LEGACY_MARKER\" \"$MARKER\"");
    o.line("else");
    o.line("  echo 'Writing the setup marker: the source server was set up'");
    o.line("  (umask 022 && : >\"$MARKER\")");
    o.line("fi");
    o.line("echo DONE");
    o.0
}

/// Renders the PostgreSQL major upgrade from `from` to [`pg::TARGET_MAJOR`], run as root in the
/// `server-database-migration` image: the target volume is emptied first (a re-run starts
/// over), `pg_upgrade` copies (no `--link`), and the source is only read: it stays as the backup.
pub fn render_upgrade(from: u32, local_root: &str) -> String {
    let q = shell_quote;
    let to = pg::TARGET_MAJOR;
    let mut o = Out(String::new());
    prelude(
        &mut o,
        &format!("PostgreSQL {from} to {to} upgrade"),
        local_root,
    );
    o.line(&format!("SOURCE=\"$ROOT\"{}", q(UPGRADE_SOURCE)));
    o.line(&format!("TARGET=\"$ROOT\"{}", q(UPGRADE_TARGET)));
    o.line(&format!("FROM={}", q(&from.to_string())));
    o.line(&format!("TO={}", q(&to.to_string())));
    o.line(&format!("PG_UID={POSTGRES_UID}"));
    o.line("OLD_BIN=\"$ROOT/usr/lib/postgresql$FROM/bin\"");
    o.line("NEW_BIN=\"$ROOT/usr/lib/postgresql$TO/bin\"");
    o.line("SYSCONFIG=\"$ROOT/etc/sysconfig/postgresql\"");
    o.line("WORK=$(mktemp -d)");
    o.line("trap 'rm -rf -- \"$WORK\"' EXIT");
    o.line("");
    o.line("# As postgres, with whichever tool the image has.");
    o.line("as_postgres() {");
    o.line("  if command -v setpriv >/dev/null; then");
    o.line("    setpriv --reuid=\"$PG_UID\" --regid=\"$PG_UID\" --clear-groups -- \"$@\"");
    o.line("  elif command -v runuser >/dev/null; then");
    o.line("    runuser -u postgres -- \"$@\"");
    o.line("  else");
    o.line("    fail 'neither setpriv nor runuser is available in the image'");
    o.line("  fi");
    o.line("}");
    o.line("");
    o.line("found=$(pg_major \"$SOURCE\") || fail \"no PG_VERSION in the source volume: the data sync did not complete\"");
    o.line("[ \"$found\" = \"$FROM\" ] ||");
    o.line("  fail \"the source volume holds PostgreSQL $found, expected $FROM: run the migration again\"");
    o.line("for tool in \"$OLD_BIN/postgres\" \"$NEW_BIN/postgres\" \"$NEW_BIN/initdb\" \"$NEW_BIN/pg_upgrade\" \"$NEW_BIN/pg_checksums\" \"$OLD_BIN/pg_controldata\"; do");
    o.line("  [ -x \"$tool\" ] || fail \"$tool is missing: the upgrade image cannot upgrade PostgreSQL $FROM to $TO (check --dbupgrade-image)\"");
    o.line("done");
    o.line("echo \"Upgrading the database from PostgreSQL $FROM to $TO\"");
    o.line("");
    o.line("# A re-run starts over: the target is ours, the source is never written.");
    o.line("find \"$TARGET\" -mindepth 1 -delete");
    o.line("chown \"$PG_UID:$PG_UID\" -- \"$TARGET\" \"$WORK\"");
    o.line("chmod 0700 -- \"$TARGET\"");
    o.line("");
    o.line("# The source's locale, as the image's own script reads it (POSTGRES_LANG, else");
    o.line("# LC_CTYPE, else en_US.UTF-8). The file is parsed, not sourced.");
    o.line("locale=''");
    o.line("if [ -f \"$SYSCONFIG\" ]; then");
    o.line("  while IFS= read -r line || [ -n \"$line\" ]; do");
    o.line("    if [[ $line =~ ^[[:space:]]*POSTGRES_LANG=[\\\"\\']?([A-Za-z0-9_.@-]*)[\\\"\\']?[[:space:]]*$ ]]; then");
    o.line("      locale=${BASH_REMATCH[1]}");
    o.line("    fi");
    o.line("  done <\"$SYSCONFIG\"");
    o.line("fi");
    o.line("[ -n \"$locale\" ] || locale=${LC_CTYPE:-en_US.UTF-8}");
    o.line("echo \"Locale: $locale\"");
    o.line("");
    o.line("cd \"$WORK\"");
    o.line("as_postgres \"$NEW_BIN/initdb\" -D \"$TARGET\" --locale=\"$locale\" -E UTF8");
    o.line("# pg_upgrade needs the same checksum setting on both sides; they are enabled after.");
    o.line("if ! as_postgres \"$OLD_BIN/pg_controldata\" \"$SOURCE\" | grep -Eq '^Data page checksum version:[[:space:]]+[1-9]'; then");
    o.line("  as_postgres \"$NEW_BIN/pg_checksums\" --disable -D \"$TARGET\"");
    o.line("fi");
    o.line(
        "# Local trust for the upgrade only, and no SSL: neither server has the certificate (the",
    );
    o.line(
        "# fixed-up configuration turns SSL on for the db pod, which mounts it). Nothing of this",
    );
    o.line("# is written into the source.");
    o.line("printf 'local all all trust\\n' >\"$WORK/pg_hba.conf\"");
    o.line("chown \"$PG_UID:$PG_UID\" -- \"$WORK/pg_hba.conf\"");
    o.line("as_postgres \"$NEW_BIN/pg_upgrade\" --old-bindir=\"$OLD_BIN\" --new-bindir=\"$NEW_BIN\" \\");
    o.line("  --old-datadir=\"$SOURCE\" --new-datadir=\"$TARGET\" \\");
    o.line("  --old-options=\"-c hba_file=$WORK/pg_hba.conf -c ssl=off\" \\");
    o.line("  --new-options=\"-c hba_file=$WORK/pg_hba.conf -c ssl=off\"");
    o.line("as_postgres \"$NEW_BIN/pg_checksums\" --enable -D \"$TARGET\"");
    o.line("");
    o.line("# The source's configuration, fixed up before, goes with the data.");
    o.line("cp -a -- \"$SOURCE/pg_hba.conf\" \"$SOURCE/postgresql.conf\" \"$TARGET/\"");
    o.line("if [ -d \"$SOURCE/postgresql.conf.d\" ]; then");
    o.line("  cp -a -- \"$SOURCE/postgresql.conf.d\" \"$TARGET/\"");
    o.line("fi");
    o.line("chown -R \"$PG_UID:$PG_UID\" -- \"$TARGET\"");
    o.line("echo \"Upgrade to PostgreSQL $TO complete; the source volume is left as it was\"");
    o.0
}

/// Repoints the auto-installable distributions to where the data-sync copied them, and queues
/// a system overview refresh until taskomatic has run one (reference §4.3 step 3; today's image
/// no longer does this, images-today §E.1 #6). Both statements are idempotent.
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
    WHERE b.name = 'update-system-overview-bunch' LIMIT 1);
COMMIT;
";

/// Renders the migration-only SQL Job: runs [`MIGRATION_SQL`] through `spacewalk-sql`, which
/// reads the connection from `rhn.conf` (pointing at the `db` Service by then).
pub fn render_migration_sql(local_root: &str) -> String {
    let mut o = Out(String::new());
    prelude(&mut o, "migration-only SQL", local_root);
    o.line(
        "[ -f \"$ROOT/etc/rhn/rhn.conf\" ] || fail 'no /etc/rhn/rhn.conf in the etc-rhn volume'",
    );
    o.line(
        "echo 'Repointing auto-installable distributions and queueing a system overview update'",
    );
    o.line(&format!(
        "printf '%s' {} | spacewalk-sql --select-mode -",
        shell_quote(MIGRATION_SQL)
    ));
    o.line("echo DONE");
    o.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setting(key: &str) -> Option<&'static str> {
        POSTGRESQL_CONF_SETTINGS
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// The settings are literal text; the paths are constants the `db` Deployment mounts at.
    #[test]
    fn the_ssl_settings_name_the_files_the_db_pod_mounts() {
        assert_eq!(setting("ssl"), Some("on"));
        assert_eq!(
            setting("ssl_cert_file").map(str::to_owned),
            Some(format!("'{DB_TLS_CERT_FILE}'"))
        );
        assert_eq!(
            setting("ssl_key_file").map(str::to_owned),
            Some(format!("'{DB_TLS_KEY_FILE}'"))
        );
        for file in [DB_TLS_CERT_FILE, DB_TLS_KEY_FILE, DB_TLS_CA_FILE] {
            assert!(file.starts_with(&format!("{DB_PKI_DIR}/")), "{file}");
        }
    }
}
