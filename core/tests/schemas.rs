//! Every object the planner writes passes `kubernetes-validate --strict` (Kubernetes' official
//! schemas, offline): the objects of the pure preview, before and after the data sync, for each
//! flavour, TLS mode and PostgreSQL upgrade of the end-to-end matrix and each option that adds
//! or shapes an object, and of `install`'s preview with a generated CA and with `--ssl-*` files,
//! checked in one run of the tool. The end-to-end tests write these very
//! objects (the same builders, applied as built); they check the cluster's side, this checks
//! the shapes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use k8s_openapi::ByteString;
use uyuni_core::object::CustomKind;
use uyuni_core::observed::IngressClassInfo;
use uyuni_core::params::{FileInput, MigrateArgs};
use uyuni_core::rbac::{self, BindTo};
use uyuni_core::scripts::data_keys;
use uyuni_core::secret::SecretString;
use uyuni_core::{MigrateParams, Object, Observed, preview};

use crate::common;

#[derive(Clone, Copy, Debug)]
enum Flavour {
    K3s,
    Rke2,
    Plain,
}

#[derive(Clone, Copy, Debug)]
enum Tls {
    /// The source's CA, reused through cert-manager.
    ReusedCa,
    /// `--ssl-*` files.
    ThirdParty,
    /// The source's own third-party certificate, no CA key.
    SourceCertificate,
    /// `install`: a new CA, generated through cert-manager.
    GeneratedCa,
}

/// One case: what the cluster offers, the TLS mode, the source's PostgreSQL, and the options
/// that add objects or fields (registry credentials, hub XML-RPC, TFTP on the host network,
/// the ingress controller's configuration, the database's NetworkPolicy).
struct Case {
    flavour: Flavour,
    tls: Tls,
    pg: &'static str,
    extras: bool,
}

const fn case(flavour: Flavour, tls: Tls, pg: &'static str, extras: bool) -> Case {
    Case {
        flavour,
        tls,
        pg,
        extras,
    }
}

/// The pairwise matrix of the end-to-end migrations (e2e_migration.rs), the source's own
/// certificate on every flavour, and every option once per ingress controller.
const CASES: &[Case] = &[
    case(Flavour::K3s, Tls::ReusedCa, "16", false),
    case(Flavour::K3s, Tls::ThirdParty, "18", false),
    case(Flavour::Rke2, Tls::ReusedCa, "18", false),
    case(Flavour::Rke2, Tls::ThirdParty, "14", false),
    case(Flavour::Plain, Tls::ReusedCa, "16", false),
    case(Flavour::Plain, Tls::ThirdParty, "18", false),
    case(Flavour::K3s, Tls::SourceCertificate, "16", false),
    case(Flavour::Rke2, Tls::SourceCertificate, "18", false),
    case(Flavour::Plain, Tls::SourceCertificate, "18", false),
    case(Flavour::K3s, Tls::ReusedCa, "16", true),
    case(Flavour::Rke2, Tls::ThirdParty, "16", true),
];

fn file(path: &str, content: &str) -> Option<FileInput> {
    Some(FileInput {
        path: path.to_owned(),
        content: SecretString::new(content),
    })
}

fn args(case: &Case) -> MigrateArgs {
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    match case.tls {
        Tls::ReusedCa => {}
        Tls::ThirdParty => {
            args.ssl_password = None;
            let tls = common::tls_chain();
            args.spec.ssl_server_cert = file("s.crt", &tls.cert);
            args.spec.ssl_server_key = file("s.key", &tls.key);
            args.spec.ssl_ca_root = file("ca.crt", &tls.root);
        }
        Tls::SourceCertificate => args.ssl_password = None,
        Tls::GeneratedCa => unreachable!("a migration reuses or is given its certificates"),
    }
    if case.extras {
        args.spec.registry_user = Some("mirror-user".into());
        args.spec.registry_password = Some(SecretString::new("mirror pass"));
        args.spec.registry_host = Some("registry.example.com".into());
        args.spec.tftp_host_network = Some(true);
        args.spec.configure_ingress_controller = Some(true);
        args.spec.network_policy = Some(true);
    }
    args
}

