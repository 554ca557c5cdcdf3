//! Property tests of `install`'s planner, over the install parameters (TFTP off, on or on the
//! host network; hub XML-RPC and attestation replicas; third-party certificates or a generated
//! CA; SCC credentials or not; given or generated database passwords; `--reuse-volumes` with
//! foreign claims; the ingress mode) and the cluster's state (empty, or an install's preview
//! cut after its `k`th executed step and re-run with other generated passwords, as a real
//! interrupted run is).
//!
//! Invariants, numbered as the failures report them:
//! 1. The preview converges (its final plan has nothing to do) and re-planning its end state
//!    plans nothing.
//! 2. No password, given or generated (the administrator's, the SCC one, the database
//!    accounts'), nor the third-party server key, nor the base64 of any of them, appears in
//!    the human preview, the `-o yaml` stream without secrets, `-o json`, or the serialized
//!    plan.
//! 3. No step of any plan along the run deletes a PersistentVolumeClaim, and no claim that
//!    existed is written again.
//! 4. `install` and `migrate` of the same server specification end with the same Deployments
//!    and Services: same names, labels, selectors, containers (ports, probes, volume mounts,
//!    security context), volumes and the rest, except what only says where the data came
//!    from: the first start's environment (administrator, organisation, SCC, e-mails, time
//!    zone, database name's value) and the origin annotation. The migration's data is a
//!    PostgreSQL 16 server's, upgraded, so both run on `var-pgsql18`.

use std::collections::BTreeMap;

use base64::Engine as _;
use proptest::prelude::*;
use serde_json::Value;
use uyuni_core::object::{CustomKind, Kind};
use uyuni_core::observed::IngressClassInfo;
use uyuni_core::params::{FileInput, InstallParams, MigrateArgs, ServerSpecArgs};
use uyuni_core::plan::Planner;
use uyuni_core::secret::SecretString;
use uyuni_core::{Action, MigrateParams, Object, Observed, preview, render, simulate};

use crate::common;

/// TFTP: off, on behind its Service, on the host network.
#[derive(Debug, Clone, Copy)]
enum Tftp {
    Off,
    On,
    HostNetwork,
}

/// The shared server specification's parts that add or shape the server's objects.
#[derive(Debug, Clone)]
struct Spec {
    tftp: Tftp,
    hub: Option<u32>,
    coco: u32,
    /// `--ingress`: `None` is auto-detection.
    ingress: Option<&'static str>,
}

#[derive(Debug, Clone)]
struct Case {
    spec: Spec,
    third_party: bool,
    scc: bool,
    given_db_passwords: bool,
    reuse_volumes: bool,
    /// With `reuse_volumes`: claims of the specification exist, not written by an install.
    foreign_claims: bool,
    /// Where the starting state is cut from an install's preview: `None` an empty cluster.
    cut: Option<proptest::sample::Index>,
    /// Random parts of every password, so that each is recognisable in any output.
    marker: String,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        prop_oneof![Just(Tftp::Off), Just(Tftp::On), Just(Tftp::HostNetwork)],
        proptest::option::of(0u32..3),
        0u32..2,
        prop_oneof![
            Just(None),
            Just(Some("none")),
            Just(Some("traefik")),
            Just(Some("nginx"))
        ],
    )
        .prop_map(|(tftp, hub, coco, ingress)| Spec {
            tftp,
            hub,
            coco,
            ingress,
        })
}

fn case() -> impl Strategy<Value = Case> {
    (
        spec(),
        (any::<bool>(), any::<bool>(), any::<bool>()),
        (any::<bool>(), any::<bool>()),
        proptest::option::of(any::<proptest::sample::Index>()),
        "[A-Za-z0-9]{10,16}",
    )
        .prop_map(
            |(
                spec,
                (third_party, scc, given_db_passwords),
                (reuse_volumes, foreign_claims),
                cut,
                marker,
            )| Case {
                spec,
                third_party,
                scc,
                given_db_passwords,
                reuse_volumes,
                foreign_claims: reuse_volumes && foreign_claims,
                cut,
                marker,
            },
        )
}

fn file(path: &str, content: &str) -> Option<FileInput> {
    Some(FileInput {
        path: path.to_owned(),
        content: SecretString::new(content),
    })
}

fn apply_spec(args: &mut ServerSpecArgs, spec: &Spec) {
    args.tftp = Some(!matches!(spec.tftp, Tftp::Off));
    args.tftp_host_network = Some(matches!(spec.tftp, Tftp::HostNetwork));
    args.hubxmlrpc_replicas = spec.hub;
    args.coco_replicas = Some(spec.coco);
    args.ingress = spec.ingress.map(str::to_owned);
}

/// The passwords of a case, each with the case's marker and its role, so that any of them is
/// found in an output whatever was around it. `run` tells a first run's generated passwords
/// from a re-run's.
fn password(case: &Case, what: &str) -> String {
    format!("{what}-{}", case.marker)
}

