#!/usr/bin/env bash
# The password re-hash Job (core/src/scripts/database.rs, render_passwords), run as postgres in
# the DB image on the data the db Deployment will use: a temporary server without TCP, SSL or
# the data's pg_hba.conf, and for each migrated role with an md5 password, ALTER ROLE with the
# migrated password under password_encryption = 'scram-sha-256'. Safe to run again.
#
# Parameters, set by the Job spec; none of them is a secret:
#   TARGET_MAJOR       the PostgreSQL major of the DB image
#   PG_SUPERUSER       the superuser the re-hash connects as
#   REHASHED_ROLES     one role a line, tab-separated: the name of the variable with the role's
#                      name, the name of the variable with its password, the Secret both come
#                      from (for messages)
#   LOCAL_ROOT         prefix of every path: empty in a Job, a directory in tests
#   UYUNI_DATA_SYNC_JOB  the data-sync Job the data comes from, for advice (optional)
# The roles' names and passwords themselves are secretKeyRef variables of the Job.
# shellcheck source-path=SCRIPTDIR

# In a Job, lib.sh comes first in the same text; run as a file, the script loads it.
if ! declare -F conf_set >/dev/null; then
  # shellcheck source=lib.sh
  . "${BASH_SOURCE[0]%/*}/lib.sh"
fi

set -euo pipefail
shopt -s inherit_errexit
# Prefix of every path of the pod's file system: empty in a Job, a directory in tests.
ROOT=${LOCAL_ROOT-}
ROOT=${ROOT%/}
: "${TARGET_MAJOR:?TARGET_MAJOR is not set}"
: "${PG_SUPERUSER:?PG_SUPERUSER is not set}"
: "${REHASHED_ROLES:?REHASHED_ROLES is not set}"

PGDATA=$ROOT/var/lib/pgsql/data
PORT=5432
# The image runs its tools by name; its versioned bin directory is the fallback.
PATH="$PATH:$ROOT/usr/lib/postgresql$TARGET_MAJOR/bin"
for tool in pg_ctl psql; do
  command -v "$tool" >/dev/null || fail "$tool is not in this image: the re-hash needs the DB image (check --db-image)"
done

# Nothing starts PostgreSQL on data that has not been upgraded. This Job runs only once
# the fix-up and the upgrade succeeded, and a re-run does not repeat them: data that still
# fails these checks is cleared by a new final sync (which they then run on anew).
major=$(pg_major "$PGDATA") || fail "no PG_VERSION in the database volume after the fix-up and the upgrade succeeded: $(resync_advice)"
[ "$major" = "$TARGET_MAJOR" ] ||
  fail "the database volume holds PostgreSQL $major, not $TARGET_MAJOR, after the fix-up and the upgrade succeeded: $(resync_advice)"
# The kubelet's fsGroup handling may have made the directory group-writable on some
# volume types, which PostgreSQL refuses; its owner can set it back.
chmod 0700 -- "$PGDATA" ||
  fail "cannot set the mode of the database directory: it does not belong to postgres (UID 999) after the fix-up gave it to it: $(resync_advice)"

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

# The roles, parsed once: the names of the variables with each role's name and password (both
# secretKeyRef environment of the Job) and the Secret they come from.
ROLE_USER_VARS=() ROLE_PASSWORD_VARS=() ROLE_SECRETS=()
while IFS=$'\t' read -r user_var password_var secret; do
  [ -n "$user_var" ] || continue
  ROLE_USER_VARS+=("$user_var")
  ROLE_PASSWORD_VARS+=("$password_var")
  ROLE_SECRETS+=("$secret")
done <<<"$REHASHED_ROLES"
for i in "${!ROLE_USER_VARS[@]}"; do
  require_credentials "${ROLE_USER_VARS[i]}" "${ROLE_PASSWORD_VARS[i]}" "${ROLE_SECRETS[i]}"
done

WORK=$(mktemp -d)
STARTED=0
REHASHED=()
PSQL=(psql -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$PORT" -U "$PG_SUPERUSER" -d postgres)
trap cleanup EXIT

# Local trust on a socket in a private directory, no TCP, no SSL (the certificate is only
# in the db pod), no preloaded library that could record a statement. The data's own
# pg_hba.conf and settings are left as they are.
printf 'local all all trust\n' >"$WORK/pg_hba.conf"
echo 'Starting a temporary PostgreSQL server, reachable only through a socket in this pod'
STARTED=1
pg_ctl start -D "$PGDATA" -w -t 600 -l "$WORK/server.log" \
  -o "-c listen_addresses='' -c port=$PORT -c unix_socket_directories='$WORK' -c hba_file='$WORK/pg_hba.conf' -c ssl=off -c logging_collector=off -c shared_preload_libraries=''" >/dev/null ||
  fail 'the temporary PostgreSQL server did not start (its log follows); fix the cause, then run the migration again'

for i in "${!ROLE_USER_VARS[@]}"; do
  rehash_role "${ROLE_USER_VARS[i]}" "${ROLE_PASSWORD_VARS[i]}" "${ROLE_SECRETS[i]}"
done

echo 'Stopping the temporary PostgreSQL server'
pg_ctl stop -D "$PGDATA" -m fast -w -t 300 >/dev/null ||
  fail 'the temporary PostgreSQL server did not stop cleanly; run the migration again'
STARTED=0
if [ "${#REHASHED[@]}" -eq 0 ]; then
  echo 'No md5 password found: nothing re-hashed'
else
  echo "Re-hashed to scram-sha-256: ${REHASHED[*]}"
fi
echo DONE
