//! `connect`, `observe` and `execute` against the simulated cluster of `uyuni_testdata`.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use crate::common::*;
use uyuni_core::{Action, Kind, ObjectRef, Observation};
use uyuni_effects::{ClientOptions, EffectsError, NoProgress, connect, execute, observe};
use uyuni_testdata::{
    DropFault, ErrorFault, FaultTarget, Faults, JobScript, Scenario, SimCluster, SimConfig, Verb,
};

fn scenario_with(step: &str, script: JobScript) -> Scenario {
    let mut scenario = Scenario::default();
    scenario.jobs.insert(step.to_owned(), script);
    scenario
}

fn observation(named: Vec<ObjectRef>) -> Observation {
    Observation {
        namespace: NS.to_owned(),
        named,
        job_selector: uyuni_core::labels::MANAGED_SELECTOR.to_owned(),
        api_groups: vec!["cert-manager.io/v1".to_owned()],
        every: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_returns_only_what_exists() {
    let sim = sim(Scenario::default()).await;
    let conn = connect_to(&sim).await;
    let named = vec![
        ObjectRef::new(Kind::Namespace, NS),
        ObjectRef::new(Kind::Secret, "uyuni-migration-ssh"),
        ObjectRef::new(Kind::ConfigMap, "cm"),
        ObjectRef::new(Kind::PersistentVolumeClaim, "var-pgsql"),
        ObjectRef::new(Kind::Job, "some-job"),
    ];
    // Nothing exists, not even the namespace: an empty snapshot, not an error.
    let observed = bounded(observe(&conn.client, &observation(named.clone())))
        .await
        .unwrap();
    assert!(observed.objects.is_empty(), "{:?}", observed.objects.keys());

    with_namespace(&conn).await;
    apply_config_map(&conn.client, "cm", "v", &NoProgress).await;
    let observed = bounded(observe(&conn.client, &observation(named)))
        .await
        .unwrap();
    let keys: Vec<ObjectRef> = observed.objects.keys().cloned().collect();
    assert_eq!(
        keys,
        [
            ObjectRef::new(Kind::Namespace, NS),
            ObjectRef::new(Kind::ConfigMap, "cm")
        ]
    );
    // Observing writes nothing.
    let writes_before = sim.write_requests().len();
    observe(&conn.client, &observation(vec![])).await.unwrap();
    assert_eq!(sim.write_requests().len(), writes_before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_lists_the_selected_jobs() {
    let sim = sim(scenario_with(STEP, JobScript::succeed(50, &["done"]))).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let step = run_job_step("sync-1", STEP, wait(Some(30)));
    bounded(execute(&conn.client, NS, &step, &NoProgress))
        .await
        .unwrap();
    let mut foreign = job("foreign", "other");
    foreign.metadata.labels = None;
    let foreign_step = uyuni_core::Step {
        action: Action::RunJob {
            job: Box::new(foreign),
            wait: wait(Some(30)),
        },
        ..run_job_step("foreign", "other", wait(Some(30)))
    };
    bounded(execute(&conn.client, NS, &foreign_step, &NoProgress))
        .await
        .unwrap();

    let observed = observe(&conn.client, &observation(vec![])).await.unwrap();
    let keys: Vec<ObjectRef> = observed.objects.keys().cloned().collect();
    assert_eq!(keys, [ObjectRef::new(Kind::Job, "sync-1")]);
    let uyuni_core::Object::Job(job) = &observed.objects[&keys[0]] else {
        panic!("not a Job");
    };
    assert_eq!(
        uyuni_core::observed::job_state(job),
        uyuni_core::observed::JobState::Succeeded
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_creates_then_a_second_apply_changes_nothing() {
    let sim = sim(Scenario::default()).await;
    let conn = connect_to(&sim).await;
    let rec = Recorder::default();
    bounded(execute(&conn.client, NS, &apply_step(namespace(NS)), &rec))
        .await
        .unwrap();
    for _ in 0..2 {
        apply_config_map(&conn.client, "cm", "one", &rec).await;
    }
    let rv_before =
        sim.get("v1", "ConfigMap", Some(NS), "cm").unwrap()["metadata"]["resourceVersion"].clone();
    apply_config_map(&conn.client, "cm", "one", &rec).await;
    let stored = sim.get("v1", "ConfigMap", Some(NS), "cm").unwrap();
    assert_eq!(stored["metadata"]["resourceVersion"], rv_before);
    assert_eq!(stored["data"]["key"], "one");
    apply_config_map(&conn.client, "cm", "two", &rec).await;
    let stored = sim.get("v1", "ConfigMap", Some(NS), "cm").unwrap();
    assert_eq!(stored["data"]["key"], "two");
    assert!(
        stored["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["manager"] == "kubectl-uyuni" && m["operation"] == "Apply"),
        "{stored}"
    );

    let applied = |created, changed| Ev::Applied {
        target: "configmap/cm".into(),
        created,
        changed,
    };
    assert_eq!(
        rec.events(),
        [
            Ev::Applied {
                target: format!("namespace/{NS}"),
                created: true,
                changed: true
            },
            applied(true, true),
            applied(false, false),
            applied(false, false),
            applied(false, true),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_stay_out_of_events() {
    let sim = sim(Scenario::default()).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let rec = Recorder::default();
    bounded(execute(
        &conn.client,
        NS,
        &apply_step(secret("db", "hunter2-very-secret")),
        &rec,
    ))
    .await
    .unwrap();
    assert!(sim.get("v1", "Secret", Some(NS), "db").is_some());
    let text = format!("{:?}", rec.events());
    assert!(!text.contains("hunter2"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_job_streams_the_log_and_succeeds() {
    let lines = [
        "copying /var/lib/pgsql",
        "copying /srv/www",
        "$JOB_NAME done",
    ];
    let sim = sim(scenario_with(STEP, JobScript::succeed(600, &lines))).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let rec = Recorder::default();
    let step = run_job_step("sync-ok", STEP, wait(Some(30)));
    bounded(execute(&conn.client, NS, &step, &rec))
        .await
        .unwrap();
    assert_eq!(
        rec.logs(),
        ["copying /var/lib/pgsql", "copying /srv/www", "sync-ok done"]
    );
    let events = rec.events();
    assert_eq!(
        events[0],
        Ev::JobCreated {
            job: "sync-ok".into(),
            created: true
        }
    );
    assert_eq!(events.last(), Some(&Ev::Finished(true)));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Ev::Phase(_, phase) if phase == "Running")),
        "{events:?}"
    );
    assert!(rec.retries().is_empty(), "{:?}", rec.retries());
    // Jobs are never deleted: the user reads them afterwards.
    assert!(sim.get("batch/v1", "Job", Some(NS), "sync-ok").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_job_reports_the_tail_of_its_log() {
    let lines = [
        "step 1",
        "step 2",
        "step 3",
        "rsync: connection refused",
        "giving up",
    ];
    let sim = sim(scenario_with(STEP, JobScript::fail(23, &lines))).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let rec = Recorder::default();
    let step = run_job_step("sync-bad", STEP, wait(None));
    let err = bounded(execute(&conn.client, NS, &step, &rec))
        .await
        .unwrap_err();
    let EffectsError::JobFailed {
        step,
        job,
        namespace,
        reason,
        log_tail,
    } = &err
    else {
        panic!("expected JobFailed, got {err}");
    };
    assert_eq!(
        (step.as_str(), job.as_str(), namespace.as_str()),
        (STEP, "sync-bad", NS)
    );
    assert_eq!(
        log_tail,
        &["step 3", "rsync: connection refused", "giving up"]
    );
    assert!(reason.contains("exited with code 23"), "{reason}");
    assert!(reason.contains("BackoffLimitExceeded"), "{reason}");
    let text = err.to_string();
    assert!(text.contains("  | giving up"), "{text}");
    assert!(
        text.contains(&format!("kubectl -n {NS} logs job/sync-bad")),
        "{text}"
    );
    assert_eq!(rec.logs(), lines);
    assert_eq!(rec.events().last(), Some(&Ev::Finished(false)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_pull_backoff_ends_the_wait_with_the_reason() {
    let sim = sim(scenario_with(STEP, JobScript::stuck("ImagePullBackOff"))).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let step = run_job_step("sync-pull", STEP, wait(None));
    let err = bounded(execute(&conn.client, NS, &step, &NoProgress))
        .await
        .unwrap_err();
    let EffectsError::PodCannotStart {
        reason, container, ..
    } = &err
    else {
        panic!("expected PodCannotStart, got {err}");
    };
    assert_eq!(reason, "ImagePullBackOff");
    assert_eq!(container, "sync");
    let text = err.to_string();
    assert!(text.contains("Back-off pulling image"), "{text}");
    assert!(
        text.contains("kubectl -n uyuni-test describe pod sync-pull-"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_container_config_error_ends_the_wait() {
    let sim = sim(scenario_with(
        STEP,
        JobScript::stuck("CreateContainerConfigError"),
    ))
    .await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let step = run_job_step("sync-cfg", STEP, wait(None));
    let err = bounded(execute(&conn.client, NS, &step, &NoProgress))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, EffectsError::PodCannotStart { reason, .. } if reason == "CreateContainerConfigError"),
        "{err}"
    );
    assert!(err.to_string().contains("Secret or ConfigMap"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_leaves_the_job_running() {
    let sim = sim(scenario_with(STEP, JobScript::succeed(5_000, &["slow"]))).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let step = run_job_step("sync-slow", STEP, wait(Some(1)));
    let started = std::time::Instant::now();
    let err = bounded(execute(&conn.client, NS, &step, &NoProgress))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(4));
    assert!(matches!(err, EffectsError::JobTimeout { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("still running"), "{text}");
    assert!(
        text.contains(&format!("kubectl -n {NS} logs -f job/sync-slow")),
        "{text}"
    );
    assert!(sim.get("batch/v1", "Job", Some(NS), "sync-slow").is_some());

    // What the message advises: running again finds the Job still running (the planner then
    // awaits it rather than starting another: core's `phases` test) and waits for it to end.
    assert!(
        text.contains("run the command again to wait for it"),
        "{text}"
    );
    let seen = bounded(observe(&conn.client, &observation(Vec::new())))
        .await
        .unwrap();
    let job = seen
        .jobs_for_step(STEP)
        .into_iter()
        .find(|j| j.metadata.name.as_deref() == Some("sync-slow"))
        .expect("observed");
    assert!(
        job.status.as_ref().is_none_or(|s| s.succeeded.is_none()),
        "still running when the run ended: {:?}",
        job.status
    );
    let rec = Recorder::default();
    bounded(execute(
        &conn.client,
        NS,
        &await_job_step("sync-slow", STEP, wait(Some(30))),
        &rec,
    ))
    .await
    .unwrap();
    assert_eq!(rec.logs(), ["slow"]);
    assert!(
        !rec.events()
            .iter()
            .any(|e| matches!(e, Ev::JobCreated { .. })),
        "no second Job"
    );
}

/// A Deployment `name` of one replica, managed by the tool.
fn deployment(name: &str) -> uyuni_core::Object {
    uyuni_core::Object::Deployment(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NS, "labels": managed_labels()},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{
                        "name": "main",
                        "image": "registry.example.com/uyuni/server:5.1",
                    }]},
                },
            },
        }))
        .unwrap(),
    )
}

fn wait_deployment_step(name: &str, timeout_seconds: Option<u64>) -> uyuni_core::Step {
    uyuni_core::Step {
        id: format!("wait-{name}"),
        description: format!("wait until {name} is ready"),
        op: uyuni_core::Op::Wait,
        target: ObjectRef::new(Kind::Deployment, name),
        reason: "test".to_owned(),
        action: Action::WaitDeployment {
            name: name.to_owned(),
            wait: uyuni_core::plan::DeploymentWait {
                timeout_seconds,
                unschedulable_grace_seconds: uyuni_core::plan::UNSCHEDULABLE_GRACE_SECONDS,
                log_tail_lines: 20,
            },
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_timeout_is_cleared_by_waiting_again() {
    let mut scenario = Scenario::default();
    scenario.deployments.insert(
        "slow".to_owned(),
        uyuni_testdata::DeploymentScript {
            ready_after_ms: Some(3_000),
            ..uyuni_testdata::DeploymentScript::default()
        },
    );
    let sim = sim(scenario).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    execute(
        &conn.client,
        NS,
        &apply_step(deployment("slow")),
        &NoProgress,
    )
    .await
    .unwrap();
    let err = bounded(execute(
        &conn.client,
        NS,
        &wait_deployment_step("slow", Some(1)),
        &NoProgress,
    ))
    .await
    .unwrap_err();
    assert!(
        matches!(err, EffectsError::DeploymentTimeout { .. }),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("is not ready after 1s; it stays in place")
            && text.contains("run the command again to keep waiting"),
        "{text}"
    );
    // The advice followed: the same wait again (the planner plans it while the Deployment is
    // not ready) ends when it is.
    bounded(execute(
        &conn.client,
        NS,
        &wait_deployment_step("slow", Some(30)),
        &NoProgress,
    ))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_wait_leaves_the_job_and_await_job_picks_it_up() {
    let lines = ["one", "two", "three"];
    let sim = sim(scenario_with(STEP, JobScript::succeed(1_500, &lines))).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let step = run_job_step("sync-resume", STEP, wait(None));
    // As Ctrl-C does: the future is dropped mid-wait.
    let interrupted = tokio::time::timeout(
        Duration::from_millis(300),
        execute(&conn.client, NS, &step, &NoProgress),
    )
    .await;
    assert!(
        interrupted.is_err(),
        "the Job should still have been running"
    );
    assert!(
        sim.get("batch/v1", "Job", Some(NS), "sync-resume")
            .is_some()
    );

    let rec = Recorder::default();
    let resume = await_job_step("sync-resume", STEP, wait(None));
    bounded(execute(&conn.client, NS, &resume, &rec))
        .await
        .unwrap();
    // The log is followed from its start, so nothing is missed after a resume.
    assert_eq!(rec.logs(), lines);
    assert!(
        !rec.events()
            .iter()
            .any(|e| matches!(e, Ev::JobCreated { .. }))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn await_job_of_a_finished_job_returns_at_once() {
    let sim = sim(scenario_with(STEP, JobScript::succeed(50, &["fast"]))).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    bounded(execute(
        &conn.client,
        NS,
        &run_job_step("sync-fast", STEP, wait(None)),
        &NoProgress,
    ))
    .await
    .unwrap();
    let rec = Recorder::default();
    bounded(execute(
        &conn.client,
        NS,
        &await_job_step("sync-fast", STEP, wait(None)),
        &rec,
    ))
    .await
    .unwrap();
    assert_eq!(rec.logs(), ["fast"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn await_job_of_a_missing_job_says_so() {
    let sim = sim(Scenario::default()).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let err = bounded(execute(
        &conn.client,
        NS,
        &await_job_step("ghost", STEP, wait(None)),
        &NoProgress,
    ))
    .await
    .unwrap_err();
    assert!(matches!(err, EffectsError::JobNotFound { .. }), "{err}");
    // A Job that is gone is not observed, so the next plan runs the step anew (core's
    // `job_step`): what "plan anew" means.
    assert!(
        err.to_string()
            .ends_with("it may have been deleted: run the command again to plan anew"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn action_none_does_nothing() {
    let sim = sim(Scenario::default()).await;
    let conn = connect_to(&sim).await;
    sim.clear_request_log();
    let step = uyuni_core::Step {
        action: Action::None,
        ..apply_step(namespace(NS))
    };
    execute(&conn.client, NS, &step, &NoProgress).await.unwrap();
    assert!(sim.request_log().is_empty());
}

fn faulty(rate_503: f64, rate_429: f64, rate_drop: f64) -> Faults {
    let any = FaultTarget::new(None, None, None);
    Faults {
        seed: 7,
        errors: vec![
            ErrorFault {
                target: any.clone(),
                rate: rate_503,
                status: 503,
                retry_after_seconds: 1,
            },
            ErrorFault {
                target: any.clone(),
                rate: rate_429,
                status: 429,
                retry_after_seconds: 1,
            },
        ],
        drops: vec![DropFault {
            target: any,
            rate: rate_drop,
        }],
        ..Faults::default()
    }
}

async fn faulty_sim(faults: Faults, script: JobScript) -> SimCluster {
    SimCluster::start(SimConfig {
        scenario: scenario_with(STEP, script),
        faults,
        ..SimConfig::default()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_errors_are_retried_and_the_run_succeeds() {
    let lines = ["a", "b", "c", "d"];
    let sim = faulty_sim(faulty(0.25, 0.0, 0.0), JobScript::succeed(800, &lines)).await;
    let conn = connect_to(&sim).await;
    let rec = Recorder::default();
    bounded(async {
        execute(&conn.client, NS, &apply_step(namespace(NS)), &rec).await?;
        execute(&conn.client, NS, &apply_step(config_map("cm", "v")), &rec).await?;
        uyuni_effects::observe_with_progress(
            &conn.client,
            &observation(vec![ObjectRef::new(Kind::ConfigMap, "cm")]),
            &rec,
        )
        .await?;
        execute(
            &conn.client,
            NS,
            &run_job_step("sync-503", STEP, wait(Some(30))),
            &rec,
        )
        .await
    })
    .await
    .unwrap();
    assert_eq!(rec.logs(), lines);
    assert!(
        !rec.retries().is_empty(),
        "the faults should have caused retries"
    );
    assert!(
        rec.retries().iter().any(|r| r.contains("503")),
        "{:?}",
        rec.retries()
    );
    assert!(sim.request_log().iter().any(|r| r.status == 503));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_requests_waits_as_asked() {
    let sim = faulty_sim(faulty(0.0, 0.2, 0.0), JobScript::succeed(200, &["x"])).await;
    let conn = connect_to(&sim).await;
    let rec = Recorder::default();
    bounded(async {
        execute(&conn.client, NS, &apply_step(namespace(NS)), &rec).await?;
        for i in 0..4 {
            execute(
                &conn.client,
                NS,
                &apply_step(config_map(&format!("cm-{i}"), "v")),
                &rec,
            )
            .await?;
        }
        execute(
            &conn.client,
            NS,
            &run_job_step("sync-429", STEP, wait(Some(30))),
            &rec,
        )
        .await
    })
    .await
    .unwrap();
    let retries = rec.retries();
    assert!(!retries.is_empty(), "the faults should have caused retries");
    // The server asked for 1 s (header and Status details); the schedule would have said 100 ms.
    assert!(
        retries.iter().all(|r| r.contains(" in 1s: ")),
        "{retries:?}"
    );
    assert_eq!(rec.logs(), ["x"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connections_are_retried() {
    let lines = ["one", "two", "three", "four", "five"];
    let sim = faulty_sim(faulty(0.0, 0.0, 0.2), JobScript::succeed(800, &lines)).await;
    let conn = connect_to(&sim).await;
    let rec = Recorder::default();
    bounded(async {
        execute(&conn.client, NS, &apply_step(namespace(NS)), &rec).await?;
        execute(&conn.client, NS, &apply_step(config_map("cm", "v")), &rec).await?;
        execute(
            &conn.client,
            NS,
            &run_job_step("sync-drop", STEP, wait(Some(30))),
            &rec,
        )
        .await
    })
    .await
    .unwrap();
    // Reopened log streams skip what was shown: every line exactly once, in order.
    assert_eq!(rec.logs(), lines);
    assert!(
        !rec.retries().is_empty(),
        "the faults should have caused retries"
    );
    assert!(sim.get("v1", "ConfigMap", Some(NS), "cm").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_closed_early_are_reestablished() {
    let lines = ["one", "two", "three"];
    let faults = Faults {
        watch_close_after_events: Some(1),
        watch_close_after_ms: Some(150),
        ..Faults::default()
    };
    let sim = faulty_sim(faults, JobScript::succeed(900, &lines)).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let rec = Recorder::default();
    bounded(execute(
        &conn.client,
        NS,
        &run_job_step("sync-rewatch", STEP, wait(Some(30))),
        &rec,
    ))
    .await
    .unwrap();
    assert_eq!(rec.logs(), lines);
    let watches = sim
        .request_log()
        .iter()
        .filter(|r| r.verb.as_deref() == Some("watch"))
        .count();
    assert!(
        watches > 2,
        "expected re-established watches, saw {watches}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persistent_failure_gives_up_with_the_verb_and_object() {
    let faults = Faults {
        errors: vec![ErrorFault {
            target: FaultTarget::new(Some(Verb::Patch), Some("configmaps"), None),
            rate: 1.0,
            status: 503,
            retry_after_seconds: 0,
        }],
        ..Faults::default()
    };
    let sim = faulty_sim(faults, JobScript::default()).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let rec = Recorder::default();
    let err = bounded(execute(
        &conn.client,
        NS,
        &apply_step(config_map("cm", "v")),
        &rec,
    ))
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot apply configmap/cm in namespace {NS} (after 8 attempts)"
        )),
        "{text}"
    );
    assert_eq!(rec.retries().len(), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_context_gives_a_helpful_error() {
    let sim = sim(Scenario::default()).await;
    let err = connect(&ClientOptions {
        kubeconfig: Some(sim.kubeconfig_path().to_owned()),
        context: Some("prod".to_owned()),
        ..ClientOptions::default()
    })
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!(
            "context \"prod\" not found in {} (it has: uyuni-sim, uyuni-sim-wrong-token)",
            sim.kubeconfig_path().display()
        )),
        "{text}"
    );
    assert!(text.contains("kubectl config get-contexts"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_credentials_are_not_retried_and_say_so() {
    let sim = sim(Scenario::default()).await;
    let conn = connect(&ClientOptions {
        kubeconfig: Some(sim.kubeconfig_path().to_owned()),
        context: Some("uyuni-sim-wrong-token".to_owned()),
        ..ClientOptions::default()
    })
    .await
    .unwrap();
    let err = bounded(observe(
        &conn.client,
        &observation(vec![ObjectRef::new(Kind::Namespace, NS)]),
    ))
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("(401)"), "{text}");
    assert!(text.contains("credentials"), "{text}");
    assert!(!text.contains("attempts"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_contexts_pick_the_right_cluster() {
    let first = sim(Scenario::default()).await;
    let second = sim(Scenario::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    let cluster = |name: &str, sim: &SimCluster| {
        use base64::Engine as _;
        format!(
            "- name: {name}\n  cluster:\n    server: {}\n    certificate-authority-data: {}\n",
            sim.url(),
            base64::engine::general_purpose::STANDARD.encode(sim.ca_pem())
        )
    };
    let user = |name: &str, sim: &SimCluster| {
        format!("- name: {name}\n  user:\n    token: {}\n", sim.token())
    };
    let yaml = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: first\nclusters:\n{}{}users:\n{}{}contexts:\n\
         - name: first\n  context: {{cluster: c1, user: u1}}\n\
         - name: second\n  context: {{cluster: c2, user: u2, namespace: from-context}}\n",
        cluster("c1", &first),
        cluster("c2", &second),
        user("u1", &first),
        user("u2", &second),
    );
    std::fs::write(&path, yaml).unwrap();

    let conn = connect(&ClientOptions {
        kubeconfig: Some(path.clone()),
        context: Some("second".to_owned()),
        ..ClientOptions::default()
    })
    .await
    .unwrap();
    assert_eq!(conn.namespace, "from-context");
    assert_eq!(conn.context.as_deref(), Some("second"));
    bounded(execute(
        &conn.client,
        &conn.namespace,
        &apply_step(namespace("picked")),
        &NoProgress,
    ))
    .await
    .unwrap();
    assert!(second.get("v1", "Namespace", None, "picked").is_some());
    assert!(first.get("v1", "Namespace", None, "picked").is_none());

    // Without --context the current one is used, with the default namespace.
    let conn = connect(&ClientOptions {
        kubeconfig: Some(path),
        ..ClientOptions::default()
    })
    .await
    .unwrap();
    assert_eq!(conn.namespace, "default");
    bounded(execute(
        &conn.client,
        &conn.namespace,
        &apply_step(namespace("other")),
        &NoProgress,
    ))
    .await
    .unwrap();
    assert!(first.get("v1", "Namespace", None, "other").is_some());
    assert!(second.get("v1", "Namespace", None, "other").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_headers_reach_the_server() {
    let sim = sim(Scenario::default()).await;
    let conn = connect(&ClientOptions {
        kubeconfig: Some(sim.kubeconfig_path().to_owned()),
        impersonate: Some("jane".to_owned()),
        impersonate_groups: vec!["admins".to_owned()],
        ..ClientOptions::default()
    })
    .await
    .unwrap();
    // The simulated cluster does not authorize by user; this only checks requests still work.
    bounded(observe(
        &conn.client,
        &observation(vec![ObjectRef::new(Kind::Namespace, NS)]),
    ))
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_pods_warn_and_the_wait_goes_on() {
    // A waiting reason that heals by itself: the wait must not end because of it.
    let sim = sim(scenario_with(STEP, JobScript::stuck("ContainerCreating"))).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let rec = Recorder::default();
    let step = run_job_step("sync-pending", STEP, wait(Some(3)));
    let wait_for_it = execute(&conn.client, NS, &step, &rec);
    let make_unschedulable = async {
        let found = sim
            .wait_until(Duration::from_secs(5), |s| {
                s.objects("v1", "Pod", Some(NS))
                    .iter()
                    .any(|p| p["status"]["containerStatuses"][0]["state"]["waiting"].is_object())
            })
            .await;
        assert!(found, "the simulated Job never got a pod");
        // As the scheduler does: through the pods/status subresource.
        let pod = sim.objects("v1", "Pod", Some(NS)).remove(0);
        let name = pod["metadata"]["name"].as_str().unwrap().to_owned();
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(conn.client.clone(), NS);
        let patch = serde_json::json!({"status": {"conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/1 nodes are available: 1 Insufficient memory.",
        }]}});
        pods.patch_status(
            &name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    };
    let (result, ()) = bounded(async { tokio::join!(wait_for_it, make_unschedulable) }).await;
    let err = result.unwrap_err();
    assert!(matches!(err, EffectsError::JobTimeout { .. }), "{err}");
    let warnings = rec.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0]
            .contains("cannot be scheduled yet: 0/1 nodes are available: 1 Insufficient memory."),
        "{warnings:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_timeout_does_not_cut_quiet_waits() {
    // The Job and its log stay quiet three times longer than the request timeout.
    let sim = sim(scenario_with(STEP, JobScript::succeed(2_400, &["halfway"]))).await;
    let conn = connect(&ClientOptions {
        kubeconfig: Some(sim.kubeconfig_path().to_owned()),
        namespace: Some(NS.to_owned()),
        request_timeout: Some(Duration::from_millis(700)),
        ..ClientOptions::default()
    })
    .await
    .unwrap();
    with_namespace(&conn).await;
    let rec = Recorder::default();
    bounded(execute(
        &conn.client,
        NS,
        &run_job_step("sync-quiet", STEP, wait(Some(30))),
        &rec,
    ))
    .await
    .unwrap();
    assert_eq!(rec.logs(), ["halfway"]);
    // Quiet streams are resumed silently: they did not fail.
    assert!(rec.retries().is_empty(), "{:?}", rec.retries());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_certificates_fail_at_once_unless_verification_is_skipped() {
    let sim = sim(Scenario::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    let yaml = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: no-ca\nclusters:\n\
         - name: c\n  cluster: {{server: \"{}\"}}\n\
         users:\n- name: u\n  user: {{token: {}}}\n\
         contexts:\n- name: no-ca\n  context: {{cluster: c, user: u}}\n",
        sim.url(),
        sim.token()
    );
    std::fs::write(&path, yaml).unwrap();
    let named = observation(vec![ObjectRef::new(Kind::Namespace, NS)]);

    let conn = connect(&ClientOptions {
        kubeconfig: Some(path.clone()),
        ..ClientOptions::default()
    })
    .await
    .unwrap();
    let err = bounded(observe(&conn.client, &named)).await.unwrap_err();
    // A certificate problem does not heal by waiting: no retries. At the first contact it
    // names the server and what to pass.
    assert!(
        matches!(
            err,
            EffectsError::Unreachable {
                attempts: 1,
                tls: true,
                ..
            }
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot reach the API server {} of context no-ca: its certificate was not accepted",
            sim.url().trim_end_matches('/')
        )),
        "{text}"
    );
    assert!(text.contains("--certificate-authority FILE"), "{text}");

    let conn = connect(&ClientOptions {
        kubeconfig: Some(path),
        insecure_skip_tls_verify: true,
        ..ClientOptions::default()
    })
    .await
    .unwrap();
    bounded(observe(&conn.client, &named)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_not_ready_in_time_is_cleared_by_fixing_the_cause_and_waiting_again() {
    use uyuni_core::builders::tls;
    use uyuni_core::catalogue::names;
    let sim = sim(Scenario::default()).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    // The CA issuer without its CA Secret: cert-manager says why it is not Ready.
    let issuer = tls::ca_issuer(NS);
    execute(
        &conn.client,
        NS,
        &apply_step(uyuni_core::Object::Custom(issuer.clone())),
        &NoProgress,
    )
    .await
    .unwrap();
    let wait_step = |timeout_seconds| uyuni_core::Step {
        id: "ca-issuer-ready".to_owned(),
        description: "wait until the CA issuer is ready".to_owned(),
        op: uyuni_core::Op::Wait,
        target: ObjectRef::new(
            Kind::Custom(uyuni_core::object::CustomKind::Issuer),
            names::CA_ISSUER,
        ),
        reason: "test".to_owned(),
        action: Action::WaitReady {
            target: ObjectRef::new(
                Kind::Custom(uyuni_core::object::CustomKind::Issuer),
                names::CA_ISSUER,
            ),
            wait: uyuni_core::plan::DeploymentWait {
                timeout_seconds,
                unschedulable_grace_seconds: uyuni_core::plan::UNSCHEDULABLE_GRACE_SECONDS,
                log_tail_lines: 20,
            },
        },
    };
    let err = bounded(execute(&conn.client, NS, &wait_step(Some(1)), &NoProgress))
        .await
        .unwrap_err();
    assert!(matches!(err, EffectsError::NotReady { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("ErrGetKeyPair")
            && text.contains("fix the cause, then run the command again to keep waiting"),
        "{text}"
    );
    // The cause fixed (the CA Secret written), the same wait again ends Ready.
    sim.put(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": names::CA_SECRET, "namespace": NS},
        "stringData": {"tls.crt": "CERT", "tls.key": "KEY"},
    }))
    .unwrap();
    bounded(execute(&conn.client, NS, &wait_step(Some(30)), &NoProgress))
        .await
        .unwrap();
}

/// The requests of `sim` by `verb resource`, e.g. `WATCH jobs`.
fn requests_by_resource(sim: &SimCluster) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for r in sim.request_log() {
        let key = format!(
            "{} {}",
            r.verb_class(),
            r.resource.as_deref().unwrap_or(&r.path)
        );
        *out.entry(key).or_insert(0) += 1;
    }
    out
}

/// A step Job whose pods carry the managed labels, as the planner's do.
fn labelled_job_step(name: &str, step_id: &str) -> uyuni_core::Step {
    let mut step = run_job_step(name, step_id, wait(Some(30)));
    if let Action::RunJob { job, .. } = &mut step.action {
        let template = &mut job.spec.as_mut().unwrap().template;
        template.metadata = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            labels: Some(serde_json::from_value(managed_labels()).unwrap()),
            ..Default::default()
        });
    }
    step
}

/// In the migrate loop a Job wait reads the observer's watches: the Job from its Jobs watch and
/// the pods from one pods watch, started by the first wait and shared by the next; it costs its
/// log stream only, and still streams the log and reports a failure with its tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_in_the_loop_reads_the_observers_watches() {
    let lines = ["step 1", "step 2", "rsync: connection refused", "giving up"];
    let mut scenario = scenario_with(STEP, JobScript::fail(23, &lines));
    scenario
        .jobs
        .insert("second".to_owned(), JobScript::succeed(50, &["fine"]));
    let sim = sim(scenario).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let mut observer = uyuni_effects::Observer::new(
        conn.client.clone(),
        observation(vec![ObjectRef::new(Kind::ConfigMap, "cm")]),
    );
    sim.clear_request_log();
    bounded(observer.observe(&NoProgress)).await.unwrap();

    let rec = Recorder::default();
    let step = labelled_job_step("sync-bad", STEP);
    let prior = uyuni_effects::Prior::Unknown;
    let err = bounded(uyuni_effects::execute_step(
        &conn.client,
        NS,
        &step,
        &prior,
        Some(&observer),
        &rec,
    ))
    .await
    .unwrap_err();
    let EffectsError::JobFailed {
        reason, log_tail, ..
    } = &err
    else {
        panic!("expected JobFailed, got {err}");
    };
    assert!(reason.contains("exited with code 23"), "{reason}");
    assert_eq!(
        log_tail,
        &["step 2", "rsync: connection refused", "giving up"]
    );
    assert_eq!(rec.logs(), lines);

    let rec = Recorder::default();
    let executed = bounded(uyuni_effects::execute_step(
        &conn.client,
        NS,
        &labelled_job_step("sync-2", "second"),
        &prior,
        Some(&observer),
        &rec,
    ))
    .await
    .unwrap();
    observer.expect(&executed);
    assert_eq!(rec.logs(), ["fine"]);
    assert_eq!(rec.events().last(), Some(&Ev::Finished(true)));

    let n = requests_by_resource(&sim);
    let count = |key: &str| n.get(key).copied().unwrap_or(0);
    // The observer's Jobs watch, and one pods watch for both waits: no watch of their own.
    assert_eq!(count("LIST jobs"), 1, "{n:?}");
    assert_eq!(count("WATCH jobs"), 1, "{n:?}");
    assert_eq!(count("LIST pods"), 1, "{n:?}");
    assert_eq!(count("WATCH pods"), 1, "{n:?}");
    // The observation after the wait reads the stores: no request.
    bounded(observer.observe(&NoProgress)).await.unwrap();
    assert_eq!(requests_by_resource(&sim), n);
}

/// The observer's watches keep objects without `metadata.managedFields` (server-side apply's
/// bookkeeping, which the cluster records and nothing of ours reads), and with everything else
/// the server set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_observers_objects_leave_out_managed_fields() {
    let sim = sim(Scenario::default()).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    apply_config_map(&conn.client, "cm", "v", &NoProgress).await;
    let stored = sim.get("v1", "ConfigMap", Some(NS), "cm").unwrap();
    assert!(
        !stored["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{stored}"
    );
    let mut observer = uyuni_effects::Observer::new(
        conn.client.clone(),
        observation(vec![ObjectRef::new(Kind::ConfigMap, "cm")]),
    );
    let observed = bounded(observer.observe(&NoProgress)).await.unwrap();
    let Some(uyuni_core::Object::ConfigMap(cm)) = observed.get(Kind::ConfigMap, "cm") else {
        panic!("no ConfigMap cm in {:?}", observed.objects.keys());
    };
    assert_eq!(cm.metadata.managed_fields, None);
    assert_eq!(
        cm.metadata.uid.as_deref(),
        stored["metadata"]["uid"].as_str()
    );
    assert_eq!(
        cm.data
            .as_ref()
            .and_then(|d| d.get("key"))
            .map(String::as_str),
        Some("v")
    );
}

/// Watches that fall behind the run's writes (a proxy holding their events back) past the
/// observer's barrier: the observation reads the cluster directly, and sees what was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observation_whose_watches_fall_behind_reads_directly() {
    // Read when a watch starts: set before the observer's.
    let sim = sim(Scenario {
        faults: Faults {
            watch_event_delay_ms: Some(2_000),
            ..Faults::default()
        },
        ..Scenario::default()
    })
    .await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    let named = vec![
        ObjectRef::new(Kind::ConfigMap, "cm"),
        ObjectRef::new(Kind::ConfigMap, "cm-2"),
    ];
    let mut observer = uyuni_effects::Observer::new(conn.client.clone(), observation(named))
        .with_barrier_timeout(Duration::from_millis(50));
    let first = bounded(observer.observe(&NoProgress)).await.unwrap();
    assert!(
        !first
            .objects
            .contains_key(&ObjectRef::new(Kind::ConfigMap, "cm"))
    );

    let executed = bounded(uyuni_effects::execute_step(
        &conn.client,
        NS,
        &apply_step(config_map("cm", "v")),
        &uyuni_effects::Prior::Unknown,
        Some(&observer),
        &NoProgress,
    ))
    .await
    .unwrap();
    observer.expect(&executed);
    sim.clear_request_log();
    let started = std::time::Instant::now();
    let observed = bounded(observer.observe(&NoProgress)).await.unwrap();
    // Given up after the barrier's timeout, not after the event's delay.
    assert!(started.elapsed() < Duration::from_millis(1_500));
    assert!(
        observed
            .objects
            .contains_key(&ObjectRef::new(Kind::ConfigMap, "cm")),
        "{:?}",
        observed.objects.keys()
    );
    let n = requests_by_resource(&sim);
    assert_eq!(n.get("LIST configmaps"), Some(&1), "{n:?}");
}

fn delete_step_for(observed: &uyuni_core::Observed, kind: Kind, name: &str) -> uyuni_core::Step {
    uyuni_core::plan::delete_step(observed, ObjectRef::new(kind, name), format!("{name} goes"))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_the_object_and_waits_until_it_is_gone() {
    let sim = sim(Scenario::default()).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    apply_config_map(&conn.client, "cm", "v", &NoProgress).await;
    execute(
        &conn.client,
        NS,
        &apply_step(deployment("web")),
        &NoProgress,
    )
    .await
    .unwrap();
    let named = vec![
        ObjectRef::new(Kind::ConfigMap, "cm"),
        ObjectRef::new(Kind::Deployment, "web"),
    ];
    let observed = bounded(observe(&conn.client, &observation(named.clone())))
        .await
        .unwrap();
    let steps = [
        delete_step_for(&observed, Kind::ConfigMap, "cm"),
        delete_step_for(&observed, Kind::Deployment, "web"),
    ];
    assert!(steps.iter().all(|s| s.op == uyuni_core::Op::Delete));
    sim.clear_request_log();
    for step in &steps {
        bounded(execute(&conn.client, NS, step, &NoProgress))
            .await
            .unwrap();
    }
    assert!(sim.get("v1", "ConfigMap", Some(NS), "cm").is_none());
    assert!(sim.get("apps/v1", "Deployment", Some(NS), "web").is_none());
    let deletes: Vec<String> = sim
        .write_requests()
        .into_iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path)
        .collect();
    assert_eq!(
        deletes,
        [
            format!("/api/v1/namespaces/{NS}/configmaps/cm"),
            format!("/apis/apps/v1/namespaces/{NS}/deployments/web"),
        ]
    );
    let observed = observe(&conn.client, &observation(named)).await.unwrap();
    assert!(observed.objects.is_empty(), "{:?}", observed.objects.keys());
    // Planned again, there is nothing left to delete.
    assert_eq!(
        delete_step_for(&observed, Kind::Deployment, "web").op,
        uyuni_core::Op::Unchanged
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_of_an_object_already_gone_is_done() {
    let sim = sim(Scenario::default()).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    apply_config_map(&conn.client, "cm", "v", &NoProgress).await;
    let observed = observe(
        &conn.client,
        &observation(vec![ObjectRef::new(Kind::ConfigMap, "cm")]),
    )
    .await
    .unwrap();
    // Planned while it existed, deleted by someone else before the step ran.
    let step = delete_step_for(&observed, Kind::ConfigMap, "cm");
    execute(&conn.client, NS, &step, &NoProgress).await.unwrap();
    sim.clear_request_log();
    bounded(execute(&conn.client, NS, &step, &NoProgress))
        .await
        .unwrap();
    let requests = sim.request_log();
    let statuses: Vec<(String, u16)> = requests
        .iter()
        .map(|r| (r.method.clone(), r.status))
        .collect();
    // One DELETE answered 404, and no wait opened after it.
    assert_eq!(statuses, [("DELETE".to_owned(), 404)], "{statuses:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_waits_on_the_observers_store_so_the_next_observation_agrees() {
    let sim = sim(Scenario::default()).await;
    let conn = connect_to(&sim).await;
    with_namespace(&conn).await;
    apply_config_map(&conn.client, "cm", "v", &NoProgress).await;
    apply_config_map(&conn.client, "cm-2", "v", &NoProgress).await;
    let cm = ObjectRef::new(Kind::ConfigMap, "cm");
    let named = vec![cm.clone(), ObjectRef::new(Kind::ConfigMap, "cm-2")];
    let mut observer = uyuni_effects::Observer::new(conn.client.clone(), observation(named));
    let first = bounded(observer.observe(&NoProgress)).await.unwrap();
    assert!(first.objects.contains_key(&cm));
    let step = delete_step_for(&first, Kind::ConfigMap, "cm");
    sim.clear_request_log();
    let executed = bounded(uyuni_effects::execute_step(
        &conn.client,
        NS,
        &step,
        &uyuni_effects::Prior::Unknown,
        Some(&observer),
        &NoProgress,
    ))
    .await
    .unwrap();
    observer.expect(&executed);
    let observed = bounded(observer.observe(&NoProgress)).await.unwrap();
    assert!(
        !observed.objects.contains_key(&cm),
        "{:?}",
        observed.objects.keys()
    );
    assert!(observed.contains(Kind::ConfigMap, "cm-2"));
    // The DELETE, and no read of the object: the wait and the observation read the observer's
    // watch (whose own requests go on beside them), not a watch of the wait's own by name.
    let n = requests_by_resource(&sim);
    assert_eq!(n.get("DELETE configmaps"), Some(&1), "{n:?}");
    let by_name: Vec<String> = sim
        .request_log()
        .into_iter()
        .filter(|r| r.query.contains("metadata.name") || r.verb.as_deref() == Some("get"))
        .map(|r| format!("{} {}?{}", r.method, r.path, r.query))
        .collect();
    assert!(by_name.is_empty(), "{by_name:?}");
}
