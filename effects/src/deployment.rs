//! Waiting for a Deployment, and scaling one: the Deployment and its pods as watched, with the
//! failures that would otherwise make the wait hang (image pulls, crash loops, missing Secrets,
//! pods no node can take) ending it with the reason (reference §7.7 R, D38).
//!
//! In the migrate loop both are read from the [`crate::Observer`]'s watches, caught up with what
//! the run wrote: no request. Without an observer, or where its watches do not cover them, the
//! wait reads the Deployment and watches it and its pods itself.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, LogParams, Patch, PatchParams};
use kube::runtime::watcher::Event;
use tokio::time::Instant;
use uyuni_core::observed::{deployment_ready, deployment_stopped};
use uyuni_core::plan::DeploymentWait;
use uyuni_core::verdict::{
    UNSCHEDULABLE, Workload, hint, pod_blocker, rollout_stalled, unschedulable,
};
use uyuni_core::{Kind, Object};

use crate::error::{EffectsError, Target, Verb};
use crate::job::tail_lines;
use crate::observe::Observer;
use crate::progress::{Progress, ProgressEvent};
use crate::retry::with_retry;
use crate::watch::{Source, View};

fn short_state(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    let waiting = status
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .find_map(|cs| cs.state.as_ref()?.waiting.as_ref()?.reason.clone());
    let phase = status
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "Pending".to_owned());
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    match (waiting, ready) {
        (_, true) => format!("{phase}, ready"),
        (Some(reason), false) => format!("{phase} ({reason})"),
        (None, false) => phase,
    }
}

fn as_deployment(object: &Object) -> Option<Deployment> {
    match object {
        Object::Deployment(d) => Some(d.clone()),
        _ => None,
    }
}

/// What the wait waits for.
#[derive(Clone, Copy)]
enum Goal {
    Ready,
    Stopped,
}

fn reached(goal: Goal, deployment: &Deployment) -> bool {
    match goal {
        Goal::Ready => deployment_ready(deployment),
        Goal::Stopped => deployment_stopped(deployment),
    }
}

/// The last `lines` lines of the crashed container's previous log (the current one, when the
/// kubelet has none yet).
async fn previous_log(api: &Api<Pod>, pod: &str, container: &str, lines: u32) -> Vec<String> {
    if lines == 0 {
        return Vec::new();
    }
    for previous in [true, false] {
        let params = LogParams {
            container: Some(container.to_owned()),
            previous,
            tail_lines: Some(i64::from(lines)),
            ..LogParams::default()
        };
        if let Ok(text) = api.logs(pod, &params).await
            && !text.is_empty()
        {
            return tail_lines(&text, lines as usize);
        }
    }
    Vec::new()
}

pub(crate) struct DeploymentWaitContext<'a> {
    pub client: &'a kube::Client,
    pub namespace: &'a str,
    pub step: &'a str,
    pub deployment: &'a str,
    pub wait: DeploymentWait,
    pub progress: &'a dyn Progress,
    /// Whose watches to read, in the migrate loop.
    pub observer: Option<&'a Observer>,
}

/// Waits until the Deployment is ready; see the module documentation. Returns the
/// resourceVersion of the Deployment as seen ready.
pub(crate) async fn await_ready(
    ctx: DeploymentWaitContext<'_>,
) -> Result<Option<String>, EffectsError> {
    ctx.progress.event(ProgressEvent::WaitingForDeployment {
        deployment: ctx.deployment,
        namespace: ctx.namespace,
        timeout: ctx.wait.timeout_seconds.map(Duration::from_secs),
    });
    let version = watch_until(&ctx, Goal::Ready, None).await?;
    ctx.progress.event(ProgressEvent::DeploymentReady {
        deployment: ctx.deployment,
    });
    Ok(version)
}

