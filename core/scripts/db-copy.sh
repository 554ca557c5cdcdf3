#!/usr/bin/env bash
# The copy of the stopped database's directory (core/src/scripts/database.rs, render_copy), run
# as postgres in the database image: an upgrade's backup before the images change (source: the
# database's volume, target: the backup volume), or a rollback's restore (source: the backup,
# target: the database's volume). The target is emptied first (a re-run starts over) and the
# source is only read. A backup is marked with BACKUP_MARKER, naming what it was taken of; a
# restore refuses a source without that marker.
#
# Parameters, set by the Job spec; none of them is a secret:
#   MODE            backup or restore
#   BACKUP_MARKER   the marker file's name, in the backup's top directory
#   BACKUP_OF       what the backup is of (the images before the upgrade), written in the marker
#   LOCAL_ROOT      prefix of every path: empty in a Job, a directory in tests
# shellcheck source-path=SCRIPTDIR

# In a Job, lib.sh comes first in the same text; run as a file, the script loads it.
if ! declare -F conf_set >/dev/null; then
  # shellcheck source=lib.sh
  . "${BASH_SOURCE[0]%/*}/lib.sh"
fi

set -euo pipefail
shopt -s inherit_errexit
ROOT=${LOCAL_ROOT-}
ROOT=${ROOT%/}
: "${MODE:?MODE is not set}"
: "${BACKUP_MARKER:?BACKUP_MARKER is not set}"

SOURCE=$ROOT/migration/source
TARGET=$ROOT/migration/target

[ -f "$SOURCE/PG_VERSION" ] ||
  fail "no PG_VERSION in $SOURCE: it holds no PostgreSQL data directory; nothing was copied"
case $MODE in
  backup)
    : "${BACKUP_OF:?BACKUP_OF is not set}"
    echo "Copying the database (PostgreSQL $(cat "$SOURCE/PG_VERSION")) into the backup volume"
    ;;
  restore)
    [ -f "$SOURCE/$BACKUP_MARKER" ] ||
      fail "the backup volume has no $BACKUP_MARKER: it is not a complete backup of this tool; the database's volume was left as it is"
    echo "Restoring the database from the backup of $(head -n1 "$SOURCE/$BACKUP_MARKER")"
    ;;
  *) fail "MODE must be backup or restore, not $MODE" ;;
esac

used=$(du -sk "$SOURCE" | cut -f1)
free=$(df -Pk "$TARGET" | awk 'NR==2 {print $4}')
existing=$(du -sk "$TARGET" | cut -f1)
if [ -n "$free" ] && [ "$((free + existing))" -lt "$used" ]; then
  fail "the target volume has $((free + existing)) KiB free, the database uses $used KiB: give it a larger volume; nothing was changed in the source"
fi

# A re-run starts over: the target is this Job's, the source is never written.
find "$TARGET" -mindepth 1 -delete
cp -a -- "$SOURCE/." "$TARGET/"
rm -f -- "$TARGET/postmaster.pid"
if [ "$MODE" = backup ]; then
  # Last, so that an interrupted copy has no marker and a restore refuses it.
  printf '%s\n' "$BACKUP_OF" >"$TARGET/$BACKUP_MARKER"
else
  rm -f -- "$TARGET/$BACKUP_MARKER"
fi
sync
echo "Copied $used KiB"
echo "DONE"
