//! The database Jobs' scripts (images-today §E.1 #3, #4, #6): the fix-up of the synced data,
//! the PostgreSQL major upgrade, the re-hash of md5 passwords, and the migration-only SQL.
//! Rendered for `bash -c`; every rendered value goes through [`shell_quote`] into a variable
//! first. No script holds a secret: passwords reach them as `secretKeyRef` environment.
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

/// Helpers shared by the scripts: static text, no rendered values.
const HELPERS: &str = r#"
fail() {
  echo "ERROR: $*" >&2
  exit 1
}

# What clears a fault in the synced data itself: a new final sync. A sync that succeeded is never
# repeated by itself, so "run again" alone would retry this Job on the same data (issue 18: every
# advice to run again must be one a re-run can clear). The Jobs carry the sync's name.
resync_advice() {
  printf '%s' "running again alone does not clear this: delete the final data-sync Job ${UYUNI_DATA_SYNC_JOB:-(kubectl get jobs -l kubectl-uyuni.io/step=data-sync)} (kubectl delete job, in the migration's namespace), then run the migration again; the final data sync runs anew and stops the source's services"
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
        o.line("  fail \"the synced database is PostgreSQL $major, the data sync reported $EXPECTED_MAJOR: $(resync_advice)\"");
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
    o.line("[ -f \"$RHN_CONF\" ] || fail \"no /etc/rhn/rhn.conf in the etc-rhn volume: $(resync_advice)\"");
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
    o.line(
        "  fail \"the source volume holds PostgreSQL $found, expected $FROM: $(resync_advice)\"",
    );
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

/// The re-hash's part of the script: static text, no rendered values.
const REHASH_FUNCTIONS: &str = r#"
# Prints how role ${!1} stores its password: md5, scram, none or other; nothing when there is no
# such role. The name travels in the environment, and psql quotes it.
password_kind() {
  ROLE_NAME=${!1} "${PSQL[@]}" -tA <<'SQL'
\getenv role_name ROLE_NAME
SELECT CASE WHEN rolpassword IS NULL THEN 'none'
            WHEN rolpassword LIKE 'md5%' THEN 'md5'
            WHEN rolpassword LIKE 'SCRAM-SHA-256$%' THEN 'scram'
            ELSE 'other' END
  FROM pg_authid WHERE rolname = :'role_name';
SQL
}

# Sets the password of role ${!1} to ${!2}, hashed with scram-sha-256 by the server. The password
# goes from the environment into psql (\getenv) and into the statement as a quoted literal
# (:'...'): never into an argument or this script. Nothing logs the statement: the session
# turns statement logging off, and terse errors never echo the query.
set_scram_password() {
  ROLE_NAME=${!1} ROLE_PASSWORD=${!2} "${PSQL[@]}" <<'SQL'
\set VERBOSITY terse
\set SHOW_CONTEXT never
\getenv role_name ROLE_NAME
\getenv role_password ROLE_PASSWORD
SET log_statement = 'none';
SET log_min_error_statement = 'panic';
SET log_min_duration_statement = -1;
SET password_encryption = 'scram-sha-256';
ALTER ROLE :"role_name" PASSWORD :'role_password';
SQL
}

# $1, $2: the variables with a role's name and password; $3: the Secret they come from.
require_credentials() {
  [ -n "${!1:-}" ] || fail "$1 is empty: Secret $3 has no username; run the migration again to write it"
  [ -n "${!2:-}" ] || fail "$2 is empty: Secret $3 has no password; run the migration again to write it"
}

# $1, $2: the variables with the role's name and password; $3: the Secret they come from.
rehash_role() {
  local user_var=$1 password_var=$2 secret=$3 role kind
  role=${!user_var}
  kind=$(password_kind "$user_var") ||
    fail "cannot read how role $role stores its password (psql's error is above); run the migration again"
  case $kind in
    md5)
      set_scram_password "$user_var" "$password_var" >/dev/null ||
        fail "ALTER ROLE failed for role $role (psql's error is above); run the migration again"
      kind=$(password_kind "$user_var") ||
        fail "cannot read how role $role stores its password (psql's error is above); run the migration again"
      [ "$kind" = scram ] ||
        fail "role $role still has no scram-sha-256 password after ALTER ROLE ($kind); run the migration again"
      echo "Re-hashed the password of role $role: md5 to scram-sha-256"
      REHASHED+=("$role")
      ;;
    scram)
      echo "Role $role already has a scram-sha-256 password; left as it is"
      ;;
    none)
      echo "WARNING: role $role has no password and cannot log in over TCP; set the one of Secret $secret (ALTER ROLE ... PASSWORD) if the server fails to connect" >&2
      ;;
    '')
      fail "role $role (the username of Secret $secret) does not exist in the migrated database: the Secret and the data do not match; check the data-sync Job's log; $(resync_advice)"
      ;;
    *)
      echo "WARNING: role $role has a password that is neither md5 nor scram-sha-256; left as it is" >&2
      ;;
  esac
}

