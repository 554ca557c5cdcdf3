//! Third-party certificates are checked before they are written (`uyuni_core::certs`): the key
//! belongs to the certificate, the certificate chains to the given CA, and it names the host
//! the server answers to. Certificates are issued in the tests; RSA, EC, and the three key
//! formats users have (PKCS#8, PKCS#1, SEC1).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use uyuni_core::catalogue::names;
use uyuni_core::certs::{self, Mismatch, Unreadable};
use uyuni_core::params::{FileInput, MigrateArgs, ParamsError};
use uyuni_core::scripts::data_keys;
use uyuni_core::secret::SecretString;
use uyuni_core::{Kind, MigrateParams, Object, ObjectRef, Observed, PlanError, plan};
use uyuni_testdata::certs::{Chain, KeyKind, Signer, chain, issue};
use x509_cert::der::{Decode, Encode, pem};

use crate::common::{self, SOURCE};

fn issued(names: &[&str], ca: KeyKind, leaf: KeyKind, intermediate: bool) -> Chain {
    chain(names, ca, leaf, intermediate).expect("certificates")
}

fn pem_of(label: &'static str, der: &[u8]) -> String {
    pem::encode_string(label, pem::LineEnding::LF, der).expect("pem")
}

fn pkcs8_der(key: &str) -> Vec<u8> {
    pem::decode_vec(key.as_bytes()).expect("pem").1
}

/// The PKCS#8 key as OpenSSL's traditional `BEGIN RSA PRIVATE KEY` (PKCS#1).
fn pkcs1(key: &str) -> String {
    let der = pkcs8_der(key);
    let info = pkcs8::PrivateKeyInfo::from_der(&der).expect("pkcs8");
    pem_of("RSA PRIVATE KEY", info.private_key)
}

/// The PKCS#8 key as OpenSSL's `BEGIN EC PRIVATE KEY` (SEC1, with its named curve).
fn sec1(key: &str) -> String {
    let der = pkcs8_der(key);
    let info = pkcs8::PrivateKeyInfo::from_der(&der).expect("pkcs8");
    let curve = info
        .algorithm
        .parameters_oid()
        .expect("the curve of an EC key");
    let inner = sec1::EcPrivateKey::from_der(info.private_key).expect("sec1");
    let with_curve = sec1::EcPrivateKey {
        parameters: Some(sec1::EcParameters::NamedCurve(curve)),
        ..inner
    };
    pem_of("EC PRIVATE KEY", &with_curve.to_der().expect("der"))
}

fn full_chain(c: &Chain) -> String {
    let mut s = c.cert.clone();
    for i in &c.intermediates {
        s.push_str(i);
    }
    s
}

/// Pair, chain and names all pass.
fn assert_good(c: &Chain, key: &str) {
    let chain = full_chain(c);
    assert_eq!(certs::check_pair(&chain, key), Ok(Ok(())));
    assert_eq!(certs::check_chain(&chain, &c.root), Ok(Ok(())));
    let (missing, carried) = certs::missing_names(&chain, &[SOURCE.to_owned()]).expect("names");
    assert!(missing.is_empty(), "{carried:?}");
}

#[test]
fn a_consistent_certificate_passes_with_every_key_type_and_format() {
    for (ca, leaf) in [
        (KeyKind::EcP256, KeyKind::EcP256),
        (KeyKind::EcP384, KeyKind::EcP256),
        (KeyKind::Rsa, KeyKind::Rsa),
        (KeyKind::Rsa, KeyKind::EcP384),
        (KeyKind::EcP256, KeyKind::Rsa),
    ] {
        let c = issued(&[SOURCE], ca, leaf, false);
        assert_good(&c, &c.key);
        let other_format = match leaf {
            KeyKind::Rsa => pkcs1(&c.key),
            KeyKind::EcP256 | KeyKind::EcP384 => sec1(&c.key),
        };
        assert!(
            other_format.contains("BEGIN RSA PRIVATE KEY")
                || other_format.contains("BEGIN EC PRIVATE KEY")
        );
        assert_good(&c, &other_format);
    }
}

