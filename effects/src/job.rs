//! Waiting for a Job: the Job and its pods as watched, its main container's log followed line by
//! line, pod-level failures that would otherwise make the wait hang, and the timeout of the step.
//!
//! In the migrate loop the Job and its pods are read from the [`crate::Observer`]'s watches
//! (the Jobs by selector, and the one pods watch of the run): the wait then costs its log stream
//! only. Without an observer, or where its watches do not cover them, the wait watches the Job
//! (by name) and its pods (by `job-name`) itself.
//!
//! Everything lives in the one future `await_job` returns (no spawned task), so dropping it
//! (Ctrl-C) closes the wait's watches and the log stream and leaves nothing behind but the Job,
//! which keeps running in the cluster as intended.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::pin::Pin;
use std::time::Duration;

use futures::stream::BoxStream;
use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams};
use kube::runtime::watcher::Event;
use tokio::time::{Instant, Sleep};
use uyuni_core::JobWait;
use uyuni_core::observed::JobState;
use uyuni_core::verdict::{
    Workload, container_ended, container_started, current_pod, ended_without_log, failure_reason,
    job_ended, main_container, pod_blocker, unschedulable,
};
use uyuni_core::{Kind, Object};

use crate::error::{EffectsError, Target, Verb};
use crate::observe::Observer;
use crate::progress::{Progress, ProgressEvent};
use crate::retry::{self, Disposition, MAX_ATTEMPTS, classify, report_retry};
use crate::watch::Source;

// The two delays below are mechanics of reading a log stream, not decisions about the step:
// they do not change when the step ends or how it ends (the step's own limit and log tail are
// fields of its `JobWait`, in the plan), only how the stream's races are ridden out.

/// After the Job ended, how long its log may take to arrive in full (the kubelet ends the log
/// stream and updates the pod status independently).
const LOG_DRAIN: Duration = Duration::from_secs(10);
/// A log stream the server ended while the container still seemed to run is reopened after
/// this (quietly: usually the pod status just lags behind the end of the log).
const LOG_REOPEN: Duration = Duration::from_millis(500);

/// The last `n` lines of a log text, without a trailing empty line.
pub fn tail_lines(log: &str, n: usize) -> Vec<String> {
    let lines: Vec<&str> = log.lines().collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].iter().map(|l| (*l).to_owned()).collect()
}

/// Everything `await_job` needs, borrowed from the step.
pub(crate) struct JobWaitContext<'a> {
    pub client: &'a kube::Client,
    pub namespace: &'a str,
    pub step: &'a str,
    pub job: &'a str,
    pub wait: JobWait,
    pub progress: &'a dyn Progress,
    /// Whose watches to read, in the migrate loop.
    pub observer: Option<&'a Observer>,
    /// The resourceVersion the step wrote of the Job, which the observer's store must hold
    /// before the wait reads it.
    pub version: Option<&'a str>,
}

/// One item of a followed log.
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub enum LogChunk {
    Line(String),
    OpenFailed(kube::Error),
    ReadFailed(std::io::Error),
}

/// Follows the log of one container, reopening it after interruptions and skipping the lines
/// already shown.
struct LogFollower {
    api: Api<Pod>,
    pod: String,
    container: String,
    stream: Option<BoxStream<'static, LogChunk>>,
    /// Lines shown so far.
    shown: usize,
    /// Lines of a reopened stream that were shown before.
    to_skip: usize,
    failures: u32,
    done: bool,
    gave_up: bool,
    /// The stream ended while the pod's status still showed the container running; a reopen
    /// is scheduled, and is made at once when the status catches up.
    awaiting_status: bool,
}

enum LogStep {
    Line(String),
    /// The stream ended cleanly.
    End,
    Failed(Disposition, String),
}

impl LogFollower {
    fn new(api: Api<Pod>, pod: &str, container: &str) -> LogFollower {
        let mut follower = LogFollower {
            api,
            pod: pod.to_owned(),
            container: container.to_owned(),
            stream: None,
            shown: 0,
            to_skip: 0,
            failures: 0,
            done: false,
            gave_up: false,
            awaiting_status: false,
        };
        follower.open(Duration::ZERO);
        follower
    }

