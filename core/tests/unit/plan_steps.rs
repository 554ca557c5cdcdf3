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

// Deletion: the step a later `uninstall` plans, and the refusal that keeps data out of it.

mod deletion {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use uyuni_core::catalogue::names;
    use uyuni_core::object::{Kind, Object, ObjectRef};
    use uyuni_core::observed::Observed;
    use uyuni_core::plan::{Action, DeleteWait, Op, Propagation, Purge, delete_step, purge_step};

    fn meta(name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some("uyuni".to_owned()),
            ..ObjectMeta::default()
        }
    }

    fn holding(objects: Vec<Object>) -> Observed {
        let mut observed = Observed::default();
        for object in objects {
            observed.insert(object);
        }
        observed
    }

    #[test]
    fn a_present_object_is_deleted_with_its_kinds_propagation() {
        let observed = holding(vec![
            Object::ConfigMap(ConfigMap {
                metadata: meta("uyuni-ca"),
                ..ConfigMap::default()
            }),
            Object::Deployment(Deployment {
                metadata: meta("uyuni"),
                ..Deployment::default()
            }),
        ]);
        for (kind, name, propagation) in [
            (Kind::ConfigMap, "uyuni-ca", Propagation::Background),
            (Kind::Deployment, "uyuni", Propagation::Foreground),
        ] {
            let target = ObjectRef::new(kind, name);
            let step = delete_step(&observed, target.clone(), "goes".into()).expect("allowed");
            assert_eq!(step.op, Op::Delete);
            assert_eq!(step.target, target);
            assert_eq!(
                step.action,
                Action::Delete {
                    target: target.clone(),
                    propagation,
                    wait: DeleteWait::for_kind(kind),
                }
            );
            assert!(
                !step.action.predictable(),
                "the loop observes after a delete"
            );
            assert!(step.action.object().is_none(), "a delete sends no object");
        }
    }

    #[test]
    fn an_absent_object_has_nothing_to_delete() {
        let target = ObjectRef::new(Kind::ConfigMap, "uyuni-ca");
        let step =
            delete_step(&Observed::default(), target.clone(), "goes".into()).expect("allowed");
        assert_eq!(step.op, Op::Unchanged);
        assert_eq!(step.action, Action::None);
        assert_eq!(step.reason, "absent; nothing to delete");
        assert_eq!(step.target, target);
    }

    #[test]
    fn a_claim_or_credential_secret_is_refused_without_a_purge() {
        let claim = ObjectRef::new(Kind::PersistentVolumeClaim, "var-pgsql");
        let observed = holding(vec![
            Object::PersistentVolumeClaim(PersistentVolumeClaim {
                metadata: meta("var-pgsql"),
                ..PersistentVolumeClaim::default()
            }),
            Object::Secret(Secret {
                metadata: meta(names::DB_SECRET),
                ..Secret::default()
            }),
        ]);
        let refused = delete_step(&observed, claim.clone(), "data".into()).expect_err("refused");
        assert_eq!(refused.target, claim);
        assert!(
            refused
                .to_string()
                .contains("persistentvolumeclaim/var-pgsql")
        );
        assert!(refused.to_string().contains("--purge-volumes"));
        // Refused whether it exists or not: the decision is the target's, not the state's.
        assert!(delete_step(&Observed::default(), claim.clone(), "data".into()).is_err());
        for secret in [
            names::DB_SECRET,
            names::DB_ADMIN_SECRET,
            names::REPORTDB_SECRET,
            "admin-credentials",
            names::SSH_KEY_SECRET,
            names::REGISTRY_SECRET,
            names::CA_SECRET,
        ] {
            let target = ObjectRef::new(Kind::Secret, secret);
            assert!(
                delete_step(&observed, target, "credentials".into()).is_err(),
                "{secret}"
            );
        }
        // A Secret the tool derives again (a certificate cert-manager reissues) is no data.
        assert!(
            delete_step(
                &observed,
                ObjectRef::new(Kind::Secret, names::SERVER_CERT_SECRET),
                "derived".into()
            )
            .is_ok()
        );
    }

    #[test]
    fn a_purge_deletes_a_claim() {
        let claim = ObjectRef::new(Kind::PersistentVolumeClaim, "var-pgsql");
        let observed = holding(vec![Object::PersistentVolumeClaim(PersistentVolumeClaim {
            metadata: meta("var-pgsql"),
            ..PersistentVolumeClaim::default()
        })]);
        let purge = Purge::chosen_by_user();
        let step = purge_step(&observed, claim.clone(), "purged".into(), &purge);
        assert_eq!(step.op, Op::Delete);
        assert!(matches!(
            step.action,
            Action::Delete { ref target, propagation: Propagation::Background, .. } if *target == claim
        ));
    }

    #[test]
    fn a_deletion_serializes_its_target_propagation_and_wait() {
        let observed = holding(vec![Object::Secret(Secret {
            metadata: meta("uyuni-cert"),
            data: Some(BTreeMap::from([(
                "tls.key".to_owned(),
                ByteString(b"private".to_vec()),
            )])),
            ..Secret::default()
        })]);
        let step = delete_step(
            &observed,
            ObjectRef::new(Kind::Secret, "uyuni-cert"),
            "goes".into(),
        )
        .expect("allowed");
        let json = serde_json::to_value(&step).expect("serializes");
        assert_eq!(json["op"], "delete");
        assert_eq!(json["action"]["delete"]["propagation"], "Background");
        assert_eq!(json["action"]["delete"]["wait"]["timeout_seconds"], 60);
        assert!(!json.to_string().contains("cHJpdmF0ZQ"));
    }
}

#[test]
fn what_owns_pods_gets_minutes_to_go_the_rest_one() {
    use uyuni_core::plan::DeleteWait;
    for kind in [Kind::Deployment, Kind::Job, Kind::Namespace] {
        assert_eq!(
            DeleteWait::for_kind(kind).timeout_seconds,
            Some(300),
            "{kind:?}"
        );
    }
    for kind in [Kind::ConfigMap, Kind::Service, Kind::Secret] {
        assert_eq!(
            DeleteWait::for_kind(kind).timeout_seconds,
            Some(60),
            "{kind:?}"
        );
    }
}
