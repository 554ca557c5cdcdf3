//! The same requests against `uyuni-sim` and the real control plane (upstream kube-apiserver
//! v1.37, `scripts/cluster.sh`), through kube-rs and a few through the real kubectl: namespace
//! creation, server-side apply of the objects a migration writes (taken from core's preview,
//! `golden/preview-empty-cluster/`), an unchanged re-apply, `dryRun=All`, conflicting
//! applies, objects validation refuses, missing objects, a watch on Jobs, deletes with
//! propagation and a SelfSubjectAccessReview.
//!
//! Each answer is reduced to what a client relies on (status code, `reason`, the causes' field
//! paths, managed fields, what the server added to what was sent), with what legitimately differs
//! (uids, resourceVersions, timestamps, cluster IPs) left out. Every point must be equal on both
//! servers, except those in [`expected_differences`]: there both answers are asserted as they
//! are, and `testdata/README.md`'s "Differences from a real API server" table has the row. So the
//! test fails when either server changes behaviour on a compared point, and when a listed
//! difference disappears (then the table and the list lose the row).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt as _;
use http_body_util::BodyExt as _;
use kube::api::{Api, DynamicObject, WatchEvent, WatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::ApiResource;
use serde_json::{Value, json};
use uyuni_testdata::real::{self, RealCluster, RealConfig};
use uyuni_testdata::{SimCluster, SimConfig, scenarios};

const NS: &str = "uyuni";
const APPLY: &str = "application/apply-patch+yaml";
const MERGE: &str = "application/merge-patch+json";

/// A point of comparison: its name and the normalised answer.
type Points = Vec<(String, Value)>;

async fn client_for(kubeconfig: &std::path::Path) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).expect("readable kubeconfig");
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("valid kubeconfig");
    // What the server answers, not what the client's retries make of it.
    config.default_retry = false;
    kube::Client::try_from(config).expect("client")
}

/// One request: (status code, body as JSON, or the text as a string).
async fn send(
    client: &kube::Client,
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut req = http::Request::builder().method(method).uri(uri);
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    let body = match body {
        Some(b) => kube::client::Body::from(b.to_string().into_bytes()),
        None => kube::client::Body::empty(),
    };
    let resp = client
        .send(req.body(body).expect("valid request"))
        .await
        .unwrap_or_else(|e| panic!("{method} {uri}: {e}"));
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .expect("body read")
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// The plural resource of a kind this test writes.
fn plural(kind: &str) -> &'static str {
    match kind {
        "Namespace" => "namespaces",
        "Secret" => "secrets",
        "ConfigMap" => "configmaps",
        "PersistentVolumeClaim" => "persistentvolumeclaims",
        "ServiceAccount" => "serviceaccounts",
        "Service" => "services",
        "Role" => "roles",
        "RoleBinding" => "rolebindings",
        "Deployment" => "deployments",
        "Job" => "jobs",
        "Issuer" => "issuers",
        "Certificate" => "certificates",
        other => panic!("no resource known for kind {other}"),
    }
}

/// The object's URL path (namespaced unless a Namespace).
fn url(obj: &Value) -> String {
    let api_version = obj["apiVersion"].as_str().expect("apiVersion");
    let kind = obj["kind"].as_str().expect("kind");
    let name = obj["metadata"]["name"].as_str().expect("name");
    let prefix = if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    };
    if kind == "Namespace" {
        format!("{prefix}/namespaces/{name}")
    } else {
        format!("{prefix}/namespaces/{NS}/{}/{name}", plural(kind))
    }
}

fn apply_url(obj: &Value, manager: &str, force: bool, dry_run: bool) -> String {
    let mut url = format!("{}?fieldManager={manager}", url(obj));
    if force {
        url.push_str("&force=true");
    }
    if dry_run {
        url.push_str("&dryRun=All");
    }
    url
}

/// Every leaf of a JSON value by path (`spec.ports[0].port`); empty objects and arrays are
/// leaves too.
fn leaves(value: &Value, path: &str, out: &mut BTreeMap<String, Value>) {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                leaves(v, &join(k), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                leaves(v, &format!("{path}[{i}]"), out);
            }
        }
        other => {
            out.insert(path.to_owned(), other.clone());
        }
    }
}

