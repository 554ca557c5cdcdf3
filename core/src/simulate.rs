//! The pure model of each step's effect on the observed state, and the dry-run preview built on
//! it: plan, simulate the next step, plan again, until nothing is left to do.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::Secret;
use serde::Serialize;

use crate::builders::{data_sync, migration, names};
use crate::object::{Kind, Object};
use crate::observed::{Observed, PLACEHOLDER, PLACEHOLDER_KEY};
use crate::params::MigrateParams;
use crate::plan::{Action, Plan, PlanError, Step, plan};
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

/// The whole operation as a dry run would show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preview {
    /// Every step, in order: the ones that would be carried out as planned when their turn
    /// comes, the others as no-ops.
    pub steps: Vec<Step>,
    /// The steps that would be carried out, in execution order.
    pub executed: Vec<Step>,
    /// The state at the end, as simulated.
    pub end: Observed,
    /// The plan of the end state (nothing left to do).
    pub final_plan: Plan,
}

/// Upper bound of steps in one operation; a plan that does not converge within it is a bug.
pub const MAX_STEPS: usize = 500;

/// Plans, simulates and plans again until nothing is left. Pure.
pub fn preview(params: &MigrateParams, observed: &Observed) -> Result<Preview, PlanError> {
    let mut state = observed.clone();
    let mut executed = Vec::new();
    loop {
        let current = plan(params, &state)?;
        let Some(step) = current.next_step().cloned() else {
            let steps = current
                .steps
                .iter()
                .map(|s| {
                    executed
                        .iter()
                        .find(|e: &&Step| e.id == s.id)
                        .cloned()
                        .unwrap_or_else(|| s.clone())
                })
                .collect();
            return Ok(Preview {
                steps,
                executed,
                end: state,
                final_plan: current,
            });
        };
        state = simulate(&state, &params.namespace, &step);
        executed.push(step);
        if executed.len() > MAX_STEPS {
            // Unreachable for a correct planner (a property test checks it); stop rather than spin.
            let steps = executed.clone();
            return Ok(Preview {
                steps,
                executed,
                end: state,
                final_plan: current,
            });
        }
    }
}

/// Name of the Secret the simulated data-sync writes into (for tests).
pub const SIMULATED_DATA_SECRET: &str = names::MIGRATION_DATA_SECRET;