    fn open(&mut self, delay: Duration) {
        self.awaiting_status = false;
        let api = self.api.clone();
        let pod = self.pod.clone();
        let params = LogParams {
            container: Some(self.container.clone()),
            follow: true,
            ..LogParams::default()
        };
        self.to_skip = self.shown;
        let stream = futures::stream::once(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            api.log_stream(&pod, &params).await
        })
        .flat_map(|opened| match opened {
            Ok(reader) => lines(Box::pin(reader)).left_stream(),
            Err(err) => futures::stream::iter([LogChunk::OpenFailed(err)]).right_stream(),
        });
        self.stream = Some(stream.boxed());
    }

    /// The next thing from the stream; pending while there is none.
    async fn next(&mut self) -> LogStep {
        loop {
            let Some(stream) = self.stream.as_mut() else {
                return futures::future::pending().await;
            };
            match stream.next().await {
                Some(LogChunk::Line(line)) if self.to_skip > 0 => {
                    self.to_skip -= 1;
                    drop(line);
                }
                Some(LogChunk::Line(line)) => {
                    self.shown += 1;
                    self.failures = 0;
                    return LogStep::Line(line);
                }
                Some(LogChunk::OpenFailed(err)) => {
                    self.stream = None;
                    return LogStep::Failed(classify(&err), err.to_string());
                }
                Some(LogChunk::ReadFailed(err)) if retry::is_timeout(&err) => {
                    // A quiet log outlived the read timeout: reopen at once, skipping what was
                    // shown, without counting it as a failure.
                    tracing::debug!(pod = %self.pod, "quiet log stream timed out; reopening");
                    self.open(Duration::ZERO);
                }
                Some(LogChunk::ReadFailed(err)) => {
                    self.stream = None;
                    return LogStep::Failed(Disposition::Retry { after: None }, err.to_string());
                }
                None => {
                    self.stream = None;
                    return LogStep::End;
                }
            }
        }
    }

    fn finished(&self) -> bool {
        self.done || self.gave_up
    }
}

/// The lines of a log as they arrive; invalid UTF-8 is replaced, not fatal (logs are for people).
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn lines<R>(reader: Pin<Box<R>>) -> impl futures::Stream<Item = LogChunk> + Send + 'static
where
    R: futures::AsyncBufRead + Send + 'static,
{
    futures::stream::unfold(Some(reader), |state| async move {
        let mut reader = state?;
        let mut buf = Vec::new();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) => None,
            Ok(_) => {
                if buf.last() == Some(&b'\n') {
                    buf.pop();
                }
                if buf.last() == Some(&b'\r') {
                    buf.pop();
                }
                let line = String::from_utf8_lossy(&buf).into_owned();
                Some((LogChunk::Line(line), Some(reader)))
            }
            Err(err) => Some((LogChunk::ReadFailed(err), None)),
        }
    })
}

/// What the wait has seen so far.
struct Seen {
    job: Option<Job>,
    job_in_init: bool,
    pods: BTreeMap<String, Pod>,
    /// Every pod seen, deleted ones included.
    ever: BTreeSet<String>,
    /// The Job was seen before it ended (not only ended, as when awaited after its end, when
    /// its pods may be long gone).
    saw_running: bool,
    pods_listed: bool,
    phases: BTreeMap<String, String>,
    warned: BTreeSet<String>,
    /// The last lines shown, for the error when reading the tail afterwards fails.
    recent: VecDeque<String>,
}

impl Seen {
    /// The pod the Job runs now; see [`current_pod`].
    fn newest_pod(&self) -> Option<&Pod> {
        current_pod(self.pods.values())
    }

    /// Whether the pods seen are all the pods the Job's status counts. The Job and its pods
    /// arrive on two watches, in no set order: a Job seen ended before its pod was seen has a
    /// log coming still.
    fn every_pod_seen(&self) -> bool {
        let counted = self
            .job
            .as_ref()
            .and_then(|j| j.status.as_ref())
            .map_or(0, |s| {
                s.active.unwrap_or(0) + s.succeeded.unwrap_or(0) + s.failed.unwrap_or(0)
            });
        usize::try_from(counted).unwrap_or(0) <= self.ever.len()
    }
}

async fn sleep_opt(sleep: &mut Option<Pin<Box<Sleep>>>) {
    match sleep.as_mut() {
        Some(s) => s.await,
        None => futures::future::pending().await,
    }
}

