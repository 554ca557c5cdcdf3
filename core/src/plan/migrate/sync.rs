//! The data-sync phase: the copy while the source serves, the final sync, the read-back of
//! what it extracted.

use super::after_sync;
use crate::plan::{
    Action, JobWait, Op, PlanError, Step, await_job_step, done_step, job_label,
    job_name as job_name_of, run_job_step,
};
use k8s_openapi::api::batch::v1::Job;

use crate::builders::data_sync;

use crate::catalogue::names;
use crate::labels;
use crate::object::{Kind, ObjectRef};
use crate::observed::{JobState, Observed, job_state};
use crate::params::MigrateParams;

/// An image check takes seconds; the limit allows for pulling a large image over a slow link.
/// Pods that cannot pull or start end the wait earlier, with the reason.
pub(in crate::plan) const IMAGE_CHECK_WAIT: JobWait = JobWait {
    timeout_seconds: Some(1800),
    log_tail_lines: 10,
};

const SYNC_WAIT: JobWait = JobWait {
    timeout_seconds: None,
    log_tail_lines: 20,
};

pub use crate::catalogue::steps::{
    PREPARE_CHECK as PREPARE_CHECK_STEP, PREPARE_SYNC as PREPARE_SYNC_STEP,
};

/// The read-back of what a data-sync Job extracted, as a step with nothing to carry out.
fn read_step(id: &str, reason: String) -> Step {
    Step {
        id: id.to_owned(),
        description: "read what the data-sync found on the source".to_owned(),
        op: Op::Read,
        target: ObjectRef::new(Kind::Secret, names::MIGRATION_DATA_SECRET),
        reason,
        action: Action::None,
    }
}

/// The data extracted by a prepare-mode sync that succeeded, if that is what the Secret holds.
fn prepared_data(observed: &Observed) -> Option<crate::observed::ExtractedData> {
    let data = observed.extracted().ok().flatten()?;
    let prepared = crate::plan::phase::syncs(observed, data_sync::sync_mode(true))
        .into_iter()
        .any(|j| job_name_of(j) == data.job && job_state(j) == JobState::Succeeded);
    prepared.then_some(data)
}

/// The steps of the data sync of a `--prepare` run: one copy per run, while the source serves.
fn prepare_sync_steps(params: &MigrateParams, observed: &Observed) -> Result<Vec<Step>, PlanError> {
    let ns = &params.namespace;
    let description = data_sync::description(params);
    // Each --prepare run copies again: that is what repeating it is for.
    let this_run: Vec<&Job> = crate::plan::phase::syncs(observed, data_sync::sync_mode(true))
        .into_iter()
        .filter(|j| job_label(j, labels::RUN_ANNOTATION).as_deref() == Some(params.run_id.as_str()))
        .collect();
    match this_run.last().map(|j| (job_name_of(j), job_state(j))) {
        Some((name, JobState::Succeeded)) => {
            let read = extracted_read(observed, &name, ns, || {
                format!(
                    "run `{}` again: a new run copies anew",
                    params.kubectl.migrate(Some(ns), &params.source_fqdn, true)
                )
            })?;
            Ok(vec![
                done_step(data_sync::STEP_ID, description.clone(), &name),
                read,
            ])
        }
        state => {
            crate::plan::phase::guard_sync(params, observed, None)?;
            let reason = match state {
                Some((failed, _)) => format!("Job {failed} failed; running a new attempt"),
                None => "a --prepare run copies the data again".to_owned(),
            };
            Ok(vec![
                run_job_step(
                    observed,
                    data_sync::STEP_ID,
                    description,
                    data_sync::data_sync_job(params),
                    data_sync::job_name(&params.run_id),
                    SYNC_WAIT,
                    reason,
                ),
                read_step("extract", "after data-sync".to_owned()),
            ])
        }
    }
}

