//! A dynamic volume provisioner for `rancher.io/local-path`, written by hand after
//! sigs.k8s.io/sig-storage-lib-external-provisioner (`controller/controller.go`:
//! `shouldProvision`, `provisionClaimOperation`, `shouldDelete`) with the volumes of
//! rancher/local-path-provisioner (`provisioner.go`: a hostPath directory per claim, node
//! affinity on `kubernetes.io/hostname` to the node the scheduler selected).
//!
//! The division of labour is upstream's: the real PV controller in kube-controller-manager
//! (`pkg/controller/volume/persistentvolume/pv_controller.go`, `provisionClaim`) annotates a
//! claim whose class names an external provisioner with `volume.kubernetes.io/storage-provisioner`
//! — for a WaitForFirstConsumer class only once the scheduler has set
//! `volume.kubernetes.io/selected-node` — and this provisioner then creates a PV whose `claimRef`
//! carries the claim's uid; the PV controller binds the two. When the claim is deleted the PV
//! controller marks the PV Released and, for an externally provisioned volume with reclaim
//! policy Delete, waits for its provisioner to delete it: here, the directory and then the PV.
//!
//! Not done, unlike the library: Events on the claim, the `external-provisioner` finalizer, the
//! provisioner-removes-`selected-node` reschedule dance when the node is gone (a missing Node
//! is not an error here: the node agent's Nodes may not exist in a test; the affinity then
//! names the node as the scheduler did), and volume capacity checks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::bootstrap::PROVISIONER;
use super::{
    AddonsConfig, NODE, PV, PVC, STORAGE_CLASS, annotation, get, list, meta, reconcile_loop,
    trigger_on,
};

/// Set by the PV controller on a claim it leaves to an external provisioner (and its beta
/// predecessor, still set beside it).
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
pub const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
/// Set by the scheduler on a WaitForFirstConsumer claim: the node of its first pod.
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// Set by a provisioner on the PVs it made; the PV controller and we read it back.
pub const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
/// The node label local-path-provisioner pins its volumes to.
pub const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// The directory of a claim's volume: `DIR/<namespace>-<claim>` (with `-<uid>` appended if an
/// older volume still holds that one).
pub fn volume_path(volumes_dir: &Path, namespace: &str, claim: &str) -> PathBuf {
    volumes_dir.join(format!("{namespace}-{claim}"))
}

/// The PV to create for a claim, or `None` if this provisioner should not (yet) provision it:
/// it is bound already, it is not left to us by the PV controller, its class is not ours, it
/// waits for a node, or its PV exists.
pub fn volume_for(
    claim: &Value,
    classes: &BTreeMap<String, Value>,
    existing_pvs: &BTreeMap<String, Value>,
    volumes_dir: &Path,
) -> Option<Value> {
    if claim["spec"]["volumeName"]
        .as_str()
        .is_some_and(|v| !v.is_empty())
        || claim["metadata"]["deletionTimestamp"].is_string()
    {
        return None;
    }
    let left_to = annotation(claim, ANN_STORAGE_PROVISIONER)
        .or_else(|| annotation(claim, ANN_BETA_STORAGE_PROVISIONER))?;
    if left_to != PROVISIONER {
        return None;
    }
    let class_name = claim["spec"]["storageClassName"].as_str()?;
    let class = classes.get(class_name)?;
    if class["provisioner"] != json!(PROVISIONER) {
        return None;
    }
    let node = annotation(claim, ANN_SELECTED_NODE);
    if class["volumeBindingMode"] == json!("WaitForFirstConsumer") && node.is_none() {
        return None;
    }
    let uid = meta(claim, "uid");
    let pv_name = format!("pvc-{uid}");
    if uid.is_empty() || existing_pvs.contains_key(&pv_name) {
        return None;
    }
    let namespace = meta(claim, "namespace");
    let name = meta(claim, "name");
    let mut path = volume_path(volumes_dir, namespace, name);
    // A retained (or not yet deleted) volume of an earlier claim of that name still has the
    // directory: a new claim must not share, or see, its data.
    if path_in_use(existing_pvs, &path, &pv_name) {
        path = volumes_dir.join(format!("{namespace}-{name}-{uid}"));
    }
    let mut pv = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": pv_name,
            "annotations": {ANN_PROVISIONED_BY: PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": claim["spec"]["resources"]["requests"]["storage"]},
            "accessModes": claim["spec"]["accessModes"],
            "persistentVolumeReclaimPolicy": class["reclaimPolicy"].as_str().unwrap_or("Delete"),
            "storageClassName": class_name,
            "volumeMode": claim["spec"]["volumeMode"].as_str().unwrap_or("Filesystem"),
            "hostPath": {"path": path.to_string_lossy(), "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": namespace,
                "name": name,
                "uid": uid,
            },
        },
    });
    if let Some(options) = class["mountOptions"].as_array() {
        pv["spec"]["mountOptions"] = json!(options);
    }
    if let Some(node) = node {
        pv["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{
            "matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": [node]}],
        }]}});
    }
    Some(pv)
}