/// A Job as last seen when it ended, and its newest pod as seen then (its containers' final
/// states: an inspection's report is its termination message).
pub(crate) struct Ended {
    pub job: Option<Job>,
    pub pod: Option<Pod>,
}

/// Waits until the Job ends, streaming its log; see the module documentation. Returns the Job
/// as last seen (ended).
pub(crate) async fn await_job(ctx: JobWaitContext<'_>) -> Result<Ended, EffectsError> {
    let JobWaitContext {
        client,
        namespace,
        step,
        job: name,
        wait,
        progress,
        observer,
        version,
    } = ctx;
    let timeout = wait.timeout_seconds.map(Duration::from_secs);
    progress.event(ProgressEvent::WaitingForJob {
        job: name,
        namespace,
        timeout,
    });
    let started = Instant::now();
    let mut deadline: Option<Pin<Box<Sleep>>> =
        timeout.map(|t| Box::pin(tokio::time::sleep_until(started + t)));
    let mut drain: Option<Pin<Box<Sleep>>> = None;

    let jobs_api: Api<Job> = Api::namespaced(client.clone(), namespace);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let pod_selector = format!("job-name={name}");
    let (job_view, pods_view) = match observer {
        Some(observer) => {
            match observer
                .shared(Kind::Job, namespace, name, version, as_job)
                .await
            {
                Some(shared) => {
                    let template = shared.current.spec.as_ref().map(|s| &s.template);
                    let pods = observer.shared_pods(namespace, template, pod_selector.clone());
                    (Some(shared.view), pods)
                }
                None => (None, None),
            }
        }
        None => (None, None),
    };
    tracing::debug!(
        job = name,
        shared_job = job_view.is_some(),
        shared_pods = pods_view.is_some(),
        "waiting"
    );
    // The own watches request nothing unless they are read: where a view serves, never.
    let mut jobs = Source::named(
        job_view,
        jobs_api,
        name,
        Target::named("job", name, Some(namespace)),
    );
    let mut pods = Source::pods(pods_view, pods_api.clone(), &pod_selector, namespace);
    let mut seen = Seen {
        job: None,
        job_in_init: false,
        pods: BTreeMap::new(),
        ever: BTreeSet::new(),
        saw_running: false,
        pods_listed: false,
        phases: BTreeMap::new(),
        warned: BTreeSet::new(),
        recent: VecDeque::new(),
    };
    let mut follower: Option<LogFollower> = None;
    let mut outcome: Option<JobState> = None;
    let tail_keep = usize::try_from(wait.log_tail_lines).unwrap_or(usize::MAX);

    loop {
        if let Some(state) = outcome {
            let log_finished = follower.as_ref().is_some_and(LogFollower::finished);
            // No pod, or only pods that ended without ever starting their container (a Job
            // past its deadline while Pending): no log is coming.
            let no_log = follower.is_none()
                && seen.pods_listed
                && (!seen.saw_running || seen.every_pod_seen())
                && seen.pods.values().all(ended_without_log);
            if log_finished || no_log {
                finish(client, namespace, step, name, wait, state, &seen, progress).await?;
                return Ok(Ended {
                    job: seen.job.clone(),
                    pod: seen.newest_pod().cloned(),
                });
            }
        }
        tokio::select! {
            () = sleep_opt(&mut deadline) => {
                return Err(EffectsError::JobTimeout {
                    step: step.to_owned(),
                    job: name.to_owned(),
                    namespace: namespace.to_owned(),
                    waited: started.elapsed(),
                });
            }
            () = sleep_opt(&mut drain) => {
                tracing::debug!(job = name, "log did not end in time after the Job ended");
                if let Some(state) = outcome {
                    finish(client, namespace, step, name, wait, state, &seen, progress).await?;
                return Ok(Ended { job: seen.job.clone(), pod: seen.newest_pod().cloned() });
                }
            }
            event = jobs.next(progress) => {
                match event? {
                    Event::Init => seen.job_in_init = false,
                    Event::InitApply(job) | Event::Apply(job) => {
                        seen.job_in_init = true;
                        seen.job = Some(job);
                    }
                    Event::InitDone if !seen.job_in_init => {
                        return Err(if seen.job.is_some() {
                            EffectsError::JobDeleted { step: step.to_owned(), job: name.to_owned(), namespace: namespace.to_owned() }
                        } else {
                            EffectsError::JobNotFound { step: step.to_owned(), job: name.to_owned(), namespace: namespace.to_owned() }
                        });
                    }
                    Event::InitDone => {}
                    Event::Delete(_) => {
                        return Err(EffectsError::JobDeleted { step: step.to_owned(), job: name.to_owned(), namespace: namespace.to_owned() });
                    }
                }
                if seen.job.is_some() && job_ended(seen.job.as_ref()).is_none() {
                    seen.saw_running = true;
                }
                if outcome.is_none()
                    && let Some(state) = job_ended(seen.job.as_ref())
                {
                    tracing::debug!(job = name, ?state, "Job ended");
                    outcome = Some(state);
                    drain = Some(Box::pin(tokio::time::sleep(LOG_DRAIN)));
                    // The deadline is for the Job, not for reading the rest of its log.
                    deadline = None;
                }
            }
            event = pods.next(progress) => {
                match event? {
                    Event::Init => {}
                    Event::InitDone => seen.pods_listed = true,
                    Event::InitApply(pod) | Event::Apply(pod) => {
                        let pod_name = pod.metadata.name.clone().unwrap_or_default();
                        if let Some(blocker) = pod_blocker(&pod, Workload::Job) {
                            return Err(EffectsError::PodCannotStart {
                                step: step.to_owned(),
                                job: name.to_owned(),
                                namespace: namespace.to_owned(),
                                pod: pod_name,
                                container: blocker.container,
                                reason: blocker.reason,
                                message: blocker.message,
                            });
                        }
                        observe_pod(name, &pod_name, &pod, &mut seen, progress);
                        status_caught_up(&pod, &mut follower);
                        seen.ever.insert(pod_name.clone());
                        seen.pods.insert(pod_name, pod);
                    }
                    Event::Delete(pod) => {
                        if let Some(pod_name) = &pod.metadata.name {
                            seen.pods.remove(pod_name);
                        }
                    }
                }
                follow_newest(&pods_api, &seen, &mut follower);
            }
            step_result = async {
                match follower.as_mut() {
                    Some(f) => f.next().await,
                    None => futures::future::pending().await,
                }
            } => {
                if let Some(f) = follower.as_mut() {
                    handle_log(name, namespace, f, step_result, &seen.pods, tail_keep, &mut seen.recent, progress);
                    follow_newest(&pods_api, &seen, &mut follower);
                }
            }
        }
    }
}