fn install_params(case: &Case, run: &str) -> InstallParams {
    let mut args = crate::install::install_args();
    // The name the third-party certificates were issued for.
    args.fqdn = common::SOURCE.into();
    apply_spec(&mut args.spec, &case.spec);
    args.admin_password = Some(SecretString::new(password(case, "ADMINPW")));
    args.generated.db = SecretString::new(password(case, &format!("GENDB{run}")));
    args.generated.db_admin = SecretString::new(password(case, &format!("GENDBA{run}")));
    args.generated.report_db = SecretString::new(password(case, &format!("GENREP{run}")));
    if case.given_db_passwords {
        args.db_password = Some(SecretString::new(password(case, "GIVENDB")));
        args.db_admin_password = Some(SecretString::new(password(case, "GIVENDBA")));
        args.reportdb_password = Some(SecretString::new(password(case, "GIVENREP")));
    }
    if case.scc {
        args.scc_user = Some("scc-org-user".into());
        args.scc_password = Some(SecretString::new(password(case, "SCCPW")));
    }
    if case.third_party {
        let tls = common::tls_chain();
        args.spec.ssl_server_cert = file("server.crt", &tls.cert);
        args.spec.ssl_server_key = file("server.key", &tls.key);
        args.spec.ssl_ca_root = file("ca.crt", &tls.root);
    }
    args.reuse_volumes = case.reuse_volumes;
    InstallParams::from_args(&args).expect("valid install arguments")
}

/// Every secret value a case's runs may know.
fn secrets(case: &Case) -> Vec<String> {
    let mut all: Vec<String> = [
        "ADMINPW", "GENDB1", "GENDBA1", "GENREP1", "GENDB2", "GENDBA2", "GENREP2", "GIVENDB",
        "GIVENDBA", "GIVENREP", "SCCPW",
    ]
    .into_iter()
    .map(|what| password(case, what))
    .collect();
    all.push(common::key_body_line(&common::tls_chain().key).to_owned());
    all
}

/// A cluster with cert-manager, Traefik (the default IngressClass, its custom resources
/// served) and ingress-nginx.
fn cluster() -> Observed {
    let mut o = common::empty_cluster();
    let class = |name: &str, controller: &str, default: bool| IngressClassInfo {
        name: name.into(),
        controller: controller.into(),
        default,
    };
    o.ingress_classes = vec![
        class("traefik", "traefik.io/ingress-controller", true),
        class("nginx", "k8s.io/ingress-nginx", false),
    ];
    for kind in [
        CustomKind::Middleware,
        CustomKind::IngressRouteTcp,
        CustomKind::IngressRouteUdp,
        CustomKind::HelmChartConfig,
    ] {
        o.serve(kind);
    }
    o
}

/// The starting state of a case and the parameters of the run from it: a first run from an
/// empty cluster, or a re-run (other generated passwords) of a first run cut short.
fn build(case: &Case) -> (InstallParams, Observed) {
    let first = install_params(case, "1");
    let mut o = cluster();
    if case.foreign_claims {
        // Claims of an earlier server, not an install's (no origin annotation).
        for claim in first.spec.volumes.iter().step_by(3) {
            o.insert(Object::PersistentVolumeClaim(
                uyuni_core::builders::pvc::pvc(common::NAMESPACE, claim),
            ));
        }
    }
    let Some(cut) = &case.cut else {
        return (first, o);
    };
    let run = preview(&first, &o).expect("the first run plans");
    for step in &run.executed[..cut.index(run.executed.len() + 1)] {
        o = simulate(&o, common::NAMESPACE, step);
    }
    (install_params(case, "2"), o)
}

fn base64_of(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn install_invariants_1_to_3(case in case()) {
        let (params, observed) = build(&case);
        let preview = preview(&params, &observed).expect("plannable state");
        // 1
        prop_assert!(
            preview.final_plan.is_done(),
            "did not converge: {:?}",
            preview.final_plan.next_step()
        );
        let again = params.plan(&preview.end).expect("the end state plans");
        prop_assert!(again.is_done(), "re-plans {:?}", again.next_step());
        // 2
        let first = params.plan(&observed).expect("plans");
        let outputs = [
            ("the human preview", render::human_preview(&preview.steps, &observed, render::RenderOptions::default())),
            ("-o yaml", render::manifests_yaml(&preview.steps, false)),
            ("-o json", render::plan_json(&params.namespace, &preview.steps, &observed).to_string()),
            ("the plan", serde_json::to_string(&first).expect("json")),
            ("the preview's steps", serde_json::to_string(&preview.steps).expect("json")),
        ];
        for secret in secrets(&case) {
            let encoded = base64_of(&secret);
            for (name, out) in &outputs {
                prop_assert!(!out.contains(&secret), "{secret} in {name}");
                prop_assert!(!out.contains(&encoded), "{secret} in base64 in {name}");
            }
        }
        // 3: every plan along the run, not only the steps carried out.
        let mut state = observed.clone();
        for step in preview.executed.iter() {
            let plan = params.plan(&state).expect("plans along the run");
            for s in &plan.steps {
                if let Action::Delete { target, .. } = &s.action {
                    prop_assert!(
                        target.kind != Kind::PersistentVolumeClaim,
                        "step {} deletes claim {}",
                        s.id,
                        target.name
                    );
                }
            }
            if let Action::Apply(object) = &step.action
                && object.kind() == Kind::PersistentVolumeClaim
            {
                prop_assert!(
                    !state.contains(Kind::PersistentVolumeClaim, object.name()),
                    "step {} rewrites claim {}",
                    step.id,
                    object.name()
                );
            }
            state = simulate(&state, &params.namespace, step);
        }
    }
}

