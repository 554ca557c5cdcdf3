//! The pods bound to our Node, played as `uyuni-sim` plays them (`controllers.rs`): Job pods by
//! the scenario's script for the owner Job's step and attempt, Deployment pods by the script
//! for the Deployment that owns their ReplicaSet, every other pod ready after
//! `timing.deploymentReadyMs`. No container runs: states, exit codes and logs come from the
//! scenario, and readiness too (no probe is run). Pods annotated `uyuni.test/execute: "true"`
//! are the exception: their commands run (`Player::execute`, see `exec`), through the same
//! status writes and log store.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};

use super::exec;
use super::logs::LogStore;
use super::node::now_rfc3339;
use crate::scenario::{
    DeploymentOutcome, DeploymentScript, JobOutcome, JobScript, Scenario, SideEffect,
};

/// The annotation our plugin puts on each Job: which migration step it runs.
pub const STEP_ANNOTATION: &str = "kubectl-uyuni.io/step";

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
}

/// A container's state, as `containerStatuses[].state` says it.
#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Waiting {
        reason: String,
        message: Option<String>,
    },
    Running {
        started_at: String,
    },
    Terminated {
        exit_code: i32,
        reason: String,
        started_at: String,
        finished_at: String,
        /// Why it could not start (kubelet's StartError), for instance.
        message: Option<String>,
    },
}

impl State {
    fn creating() -> State {
        State::Waiting {
            reason: "ContainerCreating".to_owned(),
            message: None,
        }
    }

    fn to_json(&self) -> Value {
        match self {
            State::Waiting { reason, message } => {
                let mut w = json!({"reason": reason});
                if let Some(m) = message {
                    w["message"] = json!(m);
                }
                json!({"waiting": w})
            }
            State::Running { started_at } => json!({"running": {"startedAt": started_at}}),
            State::Terminated {
                exit_code,
                reason,
                started_at,
                finished_at,
                message,
            } => {
                let mut t = json!({
                    "exitCode": exit_code, "reason": reason,
                    "startedAt": started_at, "finishedAt": finished_at,
                    "containerID": Value::Null,
                });
                if let Some(m) = message {
                    t["message"] = json!(m);
                }
                json!({"terminated": t})
            }
        }
    }
}

/// What of a pod the status is built from.
#[derive(Debug, Clone, Default)]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub service_account: String,
    /// `spec.restartPolicy` (Always when unset, the API's default).
    pub restart_policy: String,
    /// (name, image)
    pub containers: Vec<(String, String)>,
    pub init_containers: Vec<(String, String)>,
    pub readiness_gates: Vec<String>,
}

impl PodView {
    pub fn of(pod: &Pod) -> PodView {
        let spec = pod.spec.clone().unwrap_or_default();
        let pairs = |cs: &[k8s_openapi::api::core::v1::Container]| {
            cs.iter()
                .map(|c| (c.name.clone(), c.image.clone().unwrap_or_default()))
                .collect()
        };
        PodView {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            service_account: spec
                .service_account_name
                .clone()
                .unwrap_or_else(|| "default".to_owned()),
            restart_policy: spec
                .restart_policy
                .clone()
                .unwrap_or_else(|| "Always".to_owned()),
            containers: pairs(&spec.containers),
            init_containers: pairs(spec.init_containers.as_deref().unwrap_or_default()),
            readiness_gates: spec
                .readiness_gates
                .unwrap_or_default()
                .into_iter()
                .map(|g| g.condition_type)
                .collect(),
        }
    }

    fn first_container(&self) -> String {
        self.containers
            .first()
            .map(|c| c.0.clone())
            .unwrap_or_default()
    }
}

/// A stable 64-hex-digit id, as container runtimes give (`containerd://…`, `sha256:…`).
fn hex_id(parts: &[&str]) -> String {
    use std::hash::{Hash, Hasher};
    (0..4u8)
        .map(|i| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            (i, parts).hash(&mut h);
            format!("{:016x}", h.finish())
        })
        .collect()
}

/// The pod's conditions with the times they last changed: a transition time moves only when
/// the status does (ReplicaSet availability counts `minReadySeconds` from Ready's).
#[derive(Debug, Default, Clone)]
pub struct Conditions(BTreeMap<String, (bool, String)>);

impl Conditions {
    fn set(&mut self, kind: &str, value: bool, now: &str) {
        match self.0.get(kind) {
            Some((v, _)) if *v == value => {}
            _ => {
                self.0.insert(kind.to_owned(), (value, now.to_owned()));
            }
        }
    }
}

/// Everything one status write says.
#[derive(Debug, Clone)]
pub struct Snapshot<'a> {
    pub phase: &'a str,
    pub state: &'a State,
    pub ready: bool,
    pub pod_ip: Option<&'a str>,
    pub start_time: Option<&'a str>,
    pub restart_count: i32,
    pub last_state: Option<Value>,
    /// The init containers' states, in order (a missing one has not started); `None`: all
    /// completed when the pod started, as the scenario plays them.
    pub init: Option<&'a [State]>,
}