/// An empty cluster of the flavour: its IngressClass and custom resources, cert-manager where
/// the TLS mode uses it.
fn cluster(case: &Case) -> Observed {
    let mut o = Observed::default();
    // A run without `--ssl-*` files needs cert-manager before the sync already.
    if !matches!(case.tls, Tls::ThirdParty) {
        o.serve(CustomKind::Issuer);
        o.serve(CustomKind::Certificate);
    }
    let class = |name: &str, controller: &str| IngressClassInfo {
        name: name.into(),
        controller: controller.into(),
        default: true,
    };
    match case.flavour {
        Flavour::K3s => {
            o.ingress_classes = vec![class("traefik", "traefik.io/ingress-controller")];
            for kind in [
                CustomKind::Middleware,
                CustomKind::IngressRouteTcp,
                CustomKind::IngressRouteUdp,
                CustomKind::HelmChartConfig,
            ] {
                o.serve(kind);
            }
        }
        Flavour::Rke2 => {
            o.ingress_classes = vec![class("nginx", "k8s.io/ingress-nginx")];
            o.serve(CustomKind::HelmChartConfig);
        }
        Flavour::Plain => {}
    }
    o
}

/// The cluster after the data sync: [`common::after_sync`] on the flavour's cluster, with what
/// the case's source holds.
fn after_sync(case: &Case, params: &MigrateParams) -> Observed {
    let mut o = common::after_sync(params);
    let flavour = cluster(case);
    o.served = flavour.served;
    o.ingress_classes = flavour.ingress_classes;
    let secret = uyuni_core::catalogue::names::MIGRATION_DATA_SECRET;
    if let Some(Object::Secret(s)) = o.objects.get_mut(&uyuni_core::ObjectRef::new(
        uyuni_core::Kind::Secret,
        secret,
    )) {
        let data = s.data.get_or_insert_with(BTreeMap::new);
        let mut set = |key: &str, value: &str| {
            data.insert(key.to_owned(), ByteString(value.as_bytes().to_vec()));
        };
        set(data_keys::PG_VERSION, case.pg);
        if case.extras {
            set(data_keys::HAS_HUBXMLRPC, "true");
        }
        if matches!(case.tls, Tls::SourceCertificate) {
            let tls = common::tls_chain();
            set(data_keys::SERVER_CERT, &tls.cert);
            set(data_keys::SERVER_KEY, &tls.key);
            set(data_keys::CA_CERT, &tls.root);
        }
        if !matches!(case.tls, Tls::ReusedCa) {
            data.remove(data_keys::CA_KEY);
        }
    }
    o
}

/// `install`'s cases: both TLS modes (a CA generated through cert-manager, `--ssl-*` files)
/// on each flavour, and the options that add objects or fields once per TLS mode.
const INSTALL_CASES: &[Case] = &[
    case(Flavour::K3s, Tls::GeneratedCa, "18", false),
    case(Flavour::Rke2, Tls::ThirdParty, "18", false),
    case(Flavour::Plain, Tls::GeneratedCa, "18", false),
    case(Flavour::Plain, Tls::ThirdParty, "18", false),
    case(Flavour::K3s, Tls::ThirdParty, "18", true),
    case(Flavour::Rke2, Tls::GeneratedCa, "18", true),
];

/// `install`'s parameters of a case: the fixture of `install.rs`, answering to the name the
/// third-party chain was issued for; the extras add SCC credentials, registry credentials,
/// the hub XML-RPC API, the attestation, TFTP on the host network, the ingress
/// controller's configuration and the database's NetworkPolicy.
fn install_params(case: &Case) -> uyuni_core::params::InstallParams {
    let mut args = crate::install::install_args();
    args.fqdn = common::SOURCE.into();
    if matches!(case.tls, Tls::ThirdParty) {
        let tls = common::tls_chain();
        args.spec.ssl_server_cert = file("s.crt", &tls.cert);
        args.spec.ssl_server_key = file("s.key", &tls.key);
        args.spec.ssl_ca_root = file("ca.crt", &tls.root);
    }
    if case.extras {
        args.scc_user = Some("scc-user".into());
        args.scc_password = Some(SecretString::new("scc pass"));
        args.spec.registry_user = Some("mirror-user".into());
        args.spec.registry_password = Some(SecretString::new("mirror pass"));
        args.spec.registry_host = Some("registry.example.com".into());
        args.spec.hubxmlrpc_replicas = Some(1);
        args.spec.coco_replicas = Some(1);
        args.spec.server_requests = Some("cpu=2,memory=8Gi".into());
        args.spec.server_limits = Some("cpu=8,memory=32Gi".into());
        args.spec.db_limits = Some("memory=24Gi".into());
        args.spec.tftp_host_network = Some(true);
        args.spec.configure_ingress_controller = Some(true);
        args.spec.network_policy = Some(true);
    }
    uyuni_core::params::InstallParams::from_args(&args).expect("valid install arguments")
}

