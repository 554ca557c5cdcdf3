#!/usr/bin/env bash
# The CA key Job (core/src/scripts/tls.rs): decrypts the migrated CA key with the CA password
# inside the cluster (the password in a mounted file, never in argv or the log), checks that the
# key belongs to the CA certificate, and writes it into a Secret through the API.
#
# Parameters, set by the Job spec; none of them is a secret:
#   SECRET              the Secret that receives tls.key
#   CA_SOURCE_DIR       where the encrypted ca.key and ca.crt are mounted
#   CA_PASSWORD_FILE    the mounted file holding the CA password
#   CA_SCRATCH_DIR      in-memory scratch space: the decrypted key passes through here only
#   SA_DIR              the ServiceAccount's token and ca.crt
#   LOCAL_ROOT          prefix of the mounted paths (not SA_DIR): empty in a Job, a directory
#                       in tests
#   UYUNI_DATA_SYNC_JOB the data-sync Job the data comes from, for advice (optional)
# and, from the pod: NAMESPACE, KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT.
# shellcheck source-path=SCRIPTDIR

# In a Job, lib.sh comes first in the same text; run as a file, the script loads it.
if ! declare -F conf_set >/dev/null; then
  # shellcheck source=lib.sh
  . "${BASH_SOURCE[0]%/*}/lib.sh"
fi

# No `set -x`, ever: the key passes through files of the scratch directory.
set -euo pipefail
umask 077
: "${SECRET:?SECRET is not set}"
: "${CA_SOURCE_DIR:?CA_SOURCE_DIR is not set}"
: "${CA_PASSWORD_FILE:?CA_PASSWORD_FILE is not set}"
: "${CA_SCRATCH_DIR:?CA_SCRATCH_DIR is not set}"
: "${SA_DIR:?SA_DIR is not set}"
ROOT=${LOCAL_ROOT-}
ROOT=${ROOT%/}
SOURCE=$ROOT$CA_SOURCE_DIR
PASSWORD_FILE=$ROOT$CA_PASSWORD_FILE
SCRATCH=$ROOT$CA_SCRATCH_DIR
cleanup() {
  rm -f -- "$SCRATCH/ca.key" "$SCRATCH/patch.json" "$SCRATCH/cert.pub" "$SCRATCH/key.pub" 2>/dev/null || true
}
trap cleanup EXIT
: "${NAMESPACE:?NAMESPACE is not set}"
: "${KUBERNETES_SERVICE_HOST:?KUBERNETES_SERVICE_HOST is not set}"
: "${KUBERNETES_SERVICE_PORT:?KUBERNETES_SERVICE_PORT is not set}"
# The planner runs this Job only on data that holds a CA key and certificate: empty ones mean
# Secret uyuni-migration-data was changed since. The sync that succeeded is never repeated by
# itself, so running again would meet the same empty item: the advice is what clears it.
sync_job=${UYUNI_DATA_SYNC_JOB:-of the final data sync}
resync="the Secret was changed since the sync. Running again alone does not clear this: delete Job $sync_job in namespace $NAMESPACE (kubectl delete job), then run the migration again; the final data sync runs anew and stops the source's services"
[ -s "$SOURCE/ca.key" ] || fail "Secret uyuni-migration-data holds no CA key although data sync Job $sync_job recorded one: $resync"
[ -s "$SOURCE/ca.crt" ] || fail "Secret uyuni-migration-data holds no CA certificate although data sync Job $sync_job recorded one: $resync"
[ -s "$PASSWORD_FILE" ] || fail "the CA password is empty: pass it with --ssl-password-file"
mkdir -p -- "$SCRATCH"

echo 'Decrypting the CA key'
if ! openssl pkey -in "$SOURCE/ca.key" -passin "file:$PASSWORD_FILE" -out "$SCRATCH/ca.key" 2>/dev/null; then
  fail "cannot decrypt the CA key: the CA password is wrong (give the right one with --ssl-password-file or UYUNI_SSL_PASSWORD, then run again)"
fi
openssl x509 -in "$SOURCE/ca.crt" -noout -pubkey >"$SCRATCH/cert.pub" ||
  fail "the migrated CA certificate cannot be read"
openssl pkey -in "$SCRATCH/ca.key" -pubout -out "$SCRATCH/key.pub" ||
  fail "the decrypted CA key cannot be read"
cmp -s "$SCRATCH/cert.pub" "$SCRATCH/key.pub" ||
  fail "the CA key does not belong to the CA certificate of the source"

echo "Writing the CA key into Secret $SECRET"
printf '{"data":{"tls.key":"%s"}}\n' "$(base64 -w0 <"$SCRATCH/ca.key")" >"$SCRATCH/patch.json"
patch_secret "$SECRET" "$SCRATCH/patch.json"
echo DONE
