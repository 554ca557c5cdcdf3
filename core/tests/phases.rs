//! Issue 18 in the planner: the command line checked against where the migration stands, and
//! every refusal that advises running again shown to be one a re-run clears once the advice
//! is followed (no dead end).

use crate::common;

use uyuni_core::builders::{data_sync, server};

use uyuni_core::catalogue::names;
use uyuni_core::object::Kind;
use uyuni_core::plan::phase::{Phase, phase};
use uyuni_core::plan::{Action, PlanError};
use uyuni_core::{MigrateParams, Object, Observed, plan};

const PREPARE_JOB: &str = "uyuni-data-sync-20261130090000";

fn prepare_params() -> MigrateParams {
    let mut params = MigrateParams {
        prepare: true,
        ..common::params()
    };
    params.run_id = "20261130090000".into();
    params
}

/// The name of the final sync Job of `common::after_sync`.
fn final_job() -> String {
    data_sync::job_name(common::RUN_ID)
}

/// A prepare-mode copy that succeeded after everything else, with its data in the Secret: what
/// a `--prepare` after a finished migration left before it was refused.
fn with_later_prepare(mut o: Observed) -> Observed {
    let mut job = data_sync::data_sync_job(&prepare_params());
    job.metadata.name = Some(PREPARE_JOB.into());
    job.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        "2026-11-30T09:00:00Z".parse().expect("time"),
    ));
    o.insert(Object::Job(common::finished(job, true)));
    o.insert(common::extracted_secret(PREPARE_JOB, "pw", Some("CAKEY")));
    o
}

fn without(mut o: Observed, kind: Kind, name: &str) -> Observed {
    o.objects
        .remove(&uyuni_core::ObjectRef::new(kind, name.to_owned()));
    o
}

fn scaled_to_zero(mut o: Observed, name: &str) -> Observed {
    if let Some(Object::Deployment(d)) = o.get(Kind::Deployment, name).cloned() {
        let mut d = d;
        if let Some(spec) = d.spec.as_mut() {
            spec.replicas = Some(0);
        }
        if let Some(status) = d.status.as_mut() {
            status.replicas = Some(0);
        }
        o.insert(Object::Deployment(d));
    }
    o
}

fn message(result: Result<uyuni_core::Plan, PlanError>) -> String {
    match result {
        Err(e) => e.to_string(),
        Ok(p) => panic!("planned: {:?}", p.next_step()),
    }
}

#[test]
fn a_finished_migration_is_in_the_server_running_phase_and_refuses_prepare() {
    let params = common::params();
    let done = common::after_migration(&params);
    assert_eq!(
        phase(&done),
        Phase::ServerRunning {
            replicas: 1,
            final_job: Some(final_job())
        }
    );
    let refused = message(plan(&prepare_params(), &done));
    assert!(refused.starts_with("--prepare refused"), "{refused}");
    assert!(
        refused.contains("`kubectl uyuni -n uyuni migrate uyuni.example.com` (without --prepare)"),
        "{refused}"
    );
    assert!(
        refused.contains(&format!("kubectl -n uyuni delete job {}", final_job())),
        "{refused}"
    );
    assert!(
        refused.contains("kubectl -n uyuni scale deployment uyuni db --replicas=0"),
        "{refused}"
    );
    // What it proposes works: the final run has nothing to do…
    assert!(plan(&params, &done).expect("final run").is_done());
    // …and copying anew is allowed once the server is stopped and the final Job deleted.
    let anew = without(
        scaled_to_zero(
            scaled_to_zero(done, server::SERVER_DEPLOYMENT),
            names::DB_DEPLOYMENT,
        ),
        Kind::Job,
        &final_job(),
    );
    let prepare = plan(&prepare_params(), &anew).expect("prepare after the advice");
    // The finished migration deleted the SSH key: the copy writes the one given again first.
    let pending: Vec<&str> = prepare
        .steps
        .iter()
        .filter(|s| s.action != Action::None)
        .map(|s| s.id.as_str())
        .collect();
    assert_eq!(pending.first(), Some(&"ssh-key"), "{pending:?}");
    assert!(pending.contains(&data_sync::STEP_ID), "{pending:?}");
}

