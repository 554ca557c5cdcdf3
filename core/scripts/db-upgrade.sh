#!/usr/bin/env bash
# The PostgreSQL major upgrade Job (core/src/scripts/database.rs, render_upgrade), run as root
# in the server-database-migration image: the target volume is emptied first (a re-run starts
# over), pg_upgrade copies (no --link), and the source is only read: it stays as the backup.
#
# Parameters, set by the Job spec; none of them is a secret:
#   FROM_MAJOR, TO_MAJOR   the PostgreSQL majors of the synced data and of the image
#   LOCAL_ROOT             prefix of every path: empty in a Job, a directory in tests
#   UYUNI_DATA_SYNC_JOB    the data-sync Job the data comes from, for advice (optional)
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
: "${FROM_MAJOR:?FROM_MAJOR is not set}"
: "${TO_MAJOR:?TO_MAJOR is not set}"

SOURCE=$ROOT/migration/source
TARGET=$ROOT/migration/target
FROM=$FROM_MAJOR
TO=$TO_MAJOR
PG_UID=999
OLD_BIN="$ROOT/usr/lib/postgresql$FROM/bin"
NEW_BIN="$ROOT/usr/lib/postgresql$TO/bin"
SYSCONFIG="$ROOT/etc/sysconfig/postgresql"
WORK=$(mktemp -d)
trap 'rm -rf -- "$WORK"' EXIT

# As postgres, with whichever tool the image has.
as_postgres() {
  if command -v setpriv >/dev/null; then
    setpriv --reuid="$PG_UID" --regid="$PG_UID" --clear-groups -- "$@"
  elif command -v runuser >/dev/null; then
    runuser -u postgres -- "$@"
  else
    fail 'neither setpriv nor runuser is available in the image'
  fi
}

found=$(pg_major "$SOURCE") || fail "no PG_VERSION in the source volume: the data sync did not complete"
[ "$found" = "$FROM" ] ||
  fail "the source volume holds PostgreSQL $found, expected $FROM: $(resync_advice)"
for tool in "$OLD_BIN/postgres" "$NEW_BIN/postgres" "$NEW_BIN/initdb" "$NEW_BIN/pg_upgrade" "$NEW_BIN/pg_checksums" "$OLD_BIN/pg_controldata"; do
  [ -x "$tool" ] || fail "$tool is missing: the upgrade image cannot upgrade PostgreSQL $FROM to $TO (check --dbupgrade-image)"
done
echo "Upgrading the database from PostgreSQL $FROM to $TO"

# A re-run starts over: the target is ours, the source is never written.
find "$TARGET" -mindepth 1 -delete
chown "$PG_UID:$PG_UID" -- "$TARGET" "$WORK"
chmod 0700 -- "$TARGET"

# The source's locale, as the image's own script reads it (POSTGRES_LANG, else
# LC_CTYPE, else en_US.UTF-8). The file is parsed, not sourced.
locale=''
if [ -f "$SYSCONFIG" ]; then
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ $line =~ ^[[:space:]]*POSTGRES_LANG=[\"\']?([A-Za-z0-9_.@-]*)[\"\']?[[:space:]]*$ ]]; then
      locale=${BASH_REMATCH[1]}
    fi
  done <"$SYSCONFIG"
fi
[ -n "$locale" ] || locale=${LC_CTYPE:-en_US.UTF-8}
echo "Locale: $locale"

cd "$WORK"
as_postgres "$NEW_BIN/initdb" -D "$TARGET" --locale="$locale" -E UTF8
# pg_upgrade needs the same checksum setting on both sides; they are enabled after.
if ! as_postgres "$OLD_BIN/pg_controldata" "$SOURCE" | grep -Eq '^Data page checksum version:[[:space:]]+[1-9]'; then
  as_postgres "$NEW_BIN/pg_checksums" --disable -D "$TARGET"
fi
# Local trust for the upgrade only, and no SSL: neither server has the certificate (the
# fixed-up configuration turns SSL on for the db pod, which mounts it). Nothing of this
# is written into the source.
printf 'local all all trust\n' >"$WORK/pg_hba.conf"
chown "$PG_UID:$PG_UID" -- "$WORK/pg_hba.conf"
as_postgres "$NEW_BIN/pg_upgrade" --old-bindir="$OLD_BIN" --new-bindir="$NEW_BIN" \
  --old-datadir="$SOURCE" --new-datadir="$TARGET" \
  --old-options="-c hba_file=$WORK/pg_hba.conf -c ssl=off" \
  --new-options="-c hba_file=$WORK/pg_hba.conf -c ssl=off"
as_postgres "$NEW_BIN/pg_checksums" --enable -D "$TARGET"

# The source's configuration, fixed up before, goes with the data.
cp -a -- "$SOURCE/pg_hba.conf" "$SOURCE/postgresql.conf" "$TARGET/"
if [ -d "$SOURCE/postgresql.conf.d" ]; then
  cp -a -- "$SOURCE/postgresql.conf.d" "$TARGET/"
fi
chown -R "$PG_UID:$PG_UID" -- "$TARGET"
echo "Upgrade to PostgreSQL $TO complete; the source volume is left as it was"