/// The read of the data Job `name` wrote, or the error saying why it is not there and what
/// clears it.
fn extracted_read(
    observed: &Observed,
    name: &str,
    ns: &str,
    remedy: impl Fn() -> String,
) -> Result<Step, PlanError> {
    match observed.extracted() {
        Ok(Some(data)) if data.job == name => {
            Ok(read_step("extract", format!("written by Job {name}")))
        }
        Ok(Some(data)) => Err(PlanError::NoExtractedData {
            job: name.to_owned(),
            namespace: ns.to_owned(),
            detail: format!(
                "it holds data of Job {}, a later sync into the same volumes",
                data.job
            ),
            remedy: remedy(),
        }),
        Ok(None) => Err(PlanError::NoExtractedData {
            job: name.to_owned(),
            namespace: ns.to_owned(),
            detail: "it is empty or absent".into(),
            remedy: remedy(),
        }),
        Err(source) => Err(PlanError::ExtractedData {
            job: name.to_owned(),
            namespace: ns.to_owned(),
            source,
        }),
    }
}

/// The data-sync steps of a final run.
///
/// Why a final run copies first while the source keeps serving when no `--prepare` copy is
/// there: only the source says what the later steps will need (is its CA key encrypted, which
/// PostgreSQL, did it serve TFTP), and everything the outage needs must be known before the
/// outage starts. The prepare-mode copy learns it without stopping anything; every input is
/// then checked on its data, and only then does the final sync stop the source. It also
/// shortens the outage: the final copy moves only what changed since (issue 15).
fn final_sync_steps(params: &MigrateParams, observed: &Observed) -> Result<Vec<Step>, PlanError> {
    let ns = &params.namespace;
    let description = data_sync::description(params);
    let prepare_params = MigrateParams {
        prepare: true,
        ..params.clone()
    };
    let prepare_description = format!(
        "{}, before the final copy: every input is checked on what it finds",
        data_sync::description(&prepare_params)
    );
    let prepared_step = |job: &Job| {
        let name = job_name_of(job);
        done_step(PREPARE_SYNC_STEP, prepare_description.clone(), &name)
    };
    let check_step = |reason: String| Step {
        id: PREPARE_CHECK_STEP.to_owned(),
        description: "check every input the migration needs, before the source is stopped".into(),
        op: Op::Read,
        target: ObjectRef::new(Kind::Secret, names::MIGRATION_DATA_SECRET),
        reason,
        action: Action::None,
    };
    let finals = crate::plan::phase::syncs(observed, data_sync::sync_mode(false));
    let mut steps = Vec::new();
    let latest_final = finals.last().map(|j| (job_name_of(j), job_state(j)));
    if let Some((name, JobState::Succeeded)) = &latest_final {
        // A final sync that succeeded is never repeated, whatever changed since (an image tag,
        // say): copying again would stop the source's services and overwrite data the migrated
        // server has written since. Deleting the Job is the explicit way to sync again.
        if let Some(p) = crate::plan::phase::latest_succeeded(observed, data_sync::sync_mode(true))
        {
            steps.push(prepared_step(p));
        }
        let read = extracted_read(observed, name, ns, || {
            let stop = crate::plan::phase::stop_advice(params, observed);
            format!(
                "to sync again ({stop}delete Job {name} with `{}`) run `{}` again: the final sync runs anew, and stops the source's services",
                params.kubectl.cmd(Some(ns), &format!("delete job {name}")),
                params.kubectl.migrate(Some(ns), &params.source_fqdn, false)
            )
        })?;
        steps.push(done_step(data_sync::STEP_ID, description.clone(), name));
        steps.push(read);
        return Ok(steps);
    }
    crate::plan::phase::guard_sync(params, observed, None)?;
    // Run by this plan: the copy that stops the source, under this run's name.
    let final_step = |reason: String| {
        run_job_step(
            observed,
            data_sync::STEP_ID,
            description.clone(),
            data_sync::data_sync_job(params),
            data_sync::job_name(&params.run_id),
            SYNC_WAIT,
            reason,
        )
    };
    let final_reason = match &latest_final {
        Some((failed, _)) => format!("Job {failed} failed; running a new attempt"),
        None => "no final data sync has run yet".to_owned(),
    };
    match prepared_data(observed) {
        Some(data) => {
            // Every input a later step needs, checked by the very planning of those steps on
            // the prepare copy's data: a missing one is refused now, while the source serves.
            after_sync(params, observed, &data, None)?;
            if let Some(p) = observed
                .jobs_for_step(data_sync::STEP_ID)
                .into_iter()
                .find(|j| job_name_of(j) == data.job)
            {
                steps.push(prepared_step(p));
            }
            steps.push(check_step(if data.placeholder {
                "on the copy's data: what only the source can say is known after the copy".into()
            } else {
                format!("every input is there (data of Job {})", data.job)
            }));
            steps.push(final_step(final_reason));
        }
        None => {
            let this_run = crate::plan::phase::syncs(observed, data_sync::sync_mode(true))
                .into_iter()
                .rev()
                .find(|j| {
                    job_label(j, labels::RUN_ANNOTATION).as_deref() == Some(params.run_id.as_str())
                        && job_state(j) == JobState::Succeeded
                });
            if let Some(p) = this_run {
                // Its data is gone (a sync of another run since): a new run copies anew.
                let name = job_name_of(p);
                extracted_read(observed, &name, ns, || {
                    format!(
                        "run `{}` again: a new run copies anew",
                        params.kubectl.migrate(Some(ns), &params.source_fqdn, false)
                    )
                })?;
            }
            steps.push(run_job_step(
                observed,
                PREPARE_SYNC_STEP,
                prepare_description,
                data_sync::data_sync_job(&prepare_params),
                data_sync::prepare_job_name(&params.run_id),
                SYNC_WAIT,
                "no copy of this source has been made while it serves".into(),
            ));
            steps.push(check_step("after prepare-sync".into()));
            // Listed now so that the plan shows where the source goes down; it is planned
            // anew, checks made, once the copy has run.
            steps.push(final_step(final_reason));
        }
    }
    steps.push(read_step("extract", "after data-sync".to_owned()));
    Ok(steps)
}

