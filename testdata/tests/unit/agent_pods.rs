use k8s_openapi::api::core::v1::Pod;
use serde_json::json;
use uyuni_testdata::agent::pods::{
    Conditions, PodView, Snapshot, State, status_patch, terminated, waiting_message,
};

fn view() -> PodView {
    PodView {
        namespace: "ns".to_owned(),
        name: "job-abcde".to_owned(),
        uid: "u1".to_owned(),
        service_account: "default".to_owned(),
        restart_policy: "Never".to_owned(),
        containers: vec![("main".to_owned(), "img:1".to_owned())],
        init_containers: vec![("init".to_owned(), "img:0".to_owned())],
        readiness_gates: vec![],
    }
}

#[test]
fn running_then_failed_status() {
    let mut conds = Conditions::default();
    let running = State::Running {
        started_at: "2026-12-01T10:00:01Z".to_owned(),
    };
    let p = status_patch(
        &view(),
        &Snapshot {
            phase: "Running",
            state: &running,
            ready: true,
            pod_ip: Some("10.244.0.2"),
            start_time: Some("2026-12-01T10:00:00Z"),
            restart_count: 0,
            last_state: None,
            init: None,
        },
        &mut conds,
        "2026-12-01T10:00:01Z",
    );
    // It is a valid PodStatus.
    let pod: Pod =
        serde_json::from_value(json!({"metadata": {"name": "x"}, "status": p["status"]}))
            .expect("valid");
    let s = pod.status.expect("status");
    assert_eq!(s.phase.as_deref(), Some("Running"));
    assert_eq!(s.pod_ip.as_deref(), Some("10.244.0.2"));
    let c = &s.container_statuses.expect("statuses")[0];
    assert!(c.ready && c.started == Some(true));
    assert!(
        c.container_id
            .as_deref()
            .is_some_and(|id| id.starts_with("containerd://"))
    );
    assert!(c.image_id.starts_with("img:1@sha256:"));
    let init = &s.init_container_statuses.expect("init")[0];
    assert_eq!(
        init.state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.reason.as_deref()),
        Some(Some("Completed"))
    );
    let conditions = s.conditions.expect("conditions");
    assert!(
        !conditions.iter().any(|c| c.type_ == "PodScheduled"),
        "PodScheduled is the scheduler's"
    );
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );

    let failed = State::Terminated {
        exit_code: 3,
        reason: "Error".to_owned(),
        started_at: "2026-12-01T10:00:01Z".to_owned(),
        finished_at: "2026-12-01T10:00:09Z".to_owned(),
        message: None,
    };
    let p = status_patch(
        &view(),
        &Snapshot {
            phase: "Failed",
            state: &failed,
            ready: false,
            pod_ip: Some("10.244.0.2"),
            start_time: Some("2026-12-01T10:00:00Z"),
            restart_count: 0,
            last_state: None,
            init: None,
        },
        &mut conds,
        "2026-12-01T10:00:09Z",
    );
    let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(
        (t["exitCode"].as_i64(), t["reason"].as_str()),
        (Some(3), Some("Error"))
    );
    let ready = p["status"]["conditions"]
        .as_array()
        .expect("array")
        .iter()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .expect("Ready");
    assert_eq!(
        (
            ready["status"].as_str(),
            ready["lastTransitionTime"].as_str(),
            ready["reason"].as_str()
        ),
        (
            Some("False"),
            Some("2026-12-01T10:00:09Z"),
            Some("PodCompleted")
        )
    );
    // Initialized did not change, so its transition time did not move.
    let init = p["status"]["conditions"]
        .as_array()
        .expect("array")
        .iter()
        .find(|c| c["type"] == "Initialized")
        .cloned()
        .expect("Initialized");
    assert_eq!(init["lastTransitionTime"], "2026-12-01T10:00:01Z");
}

#[test]
fn executed_init_containers_report_their_own_state() {
    let waiting = State::Waiting {
        reason: "PodInitializing".to_owned(),
        message: None,
    };
    let init = [State::Running {
        started_at: "2026-12-01T10:00:01Z".to_owned(),
    }];
    let p = status_patch(
        &view(),
        &Snapshot {
            phase: "Pending",
            state: &waiting,
            ready: false,
            pod_ip: Some("10.244.0.4"),
            start_time: Some("2026-12-01T10:00:00Z"),
            restart_count: 0,
            last_state: None,
            init: Some(&init),
        },
        &mut Conditions::default(),
        "2026-12-01T10:00:01Z",
    );
    let i = &p["status"]["initContainerStatuses"][0];
    assert_eq!(i["state"]["running"]["startedAt"], "2026-12-01T10:00:01Z");
    assert_eq!(i["started"], true);
    assert!(
        i["containerID"]
            .as_str()
            .is_some_and(|id| id.starts_with("containerd://"))
    );
    let initialized = p["status"]["conditions"]
        .as_array()
        .expect("array")
        .iter()
        .find(|c| c["type"] == "Initialized")
        .cloned()
        .expect("Initialized");
    assert_eq!(initialized["status"], "False");
    // Not yet started: waiting, no ids (a failed StartError carries its message).
    let failed = terminated(128, Some("no command specified".to_owned()), "t".to_owned());
    let none: [State; 0] = [];
    let p = status_patch(
        &view(),
        &Snapshot {
            phase: "Pending",
            state: &failed,
            ready: false,
            pod_ip: None,
            start_time: None,
            restart_count: 0,
            last_state: None,
            init: Some(&none),
        },
        &mut Conditions::default(),
        "2026-12-01T10:00:01Z",
    );
    let i = &p["status"]["initContainerStatuses"][0];
    assert_eq!(i["state"]["waiting"]["reason"], "PodInitializing");
    assert!(i.get("containerID").is_none());
    let t = &p["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(
        (t["reason"].as_str(), t["message"].as_str()),
        (Some("StartError"), Some("no command specified"))
    );
}

#[test]
fn waiting_status_has_reason_and_no_ids() {
    let state = State::Waiting {
        reason: "ImagePullBackOff".to_owned(),
        message: Some(waiting_message("ImagePullBackOff", "img:1")),
    };
    let p = status_patch(
        &view(),
        &Snapshot {
            phase: "Pending",
            state: &state,
            ready: false,
            pod_ip: Some("10.244.0.3"),
            start_time: None,
            restart_count: 0,
            last_state: None,
            init: None,
        },
        &mut Conditions::default(),
        "2026-12-01T10:00:00Z",
    );
    let c = &p["status"]["containerStatuses"][0];
    assert_eq!(c["state"]["waiting"]["reason"], "ImagePullBackOff");
    assert_eq!(
        c["state"]["waiting"]["message"],
        "Back-off pulling image \"img:1\""
    );
    assert!(c.get("containerID").is_none());
    assert_eq!(c["imageID"], "");
}
