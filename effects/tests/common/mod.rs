//! Shared helpers of the tests against the simulated cluster.
#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use serde_json::json;
use uyuni_core::{Action, JobWait, Kind, Object, ObjectRef, Op, Step};
use uyuni_effects::{ClientOptions, Connection, Progress, ProgressEvent, connect};
use uyuni_testdata::{Scenario, SimCluster, SimConfig};

pub const NS: &str = "uyuni-test";
pub const STEP: &str = "data-sync";

/// Progress events, owned, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Ev {
    Applied {
        target: String,
        created: bool,
        changed: bool,
    },
    JobCreated {
        job: String,
        created: bool,
    },
    Waiting(String),
    Phase(String, String),
    Log(String),
    Finished(bool),
    Warning(String),
    Retrying(String),
    /// Deployment events, as the plugin prints them.
    Deployment(String),
}

#[derive(Default)]
pub struct Recorder(Mutex<Vec<Ev>>);

impl Recorder {
    pub fn events(&self) -> Vec<Ev> {
        self.0.lock().unwrap().clone()
    }

    pub fn logs(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Ev::Log(l) => Some(l),
                _ => None,
            })
            .collect()
    }

    pub fn retries(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Ev::Retrying(w) => Some(w),
                _ => None,
            })
            .collect()
    }

    pub fn warnings(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Ev::Warning(w) => Some(w),
                _ => None,
            })
            .collect()
    }
}

impl Progress for Recorder {
    fn event(&self, event: ProgressEvent<'_>) {
        let ev = match event {
            ProgressEvent::Applied {
                target,
                created,
                changed,
                ..
            } => Ev::Applied {
                target: target.to_string(),
                created,
                changed,
            },
            ProgressEvent::JobCreated { job, created, .. } => Ev::JobCreated {
                job: job.to_owned(),
                created,
            },
            ProgressEvent::WaitingForJob { job, .. } => Ev::Waiting(job.to_owned()),
            ProgressEvent::PodPhase { pod, phase, .. } => {
                Ev::Phase(pod.to_owned(), phase.to_owned())
            }
            ProgressEvent::JobLog { line, .. } => Ev::Log(line.to_owned()),
            ProgressEvent::JobFinished { succeeded, .. } => Ev::Finished(succeeded),
            ProgressEvent::Warning { message } => Ev::Warning(message.to_owned()),
            e @ ProgressEvent::LogNotFollowed { .. } => Ev::Warning(e.render(&Default::default())),
            ProgressEvent::Retrying {
                what, error, delay, ..
            } => Ev::Retrying(format!("{what} in {delay:?}: {error}")),
            e @ (ProgressEvent::WaitingForDeployment { .. }
            | ProgressEvent::DeploymentPod { .. }
            | ProgressEvent::DeploymentReady { .. }
            | ProgressEvent::WaitingForReady { .. }
            | ProgressEvent::Scaled { .. }) => Ev::Deployment(e.to_string()),
        };
        self.0.lock().unwrap().push(ev);
    }
}

pub async fn sim(scenario: Scenario) -> SimCluster {
    SimCluster::start(SimConfig {
        scenario,
        ..SimConfig::default()
    })
    .await
    .unwrap()
}

pub async fn connect_to(sim: &SimCluster) -> Connection {
    connect(&ClientOptions {
        kubeconfig: Some(sim.kubeconfig_path().to_owned()),
        namespace: Some(NS.to_owned()),
        ..ClientOptions::default()
    })
    .await
    .unwrap()
}

fn step(id: &str, op: Op, target: ObjectRef, action: Action) -> Step {
    Step {
        id: id.to_owned(),
        description: format!("test step {id}"),
        op,
        target,
        reason: "test".to_owned(),
        action,
    }
}

pub fn managed_labels() -> serde_json::Value {
    json!({
        "app.kubernetes.io/part-of": "uyuni",
        "app.kubernetes.io/managed-by": "kubectl-uyuni",
        "app.kubernetes.io/component": "test",
    })
}

pub fn namespace(name: &str) -> Object {
    Object::Namespace(
        serde_json::from_value::<Namespace>(json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": managed_labels()},
        }))
        .unwrap(),
    )
}

pub fn config_map(name: &str, value: &str) -> Object {
    Object::ConfigMap(
        serde_json::from_value::<ConfigMap>(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NS, "labels": managed_labels()},
            "data": {"key": value},
        }))
        .unwrap(),
    )
}

/// Applies [`config_map`] `name` through `execute`, within [`bounded`]'s time; panics on an
/// error.
pub async fn apply_config_map(
    client: &kube::Client,
    name: &str,
    value: &str,
    progress: &dyn Progress,
) {
    bounded(uyuni_effects::execute(
        client,
        NS,
        &apply_step(config_map(name, value)),
        progress,
    ))
    .await
    .unwrap();
}

pub fn secret(name: &str, value: &str) -> Object {
    Object::Secret(
        serde_json::from_value::<Secret>(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": NS, "labels": managed_labels()},
            "stringData": {"password": value},
        }))
        .unwrap(),
    )
}

pub fn apply_step(object: Object) -> Step {
    let target = object.object_ref();
    step("apply", Op::Create, target, Action::Apply(Box::new(object)))
}

pub fn job(name: &str, step_id: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": name, "namespace": NS, "labels": managed_labels(),
            "annotations": {"kubectl-uyuni.io/step": step_id},
        },
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "sync",
                    "image": "registry.example.com/uyuni/server:5.1",
                    "command": ["sh", "-c", "echo hi"],
                }],
            }},
        },
    }))
    .unwrap()
}

pub fn wait(timeout_seconds: Option<u64>) -> JobWait {
    JobWait {
        timeout_seconds,
        log_tail_lines: 3,
    }
}

pub fn run_job_step(name: &str, step_id: &str, wait: JobWait) -> Step {
    step(
        step_id,
        Op::RunJob,
        ObjectRef::new(Kind::Job, name),
        Action::RunJob {
            job: Box::new(job(name, step_id)),
            wait,
        },
    )
}

pub fn await_job_step(name: &str, step_id: &str, wait: JobWait) -> Step {
    step(
        step_id,
        Op::AwaitJob,
        ObjectRef::new(Kind::Job, name),
        Action::AwaitJob {
            name: name.to_owned(),
            wait,
        },
    )
}

/// Creates the test namespace.
pub async fn with_namespace(conn: &Connection) {
    uyuni_effects::execute(
        &conn.client,
        &conn.namespace,
        &apply_step(namespace(NS)),
        &uyuni_effects::NoProgress,
    )
    .await
    .unwrap();
}

/// Guards every test against hanging forever on a bug.
pub async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("the test took longer than 60 s")
}
