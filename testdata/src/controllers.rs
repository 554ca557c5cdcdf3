//! The simulated controllers: Job → Pod → completion, Deployment → Pods → availability,
//! PVC → PV binding, cert-manager issuers and certificates, default ServiceAccounts. They react
//! to committed changes only (a dry-run never reaches them) and run as tokio tasks.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use crate::certs::{self, Signer};
use crate::cluster::{NODE_IP, NODE_NAME};
use crate::engine::{PatchType, Shared, WriteOpts, lock, now};
use crate::resources::ResourceType;
use crate::scenario::{DeploymentOutcome, JobOutcome, JobScript, SideEffect};
use crate::sim::JobEnd;
use crate::store::{EventType, Key, StoredEvent};

/// Follows the event history from `cursor` and hands each event to its controller.
pub async fn run(shared: Arc<Shared>, mut cursor: u64) {
    let mut changes = shared.changes.subscribe();
    let mut shutdown = shared.shutdown.clone();
    loop {
        changes.borrow_and_update();
        let events: Vec<StoredEvent> = {
            let state = shared.state();
            let events = state.events_after(cursor).to_vec();
            cursor = state.rv.max(cursor);
            events
        };
        for e in events {
            dispatch(&shared, e);
        }
        tokio::select! {
            r = changes.changed() => if r.is_err() { return },
            _ = shutdown.changed() => return,
        }
    }
}

fn meta(obj: &Value, field: &str) -> String {
    obj["metadata"][field]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn dispatch(shared: &Arc<Shared>, e: StoredEvent) {
    let kind = (e.key.group.as_str(), e.key.plural.as_str());
    let sh = shared.clone();
    match (kind, e.etype) {
        (("batch", "jobs"), EventType::Added) => {
            tokio::spawn(async move { run_job(sh, e.object).await });
        }
        (("apps", "deployments"), EventType::Added | EventType::Modified) => {
            let generation = e.object["metadata"]["generation"].as_i64();
            if generation != e.object["status"]["observedGeneration"].as_i64() {
                tokio::spawn(async move { reconcile_deployment(sh, e.object).await });
            }
        }
        (("", "persistentvolumeclaims"), EventType::Added) => {
            tokio::spawn(async move { bind_pvc(sh, e.object).await });
        }
        (("", "persistentvolumeclaims"), EventType::Deleted) => {
            let pv = format!("pvc-{}", meta(&e.object, "uid"));
            if let Some(rt) = sh.type_for("v1", "PersistentVolume") {
                let _ = sh.delete(
                    &rt,
                    "",
                    &pv,
                    None,
                    None,
                    &WriteOpts::controller("persistentvolume-controller"),
                );
            }
        }
        (("", "namespaces"), EventType::Modified)
            if e.object["metadata"]["deletionTimestamp"].is_string() =>
        {
            let delay = lock(&sh.scenario).timing.namespace_delete_ms;
            tokio::spawn(async move {
                sleep_ms(delay).await;
                sh.finalize_namespace(&e.key.name);
            });
        }
        (("", "namespaces"), EventType::Added) => {
            if let Some(rt) = sh.type_for("v1", "ServiceAccount") {
                let ns = e.key.name.clone();
                let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
                sh.create_internal(&rt, &ns, sa, "kube-controller-manager");
            }
        }
        (
            ("cert-manager.io", "issuers" | "clusterissuers"),
            EventType::Added | EventType::Modified,
        ) if shared.config.cert_manager && needs_reconcile(&e.object) => {
            tokio::spawn(async move { reconcile_issuer(sh, e.key, e.object).await });
        }
        (("cert-manager.io", "certificates"), EventType::Added | EventType::Modified)
            if shared.config.cert_manager && needs_reconcile(&e.object) =>
        {
            tokio::spawn(async move { reconcile_certificate(sh, e.key, e.object).await });
        }
        _ => {}
    }
}

/// Whether a cert-manager object's Ready condition is missing or older than its generation.
fn needs_reconcile(obj: &Value) -> bool {
    let generation = obj["metadata"]["generation"].as_i64();
    let ready = obj["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == json!("Ready")));
    match ready {
        None => true,
        Some(c) => c["observedGeneration"].as_i64() != generation,
    }
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

fn ty(shared: &Shared, api_version: &str, kind: &str) -> Option<ResourceType> {
    shared.type_for(api_version, kind)
}

/// A Deployment condition (they have lastUpdateTime, not lastProbeTime).
fn deployment_condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": now(),
        "lastTransitionTime": now(),
    })
}

