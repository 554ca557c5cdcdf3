//! Checks of the SSH material the data-sync Job uses to reach the source server.
//!
//! The Job runs unattended, so a key with a passphrase or a known_hosts file without the source
//! host would only fail inside the Job, after the volumes were created. These checks make that
//! fail before anything is written.
//!
//! Here too: the one ssh command the tool runs itself, the dry run's measurement of the source
//! ([`source_probe`]), built from the validated parameters with the Job's options.

use std::ffi::OsString;
use std::path::PathBuf;

use base64::Engine;

use crate::params::MigrateParams;
use crate::scripts::data_sync::shell_quote;
use crate::volumes::VolumeRole;

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
    #[error(
        "does not belong to the private key (the private key's public key is {private}, the one given is {public}); give the matching public key: `ssh-keygen -y -f PRIVATE_KEY` prints it"
    )]
    NotThePair { private: String, public: String },
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

const PKCS1_BEGIN: &str = "-----BEGIN RSA PRIVATE KEY-----";

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

/// The `-o` options of every ssh to the source that runs unattended: the host key is checked
/// against the given known_hosts only, and nothing ever prompts (a prompt would hang a Job or a
/// dry run). The data-sync script's `ssh` and `RSYNC_RSH` carry the same two (a test below
/// keeps them in step until the script takes them from here).
pub const SSH_BATCH_OPTIONS: &[&str] = &["StrictHostKeyChecking=yes", "BatchMode=yes"];

/// How long the dry run's measurement of the source may take before the preview goes on
/// without it: `du` over the largest trees of a big server takes tens of seconds.
pub const PROBE_LIMIT_SECONDS: u64 = 60;

/// Gives up on a source that does not answer, well inside [`PROBE_LIMIT_SECONDS`].
const PROBE_CONNECT_TIMEOUT: &str = "ConnectTimeout=10";

/// The SSH files the user named on the command line, as paths on this machine. ssh reads the
/// key from its file itself, so the key never travels in argv.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeFiles {
    pub private_key: Option<PathBuf>,
    pub known_hosts: Option<PathBuf>,
    /// Optional, as for the Job: ssh then uses no config file at all.
    pub config: Option<PathBuf>,
}

/// The dry run's one `ssh … du` to the source: the program, its arguments and its limit. The
/// caller only spawns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceProbe {
    pub program: &'static str,
    pub args: Vec<OsString>,
    pub timeout_seconds: u64,
}

/// Why the source cannot be measured from here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeUnavailable {
    #[error(
        "sizes not measured: give --ssh-key-private and --ssh-knownhosts to measure the source from here"
    )]
    NoSshFiles,
}

/// The ssh command that measures, on the source, the trees the data-sync Job copies: the same
/// user, host key checking and config as the Job (no config file when none is given, so the
/// preview does not reach the source through the local user's `~/.ssh/config` when the Job
/// could not), and `sudo -n` for a user other than root, as the Job does. No connection
/// sharing: it is one session, and a master left behind would outlive the command on the
/// user's machine.
pub fn source_probe(
    params: &MigrateParams,
    files: &ProbeFiles,
) -> Result<SourceProbe, ProbeUnavailable> {
    let (Some(key), Some(known_hosts)) = (&files.private_key, &files.known_hosts) else {
        return Err(ProbeUnavailable::NoSshFiles);
    };
    let paths: Vec<String> = params
        .volumes
        .iter()
        .filter(|v| v.role != VolumeRole::Migration)
        .map(|v| shell_quote(v.mount_path.trim_end_matches('/')))
        .collect();
    let sudo = if params.ssh_user == "root" {
        ""
    } else {
        "sudo -n "
    };
    // Missing paths are skipped by du with a message on stderr, which is discarded; `true`
    // keeps the figures of the paths that exist from being taken for a failure.
    let remote = format!("{sudo}du -s -b {} 2>/dev/null; true", paths.join(" "));
    let mut known_hosts_option = OsString::from("UserKnownHostsFile=");
    known_hosts_option.push(ssh_option_value(known_hosts));
    let mut args: Vec<OsString> = vec!["-i".into(), key.into(), "-o".into(), known_hosts_option];
    for option in SSH_BATCH_OPTIONS.iter().chain([&PROBE_CONNECT_TIMEOUT]) {
        args.push("-o".into());
        args.push((*option).into());
    }
    args.push("-F".into());
    args.push(
        files
            .config
            .as_ref()
            .map_or_else(|| OsString::from("/dev/null"), |c| c.into()),
    );
    args.push(format!("{}@{}", params.ssh_user, params.source_fqdn).into());
    args.push(remote.into());
    Ok(SourceProbe {
        program: "ssh",
        args,
        timeout_seconds: PROBE_LIMIT_SECONDS,
    })
}