# Stops the temporary server when it may have started (also after a failed or timed-out start),
# and shows its log after a failure. The log holds no statement: see set_scram_password.
cleanup() {
  local status=$?
  if [ "$status" -ne 0 ] && [ -s "$WORK/server.log" ]; then
    echo 'Last lines of the temporary server log:' >&2
    tail -n 20 -- "$WORK/server.log" >&2 || true
  fi
  if [ "$STARTED" -eq 1 ] && pg_ctl status -D "$PGDATA" >/dev/null 2>&1; then
    echo 'Stopping the temporary PostgreSQL server'
    pg_ctl stop -D "$PGDATA" -m fast -w -t 300 >/dev/null ||
      echo 'WARNING: the temporary PostgreSQL server did not stop cleanly; it ends with this pod, and the next start recovers the data' >&2
  fi
  rm -rf -- "$WORK"
  exit "$status"
}
"#;

/// Renders the re-hash of md5 passwords. Today's DB image enforces `host all all all
/// scram-sha-256` in `pg_hba.conf` at every image change (images-today §B.3 `01-pg_hba.sh`);
/// a classic source may store its roles' passwords as md5 hashes, which `pg_upgrade` copies,
/// and such roles could not log in any more. Run as postgres (UID 999) in the DB image on the
/// data the `db` Deployment will use, after the upgrade and with the database stopped: a
/// temporary server without TCP, SSL or the data's `pg_hba.conf` (local trust, a socket in a
/// private directory), and for each migrated role with an md5 password, `ALTER ROLE` with the
/// migrated password under `password_encryption = 'scram-sha-256'`. Roles with a scram
/// password are left alone. The server is stopped on every exit. Safe to run again.
pub fn render_passwords(local_root: &str) -> String {
    let q = shell_quote;
    let mut o = Out(String::new());
    prelude(
        &mut o,
        "re-hash of md5 database passwords to scram-sha-256",
        local_root,
    );
    o.line(&format!("PGDATA=\"$ROOT\"{}", q(PGDATA)));
    o.line(&format!(
        "TARGET_MAJOR={}",
        q(&pg::TARGET_MAJOR.to_string())
    ));
    o.line(&format!("PG_SUPERUSER={}", q(PG_SUPERUSER)));
    o.line("PORT=5432");
    o.line("# The image runs its tools by name; its versioned bin directory is the fallback.");
    o.line("PATH=\"$PATH:$ROOT/usr/lib/postgresql$TARGET_MAJOR/bin\"");
    o.line("for tool in pg_ctl psql; do");
    o.line("  command -v \"$tool\" >/dev/null || fail \"$tool is not in this image: the re-hash needs the DB image (check --db-image)\"");
    o.line("done");
    o.line("");
    o.line(
        "# Nothing starts PostgreSQL on data that has not been upgraded. This Job runs only once",
    );
    o.line("# the fix-up and the upgrade succeeded, and a re-run does not repeat them: data that still");
    o.line("# fails these checks is cleared by a new final sync (which they then run on anew).");
    o.line("major=$(pg_major \"$PGDATA\") || fail \"no PG_VERSION in the database volume after the fix-up and the upgrade succeeded: $(resync_advice)\"");
    o.line("[ \"$major\" = \"$TARGET_MAJOR\" ] ||");
    o.line("  fail \"the database volume holds PostgreSQL $major, not $TARGET_MAJOR, after the fix-up and the upgrade succeeded: $(resync_advice)\"");
    o.line("# The kubelet's fsGroup handling may have made the directory group-writable on some");
    o.line("# volume types, which PostgreSQL refuses; its owner can set it back.");
    o.line("chmod 0700 -- \"$PGDATA\" ||");
    o.line("  fail \"cannot set the mode of the database directory: it does not belong to postgres (UID 999) after the fix-up gave it to it: $(resync_advice)\"");
    o.0.push_str(REHASH_FUNCTIONS);
    o.line("");
    for (user_var, password_var, secret) in REHASHED_ROLES {
        o.line(&format!(
            "require_credentials {} {} {}",
            q(user_var),
            q(password_var),
            q(secret)
        ));
    }
    o.line("");
    o.line("WORK=$(mktemp -d)");
    o.line("STARTED=0");
    o.line("REHASHED=()");
    o.line("PSQL=(psql -X -q -v ON_ERROR_STOP=1 -h \"$WORK\" -p \"$PORT\" -U \"$PG_SUPERUSER\" -d postgres)");
    o.line("trap cleanup EXIT");
    o.line("");
    o.line(
        "# Local trust on a socket in a private directory, no TCP, no SSL (the certificate is only",
    );
    o.line("# in the db pod), no preloaded library that could record a statement. The data's own");
    o.line("# pg_hba.conf and settings are left as they are.");
    o.line("printf 'local all all trust\\n' >\"$WORK/pg_hba.conf\"");
    o.line("echo 'Starting a temporary PostgreSQL server, reachable only through a socket in this pod'");
    o.line("STARTED=1");
    o.line("pg_ctl start -D \"$PGDATA\" -w -t 600 -l \"$WORK/server.log\" \\");
    o.line("  -o \"-c listen_addresses='' -c port=$PORT -c unix_socket_directories='$WORK' -c hba_file='$WORK/pg_hba.conf' -c ssl=off -c logging_collector=off -c shared_preload_libraries=''\" >/dev/null ||");
    o.line("  fail 'the temporary PostgreSQL server did not start (its log follows); fix the cause, then run the migration again'");
    o.line("");
    for (user_var, password_var, secret) in REHASHED_ROLES {
        o.line(&format!(
            "rehash_role {} {} {}",
            q(user_var),
            q(password_var),
            q(secret)
        ));
    }
    o.line("");
    o.line("echo 'Stopping the temporary PostgreSQL server'");
    o.line("pg_ctl stop -D \"$PGDATA\" -m fast -w -t 300 >/dev/null ||");
    o.line(
        "  fail 'the temporary PostgreSQL server did not stop cleanly; run the migration again'",
    );
    o.line("STARTED=0");
    o.line("if [ \"${#REHASHED[@]}\" -eq 0 ]; then");
    o.line("  echo 'No md5 password found: nothing re-hashed'");
    o.line("else");
    o.line("  echo \"Re-hashed to scram-sha-256: ${REHASHED[*]}\"");
    o.line("fi");
    o.line("echo DONE");
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

/// Renders the migration-only SQL Job: runs [`MIGRATION_SQL`] through `spacewalk-sql`, which
/// reads the connection from `rhn.conf` (pointing at the `db` Service by then). The `db` pod can
/// refuse connections for a while although it was ready once: the image runs its start-up and
/// upgrade hooks (server-postgresql's `uyuni-entrypoint.sh` and `docker-entrypoint-upgdb.d`,
/// marked by `/run/postgresql/upgrade_in_progress` in newer images) before PostgreSQL listens,
/// and a pod restarted meanwhile starts them again. A refused connection is therefore tried
/// again for a bounded time ([`SQL_CONNECT_ATTEMPTS`]); the SQL runs in one transaction and is
/// idempotent, so running it again after a broken connection is safe.
pub fn render_migration_sql(local_root: &str) -> String {
    let q = shell_quote;
    let mut o = Out(String::new());
    prelude(&mut o, "migration-only SQL", local_root);
    o.line(
        "[ -f \"$ROOT/etc/rhn/rhn.conf\" ] || fail 'no /etc/rhn/rhn.conf in the etc-rhn volume'",
    );
    o.line(&format!("SQL={}", q(MIGRATION_SQL)));
    o.line(&format!("ATTEMPTS={SQL_CONNECT_ATTEMPTS}"));
    o.line(&format!("INTERVAL={SQL_CONNECT_INTERVAL_SECONDS}"));
    o.line(&format!("RETRIED_ERRORS={}", q(SQL_RETRIED_ERRORS)));
    o.line(&format!(
        "export PGCONNECT_TIMEOUT={SQL_CONNECT_TIMEOUT_SECONDS}"
    ));
    o.line(
        "echo 'Repointing auto-installable distributions and queueing a system overview update'",
    );
    o.line("attempt=1");
    o.line("while :; do");
    o.line(
        "  # spacewalk-sql's output goes to the log as it comes; its errors are kept to be read.",
    );
    o.line("  rc=0");
    o.line("  { errors=$(printf '%s' \"$SQL\" | spacewalk-sql --select-mode - 2>&1 1>&3 3>&-) || rc=$?; } 3>&1");
    o.line("  [ -z \"$errors\" ] || printf '%s\\n' \"$errors\" >&2");
    o.line("  [ \"$rc\" -ne 0 ] || break");
    o.line("  if ! grep -qiE -- \"$RETRIED_ERRORS\" <<<\"$errors\"; then");
    o.line("    fail \"the migration SQL failed (spacewalk-sql exit code $rc; its error is above): fix the cause, then run the migration again\"");
    o.line("  fi");
    o.line("  if [ \"$attempt\" -ge \"$ATTEMPTS\" ]; then");
    o.line("    fail \"the database did not accept connections after $ATTEMPTS attempts, $INTERVAL seconds apart: check the db pod (kubectl logs deployment/db), then run the migration again\"");
    o.line("  fi");
    o.line("  echo \"The database does not accept connections yet (attempt $attempt of $ATTEMPTS); trying again in $INTERVAL seconds\"");
    o.line("  attempt=$((attempt + 1))");
    o.line("  sleep \"$INTERVAL\"");
    o.line("done");
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
