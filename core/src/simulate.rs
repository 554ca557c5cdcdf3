//! The pure model of each step's effect on the observed state. The dry-run preview iterates it
//! (see [`crate::preview`]).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::Secret;

use crate::builders::{data_sync, migration, names};
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
    let is_sync = job
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::labels::STEP_ANNOTATION))
        .is_some_and(|s| s == data_sync::STEP_ID);
    observed.insert(Object::Job(completed(job)));
    if is_sync {
        observed.insert(Object::Secret(placeholder_data(namespace, &name)));
    }
}

/// The state after `step` was carried out successfully.
pub fn simulate(observed: &Observed, namespace: &str, step: &Step) -> Observed {
    let mut next = observed.clone();
    match &step.action {
        Action::Apply(object) => next.insert((**object).clone()),
        Action::RunJob { job, .. } => job_effect(&mut next, namespace, (**job).clone()),
        Action::AwaitJob { name, .. } => {
            if let Some(Object::Job(job)) = observed.get(Kind::Job, name) {
                job_effect(&mut next, namespace, job.clone());
            }
        }
        Action::None => {}
    }
    next
}

/// Name of the Secret the simulated data-sync writes into (for tests).
pub const SIMULATED_DATA_SECRET: &str = names::MIGRATION_DATA_SECRET;
