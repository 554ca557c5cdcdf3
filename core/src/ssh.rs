//! Checks of the SSH material the data-sync Job uses to reach the source server.
//!
//! The Job runs unattended, so a key with a passphrase or a known_hosts file without the source
//! host would only fail inside the Job, after the volumes were created. These checks make that
//! fail before anything is written.
//!
//! The one ssh command the tool runs itself, the dry run's measurement of the source, is built
//! in [`crate::probe`].

use base64::Engine;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SshProblem {
    #[error("is empty")]
    Empty,
    #[error("is not a PEM or OpenSSH private key")]
    NotAPrivateKey,
    #[error(
        "is protected by a passphrase; the migration Job runs unattended and needs a key without one (remove it with `ssh-keygen -p -N '' -f KEYFILE` on a copy)"
    )]
    Encrypted,
    #[error("is not an OpenSSH public key line (`TYPE BASE64 [COMMENT]`)")]
    NotAPublicKey,
    #[error(
        "has no entry for {0}; add one with `ssh-keyscan {0} >> KNOWN_HOSTS` after checking the fingerprint (`ssh-keygen -lf KNOWN_HOSTS`, and on the source `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`), then run again"
    )]
    HostMissing(String),
    #[error(
        "holds no host key: the Job would refuse to connect to {0}. Add the source's with `ssh-keyscan {0} >> KNOWN_HOSTS`, check its fingerprint against the source's (`ssh-keygen -lf KNOWN_HOSTS`, and on the source `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`), then run again"
    )]
    KnownHostsEmpty(String),
    #[error(
        "does not belong to the private key (the private key's public key is {private}, the one given is {public}); give the matching public key: `ssh-keygen -y -f PRIVATE_KEY` prints it"
    )]
    NotThePair { private: String, public: String },
}

/// How the messages name the known_hosts file; [`SshProblem::for_file`] puts its path there.
const KNOWN_HOSTS: &str = "KNOWN_HOSTS";

impl SshProblem {
    /// The message about the file at `path`: the commands it advises name that file, so that
    /// they can be pasted.
    pub fn for_file(&self, path: &str) -> String {
        self.to_string()
            .replace(KNOWN_HOSTS, &crate::kubectl::shell_quote(path))
    }
}

const OPENSSH_BEGIN: &str = "-----BEGIN OPENSSH PRIVATE KEY-----";

/// Checks that `content` is a private key that needs no passphrase.
///
/// OpenSSH keys (what `ssh-keygen` writes by default) are parsed in full, so a damaged one is
/// refused here rather than by ssh inside the Job; PEM keys are only recognised by their armour.
pub fn check_private_key(content: &str) -> Result<(), SshProblem> {
    let content = content.trim();
    if content.is_empty() {
        return Err(SshProblem::Empty);
    }
    if content.contains(OPENSSH_BEGIN) {
        let key = parse_openssh(content)?;
        return if key.is_encrypted() {
            Err(SshProblem::Encrypted)
        } else {
            Ok(())
        };
    }
    if content.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || content.contains("Proc-Type: 4,ENCRYPTED")
    {
        return Err(SshProblem::Encrypted);
    }
    let pem_private = content.lines().next().is_some_and(|first| {
        first.starts_with("-----BEGIN ") && first.ends_with("PRIVATE KEY-----")
    });
    if pem_private {
        Ok(())
    } else {
        Err(SshProblem::NotAPrivateKey)
    }
}

fn parse_openssh(content: &str) -> Result<ssh_key::PrivateKey, SshProblem> {
    let start = content.find(OPENSSH_BEGIN).unwrap_or_default();
    ssh_key::PrivateKey::from_openssh(&content[start..]).map_err(|_| SshProblem::NotAPrivateKey)
}

