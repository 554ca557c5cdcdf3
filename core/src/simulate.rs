//! The pure model of each step's effect on the observed state. The dry-run preview iterates it
//! (see [`crate::preview()`]).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::Secret;

use crate::builders::migration;
use crate::catalogue::{names, products};
use crate::object::{Kind, Object};
use crate::observed::{Observed, PLACEHOLDER, PLACEHOLDER_KEY};
use crate::plan::{Action, Step};
use crate::scripts::data_keys;

fn completed(mut job: Job) -> Job {
    job.status = Some(JobStatus {
        succeeded: Some(1),
        conditions: Some(vec![
            JobCondition {
                type_: "SuccessCriteriaMet".to_owned(),
                status: "True".to_owned(),
                ..JobCondition::default()
            },
            JobCondition {
                type_: "Complete".to_owned(),
                status: "True".to_owned(),
                ..JobCondition::default()
            },
        ]),
        ..JobStatus::default()
    });
    job
}

/// What the data-sync Job reports, before it ran: placeholders that say which step fills them.
fn placeholder_data(namespace: &str, job: &str) -> Secret {
    let mut secret = migration::migration_data_secret(namespace);
    let mut data: BTreeMap<String, ByteString> = [
        data_keys::TIMEZONE,
        data_keys::PG_VERSION,
        data_keys::DB_USER,
        data_keys::DB_PASSWORD,
        data_keys::DB_NAME,
        data_keys::DB_PORT,
        data_keys::REPORT_DB_USER,
        data_keys::REPORT_DB_PASSWORD,
        data_keys::HAS_HUBXMLRPC,
        data_keys::DEBUG,
        data_keys::TFTP,
        PLACEHOLDER_KEY,
    ]
    .into_iter()
    .map(|k| (k.to_owned(), ByteString(PLACEHOLDER.as_bytes().to_vec())))
    .collect();
    data.insert(
        data_keys::JOB.to_owned(),
        ByteString(job.as_bytes().to_vec()),
    );
    secret.data = Some(data);
    secret
}

fn job_effect(observed: &mut Observed, namespace: &str, job: Job) {
    let name = job.metadata.name.clone().unwrap_or_default();
    let produces = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::labels::PRODUCES_ANNOTATION))
        .cloned();
    observed.insert(Object::Job(completed(job)));
    match produces.as_deref() {
        Some(products::CA_KEY) => {
            if let Some(mut secret) = observed.secret(names::CA_SECRET).cloned() {
                // The Job writes the decrypted key; its value is never known to the tool.
                secret.data.get_or_insert_default().insert(
                    "tls.key".to_owned(),
                    ByteString(b"<decrypted in the cluster>".to_vec()),
                );
                observed.insert(Object::Secret(secret));
            }
        }
        Some(products::MIGRATION_DATA) => {
            observed.insert(Object::Secret(placeholder_data(namespace, &name)));
        }
        Some(products::INSPECTION) => {
            if let Some(Object::Job(mut job)) = observed.get(Kind::Job, &name).cloned() {
                // What the image is, known once the Job ran in the cluster.
                job.metadata.annotations.get_or_insert_default().insert(
                    crate::labels::INSPECTION_ANNOTATION.to_owned(),
                    crate::inspect::PLACEHOLDER.to_owned(),
                );
                observed.insert(Object::Job(job));
            }
        }
        _ => {}
    }
}

/// The state after `step` was carried out successfully.
pub fn simulate(observed: &Observed, namespace: &str, step: &Step) -> Observed {
    let mut next = observed.clone();
    simulate_in_place(&mut next, namespace, step);
    next
}

/// [`simulate`] on the state itself: the preview's way, which would otherwise copy the whole
/// snapshot (every old Job attempt included) once per step.
pub fn simulate_in_place(observed: &mut Observed, namespace: &str, step: &Step) {
    match &step.action {
        Action::Apply(object) => observed.insert((**object).clone()),
        Action::RunJob { job, .. } => job_effect(observed, namespace, (**job).clone()),
        Action::AwaitJob { name, .. } => {
            if let Some(Object::Job(job)) = observed.get(Kind::Job, name) {
                let job = job.clone();
                job_effect(observed, namespace, job);
            }
        }
        Action::WaitDeployment { name, .. } => {
            if let Some(Object::Deployment(d)) = observed.get(Kind::Deployment, name) {
                let d = ready(d.clone());
                observed.insert(Object::Deployment(d));
            }
        }
        Action::WaitReady { target, .. } => {
            if let Some(Object::Custom(o)) = observed.objects.get(target) {
                let mut o = o.clone();
                let generation = o.metadata.generation.unwrap_or(1);
                o.status = Some(serde_json::json!({"conditions": [{
                    "type": "Ready", "status": "True", "reason": "Ready",
                    "observedGeneration": generation,
                }]}));
                observed.insert(Object::Custom(o));
            }
        }
        Action::Scale {
            name,
            replicas,
            restarted_at,
            hardened,
            ..
        } => {
            if let Some(Object::Deployment(d)) = observed.get(Kind::Deployment, name) {
                let mut d = d.clone();
                if let Some(h) = hardened {
                    d.metadata
                        .annotations
                        .get_or_insert_with(Default::default)
                        .extend(h.metadata.annotations.clone().unwrap_or_default());
                    if let (Some(spec), Some(want)) = (d.spec.as_mut(), h.spec.as_ref()) {
                        spec.template = want.template.clone();
                    }
                }
                if let Some(spec) = d.spec.as_mut() {
                    spec.replicas = Some(*replicas);
                    if let Some(at) = restarted_at {
                        spec.template
                            .metadata
                            .get_or_insert_with(Default::default)
                            .annotations
                            .get_or_insert_with(Default::default)
                            .insert(
                                crate::labels::RESTARTED_AT_ANNOTATION.to_owned(),
                                at.clone(),
                            );
                    }
                }
                observed.insert(Object::Deployment(ready(d)));
            }
        }
        // The snapshot holds no pods or ReplicaSets, so the Deployment's or Job's own entry is
        // all a foreground deletion removes from it.
        Action::Delete { target, .. } => {
            observed.objects.remove(target);
        }
        Action::None => {}
    }
}

/// The Deployment as its controller reports it once every replica is ready.
fn ready(mut deployment: Deployment) -> Deployment {
    let replicas = crate::observed::desired_replicas(&deployment);
    deployment.status = Some(DeploymentStatus {
        observed_generation: deployment.metadata.generation,
        replicas: Some(replicas),
        updated_replicas: Some(replicas),
        ready_replicas: Some(replicas),
        available_replicas: Some(replicas),
        ..DeploymentStatus::default()
    });
    deployment
}

/// Name of the Secret the simulated data-sync writes into (for tests).
pub const SIMULATED_DATA_SECRET: &str = names::MIGRATION_DATA_SECRET;