/// Whether the newest final data sync succeeded: from then on no step reaches the source (a
/// final sync that succeeded is never repeated unless its Job is deleted).
pub(in crate::plan) fn final_sync_succeeded(observed: &Observed) -> bool {
    crate::plan::phase::syncs(observed, data_sync::sync_mode(false))
        .last()
        .is_some_and(|j| job_state(j) == JobState::Succeeded)
}

/// The data-sync step and the read-back of what it extracted.
pub(in crate::plan) fn sync_steps(
    params: &MigrateParams,
    observed: &Observed,
) -> Result<Vec<Step>, PlanError> {
    // Two syncs must never write into the same volumes at once: a running one is waited for,
    // whatever it was started with.
    let jobs = observed.jobs_for_step(data_sync::STEP_ID);
    if let Some(running) = jobs.iter().find(|j| job_state(j) == JobState::Running) {
        let name = job_name_of(running);
        crate::plan::phase::guard_sync(params, observed, Some(&name))?;
        let prepare_in_final = !params.prepare
            && job_label(running, labels::SYNC_MODE_ANNOTATION).as_deref()
                == Some(data_sync::sync_mode(true));
        let id = if prepare_in_final {
            PREPARE_SYNC_STEP
        } else {
            data_sync::STEP_ID
        };
        return Ok(vec![await_job_step(
            id,
            data_sync::description(params),
            name,
            SYNC_WAIT,
            "a data-sync Job is still running; waiting for it".into(),
        )]);
    }
    if params.prepare {
        prepare_sync_steps(params, observed)
    } else {
        final_sync_steps(params, observed)
    }
}