fn without_indices(path: &str) -> String {
    let mut out = String::new();
    let mut in_index = false;
    for c in path.chars() {
        match c {
            '[' => {
                in_index = true;
                out.push_str("[]");
            }
            ']' => in_index = false,
            c if !in_index => out.push(c),
            _ => {}
        }
    }
    out
}

/// What a server's answer to a write says beyond identity and time: the generation, who manages
/// which fields, what it lost of what was sent, what it added (outside pod templates, values
/// that are allocated replaced by their kind), and which fields it defaulted in pod templates.
fn written_view(sent: &Value, got: &Value) -> Value {
    let uid = got["metadata"]["uid"]
        .as_str()
        .unwrap_or("<none>")
        .to_owned();
    let managed: Vec<Value> = got["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut m| {
            if let Some(m) = m.as_object_mut() {
                m.remove("time");
            }
            m
        })
        .collect();
    let mut sent_leaves = BTreeMap::new();
    leaves(sent, "", &mut sent_leaves);
    let mut got_leaves = BTreeMap::new();
    leaves(got, "", &mut got_leaves);
    let lost: BTreeMap<&String, Value> = sent_leaves
        .iter()
        .filter(|(p, v)| got_leaves.get(*p) != Some(v))
        .map(|(p, v)| (p, json!({"sent": v, "stored": got_leaves.get(p)})))
        .collect();
    let mut added = BTreeMap::new();
    let mut template_defaults = std::collections::BTreeSet::new();
    for (path, value) in &got_leaves {
        if sent_leaves.contains_key(path)
            || path.starts_with("status")
            || [
                "metadata.uid",
                "metadata.resourceVersion",
                "metadata.creationTimestamp",
                "metadata.generation",
            ]
            .contains(&path.as_str())
            || path.starts_with("metadata.managedFields")
        {
            continue;
        }
        if let Some(rest) = path.strip_prefix("spec.template.spec.") {
            template_defaults.insert(without_indices(rest));
            continue;
        }
        let value = match value {
            Value::String(s) if s == &uid => json!("<uid>"),
            Value::String(_) if path.starts_with("spec.clusterIP") => json!("<allocated IP>"),
            other => other.clone(),
        };
        added.insert(path.clone(), value);
    }
    json!({
        "generation": got["metadata"]["generation"],
        "managedFields": managed,
        "lost": lost,
        "added": added,
        "templateDefaults": template_defaults,
    })
}

/// A refusal as a client sees it: code, reason, details and causes (field, reason); the
/// message too, where `with_message`.
fn status_view(code: u16, body: &Value, with_message: bool) -> Value {
    let mut causes: Vec<Value> = body["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|c| json!({"field": c["field"], "reason": c["reason"]}))
        .collect();
    causes.sort_by_key(|c| c.to_string());
    let mut view = json!({
        "code": code,
        "kind": body["kind"],
        "status": body["status"],
        "reason": body["reason"],
        "details": {
            "name": body["details"]["name"],
            "group": body["details"]["group"],
            "kind": body["details"]["kind"],
            "causes": causes,
        },
    });
    if with_message {
        view["message"] = body["message"].clone();
    }
    view
}

/// The objects of a migration, as core's preview of a migration into an empty cluster writes
/// them: the first of each kind, and the server's Deployment (the most ports and volumes).
/// Their golden files hold Job scripts as a marker line; a Job runs no container here, so the
/// command's text does not matter to the API servers.
fn migration_objects() -> Vec<Value> {
    let dir = uyuni_testdata::golden::golden_dir().join("preview-empty-cluster");
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .unwrap_or_else(|e| panic!("core's golden preview, {name}: {e}"))
    };
    // The step order of `plan.json` (`-o json`): the order the plugin writes them in.
    let plan: Value = serde_json::from_str(&read("plan.json")).expect("plan.json");
    let file_of = |kind: &str, name: &str| format!("{}-{name}.yaml", kind.to_ascii_lowercase());
    let mut kinds = std::collections::BTreeSet::new();
    plan["steps"]
        .as_array()
        .expect("steps")
        .iter()
        // The steps that write an object; those that read or wait name one written before.
        .filter(|s| ["create", "update", "run-job"].contains(&s["op"].as_str().unwrap_or_default()))
        .map(|s| {
            (
                s["target"]["kind"].as_str().unwrap_or_default(),
                s["target"]["name"].as_str().unwrap_or_default(),
            )
        })
        .filter(|(kind, name)| {
            // The SSH ConfigMap too, whatever ConfigMap comes first: the points on field
            // ownership contend for its `data.config`.
            kinds.insert(kind.to_owned())
                || (*kind == "Deployment" && *name == "uyuni")
                || (*kind == "ConfigMap" && *name == "uyuni-migration-ssh")
        })
        .map(|(kind, name)| {
            serde_saphyr::from_str(&read(&file_of(kind, name))).expect("YAML object")
        })
        .collect()
}

