//! Verdicts on what a wait sees: which pod will never start, which rollout has stalled, why a
//! Job failed. `effects` watches the objects and asks these pure functions what they mean, so
//! the judgement lives in one place and is tested without a cluster.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use crate::observed::{JobState, deployment_condition, job_state};

/// Container waiting reasons that do not heal by waiting, for the pod of any workload: the
/// image cannot be pulled or the container cannot be created from its spec (a missing Secret or
/// ConfigMap key, for instance).
pub const FATAL_WAITING_REASONS: [&str; 5] = [
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// The kubelet's back-off between restarts of a container that keeps exiting.
pub const CRASH_LOOP: &str = "CrashLoopBackOff";

/// The scheduler's reason on a pod no node can take.
pub const UNSCHEDULABLE: &str = "Unschedulable";

/// What the user can do about a pod held by `reason`: one of [`FATAL_WAITING_REASONS`],
/// [`CRASH_LOOP`] or [`UNSCHEDULABLE`] (anything else gets the general advice).
pub fn hint(reason: &str) -> &'static str {
    match reason {
        CRASH_LOOP => "the container keeps exiting: its log says why",
        UNSCHEDULABLE => {
            "no node can run the pod: check storage classes, volume binding and node resources"
        }
        "ImagePullBackOff" | "ErrImagePull" => {
            "check the image name, tag and registry access, and any pull secret"
        }
        "InvalidImageName" => "the image reference is malformed: check --image and --tag",
        "CreateContainerConfigError" => {
            "a Secret or ConfigMap the container needs is missing or lacks a key"
        }
        _ => "see the pod's events",
    }
}

/// What owns the pod, which decides whether a crash loop ends the wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// A Job's restarts are counted by its `backoffLimit`, and the Job controller ends the Job
    /// (the wait sees its `Failed` condition, with the log): a crash loop is not final yet.
    Job,
    /// A Deployment restarts a crashing container forever: it will never become ready.
    Deployment,
}

/// Why a pod cannot start (or, for a Deployment, keep running).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodBlocker {
    pub container: String,
    pub reason: String,
    pub message: Option<String>,
}

impl PodBlocker {
    /// The container started and exited over and over: its previous log says why, so it is
    /// worth showing with the error (a pull error has no log).
    pub fn crash_loop(&self) -> bool {
        self.reason == CRASH_LOOP
    }

    /// One line: `CrashLoopBackOff: container db (back-off 40s restarting …)`.
    pub fn summary(&self) -> String {
        let message = self
            .message
            .as_deref()
            .map(|m| format!(" ({m})"))
            .unwrap_or_default();
        format!("{}: container {}{message}", self.reason, self.container)
    }
}

/// A container of `pod` (init containers included) waiting for a reason that does not heal for
/// this kind of workload.
pub fn pod_blocker(pod: &Pod, workload: Workload) -> Option<PodBlocker> {
    let status = pod.status.as_ref()?;
    let init = status.init_container_statuses.iter().flatten();
    let main = status.container_statuses.iter().flatten();
    init.chain(main).find_map(|cs| {
        let waiting = cs.state.as_ref()?.waiting.as_ref()?;
        let reason = waiting.reason.as_deref()?;
        let fatal = FATAL_WAITING_REASONS.contains(&reason)
            || (workload == Workload::Deployment && reason == CRASH_LOOP);
        fatal.then(|| PodBlocker {
            container: cs.name.clone(),
            reason: reason.to_owned(),
            message: waiting.message.clone().filter(|m| !m.is_empty()),
        })
    })
}

/// The scheduler's message when `pod` cannot be placed on any node (yet). Not final by itself:
/// an autoscaler may add a node, so the wait decides how long to give it.
pub fn unschedulable(pod: &Pod) -> Option<String> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .find(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some(UNSCHEDULABLE)
        })
        .map(|c| {
            c.message
                .clone()
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "no node fits".to_owned())
        })
}

/// Has the Job ended, and how? `None` while it runs or has not been seen.
pub fn job_ended(job: Option<&Job>) -> Option<JobState> {
    match job.map(job_state) {
        Some(JobState::Running) | None => None,
        ended => ended,
    }
}

/// The container whose log is the pod's log: the first one (our Jobs and Deployments put the
/// workload first; sidecars, if any, follow).
pub fn main_container(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| c.name.as_str())
}

/// The status of the named (non-init) container.
pub fn container_status<'a>(pod: &'a Pod, container: &str) -> Option<&'a ContainerStatus> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|cs| cs.name == container)
}

fn pod_ended(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed")
}

/// The container has produced (or can produce) a log: it runs or ran.
pub fn container_started(pod: &Pod, container: &str) -> bool {
    container_status(pod, container)
        .and_then(|cs| cs.state.as_ref())
        .is_some_and(|s| s.running.is_some() || s.terminated.is_some())
}

/// The container, or the whole pod, has ended: its log will not grow any more.
pub fn container_ended(pod: &Pod, container: &str) -> bool {
    let terminated = container_status(pod, container)
        .and_then(|cs| cs.state.as_ref())
        .is_some_and(|s| s.terminated.is_some());
    terminated || pod_ended(pod)
}

/// The pod ended without its main container ever starting (a Job past its deadline while
/// Pending): no log is coming from it, so the wait need not wait for one.
pub fn ended_without_log(pod: &Pod) -> bool {
    pod_ended(pod) && main_container(pod).is_none_or(|c| !container_started(pod, c))
}

/// The pod a Job runs now: the newest, by creation time then name (a retried Job keeps its
/// failed pods; the newest is the attempt whose log and exit matter).
pub fn current_pod<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Option<&'a Pod> {
    pods.into_iter().max_by(|a, b| {
        let key = |p: &Pod| {
            (
                p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                p.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    })
}

/// Why a Job failed, in one line: the container's exit and the Job controller's reason.
pub fn failure_reason(job: &Job, pod: Option<&Pod>) -> String {
    let exit = pod.and_then(|pod| {
        let container = main_container(pod)?;
        let terminated = container_status(pod, container)?
            .state
            .as_ref()?
            .terminated
            .as_ref()?;
        let how = terminated
            .reason
            .as_deref()
            .filter(|r| !r.is_empty())
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        Some(format!(
            "container {container} exited with code {}{how}",
            terminated.exit_code
        ))
    });
    let condition = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter()
                .find(|c| c.type_ == "Failed" && c.status == "True")
        })
        .map(|c| {
            let reason = c.reason.clone().unwrap_or_default();
            match c.message.as_deref().filter(|m| !m.is_empty()) {
                Some(message) if !reason.is_empty() => format!("{reason}: {message}"),
                Some(message) => message.to_owned(),
                None => reason,
            }
        })
        .filter(|c| !c.is_empty());
    match (exit, condition) {
        (Some(exit), Some(condition)) => format!("{exit}; {condition}"),
        (Some(exit), None) => exit,
        (None, Some(condition)) => condition,
        (None, None) => "the Job reports failed pods".to_owned(),
    }
}

/// `ProgressDeadlineExceeded`: the Deployment controller gave up on the rollout, so waiting
/// longer will not make it ready.
pub fn rollout_stalled(deployment: &Deployment) -> Option<String> {
    deployment_condition(deployment, "Progressing", "False")
        .filter(|c| c.reason.as_deref() == Some("ProgressDeadlineExceeded"))
        .map(|c| {
            format!(
                "ProgressDeadlineExceeded: {}",
                c.message.clone().unwrap_or_default()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateTerminated, ContainerStateWaiting, PodCondition,
        PodSpec, PodStatus,
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
}
