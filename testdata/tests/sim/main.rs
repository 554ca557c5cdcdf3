//! Tests of the simulated cluster through kube-rs and raw HTTP: API semantics, controllers,
//! faults. (One test binary: linking kube-rs once keeps the build short.)

mod api;
mod controllers;
mod faults;
mod kube_rs;

use std::time::Duration;

use http_body_util::BodyExt as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};
use uyuni_testdata::{SimCluster, SimConfig};

/// A kube-rs client for the sim's kubeconfig (context `context`), with the client's own
/// retries off so that tests see exactly what the server answers.
pub async fn client_for(sim: &SimCluster, context: Option<&str>, retry: bool) -> kube::Client {
    let kubeconfig = Kubeconfig::read_from(sim.kubeconfig_path()).expect("readable kubeconfig");
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .expect("valid kubeconfig");
    config.default_retry = retry;
    kube::Client::try_from(config).expect("client")
}

pub async fn client(sim: &SimCluster) -> kube::Client {
    client_for(sim, None, false).await
}

pub async fn start(config: SimConfig) -> SimCluster {
    SimCluster::start(config).await.expect("sim starts")
}

/// A raw request: (status, headers, body text).
pub async fn raw(
    client: &kube::Client,
    method: &str,
    uri: &str,
    content_type: Option<&str>,
    accept: Option<&str>,
    body: Option<Value>,
) -> (u16, http::HeaderMap, String) {
    let mut req = http::Request::builder().method(method).uri(uri);
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let body = match body {
        Some(b) => kube::client::Body::from(b.to_string().into_bytes()),
        None => kube::client::Body::empty(),
    };
    let resp = client
        .send(req.body(body).expect("valid request"))
        .await
        .expect("request sent");
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .expect("body read")
        .to_bytes();
    (
        status,
        headers,
        String::from_utf8_lossy(&bytes).into_owned(),
    )
}

pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// A minimal Job (restartPolicy Never) with the step annotation.
pub fn job(name: &str, step: Option<&str>) -> Value {
    let mut job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "uyuni"},
        "spec": {
            "backoffLimit": 0,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "registry.opensuse.org/uyuni/server:latest"}],
            }},
        },
    });
    if let Some(step) = step {
        job["metadata"]["annotations"] = json!({"kubectl-uyuni.io/step": step});
    }
    job
}

pub fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// Fast timings, so controller tests take milliseconds.
pub fn fast() -> uyuni_testdata::Timing {
    uyuni_testdata::Timing {
        pod_create_ms: 5,
        pod_start_ms: 5,
        default_job_ms: 20,
        deployment_ready_ms: 20,
        pvc_bind_ms: 5,
        certificate_ready_ms: 5,
        issuer_ready_ms: 5,
        namespace_delete_ms: 5,
    }
}

pub const WAIT: Duration = Duration::from_secs(10);

/// The condition `kind` of an object's status is `status`.
pub fn has_condition(obj: &Value, kind: &str, status: &str) -> bool {
    obj["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == json!(kind) && c["status"] == json!(status))
    })
}