/// Checks that `public` (one OpenSSH public key line) is the public half of `private`: a
/// mismatched pair is accepted by every other check, and fails only when the data-sync Job
/// logs in to the source, after the namespace and the volumes were written.
///
/// The OpenSSH private key format carries its public key, which the parser checks against the
/// private part; comparing it with the given line is what `ssh-keygen -y` shows. A PEM RSA key
/// (PKCS#1, `BEGIN RSA PRIVATE KEY`) is compared by modulus and exponent. Other PEM keys
/// (PKCS#8, EC) are not compared: they pass, and ssh tells in the Job.
pub fn check_key_pair(private: &str, public: &str) -> Result<(), SshProblem> {
    let private = private.trim();
    let given =
        ssh_key::PublicKey::from_openssh(public.trim()).map_err(|_| SshProblem::NotAPublicKey)?;
    let fingerprint =
        |key: &ssh_key::PublicKey| key.fingerprint(ssh_key::HashAlg::Sha256).to_string();
    if private.contains(OPENSSH_BEGIN) {
        let derived = parse_openssh(private)?.public_key().clone();
        return if derived.key_data() == given.key_data() {
            Ok(())
        } else {
            Err(SshProblem::NotThePair {
                private: fingerprint(&derived),
                public: fingerprint(&given),
            })
        };
    }
    if private.starts_with(PKCS1_BEGIN) {
        let (n, e) = pkcs1_public(private)?;
        let matches = given.key_data().rsa().is_some_and(|rsa| {
            strip(rsa.n.as_bytes()) == strip(&n) && strip(rsa.e.as_bytes()) == strip(&e)
        });
        return if matches {
            Ok(())
        } else {
            let derived = ssh_key::public::RsaPublicKey {
                e: ssh_key::Mpint::from_positive_bytes(strip(&e))
                    .map_err(|_| SshProblem::NotAPrivateKey)?,
                n: ssh_key::Mpint::from_positive_bytes(strip(&n))
                    .map_err(|_| SshProblem::NotAPrivateKey)?,
            };
            Err(SshProblem::NotThePair {
                private: fingerprint(&ssh_key::PublicKey::from(derived)),
                public: fingerprint(&given),
            })
        };
    }
    Ok(())
}

#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub const PKCS1_BEGIN: &str = "-----BEGIN RSA PRIVATE KEY-----";

/// The modulus and public exponent of a PKCS#1 PEM RSA private key (unencrypted: an
/// encrypted one has been refused before).
fn pkcs1_public(pem: &str) -> Result<(Vec<u8>, Vec<u8>), SshProblem> {
    let (_, der) =
        pkcs1::der::pem::decode_vec(pem.as_bytes()).map_err(|_| SshProblem::NotAPrivateKey)?;
    let key =
        pkcs1::RsaPrivateKey::try_from(der.as_slice()).map_err(|_| SshProblem::NotAPrivateKey)?;
    Ok((
        key.modulus.as_bytes().to_vec(),
        key.public_exponent.as_bytes().to_vec(),
    ))
}

/// A big-endian unsigned integer without its leading zero bytes (SSH's mpint keeps one where
/// the top bit is set, DER strips them).
fn strip(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len());
    &bytes[start..]
}

/// Checks that `content` is one OpenSSH public key line.
pub fn check_public_key(content: &str) -> Result<(), SshProblem> {
    let line = content.trim();
    if line.is_empty() {
        return Err(SshProblem::Empty);
    }
    let mut fields = line.split_whitespace();
    let key_type = fields.next().unwrap_or_default();
    let blob = fields.next().unwrap_or_default();
    let known_type = ["ssh-", "ecdsa-", "sk-"]
        .iter()
        .any(|p| key_type.starts_with(p));
    let blob_ok = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .is_ok_and(|b| !b.is_empty());
    if known_type && blob_ok && !line.contains('\n') {
        Ok(())
    } else {
        Err(SshProblem::NotAPublicKey)
    }
}

/// Glob match of one known_hosts host pattern (`*` and `?`).
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Checks that a known_hosts file is not empty and can vouch for `host`.
///
/// Hashed entries (`|1|…`) cannot be matched without the HMAC; when present they are given the
/// benefit of the doubt, and ssh itself checks them in the Job.
pub fn check_known_hosts(content: &str, host: &str) -> Result<(), SshProblem> {
    let entries: Vec<&str> = content
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if entries.is_empty() {
        return Err(SshProblem::KnownHostsEmpty(host.to_ascii_lowercase()));
    }
    let host = host.to_ascii_lowercase();
    for entry in entries {
        let mut fields = entry.split_whitespace();
        let mut hosts = fields.next().unwrap_or_default();
        if hosts.starts_with('@') {
            hosts = fields.next().unwrap_or_default();
        }
        if hosts.starts_with("|1|") {
            return Ok(());
        }
        let matches = hosts.split(',').any(|pattern| {
            let pattern = pattern.to_ascii_lowercase();
            let pattern = pattern
                .strip_prefix('[')
                .and_then(|p| p.split_once("]:"))
                .map(|(h, _)| h.to_owned())
                .unwrap_or(pattern);
            !pattern.starts_with('!') && glob(&pattern, &host)
        });
        if matches {
            return Ok(());
        }
    }
    Err(SshProblem::HostMissing(host))
}
