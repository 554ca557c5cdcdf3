#!/usr/bin/env bash
# The check of the database upgrade image (core/src/scripts/image_check.rs): runs inside the image for a few seconds, before anything
# else of the migration is written, reads files and the environment only, and prints one line
# starting with SUPPORTED: or UNSUPPORTED: (then exits 1, which fails the Job).
#
# Parameters, set by the Job spec; none of them is a secret:
#   IMAGE          the image checked, for messages
#   TARGET_MAJOR       the PostgreSQL major the migration upgrades to
#   SOURCE_MAJORS      the source majors it can upgrade from, space-separated
#   LOCAL_ROOT         prefix of every path: empty in a Job, a directory in tests
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
: "${SOURCE_MAJORS:?SOURCE_MAJORS is not set}"

TO=$TARGET_MAJOR
read -ra majors <<<"$SOURCE_MAJORS"
if [ ! -x "$ROOT/usr/lib/postgresql$TO/bin/pg_upgrade" ]; then
  unsupported "database upgrade image $IMAGE has no /usr/lib/postgresql$TO/bin/pg_upgrade: it cannot upgrade to PostgreSQL $TO. Use server-database-migration of the same release as the server (--dbupgrade-image/--dbupgrade-tag)"
fi
from=()
for v in "${majors[@]}"; do
  [ -x "$ROOT/usr/lib/postgresql$v/bin/postgres" ] && from+=("$v")
done
if [ "${#from[@]}" -eq 0 ]; then
  unsupported "database upgrade image $IMAGE has the binaries of none of PostgreSQL ${SOURCE_MAJORS// / or }: it cannot upgrade a migrated database. Use server-database-migration of the same release as the server (--dbupgrade-image/--dbupgrade-tag)"
fi
echo "SUPPORTED: database upgrade image $IMAGE upgrades PostgreSQL ${from[*]} to $TO"
