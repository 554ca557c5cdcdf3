//! `progress`: how progress events read.

use std::time::Duration;

use uyuni_core::kubectl::Kubectl;
use uyuni_core::{Kind, ObjectRef};
use uyuni_effects::progress::ProgressEvent;

#[test]
fn an_unfollowed_log_advises_kubectl_logs_with_the_runs_flags() {
    let event = ProgressEvent::LogNotFollowed {
        job: "j",
        pod: "j-abc",
        namespace: "uyuni",
        error: "stream reset",
    };
    let k = Kubectl {
        kubeconfig: Some("/k".into()),
        context: Some("c".into()),
        migrate_flags: Vec::new(),
        ..Default::default()
    };
    assert!(
        event
            .render(&k)
            .contains("`kubectl --kubeconfig /k --context c -n uyuni logs -f job/j`"),
        "{}",
        event.render(&k)
    );
    assert!(
        event
            .to_string()
            .starts_with("warning: cannot follow the log of pod j-abc")
    );
    assert!(
        event
            .to_string()
            .contains("`kubectl -n uyuni logs -f job/j`")
    );
}

#[test]
fn events_read_as_lines() {
    let target = ObjectRef::new(Kind::ConfigMap, "cm");
    let applied = |created, changed| ProgressEvent::Applied {
        target: &target,
        namespace: Some("ns"),
        created,
        changed,
    };
    assert_eq!(
        applied(true, true).to_string(),
        "created configmap/cm in namespace ns"
    );
    assert_eq!(
        applied(false, true).to_string(),
        "updated configmap/cm in namespace ns"
    );
    assert_eq!(
        applied(false, false).to_string(),
        "unchanged configmap/cm in namespace ns"
    );
    let retry = ProgressEvent::Retrying {
        what: "get secret/s in namespace ns",
        attempt: 2,
        delay: Duration::from_millis(400),
        error: "unavailable (503)",
    };
    assert_eq!(
        retry.to_string(),
        "retrying to get secret/s in namespace ns in 0.4s (attempt 2 failed: unavailable (503))"
    );
    let log = ProgressEvent::JobLog {
        job: "sync",
        pod: "sync-abc",
        line: "copying",
    };
    assert_eq!(log.to_string(), "job/sync | copying");
}
