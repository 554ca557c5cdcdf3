//! The Node object and its Lease, as a kubelet registers and renews them. What the scheduler
//! and the node-lifecycle controller read is in the shared notes (§4, after kwok's
//! `kustomize/stage/node/fast/node-initialize.yaml` and `pkg/kwok/controllers/node_lease_controller.go`).

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// What a kubelet reports of itself; `kubectl get nodes -o wide` shows it.
pub const KUBELET_VERSION: &str = "v1.37.2";
/// The Lease duration a kubelet uses by default (`--node-lease-duration-seconds`).
pub const LEASE_DURATION_SECONDS: i32 = 40;
/// How often the Lease is renewed: a kubelet renews every quarter of the duration.
pub const LEASE_RENEW_SECONDS: u64 = 10;

pub fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// `metav1.MicroTime` as the apiserver writes it.
pub fn now_micro() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S.%6fZ")
        .to_string()
}

/// The Node as created: labels only (the apiserver keeps what a create says of status, but a
/// kubelet writes it through `nodes/status` anyway, and so do we).
pub fn node_object(name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            // The labels a kubelet sets itself (NodeRestriction lets it set these:
            // plugin/pkg/admission/noderestriction/admission.go, kubeletapis labels).
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
                "node.kubernetes.io/instance-type": "uyuni-node-agent",
            },
        },
        "spec": {},
    })
}

fn condition(kind: &str, status: &str, reason: &str, message: &str, now: &str) -> Value {
    json!({
        "type": kind, "status": status, "reason": reason, "message": message,
        "lastHeartbeatTime": now, "lastTransitionTime": now,
    })
}

/// The Node's status: room for anything the migration schedules, Ready, reachable on
/// 127.0.0.1 at `port` (the apiserver proxies `kubectl logs` there).
pub fn node_status(name: &str, port: u16, now: &str) -> Value {
    let resources =
        json!({"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"});
    json!({
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available", now),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", now),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available", now),
            condition("NetworkUnavailable", "False", "RouteCreated", "the node agent needs no routes", now),
            condition("Ready", "True", "KubeletReady", "uyuni-node-agent is posting ready status", now),
        ],
        // InternalIP first: cluster.sh passes --kubelet-preferred-address-types=InternalIP,Hostname
        // so that the apiserver never resolves the hostname.
        "addresses": [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
        "nodeInfo": {
            "machineID": "", "systemUUID": "", "bootID": "",
            "kernelVersion": "", "osImage": "uyuni-node-agent (scenario-driven, runs no containers)",
            "containerRuntimeVersion": "uyuni-node-agent://0.1",
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
        },
        "phase": "Running",
    })
}

/// Creates the Node if it does not exist, then writes its status.
pub async fn register(nodes: &Api<Node>, name: &str, port: u16) -> anyhow::Result<Node> {
    let obj: Node = serde_json::from_value(node_object(name)).context("the Node object")?;
    match nodes.create(&PostParams::default(), &obj).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => {
            return Err(e).with_context(|| {
                format!("cannot create Node {name}: check the agent's credential (--kubeconfig)")
            });
        }
    }
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": node_status(name, port, &now_rfc3339())})),
        )
        .await
        .with_context(|| format!("cannot write the status of Node {name}"))
}

/// Refreshes the conditions' heartbeat times, as kubelet's status report does every
/// `nodeStatusReportFrequency` (5 min) when a Lease carries the heartbeat. Conditions merge by
/// `type` (strategic merge), so their transition times stay.
pub async fn heartbeat(nodes: &Api<Node>, name: &str) -> anyhow::Result<()> {
    let now = now_rfc3339();
    let conditions: Vec<Value> = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
        .iter()
        .map(|t| json!({"type": t, "lastHeartbeatTime": now}))
        .collect();
    nodes
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": conditions}})),
        )
        .await
        .with_context(|| format!("cannot refresh the status of Node {name}"))?;
    Ok(())
}

/// Creates or renews the node's Lease in `kube-node-lease`.
pub async fn renew_lease(leases: &Api<Lease>, node: &Node) -> anyhow::Result<()> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let now = now_micro();
    let patch = json!({"spec": {"renewTime": now, "holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS}});
    match leases
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => return Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => {
            return Err(e).with_context(|| format!("cannot renew Lease kube-node-lease/{name}"));
        }
    }
    // As a kubelet: owned by the Node, so it goes with it.
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": "kube-node-lease",
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Node", "name": name,
                "uid": node.metadata.uid.clone().unwrap_or_default(),
            }],
        },
        "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION_SECONDS, "renewTime": now},
    }))
    .context("the Lease object")?;
    leases
        .create(&PostParams::default(), &lease)
        .await
        .with_context(|| format!("cannot create Lease kube-node-lease/{name}"))?;
    Ok(())
}
