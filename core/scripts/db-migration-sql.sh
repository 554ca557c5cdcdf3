#!/usr/bin/env bash
# The migration-only SQL Job (core/src/scripts/database.rs, render_migration_sql): runs the SQL
# through spacewalk-sql, which reads the connection from rhn.conf. A connection the db pod
# refuses (it runs its start-up hooks before PostgreSQL listens) is tried again for a bounded
# time; any other error ends the Job at once. The SQL is one idempotent transaction.
#
# Parameters, set by the Job spec; none of them is a secret:
#   MIGRATION_SQL          the statements (MIGRATION_SQL in database.rs)
#   SQL_CONNECT_ATTEMPTS   how often the database is tried
#   SQL_CONNECT_INTERVAL   seconds between two tries
#   RETRIED_ERRORS         extended regular expression of the errors tried again
#   PGCONNECT_TIMEOUT      libpq's limit on one connection attempt, read by libpq itself
#   LOCAL_ROOT             prefix of every path: empty in a Job, a directory in tests
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
: "${MIGRATION_SQL:?MIGRATION_SQL is not set}"
: "${SQL_CONNECT_ATTEMPTS:?SQL_CONNECT_ATTEMPTS is not set}"
: "${SQL_CONNECT_INTERVAL:?SQL_CONNECT_INTERVAL is not set}"
: "${RETRIED_ERRORS:?RETRIED_ERRORS is not set}"

[ -f "$ROOT/etc/rhn/rhn.conf" ] || fail 'no /etc/rhn/rhn.conf in the etc-rhn volume'
SQL=$MIGRATION_SQL
ATTEMPTS=$SQL_CONNECT_ATTEMPTS
INTERVAL=$SQL_CONNECT_INTERVAL
echo 'Repointing auto-installable distributions and queueing a system overview update'
attempt=1
while :; do
  # spacewalk-sql's output goes to the log as it comes; its errors are kept to be read.
  rc=0
  { errors=$(printf '%s' "$SQL" | spacewalk-sql --select-mode - 2>&1 1>&3 3>&-) || rc=$?; } 3>&1
  [ -z "$errors" ] || printf '%s\n' "$errors" >&2
  [ "$rc" -ne 0 ] || break
  if ! grep -qiE -- "$RETRIED_ERRORS" <<<"$errors"; then
    fail "the migration SQL failed (spacewalk-sql exit code $rc; its error is above): fix the cause, then run the migration again"
  fi
  if [ "$attempt" -ge "$ATTEMPTS" ]; then
    fail "the database did not accept connections after $ATTEMPTS attempts, $INTERVAL seconds apart: check the db pod (kubectl logs deployment/db), then run the migration again"
  fi
  echo "The database does not accept connections yet (attempt $attempt of $ATTEMPTS); trying again in $INTERVAL seconds"
  attempt=$((attempt + 1))
  sleep "$INTERVAL"
done
echo DONE