fn dup_ports_deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "dup-ports", "namespace": NS},
        "spec": {
            "selector": {"matchLabels": {"app": "dup"}},
            "template": {
                "metadata": {"labels": {"app": "dup"}},
                "spec": {"containers": [{
                    "name": "uyuni",
                    "image": "registry.opensuse.org/uyuni/server:latest",
                    "ports": [
                        {"name": "jmx", "containerPort": 5556},
                        {"name": "jmx", "containerPort": 5557},
                    ],
                }]},
            },
        },
    })
}

fn config_map(name: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS},
        "data": data,
    })
}

fn job(name: &str, command: &str) -> Value {
    json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "main",
                    "image": "registry.opensuse.org/uyuni/server:latest",
                    "command": ["bash", "-c", command],
                }],
            }},
        },
    })
}

/// Polls `f` until it gives `Some`, for at most a minute (the garbage collector and the
/// controllers act in their own time on the real plane).
async fn eventually<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "within 60 s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The sequence of requests, against one server; the normalised answers in order.
async fn run(client: &kube::Client, kubeconfig: &std::path::Path) -> Points {
    let mut points: Points = Vec::new();
    // A write's view is compared part by part, so that a listed difference names the part.
    let mut point = |name: &str, mut value: Value| {
        let mut parts = Vec::new();
        if let Some(m) = value.as_object_mut() {
            for key in ["added", "lost", "managedFields", "templateDefaults"] {
                if let Some(v) = m.remove(key) {
                    parts.push((format!("{name}: {key}"), v));
                }
            }
        }
        points.push((name.to_owned(), value));
        points.extend(parts);
    };

    // The namespace, created (not applied), as the planner's first step does on an empty cluster.
    let objects = migration_objects();
    let namespace = objects
        .iter()
        .find(|o| o["kind"] == "Namespace")
        .expect("a Namespace")
        .clone();
    let (code, got) = send(
        client,
        "POST",
        "/api/v1/namespaces?fieldManager=kubectl-uyuni",
        Some("application/json"),
        Some(&namespace),
    )
    .await;
    let mut view = written_view(&namespace, &got);
    view["code"] = json!(code);
    view["spec"] = got["spec"].clone();
    view["phase"] = got["status"]["phase"].clone();
    point("create Namespace", view);

    // Server-side apply of each object, then the same again.
    for obj in objects.iter().filter(|o| o["kind"] != "Namespace") {
        let what = format!(
            "{}/{}",
            obj["kind"].as_str().unwrap_or_default(),
            obj["metadata"]["name"].as_str().unwrap_or_default()
        );
        let (code, got) = send(
            client,
            "PATCH",
            &apply_url(obj, "kubectl-uyuni", true, false),
            Some(APPLY),
            Some(obj),
        )
        .await;
        let mut view = if code < 300 {
            written_view(obj, &got)
        } else {
            status_view(code, &got, true)
        };
        view["code"] = json!(code);
        point(&format!("apply {what}"), view);

        let (code, again) = send(
            client,
            "PATCH",
            &apply_url(obj, "kubectl-uyuni", true, false),
            Some(APPLY),
            Some(obj),
        )
        .await;
        let same_version =
            again["metadata"]["resourceVersion"] == got["metadata"]["resourceVersion"];
        // A controller may have written status between the two (Jobs, Deployments, claims,
        // cert-manager's kinds): then the generation, the spec and our managed fields (their
        // time included) say whether the apply changed the object.
        let ours = |o: &Value| {
            o["metadata"]["managedFields"]
                .as_array()
                .and_then(|m| m.iter().find(|e| e["manager"] == "kubectl-uyuni").cloned())
        };
        let kind = obj["kind"].as_str().unwrap_or_default();
        // A claim's binder writes `spec.volumeName`: uyuni-sim's default class binds at once
        // (`Immediate`, testdata/src/cluster.rs), the real cluster's local-path waits for a pod
        // (`WaitForFirstConsumer`, as k3s's), and under load the binding fell between the two
        // applies. The controller's field, not a change of ours.
        let spec = |o: &Value| {
            let mut spec = o["spec"].clone();
            if kind == "PersistentVolumeClaim"
                && let Some(spec) = spec.as_object_mut()
            {
                spec.remove("volumeName");
            }
            spec
        };
        let same_ours = again["metadata"]["generation"] == got["metadata"]["generation"]
            && spec(&again) == spec(&got)
            && ours(&again).is_some()
            && ours(&again) == ours(&got);
        let controlled = [
            "Job",
            "Deployment",
            "PersistentVolumeClaim",
            "Certificate",
            "Issuer",
        ]
        .contains(&kind);
        point(
            &format!("re-apply unchanged {what}"),
            json!({
                "code": code,
                "unchanged": if controlled { same_ours } else { same_version && same_ours },
            }),
        );
    }

    // dryRun=All: an update and a create are answered as if done, and nothing is stored.
    let mut changed = config_map("uyuni-migration-ssh", json!({"config": "Port 2222\n"}));
    let (code, got) = send(
        client,
        "PATCH",
        &apply_url(&changed, "kubectl-uyuni", true, true),
        Some(APPLY),
        Some(&changed),
    )
    .await;
    let (_, stored) = send(client, "GET", &url(&changed), None, None).await;
    point(
        "dry-run apply of a change",
        json!({
            "code": code,
            "answered": got["data"]["config"],
            "stored": stored["data"]["config"],
            "same resourceVersion": got["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"],
        }),
    );
    let fresh = config_map("dry-run-only", json!({"a": "b"}));
    let (code, got) = send(
        client,
        "PATCH",
        &apply_url(&fresh, "kubectl-uyuni", true, true),
        Some(APPLY),
        Some(&fresh),
    )
    .await;
    let (stored, _) = send(client, "GET", &url(&fresh), None, None).await;
    point(
        "dry-run apply of a new object",
        json!({"code": code, "answered": got["data"], "uid given": got["metadata"]["uid"].is_string(), "GET after": stored}),
    );

    // Another manager changes a field ours owns: 409 without force, taken over with it.
    changed["data"] = json!({"config": "Port 2222\n"});
    let (code, got) = send(
        client,
        "PATCH",
        &apply_url(&changed, "someone-else", false, false),
        Some(APPLY),
        Some(&changed),
    )
    .await;
    point("conflicting apply", status_view(code, &got, true));
    let (code, got) = send(
        client,
        "PATCH",
        &apply_url(&changed, "someone-else", true, false),
        Some(APPLY),
        Some(&changed),
    )
    .await;
    let mut view = written_view(&changed, &got);
    view["code"] = json!(code);
    point("forced apply by another manager", view);

    // A merge patch (what `kubectl patch` sends): an Update entry of its own.
    let (code, got) = send(
        client,
        "PATCH",
        &format!("{}?fieldManager=kubectl-patch", url(&changed)),
        Some(MERGE),
        Some(&json!({"metadata": {"labels": {"patched": "yes"}}})),
    )
    .await;
    let mut view = written_view(&changed, &got);
    view["code"] = json!(code);
    point("merge patch by a third manager", view);
    // Applying a field an update owns conflicts too; forced, it changes hands.
    let mut ours = objects
        .iter()
        // The SSH ConfigMap: its `data.config` is the field the points below contend for.
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "uyuni-migration-ssh")
        .expect("ConfigMap uyuni-migration-ssh")
        .clone();
    ours["metadata"]["labels"]["patched"] = json!("no");
    let (code, got) = send(
        client,
        "PATCH",
        &apply_url(&ours, "kubectl-uyuni", false, false),
        Some(APPLY),
        Some(&ours),
    )
    .await;
    point(
        "apply over a field an update owns",
        status_view(code, &got, true),
    );
    let (code, got) = send(
        client,
        "PATCH",
        &apply_url(&ours, "kubectl-uyuni", true, false),
        Some(APPLY),
        Some(&ours),
    )
    .await;
    let mut view = written_view(&ours, &got);
    view["code"] = json!(code);
    point("forced apply over a field an update owns", view);

    // Refused by validation.
    let dup = dup_ports_deployment();
    let (code, got) = send(
        client,
        "PATCH",
        &apply_url(&dup, "kubectl-uyuni", true, false),
        Some(APPLY),
        Some(&dup),
    )
    .await;
    point(
        "duplicate container port names",
        status_view(code, &got, true),
    );
    let (code, got) = send(
        client,
        "POST",
        &format!("/apis/apps/v1/namespaces/{NS}/deployments"),
        Some("application/json"),
        Some(&dup),
    )
    .await;
    point(
        "duplicate container port names (create)",
        status_view(code, &got, true),
    );
    let mut bad_label = config_map("bad-label", json!({}));
    bad_label["metadata"]["labels"] = json!({"app.kubernetes.io/component": "a".repeat(64)});
    let (code, got) = send(
        client,
        "PATCH",
        &apply_url(&bad_label, "kubectl-uyuni", true, false),
        Some(APPLY),
        Some(&bad_label),
    )
    .await;
    point(
        "label value of 64 characters",
        status_view(code, &got, true),
    );
    let first = job("immutable", "rsync -a src/ dst/");
    let (code, _) = send(
        client,
        "PATCH",
        &apply_url(&first, "kubectl-uyuni", true, false),
        Some(APPLY),
        Some(&first),
    )
    .await;
    point("apply Job immutable", json!({"code": code}));
    let second = job("immutable", "rsync -a --checksum src/ dst/");
    let (code, got) = send(
        client,
        "PATCH",
        &apply_url(&second, "kubectl-uyuni", true, false),
        Some(APPLY),
        Some(&second),
    )
    .await;
    point("changed Job template", status_view(code, &got, false));
    let (_, stored) = send(client, "GET", &url(&first), None, None).await;
    point(
        "Job template after the refusal",
        stored["spec"]["template"]["spec"]["containers"][0]["command"].clone(),
    );

    // A missing object, of a built-in kind and of a custom resource.
    let (code, got) = send(
        client,
        "GET",
        &format!("/api/v1/namespaces/{NS}/configmaps/missing"),
        None,
        None,
    )
    .await;
    point("get a missing ConfigMap", status_view(code, &got, true));
    let (code, got) = send(
        client,
        "GET",
        &format!("/apis/cert-manager.io/v1/namespaces/{NS}/certificates/missing"),
        None,
        None,
    )
    .await;
    point("get a missing Certificate", status_view(code, &got, true));
    let (code, got) = send(client, "GET", "/api/v1/namespaces/missing", None, None).await;
    point("get a missing Namespace", status_view(code, &got, true));

    // A watch on Jobs: the new Job ADDED, then MODIFIED by the Job controller.
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk("batch", "v1", "Job")),
    );
    let (_, list) = send(
        client,
        "GET",
        &format!("/apis/batch/v1/namespaces/{NS}/jobs"),
        None,
        None,
    )
    .await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("list resourceVersion")
        .to_owned();
    let mut stream = jobs
        .watch(
            &WatchParams::default()
                .fields("metadata.name=watched")
                .timeout(120),
            &rv,
        )
        .await
        .expect("watch starts")
        .boxed();
    let watched = job("watched", "true");
    let (code, _) = send(
        client,
        "POST",
        &format!("/apis/batch/v1/namespaces/{NS}/jobs"),
        Some("application/json"),
        Some(&watched),
    )
    .await;
    assert_eq!(code, 201, "create Job watched");
    let mut seen: Vec<&str> = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(event) = stream.next().await {
            let event = event.expect("watch event");
            let kind = match event {
                WatchEvent::Added(_) => "ADDED",
                WatchEvent::Modified(_) => "MODIFIED",
                WatchEvent::Deleted(_) => "DELETED",
                WatchEvent::Bookmark(_) => continue,
                WatchEvent::Error(e) => panic!("watch error: {e:?}"),
            };
            if seen.last() != Some(&kind) {
                seen.push(kind);
            }
            if kind == "MODIFIED" {
                break;
            }
        }
    })
    .await
    .expect("the Job modified within 60 s");
    point("watch on Jobs", json!(seen));
    drop(stream);

    // Deletes: Foreground on the Job (its pods first), Background on the Deployment.
    let (code, got) = send(
        client,
        "DELETE",
        &format!("{}?propagationPolicy=Foreground", url(&watched)),
        None,
        None,
    )
    .await;
    point(
        "delete Job with Foreground propagation",
        json!({
            "code": code,
            "kind": got["kind"],
            "deletionTimestamp set": got["metadata"]["deletionTimestamp"].is_string(),
            "finalizers": got["metadata"]["finalizers"],
        }),
    );
    eventually("Job watched and its pods gone", async || {
        let (job, _) = send(client, "GET", &url(&watched), None, None).await;
        let (_, pods) = send(
            client,
            "GET",
            &format!("/api/v1/namespaces/{NS}/pods?labelSelector=job-name%3Dwatched"),
            None,
            None,
        )
        .await;
        (job == 404 && pods["items"].as_array().is_some_and(Vec::is_empty)).then_some(())
    })
    .await;
    let server = objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "uyuni")
        .expect("Deployment uyuni");
    let (code, got) = send(
        client,
        "DELETE",
        &format!("{}?propagationPolicy=Background", url(server)),
        None,
        None,
    )
    .await;
    point(
        "delete Deployment with Background propagation",
        json!({
            "code": code,
            "kind": got["kind"],
            "deletionTimestamp set": got["metadata"]["deletionTimestamp"].is_string(),
            "finalizers": got["metadata"]["finalizers"],
        }),
    );
    let selector = "app.kubernetes.io/component%3Dserver";
    eventually("the Deployment's pods collected", async || {
        let (_, pods) = send(
            client,
            "GET",
            &format!("/api/v1/namespaces/{NS}/pods?labelSelector={selector}"),
            None,
            None,
        )
        .await;
        pods["items"]
            .as_array()
            .is_some_and(Vec::is_empty)
            .then_some(())
    })
    .await;
    let (code, _) = send(
        client,
        "GET",
        &format!("/apis/apps/v1/namespaces/{NS}/replicasets"),
        None,
        None,
    )
    .await;
    point("list ReplicaSets", json!({"code": code}));
    let (code, got) = send(client, "DELETE", &url(server), None, None).await;
    point("delete a deleted Deployment", status_view(code, &got, true));

    // What the plugin asks before writing.
    let review = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {
            "namespace": NS, "verb": "create", "group": "batch", "resource": "jobs",
        }},
    });
    let (code, got) = send(
        client,
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        Some("application/json"),
        Some(&review),
    )
    .await;
    point(
        "SelfSubjectAccessReview",
        json!({"code": code, "kind": got["kind"], "spec": got["spec"], "allowed": got["status"]["allowed"]}),
    );

    // The same through the real kubectl, as a user reads it.
    let dup = serde_json::to_string(&dup_ports_deployment()).expect("JSON");
    point(
        "kubectl apply --server-side of duplicate port names",
        kubectl(kubeconfig, &["apply", "--server-side", "-f", "-"], &dup).await,
    );
    point(
        "kubectl get a missing ConfigMap",
        kubectl(kubeconfig, &["get", "configmap", "missing", "-n", NS], "").await,
    );
    point(
        "kubectl auth can-i create jobs",
        kubectl(
            kubeconfig,
            &["auth", "can-i", "create", "jobs", "-n", NS],
            "",
        )
        .await,
    );
    point(
        "kubectl get the ConfigMap's data",
        kubectl(
            kubeconfig,
            &[
                "get",
                "configmap",
                "uyuni-migration-ssh",
                "-n",
                NS,
                "-o",
                "jsonpath={.data}",
            ],
            "",
        )
        .await,
    );

    points
}

