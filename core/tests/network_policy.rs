//! `--network-policy`: NetworkPolicy `db` lets the database's consumers, and only them, reach
//! the `db` pods on 5432 (`builders::network_policy`); remembered like every flag of the
//! server's specification, removed by `--network-policy=false`, and its pods' policy-scan skip
//! (CKV2_K8S_6) dropped where it covers them.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use uyuni_core::builders::hardening::SKIP_ANNOTATION_PREFIX;
use uyuni_core::builders::network_policy;
use uyuni_core::catalogue::{names, steps};
use uyuni_core::params::InstallParams;
use uyuni_core::plan::Planner;
use uyuni_core::resolve::Controller;
use uyuni_core::{Kind, Object, ObjectRef, Observed, Op, preview};

use crate::common;

pub(crate) fn install(flag: Option<bool>) -> InstallParams {
    let mut args = crate::install::install_args();
    args.spec.coco_replicas = Some(1);
    args.spec.hubxmlrpc_replicas = Some(1);
    args.spec.network_policy = flag;
    InstallParams::from_args(&args).expect("valid")
}

/// Whether `selector` selects an object labelled `labels` (matchLabels and `In` expressions,
/// the only forms the policy uses; an empty selector selects everything).
fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
        && selector.match_expressions.iter().flatten().all(|e| {
            assert_eq!(e.operator, "In", "{e:?}");
            labels
                .get(&e.key)
                .is_some_and(|v| e.values.iter().flatten().any(|x| x == v))
        })
}

fn policy_of(o: &Observed) -> Option<&NetworkPolicy> {
    match o.get(Kind::NetworkPolicy, names::DB_NETWORK_POLICY) {
        Some(Object::NetworkPolicy(p)) => Some(p),
        _ => None,
    }
}

/// The pod labels of every Deployment and Job in `o`, by the object's name.
fn pod_labels(o: &Observed) -> BTreeMap<String, BTreeMap<String, String>> {
    o.objects
        .values()
        .filter_map(|obj| {
            let labels = match obj {
                Object::Deployment(d) => {
                    d.spec.as_ref()?.template.metadata.as_ref()?.labels.clone()
                }
                Object::Job(j) => j.spec.as_ref()?.template.metadata.as_ref()?.labels.clone(),
                _ => None,
            }?;
            Some((obj.name().to_owned(), labels))
        })
        .collect()
}

/// Whether a pod labelled `labels` in the installation's namespace may connect to `db` on
/// 5432 under `policy` (the ingress controller's rule needs pods of another kind).
fn admitted(policy: &NetworkPolicy, labels: &BTreeMap<String, String>) -> bool {
    let spec = policy.spec.as_ref().expect("spec");
    spec.ingress.iter().flatten().any(|rule| {
        rule.ports.iter().flatten().any(|p| {
            p.port == Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(5432))
        }) && rule.from.iter().flatten().any(|peer| {
            peer.namespace_selector.is_none()
                && peer
                    .pod_selector
                    .as_ref()
                    .is_some_and(|s| selects(s, labels))
        })
    })
}

