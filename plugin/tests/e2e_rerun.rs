//! End to end, through the real `kubectl` against the simulated cluster: each error of the
//! cluster side whose message advises running the command again is reached, printed, and then
//! cleared by doing just that (issue 18: no advice to run again that a re-run cannot follow).
//! Timeouts of Jobs and Deployments (their limits are minutes, fields of the steps) are reached
//! in `effects/tests/sim_cluster.rs`; the planner's side of a re-run in `core/tests/phases.rs`.

use crate::support;

use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use support::{Env, NS, name, quick_migration, ssh_flags, text};
use uyuni_testdata::{
    DeploymentScript, DropFault, ErrorFault, FailOnce, FaultTarget, Faults, SimConfig, Verb,
};

/// Whether the run asked for the log of a pod of Job `job` (its wait has begun: the wait reads
/// the Job from the run's watch of its Jobs, opened before, and asks for nothing else).
fn follows_log_of(env: &Env, job: &str) -> bool {
    env.sim.request_log().iter().any(|r| {
        r.resource.as_deref() == Some("pods/log")
            && r.name.as_deref().is_some_and(|n| n.starts_with(job))
    })
}

fn failed_with(out: &Output, advice: &str) -> String {
    let (stdout, stderr) = text(out);
    assert!(
        !out.status.success(),
        "the run should fail\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains(advice), "{stderr}");
    stderr
}

fn succeeded(out: &Output) {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
}

fn ready(deployment: &Value) -> bool {
    deployment["status"]["readyReplicas"].as_i64() == Some(1)
}

#[test]
fn a_job_or_deployment_deleted_while_awaited_is_cleared_by_running_again() {
    let mut scenario = quick_migration();
    // Slow enough for the test to delete them while the run waits.
    if let Some(job) = scenario.jobs.get_mut("data-sync") {
        job.duration_ms = 6_000;
    }
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    let created = env.sim.job_created_channel("data-sync");

    // 1. The first data-sync Job is deleted (by someone else) while the run waits for it.
    let out = std::thread::scope(|s| {
        let run = s.spawn(|| env.migrate(&ssh_flags()));
        let job = created
            .recv_timeout(Duration::from_secs(60))
            .expect("a data-sync Job is created");
        assert!(
            env.sim
                .wait_until_blocking(Duration::from_secs(30), |_| follows_log_of(&env, &job.name)),
            "the run waits for Job {}",
            job.name
        );
        env.sim
            .delete("batch/v1", "Job", Some(NS), &job.name)
            .expect("deleted");
        run.join().expect("run")
    });
    let stderr = failed_with(
        &out,
        "was deleted while it ran; run the command again to start a new attempt",
    );
    assert!(env.jobs_of("data-sync").is_empty(), "{stderr}");

    // 2. Running again starts a new attempt; this time Deployment uyuni is deleted while the
    // run waits for it to become ready.
    let mut scenario = env.sim.scenario();
    if let Some(job) = scenario.jobs.get_mut("data-sync") {
        job.duration_ms = 400;
    }
    scenario.deployments.insert(
        "uyuni".into(),
        DeploymentScript {
            ready_after_ms: Some(6_000),
            ..DeploymentScript::default()
        },
    );
    env.sim.set_scenario(scenario);
    let out = std::thread::scope(|s| {
        let run = s.spawn(|| env.migrate(&ssh_flags()));
        assert!(
            env.sim
                .wait_until_blocking(Duration::from_secs(120), |_| env
                    .sim
                    .get("apps/v1", "Deployment", Some(NS), "uyuni")
                    .is_some()),
            // Written: the run waits for it next, without observing between (the steps in
            // between are plain writes), so a deletion now is one during the wait.
            "the run writes Deployment uyuni"
        );
        env.sim
            .delete("apps/v1", "Deployment", Some(NS), "uyuni")
            .expect("deleted");
        run.join().expect("run")
    });
    failed_with(
        &out,
        &format!(
            "deployment/uyuni was not found in namespace {NS}; run the command again to plan anew"
        ),
    );
    let syncs = env.jobs_of("data-sync");
    assert!(
        syncs.iter().all(|j| j["status"]["succeeded"] == 1),
        "the new attempts succeeded: {:?}",
        syncs.iter().map(|j| name(j).to_owned()).collect::<Vec<_>>()
    );

    // 3. Running again applies the Deployment anew and finishes.
    let mut scenario = env.sim.scenario();
    scenario.deployments.clear();
    env.sim.set_scenario(scenario);
    succeeded(&env.migrate(&ssh_flags()));
    let server = env
        .sim
        .get("apps/v1", "Deployment", Some(NS), "uyuni")
        .expect("Deployment uyuni");
    assert!(ready(&server), "{}", server["status"]);
}

#[test]
fn api_errors_that_advise_running_again_are_cleared_by_running_again() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    // Every case goes through the whole retry schedule (8 attempts, Retry-After: 1 s): its
    // waits divided by 20, the same attempts in the same order (about 45 s of waiting before).
    let prepare = || {
        let fast = ["--prepare", "--retry-delay-divisor", "20"].map(String::from);
        env.migrate(&[ssh_flags(), fast.to_vec()].concat())
    };
    // Jobs are written with server-side apply: a PATCH.
    let jobs_write = || FaultTarget::new(Some(Verb::Patch), Some("jobs"), None);
    let cluster_info = format!(
        "`kubectl --kubeconfig {} --context uyuni-sim cluster-info`",
        env.kubeconfig().display()
    );

    // A conflict (409) on an apply: answered once, not retried. (A step's ConfigMap: the
    // operation record's writes end no run.)
    env.sim.set_faults(Faults {
        fail_once: vec![FailOnce {
            target: FaultTarget::new(
                Some(Verb::Patch),
                Some("configmaps"),
                Some("uyuni-server-spec"),
            ),
            status: 409,
            retry_after_seconds: 1,
        }],
        ..Faults::default()
    });
    failed_with(
        &prepare(),
        "someone else changed it at the same time: run the command again",
    );

    // An API server that keeps answering 429, then one that keeps answering 503: each is
    // retried, then given up on with the same advice.
    for status in [429, 503] {
        env.sim.set_faults(Faults {
            errors: vec![ErrorFault {
                target: jobs_write(),
                rate: 1.0,
                status,
                retry_after_seconds: 1,
            }],
            ..Faults::default()
        });
        let stderr = failed_with(
            &prepare(),
            &format!(
                "the API server is overloaded or failing: wait a little and run the command again ({cluster_info} shows whether it is reachable)"
            ),
        );
        assert!(
            stderr.contains(&format!("({status})")) && stderr.contains("attempts)"),
            "{stderr}"
        );
    }

    // An API server that cannot be reached (every connection dropped).
    env.sim.set_faults(Faults {
        drops: vec![DropFault {
            target: jobs_write(),
            rate: 1.0,
        }],
        ..Faults::default()
    });
    failed_with(
        &prepare(),
        &format!(
            "check that the API server is reachable ({cluster_info}) and run the command again"
        ),
    );
    assert!(
        env.jobs_of("data-sync").is_empty(),
        "no Job was created while the faults lasted"
    );

    // A watch that keeps failing while the run waits on a Job (the data sync: the image checks
    // are over when first listed): the Job is left to run.
    env.sim.set_faults(Faults {
        errors: vec![ErrorFault {
            target: FaultTarget::new(Some(Verb::Watch), Some("jobs"), None),
            rate: 1.0,
            status: 503,
            retry_after_seconds: 1,
        }],
        ..Faults::default()
    });
    failed_with(
        &prepare(),
        &format!("check that the API server is reachable ({cluster_info}), then run again"),
    );
    let left = env.jobs_of("data-sync");
    assert_eq!(left.len(), 1, "the sync the watch failed on");

    // The cluster well again: the same command runs through (after that sync, a --prepare
    // run copies again to catch up, as each does).
    env.sim.set_faults(Faults::default());
    succeeded(&prepare());
    let syncs = env.jobs_of("data-sync");
    assert!(syncs.iter().any(|j| name(j) == name(&left[0])), "{syncs:?}");
    for sync in &syncs {
        assert_eq!(sync["status"]["succeeded"], 1, "{}", name(sync));
    }
}