/// The strategic-merge patch of `pods/status` for `snap`. Conditions merge by `type`
/// (`PodStatus.Conditions` has patchMergeKey=type in upstream's `core/v1/types.go`), so the
/// scheduler's PodScheduled stays; container statuses are replaced whole.
pub fn status_patch(
    view: &PodView,
    snap: &Snapshot<'_>,
    conditions: &mut Conditions,
    now: &str,
) -> Value {
    let started = matches!(snap.state, State::Running { .. });
    let sandbox = snap.pod_ip.is_some();
    conditions.set("PodReadyToStartContainers", sandbox, now);
    // Initialized once every init container completed (`pkg/kubelet/status/generate.go`,
    // `GeneratePodInitializedCondition`).
    let initialized = snap.init.is_none_or(|states| {
        states.len() >= view.init_containers.len()
            && states
                .iter()
                .all(|s| matches!(s, State::Terminated { exit_code: 0, .. }))
    });
    conditions.set("Initialized", initialized, now);
    conditions.set("ContainersReady", snap.ready, now);
    conditions.set("Ready", snap.ready, now);
    // Readiness gates are met at once, as kwok's pod-create stage does: nothing here would
    // ever set them otherwise, and Ready would never come.
    for g in &view.readiness_gates {
        conditions.set(g, true, now);
    }
    let cond_json: Vec<Value> = conditions
        .0
        .iter()
        .map(|(kind, (v, t))| {
            let mut c = json!({"type": kind, "status": if *v { "True" } else { "False" }, "lastProbeTime": Value::Null, "lastTransitionTime": t});
            if !*v && (kind == "Ready" || kind == "ContainersReady") {
                c["reason"] = json!(if matches!(snap.state, State::Terminated { .. }) { "PodCompleted" } else { "ContainersNotReady" });
                let names: Vec<&str> = view.containers.iter().map(|c| c.0.as_str()).collect();
                c["message"] = json!(format!("containers with unready status: [{}]", names.join(" ")));
            }
            c
        })
        .collect();
    let has_id = !matches!(snap.state, State::Waiting { .. }) || snap.restart_count > 0;
    let container = |(name, image): &(String, String),
                     state: Value,
                     ready: bool,
                     started: bool,
                     restarts: i32,
                     last: Option<Value>| {
        let mut c = json!({
            "name": name,
            "image": image,
            "imageID": if has_id { format!("{image}@sha256:{}", hex_id(&[image])) } else { String::new() },
            "ready": ready,
            "started": started,
            "restartCount": restarts,
            "state": state,
            "lastState": last.unwrap_or_else(|| json!({})),
        });
        if has_id {
            let id = format!("containerd://{}", hex_id(&[&view.uid, name]));
            c["containerID"] = json!(id);
            if let Some(t) = c["state"].get_mut("terminated") {
                t["containerID"] = json!(id);
            }
        } else if let Some(t) = c["state"].get_mut("terminated") {
            t.as_object_mut().map(|m| m.remove("containerID"));
        }
        c
    };
    let statuses: Vec<Value> = view
        .containers
        .iter()
        .map(|c| {
            container(
                c,
                snap.state.to_json(),
                snap.ready,
                started,
                snap.restart_count,
                snap.last_state.clone(),
            )
        })
        .collect();
    // Init containers ran to completion before the main ones ("init containers first").
    let init: Vec<Value> = view
        .init_containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let t = match snap.init {
                None => State::Terminated {
                    exit_code: 0,
                    reason: "Completed".to_owned(),
                    started_at: snap.start_time.unwrap_or(now).to_owned(),
                    finished_at: snap.start_time.unwrap_or(now).to_owned(),
                    message: None,
                },
                Some(states) => states.get(i).cloned().unwrap_or_else(|| State::Waiting {
                    reason: "PodInitializing".to_owned(),
                    message: None,
                }),
            };
            let running = matches!(t, State::Running { .. });
            let mut s = container(c, t.to_json(), false, running, 0, None);
            if !matches!(t, State::Waiting { .. }) {
                let id = format!("containerd://{}", hex_id(&[&view.uid, &c.0]));
                s["containerID"] = json!(id);
                if let Some(term) = s["state"].get_mut("terminated") {
                    term["containerID"] = json!(id);
                }
                s["imageID"] = json!(format!("{}@sha256:{}", c.1, hex_id(&[&c.1])));
            } else {
                s["imageID"] = json!("");
                s.as_object_mut().map(|m| m.remove("containerID"));
            }
            s
        })
        .collect();
    let mut status = json!({
        "phase": snap.phase,
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "conditions": cond_json,
        "containerStatuses": statuses,
    });
    if !init.is_empty() {
        status["initContainerStatuses"] = json!(init);
    }
    if let Some(ip) = snap.pod_ip {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    if let Some(t) = snap.start_time {
        status["startTime"] = json!(t);
    }
    json!({"status": status})
}

/// The kubelet's message for a container stuck waiting, when the scenario gives none (the
/// same defaults as uyuni-sim's).
pub fn waiting_message(reason: &str, image: &str) -> String {
    match reason {
        "ImagePullBackOff" => format!("Back-off pulling image \"{image}\""),
        "CreateContainerConfigError" => "secret \"uyuni-migration-ssh\" not found".to_owned(),
        "CrashLoopBackOff" => "back-off 40s restarting failed container".to_owned(),
        other => other.to_owned(),
    }
}

/// What plays a pod.
enum Role {
    Job { job_name: String, script: JobScript },
    Deployment(DeploymentScript),
    Other,
}

/// A running command: its process group, and its exit code once it ended.
type Process = (u32, tokio::sync::watch::Receiver<Option<i32>>);

pub struct Player {
    pub node_name: String,
    /// The node's own credential: its pods, their status, their deletion.
    pub node: Client,
    /// Reads owner Jobs and ReplicaSets (the Node authorizer allows a node neither).
    pub director: Client,
    /// The director's configuration, to impersonate a pod's ServiceAccount for side effects.
    pub director_config: kube::Config,
    pub scenario: Scenario,
    pub logs: Arc<LogStore>,
    next_ip: AtomicU32,
    /// Jobs seen per "namespace/step", and each Job's attempt (by uid): uyuni-sim counts the
    /// Jobs created for a step the same way.
    attempts: Mutex<HashMap<String, usize>>,
    job_attempt: Mutex<HashMap<String, usize>>,
    playing: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    deleting: Mutex<HashSet<String>>,
    /// Where executed pods get their working directories and emptyDirs (`exec`).
    pub sandbox_dir: std::path::PathBuf,
    /// The processes of executed pods, by pod uid: (process group, its exit code once ended).
    processes: Mutex<HashMap<String, Vec<Process>>>,
}

