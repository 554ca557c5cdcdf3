//! `uninstall`'s plan, from what an install leaves (the install's simulated end state) and
//! from arbitrary parts of it, some objects not the tool's.
//!
//! Invariants of the property test, numbered as the failures report them:
//! 1. No plan along the run without `--purge-volumes` deletes a claim or a credential Secret.
//! 2. No plan along the run deletes an object without the tool's labels, or one absent.
//! 3. The preview converges, and re-planning its end state plans nothing.
//! 4. At its end nothing of the tool's is left but, without a purge, the claims and
//!    credential Secrets; every object without the tool's labels is left as it was.
//! 5. The Deployments go before anything else is deleted, `db` last of them.

use std::sync::OnceLock;

use proptest::prelude::*;
use uyuni_core::catalogue::names;
use uyuni_core::object::{Kind, ObjectRef};
use uyuni_core::params::UninstallParams;
use uyuni_core::plan::uninstall;
use uyuni_core::plan::{Planner, holds_data};
use uyuni_core::{Action, Object, Observed, Op, preview, simulate};

use crate::common;

pub fn uninstall_params(purge: bool, delete_namespace: bool) -> UninstallParams {
    UninstallParams::new(
        common::NAMESPACE,
        true,
        &uyuni_core::kubectl::Kubectl::default(),
        common::RUN_ID,
        "0.1.0",
        purge,
        delete_namespace,
    )
    .expect("valid uninstall parameters")
}

/// What a finished install leaves, as the pure simulation has it.
pub fn installed() -> Observed {
    static INSTALLED: OnceLock<Observed> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            preview(&crate::install::install_params(), &common::empty_cluster())
                .expect("install plans")
                .end
        })
        .clone()
}

fn ours(object: &Object) -> bool {
    uninstall::ours(object)
}

/// The object with the tool's labels taken off: someone else's of the same name.
fn foreign(mut object: Object) -> Object {
    let meta = match &mut object {
        Object::Namespace(o) => &mut o.metadata,
        Object::Secret(o) => &mut o.metadata,
        Object::ConfigMap(o) => &mut o.metadata,
        Object::PersistentVolumeClaim(o) => &mut o.metadata,
        Object::ServiceAccount(o) => &mut o.metadata,
        Object::Role(o) => &mut o.metadata,
        Object::RoleBinding(o) => &mut o.metadata,
        Object::Job(o) => &mut o.metadata,
        Object::Deployment(o) => &mut o.metadata,
        Object::Service(o) => &mut o.metadata,
        Object::Ingress(o) => &mut o.metadata,
        Object::NetworkPolicy(o) => &mut o.metadata,
        Object::ResourceQuota(o) => &mut o.metadata,
        Object::LimitRange(o) => &mut o.metadata,
        Object::Custom(o) => &mut o.metadata,
    };
    if let Some(labels) = meta.labels.as_mut() {
        labels.remove(uyuni_core::labels::MANAGED_BY);
    }
    object
}

fn deleted(step: &uyuni_core::Step) -> Option<&ObjectRef> {
    match &step.action {
        Action::Delete { target, .. } => Some(target),
        _ => None,
    }
}

#[test]
fn uninstall_keeps_the_claims_and_credentials_and_replans_nothing() {
    let start = installed();
    let params = uninstall_params(false, true);
    uninstall::check(&params, &start).expect("the install's objects are the tool's");
    let preview = preview(&params, &start).expect("plans");
    assert!(preview.final_plan.is_done());
    assert!(params.plan(&preview.end).expect("plans").is_done());
    let first = preview
        .executed
        .first()
        .and_then(deleted)
        .expect("a delete");
    assert_eq!(
        first,
        &ObjectRef::new(Kind::Deployment, names::SERVER_DEPLOYMENT)
    );
    for (target, _) in preview.end.objects.iter() {
        assert!(
            holds_data(target) || target.kind == Kind::Namespace,
            "{target} left"
        );
    }
    assert!(
        preview
            .end
            .contains(Kind::PersistentVolumeClaim, "var-pgsql18")
    );
    assert!(preview.end.contains(Kind::Secret, names::DB_SECRET));
    assert!(preview.end.contains(Kind::Secret, names::ADMIN_SECRET));
    // The namespace holds what is kept: --delete-namespace leaves it.
    assert!(preview.end.contains(Kind::Namespace, common::NAMESPACE));
    assert_eq!(uninstall::data(&preview.end).len(), {
        preview
            .end
            .objects
            .keys()
            .filter(|t| t.kind != Kind::Namespace)
            .count()
    });
}