fn skips(o: &Observed, deployment: &str) -> Vec<String> {
    o.deployment(deployment)
        .and_then(|d| d.metadata.annotations.as_ref())
        .map(|a| {
            a.iter()
                .filter(|(k, _)| k.starts_with(SKIP_ANNOTATION_PREFIX))
                .map(|(_, v)| v.split('=').next().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn network_policy_admits_the_databases_consumers_and_no_other_pod_of_an_install() {
    let end = preview(&install(Some(true)), &common::empty_cluster())
        .expect("plans")
        .end;
    let policy = policy_of(&end).expect("NetworkPolicy db written");
    let spec = policy.spec.as_ref().expect("spec");
    assert_eq!(
        spec.policy_types.as_deref(),
        Some(&["Ingress".to_owned()][..])
    );
    let pods = pod_labels(&end);
    // It selects the database's pods, and nothing else.
    let selector = spec.pod_selector.as_ref().expect("podSelector");
    for (name, labels) in &pods {
        assert_eq!(
            selects(selector, labels),
            name == names::DB_DEPLOYMENT,
            "{name}: {labels:?}"
        );
    }
    // Consumers: the server and the attestation; not the hub XML-RPC API (it calls the
    // server's HTTP API), TFTP, the database itself, or the image-check Jobs.
    for (name, labels) in &pods {
        let consumer = [names::SERVER_DEPLOYMENT, names::COCO_DEPLOYMENT].contains(&name.as_str());
        assert_eq!(admitted(policy, labels), consumer, "{name}: {labels:?}");
    }
    assert!(pods.contains_key(names::HUB_DEPLOYMENT) && pods.contains_key(names::TFTP_DEPLOYMENT));
}

#[test]
fn network_policy_admits_the_migrations_sql_job() {
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    args.spec.network_policy = Some(true);
    let params = uyuni_core::MigrateParams::from_args(&args).expect("valid");
    let run = preview(&params, &common::after_sync(&params)).expect("plans");
    let policy = policy_of(&run.end).expect("NetworkPolicy db written");
    let sql = run
        .executed
        .iter()
        .filter_map(|s| match s.action.object() {
            Some(Object::Job(j)) => Some(j),
            _ => None,
        })
        .find(|j| {
            j.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(uyuni_core::labels::STEP_LABEL))
                == Some(&steps::DB_MIGRATION_SQL.to_owned())
        })
        .expect("the migration's SQL Job");
    let labels = sql
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .expect("pod labels");
    assert!(admitted(policy, &labels), "{labels:?}");
    // The Jobs that work on the files or on their own image do not reach the database.
    for job in run.executed.iter().filter_map(|s| match s.action.object() {
        Some(Object::Job(j)) => Some(j),
        _ => None,
    }) {
        let step = job
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(uyuni_core::labels::STEP_LABEL));
        let labels = job
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.labels.clone())
            .unwrap_or_default();
        assert_eq!(
            admitted(policy, &labels),
            step == Some(&steps::DB_MIGRATION_SQL.to_owned()),
            "{step:?}"
        );
    }
}

#[test]
fn network_policy_lets_the_ingress_controller_reach_the_report_database() {
    for (controller, names) in [
        (Controller::Traefik, vec!["traefik"]),
        (
            Controller::Nginx,
            vec!["rke2-ingress-nginx", "ingress-nginx"],
        ),
    ] {
        let policy = network_policy::db_network_policy("uyuni", Some(controller));
        let rules = policy
            .spec
            .as_ref()
            .and_then(|s| s.ingress.clone())
            .expect("rules");
        assert_eq!(rules.len(), 2, "{rules:?}");
        let peer = &rules[1].from.as_ref().expect("from")[0];
        assert_eq!(
            peer.namespace_selector,
            Some(LabelSelector::default()),
            "any namespace"
        );
        let selector = peer.pod_selector.as_ref().expect("pods");
        for name in &names {
            let labels =
                BTreeMap::from([("app.kubernetes.io/name".to_owned(), (*name).to_owned())]);
            assert!(selects(selector, &labels), "{controller:?} {name}");
        }
        let other = BTreeMap::from([("app.kubernetes.io/name".to_owned(), "grafana".to_owned())]);
        assert!(!selects(selector, &other));
    }
    // No controller: no route to the report database, no rule for one.
    let policy = network_policy::db_network_policy("uyuni", None);
    assert_eq!(
        policy.spec.and_then(|s| s.ingress).map(|r| r.len()),
        Some(1)
    );
}

#[test]
fn network_policy_drops_the_policy_scans_skip_on_the_database_only() {
    let on = preview(&install(Some(true)), &common::empty_cluster())
        .expect("plans")
        .end;
    let off = preview(&install(None), &common::empty_cluster())
        .expect("plans")
        .end;
    assert!(
        policy_of(&off).is_none(),
        "no NetworkPolicy without the flag"
    );
    for name in [
        names::DB_DEPLOYMENT,
        names::SERVER_DEPLOYMENT,
        names::HUB_DEPLOYMENT,
        names::COCO_DEPLOYMENT,
        names::TFTP_DEPLOYMENT,
    ] {
        assert!(
            skips(&off, name).contains(&"CKV2_K8S_6".to_owned()),
            "{name} off"
        );
        assert_eq!(
            skips(&on, name).contains(&"CKV2_K8S_6".to_owned()),
            name != names::DB_DEPLOYMENT,
            "{name} on"
        );
    }
    // The pods are the same: the flag restarts nothing.
    let template = |o: &Observed| {
        o.deployment(names::DB_DEPLOYMENT)
            .and_then(|d| d.spec.clone())
            .map(|s| s.template)
    };
    assert_eq!(template(&on), template(&off));
}

#[test]
fn network_policy_turned_off_is_deleted_and_someone_elses_is_left() {
    let on = preview(&install(Some(true)), &common::empty_cluster())
        .expect("plans")
        .end;
    let off = install(Some(false));
    let plan = off.plan(&on).expect("plans");
    let target = ObjectRef::new(Kind::NetworkPolicy, names::DB_NETWORK_POLICY);
    let step = plan
        .steps
        .iter()
        .find(|s| s.target == target)
        .expect("a step for it");
    assert_eq!(step.op, Op::Delete, "{step:?}");
    let end = preview(&off, &on).expect("plans").end;
    assert!(policy_of(&end).is_none());
    // Converged: nothing more to do, and the database's pods untouched.
    assert!(off.plan(&end).expect("plans").is_done());
    // A NetworkPolicy `db` of the user's (without the tool's labels) is not the tool's to
    // delete.
    let mut theirs = on.clone();
    let mut policy = policy_of(&on).expect("policy").clone();
    policy.metadata.labels = None;
    theirs.insert(Object::NetworkPolicy(policy));
    let plan = off.plan(&theirs).expect("plans");
    assert!(
        !plan.steps.iter().any(|s| s.target == target),
        "{:#?}",
        plan.steps
    );
    // And no step at all where there is none.
    let plan = install(None)
        .plan(
            &preview(&install(None), &common::empty_cluster())
                .expect("plans")
                .end,
        )
        .expect("plans");
    assert!(!plan.steps.iter().any(|s| s.target == target));
}

#[test]
fn network_policy_is_remembered_and_turned_off_explicitly() {
    let recorded = BTreeMap::from([("network-policy".to_owned(), "true".to_owned())]);
    let mut args = crate::install::install_args();
    let (params, _) = uyuni_core::record::params(args.clone(), &recorded).expect("valid");
    assert!(
        params.spec.network_policy,
        "a re-run without the flag keeps it"
    );
    args.spec.network_policy = Some(false);
    let (params, _) = uyuni_core::record::params(args, &recorded).expect("valid");
    assert!(
        !params.spec.network_policy,
        "--network-policy=false turns it off"
    );
}

#[test]
fn network_policy_stays_through_an_upgrade() {
    let tagged = |tag: &str| {
        let mut args = crate::install::install_args();
        args.spec.tag = Some(tag.to_owned());
        args.spec.network_policy = Some(true);
        InstallParams::from_args(&args).expect("valid")
    };
    let start = preview(&tagged(crate::upgrade::FROM), &common::empty_cluster())
        .expect("plans")
        .end;
    assert!(policy_of(&start).is_some());
    let mut target = tagged(crate::upgrade::TO);
    target.run_id = "20261204120000".to_owned();
    let params = uyuni_core::params::UpgradeParams {
        origin: uyuni_core::params::Origin::Installed(Box::new(target)),
        backup: true,
        rollback: false,
    };
    let (_, end) =
        crate::upgrade::run(&params, &start, &crate::upgrade::same_major).expect("upgrades");
    assert_eq!(policy_of(&end), policy_of(&start), "kept as it was");
    assert!(!skips(&end, names::DB_DEPLOYMENT).contains(&"CKV2_K8S_6".to_owned()));
}

/// A server that never used the flag reads no NetworkPolicy, so its user needs no right on
/// them; one that has it, or turns it off, reads it; `uninstall` always does.
#[test]
fn network_policy_is_read_only_where_it_is_or_was_in_use() {
    let target = ObjectRef::new(Kind::NetworkPolicy, names::DB_NETWORK_POLICY);
    let reads = |p: &InstallParams| p.observation().named.contains(&target);
    assert!(!reads(&install(None)));
    assert!(reads(&install(Some(true))));
    let recorded = BTreeMap::from([("network-policy".to_owned(), "true".to_owned())]);
    let mut args = crate::install::install_args();
    args.spec.network_policy = Some(false);
    let (off, _) = uyuni_core::record::params(args, &recorded).expect("valid");
    assert!(!off.spec.network_policy);
    assert!(reads(&off), "turned off: read, to delete it");
    let uninstall = crate::uninstall::uninstall_params(false, false);
    assert!(uninstall.observation().named.contains(&target));
}
