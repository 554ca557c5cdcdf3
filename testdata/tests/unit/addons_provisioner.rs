use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use uyuni_testdata::addons::bootstrap::PROVISIONER;
use uyuni_testdata::addons::provisioner::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_PROVISIONED_BY, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER,
    HOSTNAME_LABEL, owned_directory, path_in_use, should_delete, volume_for,
};

fn class(mode: &str, reclaim: &str) -> BTreeMap<String, Value> {
    BTreeMap::from([(
        "local-path".to_string(),
        json!({"metadata": {"name": "local-path"}, "provisioner": PROVISIONER,
               "volumeBindingMode": mode, "reclaimPolicy": reclaim}),
    )])
}

fn claim(annotations: Value) -> Value {
    json!({
        "metadata": {"name": "var-pgsql", "namespace": "uyuni", "uid": "u-1",
                     "annotations": annotations},
        "spec": {"storageClassName": "local-path", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "10Gi"}}},
    })
}

#[test]
fn a_claim_left_to_us_gets_a_pv_for_it() {
    let dir = Path::new("/vols");
    let c = claim(json!({ANN_STORAGE_PROVISIONER: PROVISIONER}));
    let pv = volume_for(&c, &class("Immediate", "Delete"), &BTreeMap::new(), dir).expect("a PV");
    assert_eq!(pv["metadata"]["name"], "pvc-u-1");
    assert_eq!(
        pv["metadata"]["annotations"][ANN_PROVISIONED_BY],
        PROVISIONER
    );
    assert_eq!(pv["spec"]["capacity"]["storage"], "10Gi");
    assert_eq!(pv["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    assert_eq!(pv["spec"]["claimRef"]["uid"], "u-1");
    assert_eq!(pv["spec"]["claimRef"]["namespace"], "uyuni");
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(pv["spec"]["hostPath"]["path"], "/vols/uyuni-var-pgsql");
    assert!(pv["spec"].get("nodeAffinity").is_none());
    // Its PV exists: nothing more.
    let existing = BTreeMap::from([("pvc-u-1".to_string(), pv.clone())]);
    assert!(volume_for(&c, &class("Immediate", "Delete"), &existing, dir).is_none());
    // A claim of the same name again, while the old volume is retained: its own directory.
    let mut again = c.clone();
    again["metadata"]["uid"] = json!("u-2");
    let pv2 = volume_for(&again, &class("Immediate", "Delete"), &existing, dir).expect("a PV");
    assert_eq!(pv2["spec"]["hostPath"]["path"], "/vols/uyuni-var-pgsql-u-2");
    assert!(path_in_use(
        &existing,
        Path::new("/vols/uyuni-var-pgsql"),
        "pvc-u-3"
    ));
    assert!(!path_in_use(
        &existing,
        Path::new("/vols/uyuni-var-pgsql"),
        "pvc-u-1"
    ));
}

#[test]
fn not_ours_bound_or_waiting_claims_get_nothing() {
    let dir = Path::new("/vols");
    let none = BTreeMap::new();
    // The PV controller has not annotated it yet.
    assert!(volume_for(&claim(json!({})), &class("Immediate", "Delete"), &none, dir).is_none());
    // Another provisioner's.
    let other = claim(json!({ANN_STORAGE_PROVISIONER: "ebs.csi.aws.com"}));
    assert!(volume_for(&other, &class("Immediate", "Delete"), &none, dir).is_none());
    // Bound already.
    let mut bound = claim(json!({ANN_STORAGE_PROVISIONER: PROVISIONER}));
    bound["spec"]["volumeName"] = json!("pv-x");
    assert!(volume_for(&bound, &class("Immediate", "Delete"), &none, dir).is_none());
    // A class that does not exist.
    let mut unknown = claim(json!({ANN_STORAGE_PROVISIONER: PROVISIONER}));
    unknown["spec"]["storageClassName"] = json!("fast");
    assert!(volume_for(&unknown, &class("Immediate", "Delete"), &none, dir).is_none());
    // WaitForFirstConsumer without a selected node.
    let waiting = claim(json!({ANN_BETA_STORAGE_PROVISIONER: PROVISIONER}));
    assert!(
        volume_for(
            &waiting,
            &class("WaitForFirstConsumer", "Delete"),
            &none,
            dir
        )
        .is_none()
    );
}

#[test]
fn a_selected_node_pins_the_volume_and_the_class_sets_the_reclaim_policy() {
    let c = claim(json!({ANN_STORAGE_PROVISIONER: PROVISIONER, ANN_SELECTED_NODE: "node-1"}));
    let pv = volume_for(
        &c,
        &class("WaitForFirstConsumer", "Retain"),
        &BTreeMap::new(),
        Path::new("/vols"),
    )
    .expect("a PV");
    assert_eq!(
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0],
        json!({"key": HOSTNAME_LABEL, "operator": "In", "values": ["node-1"]})
    );
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
}

#[test]
fn only_our_released_delete_volumes_are_deleted_and_only_our_directories_removed() {
    let pv = |by: &str, phase: &str, policy: &str| {
        json!({"metadata": {"name": "pvc-1", "annotations": {ANN_PROVISIONED_BY: by}},
               "spec": {"persistentVolumeReclaimPolicy": policy,
                        "hostPath": {"path": "/vols/uyuni-x"}},
               "status": {"phase": phase}})
    };
    assert!(should_delete(&pv(PROVISIONER, "Released", "Delete")));
    assert!(!should_delete(&pv(PROVISIONER, "Released", "Retain")));
    assert!(!should_delete(&pv(PROVISIONER, "Bound", "Delete")));
    assert!(!should_delete(&pv("other.io/nfs", "Released", "Delete")));
    let dir = Path::new("/vols");
    assert_eq!(
        owned_directory(&pv(PROVISIONER, "Released", "Delete"), dir),
        Some(PathBuf::from("/vols/uyuni-x"))
    );
    let elsewhere = json!({"spec": {"hostPath": {"path": "/etc"}}});
    assert_eq!(owned_directory(&elsewhere, dir), None);
    let parent = json!({"spec": {"hostPath": {"path": "/vols/.."}}});
    assert_eq!(owned_directory(&parent, dir), None);
}
