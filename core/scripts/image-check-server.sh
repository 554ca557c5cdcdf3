#!/usr/bin/env bash
# The check of the server image (core/src/scripts/image_check.rs): runs inside the image for a few seconds, before anything
# else of the migration is written, reads files and the environment only, and prints one line
# starting with SUPPORTED: or UNSUPPORTED: (then exits 1, which fails the Job).
#
# Parameters, set by the Job spec; none of them is a secret:
#   IMAGE          the image checked, for messages
#   SERVER_MARKERS         files that mark a server image setting itself up, one a line
#   SETUP_MARKER           where the fix-up Job writes the setup marker
#   SETUP_LIBRARY          the image's setup library, which must name that marker
#   FIRST_SERVER_IMAGE     the first server image the migration supports, for advice
#   LOCAL_ROOT             prefix of every path: empty in a Job, a directory in tests
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
: "${SERVER_MARKERS:?SERVER_MARKERS is not set}"
: "${SETUP_MARKER:?SETUP_MARKER is not set}"
: "${SETUP_LIBRARY:?SETUP_LIBRARY is not set}"
: "${FIRST_SERVER_IMAGE:?FIRST_SERVER_IMAGE is not set}"

missing=()
while IFS= read -r f; do
  [ -n "$f" ] || continue
  [ -e "$ROOT$f" ] || missing+=("$f")
done <<<"$SERVER_MARKERS"
FIRST=$FIRST_SERVER_IMAGE
MARKER=$SETUP_MARKER
SETUP_LIB=$SETUP_LIBRARY
if [ "${#missing[@]}" -gt 0 ]; then
  unsupported "server image $IMAGE lacks ${missing[*]}: it does not set the server up at start the way the migration relies on (server images before $FIRST; 5.2.7 and 5.2.8 read their setup marker in /root and have no startup check). Use a server image of $FIRST or later, or the default latest (--image/--tag)"
fi
# The fix-up Job writes the marker there: an image that looks elsewhere would set the
# server up again on the migrated database.
if ! grep -qF -- "$MARKER" "$ROOT$SETUP_LIB"; then
  unsupported "server image $IMAGE does not read its setup marker at $MARKER ($SETUP_LIB does not name it): it would set the server up again on the migrated data. Use a server image of $FIRST or later, or the default latest (--image/--tag)"
fi
echo "SUPPORTED: server image $IMAGE sets the server up by itself at start"