impl Player {
    pub fn new(
        node_name: String,
        node: Client,
        director: Client,
        director_config: kube::Config,
        scenario: Scenario,
        logs: Arc<LogStore>,
        sandbox_dir: std::path::PathBuf,
    ) -> Player {
        Player {
            node_name,
            node,
            director,
            director_config,
            scenario,
            logs,
            next_ip: AtomicU32::new(2),
            attempts: Mutex::default(),
            job_attempt: Mutex::default(),
            playing: Mutex::default(),
            deleting: Mutex::default(),
            sandbox_dir,
            processes: Mutex::default(),
        }
    }

    /// Watches the pods bound to the node until the stream ends (never, short of shutdown).
    pub async fn run(self: Arc<Self>) {
        let pods: Api<Pod> = Api::all(self.node.clone());
        let config =
            watcher::Config::default().fields(&format!("spec.nodeName={}", self.node_name));
        let mut events = watcher::watcher(pods, config).default_backoff().boxed();
        while let Some(event) = events.next().await {
            match event {
                Ok(Event::Apply(pod) | Event::InitApply(pod)) => self.clone().seen(pod),
                Ok(Event::Delete(pod)) => self.gone(&pod),
                Ok(Event::Init | Event::InitDone) => {}
                Err(e) => tracing::warn!(
                    "watching the pods of node {}: {e} (retrying)",
                    self.node_name
                ),
            }
        }
    }

    fn seen(self: Arc<Self>, pod: Pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if pod.metadata.deletion_timestamp.is_some() {
            if lock(&self.deleting).insert(uid.clone()) {
                if let Some(task) = lock(&self.playing).remove(&uid) {
                    task.abort();
                }
                tokio::spawn(async move { self.terminate(pod).await });
            }
            return;
        }
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_default();
        if phase == "Succeeded" || phase == "Failed" {
            return;
        }
        let mut playing = lock(&self.playing);
        if playing.contains_key(&uid) {
            return;
        }
        let player = self.clone();
        let name = format!(
            "{}/{}",
            pod.metadata.namespace.as_deref().unwrap_or_default(),
            pod.metadata.name.as_deref().unwrap_or_default()
        );
        playing.insert(
            uid,
            tokio::spawn(async move {
                if let Err(e) = player.play(pod).await {
                    tracing::warn!("pod {name}: {e:#}");
                }
            }),
        );
    }

