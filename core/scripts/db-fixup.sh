#!/usr/bin/env bash
# The database fix-up Job (core/src/scripts/database.rs, render_fixup): flattens an old
# data/data layout, makes the synced data PostgreSQL's (UID 999, mode 0700), makes the classic
# postgresql.conf usable in the db pod, points rhn.conf at the db and reportdb Services, and
# makes sure the setup marker exists so the server image never runs first-start setup on
# migrated data. Safe to run again.
#
# Parameters, set by the Job spec; none of them is a secret:
#   EXPECTED_MAJOR             the PostgreSQL major the data sync reported; empty: not known
#   POSTGRESQL_CONF_SETTINGS   one setting a line, key and value tab-separated, for
#                              postgresql.conf (POSTGRESQL_CONF_SETTINGS in database.rs)
#   RHN_CONF_SETTINGS          the same for rhn.conf (RHN_CONF_SETTINGS in database.rs)
#   LOCAL_ROOT                 prefix of every path: empty in a Job, a directory in tests
#   UYUNI_DATA_SYNC_JOB        the data-sync Job the data comes from, for advice (optional)
#   POSTGRES_UID               UID (and GID) of postgres in the images: 999 unless set (tests
#                              run PostgreSQL as a user of their machine)
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
: "${POSTGRESQL_CONF_SETTINGS:?POSTGRESQL_CONF_SETTINGS is not set}"
: "${RHN_CONF_SETTINGS:?RHN_CONF_SETTINGS is not set}"
EXPECTED_MAJOR=${EXPECTED_MAJOR-}
PG_UID=${POSTGRES_UID:-999}

PGDATA=$ROOT/var/lib/pgsql/data
RHN_CONF=$ROOT/etc/rhn/rhn.conf
MARKER=$ROOT/var/spacewalk/.MANAGER_SETUP_COMPLETE
LEGACY_MARKER=$ROOT/root/.MANAGER_SETUP_COMPLETE

# Sets every "key<TAB>value" line of $1 in the file $2.
conf_set_all() {
  local key value
  while IFS=$'\t' read -r key value; do
    [ -n "$key" ] || continue
    conf_set "$key" "$value" "$2"
  done <<<"$1"
}

# A 5.0-style volume keeps the cluster in a data/ subdirectory: hard-link it up one
# level (no extra space; -f makes a re-run after an interruption finish the job).
if [ -f "$PGDATA/data/PG_VERSION" ]; then
  echo 'Flattening the data/data layout of the database'
  cp -alf -- "$PGDATA/data/." "$PGDATA/"
  rm -rf -- "$PGDATA/data"
fi
major=$(pg_major "$PGDATA") || fail "the synced database has no PG_VERSION"
if [ -n "$EXPECTED_MAJOR" ]; then
  [ "$major" = "$EXPECTED_MAJOR" ] ||
    fail "the synced database is PostgreSQL $major, the data sync reported $EXPECTED_MAJOR: $(resync_advice)"
fi
echo "The synced database is PostgreSQL $major"

# PostgreSQL runs as postgres (UID 999) in the images and wants its directory private.
chown -R "$PG_UID:$PG_UID" -- "$PGDATA"
chmod 0700 -- "$PGDATA"
[ -f "$PGDATA/postgresql.conf" ] || fail "the synced database has no postgresql.conf"
conf_set_all "$POSTGRESQL_CONF_SETTINGS" "$PGDATA/postgresql.conf"

[ -f "$RHN_CONF" ] || fail "no /etc/rhn/rhn.conf in the etc-rhn volume: $(resync_advice)"
echo 'Pointing rhn.conf at the db and reportdb Services'
conf_set_all "$RHN_CONF_SETTINGS" "$RHN_CONF"

# Without the marker the server image would run first-start setup on migrated data.
if [ -e "$MARKER" ]; then
  echo 'The setup marker exists'
elif [ -e "$LEGACY_MARKER" ]; then
  echo 'Moving the setup marker from /root to /var/spacewalk'
  mv -- "$LEGACY_MARKER" "$MARKER"
else
  echo 'Writing the setup marker: the source server was set up'
  (umask 022 && : >"$MARKER")
fi
echo DONE