fn as_job(object: &Object) -> Option<Job> {
    match object {
        Object::Job(job) => Some(job.clone()),
        _ => None,
    }
}

/// Phase changes and scheduling trouble of a pod, as events.
fn observe_pod(job: &str, pod_name: &str, pod: &Pod, seen: &mut Seen, progress: &dyn Progress) {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".to_owned());
    if seen.phases.get(pod_name) != Some(&phase) {
        progress.event(ProgressEvent::PodPhase {
            job,
            pod: pod_name,
            phase: &phase,
        });
        seen.phases.insert(pod_name.to_owned(), phase);
    }
    if let Some(message) = unschedulable(pod) {
        let message = format!(
            "pod {pod_name} of Job {job} cannot be scheduled yet: {message}; still waiting (check storage classes and node resources)"
        );
        if seen.warned.insert(message.clone()) {
            progress.event(ProgressEvent::Warning { message: &message });
        }
    }
}

/// A pod's status now shows the followed container ended, after its log stream did: read the
/// rest of the log now rather than after the reopen's delay (it ends at once, the container
/// being done), so that the wait ends as soon as the cluster says so.
fn status_caught_up(pod: &Pod, follower: &mut Option<LogFollower>) {
    let Some(f) = follower.as_mut() else { return };
    if f.awaiting_status
        && pod.metadata.name.as_deref() == Some(f.pod.as_str())
        && container_ended(pod, &f.container)
    {
        f.open(Duration::ZERO);
    }
}

/// Starts following the newest pod whose main container has started, once the previous one is
/// done with.
fn follow_newest(api: &Api<Pod>, seen: &Seen, follower: &mut Option<LogFollower>) {
    let Some(pod) = seen.newest_pod() else { return };
    let Some(pod_name) = pod.metadata.name.as_deref() else {
        return;
    };
    let Some(container) = main_container(pod) else {
        return;
    };
    if let Some(current) = follower.as_ref()
        && (current.pod == pod_name || !current.finished())
    {
        return;
    }
    if container_started(pod, container) {
        *follower = Some(LogFollower::new(api.clone(), pod_name, container));
    }
}

