//! Each fault kind happens as configured.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use serde_json::json;
use uyuni_testdata::{DropFault, ErrorFault, FailOnce, FaultTarget, Faults, SimConfig, Verb};

use super::{client, client_for, job, namespace, parse, raw, start};

fn errors(verb: Verb, resource: &str, rate: f64, status: u16) -> Faults {
    Faults {
        seed: 7,
        errors: vec![ErrorFault {
            target: FaultTarget::new(Some(verb), Some(resource), None),
            rate,
            status,
            retry_after_seconds: 2,
        }],
        ..Faults::default()
    }
}

#[tokio::test]
async fn error_statuses_with_retry_after() {
    for status in [500u16, 503, 429] {
        let sim = start(SimConfig {
            faults: errors(Verb::List, "configmaps", 1.0, status),
            ..SimConfig::default()
        })
        .await;
        let c = client(&sim).await;
        let (code, headers, body) = raw(
            &c,
            "GET",
            "/api/v1/namespaces/default/configmaps",
            None,
            None,
            None,
        )
        .await;
        assert_eq!(code, status);
        let s = parse(&body);
        assert_eq!(s["kind"], json!("Status"));
        assert_eq!(s["code"], json!(status));
        if status == 429 {
            assert_eq!(headers["retry-after"], "2");
            assert_eq!(s["details"]["retryAfterSeconds"], json!(2));
            assert_eq!(s["reason"], json!("TooManyRequests"));
        }
        // Other verbs and resources are not affected, nor is /version.
        let (code, _, _) = raw(
            &c,
            "GET",
            "/api/v1/namespaces/default/secrets",
            None,
            None,
            None,
        )
        .await;
        assert_eq!(code, 200);
        let (code, _, _) = raw(&c, "GET", "/version", None, None, None).await;
        assert_eq!(code, 200);
        let faulted: Vec<_> = sim
            .request_log()
            .into_iter()
            .filter(|r| r.fault.is_some())
            .collect();
        assert_eq!(faulted.len(), 1);
        assert_eq!(faulted[0].status, status);
    }
}

#[tokio::test]
async fn error_rates_are_seeded() {
    let pattern = |seed: u64| async move {
        let mut faults = errors(Verb::List, "configmaps", 0.5, 503);
        faults.seed = seed;
        let sim = start(SimConfig {
            faults,
            ..SimConfig::default()
        })
        .await;
        let c = client(&sim).await;
        let mut codes = Vec::new();
        for _ in 0..20 {
            codes.push(
                raw(
                    &c,
                    "GET",
                    "/api/v1/namespaces/default/configmaps",
                    None,
                    None,
                    None,
                )
                .await
                .0,
            );
        }
        codes
    };
    let a = pattern(7).await;
    assert_eq!(a, pattern(7).await);
    assert_ne!(a, pattern(8).await);
    let failures = a.iter().filter(|c| **c == 503).count();
    assert!((3..=17).contains(&failures), "{a:?}");
}

#[tokio::test]
async fn kube_clients_default_retries_ride_out_503s() {
    let sim = start(SimConfig {
        faults: errors(Verb::List, "configmaps", 0.5, 503),
        ..SimConfig::default()
    })
    .await;
    let c = client_for(&sim, None, true).await;
    let api: Api<ConfigMap> = Api::namespaced(c, "default");
    for _ in 0..5 {
        api.list(&ListParams::default())
            .await
            .expect("retried until success");
    }
    assert!(sim.request_log().iter().any(|r| r.status == 503));
}

#[tokio::test]
async fn dropped_connections_get_no_answer() {
    let sim = start(SimConfig {
        faults: Faults {
            drops: vec![DropFault {
                target: FaultTarget::new(Some(Verb::Get), Some("configmaps"), None),
                rate: 1.0,
            }],
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .await;
    sim.put(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "default"}})).expect("cm");
    let c = client(&sim).await;
    let api: Api<ConfigMap> = Api::namespaced(c, "default");
    let err = api.get("x").await.expect_err("dropped");
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "a transport error, not a status: {err:?}"
    );
    assert!(
        api.list(&ListParams::default()).await.is_ok(),
        "lists are not dropped"
    );
    let dropped = sim
        .request_log()
        .into_iter()
        .find(|r| r.fault.as_deref() == Some("drop"))
        .expect("logged");
    assert_eq!(dropped.status, 0);
}

