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
fn strip_descriptions(schema: &mut Value) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Flavour;

    fn config(flavour: Flavour, cert_manager: bool) -> AddonsConfig {
        AddonsConfig {
            flavour,
            cert_manager,
            volumes_dir: "/tmp/v".into(),
            crds_dir: crate::cluster::default_crds_dir(),
            binding_mode: BindingMode::WaitForFirstConsumer,
            resync: crate::addons::DEFAULT_RESYNC,
        }
    }

    fn names(objects: &[Value], kind: &str) -> Vec<String> {
        objects
            .iter()
            .filter(|o| o["kind"] == json!(kind))
            .map(|o| meta(o, "name").to_string())
            .collect()
    }

    #[test]
    fn k3s_with_cert_manager_has_traefik_and_cert_managers_objects() {
        let objects = objects(&config(Flavour::K3s, true));
        assert_eq!(objects[0]["kind"], "Namespace");
        assert_eq!(names(&objects, "Namespace"), ["cert-manager"]);
        assert_eq!(names(&objects, "IngressClass"), ["traefik"]);
        let deployments = names(&objects, "Deployment");
        for d in [
            "traefik",
            "coredns",
            "cert-manager",
            "cert-manager-cainjector",
            "cert-manager-webhook",
        ] {
            assert!(deployments.contains(&d.to_string()), "{deployments:?}");
        }
        assert!(objects.iter().all(|o| o.get("status").is_none()));
        assert!(names(&objects, "Node").is_empty());
        assert!(names(&objects, "ServiceAccount").is_empty());
        let sc = objects.last().expect("a StorageClass");
        assert_eq!(sc["volumeBindingMode"], "WaitForFirstConsumer");
        assert_eq!(
            sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"],
            "true"
        );
        let crds = crds(&config(Flavour::K3s, true));
        let crd_names: Vec<&str> = crds.iter().map(|c| meta(c, "name")).collect();
        for c in [
            "ingressroutes.traefik.io",
            "helmchartconfigs.helm.cattle.io",
            "certificates.cert-manager.io",
            "issuers.cert-manager.io",
            "clusterissuers.cert-manager.io",
        ] {
            assert!(crd_names.contains(&c), "{crd_names:?}");
        }
        assert!(crds.iter().all(|c| c.get("status").is_none()));
    }

    #[test]
    fn rke2_has_nginx_and_plain_has_no_ingress_class_nor_cert_manager() {
        let rke2 = objects(&config(Flavour::Rke2, false));
        assert_eq!(names(&rke2, "IngressClass"), ["nginx"]);
        assert!(names(&rke2, "Namespace").is_empty());
        let plain = objects(&config(Flavour::Plain, false));
        assert!(names(&plain, "IngressClass").is_empty());
        assert_eq!(names(&plain, "Deployment"), ["coredns"]);
        assert!(crds(&config(Flavour::Plain, false)).is_empty());
    }

    #[test]
    fn the_crds_schemas_keep_their_fields_without_the_prose() {
        let crds = crds(&config(Flavour::K3s, true));
        for crd in &crds {
            for version in crd["spec"]["versions"].as_array().expect("versions") {
                let schema = &version["schema"]["openAPIV3Schema"];
                let text = serde_json::to_string(schema).expect("JSON");
                assert!(
                    !text.contains("\"description\":\""),
                    "{}",
                    meta(crd, "name")
                );
            }
        }
        let certificate = crds
            .iter()
            .find(|c| meta(c, "name") == "certificates.cert-manager.io")
            .expect("the Certificate CRD");
        let spec =
            &certificate["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["properties"]["secretName"]["type"], "string");
        assert!(spec["required"].as_array().is_some_and(|r| !r.is_empty()));

        let mut schema = json!({"type": "object", "description": "prose", "properties": {
            "description": {"type": "string", "description": "more prose"},
        }});
        strip_descriptions(&mut schema);
        assert_eq!(
            schema,
            json!({"type": "object", "properties": {"description": {"type": "string"}}})
        );
    }

    #[test]
    fn established_reads_the_condition() {
        assert!(!established(&json!({"status": {"conditions": [
            {"type": "NamesAccepted", "status": "True"},
            {"type": "Established", "status": "False"},
        ]}})));
        assert!(established(&json!({"status": {"conditions": [
            {"type": "Established", "status": "True"},
        ]}})));
        assert!(!established(&json!({})));
    }
}
