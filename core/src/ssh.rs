//! Checks of the SSH material the data-sync Job uses to reach the source server.
//!
//! The Job runs unattended, so a key with a passphrase or a known_hosts file without the source
//! host would only fail inside the Job, after the volumes were created. These checks make that
//! fail before anything is written.

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
        "has no entry for {0}; add one with `ssh-keyscan {0} >> KNOWN_HOSTS` after checking the fingerprint"
    )]
    HostMissing(String),
}

const OPENSSH_BEGIN: &str = "-----BEGIN OPENSSH PRIVATE KEY-----";
const OPENSSH_END: &str = "-----END OPENSSH PRIVATE KEY-----";

/// Checks that `content` is a private key that needs no passphrase.
pub fn check_private_key(content: &str) -> Result<(), SshProblem> {
    let content = content.trim();
    if content.is_empty() {
        return Err(SshProblem::Empty);
    }
    if let Some(start) = content.find(OPENSSH_BEGIN) {
        let body = &content[start + OPENSSH_BEGIN.len()..];
        let body = body.split(OPENSSH_END).next().unwrap_or_default();
        let b64: String = body.chars().filter(|c| !c.is_whitespace()).collect();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| SshProblem::NotAPrivateKey)?;
        let magic = b"openssh-key-v1\0";
        let rest = bytes
            .strip_prefix(magic.as_slice())
            .ok_or(SshProblem::NotAPrivateKey)?;
        let len_bytes: [u8; 4] = rest
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or(SshProblem::NotAPrivateKey)?;
        let len = u32::from_be_bytes(len_bytes) as usize;
        let cipher = rest.get(4..4 + len).ok_or(SshProblem::NotAPrivateKey)?;
        return if cipher == b"none" {
            Ok(())
        } else {
            Err(SshProblem::Encrypted)
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
        return Err(SshProblem::Empty);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn openssh_key(cipher: &str) -> String {
        let mut raw = b"openssh-key-v1\0".to_vec();
        raw.extend((cipher.len() as u32).to_be_bytes());
        raw.extend(cipher.as_bytes());
        raw.extend([0u8; 16]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(raw);
        format!("{OPENSSH_BEGIN}\n{b64}\n{OPENSSH_END}\n")
    }

    #[test]
    fn unencrypted_openssh_key_passes() {
        assert_eq!(check_private_key(&openssh_key("none")), Ok(()));
    }

    #[test]
    fn encrypted_keys_are_refused() {
        assert_eq!(
            check_private_key(&openssh_key("aes256-ctr")),
            Err(SshProblem::Encrypted)
        );
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        assert_eq!(check_private_key(pem), Err(SshProblem::Encrypted));
        let pkcs8 =
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
        assert_eq!(check_private_key(pkcs8), Err(SshProblem::Encrypted));
    }

    #[test]
    fn other_content_is_not_a_key() {
        assert_eq!(check_private_key(""), Err(SshProblem::Empty));
        assert_eq!(
            check_private_key("ssh-ed25519 AAAA"),
            Err(SshProblem::NotAPrivateKey)
        );
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        assert_eq!(check_private_key(pem), Ok(()));
    }

    #[test]
    fn public_key_lines() {
        assert_eq!(
            check_public_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 root@x\n"),
            Ok(())
        );
        assert_eq!(
            check_public_key("hello world"),
            Err(SshProblem::NotAPublicKey)
        );
        assert_eq!(check_public_key("  "), Err(SshProblem::Empty));
    }

    #[test]
    fn known_hosts_must_name_the_source() {
        let kh = "# comment\nother.example.com,10.0.0.1 ssh-ed25519 AAAA\n";
        assert_eq!(
            check_known_hosts(kh, "uyuni.example.com"),
            Err(SshProblem::HostMissing("uyuni.example.com".into()))
        );
        assert_eq!(
            check_known_hosts("UYUNI.example.com ssh-ed25519 AAAA", "uyuni.example.com"),
            Ok(())
        );
        assert_eq!(
            check_known_hosts(
                "[uyuni.example.com]:2222 ssh-ed25519 AAAA",
                "uyuni.example.com"
            ),
            Ok(())
        );
        assert_eq!(
            check_known_hosts("*.example.com ssh-ed25519 AAAA", "uyuni.example.com"),
            Ok(())
        );
        assert_eq!(
            check_known_hosts("|1|abc=|def= ssh-ed25519 AAAA", "uyuni.example.com"),
            Ok(())
        );
        assert_eq!(
            check_known_hosts("\n# only comments\n", "x"),
            Err(SshProblem::Empty)
        );
    }
}