#[tokio::test]
async fn latency_is_added() {
    let sim = start(SimConfig {
        faults: Faults {
            latency_ms: 150,
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .await;
    let c = client(&sim).await;
    let t = Instant::now();
    raw(&c, "GET", "/api/v1/namespaces", None, None, None).await;
    assert!(t.elapsed() >= Duration::from_millis(150));
    let t = Instant::now();
    raw(&c, "GET", "/version", None, None, None).await;
    assert!(
        t.elapsed() < Duration::from_millis(150),
        "/version is exempt"
    );
}

#[tokio::test]
async fn version_faults_only_when_asked() {
    let mut faults = errors(Verb::Get, "", 1.0, 500);
    faults.errors[0].target.resource = None;
    faults.include_version = true;
    let sim = start(SimConfig {
        faults,
        ..SimConfig::default()
    })
    .await;
    let c = client(&sim).await;
    assert_eq!(raw(&c, "GET", "/version", None, None, None).await.0, 500);
}

#[tokio::test]
async fn watches_close_early() {
    let sim = start(SimConfig {
        faults: Faults {
            watch_close_after_events: Some(2),
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .await;
    for n in ["a", "b", "c", "d"] {
        sim.put(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "default"}})).expect("cm");
    }
    let c = client(&sim).await;
    let (_, _, body) = raw(
        &c,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=30",
        None,
        None,
        None,
    )
    .await;
    assert_eq!(body.lines().count(), 2);

    sim.set_faults(Faults {
        watch_close_after_ms: Some(200),
        ..Faults::default()
    });
    let t = Instant::now();
    let (_, _, body) = raw(
        &c,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=30",
        None,
        None,
        None,
    )
    .await;
    let elapsed = t.elapsed();
    assert!(
        elapsed >= Duration::from_millis(200) && elapsed < Duration::from_secs(5),
        "{elapsed:?}"
    );
    assert_eq!(body.lines().count(), 4);
}

/// Watch events after the initial ones arrive the fault's delay late, as behind a buffering
/// proxy; the initial ones do not.
#[tokio::test]
async fn watch_events_are_held_back() {
    let sim = start(SimConfig {
        faults: Faults {
            watch_event_delay_ms: Some(300),
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .await;
    let c = client_for(&sim, None, false).await;
    let api: Api<ConfigMap> = Api::namespaced(c, "default");
    let listed = api.list(&ListParams::default()).await.expect("list");
    let version = listed.metadata.resource_version.expect("a resourceVersion");
    let mut events = api
        .watch(&kube::api::WatchParams::default().timeout(10), &version)
        .await
        .expect("watch")
        .boxed();
    let written = Instant::now();
    sim.put(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "held", "namespace": "default"}}))
        .expect("cm");
    let event = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("the event comes")
        .expect("an event")
        .expect("not an error");
    assert!(
        matches!(&event, kube::api::WatchEvent::Added(cm) if cm.metadata.name.as_deref() == Some("held")),
        "{event:?}"
    );
    let late = written.elapsed();
    assert!(late >= Duration::from_millis(300), "{late:?}");
}

#[tokio::test]
async fn a_write_fails_once() {
    let sim = start(SimConfig {
        faults: Faults {
            fail_once: vec![FailOnce {
                target: FaultTarget::new(Some(Verb::Patch), Some("configmaps"), Some("target")),
                status: 500,
                retry_after_seconds: 1,
            }],
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .await;
    let c = client(&sim).await;
    let api: Api<ConfigMap> = Api::namespaced(c, "default");
    let body = Patch::Apply(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "target"}}),
    );
    let pp = PatchParams::apply("kubectl-uyuni");
    api.patch(
        "other",
        &pp,
        &Patch::Apply(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other"}}),
        ),
    )
    .await
    .expect("unaffected");
    match api.patch("target", &pp, &body).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 500),
        other => panic!("expected the injected 500, got {other:?}"),
    }
    api.patch("target", &pp, &body)
        .await
        .expect("second try succeeds");
}

#[tokio::test]
async fn scenario_faults_apply_and_can_be_replaced() {
    let scenario = uyuni_testdata::Scenario {
        faults: errors(Verb::List, "secrets", 1.0, 503),
        ..Default::default()
    };
    let sim = start(SimConfig {
        scenario,
        ..SimConfig::default()
    })
    .await;
    let c = client(&sim).await;
    assert_eq!(
        raw(
            &c,
            "GET",
            "/api/v1/namespaces/default/secrets",
            None,
            None,
            None
        )
        .await
        .0,
        503
    );
    sim.set_faults(Faults::default());
    assert_eq!(
        raw(
            &c,
            "GET",
            "/api/v1/namespaces/default/secrets",
            None,
            None,
            None
        )
        .await
        .0,
        200
    );
}

#[tokio::test]
async fn job_creation_hook_fires_before_the_answer() {
    let sim = start(SimConfig::default()).await;
    sim.put(namespace("uyuni")).expect("ns");
    let fired = Arc::new(AtomicUsize::new(0));
    let seen = fired.clone();
    sim.on_job_created("data-sync", move |job| {
        assert_eq!(job.name, "sync");
        seen.fetch_add(1, Ordering::SeqCst);
    });
    let mut stream = sim.job_created_stream("*");
    let c = client(&sim).await;
    let (code, _, _) = raw(
        &c,
        "POST",
        "/apis/batch/v1/namespaces/uyuni/jobs?dryRun=All",
        Some("application/json"),
        None,
        Some(job("sync", Some("data-sync"))),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(fired.load(Ordering::SeqCst), 0, "dry-run fires nothing");
    let (code, _, _) = raw(
        &c,
        "POST",
        "/apis/batch/v1/namespaces/uyuni/jobs",
        Some("application/json"),
        None,
        Some(job("sync", Some("data-sync"))),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    let created = tokio::time::timeout(Duration::from_secs(5), stream.recv())
        .await
        .expect("in time")
        .expect("event");
    assert_eq!(
        (created.step.as_str(), created.namespace.as_str()),
        ("data-sync", "uyuni")
    );
}

#[tokio::test]
async fn configured_latency_delays_every_verb_and_requests_are_counted_by_verb() {
    let sim = start(SimConfig {
        latency_ms: Some(40),
        ..SimConfig::default()
    })
    .await;
    let c = client(&sim).await;
    sim.clear_request_log();
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "counted"}, "data": {"a": "1"}}))
            .expect("configmap");
    api.patch(
        "counted",
        &PatchParams::apply("test").force(),
        &Patch::Apply(&cm),
    )
    .await
    .expect("apply");
    api.get("counted").await.expect("get");
    api.list(&ListParams::default()).await.expect("list");
    let events = api
        .watch(&kube::api::WatchParams::default().timeout(1), "0")
        .await
        .expect("watch");
    let mut events = Box::pin(events);
    drop(futures::StreamExt::next(&mut events).await);
    drop(events);
    api.delete("counted", &Default::default())
        .await
        .expect("delete");
    let counts = sim.request_counts();
    assert_eq!(
        counts.into_iter().collect::<Vec<_>>(),
        vec![
            ("CREATE/PATCH", 1),
            ("DELETE", 1),
            ("GET", 1),
            ("LIST", 1),
            ("WATCH", 1)
        ]
    );
    // The latency is a sleep before the answer: a lower bound, whatever the machine's load.
    for r in sim.request_log() {
        assert!(r.duration_ms >= 40, "{} {}: {r:?}", r.method, r.path);
    }
}

