//! The CA key Job's script: decrypts the migrated CA key with the CA password inside the
//! cluster (reference §5.4 with D44 fixed: no openssl on the user's machine, any key type
//! openssl reads, the password in a mounted file, never in argv or the log), checks that the key
//! belongs to the CA certificate, and writes it into the Secret `uyuni-ca` through the API.

use super::JobScript;

/// Where the Job finds the encrypted key and the CA certificate (items of the Secret
/// `uyuni-migration-data`).
pub const SOURCE_DIR: &str = "/run/uyuni-ca/source";
/// Where the Job finds the password (Secret `uyuni-ca-password`, key `password`).
pub const PASSWORD_DIR: &str = "/run/uyuni-ca/password";
/// In-memory scratch space: the decrypted key passes through here only.
pub const SCRATCH_DIR: &str = "/run/uyuni-ca/scratch";

/// The script (`core/scripts/ca-key.sh`), run after [`super::LIB`].
pub const SCRIPT: &str = include_str!("../../scripts/ca-key.sh");

/// The script with its parameters. `local_root` prefixes the mounted paths (tests); `secret` is
/// the Secret that receives `tls.key`.
pub fn render_ca_key(secret: &str, service_account_dir: &str, local_root: &str) -> JobScript {
    JobScript::new(
        SCRIPT,
        vec![
            ("SECRET", secret.to_owned()),
            ("CA_SOURCE_DIR", SOURCE_DIR.to_owned()),
            ("CA_PASSWORD_FILE", format!("{PASSWORD_DIR}/password")),
            ("CA_SCRATCH_DIR", SCRATCH_DIR.to_owned()),
            ("SA_DIR", service_account_dir.to_owned()),
        ],
        local_root,
    )
}