fn condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastProbeTime": now(),
        "lastTransitionTime": now(),
    })
}

/// A pod built from a template, owned by `owner`.
fn pod_from_template(
    shared: &Shared,
    owner: &Value,
    owner_kind: &str,
    owner_api_version: &str,
    name: String,
    extra_labels: &[(&str, String)],
    restart_policy: Option<&str>,
) -> Value {
    let template = &owner["spec"]["template"];
    let mut labels = template["metadata"]["labels"].clone();
    if !labels.is_object() {
        labels = json!({});
    }
    for (k, v) in extra_labels {
        labels[*k] = json!(v);
    }
    let mut spec = template["spec"].clone();
    spec["nodeName"] = json!(NODE_NAME);
    if let Some(p) = restart_policy
        && spec["restartPolicy"].is_null()
    {
        spec["restartPolicy"] = json!(p);
    }
    let containers: Vec<Value> = spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            json!({
                "name": c["name"], "image": c["image"], "imageID": "", "ready": false,
                "restartCount": 0, "started": false,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            })
        })
        .collect();
    let _ = shared;
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": template["metadata"]["annotations"],
            "ownerReferences": [{
                "apiVersion": owner_api_version,
                "kind": owner_kind,
                "name": meta(owner, "name"),
                "uid": meta(owner, "uid"),
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": spec,
        "status": {
            "phase": "Pending",
            "hostIP": NODE_IP,
            "qosClass": "BestEffort",
            "containerStatuses": containers,
            "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}],
        },
    })
}

/// Sets the state of every container status of a pod and the pod's phase.
fn set_pod_state(pod: &mut Value, phase: &str, state: &Value, ready: bool, pod_ip: bool) {
    pod["status"]["phase"] = json!(phase);
    if pod_ip {
        pod["status"]["podIP"] = json!("10.42.0.17");
        pod["status"]["startTime"] = pod["status"]["startTime"]
            .as_str()
            .map_or_else(|| json!(now()), |s| json!(s));
    }
    for c in pod["status"]["containerStatuses"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        c["state"] = state.clone();
        c["ready"] = json!(ready);
        c["started"] = json!(state.get("running").is_some());
    }
    let ready_s = if ready { "True" } else { "False" };
    pod["status"]["conditions"] = json!([
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": now()},
        {"type": "Initialized", "status": "True", "lastTransitionTime": now()},
        {"type": "ContainersReady", "status": ready_s, "lastTransitionTime": now()},
        {"type": "Ready", "status": ready_s, "lastTransitionTime": now()},
    ]);
}

// ---------------------------------------------------------------------------------------------
// Jobs