/// Sets the replicas (a merge patch of `spec.replicas` only: the rest of the object stays as
/// applied) and waits until the Deployment has them.
pub(crate) async fn scale(
    ctx: DeploymentWaitContext<'_>,
    replicas: i32,
    restarted_at: Option<&str>,
    hardened: Option<&Deployment>,
) -> Result<Option<String>, EffectsError> {
    let api: Api<Deployment> = Api::namespaced(ctx.client.clone(), ctx.namespace);
    let target = Target::named("deployment", ctx.deployment, Some(ctx.namespace));
    let mut patch = serde_json::json!({"spec": {"replicas": replicas}});
    // The whole template the plan gives (the live one with the pod security settings): a
    // merge patch replaces the containers list as a whole, and this one is the live list with
    // fields added, so nothing of it is lost.
    if let Some(h) = hardened {
        if let Some(template) = h.spec.as_ref().map(|s| &s.template) {
            patch["spec"]["template"] = serde_json::to_value(template).unwrap_or_default();
        }
        if let Some(annotations) = &h.metadata.annotations {
            patch["metadata"] = serde_json::json!({"annotations": annotations});
        }
    }
    if let Some(at) = restarted_at {
        patch["spec"]["template"]["metadata"]["annotations"]
            [uyuni_core::labels::RESTARTED_AT_ANNOTATION] = serde_json::json!(at);
    }
    let params = PatchParams::default();
    let merge = Patch::Merge(&patch);
    let patched = with_retry(ctx.progress, Verb::Scale, &target, || {
        api.patch(ctx.deployment, &params, &merge)
    })
    .await;
    let written = match patched {
        Err(EffectsError::Api { source, .. }) if matches!(&*source, kube::Error::Api(s) if s.code == 404) =>
        {
            return Err(EffectsError::DeploymentNotFound {
                step: ctx.step.to_owned(),
                deployment: ctx.deployment.to_owned(),
                namespace: ctx.namespace.to_owned(),
            });
        }
        other => other?.metadata.resource_version,
    };
    let goal = if replicas == 0 {
        Goal::Stopped
    } else {
        Goal::Ready
    };
    let version = watch_until(&ctx, goal, written.as_deref()).await?;
    ctx.progress.event(ProgressEvent::Scaled {
        deployment: ctx.deployment,
        replicas,
    });
    Ok(version)
}