#[test]
fn a_key_of_another_certificate_is_a_mismatch_in_every_format() {
    let ec = issued(&[SOURCE], KeyKind::EcP256, KeyKind::EcP256, false);
    let other_ec = issued(&[SOURCE], KeyKind::EcP256, KeyKind::EcP256, false);
    for key in [other_ec.key.clone(), sec1(&other_ec.key)] {
        assert_eq!(
            certs::check_pair(&ec.cert, &key),
            Ok(Err(Mismatch::PublicKey))
        );
    }
    // The RSA test key is one key: an RSA certificate and an EC key differ in type.
    let rsa = issued(&[SOURCE], KeyKind::EcP256, KeyKind::Rsa, false);
    for key in [ec.key.clone(), sec1(&ec.key)] {
        assert!(matches!(
            certs::check_pair(&rsa.cert, &key),
            Ok(Err(Mismatch::KeyType { .. }))
        ));
    }
    for key in [rsa.key.clone(), pkcs1(&rsa.key)] {
        let e = certs::check_pair(&ec.cert, &key);
        assert!(matches!(e, Ok(Err(Mismatch::KeyType { .. }))), "{e:?}");
    }
    let p384 = issued(&[SOURCE], KeyKind::EcP256, KeyKind::EcP384, false);
    assert!(matches!(
        certs::check_pair(&ec.cert, &p384.key),
        Ok(Err(Mismatch::KeyType { .. }))
    ));
    assert_eq!(
        certs::check_pair(
            &ec.cert,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
        ),
        Err(Unreadable::Key)
    );
}

#[test]
fn the_chain_goes_through_the_intermediates_to_the_given_ca() {
    for kind in [KeyKind::EcP256, KeyKind::EcP384, KeyKind::Rsa] {
        let c = issued(&[SOURCE], kind, KeyKind::EcP256, true);
        assert_good(&c, &c.key);
        // Without its intermediate, the server's certificate reaches no given CA.
        let e = certs::check_chain(&c.cert, &c.root).expect("readable");
        let e = e.expect_err("no intermediate");
        assert!(e.leaf, "{e}");
        assert!(e.issuer.contains("Test Intermediate CA"), "{e}");
        // The intermediate as the CA file: a trust anchor need not be self-signed.
        assert_eq!(certs::check_chain(&c.cert, &c.intermediates[0]), Ok(Ok(())));
    }
}

#[test]
fn a_certificate_of_another_ca_is_refused_naming_both() {
    let c = issued(&[SOURCE], KeyKind::Rsa, KeyKind::EcP256, false);
    // Same subject names, another key: only the signature tells them apart.
    let other = issued(&[SOURCE], KeyKind::EcP256, KeyKind::EcP256, true);
    for root in [&other.root, &other.intermediates[0]] {
        let e = certs::check_chain(&c.cert, root)
            .expect("readable")
            .expect_err("another CA");
        assert!(e.leaf);
        let text = e.to_string();
        assert!(
            text.contains("is signed by none of the given CAs") && text.contains("Test"),
            "{text}"
        );
    }
    // An intermediate of another CA in the chain does not help either.
    let mixed = format!("{}{}", c.cert, other.intermediates[0]);
    assert!(matches!(
        certs::check_chain(&mixed, &other.root),
        Ok(Err(_))
    ));
}

#[test]
fn names_follow_subject_alt_names_wildcards_for_one_label_and_the_cn_only_without_them() {
    assert!(certs::name_covers("*.example.com", "uyuni.example.com"));
    assert!(certs::name_covers(
        "UYUNI.example.com.",
        "uyuni.EXAMPLE.com"
    ));
    assert!(!certs::name_covers("*.example.com", "example.com"));
    assert!(!certs::name_covers("*.example.com", "a.uyuni.example.com"));
    assert!(!certs::name_covers("*.com", "example.com"));
    assert!(!certs::name_covers(
        "uyuni.example.com",
        "other.example.com"
    ));

    let c = issued(
        &["*.example.com", "alias.example.org"],
        KeyKind::EcP256,
        KeyKind::EcP256,
        false,
    );
    let required = [SOURCE.to_owned(), "other.example.org".to_owned()];
    let (missing, carried) = certs::missing_names(&c.cert, &required).expect("names");
    assert_eq!(missing, ["other.example.org"]);
    assert_eq!(carried, ["*.example.com", "alias.example.org"]);

    // No subjectAltName at all: the common name is the name, as OpenSSL reads it.
    let cn_only = issue(
        &serde_json::json!({"commonName": SOURCE}),
        Signer::SelfSigned,
    )
    .expect("certificate");
    let (missing, carried) =
        certs::missing_names(&cn_only.tls_crt, &[SOURCE.to_owned()]).expect("names");
    assert!(missing.is_empty(), "{carried:?}");
    // With DNS names, the common name is not looked at.
    let with_san = issue(
        &serde_json::json!({"commonName": SOURCE, "dnsNames": ["other.example.com"]}),
        Signer::SelfSigned,
    )
    .expect("certificate");
    let (missing, _) =
        certs::missing_names(&with_san.tls_crt, &[SOURCE.to_owned()]).expect("names");
    assert_eq!(missing, [SOURCE]);
}