async fn run_job(shared: Arc<Shared>, job: Value) {
    let (Some(job_rt), Some(pod_rt)) = (ty(&shared, "batch/v1", "Job"), ty(&shared, "v1", "Pod"))
    else {
        return;
    };
    let ns = meta(&job, "namespace");
    let name = meta(&job, "name");
    let uid = meta(&job, "uid");
    let step = job["metadata"]["annotations"]["kubectl-uyuni.io/step"]
        .as_str()
        .map(str::to_string);
    let (scenario_script, timing) = {
        let scenario = lock(&shared.scenario);
        let scenario = scenario.in_namespace(&ns);
        let attempt = shared
            .state()
            .job_attempt_of
            .get(&uid)
            .copied()
            .unwrap_or(0);
        (
            step.as_deref()
                .and_then(|s| scenario.job_script(s, attempt).cloned()),
            scenario.timing.clone(),
        )
    };
    let annotations: std::collections::BTreeMap<String, String> =
        serde_json::from_value(job["metadata"]["annotations"].clone()).unwrap_or_default();
    let scenario_script = scenario_script.map(|script| script.for_job(&annotations));
    let script = scenario_script.unwrap_or_else(|| JobScript {
        duration_ms: timing.default_job_ms,
        log: vec![format!("{} finished", step.as_deref().unwrap_or(&name))],
        ..JobScript::default()
    });
    let substitute = |s: &str| s.replace("$JOB_NAME", &name);

    sleep_ms(timing.pod_create_ms).await;
    if shared
        .state()
        .get(&Key::new(&job_rt, &ns, &name))
        .is_none_or(|j| meta(j, "uid") != uid)
    {
        return;
    }
    let pod_name = format!("{name}-{}", lock(&shared.rng).name_suffix(5));
    let pod = pod_from_template(
        &shared,
        &job,
        "Job",
        "batch/v1",
        pod_name.clone(),
        &[
            ("batch.kubernetes.io/controller-uid", uid.clone()),
            ("batch.kubernetes.io/job-name", name.clone()),
            ("controller-uid", uid.clone()),
            ("job-name", name.clone()),
        ],
        None,
    );
    let container = pod["spec"]["containers"][0]["name"]
        .as_str()
        .unwrap_or("main")
        .to_string();
    if shared
        .create_internal(&pod_rt, &ns, pod, "job-controller")
        .is_none()
    {
        return;
    }
    let start_time = now();
    let job_status = |f: &dyn Fn(&mut Value)| {
        shared.modify(&job_rt, &ns, &name, Some(&uid), "job-controller", |j| {
            f(&mut j["status"])
        })
    };
    job_status(&|s| {
        s["active"] = json!(1);
        s["ready"] = json!(0);
        s["terminating"] = json!(0);
        s["startTime"] = json!(start_time);
        s["uncountedTerminatedPods"] = json!({});
    });
    let set_pod = |phase: &str, state: Value, ready: bool| {
        shared.modify(&pod_rt, &ns, &pod_name, None, "kubelet", |p| {
            set_pod_state(p, phase, &state, ready, true)
        })
    };

    sleep_ms(timing.pod_start_ms).await;
    if script.outcome == JobOutcome::Stuck {
        let mut waiting = json!({"reason": script.waiting_reason});
        let image = job["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default();
        let message = script.waiting_message.clone().unwrap_or_else(|| {
            match script.waiting_reason.as_str() {
                "ImagePullBackOff" => format!("Back-off pulling image \"{image}\""),
                "CreateContainerConfigError" => {
                    "secret \"uyuni-migration-ssh\" not found".to_string()
                }
                other => other.to_string(),
            }
        });
        waiting["message"] = json!(message);
        set_pod("Pending", json!({"waiting": waiting}), false);
        return;
    }
    let started_at = now();
    if set_pod(
        "Running",
        json!({"running": {"startedAt": started_at}}),
        true,
    )
    .is_none()
    {
        return;
    }
    job_status(&|s| s["ready"] = json!(1));
    shared.append_log(&ns, &pod_name, &container, &[], false);
    if script.log_bytes > 0
        && !wait_generated_log(&shared, &ns, &pod_name, &container, script.log_bytes).await
    {
        return;
    }

    // Log lines evenly over the duration; timed side effects when their time comes.
    let lines: Vec<String> = script.log.iter().map(|l| substitute(l)).collect();
    let slots = lines.len() as u64 + 1;
    let interval = script.duration_ms / slots;
    let mut elapsed = 0u64;
    let mut pending_effects: Vec<&SideEffect> = script.side_effects.iter().collect();
    let mut outcome = script.outcome;
    let mut exit_code = script.exit_code;
    for line in lines {
        sleep_ms(interval).await;
        elapsed += interval;
        if shared
            .state()
            .get(&Key::new(&pod_rt, &ns, &pod_name))
            .is_none()
        {
            return;
        }
        run_due_effects(
            &shared,
            &ns,
            &name,
            &pod_name,
            &container,
            &mut pending_effects,
            Some(elapsed),
            &mut outcome,
            &mut exit_code,
        );
        shared.append_log(&ns, &pod_name, &container, &[line], false);
    }
    sleep_ms(script.duration_ms.saturating_sub(elapsed)).await;
    if shared
        .state()
        .get(&Key::new(&pod_rt, &ns, &pod_name))
        .is_none()
    {
        return;
    }
    run_due_effects(
        &shared,
        &ns,
        &name,
        &pod_name,
        &container,
        &mut pending_effects,
        Some(script.duration_ms),
        &mut outcome,
        &mut exit_code,
    );
    if outcome == JobOutcome::Succeed {
        run_due_effects(
            &shared,
            &ns,
            &name,
            &pod_name,
            &container,
            &mut pending_effects,
            None,
            &mut outcome,
            &mut exit_code,
        );
    }
    shared.append_log(&ns, &pod_name, &container, &[], true);
    let finished_at = now();
    let succeeded = outcome == JobOutcome::Succeed;
    let mut terminated = json!({"terminated": {
        "exitCode": if succeeded { 0 } else { exit_code },
        "reason": if succeeded { "Completed" } else { "Error" },
        "startedAt": started_at,
        "finishedAt": finished_at,
    }});
    // What the script wrote to its termination log, which the kubelet copies into the
    // container's terminated state (as the node agent plays it, `agent/pods.rs`).
    if let Some(message) = script.termination_message.as_ref().filter(|_| succeeded) {
        let image = job["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default();
        terminated["terminated"]["message"] = json!(
            message
                .replace("$IMAGE_RELEASE", crate::scenario::image_release(image))
                .replace("$IMAGE_TAG", crate::scenario::image_tag(image))
                .replace("$IMAGE", image)
        );
    }
    set_pod(
        if succeeded { "Succeeded" } else { "Failed" },
        terminated,
        false,
    );
    let ended = std::time::Instant::now();
    let recorded = job_status(&|s| {
        if let Some(m) = s.as_object_mut() {
            m.remove("active");
        }
        s["ready"] = json!(0);
        if succeeded {
            s["succeeded"] = json!(1);
            s["completionTime"] = json!(finished_at);
            let msg = "Reached expected number of succeeded pods";
            s["conditions"] = json!([
                condition("SuccessCriteriaMet", "True", "CompletionsReached", msg),
                condition("Complete", "True", "CompletionsReached", msg),
            ]);
        } else {
            s["failed"] = json!(1);
            let msg = "Job has reached the specified backoff limit";
            s["conditions"] = json!([
                condition("FailureTarget", "True", "BackoffLimitExceeded", msg),
                condition("Failed", "True", "BackoffLimitExceeded", msg),
            ]);
        }
    });
    if recorded.is_some() {
        lock(&shared.job_ends).push(JobEnd {
            namespace: ns,
            name,
            succeeded,
            at_us: shared.micros_since_start(ended),
        });
    }
}

/// Serves a generated log of `bytes` and waits until a reader has read it all. False when the
/// pod (and its log) went away or the cluster stops.
async fn wait_generated_log(
    shared: &Shared,
    ns: &str,
    pod: &str,
    container: &str,
    bytes: u64,
) -> bool {
    let key = (ns.to_string(), pod.to_string(), container.to_string());
    match shared.state().logs.get_mut(&key) {
        Some(log) => log.generated_bytes = bytes,
        None => return false,
    }
    shared.notify_change();
    let mut changes = shared.changes.subscribe();
    loop {
        changes.borrow_and_update();
        match shared.state().logs.get(&key) {
            None => return false,
            Some(log) if log.generated_read => return true,
            Some(_) => {}
        }
        if !wait_change(shared, &mut changes).await && *shared.shutdown.borrow() {
            return false;
        }
    }
}

/// Runs the side effects due at `elapsed` (or, with `None`, the ones without a time). A failed
/// effect fails the Job, like the failing `kubectl patch` in a real job script would.
#[allow(clippy::too_many_arguments)]
fn run_due_effects(
    shared: &Shared,
    ns: &str,
    job_name: &str,
    pod: &str,
    container: &str,
    pending: &mut Vec<&SideEffect>,
    elapsed: Option<u64>,
    outcome: &mut JobOutcome,
    exit_code: &mut i32,
) {
    let mut keep = Vec::new();
    for effect in pending.drain(..) {
        let SideEffect::PatchSecret(p) = effect;
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
                let v = if v == "$JOB_NAME" {
                    job_name.to_string()
                } else {
                    v.clone()
                };
                (k.clone(), json!(v))
            })
            .collect();
        let Some(rt) = shared.type_for("v1", "Secret") else {
            continue;
        };
        let opts = WriteOpts::controller("uyuni-job");
        let result = shared.patch(
            &rt,
            ns,
            &p.name,
            None,
            PatchType::Merge,
            json!({"stringData": data}),
            &opts,
        );
        let result = match result {
            Err(e) if e.code == 404 && p.create_if_missing => shared.create(
                &rt,
                ns,
                json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": p.name}, "stringData": data}),
                &opts,
                false,
            ),
            other => other,
        };
        if let Err(e) = result {
            shared.append_log(
                ns,
                pod,
                container,
                &[format!("Error from server ({}): {}", e.reason, e.message)],
                false,
            );
            *outcome = JobOutcome::Fail;
            *exit_code = 1;
        }
    }
    *pending = keep;
}

