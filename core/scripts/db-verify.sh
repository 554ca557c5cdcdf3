#!/usr/bin/env bash
# The verification of a database's data (core/src/scripts/database.rs, render_verify): for each
# database of VERIFY_DATABASES, per table, the row count and a hash of its rows in primary-key
# order, one line each: DATABASE<TAB>SCHEMA.TABLE<TAB>ROWS<TAB>MD5. The same data gives the
# same lines on PostgreSQL 14, 16 and 18 (the rows' text form, under fixed output settings); a
# changed, added or removed row changes its table's line. The method is pgcopydb compare's
# (per table: a count and a hash over the rows in key order), in SQL so that any psql can run
# it. Only reads: one repeatable-read, read-only transaction per database.
#
# Parameters, set by the Job spec; none of them is a secret:
#   VERIFY_DATABASES   the databases to verify, one a line
#   VERIFY_SQL         the statements (VERIFY_SQL in database.rs)
#   PGHOST, PGPORT, PGUSER  where and as whom psql connects, read by libpq itself; the password,
#                      if any, comes as PGPASSWORD from a secretKeyRef, never here
# shellcheck source-path=SCRIPTDIR

# In a Job, lib.sh comes first in the same text; run as a file, the script loads it.
if ! declare -F conf_set >/dev/null; then
  # shellcheck source=lib.sh
  . "${BASH_SOURCE[0]%/*}/lib.sh"
fi

set -euo pipefail
shopt -s inherit_errexit
: "${VERIFY_DATABASES:?VERIFY_DATABASES is not set}"
: "${VERIFY_SQL:?VERIFY_SQL is not set}"

while IFS= read -r database; do
  [ -n "$database" ] || continue
  lines=$(printf '%s\n' "$VERIFY_SQL" | psql -X -q -tA -F "$(printf '\t')" -v ON_ERROR_STOP=1 -d "$database") ||
    fail "the verification of database $database failed (psql's error is above); check that the database runs and accepts this connection, then run it again"
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    printf '%s\t%s\n' "$database" "$line"
  done <<<"$lines"
done <<<"$VERIFY_DATABASES"
