//! The CA key Job's script: decrypts the migrated CA key with the CA password inside the
//! cluster (reference §5.4 with D44 fixed: no openssl on the user's machine, any key type
//! openssl reads, the password in a mounted file, never in argv or the log), checks that the key
//! belongs to the CA certificate, and writes it into the Secret `uyuni-ca` through the API.

use super::data_sync::shell_quote;

/// Where the Job finds the encrypted key and the CA certificate (items of the Secret
/// `uyuni-migration-data`).
pub const SOURCE_DIR: &str = "/run/uyuni-ca/source";
/// Where the Job finds the password (Secret `uyuni-ca-password`, key `password`).
pub const PASSWORD_DIR: &str = "/run/uyuni-ca/password";
/// In-memory scratch space: the decrypted key passes through here only.
pub const SCRATCH_DIR: &str = "/run/uyuni-ca/scratch";

/// Renders the script. `local_root` prefixes the mounted paths (tests); `secret` is the Secret
/// that receives `tls.key`.
pub fn render_ca_key(secret: &str, service_account_dir: &str, local_root: &str) -> String {
    let q = shell_quote;
    let root = local_root.trim_end_matches('/');
    let mut o = String::new();
    let mut line = |s: &str| {
        o.push_str(s);
        o.push('\n');
    };
    line("# kubectl-uyuni: decrypt the migrated CA key into Secret uyuni-ca. Rendered for bash.");
    line("# No `set -x`, ever: the key passes through files of the scratch directory.");
    line("set -euo pipefail");
    line("umask 077");
    line(&format!("SOURCE={}", q(&format!("{root}{SOURCE_DIR}"))));
    line(&format!(
        "PASSWORD_FILE={}",
        q(&format!("{root}{PASSWORD_DIR}/password"))
    ));
    line(&format!("SCRATCH={}", q(&format!("{root}{SCRATCH_DIR}"))));
    line(&format!("SA_DIR={}", q(service_account_dir)));
    line(&format!("SECRET={}", q(secret)));
    line(
        r#"fail() {
  echo "ERROR: $*" >&2
  exit 1
}
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
host=$KUBERNETES_SERVICE_HOST
case $host in *:*) host="[$host]" ;; esac
# The answer would echo the Secret's data: it goes to /dev/null.
curl -sS --fail --cacert "$SA_DIR/ca.crt" \
  -H "Authorization: Bearer $(cat "$SA_DIR/token")" \
  -H 'Content-Type: application/merge-patch+json' \
  -X PATCH --data-binary "@$SCRATCH/patch.json" -o /dev/null \
  "https://$host:$KUBERNETES_SERVICE_PORT/api/v1/namespaces/$NAMESPACE/secrets/$SECRET" ||
  fail "could not update Secret $SECRET"
echo DONE"#,
    );
    o
}