#[test]
fn the_issue_dead_end_is_cleared_by_what_its_message_says() {
    // The state the issue found: a final sync succeeded, the server runs, and a later copy's
    // data is in the Secret. Every run said "run again", and every run failed the same way.
    let params = common::params();
    let broken = with_later_prepare(common::after_migration(&params));
    let refused = message(plan(&params, &broken));
    assert!(
        refused.contains(&format!("it holds data of Job {PREPARE_JOB}")),
        "{refused}"
    );
    assert!(
        !refused.contains("run again to retry the sync"),
        "the old dead end: {refused}"
    );
    assert!(
        refused.contains(&format!("kubectl -n uyuni delete job {}", final_job()))
            && refused.contains("scale deployment uyuni db --replicas=0"),
        "{refused}"
    );
    // The same run again: the same refusal (nothing changed) …
    assert_eq!(message(plan(&params, &broken)), refused);
    // … the advice followed: the final sync runs anew, its inputs checked on the later copy's
    // data, and nothing copies into a running server.
    let cleared = without(
        scaled_to_zero(
            scaled_to_zero(broken, server::SERVER_DEPLOYMENT),
            names::DB_DEPLOYMENT,
        ),
        Kind::Job,
        &final_job(),
    );
    let next = plan(&params, &cleared).expect("after the advice");
    // The finished migration deleted the SSH key: the run writes the one given again first.
    assert_eq!(next.next_step().map(|s| s.id.as_str()), Some("ssh-key"));
    let step = next
        .steps
        .iter()
        .find(|s| s.action != Action::None && s.id != "ssh-key")
        .expect("a step");
    assert!(step.stops_source(), "{step:?}");
}

#[test]
fn an_empty_data_secret_after_the_final_sync_is_cleared_by_a_new_final_sync() {
    let params = common::params();
    let mut o = common::after_sync(&params);
    o.insert(Object::Secret(
        uyuni_core::builders::migration::migration_data_secret(common::NAMESPACE),
    ));
    let refused = message(plan(&params, &o));
    assert!(refused.contains("it is empty or absent"), "{refused}");
    assert!(
        !refused.contains("scale deployment"),
        "no server runs: {refused}"
    );
    let cleared = without(o, Kind::Job, &final_job());
    let next = plan(&params, &cleared).expect("after the advice");
    // No copy with data is left: the copy while the source serves comes first.
    assert_eq!(
        next.next_step().map(|s| s.id.as_str()),
        Some(uyuni_core::plan::PREPARE_SYNC_STEP)
    );
}

#[test]
fn a_sync_into_a_running_server_is_refused_and_stopping_it_clears_that() {
    let params = common::params();
    let done = common::after_migration(&params);
    // The final Job deleted while the server runs: a new final sync would overwrite its data.
    let deleted = with_later_prepare(without(done, Kind::Job, &final_job()));
    let refused = message(plan(&params, &deleted));
    assert!(
        refused.starts_with("a data sync would copy into the volumes Deployment uyuni"),
        "{refused}"
    );
    assert!(
        refused.contains("kubectl -n uyuni scale deployment uyuni db --replicas=0"),
        "{refused}"
    );
    let stopped = scaled_to_zero(
        scaled_to_zero(deleted, server::SERVER_DEPLOYMENT),
        names::DB_DEPLOYMENT,
    );
    assert!(plan(&params, &stopped).is_ok());
}