#[test]
fn uninstall_with_purge_and_the_namespace_leaves_nothing() {
    let params = uninstall_params(true, true);
    let preview = preview(&params, &installed()).expect("plans");
    assert!(
        preview.end.objects.is_empty(),
        "{:?}",
        preview.end.objects.keys().collect::<Vec<_>>()
    );
    let last = preview.executed.last().and_then(deleted).expect("a delete");
    assert_eq!(last.kind, Kind::Namespace);
    assert!(params.plan(&preview.end).expect("plans").is_done());
}

#[test]
fn uninstall_of_a_namespace_with_nothing_of_ours_is_refused() {
    let params = uninstall_params(true, false);
    let mut observed = Observed::default();
    assert!(matches!(
        uninstall::check(&params, &Observed::default()),
        Err(uyuni_core::PlanError::NothingToUninstall { .. })
    ));
    // A server the tool did not write (the official chart's, say), and the namespace the
    // tool created: still nothing to uninstall.
    let start = installed();
    for (target, object) in start.objects.iter() {
        if target.kind == Kind::Deployment || target.kind == Kind::Namespace {
            observed.insert(if target.kind == Kind::Namespace {
                object.clone()
            } else {
                foreign(object.clone())
            });
        }
    }
    let error = uninstall::check(&params, &observed).expect_err("refused");
    assert!(
        error.to_string().contains("nothing to uninstall"),
        "{error}"
    );
    // What a purge without --delete-namespace leaves: the tool's namespace, which
    // --delete-namespace then deletes, and only it (not when someone else's objects are
    // in it).
    let params = uninstall_params(true, true);
    uninstall::check(&params, &observed).expect("the namespace is the tool's");
    let kept = preview(&params, &observed).expect("plans");
    assert!(kept.executed.is_empty(), "{:?}", kept.executed);
    observed
        .objects
        .retain(|target, _| target.kind == Kind::Namespace);
    let preview = preview(&params, &observed).expect("plans");
    let deleted: Vec<&ObjectRef> = preview.executed.iter().filter_map(deleted).collect();
    assert_eq!(
        deleted,
        [&ObjectRef::new(Kind::Namespace, common::NAMESPACE)]
    );
}

#[test]
fn uninstall_leaves_what_it_did_not_create() {
    let mut start = installed();
    for name in [names::SERVER_DEPLOYMENT, "var-pgsql18"] {
        let kind = if name == names::SERVER_DEPLOYMENT {
            Kind::Deployment
        } else {
            Kind::PersistentVolumeClaim
        };
        let object = start.get(kind, name).cloned().expect("installed");
        start.insert(foreign(object));
    }
    let params = uninstall_params(true, true);
    let plan = params.plan(&start).expect("plans");
    let kept = plan
        .steps
        .iter()
        .find(|s| s.target == ObjectRef::new(Kind::Deployment, names::SERVER_DEPLOYMENT))
        .expect("in the plan");
    assert_eq!(kept.op, Op::Unchanged);
    assert_eq!(kept.reason, uninstall::NOT_OURS);
    assert!(!uninstall::serving(&start), "not ours: not asked about");
    let preview = preview(&params, &start).expect("plans");
    assert!(
        preview
            .end
            .contains(Kind::Deployment, names::SERVER_DEPLOYMENT)
    );
    assert!(
        preview
            .end
            .contains(Kind::PersistentVolumeClaim, "var-pgsql18")
    );
    // The namespace holds what is not ours: not deleted.
    assert!(preview.end.contains(Kind::Namespace, common::NAMESPACE));
}

