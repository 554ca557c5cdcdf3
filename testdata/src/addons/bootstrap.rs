//! The objects a fresh cluster of the flavour has, applied once at start (server-side apply,
//! so a second run changes nothing): the same set uyuni-sim pre-creates
//! ([`crate::cluster::crds`], [`crate::cluster::initial_objects`]), minus what the real control
//! plane and the node agent make themselves (the built-in namespaces, ServiceAccounts, Nodes)
//! and minus status (the real Deployment controller writes it once the node agent runs the
//! pods).

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::{AddonsConfig, BindingMode, CRD, FIELD_MANAGER, apply, get, meta};
use crate::sim::SimConfig;

/// The provisioner of k3s's default StorageClass, and of ours.
pub const PROVISIONER: &str = "rancher.io/local-path";
pub const STORAGE_CLASS_NAME: &str = "local-path";

/// How long CRDs may take to be Established.
const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(60);

/// The default StorageClass as k3s ships it (k3s-io/k3s `manifests/local-storage.yaml`:
/// `provisioner: rancher.io/local-path`, `volumeBindingMode: WaitForFirstConsumer`,
/// `reclaimPolicy: Delete`, annotated as the default class), with the binding mode chosen.
pub fn storage_class(binding_mode: BindingMode) -> Value {
    json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS_NAME,
            "annotations": {
                "defaultVolumeType": "local",
                "storageclass.kubernetes.io/is-default-class": "true",
            },
        },
        "provisioner": PROVISIONER,
        "volumeBindingMode": binding_mode.as_str(),
        "reclaimPolicy": "Delete",
    })
}

fn sim_config(config: &AddonsConfig) -> SimConfig {
    SimConfig {
        flavour: config.flavour,
        cert_manager: config.cert_manager,
        default_storage_class: true,
        crds_dir: Some(config.crds_dir.clone()),
        ..SimConfig::default()
    }
}

/// The CRDs to install, ready to apply.
pub fn crds(config: &AddonsConfig) -> Vec<Value> {
    crate::cluster::crds(&sim_config(config))
        .into_iter()
        .map(|mut crd| {
            // Written by the apiserver; an applied status is ignored anyway.
            if let Some(o) = crd.as_object_mut() {
                o.remove("status");
            }
            if let Some(m) = crd["metadata"].as_object_mut() {
                m.remove("creationTimestamp");
            }
            if let Some(versions) = crd["spec"]["versions"].as_array_mut() {
                for version in versions {
                    strip_descriptions(&mut version["schema"]["openAPIV3Schema"]);
                }
            }
            crd
        })
        .collect()
}

/// Removes the prose (`description`) from a CRD's schema: the same fields, types and
/// validations, about a third of the bytes. The apiserver parses each CRD's schema and builds
/// its OpenAPI documents when it is applied, and most of the Traefik and cert-manager CRDs is
/// prose; a dozen tests start a control plane with them. A property that is itself called
/// `description` is a schema (an object), not prose, and stays.
// pub for the unit tests in tests/unit/
#[doc(hidden)]
pub fn strip_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("description").is_some_and(Value::is_string) {
                map.remove("description");
            }
            map.values_mut().for_each(strip_descriptions);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_descriptions),
        _ => {}
    }
}

/// The other objects, in the order to apply them (namespaces first).
pub fn objects(config: &AddonsConfig) -> Vec<Value> {
    let mut out: Vec<Value> = crate::cluster::initial_objects(&sim_config(config))
        .into_iter()
        .filter(|o| match o["kind"].as_str() {
            // The real apiserver makes default, kube-system, kube-public and kube-node-lease.
            Some("Namespace") => meta(o, "name") == "cert-manager",
            Some("IngressClass" | "Deployment") => true,
            // StorageClass: ours below; Node: the node agent's; ServiceAccount: the
            // controller-manager's.
            _ => false,
        })
        .map(|mut o| {
            if let Some(m) = o.as_object_mut() {
                m.remove("status");
            }
            o
        })
        .collect();
    out.sort_by_key(|o| o["kind"] != json!("Namespace"));
    out.push(storage_class(config.binding_mode));
    out
}

/// Whether a CRD's `Established` condition is True.
pub fn established(crd: &Value) -> bool {
    crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == json!("Established") && c["status"] == json!("True"))
}

/// Applies the CRDs, waits until they are served, then applies the other objects.
pub async fn bootstrap(client: &kube::Client, config: &AddonsConfig) -> anyhow::Result<()> {
    let crds = crds(config);
    for crd in &crds {
        apply(client, crd, FIELD_MANAGER).await?;
    }
    let deadline = Instant::now() + ESTABLISHED_TIMEOUT;
    for crd in &crds {
        let name = meta(crd, "name");
        loop {
            let current = get(client, CRD, "", name).await?;
            if current.as_ref().is_some_and(established) {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "CRD {name} is not Established after {}s: see its conditions with \
                     `kubectl get crd {name} -o yaml` and the kube-apiserver log",
                    ESTABLISHED_TIMEOUT.as_secs()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for object in objects(config) {
        apply(client, &object, FIELD_MANAGER)
            .await
            .context("bootstrapping the cluster's distribution objects")?;
    }
    Ok(())
}