#[test]
fn the_missing_ca_password_is_refused_on_the_prepare_copy_and_a_run_with_it_goes_on() {
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    args.ssl_password = None;
    let params = MigrateParams::from_args(&args).expect("valid");
    // After a copy made while the source serves: the final sync is not planned without it.
    let prepared = with_later_prepare(without(
        common::after_sync(&params),
        Kind::Job,
        &final_job(),
    ));
    assert_eq!(plan(&params, &prepared), Err(PlanError::CaPasswordNeeded));
    let with_password = plan(&common::params(), &prepared).expect("with the password");
    assert!(with_password.next_step().is_some_and(|s| s.stops_source()));
    // The dry run names the input as missing.
    let inputs = uyuni_core::plan::phase::inputs(&params, &prepared);
    let ca = inputs
        .iter()
        .find(|i| i.name == "CA key password")
        .expect("listed");
    assert_eq!(ca.need, uyuni_core::plan::phase::Need::Missing);
}

#[test]
fn a_final_run_from_nothing_copies_first_and_lists_where_the_source_goes_down() {
    let params = common::params();
    let first = plan(&params, &common::empty_cluster()).expect("plan");
    let outage = first.outage_step().expect("the final sync is listed");
    assert_eq!(outage.id, data_sync::STEP_ID);
    let prepare = first
        .steps
        .iter()
        .position(|s| s.id == uyuni_core::plan::PREPARE_SYNC_STEP)
        .expect("a copy while the source serves");
    let stop = first
        .steps
        .iter()
        .position(|s| s.stops_source())
        .expect("stop");
    assert!(prepare < stop);
    // --prepare never stops the source.
    assert!(
        plan(&prepare_params(), &common::empty_cluster())
            .expect("plan")
            .outage_step()
            .is_none()
    );
}

#[test]
fn other_refusals_that_advise_running_again_are_cleared_by_doing_what_they_say() {
    // A namespace being deleted: once it is gone, the run starts.
    let params = common::params();
    let mut terminating = common::empty_cluster();
    let mut ns = common::namespace();
    if let Object::Namespace(n) = &mut ns {
        n.status = Some(k8s_openapi::api::core::v1::NamespaceStatus {
            phase: Some("Terminating".into()),
            ..Default::default()
        });
    }
    terminating.insert(ns);
    assert!(message(plan(&params, &terminating)).contains("then run again"));
    assert!(plan(&params, &common::empty_cluster()).is_ok());

    // TFTP not recorded by an older tool: --tftp clears it.
    let mut old = common::after_sync(&params);
    if let Some(Object::Secret(s)) = old.get(Kind::Secret, names::MIGRATION_DATA_SECRET).cloned() {
        let mut s = s;
        if let Some(d) = s.data.as_mut() {
            d.remove(uyuni_core::scripts::data_keys::TFTP);
        }
        old.insert(Object::Secret(s));
    }
    assert!(message(plan(&params, &old)).contains("then run again"));
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    args.spec.tftp = Some(true);
    let with_flag = MigrateParams::from_args(&args).expect("valid");
    assert!(plan(&with_flag, &old).is_ok());

    // cert-manager missing: installed, the run starts.
    let mut bare = common::empty_cluster();
    bare.served.clear();
    assert!(message(plan(&params, &bare)).contains("then run again"));
    assert!(plan(&params, &common::empty_cluster()).is_ok());

    // A --prepare copy of this run whose data is gone: the next run (a new run id) copies anew.
    let mut gone = common::empty_cluster();
    let mut job = data_sync::data_sync_job(&prepare_params());
    job.metadata.name = Some(PREPARE_JOB.into());
    gone.insert(Object::Job(common::finished(job, true)));
    let refused = message(plan(&prepare_params(), &gone));
    assert!(
        refused.contains("run `kubectl uyuni -n uyuni migrate uyuni.example.com --prepare` again"),
        "{refused}"
    );
    let mut next_run = prepare_params();
    next_run.run_id = "20261130100000".into();
    assert!(plan(&next_run, &gone).is_ok());
}