/// Whether a PV is ours to delete now: we provisioned it, its claim is gone (Released) and its
/// reclaim policy is Delete. Never a Retain or Recycle PV, never one another provisioner made.
pub fn should_delete(pv: &Value) -> bool {
    annotation(pv, ANN_PROVISIONED_BY) == Some(PROVISIONER)
        && pv["status"]["phase"] == json!("Released")
        && pv["spec"]["persistentVolumeReclaimPolicy"] == json!("Delete")
        && !pv["metadata"]["deletionTimestamp"].is_string()
}

/// The directory of a PV to remove with it: its hostPath, if inside `volumes_dir` (a path
/// elsewhere was not made by us and is left alone).
pub fn owned_directory(pv: &Value, volumes_dir: &Path) -> Option<PathBuf> {
    let path = PathBuf::from(pv["spec"]["hostPath"]["path"].as_str()?);
    let inside = path.parent() == Some(volumes_dir)
        && path
            .file_name()
            .is_some_and(|n| n != "." && n != ".." && !n.is_empty());
    inside.then_some(path)
}

/// Whether a PV other than `except` has `path` as its hostPath.
pub fn path_in_use(pvs: &BTreeMap<String, Value>, path: &Path, except: &str) -> bool {
    pvs.iter().any(|(name, pv)| {
        name != except && pv["spec"]["hostPath"]["path"].as_str() == Some(&*path.to_string_lossy())
    })
}

fn by_name(objects: Vec<Value>) -> BTreeMap<String, Value> {
    objects
        .into_iter()
        .map(|o| (meta(&o, "name").to_string(), o))
        .collect()
}

/// Creates a planned PV's directory, then the PV.
async fn create_volume(client: &kube::Client, pv: &Value, claim_key: &str) -> anyhow::Result<()> {
    let pv_name = meta(pv, "name");
    if let Some(dir) = pv["spec"]["hostPath"]["path"].as_str() {
        std::fs::create_dir_all(dir).with_context(|| {
            format!(
                "cannot create the volume directory {dir} for claim {claim_key}: \
                 check that --volumes-dir is writable"
            )
        })?;
    }
    let object: kube::api::DynamicObject =
        serde_json::from_value(pv.clone()).context("cannot build the PV")?;
    match PV
        .api(client, None)
        .create(&PostParams::default(), &object)
        .await
    {
        Ok(_) => tracing::info!("provisioned {pv_name} for claim {claim_key}"),
        // Made in an earlier pass whose list did not see it yet.
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => {
            return Err(e)
                .with_context(|| format!("cannot create PV {pv_name} for claim {claim_key}"));
        }
    }
    Ok(())
}

async fn reconcile(client: &kube::Client, config: &AddonsConfig) -> anyhow::Result<()> {
    let classes = by_name(list(client, STORAGE_CLASS).await?);
    let pvs = by_name(list(client, PV).await?);
    for claim in list(client, PVC).await? {
        let Some(mut pv) = volume_for(&claim, &classes, &pvs, &config.volumes_dir) else {
            continue;
        };
        // local-path-provisioner pins to the node's `kubernetes.io/hostname` label, which is
        // the node's name unless the kubelet was told otherwise (`--hostname-override`).
        if let Some(node) = annotation(&claim, ANN_SELECTED_NODE)
            && let Ok(Some(node)) = get(client, NODE, "", node).await
            && let Some(hostname) = node["metadata"]["labels"][HOSTNAME_LABEL].as_str()
        {
            pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
                ["values"] = json!([hostname]);
        }
        let claim_key = format!("{}/{}", meta(&claim, "namespace"), meta(&claim, "name"));
        // One claim's failure does not hold up the others; it is retried on the next pass.
        let provisioned = create_volume(client, &pv, &claim_key).await;
        if let Err(e) = provisioned {
            tracing::warn!("provisioner: {e:#}");
        }
    }
    for pv in pvs.values().filter(|pv| should_delete(pv)) {
        let name = meta(pv, "name");
        let deleted: anyhow::Result<()> = async {
            let dir =
                owned_directory(pv, &config.volumes_dir).filter(|d| !path_in_use(&pvs, d, name));
            if let Some(dir) = dir {
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(e).with_context(|| {
                            format!("cannot remove the directory {} of PV {name}", dir.display())
                        });
                    }
                }
            }
            match PV
                .api(client, None)
                .delete(name, &DeleteParams::default())
                .await
            {
                Ok(_) => tracing::info!("deleted released PV {name}"),
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot delete released PV {name}"));
                }
            }
            Ok(())
        }
        .await;
        if let Err(e) = deleted {
            tracing::warn!("provisioner: {e:#}");
        }
    }
    Ok(())
}

/// Provisions and reclaims until the process ends.
pub async fn run(client: kube::Client, config: AddonsConfig) -> anyhow::Result<()> {
    let notify = Arc::new(Notify::new());
    for kind in [PVC, PV, STORAGE_CLASS] {
        trigger_on(&client, kind, notify.clone());
    }
    reconcile_loop("provisioner", notify, config.resync, || {
        reconcile(&client, &config)
    })
    .await;
    Ok(())
}