// ---------------------------------------------------------------------------------------------
// Deployments

/// The `pod-template-hash` of a template: stable for the same template.
fn template_hash(template: &Value) -> String {
    let h = crate::discovery::hash(template);
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    h.bytes()
        .take(10)
        .map(|b| ALPHABET[b as usize % ALPHABET.len()] as char)
        .collect()
}

fn set_count(status: &mut Value, field: &str, n: i64) {
    if n > 0 {
        status[field] = json!(n);
    } else if let Some(m) = status.as_object_mut() {
        m.remove(field);
    }
}

async fn reconcile_deployment(shared: Arc<Shared>, dep: Value) {
    let (Some(dep_rt), Some(pod_rt)) = (
        ty(&shared, "apps/v1", "Deployment"),
        ty(&shared, "v1", "Pod"),
    ) else {
        return;
    };
    let ns = meta(&dep, "namespace");
    let name = meta(&dep, "name");
    let uid = meta(&dep, "uid");
    let generation = dep["metadata"]["generation"].as_i64().unwrap_or(1);
    let (script, timing) = {
        let scenario = lock(&shared.scenario);
        let scenario = scenario.in_namespace(&ns);
        (
            scenario.deployments.get(&name).cloned().unwrap_or_default(),
            scenario.timing.clone(),
        )
    };
    sleep_ms(timing.pod_create_ms).await;
    let current = |shared: &Shared| {
        shared
            .state()
            .get(&Key::new(&dep_rt, &ns, &name))
            .filter(|d| {
                meta(d, "uid") == uid && d["metadata"]["generation"].as_i64() == Some(generation)
            })
            .cloned()
    };
    let Some(dep) = current(&shared) else {
        return;
    };
    let replicas = dep["spec"]["replicas"].as_i64().unwrap_or(1).max(0);
    let hash = template_hash(&dep["spec"]["template"]);
    // Pods of an older template or beyond the replica count go; missing ones are created.
    let owned: Vec<Value> = shared
        .state()
        .list(&pod_rt, Some(&ns))
        .into_iter()
        .filter(|p| crate::store::owned_by(p, &uid))
        .collect();
    let mut kept = 0i64;
    let delete_opts = WriteOpts::controller("replicaset-controller");
    for p in owned {
        let same = p["metadata"]["labels"]["pod-template-hash"].as_str() == Some(hash.as_str());
        if same && kept < replicas {
            kept += 1;
        } else {
            let _ = shared.delete(&pod_rt, &ns, &meta(&p, "name"), None, None, &delete_opts);
        }
    }
    for _ in kept..replicas {
        let pod_name = format!("{name}-{hash}-{}", lock(&shared.rng).name_suffix(5));
        let pod = pod_from_template(
            &shared,
            &dep,
            "Deployment",
            "apps/v1",
            pod_name,
            &[("pod-template-hash", hash.clone())],
            Some("Always"),
        );
        shared.create_internal(&pod_rt, &ns, pod, "replicaset-controller");
    }
    let status = |shared: &Shared, ready: i64, available: bool| {
        shared.modify(
            &dep_rt,
            &ns,
            &name,
            Some(&uid),
            "deployment-controller",
            |d| {
                if d["metadata"]["generation"].as_i64() != Some(generation) {
                    return;
                }
                let s = &mut d["status"];
                if !s.is_object() {
                    *s = json!({});
                }
                s["observedGeneration"] = json!(generation);
                set_count(s, "replicas", replicas);
                set_count(s, "updatedReplicas", replicas);
                set_count(s, "readyReplicas", ready);
                set_count(s, "availableReplicas", ready);
                set_count(s, "unavailableReplicas", replicas - ready);
                let rs = format!("{name}-{hash}");
                s["conditions"] = if available {
                    json!([
                        deployment_condition(
                            "Available",
                            "True",
                            "MinimumReplicasAvailable",
                            "Deployment has minimum availability."
                        ),
                        deployment_condition(
                            "Progressing",
                            "True",
                            "NewReplicaSetAvailable",
                            &format!("ReplicaSet \"{rs}\" has successfully progressed.")
                        ),
                    ])
                } else {
                    json!([
                        deployment_condition(
                            "Available",
                            "False",
                            "MinimumReplicasUnavailable",
                            "Deployment does not have minimum availability."
                        ),
                        deployment_condition(
                            "Progressing",
                            "True",
                            "ReplicaSetUpdated",
                            &format!("ReplicaSet \"{rs}\" is progressing.")
                        ),
                    ])
                };
            },
        );
    };
    if replicas == 0 {
        status(&shared, 0, true);
        return;
    }
    status(&shared, 0, false);
    let pods_of = |shared: &Shared| -> Vec<String> {
        shared
            .state()
            .list(&pod_rt, Some(&ns))
            .into_iter()
            .filter(|p| crate::store::owned_by(p, &uid))
            .map(|p| meta(&p, "name"))
            .collect()
    };
    match script.outcome {
        DeploymentOutcome::Ready => {
            sleep_ms(script.ready_after_ms.unwrap_or(timing.deployment_ready_ms)).await;
            if current(&shared).is_none() {
                return;
            }
            for pod in pods_of(&shared) {
                shared.modify(&pod_rt, &ns, &pod, None, "kubelet", |p| {
                    set_pod_state(
                        p,
                        "Running",
                        &json!({"running": {"startedAt": now()}}),
                        true,
                        true,
                    )
                });
            }
            status(&shared, replicas, true);
        }
        DeploymentOutcome::Stuck => {
            sleep_ms(timing.pod_start_ms).await;
            if current(&shared).is_none() {
                return;
            }
            let image = dep["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let reason = script.waiting_reason.clone();
            let message = script
                .waiting_message
                .clone()
                .unwrap_or_else(|| match reason.as_str() {
                    "ImagePullBackOff" => format!("Back-off pulling image \"{image}\""),
                    "CrashLoopBackOff" => "back-off 40s restarting failed container".to_string(),
                    other => other.to_string(),
                });
            let crash = reason == "CrashLoopBackOff";
            for pod in pods_of(&shared) {
                shared.modify(&pod_rt, &ns, &pod, None, "kubelet", |p| {
                    let phase = if crash { "Running" } else { "Pending" };
                    set_pod_state(p, phase, &json!({"waiting": {"reason": reason, "message": message}}), false, crash);
                    if crash {
                        for c in p["status"]["containerStatuses"].as_array_mut().into_iter().flatten() {
                            c["restartCount"] = json!(3);
                            c["lastState"] = json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": now(), "finishedAt": now()}});
                        }
                    }
                });
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// PersistentVolumeClaims

async fn bind_pvc(shared: Arc<Shared>, pvc: Value) {
    let (Some(pvc_rt), Some(pv_rt)) = (
        ty(&shared, "v1", "PersistentVolumeClaim"),
        ty(&shared, "v1", "PersistentVolume"),
    ) else {
        return;
    };
    let timing = lock(&shared.scenario).timing.clone();
    sleep_ms(timing.pvc_bind_ms).await;
    let ns = meta(&pvc, "namespace");
    let name = meta(&pvc, "name");
    let uid = meta(&pvc, "uid");
    let Some(sc) = pvc["spec"]["storageClassName"]
        .as_str()
        .filter(|s| !s.is_empty())
    else {
        return;
    };
    let provisioner = {
        let state = shared.state();
        let Some(sc_rt) = state.type_for("storage.k8s.io/v1", "StorageClass") else {
            return;
        };
        match state.get(&Key::new(&sc_rt, "", sc)) {
            Some(class) => class["provisioner"]
                .as_str()
                .unwrap_or("rancher.io/local-path")
                .to_string(),
            // A claim for a class that does not exist stays Pending, as in Kubernetes.
            None => return,
        }
    };
    let pv_name = format!("pvc-{uid}");
    let capacity = pvc["spec"]["resources"]["requests"]["storage"].clone();
    let pv = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": pv_name,
            "annotations": {"pv.kubernetes.io/provisioned-by": provisioner},
            "finalizers": ["kubernetes.io/pv-protection"],
        },
        "spec": {
            "capacity": {"storage": capacity},
            "accessModes": pvc["spec"]["accessModes"],
            "claimRef": {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": ns, "name": name, "uid": uid,
            },
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": sc,
            "volumeMode": pvc["spec"]["volumeMode"].as_str().unwrap_or("Filesystem"),
            "hostPath": {"path": format!("/var/lib/rancher/k3s/storage/{pv_name}_{ns}_{name}"), "type": "DirectoryOrCreate"},
        },
        "status": {"phase": "Bound"},
    });
    if shared
        .state()
        .get(&Key::new(&pvc_rt, &ns, &name))
        .is_none_or(|p| meta(p, "uid") != uid)
    {
        return;
    }
    shared.create_internal(&pv_rt, "", pv, "persistentvolume-controller");
    shared.modify(
        &pvc_rt,
        &ns,
        &name,
        Some(&uid),
        "persistentvolume-controller",
        |p| {
            p["spec"]["volumeName"] = json!(pv_name);
            let ann = &mut p["metadata"]["annotations"];
            ann["pv.kubernetes.io/bind-completed"] = json!("yes");
            ann["pv.kubernetes.io/bound-by-controller"] = json!("yes");
            ann["volume.beta.kubernetes.io/storage-provisioner"] = json!(provisioner);
            ann["volume.kubernetes.io/storage-provisioner"] = json!(provisioner);
            p["status"] = json!({
                "phase": "Bound",
                "accessModes": p["spec"]["accessModes"],
                "capacity": {"storage": capacity},
            });
        },
    );
}

// ---------------------------------------------------------------------------------------------
// cert-manager

fn decode_secret_field(secret: &Value, field: &str) -> Option<String> {
    let b = B64.decode(secret["data"][field].as_str()?).ok()?;
    String::from_utf8(b).ok()
}

/// Waits for the next change (or a while), to retry something that depends on other objects.
async fn wait_change(shared: &Shared, changes: &mut tokio::sync::watch::Receiver<u64>) -> bool {
    let mut shutdown = shared.shutdown.clone();
    tokio::select! {
        r = changes.changed() => r.is_ok(),
        _ = tokio::time::sleep(Duration::from_secs(120)) => false,
        _ = shutdown.changed() => false,
    }
}

/// The CA Secret an issuer refers to: (namespace, name), if it is a CA issuer.
fn ca_secret_of(issuer_key: &Key, issuer: &Value) -> Option<(String, String)> {
    let secret = issuer["spec"]["ca"]["secretName"].as_str()?;
    let ns = if issuer_key.plural == "clusterissuers" {
        "cert-manager".to_string()
    } else {
        issuer_key.namespace.clone()
    };
    Some((ns, secret.to_string()))
}

async fn reconcile_issuer(shared: Arc<Shared>, key: Key, issuer: Value) {
    let Some(rt) = shared.state().find_type(&key.group, "v1", &key.plural) else {
        return;
    };
    let timing = lock(&shared.scenario).timing.clone();
    sleep_ms(timing.issuer_ready_ms).await;
    let generation = issuer["metadata"]["generation"].as_i64().unwrap_or(1);
    let uid = meta(&issuer, "uid");
    let mut changes = shared.changes.subscribe();
    loop {
        let (status, reason, message) = match ca_secret_of(&key, &issuer) {
            None => ("True", "IsReady", ""),
            Some((ns, secret)) => {
                let found = shared
                    .type_for("v1", "Secret")
                    .and_then(|srt| shared.state().get(&Key::new(&srt, &ns, &secret)).cloned())
                    .is_some_and(|s| decode_secret_field(&s, "tls.crt").is_some());
                if found {
                    ("True", "KeyPairVerified", "Signing CA verified")
                } else {
                    (
                        "False",
                        "ErrGetKeyPair",
                        "Error getting keypair for CA issuer: secret not found",
                    )
                }
            }
        };
        let written = shared.modify(
            &rt,
            &key.namespace,
            &key.name,
            Some(&uid),
            "cert-manager-issuers",
            |i| {
                let mut c = condition("Ready", status, reason, message);
                c["observedGeneration"] = json!(generation);
                if let Some(m) = c.as_object_mut() {
                    m.remove("lastProbeTime");
                }
                i["status"]["conditions"] = json!([c]);
            },
        );
        if written.is_none() || status == "True" || !wait_change(&shared, &mut changes).await {
            return;
        }
    }
}

async fn reconcile_certificate(shared: Arc<Shared>, key: Key, cert: Value) {
    let Some(cert_rt) = shared
        .state()
        .find_type("cert-manager.io", "v1", "certificates")
    else {
        return;
    };
    let Some(secret_rt) = shared.type_for("v1", "Secret") else {
        return;
    };
    let timing = lock(&shared.scenario).timing.clone();
    sleep_ms(timing.certificate_ready_ms).await;
    let uid = meta(&cert, "uid");
    let generation = cert["metadata"]["generation"].as_i64().unwrap_or(1);
    let spec = cert["spec"].clone();
    let ns = key.namespace.clone();
    let mut changes = shared.changes.subscribe();
    let issuer_kind = spec["issuerRef"]["kind"]
        .as_str()
        .unwrap_or("Issuer")
        .to_string();
    let issuer_name = spec["issuerRef"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let issued = loop {
        changes.borrow_and_update();
        let issuer_key = Key {
            group: "cert-manager.io".to_string(),
            plural: if issuer_kind == "ClusterIssuer" {
                "clusterissuers"
            } else {
                "issuers"
            }
            .to_string(),
            namespace: if issuer_kind == "ClusterIssuer" {
                String::new()
            } else {
                ns.clone()
            },
            name: issuer_name.clone(),
        };
        let issuer = shared.state().get(&issuer_key).cloned();
        let attempt = match &issuer {
            None => Err(format!(
                "Referenced \"{issuer_kind}\" not found: {issuer_kind}.cert-manager.io \"{issuer_name}\" not found"
            )),
            Some(issuer) => match ca_secret_of(&issuer_key, issuer) {
                None => certs::issue(&spec, Signer::SelfSigned),
                Some((sns, sname)) => {
                    let secret = shared
                        .state()
                        .get(&Key::new(&secret_rt, &sns, &sname))
                        .cloned();
                    match secret.and_then(|s| {
                        Some((
                            decode_secret_field(&s, "tls.crt")?,
                            decode_secret_field(&s, "tls.key")?,
                        ))
                    }) {
                        None => Err(format!("issuer's CA secret {sns}/{sname} not found")),
                        Some((crt, key_pem)) => {
                            let params = lock(&shared.issued_cas).get(&crt).cloned();
                            match params {
                                Some(params) => certs::issue(
                                    &spec,
                                    Signer::Ca {
                                        cert_pem: &crt,
                                        key_pem: &key_pem,
                                        params: Box::new(params),
                                    },
                                ),
                                // A CA this simulation did not issue: its subject is unknown, so
                                // the certificate is self-signed, but ca.crt still names the CA.
                                None => certs::issue(&spec, Signer::SelfSigned).map(|mut i| {
                                    i.ca_crt = crt.clone();
                                    i
                                }),
                            }
                        }
                    }
                }
            },
        };
        match attempt {
            Ok(issued) => break issued,
            Err(message) => {
                let written = shared.modify(
                    &cert_rt,
                    &ns,
                    &key.name,
                    Some(&uid),
                    "cert-manager-certificates-readiness",
                    |c| {
                        let mut cond = condition("Ready", "False", "IssuerNotReady", &message);
                        cond["observedGeneration"] = json!(generation);
                        c["status"]["conditions"] = json!([cond]);
                    },
                );
                if written.is_none() || !wait_change(&shared, &mut changes).await {
                    return;
                }
            }
        }
    };
    if let Some(params) = issued.ca_params.clone() {
        lock(&shared.issued_cas).insert(issued.tls_crt.clone(), params);
    }
    let secret_name = spec["secretName"].as_str().unwrap_or(&key.name).to_string();
    let mut labels = spec["secretTemplate"]["labels"].clone();
    if !labels.is_object() {
        labels = json!({});
    }
    labels["controller.cert-manager.io/fao"] = json!("true");
    let mut annotations = spec["secretTemplate"]["annotations"].clone();
    if !annotations.is_object() {
        annotations = json!({});
    }
    annotations["cert-manager.io/certificate-name"] = json!(key.name);
    annotations["cert-manager.io/issuer-name"] = json!(issuer_name);
    annotations["cert-manager.io/issuer-kind"] = json!(issuer_kind);
    annotations["cert-manager.io/issuer-group"] = json!("cert-manager.io");
    if let Some(cn) = spec["commonName"].as_str() {
        annotations["cert-manager.io/common-name"] = json!(cn);
    }
    let dns: Vec<&str> = spec["dnsNames"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    annotations["cert-manager.io/alt-names"] = json!(dns.join(","));
    let data = json!({
        "tls.crt": B64.encode(&issued.tls_crt),
        "tls.key": B64.encode(&issued.tls_key),
        "ca.crt": B64.encode(&issued.ca_crt),
    });
    let exists = shared
        .state()
        .get(&Key::new(&secret_rt, &ns, &secret_name))
        .is_some();
    if exists {
        shared.modify(
            &secret_rt,
            &ns,
            &secret_name,
            None,
            "cert-manager-certificates-issuing",
            |s| {
                s["type"] = json!("kubernetes.io/tls");
                s["data"] = data.clone();
                crate::patch::merge_patch(&mut s["metadata"]["labels"], &labels);
                crate::patch::merge_patch(&mut s["metadata"]["annotations"], &annotations);
            },
        );
    } else {
        let secret = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": {"name": secret_name, "labels": labels, "annotations": annotations},
            "data": data,
        });
        shared.create_internal(&secret_rt, &ns, secret, "cert-manager-certificates-issuing");
    }
    let not_before = now();
    let not_after = crate::engine::format_time(crate::engine::now_seconds() + 90 * 24 * 3600);
    shared.modify(
        &cert_rt,
        &ns,
        &key.name,
        Some(&uid),
        "cert-manager-certificates-readiness",
        |c| {
            let mut cond = condition(
                "Ready",
                "True",
                "Ready",
                "Certificate is up to date and has not expired",
            );
            cond["observedGeneration"] = json!(generation);
            if let Some(m) = cond.as_object_mut() {
                m.remove("lastProbeTime");
            }
            c["status"]["conditions"] = json!([cond]);
            c["status"]["notBefore"] = json!(not_before);
            c["status"]["notAfter"] = json!(not_after);
            c["status"]["revision"] = json!(c["status"]["revision"].as_i64().unwrap_or(0) + 1);
        },
    );
}
