use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};
use uyuni_testdata::addons::certmanager::{
    Readiness, ca_secret_ref, issuer_readiness, needs_issuance, next_condition, parse_duration,
    pem_blocks, secret_manifest, sign, validity,
};

fn secret(fields: &[&str]) -> Value {
    let data: serde_json::Map<String, Value> = fields
        .iter()
        .map(|f| (f.to_string(), json!(B64.encode(format!("{f} content")))))
        .collect();
    json!({"metadata": {"name": "ca"}, "data": data})
}

/// Runs openssl in `dir`; fails the test with its output unless it succeeds.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn issuers_are_ready_as_cert_manager_says() {
    let self_signed =
        json!({"metadata": {"name": "s", "namespace": "u"}, "spec": {"selfSigned": {}}});
    assert_eq!(
        issuer_readiness(&self_signed, None),
        Readiness::new(true, "IsReady", "")
    );
    let ca = json!({"metadata": {"name": "c", "namespace": "u"}, "spec": {"ca": {"secretName": "ca-kp"}}});
    assert_eq!(
        ca_secret_ref(&ca, false),
        Some(("u".into(), "ca-kp".into()))
    );
    assert_eq!(
        ca_secret_ref(&ca, true),
        Some(("cert-manager".into(), "ca-kp".into()))
    );
    assert_eq!(
        issuer_readiness(&ca, None),
        Readiness::new(
            false,
            "ErrGetKeyPair",
            "Error getting keypair for CA issuer: secret \"ca-kp\" not found"
        )
    );
    assert!(!issuer_readiness(&ca, Some(&secret(&["tls.crt"]))).ready);
    let garbage = issuer_readiness(&ca, Some(&secret(&["tls.crt", "tls.key"])));
    assert_eq!(garbage.reason, "ErrInvalidKeyPair", "{garbage:?}");
    let (crt, key, _) =
        sign(&json!({"isCA": true, "commonName": "ca"}), None, 0, 1 << 31).expect("a CA");
    let real = json!({"data": {"tls.crt": B64.encode(crt), "tls.key": B64.encode(key)}});
    assert_eq!(
        issuer_readiness(&ca, Some(&real)),
        Readiness::new(true, "KeyPairVerified", "Signing CA verified")
    );
    let acme = json!({"spec": {"acme": {"server": "https://acme"}}});
    assert!(!issuer_readiness(&acme, None).ready);
}

#[test]
fn a_condition_is_written_only_when_it_changes_and_keeps_its_transition_time() {
    let ready = Readiness::new(true, "IsReady", "");
    let fresh = json!({"metadata": {"generation": 2}});
    let c = next_condition(&fresh, &ready, "T1").expect("a first condition");
    assert_eq!(c["status"], "True");
    assert_eq!(c["observedGeneration"], 2);
    assert_eq!(c["lastTransitionTime"], "T1");
    let written = json!({"metadata": {"generation": 2}, "status": {"conditions": [c]}});
    assert_eq!(next_condition(&written, &ready, "T2"), None);
    // A new generation: rewritten, but True since T1 still.
    let mut newer = written.clone();
    newer["metadata"]["generation"] = json!(3);
    let c = next_condition(&newer, &ready, "T2").expect("rewritten");
    assert_eq!(c["lastTransitionTime"], "T1");
    assert_eq!(c["observedGeneration"], 3);
    let c = next_condition(&newer, &Readiness::new(false, "X", "m"), "T3").expect("flips");
    assert_eq!(c["lastTransitionTime"], "T3");
}

#[test]
fn durations_and_renewal_times_follow_cert_manager() {
    assert_eq!(parse_duration("2160h"), Some(2160 * 3600));
    assert_eq!(parse_duration("1h30m0s"), Some(5400));
    assert_eq!(parse_duration("45m"), Some(2700));
    assert_eq!(parse_duration("10d"), None);
    assert_eq!(parse_duration(""), None);
    let day = 24 * 3600;
    assert_eq!(validity(&json!({}), 0), (0, 90 * day, 60 * day));
    assert_eq!(
        validity(&json!({"duration": "720h", "renewBefore": "240h"}), 100),
        (100, 100 + 30 * day, 100 + 20 * day)
    );
    assert_eq!(
        validity(&json!({"duration": "100h", "renewBeforePercentage": 25}), 0),
        (0, 100 * 3600, 75 * 3600)
    );
    // A renewBefore longer than the duration is ignored, as cert-manager does.
    assert_eq!(
        validity(&json!({"duration": "3h", "renewBefore": "5h"}), 0).2,
        2 * 3600
    );
}