/// `kubectl --kubeconfig KUBECONFIG ARGS…` (kubectl 1.37 from `UYUNI_KUBECTL_137`, else the one
/// on PATH) with `stdin`: its exit code, stdout and stderr.
async fn kubectl(kubeconfig: &std::path::Path, args: &[&str], stdin: &str) -> Value {
    use tokio::io::AsyncWriteExt as _;
    let bin = std::env::var("UYUNI_KUBECTL_137").unwrap_or_else(|_| "kubectl".to_owned());
    let cache = tempfile::tempdir().expect("tempdir");
    let mut child = tokio::process::Command::new(bin)
        .env("KUBECACHEDIR", cache.path())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).await.expect("stdin");
    }
    let out = child.wait_with_output().await.expect("kubectl ends");
    json!({
        "exit": out.status.code(),
        "stdout": String::from_utf8_lossy(&out.stdout),
        "stderr": String::from_utf8_lossy(&out.stderr),
    })
}

/// How the real apiserver's answer differs from uyuni-sim's at a point.
enum Expect {
    /// Both answers, as they are.
    Answers(Value, Value),
    /// The real answer is uyuni-sim's with these edits: (JSON pointer, the value there, or
    /// `None`: absent).
    RealIsSimWith(Vec<(String, Option<Value>)>),
}

