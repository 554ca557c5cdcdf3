use uyuni_core::ssh::{
    PKCS1_BEGIN, SshProblem, check_key_pair, check_known_hosts, check_private_key, check_public_key,
};

/// A key pair made by the real `ssh-keygen` (`kind`: ed25519 or rsa), as (private, public).
/// RSA keys have ssh-keygen's smallest size, 1024 bits: these tests read the keys' format, not
/// their strength, and its default 3072-bit keys took most of the CPU of the tests making them.
pub(crate) fn keygen(kind: &str, passphrase: &str) -> (String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("id");
    let bits: &[&str] = if kind == "rsa" { &["-b", "1024"] } else { &[] };
    let status = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", kind])
        .args(bits)
        .args(["-N", passphrase, "-C", "test@example.com", "-f"])
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
        .args(["-q", "-t", "rsa", "-b", "1024", "-m", "PEM", "-N", "", "-f"])
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
    let empty = check_known_hosts("\n# only comments\n", "Uyuni.Example.com");
    assert_eq!(
        empty,
        Err(SshProblem::KnownHostsEmpty("uyuni.example.com".into()))
    );
    // What to do next: the scan, and the fingerprint check.
    let text = empty.expect_err("empty").to_string();
    assert!(
        text.contains("ssh-keyscan uyuni.example.com >> KNOWN_HOSTS")
            && text.contains("ssh-keygen -lf"),
        "{text}"
    );
    // About a file given: its path, quoted for the shell, so that the commands paste.
    let text = SshProblem::KnownHostsEmpty("uyuni.example.com".into()).for_file("/my dir/kh");
    assert!(
        text.contains("`ssh-keyscan uyuni.example.com >> '/my dir/kh'`")
            && text.contains("`ssh-keygen -lf '/my dir/kh'`")
            && !text.contains("KNOWN_HOSTS"),
        "{text}"
    );
}