// ---------------------------------------------------------------------------------------------
// The parameters: pair and chain, before anything else

fn file(path: &str, content: &str) -> Option<FileInput> {
    Some(FileInput {
        path: path.into(),
        content: SecretString::new(content),
    })
}

fn args_with(c: &Chain, key: &str) -> MigrateArgs {
    let mut args = common::args_with_ssh(&common::private_key("k"));
    args.ssl_password = None;
    args.spec.ssl_server_cert = file("/certs/server.crt", &c.cert);
    args.spec.ssl_server_key = file("/certs/server.key", key);
    args.spec.ssl_ca_root = file("/certs/ca.crt", &c.root);
    args
}

#[test]
fn a_key_of_another_certificate_is_refused_with_both_files_named_and_no_key_shown() {
    let c = issued(&[SOURCE], KeyKind::EcP256, KeyKind::EcP256, false);
    let other = issued(&[SOURCE], KeyKind::EcP256, KeyKind::EcP256, false);
    let e = MigrateParams::from_args(&args_with(&c, &other.key)).expect_err("mismatch");
    assert!(matches!(e, ParamsError::TlsKeyMismatch { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains(
            "the key in --ssl-server-key /certs/server.key does not belong to the certificate in --ssl-server-cert /certs/server.crt (its public key differs)"
        ) && text.ends_with("Nothing was written"),
        "{text}"
    );
    assert!(!text.contains(common::key_body_line(&other.key)));
    assert!(!format!("{e:?}").contains(common::key_body_line(&other.key)));

    // The database's pair is checked the same way.
    let mut args = args_with(&c, &c.key);
    args.spec.ssl_db_cert = file("/certs/db.crt", &other.cert);
    args.spec.ssl_db_key = file("/certs/db.key", &c.key);
    let e = MigrateParams::from_args(&args).expect_err("db mismatch");
    assert!(
        e.to_string().contains("--ssl-db-key /certs/db.key")
            && e.to_string().contains("--ssl-db-cert /certs/db.crt"),
        "{e}"
    );
}

#[test]
fn a_certificate_not_signed_by_the_given_ca_is_refused_and_intermediates_complete_the_chain() {
    let c = issued(&[SOURCE], KeyKind::Rsa, KeyKind::Rsa, true);
    let e = MigrateParams::from_args(&args_with(&c, &c.key)).expect_err("no intermediate");
    assert!(matches!(e, ParamsError::TlsUnchained { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("--ssl-server-cert /certs/server.crt does not chain to the CA in --ssl-ca-root /certs/ca.crt")
            && text.contains("--ssl-ca-intermediate"),
        "{text}"
    );

    let mut args = args_with(&c, &pkcs1(&c.key));
    args.spec.ssl_ca_intermediate = vec![FileInput {
        path: "/certs/mid.crt".into(),
        content: SecretString::new(&c.intermediates[0]),
    }];
    let p = MigrateParams::from_args(&args).expect("complete chain");
    let tp = p.server.spec.tls.third_party.expect("third party");
    assert_eq!(tp.server.chain, full_chain(&c));

    let other = issued(&[SOURCE], KeyKind::EcP256, KeyKind::EcP256, false);
    let mut args = args_with(&c, &c.key);
    args.spec.ssl_ca_root = file("/certs/ca.crt", &other.root);
    args.spec.ssl_ca_intermediate = args_with(&c, &c.key).spec.ssl_ca_intermediate;
    assert!(matches!(
        MigrateParams::from_args(&args),
        Err(ParamsError::TlsUnchained { .. })
    ));

    let mut args = args_with(&c, &c.key);
    args.spec.ssl_server_cert = file(
        "/certs/server.crt",
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    let e = MigrateParams::from_args(&args).expect_err("unreadable");
    assert!(
        matches!(
            e,
            ParamsError::TlsUnreadable {
                flag: "--ssl-server-cert",
                ..
            }
        ),
        "{e:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The planner: the names, once the server's name is known

#[test]
fn a_certificate_for_another_host_is_refused_before_any_write() {
    let c = issued(
        &["other.example.com"],
        KeyKind::EcP256,
        KeyKind::EcP256,
        false,
    );
    let params = MigrateParams::from_args(&args_with(&c, &c.key)).expect("pair and chain");
    let e = plan(&params, &Observed::default()).expect_err("another host");
    assert!(matches!(e, PlanError::CertificateNames(_)), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains(
            "the certificate in --ssl-server-cert /certs/server.crt names other.example.com, not uyuni.example.com"
        ) && text.contains("--prepare")
            && text.ends_with("Nothing was written"),
        "{text}"
    );

    // A --ssl-cname the certificate lacks is refused too.
    let c = issued(&[SOURCE], KeyKind::EcP256, KeyKind::EcP256, false);
    let mut args = args_with(&c, &c.key);
    args.spec.ssl_cnames = vec!["alias.example.com".into()];
    let params = MigrateParams::from_args(&args).expect("pair and chain");
    let e = plan(&params, &Observed::default()).expect_err("alias missing");
    assert!(e.to_string().contains("not alias.example.com"), "{e}");
}

fn with_data(mut o: Observed, set: &[(&str, &str)], remove: &[&str]) -> Observed {
    if let Some(Object::Secret(s)) = o
        .objects
        .get_mut(&ObjectRef::new(Kind::Secret, names::MIGRATION_DATA_SECRET))
    {
        let data = s.data.get_or_insert_with(BTreeMap::new);
        for (k, v) in set {
            data.insert((*k).to_owned(), ByteString(v.as_bytes().to_vec()));
        }
        for k in remove {
            data.remove(*k);
        }
    }
    o
}

#[test]
fn the_names_are_checked_against_the_java_hostname_the_copy_found() {
    // The certificate names the server's java.hostname, not the name the source was reached by.
    let c = issued(
        &["uyuni.internal.example.com"],
        KeyKind::EcP256,
        KeyKind::EcP256,
        false,
    );
    let params = MigrateParams::from_args(&args_with(&c, &c.key)).expect("pair and chain");
    assert!(plan(&params, &Observed::default()).is_err());
    let synced = common::after_sync(&params);
    let e = plan(&params, &synced).expect_err("the copy found uyuni.example.com");
    assert!(
        e.to_string().contains("(the source's java.hostname)")
            && e.to_string()
                .contains("Nothing was changed after the data sync"),
        "{e}"
    );
    let renamed = with_data(
        synced,
        &[(data_keys::FQDN, "uyuni.internal.example.com")],
        &[],
    );
    assert!(plan(&params, &renamed).is_ok());
}

fn source_certificate_state(params: &MigrateParams, c: &Chain, key: &str) -> Observed {
    with_data(
        common::after_sync(params),
        &[
            (data_keys::SERVER_CERT, &full_chain(c)),
            (data_keys::SERVER_KEY, key),
            (data_keys::CA_CERT, &c.root),
        ],
        &[data_keys::CA_KEY],
    )
}

#[test]
fn the_certificate_found_on_the_source_is_checked_before_it_is_written() {
    let mut args = common::args_with_ssh(&common::private_key("k"));
    args.ssl_password = None;
    let params = MigrateParams::from_args(&args).expect("valid");
    let c = issued(&[SOURCE], KeyKind::Rsa, KeyKind::Rsa, true);
    let written = |o: &Observed| {
        plan(&params, o).map(|p| {
            p.steps
                .iter()
                .any(|s| s.id == "server-cert" && s.action != uyuni_core::plan::Action::None)
        })
    };
    assert_eq!(
        written(&source_certificate_state(&params, &c, &pkcs1(&c.key))),
        Ok(true)
    );

    let other = issued(&[SOURCE], KeyKind::EcP256, KeyKind::EcP256, false);
    let cases: [(Observed, &str); 2] = [
        (
            source_certificate_state(&params, &c, &other.key),
            "and its key (/etc/pki/tls/private/spacewalk.key) do not belong together",
        ),
        (
            with_data(
                source_certificate_state(&params, &c, &c.key),
                &[(data_keys::CA_CERT, &other.root)],
                &[],
            ),
            "does not chain to the source's CA",
        ),
    ];
    for (state, expected) in cases {
        let e = plan(&params, &state).expect_err("refused");
        assert!(matches!(e, PlanError::SourceCertificate { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains(expected)
                && text.contains("/etc/pki/tls/certs/spacewalk.crt")
                && text.contains("--ssl-server-cert"),
            "{text}"
        );
        assert!(!text.contains(common::key_body_line(&other.key)));
    }
    // Another host, with its own key: the names.
    let host = issued(
        &["other.example.com"],
        KeyKind::EcP256,
        KeyKind::EcP256,
        false,
    );
    let e = plan(
        &params,
        &source_certificate_state(&params, &host, &host.key),
    )
    .expect_err("another host");
    assert!(
        e.to_string()
            .contains("names other.example.com, not uyuni.example.com"),
        "{e}"
    );
}