fn edit(mut value: Value, edits: &[(String, Option<Value>)]) -> Value {
    for (pointer, new) in edits {
        let (parent, key) = pointer.rsplit_once('/').expect("a JSON pointer");
        let key = key.replace("~1", "/").replace("~0", "~");
        let Some(Value::Object(m)) = value.pointer_mut(parent) else {
            return json!({"no object at": parent});
        };
        match new {
            Some(v) => {
                m.insert(key, v.clone());
            }
            None => {
                if m.remove(&key).is_none() {
                    return json!({"nothing to remove at": pointer});
                }
            }
        }
    }
    value
}

const JOB: &str = "apply Job/uyuni-image-check-server-20261129180000";

/// Where the two servers answer differently, by point. Each is a row of testdata/README.md's
/// "Differences from a real API server"; uyuni-sim was made to agree where that was cheap.
fn expected_differences() -> BTreeMap<String, Expect> {
    use Expect::{Answers, RealIsSimWith};
    let template_defaults = |extra: &[&str]| {
        let mut all = vec![
            "containers[].terminationMessagePath",
            "containers[].terminationMessagePolicy",
            "dnsPolicy",
            "schedulerName",
        ];
        all.extend_from_slice(extra);
        all.sort_unstable();
        Answers(json!([]), json!(all))
    };
    let probes = [
        "containers[].livenessProbe.successThreshold",
        "containers[].readinessProbe.successThreshold",
        "containers[].startupProbe.successThreshold",
        "restartPolicy",
        "volumes[].secret.defaultMode",
    ];
    [
        // Update operations own what the created object holds, the server's label included.
        (
            "create Namespace: managedFields".to_owned(),
            RealIsSimWith(vec![
                ("/0/fieldsV1/f:metadata/f:labels/.".into(), Some(json!({}))),
                (
                    "/0/fieldsV1/f:metadata/f:labels/f:kubernetes.io~1metadata.name".into(),
                    Some(json!({})),
                ),
            ]),
        ),
        // Pod templates are not defaulted by uyuni-sim. Every pod sets its securityContext (the
        // seccomp profile) and every container its resources (core/src/builders/hardening.rs),
        // so the apiserver defaults neither.
        (
            format!("{JOB}: templateDefaults"),
            template_defaults(&["terminationGracePeriodSeconds"]),
        ),
        (
            "apply Deployment/db: templateDefaults".to_owned(),
            template_defaults(
                &[
                    &probes[..],
                    &[
                        "initContainers[].terminationMessagePath",
                        "initContainers[].terminationMessagePolicy",
                    ],
                ]
                .concat(),
            ),
        ),
        (
            "apply Deployment/uyuni: templateDefaults".to_owned(),
            template_defaults(
                &[&probes[..], &["containers[].readinessProbe.httpGet.scheme"]].concat(),
            ),
        ),
        // The StorageObjectInUseProtection admission plugin.
        (
            "apply PersistentVolumeClaim/var-cobbler: added".to_owned(),
            RealIsSimWith(vec![(
                "/metadata.finalizers[0]".into(),
                Some(json!("kubernetes.io/pvc-protection")),
            )]),
        ),
        // Message wording: uyuni-sim's is that of 1.27–1.33.
        (
            "label value of 64 characters".to_owned(),
            RealIsSimWith(vec![(
                "/message".into(),
                Some(json!(format!(
                    "ConfigMap \"bad-label\" is invalid: metadata.labels: Invalid value: \
                     \"{}\": must be no more than 63 bytes",
                    "a".repeat(64)
                ))),
            )]),
        ),
        (
            "apply over a field an update owns".to_owned(),
            RealIsSimWith(vec![(
                "/message".into(),
                Some(json!(
                    "Apply failed with 2 conflicts: conflicts with \"kubectl-patch\" using \
                     v1:\n- .metadata.labels.patched\nconflicts with \"someone-else\":\n- \
                     .data.config"
                )),
            )]),
        ),
        // Garbage collection: uyuni-sim deletes dependents at once, whatever the propagation.
        (
            "delete Job with Foreground propagation".to_owned(),
            RealIsSimWith(vec![
                ("/deletionTimestamp set".into(), Some(json!(true))),
                ("/finalizers".into(), Some(json!(["foregroundDeletion"]))),
            ]),
        ),
        // A delete done at once answers a Status upstream (`ReturnDeletedObject` is false for
        // Deployments); uyuni-sim answers the object.
        (
            "delete Deployment with Background propagation".to_owned(),
            RealIsSimWith(vec![("/kind".into(), Some(json!("Status")))]),
        ),
        // uyuni-sim's Deployment controller makes pods without ReplicaSets.
        (
            "list ReplicaSets".to_owned(),
            Answers(json!({"code": 404}), json!({"code": 200})),
        ),
    ]
    .into_iter()
    .collect()
}

