#!/usr/bin/env bash
# The inspection of an image (core/src/scripts/image_inspect.rs), for `upgrade`: runs inside the
# image for a few seconds, reads files and the environment only, and reports what the image is
# as `key=value` lines, on its log and in its container's termination message
# (/dev/termination-log, which the kubelet copies into the pod's status), where the tool reads
# them back. Keys (the reference's §8.1, uyuni-tools' shared/utils/serverinspector.go and
# dbinspector.go, with its R fixes):
#   product       uyuni or suse-manager: the release file the image has
#   release       the product's release: the third word of the line with "Uyuni release" in
#                 /etc/*release, or the digits and dots after the first "(" of
#                 /etc/susemanager-release
#   pg_major      PG_MAJOR of the image's environment, else the major of `postgres --version`
#   ca_copy       for a server image (INIT_DIR set) only, as the server image check reports it
#                 (image-check-server.sh): salt-file-root when one of the image's start scripts
#                 names SALT_CA_FILE, else none
# A key the image does not tell is left out.
#
# Parameters, set by the Job spec; none of them is a secret:
#   IMAGE              the image inspected, for messages
#   TERMINATION_LOG    where the report goes besides the log (the kubelet's default path)
#   INIT_DIR           a server image's: the directory of the scripts it runs at every start
#   SALT_CA_FILE       a server image's: the CA's place in the Salt file root
#   LOCAL_ROOT         prefix of every path: empty in a Job, a directory in tests
# and PG_MAJOR, when the image sets it.
# shellcheck source-path=SCRIPTDIR

# In a Job, lib.sh comes first in the same text; run as a file, the script loads it.
if ! declare -F conf_set >/dev/null; then
  # shellcheck source=lib.sh
  . "${BASH_SOURCE[0]%/*}/lib.sh"
fi

set -uo pipefail
ROOT=${LOCAL_ROOT-}
ROOT=${ROOT%/}
: "${IMAGE:?IMAGE is not set}"
: "${TERMINATION_LOG:?TERMINATION_LOG is not set}"

report=()
release=''
for f in "$ROOT"/etc/*release; do
  [ -f "$f" ] || continue
  line=$(grep -m1 'Uyuni release' "$f" 2>/dev/null || true)
  if [ -n "$line" ]; then
    read -r _ _ release _ <<<"$line"
    report+=("product=uyuni" "release=$release")
    break
  fi
done
if [ -z "$release" ] && [ -f "$ROOT/etc/susemanager-release" ]; then
  line=$(head -n1 "$ROOT/etc/susemanager-release")
  if [[ $line =~ \(([0-9.]+) ]]; then
    report+=("product=suse-manager" "release=${BASH_REMATCH[1]}")
  fi
fi
major=${PG_MAJOR:-}
if [ -z "$major" ] && command -v postgres >/dev/null 2>&1; then
  version=$(postgres --version 2>/dev/null || true)
  if [[ $version =~ \)\ ([0-9]+) ]]; then major=${BASH_REMATCH[1]}; fi
fi
major=${major%%.*}
[ -n "$major" ] && report+=("pg_major=$major")
# The server image check's test (image-check-server.sh), here rather than in lib.sh, whose
# text is part of every Job's spec.
if [ -n "${INIT_DIR:-}" ]; then
  : "${SALT_CA_FILE:?SALT_CA_FILE is not set}"
  ca_copy=none
  for f in "$ROOT$INIT_DIR"/*; do
    [ -f "$f" ] || continue
    if grep -qF -- "$SALT_CA_FILE" "$f"; then
      ca_copy=salt-file-root
      echo "${f#"$ROOT"} copies the CA to $SALT_CA_FILE at start"
      break
    fi
  done
  report+=("ca_copy=$ca_copy")
fi

echo "Inspected $IMAGE:"
: >"$ROOT$TERMINATION_LOG"
if [ "${#report[@]}" -gt 0 ]; then
  printf '%s\n' "${report[@]}" | tee "$ROOT$TERMINATION_LOG"
else
  echo "(the image tells neither a release nor a PostgreSQL version)"
fi
