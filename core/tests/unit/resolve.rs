use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::unit::params::args;
use uyuni_core::catalogue::names;
use uyuni_core::object::{Kind, Object, ObjectRef};
use uyuni_core::observed::{ExtractedData, IngressClassInfo, Observed};
use uyuni_core::params::MigrateParams;
use uyuni_core::resolve::{
    CertManagerMissing, Controller, NotRecorded, TftpDecision, TlsError, TlsMode, cert_manager,
    ingress, preflight, resolve, tftp, tftp_origin, tls_mode,
};
use uyuni_core::secret::SecretString;
use uyuni_core::storage::StorageError;

fn data(tftp: Option<bool>, placeholder: bool) -> ExtractedData {
    ExtractedData {
        job: "uyuni-data-sync-20261129180000".into(),
        timezone: "Etc/UTC".into(),
        pg_version: "16".into(),
        db_user: "spacewalk".into(),
        db_password: SecretString::new("pw"),
        db_name: "susemanager".into(),
        db_port: "5432".into(),
        report_db_user: "pythia".into(),
        report_db_password: SecretString::new("pw"),
        has_hubxmlrpc: false,
        debug: false,
        tftp,
        mirror: None,
        fqdn: None,
        ca_cert: None,
        ca_key: None,
        server_cert: None,
        server_key: None,
        placeholder,
    }
}

fn tftp_params(tftp: Option<bool>, host_network: bool) -> MigrateParams {
    let mut a = args();
    a.spec.tftp = tftp;
    a.spec.tftp_host_network = Some(host_network);
    MigrateParams::from_args(&a).expect("valid")
}

#[test]
fn the_flag_wins_over_the_source_and_the_source_decides_otherwise() {
    for source in [Some(true), Some(false), None] {
        assert_eq!(
            tftp(&tftp_params(Some(true), false), &data(source, false)),
            Ok(TftpDecision::On)
        );
        assert_eq!(
            tftp(&tftp_params(Some(false), false), &data(source, false)),
            Ok(TftpDecision::Off)
        );
    }
    let auto = tftp_params(None, false);
    assert_eq!(tftp(&auto, &data(Some(true), false)), Ok(TftpDecision::On));
    assert_eq!(
        tftp(&auto, &data(Some(false), false)),
        Ok(TftpDecision::Off)
    );
    assert_eq!(tftp(&auto, &data(None, false)), Err(NotRecorded));
    assert_eq!(tftp(&auto, &data(None, true)), Ok(TftpDecision::Unknown));
    assert!(tftp_origin(&auto, TftpDecision::Unknown).contains("known after data-sync"));
}

fn ingress_params(mode: Option<&str>) -> MigrateParams {
    let mut args = args();
    args.spec.ingress = mode.map(str::to_owned);
    MigrateParams::from_args(&args).expect("valid")
}

fn cluster(classes: &[(&str, &str, bool)]) -> Observed {
    Observed {
        ingress_classes: classes
            .iter()
            .map(|(n, c, d)| IngressClassInfo {
                name: (*n).into(),
                controller: (*c).into(),
                default: *d,
            })
            .collect(),
        ..Observed::default()
    }
}

#[test]
fn the_default_class_decides_and_the_flag_wins() {
    let k3s = cluster(&[("traefik", "traefik.io/ingress-controller", true)]);
    assert_eq!(
        ingress(&ingress_params(None), &k3s),
        Some((Controller::Traefik, Some("traefik".into())))
    );
    assert_eq!(ingress(&ingress_params(Some("none")), &k3s), None);
    assert_eq!(ingress(&ingress_params(None), &cluster(&[])), None);
    let two = cluster(&[
        ("a", "k8s.io/ingress-nginx", false),
        ("b", "traefik.io/ingress-controller", false),
    ]);
    assert_eq!(
        ingress(&ingress_params(None), &two),
        None,
        "no default: no guess"
    );
    assert_eq!(
        ingress(&ingress_params(Some("nginx")), &two),
        Some((Controller::Nginx, Some("a".into())))
    );
}

fn with_earlier_files() -> Observed {
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(names::SERVER_CERT_SECRET.into()),
            annotations: Some(BTreeMap::from([(
                uyuni_core::labels::THIRD_PARTY_ANNOTATION.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        ..Secret::default()
    };
    let mut observed = Observed::default();
    observed.objects.insert(
        ObjectRef::new(Kind::Secret, names::SERVER_CERT_SECRET),
        Object::Secret(secret),
    );
    observed
}

fn tls_data(ca_key: bool, server_cert: bool) -> ExtractedData {
    let mut d = data(None, false);
    d.ca_key = ca_key.then(|| uyuni_core::secret::SecretString::new("k"));
    d.server_cert = server_cert.then(|| "c".to_owned());
    d.server_key = server_cert.then(|| uyuni_core::secret::SecretString::new("k"));
    d
}

#[test]
fn the_preflight_results_are_the_checks_own() {
    let params = MigrateParams::from_args(&args()).expect("valid");
    // No cert-manager, and StorageClasses listed but none of them the default.
    let observed = Observed {
        storage_classes: Some(vec![uyuni_core::storage::StorageClassInfo {
            name: "slow".into(),
            default: false,
        }]),
        ..Observed::default()
    };
    let facts = resolve(&params, &observed, &data(Some(false), true));
    assert_eq!(facts.preflight, preflight(&params, &observed));
    assert_eq!(
        facts.preflight.cert_manager,
        cert_manager(&params, &observed)
    );
    assert_eq!(facts.preflight.cert_manager, Err(CertManagerMissing));
    assert_eq!(
        facts.preflight.storage,
        uyuni_core::storage::check(&params, &observed)
    );
    assert!(
        matches!(facts.preflight.storage, Err(StorageError::NoDefault { .. })),
        "{:?}",
        facts.preflight.storage
    );
}

#[test]
fn files_win_then_an_earlier_runs_certificates_then_the_source() {
    let params = MigrateParams::from_args(&args()).expect("valid");
    let empty = Observed::default();
    let earlier = with_earlier_files();
    assert_eq!(tls_mode(&params, &empty, None), Ok(TlsMode::ReusedCa));
    assert_eq!(
        tls_mode(&params, &earlier, None),
        Ok(TlsMode::KeptFromEarlierRun)
    );
    let ca = tls_data(true, false);
    let third_party = tls_data(false, true);
    let nothing = tls_data(false, false);
    assert_eq!(tls_mode(&params, &empty, Some(&ca)), Ok(TlsMode::ReusedCa));
    assert_eq!(
        tls_mode(&params, &empty, Some(&third_party)),
        Ok(TlsMode::ThirdPartyMigrated)
    );
    assert_eq!(
        tls_mode(&params, &empty, Some(&nothing)),
        Err(TlsError::NoMaterial)
    );
    assert_eq!(
        tls_mode(&params, &earlier, Some(&ca)),
        Ok(TlsMode::KeptFromEarlierRun)
    );
    assert_eq!(
        tls_mode(&params, &earlier, Some(&nothing)),
        Ok(TlsMode::KeptFromEarlierRun),
        "the certificates the server has are kept"
    );
    assert_eq!(
        tls_mode(&params, &earlier, Some(&third_party)),
        Ok(TlsMode::ThirdPartyMigrated)
    );
}