#[test]
fn issuance_is_needed_until_ready_for_the_generation_with_its_own_secret() {
    let cert = |status: &str, observed: i64| {
        json!({"metadata": {"name": "web", "generation": 1},
               "status": {"conditions": [{"type": "Ready", "status": status, "observedGeneration": observed}]}})
    };
    let mut own = secret(&["tls.crt", "tls.key"]);
    own["metadata"]["annotations"] = json!({"cert-manager.io/certificate-name": "web"});
    assert!(!needs_issuance(&cert("True", 1), Some(&own)));
    assert!(needs_issuance(&cert("True", 1), None));
    assert!(needs_issuance(&cert("True", 0), Some(&own)));
    assert!(needs_issuance(&cert("False", 1), Some(&own)));
    let foreign = secret(&["tls.crt", "tls.key"]);
    assert!(needs_issuance(&cert("True", 1), Some(&foreign)));
}

#[test]
fn a_ca_signs_a_leaf_whose_issuer_is_the_ca_and_the_secret_says_so() {
    let ca_spec = json!({"isCA": true, "commonName": "uyuni-ca", "secretName": "ca-kp",
                         "issuerRef": {"name": "selfsigned", "kind": "ClusterIssuer"}});
    let (ca_crt, ca_key, ca_root) =
        sign(&ca_spec, None, 1_700_000_000, 1_800_000_000).expect("a self-signed CA");
    assert_eq!(
        ca_crt, ca_root,
        "a self-signed certificate is its own ca.crt"
    );
    let leaf_spec = json!({"commonName": "uyuni.example.com", "dnsNames": ["uyuni.example.com"],
                           "secretName": "uyuni-cert", "issuerRef": {"name": "ca", "kind": "Issuer"}});
    let (leaf, _key, root) = sign(
        &leaf_spec,
        Some((&ca_crt, &ca_key)),
        1_700_000_000,
        1_800_000_000,
    )
    .expect("a leaf");
    assert_eq!(root, ca_crt);
    assert_ne!(leaf, ca_crt);
    assert_eq!(
        pem_blocks(&leaf).len(),
        1,
        "a root CA is not repeated in tls.crt"
    );
    // The chain verifies (openssl is what scripts/cluster.sh needs anyway).
    let dir = tempfile::tempdir().expect("a temp dir");
    std::fs::write(dir.path().join("ca.crt"), &ca_crt).expect("write");
    std::fs::write(dir.path().join("tls.crt"), &leaf).expect("write");
    openssl(
        dir.path(),
        &[
            "verify",
            "-attime",
            "1750000000",
            "-CAfile",
            "ca.crt",
            "tls.crt",
        ],
    );

    let cert = json!({"metadata": {"name": "uyuni", "namespace": "uyuni"}, "spec": leaf_spec});
    let s = secret_manifest(&cert, &leaf, "KEY", &root);
    assert_eq!(s["type"], "kubernetes.io/tls");
    assert_eq!(s["metadata"]["name"], "uyuni-cert");
    assert_eq!(s["metadata"]["namespace"], "uyuni");
    let a = &s["metadata"]["annotations"];
    assert_eq!(a["cert-manager.io/certificate-name"], "uyuni");
    assert_eq!(a["cert-manager.io/issuer-name"], "ca");
    assert_eq!(a["cert-manager.io/issuer-kind"], "Issuer");
    assert_eq!(a["cert-manager.io/common-name"], "uyuni.example.com");
    assert_eq!(a["cert-manager.io/alt-names"], "uyuni.example.com");
    assert_eq!(
        B64.decode(s["data"]["ca.crt"].as_str().expect("ca.crt"))
            .expect("base64"),
        root.as_bytes()
    );
    assert!(sign(&leaf_spec, Some(("no pem", &ca_key)), 0, 1).is_err());
}

mod openssl_ca_tests {
    use serde_json::json;
    use uyuni_testdata::addons::certmanager::sign;
    use uyuni_testdata::engine::now_seconds;

