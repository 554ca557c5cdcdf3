use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use uyuni_core::builders::{data_sync, server};
use uyuni_core::labels;
use uyuni_core::object::Object;
use uyuni_core::observed::Observed;
use uyuni_core::plan::phase::{Phase, phase};

fn sync(name: &str, mode: &str, state: Option<&str>) -> Object {
    Object::Job(Job {
        metadata: ObjectMeta {
            name: Some(name.into()),
            annotations: Some(BTreeMap::from([
                (labels::STEP_ANNOTATION.into(), data_sync::STEP_ID.into()),
                (labels::SYNC_MODE_ANNOTATION.into(), mode.into()),
            ])),
            ..ObjectMeta::default()
        },
        status: state.map(|kind| JobStatus {
            conditions: Some(vec![JobCondition {
                type_: kind.into(),
                status: "True".into(),
                ..JobCondition::default()
            }]),
            ..JobStatus::default()
        }),
        ..Job::default()
    })
}

fn server(replicas: i32) -> Object {
    Object::Deployment(Deployment {
        metadata: ObjectMeta {
            name: Some(server::SERVER_DEPLOYMENT.into()),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    })
}

fn observed(objects: Vec<Object>) -> Observed {
    let mut o = Observed::default();
    for object in objects {
        o.insert(object);
    }
    o
}

#[test]
fn phases_follow_the_jobs_and_the_server() {
    assert_eq!(phase(&observed(vec![])), Phase::NotStarted);
    assert_eq!(
        phase(&observed(vec![sync("p1", "prepare", Some("Failed"))])),
        Phase::NotStarted,
        "a failed copy prepares nothing"
    );
    assert_eq!(
        phase(&observed(vec![sync("p1", "prepare", Some("Complete"))])),
        Phase::Prepared { job: "p1".into() }
    );
    assert_eq!(
        phase(&observed(vec![
            sync("p1", "prepare", Some("Complete")),
            sync("f1", "final", None)
        ])),
        Phase::FinalSyncRunning { job: "f1".into() }
    );
    assert_eq!(
        phase(&observed(vec![
            sync("p1", "prepare", Some("Complete")),
            sync("f1", "final", Some("Failed")),
        ])),
        Phase::Prepared { job: "p1".into() },
        "a failed final sync leaves the prepared state"
    );
    assert_eq!(
        phase(&observed(vec![sync("f1", "final", Some("Complete"))])),
        Phase::FinalSyncDone { job: "f1".into() }
    );
    assert_eq!(
        phase(&observed(vec![
            sync("f1", "final", Some("Complete")),
            server(1)
        ])),
        Phase::ServerRunning {
            replicas: 1,
            final_job: Some("f1".into())
        }
    );
    assert_eq!(
        phase(&observed(vec![
            sync("f1", "final", Some("Complete")),
            server(0)
        ])),
        Phase::FinalSyncDone { job: "f1".into() },
        "a server scaled to 0 owns nothing"
    );
    assert_eq!(
        phase(&observed(vec![server(2)])),
        Phase::ServerRunning {
            replicas: 2,
            final_job: None
        },
        "a server of another origin counts too"
    );
}
