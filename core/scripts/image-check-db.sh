#!/usr/bin/env bash
# The check of the database image (core/src/scripts/image_check.rs): runs inside the image for a few seconds, before anything
# else of the migration is written, reads files and the environment only, and prints one line
# starting with SUPPORTED: or UNSUPPORTED: (then exits 1, which fails the Job).
#
# Parameters, set by the Job spec; none of them is a secret:
#   IMAGE          the image checked, for messages
#   TARGET_MAJOR       the PostgreSQL major the migration targets
#   MAJOR_RULE         exactly (a migration: its PostgreSQL upgrade goes to TARGET_MAJOR) or
#                      at-least (a new server starts on any newer major too)
#   TERMINATION_LOG    where the report (pg_major=N) goes besides the log
#   DATABASE_MARKERS   files that mark an image with its own start-up and upgrade hooks,
#                      one a line
#   LOCAL_ROOT         prefix of every path: empty in a Job, a directory in tests
# and PG_MAJOR, when the image sets it.
# shellcheck source-path=SCRIPTDIR

# In a Job, lib.sh comes first in the same text; run as a file, the script loads it.
if ! declare -F conf_set >/dev/null; then
  # shellcheck source=lib.sh
  . "${BASH_SOURCE[0]%/*}/lib.sh"
fi

# No -e: every failed test is a verdict, said by `unsupported`.
set -uo pipefail
# Prefix of every path of the image's file system: empty in a Job, a directory in tests.
ROOT=${LOCAL_ROOT-}
ROOT=${ROOT%/}
: "${IMAGE:?IMAGE is not set}"
describe_image "$IMAGE" "$ROOT"
: "${TARGET_MAJOR:?TARGET_MAJOR is not set}"
: "${DATABASE_MARKERS:?DATABASE_MARKERS is not set}"
: "${MAJOR_RULE:?MAJOR_RULE is not set}"
: "${TERMINATION_LOG:?TERMINATION_LOG is not set}"

WANT=$TARGET_MAJOR
major=${PG_MAJOR:-}
if [ -z "$major" ] && command -v postgres >/dev/null 2>&1; then
  version=$(postgres --version 2>/dev/null || true)
  if [[ $version =~ \)\ ([0-9]+) ]]; then major=${BASH_REMATCH[1]}; fi
fi
major=${major%%.*}
if [ -z "$major" ]; then
  unsupported "database image $IMAGE tells no PostgreSQL version (no PG_MAJOR, no postgres binary): it is not a server-postgresql image. Use server-postgresql of the same release as the server (--db-image/--pgsql-tag)"
fi
if [ "$MAJOR_RULE" = at-least ]; then
  if ! [[ $major =~ ^[0-9]+$ ]] || [ "$major" -lt "$WANT" ]; then
    unsupported "database image $IMAGE runs PostgreSQL $major; a new server needs PostgreSQL $WANT or newer (server-postgresql 5.2.3 or later). Use such an image (--db-image/--pgsql-tag)"
  fi
elif [ "$major" != "$WANT" ]; then
  unsupported "database image $IMAGE runs PostgreSQL $major; the migration targets PostgreSQL $WANT (server-postgresql 5.2.3 or later). Use such an image (--db-image/--pgsql-tag)"
fi
missing=()
while IFS= read -r f; do
  [ -n "$f" ] || continue
  [ -e "$ROOT$f" ] || missing+=("$f")
done <<<"$DATABASE_MARKERS"
if [ "${#missing[@]}" -gt 0 ]; then
  unsupported "database image $IMAGE runs PostgreSQL $major but lacks ${missing[*]}: it does not prepare migrated data at start (server-postgresql before 5.2.3). Use server-postgresql 5.2.3 or later (--db-image/--pgsql-tag)"
fi
echo "pg_major=$major" | tee "$ROOT$TERMINATION_LOG"
echo "SUPPORTED: database image $IMAGE runs PostgreSQL $major with its start-up hooks"