#[test]
fn a_ready_server_of_ours_is_serving() {
    assert!(uninstall::serving(&installed()));
    let claims = uninstall::claims(&installed());
    let db = claims
        .iter()
        .find(|c| c.name == "var-pgsql18")
        .expect("listed");
    assert!(!db.size.is_empty());
    assert!(db.holds.contains("PostgreSQL"), "{db:?}");
}

#[derive(Debug, Clone)]
struct Case {
    purge: bool,
    delete_namespace: bool,
    /// Per object of the install's end state: kept as is, gone, or someone else's.
    fate: Vec<u8>,
    /// Where the uninstall is cut and re-run.
    cut: proptest::sample::Index,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        any::<bool>(),
        proptest::collection::vec(0u8..10, 128),
        any::<proptest::sample::Index>(),
    )
        .prop_map(|(purge, delete_namespace, fate, cut)| Case {
            purge,
            delete_namespace,
            fate,
            cut,
        })
}

fn start_of(case: &Case) -> Observed {
    let mut observed = installed();
    let targets: Vec<ObjectRef> = observed.objects.keys().cloned().collect();
    for (i, target) in targets.iter().enumerate() {
        match case.fate.get(i % case.fate.len()).copied().unwrap_or(0) {
            // Gone already (an interrupted uninstall, or never written).
            0 | 1 => {
                observed.objects.remove(target);
            }
            // Someone else's.
            2 => {
                let object = observed.objects.get(target).cloned().expect("listed");
                observed.insert(foreign(object));
            }
            _ => {}
        }
    }
    observed
}

