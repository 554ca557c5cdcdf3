#!/usr/bin/env bash
# The PostgreSQL major upgrade Job (core/src/scripts/database.rs, render_upgrade), run as root
# in the server-database-migration image: the target volume is emptied first (a re-run starts
# over), pg_upgrade copies (no --link), and the source stays as the backup. It is not only read:
# pg_upgrade starts and stops the old server on it (for its checks and its schema dump), which
# writes a few files (the control file, WAL, statistics, logs, hint bits of system catalogues;
# none of the tables' own); it stays a cleanly shut down cluster of the old major, the same data. After the copy: data checksums as the target has
# them (enabled when it has none), the optimizer statistics pg_upgrade does not carry over
# (vacuumdb --missing-stats-only), then the source's configuration.
#
# What the image's own script does (uyuni containers/server-database-migration-image,
# 00-pgsqlVersionUpgrade.sh, reference/uyuni-images-today.md §B.4): the locale from
# /etc/sysconfig/postgresql, initdb with checksums disabled, pg_upgrade in copy mode, then
# checksums enabled unconditionally (which fails on a source that had them, uyuni#12494).
#
# Parameters, set by the Job spec; none of them is a secret:
#   FROM_MAJOR, TO_MAJOR   the PostgreSQL majors of the synced data and of the image
#   LOCAL_ROOT             prefix of every path: empty in a Job, a directory in tests
#   UYUNI_DATA_SYNC_JOB    the data-sync Job the data comes from, for advice (optional)
#   POSTGRES_UID           UID (and GID) of postgres in the image: 999 unless set (tests run
#                          PostgreSQL as a user of their machine)
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
PG_UID=${POSTGRES_UID:-999}
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
for tool in "$OLD_BIN/postgres" "$OLD_BIN/pg_controldata" "$NEW_BIN/postgres" "$NEW_BIN/initdb" "$NEW_BIN/pg_upgrade" "$NEW_BIN/pg_checksums" "$NEW_BIN/pg_controldata" "$NEW_BIN/pg_ctl" "$NEW_BIN/vacuumdb"; do
  [ -x "$tool" ] || fail "$tool is missing: the upgrade image cannot upgrade PostgreSQL $FROM to $TO (check --dbupgrade-image)"
done

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
# initdb fails halfway on a locale the image lacks: say so before anything is emptied. Names
# compare as glibc normalizes them (en_US.UTF-8 is listed as en_US.utf8).
normalized_locale() {
  local name=${1,,}
  name=${name//-/}
  printf '%s' "$name"
}
case $locale in
  C | POSIX) ;;
  *)
    if installed=$(locale -a 2>/dev/null); then
      wanted=$(normalized_locale "$locale")
      found_locale=no
      while IFS= read -r name; do
        [ "$(normalized_locale "$name")" != "$wanted" ] || found_locale=yes
      done <<<"$installed"
      [ "$found_locale" = yes ] ||
        fail "the source database's locale $locale (POSTGRES_LANG in /etc/sysconfig/postgresql, else LC_CTYPE, else en_US.UTF-8) is not installed in the upgrade image, which has: $(tr '\n' ' ' <<<"$installed"); use an upgrade image with that locale (--dbupgrade-image); nothing was changed"
    fi
    ;;
esac

# pg_upgrade refuses a source that was not shut down cleanly; say why before the target is
# emptied, in the words of this tool.
state=$(as_postgres "$OLD_BIN/pg_controldata" "$SOURCE" | sed -n 's/^Database cluster state:[[:space:]]*//p') ||
  fail "pg_controldata cannot read the source database's control file; $(resync_advice)"
if [ "$state" != 'shut down' ]; then
  if [ -n "${UYUNI_DATA_SYNC_JOB-}" ]; then
    advice=$(resync_advice)
  else
    advice='start the database on its old image once and let it stop, then run the upgrade again'
  fi
  fail "the source database was not shut down cleanly (pg_controldata: '$state'), and pg_upgrade needs a cleanly stopped PostgreSQL $FROM: $advice; nothing was changed"
fi

echo "Upgrading the database from PostgreSQL $FROM to $TO"
# A re-run starts over: the target is ours.
find "$TARGET" -mindepth 1 -delete
chown "$PG_UID:$PG_UID" -- "$TARGET" "$WORK"
chmod 0700 -- "$TARGET"

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

# Data checksums: pg_upgrade kept the source's setting. A source that had them keeps them (they
# cannot be enabled twice: pg_checksums fails on a cluster that has them). Without them they
# are enabled now, as a new PostgreSQL 18 cluster has them: pg_checksums rewrites every data
# file while the server is down (docs/phases.md gives its cost). The state is read, never
# assumed.
checksums_on() {
  as_postgres "$NEW_BIN/pg_controldata" "$TARGET" | grep -Eq '^Data page checksum version:[[:space:]]+[1-9]'
}
if checksums_on; then
  echo 'Data checksums: enabled, as in the source'
else
  echo 'Data checksums: enabling them (pg_checksums rewrites every data file)'
  as_postgres "$NEW_BIN/pg_checksums" --enable -D "$TARGET"
  checksums_on || fail "data checksums are still disabled after pg_checksums --enable; run the upgrade again"
fi

# The optimizer statistics pg_upgrade did not carry over (PostgreSQL 18 carries most; older
# targets none), as pg_upgrade's closing advice says, on a temporary server reachable only
# through a socket in the working directory. Only relations without statistics are analyzed
# (--missing-stats-only, new in vacuumdb 18), so this adds little to the outage; the rest is
# autovacuum's once the server runs.
if "$NEW_BIN/vacuumdb" --help | grep -q -- --missing-stats-only; then
  stats_options=(--all --analyze-in-stages --missing-stats-only)
else
  stats_options=(--all --analyze-in-stages)
fi
echo "Gathering the missing optimizer statistics (vacuumdb ${stats_options[*]})"
as_postgres "$NEW_BIN/pg_ctl" start -D "$TARGET" -w -t 600 -l "$WORK/statistics.log" \
  -o "-c listen_addresses='' -c port=5432 -c unix_socket_directories='$WORK' -c hba_file='$WORK/pg_hba.conf' -c ssl=off" >/dev/null ||
  { tail -n 20 -- "$WORK/statistics.log" >&2 || true; fail 'the upgraded database did not start to gather statistics (its log is above); run the upgrade again'; }
stats_rc=0
as_postgres "$NEW_BIN/vacuumdb" -h "$WORK" -p 5432 "${stats_options[@]}" || stats_rc=$?
as_postgres "$NEW_BIN/pg_ctl" stop -D "$TARGET" -m fast -w -t 300 >/dev/null ||
  fail 'the upgraded database did not stop after gathering statistics; run the upgrade again'
[ "$stats_rc" -eq 0 ] || fail "vacuumdb failed (exit code $stats_rc, its error is above); run the upgrade again"

# The source's configuration, fixed up before, goes with the data.
cp -a -- "$SOURCE/pg_hba.conf" "$SOURCE/postgresql.conf" "$TARGET/"
if [ -d "$SOURCE/postgresql.conf.d" ]; then
  cp -a -- "$SOURCE/postgresql.conf.d" "$TARGET/"
fi
chown -R "$PG_UID:$PG_UID" -- "$TARGET"
echo "Upgrade to PostgreSQL $TO complete; the source volume is a cleanly shut down PostgreSQL $FROM cluster with the same data"
