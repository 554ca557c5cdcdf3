//! What `execute` reports while it works, for the plugin to display. Events borrow: the callback
//! runs synchronously and copies what it keeps.

use std::time::Duration;
use uyuni_core::kubectl::Kubectl;

use uyuni_core::ObjectRef;

/// Receives progress events. Called from the future that `execute` returns, never from another
/// task, so an implementation needs no locking beyond what `Send + Sync` asks.
pub trait Progress: Send + Sync {
    fn event(&self, event: ProgressEvent<'_>);
}

/// Ignores everything; for callers that only want the result.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn event(&self, _event: ProgressEvent<'_>) {}
}

/// One thing that happened. Never carries object content (Secret data stays out of progress).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressEvent<'a> {
    /// An object was server-side applied. `created`: it did not exist before; `changed`: its
    /// resourceVersion moved (an identical re-apply leaves it, and the object, as they were).
    Applied {
        target: &'a ObjectRef,
        namespace: Option<&'a str>,
        created: bool,
        changed: bool,
    },
    /// The Job of a `RunJob` step was applied (`created: false` if it already existed).
    JobCreated {
        job: &'a str,
        namespace: &'a str,
        created: bool,
    },
    /// Waiting for a Job starts; `timeout: None` waits as long as it takes.
    WaitingForJob {
        job: &'a str,
        namespace: &'a str,
        timeout: Option<Duration>,
    },
    /// A pod of the Job appeared or changed phase (`Pending`, `Running`, `Succeeded`, `Failed`).
    PodPhase {
        job: &'a str,
        pod: &'a str,
        phase: &'a str,
    },
    /// One line of the Job's main container log, as it is written.
    JobLog {
        job: &'a str,
        pod: &'a str,
        line: &'a str,
    },
    /// The Job ended; on failure `execute` returns the error after this.
    JobFinished { job: &'a str, succeeded: bool },
    /// Waiting for a Deployment to be ready starts.
    WaitingForDeployment {
        deployment: &'a str,
        namespace: &'a str,
        timeout: Option<Duration>,
    },
    /// A pod of a Deployment being waited for changed state (phase or waiting reason).
    DeploymentPod {
        deployment: &'a str,
        pod: &'a str,
        state: &'a str,
    },
    /// Waiting for a custom resource's Ready condition starts.
    WaitingForReady {
        target: &'a ObjectRef,
        timeout: Option<Duration>,
    },
    /// The Deployment is ready.
    DeploymentReady { deployment: &'a str },
    /// The Deployment has the asked number of replicas (pods gone after a scale to 0).
    Scaled { deployment: &'a str, replicas: i32 },
    /// Something the user should know that does not stop the work (a pod that cannot be
    /// scheduled yet, a log stream that could not be followed).
    Warning { message: &'a str },
    /// The log of a Job's pod could not be followed (the wait for the Job goes on). A
    /// structured warning, so that the `kubectl logs` command it advises can be rendered with
    /// the run's flags ([`ProgressEvent::render`]).
    LogNotFollowed {
        job: &'a str,
        pod: &'a str,
        namespace: &'a str,
        error: &'a str,
    },
    /// A request failed in a way that is usually transient; it is sent again after `delay`.
    Retrying {
        what: &'a str,
        attempt: u32,
        delay: Duration,
        error: &'a str,
    },
}

/// One line for a person, as the plugin prints it on stderr.
impl std::fmt::Display for ProgressEvent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProgressEvent::Applied {
                target,
                namespace,
                created,
                changed,
            } => {
                let verb = match (created, changed) {
                    (true, _) => "created",
                    (false, true) => "updated",
                    (false, false) => "unchanged",
                };
                write!(f, "{verb} {target}")?;
                if let Some(ns) = namespace {
                    write!(f, " in namespace {ns}")?;
                }
                Ok(())
            }
            ProgressEvent::JobCreated {
                job,
                namespace,
                created: true,
            } => write!(f, "created job/{job} in namespace {namespace}"),
            ProgressEvent::JobCreated {
                job,
                namespace,
                created: false,
            } => write!(f, "job/{job} in namespace {namespace} already exists"),
            ProgressEvent::WaitingForJob {
                job, timeout: None, ..
            } => write!(f, "waiting for job/{job} (no time limit)"),
            ProgressEvent::WaitingForJob {
                job,
                timeout: Some(t),
                ..
            } => write!(f, "waiting for job/{job} (up to {}s)", t.as_secs()),
            ProgressEvent::PodPhase { job, pod, phase } => {
                write!(f, "pod {pod} of job/{job}: {phase}")
            }
            ProgressEvent::JobLog { job, line, .. } => write!(f, "job/{job} | {line}"),
            ProgressEvent::JobFinished {
                job,
                succeeded: true,
            } => write!(f, "job/{job} succeeded"),
            ProgressEvent::JobFinished {
                job,
                succeeded: false,
            } => write!(f, "job/{job} failed"),
            ProgressEvent::WaitingForDeployment {
                deployment,
                timeout: None,
                ..
            } => write!(
                f,
                "waiting for deployment/{deployment} to be ready (no time limit)"
            ),
            ProgressEvent::WaitingForDeployment {
                deployment,
                timeout: Some(t),
                ..
            } => write!(
                f,
                "waiting for deployment/{deployment} to be ready (up to {}s)",
                t.as_secs()
            ),
            ProgressEvent::DeploymentPod {
                deployment,
                pod,
                state,
            } => write!(f, "pod {pod} of deployment/{deployment}: {state}"),
            ProgressEvent::WaitingForReady { target, timeout } => match timeout {
                Some(t) => write!(
                    f,
                    "waiting for {target} to be ready (up to {}s)",
                    t.as_secs()
                ),
                None => write!(f, "waiting for {target} to be ready (no time limit)"),
            },
            ProgressEvent::DeploymentReady { deployment } => {
                write!(f, "deployment/{deployment} is ready")
            }
            ProgressEvent::Scaled {
                deployment,
                replicas,
            } => write!(f, "deployment/{deployment} scaled to {replicas}"),
            ProgressEvent::Warning { message } => write!(f, "warning: {message}"),
            ProgressEvent::LogNotFollowed { .. } => {
                write!(f, "warning: {}", self.render(&Kubectl::BARE))
            }
            ProgressEvent::Retrying {
                what,
                attempt,
                delay,
                error,
            } => write!(
                f,
                "retrying to {what} in {:.1}s (attempt {} failed: {error})",
                delay.as_secs_f64(),
                attempt
            ),
        }
    }
}

impl ProgressEvent<'_> {
    /// The text of a warning whose advice is a `kubectl` command, with the run's flags; the
    /// other events render as their `Display` (without the `warning: ` prefix of warnings).
    pub fn render(&self, kubectl: &Kubectl) -> String {
        match self {
            ProgressEvent::LogNotFollowed {
                job,
                pod,
                namespace,
                error,
            } => format!(
                "cannot follow the log of pod {pod} of Job {job}: {error}; still waiting for the Job (`{}` shows its log)",
                kubectl.cmd(Some(namespace), &format!("logs -f job/{job}"))
            ),
            ProgressEvent::Warning { message } => (*message).to_owned(),
            other => other.to_string(),
        }
    }
}