    fn gone(&self, pod: &Pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if let Some(task) = lock(&self.playing).remove(&uid) {
            task.abort();
        }
        lock(&self.deleting).remove(&uid);
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        self.logs.remove_pod(ns, name);
        if exec::wants_execution(pod) {
            let dir = exec::pod_dir(&self.sandbox_dir, ns, name, &uid);
            if let Err(e) = std::fs::remove_dir_all(&dir)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!("cannot remove the sandbox {}: {e}", dir.display());
            }
        }
    }

    /// A pod being deleted: its containers stop, then it goes for good (grace period 0, only
    /// this incarnation: precondition on its uid), as the kubelet's final delete does
    /// (`pkg/kubelet/status/status_manager.go`, `canBeDeleted` then `Delete` with
    /// `NewDeleteOptions(0)` and a UID precondition).
    async fn terminate(&self, pod: Pod) {
        let view = PodView::of(&pod);
        // The processes of an executed pod: SIGTERM, SIGKILL after the grace period.
        let grace = pod
            .metadata
            .deletion_grace_period_seconds
            .and_then(|g| u64::try_from(g).ok())
            .unwrap_or(30);
        let killed = self.stop_processes(&view.uid, grace).await;
        self.logs.finish_pod(&view.namespace, &view.name);
        let pods: Api<Pod> = Api::namespaced(self.node.clone(), &view.namespace);
        let status = pod.status.clone().unwrap_or_default();
        let running = status
            .container_statuses
            .as_deref()
            .unwrap_or_default()
            .iter()
            .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
        if running || killed.is_some() {
            let now = now_rfc3339();
            let started = status
                .start_time
                .as_ref()
                .map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string());
            // SIGTERM ends the (imaginary) process: 128 + 15; a real one says how it ended.
            let exit_code = killed.unwrap_or(143);
            let state = State::Terminated {
                exit_code,
                reason: exec::exit_reason(exit_code).to_owned(),
                started_at: started.clone().unwrap_or_else(|| now.clone()),
                finished_at: now.clone(),
                message: None,
            };
            let phase = status.phase.clone().unwrap_or_else(|| "Running".to_owned());
            let snap = Snapshot {
                phase: &phase,
                state: &state,
                ready: false,
                pod_ip: status.pod_ip.as_deref(),
                start_time: started.as_deref(),
                restart_count: 0,
                last_state: None,
                init: None,
            };
            let patch = status_patch(&view, &snap, &mut Conditions::default(), &now);
            let _ = pods
                .patch_status(
                    &view.name,
                    &PatchParams::default(),
                    &Patch::Strategic(patch),
                )
                .await;
        }
        let params = DeleteParams::default()
            .grace_period(0)
            .preconditions(Preconditions {
                uid: Some(view.uid.clone()),
                resource_version: None,
            });
        match pods.delete(&view.name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => tracing::warn!(
                "cannot delete pod {}/{} (it stays Terminating): {e}",
                view.namespace,
                view.name
            ),
        }
    }

    fn pod_ip(&self) -> String {
        let n = self.next_ip.fetch_add(1, Ordering::Relaxed);
        // 10.244.0.0/16, as kind's default pod subnet; skips .0 and .1 of each /24.
        format!("10.244.{}.{}", (n / 254) % 256, n % 254 + 1)
    }

    /// How long an executed pod waits before it runs a failed container (or init container)
    /// again, its back-off: the scenario's pod start in its namespace, half a second at least.
    fn executed_start_ms(&self, namespace: &str) -> u64 {
        self.scenario
            .in_namespace(namespace)
            .timing
            .pod_start_ms
            .max(500)
    }

    async fn role(&self, pod: &Pod) -> anyhow::Result<Role> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let owner = pod
            .metadata
            .owner_references
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|o| o.controller == Some(true))
            .cloned();
        let scenario = self.scenario.in_namespace(&ns);
        let timing = &scenario.timing;
        match owner {
            Some(o) if o.kind == "Job" => {
                let jobs: Api<Job> = Api::namespaced(self.director.clone(), &ns);
                let annotations = match jobs.get_opt(&o.name).await? {
                    Some(job) if job.metadata.uid.as_deref() == Some(o.uid.as_str()) => {
                        job.metadata.annotations.unwrap_or_default()
                    }
                    _ => Default::default(),
                };
                let step = annotations.get(STEP_ANNOTATION).cloned();
                let script = step.as_deref().and_then(|step| {
                    let attempt =
                        *lock(&self.job_attempt)
                            .entry(o.uid.clone())
                            .or_insert_with(|| {
                                let mut attempts = lock(&self.attempts);
                                let n = attempts.entry(format!("{ns}/{step}")).or_insert(0);
                                *n += 1;
                                *n - 1
                            });
                    scenario
                        .job_script(step, attempt)
                        .cloned()
                        .map(|script| script.for_job(&annotations))
                });
                let script = script.unwrap_or_else(|| JobScript {
                    duration_ms: timing.default_job_ms,
                    log: vec![format!("{} finished", step.as_deref().unwrap_or(&o.name))],
                    ..JobScript::default()
                });
                Ok(Role::Job {
                    job_name: o.name,
                    script,
                })
            }
            Some(o) if o.kind == "ReplicaSet" => {
                let sets: Api<ReplicaSet> = Api::namespaced(self.director.clone(), &ns);
                let deployment = sets.get_opt(&o.name).await?.and_then(|rs| {
                    rs.metadata
                        .owner_references
                        .unwrap_or_default()
                        .into_iter()
                        .find(|r| r.kind == "Deployment" && r.controller == Some(true))
                        .map(|r| r.name)
                });
                Ok(match deployment {
                    Some(d) => {
                        Role::Deployment(scenario.deployments.get(&d).cloned().unwrap_or_default())
                    }
                    None => Role::Other,
                })
            }
            _ => Ok(Role::Other),
        }
    }

    async fn play(self: Arc<Self>, pod: Pod) -> anyhow::Result<()> {
        let view = PodView::of(&pod);
        let pods: Api<Pod> = Api::namespaced(self.node.clone(), &view.namespace);
        let role = self.role(&pod).await?;
        let mut conditions = Conditions::default();
        let ip = self.pod_ip();
        let start_time = now_rfc3339();
        let write = |snap: Snapshot<'_>, conditions: &mut Conditions| {
            let patch = status_patch(&view, &snap, conditions, &now_rfc3339());
            let pods = pods.clone();
            let name = view.name.clone();
            async move {
                pods.patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
                    .await
                    .map(|_| ())
            }
        };
        // Scheduled: the sandbox is being made.
        self.logs
            .waiting(&view.namespace, &view.name, "ContainerCreating");
        let creating = State::creating();
        let executed = exec::wants_execution(&pod);
        write(
            Snapshot {
                phase: "Pending",
                state: &creating,
                ready: false,
                pod_ip: None,
                start_time: Some(&start_time),
                restart_count: 0,
                last_state: None,
                // Executed init containers have not run yet: the apiserver refuses a
                // terminated container that runs again under restartPolicy Never
                // (`ValidateContainerStateTransition`, pkg/apis/core/validation/validation.go).
                init: executed.then_some(&[]),
            },
            &mut conditions,
        )
        .await?;
        if executed {
            return self
                .execute(&pod, &view, &ip, &start_time, &mut conditions, &write)
                .await;
        }
        let timing = self.scenario.in_namespace(&view.namespace).timing.clone();
        let image = view
            .containers
            .first()
            .map(|c| c.1.clone())
            .unwrap_or_default();
        match role {
            Role::Job { job_name, script } => {
                sleep_ms(timing.pod_start_ms).await;
                if script.outcome == JobOutcome::Stuck {
                    self.logs
                        .waiting(&view.namespace, &view.name, &script.waiting_reason);
                    let state =
                        State::Waiting {
                            reason: script.waiting_reason.clone(),
                            message: Some(script.waiting_message.clone().unwrap_or_else(|| {
                                waiting_message(&script.waiting_reason, &image)
                            })),
                        };
                    write(
                        Snapshot {
                            phase: "Pending",
                            state: &state,
                            ready: false,
                            pod_ip: Some(&ip),
                            start_time: Some(&start_time),
                            restart_count: 0,
                            last_state: None,
                            init: None,
                        },
                        &mut conditions,
                    )
                    .await?;
                    return Ok(());
                }
                // restartPolicy OnFailure: a failed container is restarted in place (the Job
                // controller counts restarts against backoffLimit and deletes the pod past it);
                // Never (what our plugin writes): the pod fails.
                let restarts_on_failure = view.restart_policy == "OnFailure";
                let mut restart_count = 0;
                let mut last_state: Option<Value> = None;
                loop {
                    let started_at = now_rfc3339();
                    for (c, _) in &view.containers {
                        self.logs.start(&view.namespace, &view.name, c);
                    }
                    let running = State::Running {
                        started_at: started_at.clone(),
                    };
                    write(
                        Snapshot {
                            phase: "Running",
                            state: &running,
                            ready: true,
                            pod_ip: Some(&ip),
                            start_time: Some(&start_time),
                            restart_count,
                            last_state: last_state.clone(),
                            init: None,
                        },
                        &mut conditions,
                    )
                    .await?;
                    let (outcome, exit_code) = self.run_job_script(&view, &job_name, &script).await;
                    for (c, _) in &view.containers {
                        self.logs.finish(&view.namespace, &view.name, c);
                    }
                    let succeeded = outcome == JobOutcome::Succeed;
                    // What the script wrote to its termination log, which the kubelet copies
                    // into the container's terminated state.
                    let message = script
                        .termination_message
                        .as_ref()
                        .filter(|_| succeeded)
                        .map(|m| {
                            m.replace("$IMAGE_RELEASE", crate::scenario::image_release(&image))
                                .replace("$IMAGE_TAG", crate::scenario::image_tag(&image))
                                .replace("$IMAGE", &image)
                        });
                    let state = State::Terminated {
                        exit_code: if succeeded { 0 } else { exit_code },
                        reason: if succeeded { "Completed" } else { "Error" }.to_owned(),
                        started_at,
                        finished_at: now_rfc3339(),
                        message,
                    };
                    if !succeeded && restarts_on_failure {
                        // Back-off, then the same script again (kubelet waits 10 s, doubling;
                        // the scenario's pod start time stands in for it).
                        restart_count += 1;
                        last_state = Some(state.to_json());
                        let backoff = State::Waiting {
                            reason: "CrashLoopBackOff".to_owned(),
                            message: Some(waiting_message("CrashLoopBackOff", &image)),
                        };
                        write(
                            Snapshot {
                                phase: "Running",
                                state: &backoff,
                                ready: false,
                                pod_ip: Some(&ip),
                                start_time: Some(&start_time),
                                restart_count,
                                last_state: last_state.clone(),
                                init: None,
                            },
                            &mut conditions,
                        )
                        .await?;
                        sleep_ms(timing.pod_start_ms.max(500)).await;
                        continue;
                    }
                    let phase = if succeeded { "Succeeded" } else { "Failed" };
                    write(
                        Snapshot {
                            phase,
                            state: &state,
                            ready: false,
                            pod_ip: Some(&ip),
                            start_time: Some(&start_time),
                            restart_count,
                            last_state,
                            init: None,
                        },
                        &mut conditions,
                    )
                    .await?;
                    break;
                }
            }
            Role::Deployment(script) if script.outcome == DeploymentOutcome::Stuck => {
                sleep_ms(timing.pod_start_ms).await;
                let crash = script.waiting_reason == "CrashLoopBackOff";
                self.logs
                    .waiting(&view.namespace, &view.name, &script.waiting_reason);
                let state = State::Waiting {
                    reason: script.waiting_reason.clone(),
                    message: Some(
                        script
                            .waiting_message
                            .clone()
                            .unwrap_or_else(|| waiting_message(&script.waiting_reason, &image)),
                    ),
                };
                let now = now_rfc3339();
                let last = crash.then(|| json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now}}));
                if crash {
                    for (c, _) in &view.containers {
                        self.logs.start(&view.namespace, &view.name, c);
                    }
                }
                write(
                    Snapshot {
                        phase: if crash { "Running" } else { "Pending" },
                        state: &state,
                        ready: false,
                        pod_ip: Some(&ip),
                        start_time: Some(&start_time),
                        restart_count: if crash { 3 } else { 0 },
                        last_state: last,
                        init: None,
                    },
                    &mut conditions,
                )
                .await?;
            }
            Role::Deployment(script) => {
                sleep_ms(script.ready_after_ms.unwrap_or(timing.deployment_ready_ms)).await;
                self.run_ready(&view, &ip, &start_time, &mut conditions, &write)
                    .await?;
            }
            Role::Other => {
                sleep_ms(timing.deployment_ready_ms).await;
                self.run_ready(&view, &ip, &start_time, &mut conditions, &write)
                    .await?;
            }
        }
        Ok(())
    }

    async fn run_ready<W, F>(
        &self,
        view: &PodView,
        ip: &str,
        start_time: &str,
        conditions: &mut Conditions,
        write: &W,
    ) -> anyhow::Result<()>
    where
        W: Fn(Snapshot<'_>, &mut Conditions) -> F,
        F: std::future::Future<Output = Result<(), kube::Error>>,
    {
        for (c, _) in &view.containers {
            self.logs.start(&view.namespace, &view.name, c);
        }
        let running = State::Running {
            started_at: now_rfc3339(),
        };
        write(
            Snapshot {
                phase: "Running",
                state: &running,
                ready: true,
                pod_ip: Some(ip),
                start_time: Some(start_time),
                restart_count: 0,
                last_state: None,
                init: None,
            },
            conditions,
        )
        .await?;
        Ok(())
    }

    /// Logs and side effects over the script's duration; the outcome and exit code.
    async fn run_job_script(
        &self,
        view: &PodView,
        job_name: &str,
        script: &JobScript,
    ) -> (JobOutcome, i32) {
        let container = view.first_container();
        let lines: Vec<String> = script
            .log
            .iter()
            .map(|l| l.replace("$JOB_NAME", job_name))
            .collect();
        let slots = lines.len() as u64 + 1;
        let interval = script.duration_ms / slots;
        let mut elapsed = 0u64;
        let mut pending: Vec<SideEffect> = script.side_effects.clone();
        let mut outcome = script.outcome;
        let mut exit_code = script.exit_code;
        for line in lines {
            sleep_ms(interval).await;
            elapsed += interval;
            self.run_due_effects(
                view,
                job_name,
                &container,
                &mut pending,
                Some(elapsed),
                &mut outcome,
                &mut exit_code,
            )
            .await;
            self.logs
                .append(&view.namespace, &view.name, &container, &line);
        }
        sleep_ms(script.duration_ms.saturating_sub(elapsed)).await;
        self.run_due_effects(
            view,
            job_name,
            &container,
            &mut pending,
            Some(script.duration_ms),
            &mut outcome,
            &mut exit_code,
        )
        .await;
        if outcome == JobOutcome::Succeed {
            self.run_due_effects(
                view,
                job_name,
                &container,
                &mut pending,
                None,
                &mut outcome,
                &mut exit_code,
            )
            .await;
        }
        (outcome, exit_code)
    }

    /// A client acting as the pod's ServiceAccount, as the Job's script would with its mounted
    /// token: the user and groups the ServiceAccount token authenticator gives
    /// (`pkg/serviceaccount/util.go`, `UserInfo`; plus system:authenticated).
    fn as_service_account(&self, view: &PodView) -> Result<Client, kube::Error> {
        let mut config = self.director_config.clone();
        config.auth_info.impersonate = Some(format!(
            "system:serviceaccount:{}:{}",
            view.namespace, view.service_account
        ));
        config.auth_info.impersonate_groups = Some(vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{}", view.namespace),
            "system:authenticated".to_owned(),
        ]);
        Client::try_from(config)
    }

    /// Runs the side effects due at `elapsed` (or, with `None`, those without a time). A failed
    /// one fails the container (exit 1, the error in its log), as the failing `kubectl patch`
    /// of a real job script would.
    #[allow(clippy::too_many_arguments)]
    async fn run_due_effects(
        &self,
        view: &PodView,
        job_name: &str,
        container: &str,
        pending: &mut Vec<SideEffect>,
        elapsed: Option<u64>,
        outcome: &mut JobOutcome,
        exit_code: &mut i32,
    ) {
        let mut keep = Vec::new();
        for effect in std::mem::take(pending) {
            let SideEffect::PatchSecret(p) = &effect;
            let due = match (p.at_ms, elapsed) {
                (Some(at), Some(now)) => at <= now,
                (None, None) => true,
                _ => false,
            };
            if !due {
                keep.push(effect);
                continue;
            }
            let data: serde_json::Map<String, Value> = p
                .string_data
                .iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        json!(if v == "$JOB_NAME" {
                            job_name
                        } else {
                            v.as_str()
                        }),
                    )
                })
                .collect();
            let result = async {
                let client = self.as_service_account(view)?;
                let secrets: Api<Secret> = Api::namespaced(client, &view.namespace);
                let params = PatchParams {
                    field_manager: Some("uyuni-job".to_owned()),
                    ..PatchParams::default()
                };
                match secrets
                    .patch(&p.name, &params, &Patch::Merge(json!({"stringData": data})))
                    .await
                {
                    Err(kube::Error::Api(s)) if s.code == 404 && p.create_if_missing => {
                        let secret: Secret = serde_json::from_value(json!({
                            "apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": p.name}, "stringData": data,
                        }))
                        .map_err(kube::Error::SerdeError)?;
                        let params = PostParams {
                            field_manager: Some("uyuni-job".to_owned()),
                            ..PostParams::default()
                        };
                        secrets.create(&params, &secret).await.map(|_| ())
                    }
                    other => other.map(|_| ()),
                }
            }
            .await;
            if let Err(e) = result {
                // kubectl's own wording for an API error.
                let line = match &e {
                    kube::Error::Api(s) => {
                        format!("Error from server ({}): {}", s.reason, s.message)
                    }
                    other => format!("error: {other}"),
                };
                self.logs
                    .append(&view.namespace, &view.name, container, &line);
                *outcome = JobOutcome::Fail;
                *exit_code = 1;
            }
        }
        *pending = keep;
    }
}