fn check_plan(case: &Case, state: &Observed, plan: &uyuni_core::Plan) -> Result<(), TestCaseError> {
    for step in &plan.steps {
        let Some(target) = deleted(step) else {
            continue;
        };
        prop_assert!(
            case.purge || !holds_data(target),
            "1. {target} deleted without a purge"
        );
        let live = state.objects.get(target);
        prop_assert!(
            live.is_some_and(ours),
            "2. {target} deleted: absent or not the tool's"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn uninstall_properties(case in case()) {
        let params = uninstall_params(case.purge, case.delete_namespace);
        let start = start_of(&case);
        let full = preview(&params, &start).expect("plans");
        // Cut after k executed steps, as an interrupted run, and run again.
        let k = case.cut.index(full.executed.len() + 1);
        let mut state = start.clone();
        for step in &full.executed[..k] {
            state = simulate(&state, common::NAMESPACE, step);
        }
        let mut executed = Vec::new();
        loop {
            let plan = params.plan(&state).expect("plans");
            check_plan(&case, &state, &plan)?;
            let Some(step) = plan.next_step().cloned() else { break };
            state = simulate(&state, common::NAMESPACE, &step);
            executed.push(step);
            prop_assert!(executed.len() < 500, "3. does not converge");
        }
        prop_assert!(params.plan(&state).expect("plans").is_done(), "3. re-plan not empty");
        for (target, object) in start.objects.iter() {
            let left = state.objects.get(target);
            if !ours(object) {
                prop_assert_eq!(left, Some(object), "4. {} not ours, changed", target);
            } else if target.kind != Kind::Namespace {
                prop_assert_eq!(
                    left.is_some(),
                    !case.purge && holds_data(target),
                    "4. {} of ours", target
                );
            }
        }
        // 5. The Deployments first, db last of them.
        let all: Vec<&ObjectRef> = full.executed.iter().filter_map(deleted).collect();
        let deployments = all.iter().take_while(|t| t.kind == Kind::Deployment).count();
        prop_assert!(
            all[deployments..].iter().all(|t| t.kind != Kind::Deployment),
            "5. a Deployment after another kind: {:?}", all
        );
        if let Some(db) = all.iter().position(|t| **t == ObjectRef::new(Kind::Deployment, names::DB_DEPLOYMENT)) {
            prop_assert_eq!(db + 1, deployments, "5. db not last");
        }
    }
}

/// The ingress controller's HelmChartConfig in kube-system goes only when the tool wrote it,
/// after the data; deleting it does not hold the namespace back, and the namespace goes last.
#[test]
fn uninstall_deletes_only_our_helm_chart_config() {
    use uyuni_core::builders::ingress::helm_chart_config;
    use uyuni_core::object::CustomKind;
    let mut start = installed();
    start.insert(Object::Custom(helm_chart_config(
        names::TRAEFIK_CONFIG,
        "ports: {}".into(),
        common::NAMESPACE,
    )));
    start.insert(foreign(Object::Custom(helm_chart_config(
        names::NGINX_CONFIG,
        "controller: {}".into(),
        common::NAMESPACE,
    ))));
    let params = uninstall_params(true, true);
    let preview = preview(&params, &start).expect("plans");
    let order: Vec<&ObjectRef> = preview.executed.iter().filter_map(deleted).collect();
    let traefik = ObjectRef::new(
        Kind::Custom(CustomKind::HelmChartConfig),
        names::TRAEFIK_CONFIG,
    );
    let at = order
        .iter()
        .position(|t| **t == traefik)
        .expect("ours deleted");
    assert_eq!(order[at + 1].kind, Kind::Namespace, "{order:?}");
    assert_eq!(at + 2, order.len());
    assert!(order[..at].iter().all(|t| t.kind != Kind::Namespace));
    assert!(preview.end.contains(
        Kind::Custom(CustomKind::HelmChartConfig),
        names::NGINX_CONFIG
    ));
    assert!(!preview.end.contains(Kind::Namespace, common::NAMESPACE));
}

/// A HelmChartConfig the tool wrote for another namespace's server (or before it recorded the
/// namespace) is left: that server may route through it.
#[test]
fn uninstall_leaves_the_helm_chart_config_of_another_namespaces_server() {
    use uyuni_core::builders::ingress::helm_chart_config;
    use uyuni_core::object::CustomKind;
    let mut start = installed();
    start.insert(Object::Custom(helm_chart_config(
        names::TRAEFIK_CONFIG,
        "ports: {}".into(),
        "another-server",
    )));
    let preview = preview(&uninstall_params(true, true), &start).expect("plans");
    assert!(preview.end.contains(
        Kind::Custom(CustomKind::HelmChartConfig),
        names::TRAEFIK_CONFIG
    ));
    let step = preview
        .steps
        .iter()
        .find(|s| s.target.kind == Kind::Custom(CustomKind::HelmChartConfig))
        .expect("a step says why");
    assert!(step.reason.contains("another namespace"), "{}", step.reason);
}

/// The HelmChartConfig another namespace's server uses is no reason to uninstall here: a
/// namespace with nothing else of the tool's is refused, not reported as uninstalled.
#[test]
fn another_namespaces_helm_chart_config_alone_is_nothing_to_uninstall() {
    use uyuni_core::builders::ingress::helm_chart_config;
    let mut observed = Observed::default();
    observed.insert(Object::Custom(helm_chart_config(
        names::TRAEFIK_CONFIG,
        "ports: {}".into(),
        "another-server",
    )));
    for delete_namespace in [false, true] {
        let error = uninstall::check(&uninstall_params(true, delete_namespace), &observed)
            .expect_err("refused");
        assert!(
            matches!(error, uyuni_core::PlanError::NothingToUninstall { .. }),
            "{error}"
        );
    }
    // Written for this namespace's server: it is ours to remove.
    let mut own = Observed::default();
    own.insert(Object::Custom(helm_chart_config(
        names::TRAEFIK_CONFIG,
        "ports: {}".into(),
        common::NAMESPACE,
    )));
    uninstall::check(&uninstall_params(true, false), &own).expect("ours");
}