#[tokio::test]
async fn the_nth_write_is_carried_out_and_never_answered() {
    let sim = start(SimConfig {
        faults: Faults {
            hold_after_write: Some(2),
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .await;
    let c = client(&sim).await;
    let api: Api<ConfigMap> = Api::namespaced(c, "default");
    let cm = |name: &str| ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    api.create(&Default::default(), &cm("first"))
        .await
        .expect("the first write is answered");
    assert!(!sim.holding());
    let second = tokio::time::timeout(
        Duration::from_millis(500),
        api.create(&Default::default(), &cm("second")),
    )
    .await;
    assert!(second.is_err(), "the second write was answered: {second:?}");
    assert!(sim.holding());
    assert_eq!(sim.writes_counted(), 2);
    // Carried out all the same.
    assert!(api.get_opt("second").await.expect("get").is_some());
}

#[tokio::test]
async fn watches_expire_with_a_410_error_event() {
    let sim = start(SimConfig {
        faults: Faults {
            watch_expire_after_events: Some(2),
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .await;
    for n in ["a", "b", "c"] {
        sim.put(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n, "namespace": "default"}})).expect("cm");
    }
    let c = client(&sim).await;
    let (_, _, body) = raw(
        &c,
        "GET",
        "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=30",
        None,
        None,
        None,
    )
    .await;
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), 3, "{body}");
    let last = parse(lines[2]);
    assert_eq!(last["type"], json!("ERROR"));
    assert_eq!(last["object"]["code"], json!(410));
    assert_eq!(last["object"]["reason"], json!("Expired"));
}