#[test]
fn the_same_requests_get_the_same_answers_from_uyuni_sim_and_the_real_apiserver() {
    if let Err(why) = real::available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the real control plane is needed in CI: {why}"
        );
        println!("uyuni-sim NOT compared with the real apiserver: {why}");
        return;
    }
    // The plane starts (15–20 s) while the sim answers.
    let starting = std::thread::spawn(|| {
        RealCluster::start_config(&RealConfig {
            scenario: Some(scenarios::migration()),
            ..RealConfig::default()
        })
    });
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let sim_points = runtime.block_on(async {
        let sim = SimCluster::start(SimConfig {
            scenario: scenarios::migration(),
            server_minor: 37,
            ..SimConfig::default()
        })
        .await
        .expect("uyuni-sim starts");
        run(
            &client_for(sim.kubeconfig_path()).await,
            sim.kubeconfig_path(),
        )
        .await
    });
    let cluster = starting
        .join()
        .expect("the start did not panic")
        .expect("the real control plane starts");
    let real_points = runtime.block_on(async {
        run(
            &client_for(&cluster.kubeconfig_path()).await,
            &cluster.kubeconfig_path(),
        )
        .await
    });

    let names = |p: &Points| p.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&sim_points), names(&real_points));
    let expected = expected_differences();
    let mut failures = Vec::new();
    for ((name, sim), (_, real)) in sim_points.iter().zip(&real_points) {
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
        match expected.get(name.as_str()) {
            None if sim != real => failures.push(format!(
                "{name}: the servers disagree\n  uyuni-sim: {}\n  real:      {}",
                pretty(sim),
                pretty(real)
            )),
            None => {}
            Some(expect) => {
                if sim == real {
                    failures.push(format!(
                        "{name}: listed as a difference, but both answer {}",
                        pretty(sim)
                    ));
                }
                let (want_sim, want_real) = match expect {
                    Expect::Answers(s, r) => (s.clone(), r.clone()),
                    Expect::RealIsSimWith(edits) => (sim.clone(), edit(sim.clone(), edits)),
                };
                if *sim != want_sim {
                    failures.push(format!(
                        "{name}: uyuni-sim changed\n  expected: {}\n  answered: {}",
                        pretty(&want_sim),
                        pretty(sim)
                    ));
                }
                if *real != want_real {
                    failures.push(format!(
                        "{name}: the real apiserver changed\n  expected: {}\n  answered: {}",
                        pretty(&want_real),
                        pretty(real)
                    ));
                }
            }
        }
    }
    for name in expected.keys() {
        assert!(
            sim_points.iter().any(|(n, _)| n == name),
            "expected difference {name:?} names no point"
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} points:\n\n{}",
        failures.len(),
        sim_points.len(),
        failures.join("\n\n")
    );
    cluster.stop().expect("down");
}
