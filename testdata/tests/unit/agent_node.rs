use k8s_openapi::api::core::v1::Node;
use serde_json::json;
use uyuni_testdata::agent::node::{KUBELET_VERSION, node_object, node_status, now_micro};

#[test]
fn node_status_is_schedulable_and_reachable() {
    let s = node_status("node0", 10250, "2026-12-01T10:00:00Z");
    let node: Node = serde_json::from_value(json!({"metadata": {"name": "node0"}, "status": s}))
        .expect("a valid NodeStatus");
    let status = node.status.expect("status");
    assert_eq!(status.allocatable.expect("allocatable")["pods"].0, "110");
    let ready = status.conditions.expect("conditions");
    assert!(
        ready
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    );
    assert!(
        ready
            .iter()
            .filter(|c| c.type_.ends_with("Pressure"))
            .all(|c| c.status == "False")
    );
    let addresses = status.addresses.expect("addresses");
    assert_eq!(
        (addresses[0].type_.as_str(), addresses[0].address.as_str()),
        ("InternalIP", "127.0.0.1")
    );
    assert_eq!(
        status
            .daemon_endpoints
            .expect("endpoints")
            .kubelet_endpoint
            .expect("kubelet")
            .port,
        10250
    );
    assert_eq!(
        status.node_info.expect("nodeInfo").kubelet_version,
        KUBELET_VERSION
    );
    let obj = node_object("node0");
    assert_eq!(obj["metadata"]["labels"]["kubernetes.io/hostname"], "node0");
    assert!(now_micro().contains('.'));
}