/// The objects the steps of a preview write, as JSON documents of one YAML stream.
fn written(steps: &[uyuni_core::Step]) -> Vec<String> {
    steps
        .iter()
        .filter_map(|s| s.action.object())
        .map(|o| serde_json::to_string(&o.to_json()).expect("json"))
        .collect()
}

/// The objects of every case's preview, migrate's and install's, as (case label, the
/// documents no earlier case had): most objects are the same in every case (about 120
/// distinct of 1,100), and the tools' time grows with the documents. The policy scan
/// (`policy_scan.rs`) checks the same objects.
pub(crate) fn case_documents() -> Vec<(String, Vec<String>)> {
    let mut seen = BTreeSet::new();
    let mut cases = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        let params = MigrateParams::from_args(&args(case)).expect("valid");
        let before = preview(&params, &cluster(case)).expect("the preview before the sync");
        let after = preview(&params, &after_sync(case, &params)).expect("the preview after it");
        let new: Vec<String> = written(&before.executed)
            .into_iter()
            .chain(written(&after.executed))
            .filter(|doc| seen.insert(doc.clone()))
            .collect();
        let label = format!(
            "{i:02}-{:?}-{:?}-pg{}{}",
            case.flavour,
            case.tls,
            case.pg,
            if case.extras { "-extras" } else { "" }
        );
        cases.push((label, new));
    }
    // `install`'s cases: every object of its preview from the flavour's empty cluster.
    for (i, case) in INSTALL_CASES.iter().enumerate() {
        let params = install_params(case);
        let run = preview(&params, &cluster(case)).expect("the install's preview");
        let new: Vec<String> = written(&run.executed)
            .into_iter()
            .filter(|doc| seen.insert(doc.clone()))
            .collect();
        let label = format!(
            "{:02}-install-{:?}-{:?}{}",
            CASES.len() + i,
            case.flavour,
            case.tls,
            if case.extras { "-extras" } else { "" }
        );
        cases.push((label, new));
    }
    // `rbac --for COMMAND`'s Roles, ClusterRoles and bindings, with each kind of subject: the
    // real-plane test applies them without client-side validation (its fetch of the OpenAPI
    // document timed out on a loaded machine), so their shapes are checked here.
    let subjects = [
        BindTo::ServiceAccount {
            namespace: "accounts".to_owned(),
            name: "uyuni".to_owned(),
        },
        BindTo::User("alice".to_owned()),
        BindTo::Group("admins".to_owned()),
    ];
    let new: Vec<String> = rbac::Command::ALL
        .iter()
        .flat_map(|&command| rbac::rules(command, "uyuni", &subjects).objects())
        .map(|o| serde_json::to_string(&o).expect("json"))
        .filter(|doc| seen.insert(doc.clone()))
        .collect();
    assert!(!new.is_empty(), "rbac prints objects");
    cases.push((format!("{:02}-rbac", cases.len()), new));
    cases
}

#[test]
fn every_object_of_every_case_passes_the_official_schemas() {
    // One file per case with the documents no earlier case had.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = Vec::new();
    for (label, documents) in case_documents() {
        let path = dir.path().join(format!("{label}.yaml"));
        std::fs::write(&path, documents.join("\n---\n")).expect("write");
        files.push(path);
    }
    let tool = std::env::var("UYUNI_KUBERNETES_VALIDATE").ok();
    let Some(tool) = tool.filter(|t| Path::new(t).exists()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must set UYUNI_KUBERNETES_VALIDATE (scripts/test.sh does)"
        );
        eprintln!("note: kubernetes-validate not available; objects not schema-checked");
        return;
    };
    // Custom resources have no official schema (the tool says so and passes them); the
    // end-to-end tests check them against their CRDs.
    let out = Command::new(tool)
        .args(["--strict", "-k", "1.33", "--quiet"])
        .args(&files)
        .output()
        .expect("kubernetes-validate runs");
    assert!(
        out.status.success(),
        "kubernetes-validate rejected objects (file: the first case that has them):\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