    /// A CA made by openssl, as the source server's `RHN-ORG-TRUSTED-SSL-CERT` is (RSA), with
    /// its key in PKCS#8 (`BEGIN PRIVATE KEY`) or, with `traditional`, PKCS#1.
    fn openssl_ca(dir: &std::path::Path, traditional: bool) -> (String, String) {
        let run = |args: &[&str]| super::openssl(dir, args);
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "3650",
            "-subj",
            "/O=SUSE/CN=RHN-ORG-TRUSTED-SSL-CERT",
        ]);
        if traditional {
            run(&["rsa", "-in", "ca.key", "-traditional", "-out", "ca.key"]);
        }
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("read");
        (read("ca.crt"), read("ca.key"))
    }

    #[test]
    fn an_rsa_ca_made_by_openssl_signs_a_leaf_that_verifies() {
        for traditional in [false, true] {
            let dir = tempfile::tempdir().expect("a temp dir");
            let (ca_crt, ca_key) = openssl_ca(dir.path(), traditional);
            assert_eq!(ca_key.contains("BEGIN RSA PRIVATE KEY"), traditional);
            let spec = json!({"dnsNames": ["uyuni.example.com"], "secretName": "web"});
            let now = now_seconds();
            let (leaf, _, root) = sign(&spec, Some((&ca_crt, &ca_key)), now - 60, now + 3600)
                .unwrap_or_else(|e| panic!("traditional={traditional}: {e}"));
            assert_eq!(root, ca_crt);
            std::fs::write(dir.path().join("leaf.crt"), &leaf).expect("write");
            let out = std::process::Command::new("openssl")
                .args(["verify", "-CAfile", "ca.crt", "leaf.crt"])
                .current_dir(dir.path())
                .output()
                .expect("openssl runs");
            assert!(
                out.status.success(),
                "traditional={traditional}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

mod ca_issuer_tests {
    use rcgen::{CertificateParams, DnType, DnValue, IsCa, KeyIdMethod, KeyPair};
    use serde_json::json;
    use uyuni_testdata::addons::certmanager::{ca_issuer, sign};
    use x509_cert::Certificate;
    use x509_cert::der::oid::AssociatedOid as _;
    use x509_cert::der::{Decode as _, DecodePem as _, Encode as _};
    use x509_cert::ext::pkix::{AuthorityKeyIdentifier, SubjectKeyIdentifier};

    fn extension(cert: &Certificate, oid: x509_cert::der::oid::ObjectIdentifier) -> Option<&[u8]> {
        cert.tbs_certificate
            .extensions
            .iter()
            .flatten()
            .find(|e| e.extn_id == oid)
            .map(|e| e.extn_value.as_bytes())
    }

    /// A CA whose subject mixes string types, with a subject key identifier that is not the
    /// one rcgen would derive from its key.
    fn ca() -> (String, String) {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::default();
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name = rcgen::DistinguishedName::new();
        params.distinguished_name.push(
            DnType::CountryName,
            DnValue::PrintableString("DE".try_into().expect("printable")),
        );
        params.distinguished_name.push(
            DnType::OrganizationName,
            DnValue::Utf8String("SUSE Ünits".into()),
        );
        params.distinguished_name.push(
            DnType::CommonName,
            DnValue::PrintableString("RHN-ORG-TRUSTED-SSL-CERT".try_into().expect("printable")),
        );
        params.key_identifier_method = KeyIdMethod::PreSpecified(vec![7; 20]);
        let cert = params.self_signed(&key).expect("a CA");
        (cert.pem(), key.serialize_pem())
    }

    #[test]
    fn a_leaf_names_its_ca_byte_for_byte_and_carries_its_key_identifier() {
        let (ca_crt, ca_key) = ca();
        let spec = json!({"dnsNames": ["uyuni.example.com"], "secretName": "web"});
        let (leaf, _, _) = sign(
            &spec,
            Some((&ca_crt, &ca_key)),
            1_700_000_000,
            1_800_000_000,
        )
        .expect("a leaf");
        let ca = Certificate::from_pem(ca_crt.as_bytes()).expect("the CA parses");
        let leaf = Certificate::from_pem(leaf.as_bytes()).expect("the leaf parses");
        assert_eq!(
            leaf.tbs_certificate.issuer.to_der().expect("der"),
            ca.tbs_certificate.subject.to_der().expect("der"),
            "the leaf's issuer is the CA's subject, types and order kept"
        );
        let ski = SubjectKeyIdentifier::from_der(
            extension(&ca, SubjectKeyIdentifier::OID).expect("the CA has a subject key id"),
        )
        .expect("ski");
        assert_eq!(ski.0.as_bytes(), [7; 20]);
        let aki = AuthorityKeyIdentifier::from_der(
            extension(&leaf, AuthorityKeyIdentifier::OID)
                .expect("the leaf has an authority key id"),
        )
        .expect("aki");
        assert_eq!(aki.key_identifier.expect("a key id").as_bytes(), [7; 20]);
    }

    #[test]
    fn what_cannot_be_copied_is_refused_with_the_reason() {
        let (ca_crt, ca_key) = ca();
        let key = || KeyPair::from_pem(&ca_key).expect("the key");
        let err = ca_issuer("not a certificate", key()).expect_err("refused");
        assert!(
            err.starts_with("the CA Secret's tls.crt cannot be parsed"),
            "{err}"
        );
        // Two attributes in one name component (openssl's -multivalue-rdn): rcgen has no way
        // to write them, so the stand-in refuses rather than issue under another name.
        let dir = tempfile::tempdir().expect("a temp dir");
        super::openssl(
            dir.path(),
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
                "-days",
                "1",
                "-multivalue-rdn",
                "-subj",
                "/O=SUSE+CN=RHN-ORG-TRUSTED-SSL-CERT",
            ],
        );
        let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).expect("read");
        let key = uyuni_testdata::addons::certmanager::key_pair_from_pem(&read("ca.key"))
            .expect("the key");
        let err = ca_issuer(&read("ca.crt"), key).expect_err("refused");
        assert!(err.contains("name component of 2 attributes"), "{err}");
        assert!(ca_issuer(&ca_crt, KeyPair::from_pem(&ca_key).expect("key")).is_ok());
    }
}