/// A path as the value of an `-o` option: ssh splits option values at whitespace (known_hosts
/// takes a list of files), so a path with a blank goes in double quotes.
fn ssh_option_value(path: &std::path::Path) -> OsString {
    let has_blank = path.to_string_lossy().chars().any(char::is_whitespace);
    if has_blank {
        let mut quoted = OsString::from("\"");
        quoted.push(path);
        quoted.push("\"");
        quoted
    } else {
        path.into()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn probe_files() -> ProbeFiles {
        ProbeFiles {
            private_key: Some("/home/me/.ssh/id_migrate".into()),
            known_hosts: Some("/home/me/known hosts".into()),
            config: None,
        }
    }

    fn args_text(probe: &SourceProbe) -> Vec<String> {
        probe
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_probe_runs_du_over_the_copied_trees_like_the_job_would() {
        let params = MigrateParams::from_args(&crate::params::tests::args()).expect("valid");
        let probe = source_probe(&params, &probe_files()).expect("files given");
        assert_eq!(probe.program, "ssh");
        assert_eq!(probe.timeout_seconds, PROBE_LIMIT_SECONDS);
        let args = args_text(&probe);
        assert_eq!(
            args[..12],
            [
                "-i",
                "/home/me/.ssh/id_migrate",
                "-o",
                "UserKnownHostsFile=\"/home/me/known hosts\"",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                "BatchMode=yes",
                "-o",
                "ConnectTimeout=10",
                "-F",
                "/dev/null",
            ]
        );
        assert_eq!(args[12], "root@uyuni.example.com");
        let remote = &args[13];
        assert_eq!(args.len(), 14);
        assert!(remote.starts_with("du -s -b '/"), "{remote}");
        assert!(remote.ends_with(" 2>/dev/null; true"), "{remote}");
        assert!(remote.contains("'/var/lib/pgsql/data'"), "{remote}");
        for volume in &params.volumes {
            let quoted = shell_quote(volume.mount_path.trim_end_matches('/'));
            assert_eq!(
                remote.contains(&quoted),
                volume.role != VolumeRole::Migration,
                "{}",
                volume.mount_path
            );
        }
    }

    #[test]
    fn the_probe_uses_sudo_and_the_given_config() {
        let mut a = crate::params::tests::args();
        a.ssh_user = "admin".into();
        let params = MigrateParams::from_args(&a).expect("valid");
        let files = ProbeFiles {
            config: Some("/home/me/.ssh/config".into()),
            ..probe_files()
        };
        let args = args_text(&source_probe(&params, &files).expect("files given"));
        let f = args.iter().position(|a| a == "-F").expect("-F");
        assert_eq!(args[f + 1], "/home/me/.ssh/config");
        assert_eq!(args[args.len() - 2], "admin@uyuni.example.com");
        assert!(args[args.len() - 1].starts_with("sudo -n du -s -b "));
    }

    #[test]
    fn the_probe_needs_the_key_and_known_hosts_files_and_puts_no_secret_in_argv() {
        let (private, public) = keygen("ed25519", "");
        let mut a = crate::params::tests::args();
        a.ssh_key_private = Some(crate::params::FileInput {
            path: "/home/me/.ssh/id_migrate".into(),
            content: crate::secret::SecretString::new(private.clone()),
        });
        a.ssh_key_public = Some(crate::params::FileInput {
            path: "/home/me/.ssh/id_migrate.pub".into(),
            content: crate::secret::SecretString::new(public),
        });
        let params = MigrateParams::from_args(&a).expect("valid");
        for files in [
            ProbeFiles::default(),
            ProbeFiles {
                known_hosts: None,
                ..probe_files()
            },
            ProbeFiles {
                private_key: None,
                ..probe_files()
            },
        ] {
            assert_eq!(
                source_probe(&params, &files),
                Err(ProbeUnavailable::NoSshFiles)
            );
        }
        let args = args_text(&source_probe(&params, &probe_files()).expect("files given"));
        let key_body = private.lines().nth(1).expect("a key line");
        assert!(args.iter().all(|a| !a.contains(key_body)), "{args:?}");
    }

    #[test]
    fn the_data_sync_script_uses_the_same_batch_options() {
        use crate::scripts::data_sync::{DataSyncScript, ScriptPaths, render};
        let script = render(&DataSyncScript {
            source_fqdn: "uyuni.example.com".into(),
            ssh_user: "root".into(),
            prepare: true,
            compress: false,
            volumes: Vec::new(),
            data_secret: "data".into(),
            db_host: "db".into(),
            report_db_host: "reportdb".into(),
            paths: ScriptPaths::production(),
        });
        let ssh_lines: Vec<&str> = script
            .lines()
            .filter(|l| l.trim_start().starts_with("SSH=(") || l.contains("RSYNC_RSH="))
            .collect();
        assert!(!ssh_lines.is_empty(), "the script defines its ssh command");
        for line in ssh_lines {
            for option in SSH_BATCH_OPTIONS {
                assert!(line.contains(&format!("-o {option}")), "{option}: {line}");
            }
        }
    }

    /// A key pair made by the real `ssh-keygen` (`kind`: ed25519 or rsa), as (private, public).
    pub(crate) fn keygen(kind: &str, passphrase: &str) -> (String, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("id");
        let status = std::process::Command::new("ssh-keygen")
            .args([
                "-q",
                "-t",
                kind,
                "-N",
                passphrase,
                "-C",
                "test@example.com",
                "-f",
            ])
            .arg(&path)
            .status()
            .expect("ssh-keygen runs (it is installed on every machine of the project)");
        assert!(status.success(), "ssh-keygen -t {kind} failed");
        let read = |p: &std::path::Path| std::fs::read_to_string(p).expect("key file");
        (read(&path), read(&path.with_extension("pub")))
    }

    #[test]
    fn unencrypted_openssh_keys_pass() {
        for kind in ["ed25519", "rsa", "ecdsa"] {
            let (private, _) = keygen(kind, "");
            assert_eq!(check_private_key(&private), Ok(()), "{kind}");
        }
    }

    #[test]
    fn a_damaged_openssh_key_is_refused() {
        let (private, _) = keygen("ed25519", "");
        let damaged: String = private
            .lines()
            .map(|l| {
                if l.starts_with("-----") {
                    l.to_owned()
                } else {
                    l.replacen('A', "B", 3)
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        assert_eq!(check_private_key(&damaged), Err(SshProblem::NotAPrivateKey));
    }

    #[test]
    fn encrypted_keys_are_refused() {
        for kind in ["ed25519", "rsa"] {
            let (private, public) = keygen(kind, "correct horse battery");
            assert_eq!(
                check_private_key(&private),
                Err(SshProblem::Encrypted),
                "{kind}"
            );
            // Its public part is readable without the passphrase, so the pair check alone
            // would let it through: the passphrase check is what refuses it.
            assert_eq!(check_key_pair(&private, &public), Ok(()), "{kind}");
        }
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00\n\nAAAA\n-----END RSA PRIVATE KEY-----\n";
        assert_eq!(check_private_key(pem), Err(SshProblem::Encrypted));
        let pkcs8 =
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n";
        assert_eq!(check_private_key(pkcs8), Err(SshProblem::Encrypted));
    }

    #[test]
    fn a_pair_matches_only_its_own_public_key() {
        for kind in ["ed25519", "rsa"] {
            let (private, public) = keygen(kind, "");
            let (_, other_public) = keygen(kind, "");
            assert_eq!(check_key_pair(&private, &public), Ok(()), "{kind}");
            // The comment is not part of the key.
            let renamed = public.replace("test@example.com", "someone@else");
            assert_eq!(check_key_pair(&private, &renamed), Ok(()), "{kind}");
            match check_key_pair(&private, &other_public) {
                Err(SshProblem::NotThePair {
                    private: a,
                    public: b,
                }) => {
                    assert!(a.starts_with("SHA256:") && b.starts_with("SHA256:") && a != b);
                }
                other => panic!("{kind}: mismatched pair accepted: {other:?}"),
            }
        }
        let (ed, _) = keygen("ed25519", "");
        let (_, rsa_public) = keygen("rsa", "");
        assert!(matches!(
            check_key_pair(&ed, &rsa_public),
            Err(SshProblem::NotThePair { .. })
        ));
    }

    /// A PEM (PKCS#1) RSA key pair, as `ssh-keygen -m PEM` writes it.
    fn keygen_pem_rsa() -> (String, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("id");
        let status = std::process::Command::new("ssh-keygen")
            .args(["-q", "-t", "rsa", "-b", "2048", "-m", "PEM", "-N", "", "-f"])
            .arg(&path)
            .status()
            .expect("ssh-keygen runs");
        assert!(status.success());
        let read = |p: &std::path::Path| std::fs::read_to_string(p).expect("key file");
        (read(&path), read(&path.with_extension("pub")))
    }

    #[test]
    fn a_pem_rsa_pair_is_compared_too() {
        let (private, public) = keygen_pem_rsa();
        assert!(
            private.starts_with(PKCS1_BEGIN),
            "{}",
            private.lines().next().unwrap_or("")
        );
        assert_eq!(check_private_key(&private), Ok(()));
        assert_eq!(check_key_pair(&private, &public), Ok(()));
        let (_, other) = keygen_pem_rsa();
        let (_, ed) = keygen("ed25519", "");
        for wrong in [other, ed] {
            assert!(matches!(
                check_key_pair(&private, &wrong),
                Err(SshProblem::NotThePair { .. })
            ));
        }
    }

    #[test]
    fn the_mismatch_message_says_how_to_find_the_right_key() {
        let (private, _) = keygen("ed25519", "");
        let (_, other) = keygen("ed25519", "");
        let text = check_key_pair(&private, &other)
            .expect_err("mismatch")
            .to_string();
        assert!(text.contains("ssh-keygen -y -f"), "{text}");
        assert!(
            !text.contains(private.lines().nth(1).unwrap_or("-")),
            "{text}"
        );
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
