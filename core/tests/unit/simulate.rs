use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use uyuni_core::catalogue::{names, products};
use uyuni_core::object::{Kind, ObjectRef};
use uyuni_core::observed::Observed;
use uyuni_core::plan::{Action, JobWait, Op, Step};
use uyuni_core::simulate::simulate;

fn run(annotations: &[(&str, &str)]) -> Observed {
    let job = Job {
        metadata: ObjectMeta {
            name: Some("some-job".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ObjectMeta::default()
        },
        ..Job::default()
    };
    let step = Step {
        id: "any".into(),
        description: String::new(),
        op: Op::RunJob,
        target: ObjectRef::new(Kind::Job, "some-job"),
        reason: String::new(),
        action: Action::RunJob {
            job: Box::new(job),
            wait: JobWait {
                timeout_seconds: None,
                log_tail_lines: 0,
            },
        },
    };
    simulate(&Observed::default(), "uyuni", &step)
}

#[test]
fn a_job_produces_what_its_annotation_declares_whatever_its_step() {
    let with_data = run(&[
        (uyuni_core::labels::STEP_ANNOTATION, "renamed-step"),
        (
            uyuni_core::labels::PRODUCES_ANNOTATION,
            products::MIGRATION_DATA,
        ),
    ]);
    assert!(with_data.secret(names::MIGRATION_DATA_SECRET).is_some());
    let without = run(&[(
        uyuni_core::labels::STEP_ANNOTATION,
        uyuni_core::catalogue::steps::DATA_SYNC,
    )]);
    assert!(without.secret(names::MIGRATION_DATA_SECRET).is_none());
    assert!(
        without.contains(Kind::Job, "some-job"),
        "the Job itself is there, complete"
    );
}

#[test]
fn a_delete_removes_the_object_and_leaves_the_rest() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use uyuni_core::object::Object;
    use uyuni_core::plan::delete_step;

    let mut observed = Observed::default();
    observed.insert(Object::Deployment(Deployment {
        metadata: ObjectMeta {
            name: Some("uyuni".into()),
            ..ObjectMeta::default()
        },
        ..Deployment::default()
    }));
    observed.insert(Object::ConfigMap(ConfigMap {
        metadata: ObjectMeta {
            name: Some("uyuni-ca".into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    }));
    let target = ObjectRef::new(Kind::Deployment, "uyuni");
    let step = delete_step(&observed, target.clone(), "goes".into()).expect("allowed");
    let after = simulate(&observed, "uyuni", &step);
    assert!(!after.objects.contains_key(&target));
    assert!(after.contains(Kind::ConfigMap, "uyuni-ca"));
    // Planned again on the simulated state, the deletion has nothing left to do.
    let again = delete_step(&after, target, "goes".into()).expect("allowed");
    assert_eq!(again.op, Op::Unchanged);
}
