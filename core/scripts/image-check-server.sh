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
#   INIT_DIR               the directory of the scripts the image runs at every start
#   SALT_CA_FILE           the CA's place in the Salt file root
#   TERMINATION_LOG        where the report goes besides the log (the kubelet's default path)
#   LOCAL_ROOT             prefix of every path: empty in a Job, a directory in tests
#
# A supported image is also reported as `key=value` lines, on the log and in the container's
# termination message, which the run copies onto the Job (core/src/inspect.rs):
#   ca_copy       salt-file-root when one of the image's start scripts names SALT_CA_FILE (it
#                 copies the CA there at every start: 15-setup-trust-store.sh), else none
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
: "${INIT_DIR:?INIT_DIR is not set}"
: "${SALT_CA_FILE:?SALT_CA_FILE is not set}"
: "${TERMINATION_LOG:?TERMINATION_LOG is not set}"

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
# Which kind of image: one that copies the CA into the Salt file root at start must not find a
# read-only file there, one that does not gets the CA mounted there (core/src/builders/server.rs).
ca_copy=none
for f in "$ROOT$INIT_DIR"/*; do
  [ -f "$f" ] || continue
  if grep -qF -- "$SALT_CA_FILE" "$f"; then
    ca_copy=salt-file-root
    echo "${f#"$ROOT"} copies the CA to $SALT_CA_FILE at start"
    break
  fi
done
echo "ca_copy=$ca_copy" | tee "$ROOT$TERMINATION_LOG"
echo "SUPPORTED: server image $IMAGE sets the server up by itself at start"
