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