// The wait's state, borrowed piecewise from `Seen` so the follower can be borrowed mutably.
#[allow(clippy::too_many_arguments)]
fn handle_log(
    job: &str,
    namespace: &str,
    follower: &mut LogFollower,
    step: LogStep,
    pods: &BTreeMap<String, Pod>,
    tail_keep: usize,
    recent: &mut VecDeque<String>,
    progress: &dyn Progress,
) {
    match step {
        LogStep::Line(line) => {
            progress.event(ProgressEvent::JobLog {
                job,
                pod: &follower.pod,
                line: &line,
            });
            if tail_keep > 0 {
                if recent.len() == tail_keep {
                    recent.pop_front();
                }
                recent.push_back(line);
            }
        }
        LogStep::End => {
            let terminated = pods
                .get(&follower.pod)
                .is_some_and(|p| container_ended(p, &follower.container));
            if terminated {
                follower.done = true;
            } else {
                // Either the status lags behind the end of the log, or the server ended the
                // stream early: reading again (skipping what was shown) is right in both cases.
                // The status usually follows within milliseconds: the reopen is made then
                // (`status_caught_up`), or after LOG_REOPEN at the latest.
                follower.open(LOG_REOPEN);
                follower.awaiting_status = true;
            }
        }
        LogStep::Failed(disposition, error) => {
            follower.failures += 1;
            let target = Target::named("pod", &follower.pod, None);
            if disposition == Disposition::Fail || follower.failures >= MAX_ATTEMPTS {
                follower.gave_up = true;
                let error = error.to_string();
                tracing::debug!(pod = %follower.pod, %job, %error, "log not followed");
                progress.event(ProgressEvent::LogNotFollowed {
                    job,
                    pod: &follower.pod,
                    namespace,
                    error: &error,
                });
            } else {
                let delay = retry::delay(disposition, follower.failures);
                report_retry(
                    progress,
                    Verb::Log,
                    &target,
                    follower.failures,
                    delay,
                    &error,
                );
                follower.open(delay);
            }
        }
    }
}

/// The Job ended: success, or the failure with the tail of its log.
#[allow(clippy::too_many_arguments)]
async fn finish(
    client: &kube::Client,
    namespace: &str,
    step: &str,
    name: &str,
    wait: JobWait,
    state: JobState,
    seen: &Seen,
    progress: &dyn Progress,
) -> Result<(), EffectsError> {
    let succeeded = state == JobState::Succeeded;
    progress.event(ProgressEvent::JobFinished {
        job: name,
        succeeded,
    });
    if succeeded {
        return Ok(());
    }
    let pod = seen.newest_pod();
    let reason = seen
        .job
        .as_ref()
        .map(|job| failure_reason(job, pod))
        .unwrap_or_else(|| "the Job reports failure".to_owned());
    let log_tail = match pod {
        Some(pod) if wait.log_tail_lines > 0 => {
            read_tail(client, namespace, pod, wait.log_tail_lines, progress)
                .await
                .unwrap_or_else(|err| {
                    tracing::debug!(%err, "reading the log tail failed; using the lines seen");
                    seen.recent.iter().cloned().collect()
                })
        }
        _ => Vec::new(),
    };
    Err(EffectsError::JobFailed {
        step: step.to_owned(),
        job: name.to_owned(),
        namespace: namespace.to_owned(),
        reason,
        log_tail,
    })
}

async fn read_tail(
    client: &kube::Client,
    namespace: &str,
    pod: &Pod,
    lines: u32,
    progress: &dyn Progress,
) -> Result<Vec<String>, EffectsError> {
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params = LogParams {
        container: main_container(pod).map(str::to_owned),
        tail_lines: Some(i64::from(lines)),
        ..LogParams::default()
    };
    let target = Target::named("pod", &pod_name, Some(namespace));
    let text = retry::with_retry(progress, Verb::Log, &target, || {
        api.logs(&pod_name, &params)
    })
    .await?;
    Ok(tail_lines(&text, lines as usize))
}
