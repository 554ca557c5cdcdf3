//! kube-rs's runtime against the simulated cluster: `watcher` and `await_condition`.

use std::time::Duration;

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt as _, watcher};
use uyuni_testdata::{Faults, JobScript, Scenario, SimConfig};

use super::{client, fast, job, namespace, start};

async fn sim_with_job_scenario(faults: Faults) -> uyuni_testdata::SimCluster {
    let sim = start(SimConfig {
        scenario: Scenario {
            jobs: [(
                "data-sync".to_string(),
                JobScript::succeed(200, &["a", "b"]),
            )]
            .into(),
            timing: fast(),
            faults,
            ..Scenario::default()
        },
        ..SimConfig::default()
    })
    .await;
    sim.put(namespace("uyuni")).expect("ns");
    sim
}

#[tokio::test]
async fn await_condition_sees_a_job_complete() {
    let sim = sim_with_job_scenario(Faults::default()).await;
    let jobs: Api<Job> = Api::namespaced(client(&sim).await, "uyuni");
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(job("sync", Some("data-sync"))).expect("job"),
    )
    .await
    .expect("created");
    let done = tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(jobs.clone(), "sync", conditions::is_job_completed()),
    )
    .await
    .expect("in time")
    .expect("watch ok")
    .expect("job");
    assert_eq!(done.status.and_then(|s| s.succeeded), Some(1));
}

#[tokio::test]
async fn watcher_follows_jobs_through_closed_watches() {
    // Watches closing after two events make the watcher re-watch from its resourceVersion.
    let sim = sim_with_job_scenario(Faults {
        watch_close_after_events: Some(2),
        ..Faults::default()
    })
    .await;
    let jobs: Api<Job> = Api::namespaced(client(&sim).await, "uyuni");
    let stream = watcher(
        jobs.clone(),
        watcher::Config::default().fields("metadata.name=sync"),
    )
    .applied_objects()
    .try_filter(|j| {
        let complete = j.status.as_ref().and_then(|s| s.succeeded) == Some(1);
        async move { complete }
    });
    let mut stream = Box::pin(stream);
    // The watch is in place before the Job exists, so that its events (created, started,
    // completed) come through watches, not through the watcher's first list: under load the
    // Job could otherwise complete before that list.
    let follower = tokio::spawn(async move { stream.next().await });
    let watching = || {
        sim.request_log()
            .into_iter()
            .any(|r| r.verb.as_deref() == Some("watch"))
    };
    tokio::time::timeout(Duration::from_secs(10), async {
        while !watching() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the watcher watches");
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(job("sync", Some("data-sync"))).expect("job"),
    )
    .await
    .expect("created");
    let done = tokio::time::timeout(Duration::from_secs(10), follower)
        .await
        .expect("in time")
        .expect("the follower ran")
        .expect("an item")
        .expect("no error");
    assert_eq!(done.metadata.name.as_deref(), Some("sync"));
    let watches = sim
        .request_log()
        .into_iter()
        .filter(|r| r.verb.as_deref() == Some("watch"))
        .count();
    assert!(watches >= 2, "re-watched: {watches}");
}

#[tokio::test]
async fn streaming_list_watcher_gets_the_initial_events_bookmark() {
    let sim = sim_with_job_scenario(Faults::default()).await;
    sim.put(job("existing", None)).expect("job");
    let jobs: Api<Job> = Api::namespaced(client(&sim).await, "uyuni");
    let mut stream =
        Box::pin(watcher(jobs, watcher::Config::default().streaming_lists()).default_backoff());
    let mut saw_init_done = false;
    while let Ok(Some(event)) = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .expect("in time")
    {
        if matches!(event, watcher::Event::InitDone) {
            saw_init_done = true;
            break;
        }
    }
    assert!(saw_init_done);
    let log = sim.request_log();
    assert!(
        log.iter()
            .any(|r| r.query.contains("sendInitialEvents=true"))
    );
}