/// Carries out the plan from `state` in simulation until its next step runs a Job of `step_id`;
/// returns the state then and that Job.
fn until_job_of(
    params: &MigrateParams,
    mut state: Observed,
    step_id: &str,
) -> (Observed, k8s_openapi::api::batch::v1::Job) {
    for _ in 0..uyuni_core::preview::MAX_STEPS {
        let current = plan(params, &state).expect("plans");
        let step = current
            .next_step()
            .cloned()
            .unwrap_or_else(|| panic!("the run ended without a Job of step {step_id}"));
        if step.id == step_id
            && let uyuni_core::Action::RunJob { job, .. } = &step.action
        {
            return (state, (**job).clone());
        }
        state = uyuni_core::simulate(&state, &params.namespace, &step);
    }
    panic!("no Job of step {step_id} within the step limit");
}

#[test]
fn a_failed_database_job_whose_script_says_run_again_is_retried_by_the_next_run() {
    use uyuni_core::builders::database::{
        FIXUP_STEP, MIGRATION_SQL_STEP, PASSWORDS_STEP, UPGRADE_STEP,
    };
    // Each step, with the messages of its script that advise running the migration again and
    // that a new attempt clears (a fault of the moment: psql refused, the temporary server did
    // not start or stop, the migration SQL failed).
    let cases: [(&str, &[&str]); 4] = [
        (FIXUP_STEP, &[]),
        (UPGRADE_STEP, &[]),
        (
            PASSWORDS_STEP,
            &[
                "ALTER ROLE failed for role $role (psql's error is above); run the migration again",
                "the temporary PostgreSQL server did not start (its log follows); fix the cause, then run the migration again",
                "the temporary PostgreSQL server did not stop cleanly; run the migration again",
            ],
        ),
        (
            MIGRATION_SQL_STEP,
            &[
                "the migration SQL failed (spacewalk-sql exit code $rc; its error is above): fix the cause, then run the migration again",
            ],
        ),
    ];
    let params = common::params();
    for (step_id, messages) in cases {
        let (state, job) = until_job_of(&params, common::after_sync(&params), step_id);
        let spec = serde_json::to_string(&job).expect("json");
        for m in messages {
            assert!(
                spec.contains(&m.replace('"', "\\\"")),
                "step {step_id}: its script says {m:?}"
            );
        }
        let failed_name = job.metadata.name.clone().expect("name");
        // Still running when a run ended (its wait timed out, or the run was interrupted): the
        // same command again waits for it, as the timeout's message says, and starts no other.
        let mut running = state.clone();
        running.insert(Object::Job(job.clone()));
        let again = plan(&params, &running).expect("a re-run plans");
        let awaited = again.next_step().expect("a step");
        assert!(
            awaited.id == step_id
                && matches!(&awaited.action, uyuni_core::Action::AwaitJob { name, .. } if *name == failed_name),
            "{awaited:?}"
        );
        // The Job failed: the same command again plans a new attempt of that very step…
        let mut failed = state.clone();
        failed.insert(Object::Job(common::finished(job, false)));
        let again = plan(&params, &failed).expect("a re-run plans");
        let retry = again.next_step().expect("a step");
        assert_eq!(retry.id, step_id, "{retry:?}");
        assert_eq!(
            retry.reason,
            format!("Job {failed_name} failed; running a new attempt")
        );
        let uyuni_core::Action::RunJob { job: new, .. } = &retry.action else {
            panic!("step {step_id}: not a Job run: {retry:?}");
        };
        let new_name = new.metadata.name.clone().expect("name");
        assert_ne!(new_name, failed_name, "a new attempt, the failed Job stays");
        // …and once it succeeds the run goes past it.
        let mut cleared = failed;
        cleared.insert(Object::Job(common::finished((**new).clone(), true)));
        let next = plan(&params, &cleared).expect("plans");
        assert!(
            next.next_step().is_none_or(|s| s.id != step_id),
            "step {step_id} is done after the new attempt: {:?}",
            next.next_step()
        );
    }
}
