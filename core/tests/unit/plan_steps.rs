//! src/plan/steps.rs: an object the plan writes is kept when the live one is as intended and
//! updated when anything the intended one sets differs, whether the live object is the one
//! written (after a simulated write) or one the server filled in.

use k8s_openapi::api::apps::v1::Deployment;
use uyuni_core::object::{Kind, Object, ObjectRef};
use uyuni_core::observed::Observed;
use uyuni_core::plan::{Op, plan};

use crate::common;

fn op_of(params: &uyuni_core::MigrateParams, observed: &Observed, target: &ObjectRef) -> Op {
    plan(params, observed)
        .expect("plans")
        .steps
        .iter()
        .find(|s| &s.target == target)
        .unwrap_or_else(|| panic!("no step writes {target:?}"))
        .op
}

/// The migrated state's Deployments (as `simulate` leaves them: as written, marked ready).
fn deployments(observed: &Observed) -> Vec<(ObjectRef, Deployment)> {
    observed
        .objects
        .iter()
        .filter_map(|(key, object)| match object {
            Object::Deployment(d) => Some((key.clone(), d.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_deployment_as_written_and_ready_is_kept() {
    let params = common::params();
    let done = common::after_migration(&params);
    let found = deployments(&done);
    assert!(found.len() >= 2, "{found:?}");
    for (key, d) in &found {
        assert!(d.status.is_some(), "simulate marks {key:?} ready");
        assert_eq!(op_of(&params, &done, key), Op::Unchanged, "{key:?}");
    }
}

#[test]
fn a_deployment_whose_spec_differs_is_updated() {
    let params = common::params();
    let mut done = common::after_migration(&params);
    for (key, mut d) in deployments(&done) {
        let pod = d
            .spec
            .as_mut()
            .and_then(|s| s.template.spec.as_mut())
            .expect("pod spec");
        // Not the image: another image on a server that runs is an upgrade, refused (see
        // rerun_safety.rs).
        pod.containers[0].image_pull_policy = Some("Never".into());
        done.insert(Object::Deployment(d));
        assert_eq!(op_of(&params, &done, &key), Op::Update, "{key:?}");
    }
}

#[test]
fn what_the_server_adds_is_ignored_and_a_changed_label_is_not() {
    let params = common::params();
    let done = common::after_migration(&params);
    let (key, d) = deployments(&done).into_iter().next().expect("a Deployment");
    let mut served = d.clone();
    served.metadata.uid = Some("0d1f6c1e-5a3b-4c2d-9e8f-123456789abc".into());
    served.metadata.resource_version = Some("4711".into());
    served.metadata.generation = Some(3);
    let spec = served.spec.as_mut().expect("spec");
    spec.revision_history_limit = spec.revision_history_limit.or(Some(10));
    spec.progress_deadline_seconds = spec.progress_deadline_seconds.or(Some(600));
    let mut observed = done.clone();
    observed.insert(Object::Deployment(served.clone()));
    assert_eq!(op_of(&params, &observed, &key), Op::Unchanged);

    served
        .metadata
        .labels
        .get_or_insert_default()
        .insert("app.kubernetes.io/part-of".into(), "something-else".into());
    observed.insert(Object::Deployment(served));
    assert_eq!(op_of(&params, &observed, &key), Op::Update);
    assert_eq!(key.kind, Kind::Deployment);
}
