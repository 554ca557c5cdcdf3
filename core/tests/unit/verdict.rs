use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus};
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus,
    Pod, PodCondition, PodSpec, PodStatus,
};
use uyuni_core::observed::JobState;
use uyuni_core::verdict::{
    CRASH_LOOP, FATAL_WAITING_REASONS, UNSCHEDULABLE, Workload, container_ended, container_started,
    current_pod, ended_without_log, failure_reason, hint, job_ended, pod_blocker, rollout_stalled,
    unschedulable,
};

fn pod_with(statuses: Vec<ContainerStatus>, conditions: Vec<PodCondition>) -> Pod {
    Pod {
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "sync".into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Pending".into()),
            container_statuses: Some(statuses),
            conditions: Some(conditions),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn waiting(reason: &str) -> ContainerStatus {
    ContainerStatus {
        name: "sync".into(),
        state: Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                message: Some("Back-off pulling image \"x\"".into()),
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn terminated(code: i32) -> ContainerStatus {
    ContainerStatus {
        name: "sync".into(),
        state: Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: code,
                reason: Some("Error".into()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn fatal_waiting_reasons_block_the_pod_of_any_workload() {
    for workload in [Workload::Job, Workload::Deployment] {
        for reason in FATAL_WAITING_REASONS {
            let pod = pod_with(vec![waiting(reason)], vec![]);
            let blocker = pod_blocker(&pod, workload).expect("fatal");
            assert_eq!(blocker.reason, reason);
            assert_eq!(blocker.container, "sync");
            assert!(!blocker.crash_loop());
        }
        let creating = pod_with(vec![waiting("ContainerCreating")], vec![]);
        assert_eq!(pod_blocker(&creating, workload), None);
        let exited = pod_with(vec![terminated(1)], vec![]);
        assert_eq!(pod_blocker(&exited, workload), None);
        assert_eq!(pod_blocker(&Pod::default(), workload), None);
    }
}

#[test]
fn a_crash_loop_ends_a_deployment_wait_not_a_job_wait() {
    let pod = pod_with(vec![waiting(CRASH_LOOP)], vec![]);
    assert_eq!(pod_blocker(&pod, Workload::Job), None);
    let blocker = pod_blocker(&pod, Workload::Deployment).expect("fatal");
    assert!(blocker.crash_loop());
    assert_eq!(
        blocker.summary(),
        "CrashLoopBackOff: container sync (Back-off pulling image \"x\")"
    );
}

#[test]
fn the_summary_leaves_out_an_empty_message() {
    let mut status = waiting("ErrImagePull");
    if let Some(w) = status.state.as_mut().and_then(|s| s.waiting.as_mut()) {
        w.message = Some(String::new());
    }
    let blocker = pod_blocker(&pod_with(vec![status], vec![]), Workload::Job).expect("fatal");
    assert_eq!(blocker.message, None);
    assert_eq!(blocker.summary(), "ErrImagePull: container sync");
}

#[test]
fn every_reason_that_ends_a_wait_has_its_own_hint() {
    let general = hint("SomethingElse");
    for reason in FATAL_WAITING_REASONS
        .iter()
        .filter(|r| **r != "CreateContainerError")
        .chain([&CRASH_LOOP, &UNSCHEDULABLE])
    {
        assert_ne!(hint(reason), general, "{reason}");
    }
    // The reason, not a summary line that starts with it.
    assert_eq!(hint("ImagePullBackOff: container db"), general);
}

#[test]
fn init_containers_count_too() {
    let mut pod = pod_with(vec![], vec![]);
    if let Some(status) = pod.status.as_mut() {
        status.init_container_statuses = Some(vec![ContainerStatus {
            name: "init".into(),
            ..waiting("ErrImagePull")
        }]);
    }
    assert_eq!(
        pod_blocker(&pod, Workload::Job).expect("fatal").container,
        "init"
    );
}

#[test]
fn unschedulable_is_detected() {
    let condition = PodCondition {
        type_: "PodScheduled".into(),
        status: "False".into(),
        reason: Some("Unschedulable".into()),
        message: Some("0/3 nodes are available".into()),
        ..Default::default()
    };
    let pod = pod_with(vec![], vec![condition]);
    assert_eq!(
        unschedulable(&pod).as_deref(),
        Some("0/3 nodes are available")
    );
    assert_eq!(unschedulable(&pod_with(vec![], vec![])), None);
}

fn job_with(conditions: Vec<JobCondition>, failed: Option<i32>) -> Job {
    Job {
        status: Some(JobStatus {
            conditions: Some(conditions),
            failed,
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn a_job_ends_with_its_condition() {
    assert_eq!(job_ended(None), None);
    assert_eq!(job_ended(Some(&Job::default())), None);
    let complete = job_with(
        vec![JobCondition {
            type_: "Complete".into(),
            status: "True".into(),
            ..Default::default()
        }],
        None,
    );
    assert_eq!(job_ended(Some(&complete)), Some(JobState::Succeeded));
    // A failed pod alone does not end a Job that may retry: the Failed condition does.
    assert_eq!(job_ended(Some(&job_with(vec![], Some(1)))), None);
    let failed = job_with(
        vec![JobCondition {
            type_: "Failed".into(),
            status: "True".into(),
            ..Default::default()
        }],
        Some(1),
    );
    assert_eq!(job_ended(Some(&failed)), Some(JobState::Failed));
}

#[test]
fn failure_reason_combines_exit_and_condition() {
    let job = job_with(
        vec![JobCondition {
            type_: "Failed".into(),
            status: "True".into(),
            reason: Some("BackoffLimitExceeded".into()),
            message: Some("Job has reached the specified backoff limit".into()),
            ..Default::default()
        }],
        Some(1),
    );
    let pod = pod_with(vec![terminated(3)], vec![]);
    assert_eq!(
        failure_reason(&job, Some(&pod)),
        "container sync exited with code 3 (Error); BackoffLimitExceeded: Job has reached the specified backoff limit"
    );
    assert_eq!(
        failure_reason(&job, None),
        "BackoffLimitExceeded: Job has reached the specified backoff limit"
    );
    assert_eq!(
        failure_reason(&job_with(vec![], Some(1)), None),
        "the Job reports failed pods"
    );
}

fn named(name: &str, phase: &str, statuses: Vec<ContainerStatus>) -> Pod {
    let mut pod = pod_with(statuses, vec![]);
    pod.metadata.name = Some(name.into());
    if let Some(status) = pod.status.as_mut() {
        status.phase = Some(phase.into());
    }
    pod
}

#[test]
fn a_log_is_expected_only_from_a_container_that_started() {
    let running = ContainerStatus {
        name: "sync".into(),
        state: Some(ContainerState {
            running: Some(Default::default()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let pod = named("p", "Running", vec![running]);
    assert!(container_started(&pod, "sync"));
    assert!(!container_ended(&pod, "sync"));
    assert!(!ended_without_log(&pod));

    let done = named("p", "Failed", vec![terminated(1)]);
    assert!(container_started(&done, "sync") && container_ended(&done, "sync"));
    assert!(!ended_without_log(&done), "it ran: its log is there");

    // Past the Job's deadline while still pulling: the pod ends, the container never ran.
    let never = named("p", "Failed", vec![waiting("ContainerCreating")]);
    assert!(!container_started(&never, "sync"));
    assert!(container_ended(&never, "sync"), "the pod's phase ends it");
    assert!(ended_without_log(&never));
    assert!(!ended_without_log(&named("p", "Pending", vec![])));
}

#[test]
fn the_current_pod_is_the_newest() {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    let at = |name: &str, secs: i64| {
        let mut pod = named(name, "Running", vec![]);
        pod.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(secs).expect("time"),
        ));
        pod
    };
    let pods = [at("job-b", 10), at("job-c", 30), at("job-a", 30)];
    let current = current_pod(&pods).and_then(|p| p.metadata.name.as_deref());
    assert_eq!(current, Some("job-c"), "newest, then by name");
    assert!(current_pod(&[]).is_none());
}

#[test]
fn a_stalled_rollout_is_reported() {
    let d = Deployment {
        status: Some(DeploymentStatus {
            conditions: Some(vec![DeploymentCondition {
                type_: "Progressing".into(),
                status: "False".into(),
                reason: Some("ProgressDeadlineExceeded".into()),
                message: Some("ReplicaSet \"db-1\" has timed out progressing.".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert!(rollout_stalled(&d).expect("stalled").contains("timed out"));
    assert!(rollout_stalled(&Deployment::default()).is_none());
}