/// Watches until the Deployment reaches `goal`; returns its resourceVersion then. `written`:
/// the version the step just wrote, which an observer's store must hold before it is read.
async fn watch_until(
    ctx: &DeploymentWaitContext<'_>,
    goal: Goal,
    written: Option<&str>,
) -> Result<Option<String>, EffectsError> {
    let DeploymentWaitContext {
        client,
        namespace,
        step,
        deployment: name,
        wait,
        progress,
        observer,
    } = *ctx;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let what = Target::named("deployment", name, Some(namespace));
    let not_found = || EffectsError::DeploymentNotFound {
        step: step.to_owned(),
        deployment: name.to_owned(),
        namespace: namespace.to_owned(),
    };
    let shared = match observer {
        Some(o) => {
            o.shared(Kind::Deployment, namespace, name, written, as_deployment)
                .await
        }
        None => None,
    };
    let (current, deployment_view) = match shared {
        Some(shared) => (shared.current, Some(shared.view)),
        None => (
            with_retry(progress, Verb::Get, &what, || deployments.get_opt(name))
                .await?
                .ok_or_else(not_found)?,
            None,
        ),
    };
    if reached(goal, &current) {
        return Ok(current.metadata.resource_version);
    }
    let selector = current
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();

    let started = Instant::now();
    let deadline = wait
        .timeout_seconds
        .map(|t| started + Duration::from_secs(t));
    let template = current.spec.as_ref().map(|s| &s.template);
    let pods_view: Option<View<'_, Pod>> = match observer {
        Some(o) if deployment_view.is_some() && !selector.is_empty() => {
            o.shared_pods(namespace, template, selector.clone())
        }
        _ => None,
    };
    tracing::debug!(
        deployment = name,
        shared_deployment = deployment_view.is_some(),
        shared_pods = pods_view.is_some(),
        "waiting"
    );
    // The own watches request nothing unless they are read: where a view serves, never.
    let mut dep_stream = Source::named(deployment_view, deployments, name, what.clone());
    let mut pod_stream = Source::pods(pods_view, pods_api.clone(), &selector, namespace);
    let mut pods: BTreeMap<String, Pod> = BTreeMap::new();
    let mut states: BTreeMap<String, String> = BTreeMap::new();
    let mut unschedulable_since: BTreeMap<String, Instant> = BTreeMap::new();
    // How often the unschedulable grace (the plan's) is checked: the resolution of that check,
    // not a limit of its own.
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    let fail = |pod: Option<String>, reason: String, log_tail: Vec<String>, hint: &'static str| {
        EffectsError::DeploymentFailed {
            step: step.to_owned(),
            deployment: name.to_owned(),
            namespace: namespace.to_owned(),
            pod,
            reason,
            log_tail,
            hint,
        }
    };
    loop {
        let sleep_deadline = crate::watch::until(deadline);
        tokio::select! {
            () = sleep_deadline => {
                return Err(EffectsError::DeploymentTimeout {
                    step: step.to_owned(),
                    deployment: name.to_owned(),
                    namespace: namespace.to_owned(),
                    waited: started.elapsed(),
                });
            }
            _ = tick.tick() => {
                if matches!(goal, Goal::Ready) {
                    let stuck = unschedulable_since
                        .iter()
                        .find(|(_, since)| since.elapsed() >= Duration::from_secs(wait.unschedulable_grace_seconds))
                        .map(|(pod, _)| pod.clone());
                    if let Some(pod) = stuck {
                        let message = pods.get(&pod).and_then(unschedulable).unwrap_or_default();
                        return Err(fail(Some(pod), format!("{UNSCHEDULABLE}: {message}"), Vec::new(), hint(UNSCHEDULABLE)));
                    }
                }
            }
            event = dep_stream.next(progress) => {
                match event? {
                    Event::Apply(d) | Event::InitApply(d) => {
                        if reached(goal, &d) {
                            return Ok(d.metadata.resource_version);
                        }
                        if matches!(goal, Goal::Ready)
                            && let Some(reason) = rollout_stalled(&d)
                        {
                            return Err(fail(None, reason, Vec::new(), hint("")));
                        }
                    }
                    Event::Delete(_) => return Err(not_found()),
                    Event::Init | Event::InitDone => {}
                }
            }
            event = pod_stream.next(progress) => {
                match event? {
                    Event::Apply(pod) | Event::InitApply(pod) => {
                        let pod_name = pod.metadata.name.clone().unwrap_or_default();
                        if pod.metadata.deletion_timestamp.is_some() {
                            pods.remove(&pod_name);
                            unschedulable_since.remove(&pod_name);
                            continue;
                        }
                        let state = short_state(&pod);
                        if states.get(&pod_name) != Some(&state) {
                            progress.event(ProgressEvent::DeploymentPod { deployment: name, pod: &pod_name, state: &state });
                            states.insert(pod_name.clone(), state);
                        }
                        if matches!(goal, Goal::Ready) {
                            if let Some(blocker) = pod_blocker(&pod, Workload::Deployment) {
                                let log_tail = if blocker.crash_loop() {
                                    previous_log(&pods_api, &pod_name, &blocker.container, wait.log_tail_lines).await
                                } else {
                                    Vec::new()
                                };
                                return Err(fail(Some(pod_name), blocker.summary(), log_tail, hint(&blocker.reason)));
                            }
                            if unschedulable(&pod).is_some() {
                                unschedulable_since.entry(pod_name.clone()).or_insert_with(Instant::now);
                            } else {
                                unschedulable_since.remove(&pod_name);
                            }
                        }
                        pods.insert(pod_name, pod);
                    }
                    Event::Delete(pod) => {
                        if let Some(n) = &pod.metadata.name {
                            pods.remove(n);
                            unschedulable_since.remove(n);
                        }
                    }
                    Event::Init | Event::InitDone => {}
                }
            }
        }
    }
}