/// Environment variables only a first start reads (`00-mgrSetup.sh`), or whose value depends on
/// where the data came from.
const FIRST_START_ENV: &[&str] = &[
    "ADMIN_USER",
    "ADMIN_PASS",
    "ADMIN_FIRST_NAME",
    "ADMIN_LAST_NAME",
    "ORG_NAME",
    "SCC_USER",
    "SCC_PASS",
    "MANAGER_ADMIN_EMAIL",
    "MANAGER_MAIL_FROM",
    "TZ",
];

/// A Deployment or Service as JSON, without what is allowed to differ between an installed and
/// a migrated server.
fn comparable(object: &Object) -> Value {
    let mut json = object.to_json();
    let strip_origin = |meta: &mut Value| {
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.remove(uyuni_core::labels::ORIGIN_ANNOTATION);
            a.remove(uyuni_core::labels::DATA_SYNC_ANNOTATION);
            if a.is_empty() {
                meta.as_object_mut()
                    .expect("metadata is an object")
                    .remove("annotations");
            }
        }
    };
    strip_origin(&mut json["metadata"]);
    if let Some(template) = json.pointer_mut("/spec/template/metadata") {
        strip_origin(template);
    }
    for list in ["containers", "initContainers"] {
        let Some(containers) = json
            .pointer_mut(&format!("/spec/template/spec/{list}"))
            .and_then(Value::as_array_mut)
        else {
            continue;
        };
        for container in containers {
            let Some(env) = container.get_mut("env").and_then(Value::as_array_mut) else {
                continue;
            };
            env.retain(|e| !FIRST_START_ENV.contains(&e["name"].as_str().unwrap_or_default()));
            for e in env.iter_mut() {
                if e["name"] == "MANAGER_DB_NAME" {
                    e["value"] = Value::from("(the database name)");
                }
            }
        }
    }
    json
}

fn server_objects(end: &Observed) -> BTreeMap<String, Value> {
    end.objects
        .values()
        .filter(|o| matches!(o.kind(), Kind::Deployment | Kind::Service))
        .map(|o| (format!("{:?}/{}", o.kind(), o.name()), comparable(o)))
        .collect()
}

/// Where two JSON values differ, one line per JSON pointer.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (x.get(k), y.get(k));
                let p = format!("{path}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (va, vb) {
                    (Some(va), Some(vb)) => differences(&p, va, vb, out),
                    _ => out.push(format!("{p}: install {va:?}, migrate {vb:?}")),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}/{i}"), va, vb, out);
            }
        }
        _ if a != b => out.push(format!("{path}: install {a}, migrate {b}")),
        _ => {}
    }
}

fn migrate_end(spec: &Spec) -> Observed {
    let mut args: MigrateArgs = common::args_with_ssh(&common::private_key("fixture-private-key"));
    apply_spec(&mut args.spec, spec);
    let params = MigrateParams::from_args(&args).expect("valid migrate arguments");
    // The sync's data: a PostgreSQL 16 server (upgraded to 18, onto var-pgsql18).
    let mut o = common::after_sync(&params);
    let flavour = cluster();
    o.served = flavour.served;
    o.ingress_classes = flavour.ingress_classes;
    let data = o.extracted().expect("readable").expect("synced");
    assert_eq!(
        data.pg_version, "16",
        "the fixture's data is PostgreSQL 16's"
    );
    preview(&params, &o).expect("the migration plans").end
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn install_invariant_4_same_server_objects_as_migrate(spec in spec()) {
        let case = Case {
            spec: spec.clone(),
            third_party: false,
            scc: false,
            given_db_passwords: false,
            reuse_volumes: false,
            foreign_claims: false,
            cut: None,
            marker: "m".into(),
        };
        let install = preview(&install_params(&case, "1"), &cluster())
            .expect("the install plans")
            .end;
        let installed = server_objects(&install);
        let migrated = server_objects(&migrate_end(&spec));
        for server in ["Deployment/db", "Deployment/uyuni", "Service/db", "Service/web"] {
            prop_assert!(installed.contains_key(server), "no {server}: {:?}", installed.keys());
        }
        prop_assert_eq!(
            installed.keys().collect::<Vec<_>>(),
            migrated.keys().collect::<Vec<_>>(),
            "Deployments and Services"
        );
        let mut diffs = Vec::new();
        for (name, object) in &installed {
            differences(name, object, &migrated[name], &mut diffs);
        }
        prop_assert!(diffs.is_empty(), "install and migrate differ:\n{}", diffs.join("\n"));
    }
}