/// Real execution (`exec`): the same status writes and log store as the scenario's pods.
impl Player {
    #[allow(clippy::too_many_arguments)]
    async fn execute<W, F>(
        &self,
        pod: &Pod,
        view: &PodView,
        ip: &str,
        start_time: &str,
        conditions: &mut Conditions,
        write: &W,
    ) -> anyhow::Result<()>
    where
        W: Fn(Snapshot<'_>, &mut Conditions) -> F,
        F: std::future::Future<Output = Result<(), kube::Error>>,
    {
        let spec = pod.spec.clone().unwrap_or_default();
        let pod_dir = exec::pod_dir(&self.sandbox_dir, &view.namespace, &view.name, &view.uid);
        let never = view.restart_policy == "Never";
        let initializing = State::Waiting {
            reason: "PodInitializing".to_owned(),
            message: None,
        };
        // Init containers first, in order; each must succeed before the next starts.
        let mut init_states: Vec<State> = Vec::new();
        for c in spec.init_containers.as_deref().unwrap_or_default() {
            loop {
                let env = self
                    .env_or_wait(
                        view,
                        c,
                        ip,
                        start_time,
                        Some(&init_states),
                        conditions,
                        write,
                    )
                    .await?;
                let started_at = now_rfc3339();
                init_states.push(State::Running {
                    started_at: started_at.clone(),
                });
                fn pending<'a>(
                    state: &'a State,
                    ip: &'a str,
                    start_time: &'a str,
                    init: &'a [State],
                ) -> Snapshot<'a> {
                    Snapshot {
                        phase: "Pending",
                        state,
                        ready: false,
                        pod_ip: Some(ip),
                        start_time: Some(start_time),
                        restart_count: 0,
                        last_state: None,
                        init: Some(init),
                    }
                }
                write(
                    pending(&initializing, ip, start_time, &init_states),
                    conditions,
                )
                .await?;
                let (code, message) = self.run_process(view, pod, c, env, &pod_dir).await;
                let ended = terminated(code, message, started_at);
                init_states.pop();
                if code == 0 {
                    init_states.push(ended);
                    break;
                }
                init_states.push(ended);
                if never {
                    let mut failed = pending(&initializing, ip, start_time, &init_states);
                    failed.phase = "Failed";
                    write(failed, conditions).await?;
                    return Ok(());
                }
                write(
                    pending(&initializing, ip, start_time, &init_states),
                    conditions,
                )
                .await?;
                sleep_ms(self.executed_start_ms(&view.namespace)).await;
                init_states.pop();
            }
        }
        let init = (!init_states.is_empty()).then_some(init_states.as_slice());
        let mut restart_count = 0;
        let mut last_state: Option<Value> = None;
        loop {
            let mut envs = Vec::new();
            for c in &spec.containers {
                envs.push(
                    self.env_or_wait(view, c, ip, start_time, init, conditions, write)
                        .await?,
                );
            }
            let started_at = now_rfc3339();
            let running = State::Running {
                started_at: started_at.clone(),
            };
            // No probe is run: a running process is ready, as the scenario's pods are.
            write(
                Snapshot {
                    phase: "Running",
                    state: &running,
                    ready: true,
                    pod_ip: Some(ip),
                    start_time: Some(start_time),
                    restart_count,
                    last_state: last_state.clone(),
                    init,
                },
                conditions,
            )
            .await?;
            // The containers of a pod run side by side; the pod's one reported state is the
            // first failure among them, or success.
            let ended = futures::future::join_all(
                spec.containers
                    .iter()
                    .zip(envs)
                    .map(|(c, env)| self.run_process(view, pod, c, env, &pod_dir)),
            )
            .await;
            let (code, message) = ended
                .iter()
                .find(|(code, _)| *code != 0)
                .cloned()
                .unwrap_or((0, None));
            let state = terminated(code, message, started_at);
            // restartPolicy: Always restarts any ended container, OnFailure a failed one.
            let restart = match view.restart_policy.as_str() {
                "Never" => false,
                "OnFailure" => code != 0,
                _ => true,
            };
            if restart {
                restart_count += 1;
                last_state = Some(state.to_json());
                let backoff = State::Waiting {
                    reason: "CrashLoopBackOff".to_owned(),
                    message: Some(waiting_message("CrashLoopBackOff", "")),
                };
                write(
                    Snapshot {
                        phase: "Running",
                        state: &backoff,
                        ready: false,
                        pod_ip: Some(ip),
                        start_time: Some(start_time),
                        restart_count,
                        last_state: last_state.clone(),
                        init,
                    },
                    conditions,
                )
                .await?;
                sleep_ms(self.executed_start_ms(&view.namespace)).await;
                continue;
            }
            write(
                Snapshot {
                    phase: if code == 0 { "Succeeded" } else { "Failed" },
                    state: &state,
                    ready: false,
                    pod_ip: Some(ip),
                    start_time: Some(start_time),
                    restart_count,
                    last_state,
                    init,
                },
                conditions,
            )
            .await?;
            return Ok(());
        }
    }

    /// The container's environment; while a reference is missing the pod waits with kubelet's
    /// `CreateContainerConfigError`, and it is tried again (kubelet retries on each sync).
    #[allow(clippy::too_many_arguments)]
    async fn env_or_wait<W, F>(
        &self,
        view: &PodView,
        container: &k8s_openapi::api::core::v1::Container,
        ip: &str,
        start_time: &str,
        init: Option<&[State]>,
        conditions: &mut Conditions,
        write: &W,
    ) -> anyhow::Result<Vec<(String, String)>>
    where
        W: Fn(Snapshot<'_>, &mut Conditions) -> F,
        F: std::future::Future<Output = Result<(), kube::Error>>,
    {
        let mut said: Option<String> = None;
        loop {
            match exec::resolve_env(&self.node, &view.namespace, container).await {
                Ok(env) => return Ok(env),
                Err(message) if said.as_deref() != Some(message.as_str()) => {
                    self.logs
                        .waiting(&view.namespace, &view.name, "CreateContainerConfigError");
                    let state = State::Waiting {
                        reason: "CreateContainerConfigError".to_owned(),
                        message: Some(message.clone()),
                    };
                    // An init container waiting: its own state says why.
                    let mut init_states: Option<Vec<State>> = None;
                    let main = if view.init_containers.iter().any(|c| c.0 == container.name) {
                        let mut states = init.unwrap_or_default().to_vec();
                        states.push(state.clone());
                        init_states = Some(states);
                        State::Waiting {
                            reason: "PodInitializing".to_owned(),
                            message: None,
                        }
                    } else {
                        state
                    };
                    write(
                        Snapshot {
                            phase: "Pending",
                            state: &main,
                            ready: false,
                            pod_ip: Some(ip),
                            start_time: Some(start_time),
                            restart_count: 0,
                            last_state: None,
                            init: init_states.as_deref().or(init),
                        },
                        conditions,
                    )
                    .await?;
                    said = Some(message);
                }
                Err(_) => {}
            }
            sleep_ms(2000).await;
        }
    }

    /// Runs one container's command to its end: its output into the log store line by line
    /// (followed streams see each line as it comes), its exit code, or 128 and why it could
    /// not start (kubelet's `StartError`).
    async fn run_process(
        &self,
        view: &PodView,
        pod: &Pod,
        container: &k8s_openapi::api::core::v1::Container,
        env: Vec<(String, String)>,
        pod_dir: &std::path::Path,
    ) -> (i32, Option<String>) {
        let name = container.name.clone();
        let argv = match exec::argv(container) {
            Ok(a) => a,
            Err(m) => return (128, Some(m)),
        };
        // A fresh working directory for each start of the container.
        let workdir = pod_dir.join("containers").join(&name);
        let _ = std::fs::remove_dir_all(&workdir);
        if let Err(e) = std::fs::create_dir_all(&workdir) {
            return (
                128,
                Some(format!(
                    "cannot create the working directory {} (--sandbox-dir): {e}",
                    workdir.display()
                )),
            );
        }
        let mut vars = exec::base_env(&workdir, &view.name);
        for (var, dir) in exec::mounts(pod, container, pod_dir) {
            if let Err(e) = std::fs::create_dir_all(&dir) {
                return (
                    128,
                    Some(format!("cannot create the emptyDir {}: {e}", dir.display())),
                );
            }
            vars.push((var, dir.display().to_string()));
        }
        vars.extend(env);
        let mut command = tokio::process::Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .env_clear()
            .envs(vars)
            .current_dir(&workdir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            // Its own process group: deletion signals the command and what it started.
            .process_group(0);
        self.logs.start(&view.namespace, &view.name, &name);
        let mut child = match command.spawn() {
            Ok(c) => c,
            Err(e) => {
                self.logs.finish(&view.namespace, &view.name, &name);
                return (
                    128,
                    Some(format!(
                        "cannot start {:?}: {e} (the node agent runs the host's binaries)",
                        argv[0]
                    )),
                );
            }
        };
        let pid = child.id().unwrap_or(0);
        let (tx, mut rx) = tokio::sync::watch::channel(None);
        lock(&self.processes)
            .entry(view.uid.clone())
            .or_default()
            .push((pid, rx.clone()));
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let logs = self.logs.clone();
        let (ns, pod_name) = (view.namespace.clone(), view.name.clone());
        // Its own task: a deleted pod's player is aborted, the process is still waited for.
        tokio::spawn(async move {
            let (_, _, status) = tokio::join!(
                pump(stdout, &logs, &ns, &pod_name, &name),
                pump(stderr, &logs, &ns, &pod_name, &name),
                child.wait()
            );
            let code = status.map(exec::exit_code).unwrap_or(1);
            logs.finish(&ns, &pod_name, &name);
            let _ = tx.send(Some(code));
        });
        let code = rx
            .wait_for(|c| c.is_some())
            .await
            .map(|c| c.unwrap_or(1))
            .unwrap_or(1);
        if let Some(list) = lock(&self.processes).get_mut(&view.uid) {
            list.retain(|(p, _)| *p != pid);
        }
        (code, None)
    }

    /// Ends every command still running (the agent stops): their process groups are not the
    /// agent's, so they would outlive it, and `cluster.sh down` must leave nothing running.
    pub async fn stop_all(&self, grace_seconds: u64) {
        let uids: Vec<String> = lock(&self.processes).keys().cloned().collect();
        for uid in uids {
            self.stop_processes(&uid, grace_seconds).await;
        }
    }

    /// Ends the processes of a pod being deleted, as kubelet's `killContainer` does: SIGTERM,
    /// SIGKILL when the grace period is over. The exit code of the first, if any ran.
    async fn stop_processes(&self, uid: &str, grace_seconds: u64) -> Option<i32> {
        let processes = lock(&self.processes).remove(uid)?;
        for (pid, _) in &processes {
            exec::signal_group(*pid, exec::Stop::Term);
        }
        let mut first = None;
        for (pid, mut rx) in processes {
            let graceful = tokio::time::timeout(
                std::time::Duration::from_secs(grace_seconds),
                rx.wait_for(|c| c.is_some()),
            )
            .await
            .is_ok();
            if !graceful {
                exec::signal_group(pid, exec::Stop::Kill);
            }
            let code = rx.wait_for(|c| c.is_some()).await.ok().and_then(|c| *c);
            first = first.or(code);
        }
        first
    }
}

// pub for the unit tests in tests/unit/
#[doc(hidden)]
pub fn terminated(code: i32, message: Option<String>, started_at: String) -> State {
    State::Terminated {
        exit_code: code,
        reason: if message.is_some() {
            "StartError".to_owned()
        } else {
            exec::exit_reason(code).to_owned()
        },
        started_at,
        finished_at: now_rfc3339(),
        message,
    }
}

/// Copies a process's output into the log store, a line at a time.
async fn pump<R: tokio::io::AsyncRead + Unpin>(
    from: Option<R>,
    logs: &LogStore,
    ns: &str,
    pod: &str,
    container: &str,
) {
    use tokio::io::AsyncBufReadExt;
    let Some(from) = from else { return };
    let mut reader = tokio::io::BufReader::new(from);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                logs.append(ns, pod, container, text.trim_end_matches(['\n', '\r']));
            }
        }
    }
}
