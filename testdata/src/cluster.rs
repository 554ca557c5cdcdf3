//! The objects a fresh cluster of each flavour has, and the CRDs it serves.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::{Value, json};

use crate::discovery;
use crate::sim::{Flavour, SimConfig};

pub const NODE_NAME: &str = "node-1";
pub const NODE_IP: &str = "10.0.0.10";

/// Where the upstream CRD files are: `UYUNI_SIM_CRDS_DIR`, else `../shared/schemas/crds` next
/// to the checkout (as in CI and on the development machine).
pub fn default_crds_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("UYUNI_SIM_CRDS_DIR") {
        return PathBuf::from(dir);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/schemas/crds")
}

/// Parsing the upstream files (about 1 MB of YAML) takes longer than starting a server, and
/// tests start many servers in one process: parse each file once.
type ParsedFiles = BTreeMap<PathBuf, Option<Arc<Vec<Value>>>>;

fn parsed_file(path: &Path) -> Option<Arc<Vec<Value>>> {
    static CACHE: OnceLock<Mutex<ParsedFiles>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(BTreeMap::new()));
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .entry(path.to_path_buf())
        .or_insert_with(|| parse_with_disk_cache(path).map(Arc::new))
        .clone()
}

/// Parses a CRD file, through a JSON copy in the temp dir: JSON parses about ten times faster
/// than YAML in a debug build, and test runners that start one process per test (nextest)
/// would otherwise pay the YAML parse in every test. The copy is keyed by path, size and
/// modification time, and written atomically.
fn parse_with_disk_cache(path: &Path) -> Option<Vec<Value>> {
    let meta = std::fs::metadata(path).ok()?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let key = crate::discovery::hash(&json!(format!("{}|{}|{mtime}", path.display(), meta.len())));
    let cached = std::env::temp_dir().join(format!("uyuni-sim-crds-{key}.json"));
    if let Some(docs) = std::fs::read_to_string(&cached)
        .ok()
        .and_then(|t| serde_json::from_str::<Vec<Value>>(&t).ok())
    {
        return Some(docs);
    }
    let text = std::fs::read_to_string(path).ok()?;
    let docs: Vec<Value> = serde_saphyr::from_multiple::<Value>(&text)
        .ok()?
        .into_iter()
        .filter(|d| d["kind"] == json!("CustomResourceDefinition"))
        .collect();
    if let Ok(json_text) = serde_json::to_string(&docs) {
        let tmp = cached.with_extension(format!("{}.tmp", std::process::id()));
        // A failed cache write only costs speed next time.
        if std::fs::write(&tmp, json_text).is_ok() && std::fs::rename(&tmp, &cached).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Some(docs)
}

/// A schema-less CRD, used when the upstream files cannot be found.
fn minimal_crd(group: &str, kind: &str, plural: &str, namespaced: bool, short: &[&str]) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "listKind": format!("{kind}List"),
                "plural": plural,
                "singular": kind.to_ascii_lowercase(),
                "shortNames": short,
            },
            "scope": if namespaced { "Namespaced" } else { "Cluster" },
            "versions": [{
                "name": if group == "traefik.io" { "v1alpha1" } else { "v1" },
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}},
            }],
        },
    })
}

/// The CRDs of a file set: upstream if found, else the minimal fallback.
fn crds_from(dir: &Path, files: &[&str], fallback: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for f in files {
        match parsed_file(&dir.join(f)) {
            Some(docs) => out.extend(docs.iter().cloned()),
            None => {
                tracing::warn!(
                    "CRD file {} not found or unreadable; serving schema-less CRDs",
                    dir.join(f).display()
                );
                return fallback;
            }
        }
    }
    out
}

/// The CRDs a cluster of this configuration has installed.
pub fn crds(config: &SimConfig) -> Vec<Value> {
    let dir = config.crds_dir.clone().unwrap_or_else(default_crds_dir);
    let mut out = Vec::new();
    if config.flavour == Flavour::K3s {
        out.extend(crds_from(
            &dir,
            &["traefik.io_crds.yaml"],
            vec![
                minimal_crd("traefik.io", "IngressRoute", "ingressroutes", true, &[]),
                minimal_crd(
                    "traefik.io",
                    "IngressRouteTCP",
                    "ingressroutetcps",
                    true,
                    &[],
                ),
                minimal_crd(
                    "traefik.io",
                    "IngressRouteUDP",
                    "ingressrouteudps",
                    true,
                    &[],
                ),
                minimal_crd("traefik.io", "Middleware", "middlewares", true, &[]),
            ],
        ));
    }
    if matches!(config.flavour, Flavour::K3s | Flavour::Rke2) {
        out.extend(crds_from(
            &dir,
            &["helm.cattle.io_helmchartconfigs.yaml"],
            vec![minimal_crd(
                "helm.cattle.io",
                "HelmChartConfig",
                "helmchartconfigs",
                true,
                &["hcc"],
            )],
        ));
    }
    if config.cert_manager {
        out.extend(crds_from(
            &dir,
            &[
                "cert-manager.io_certificates.yaml",
                "cert-manager.io_issuers.yaml",
                "cert-manager.io_clusterissuers.yaml",
            ],
            vec![
                minimal_crd(
                    "cert-manager.io",
                    "Certificate",
                    "certificates",
                    true,
                    &["cert", "certs"],
                ),
                minimal_crd("cert-manager.io", "Issuer", "issuers", true, &["iss"]),
                minimal_crd(
                    "cert-manager.io",
                    "ClusterIssuer",
                    "clusterissuers",
                    false,
                    &["ciss"],
                ),
            ],
        ));
    }
    out
}

fn ready_deployment(ns: &str, name: &str, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/name": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": name}},
                "spec": {"containers": [{"name": name, "image": image}]},
            },
        },
        "status": {
            "observedGeneration": 1,
            "replicas": 1,
            "readyReplicas": 1,
            "availableReplicas": 1,
            "updatedReplicas": 1,
            "conditions": [
                {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                 "message": "Deployment has minimum availability."},
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                 "message": format!("ReplicaSet \"{name}\" has successfully progressed.")},
            ],
        },
    })
}

/// The objects of a fresh cluster (besides CRDs), as seeds (stored as given).
pub fn initial_objects(config: &SimConfig) -> Vec<Value> {
    let mut namespaces = vec!["default", "kube-system", "kube-public", "kube-node-lease"];
    if config.cert_manager {
        namespaces.push("cert-manager");
    }
    let mut out: Vec<Value> = namespaces
        .iter()
        .map(|ns| json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
        .collect();
    let git_version = discovery::git_version(config.server_minor, config.flavour);
    let (instance_type, runtime) = match config.flavour {
        Flavour::K3s => ("k3s", "containerd://2.0.5-k3s1"),
        Flavour::Rke2 => ("rke2", "containerd://2.0.5-k3s1"),
        Flavour::Plain => ("", "containerd://2.0.5"),
    };
    let mut node_labels = json!({
        "kubernetes.io/hostname": NODE_NAME,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node-role.kubernetes.io/control-plane": "true",
    });
    if !instance_type.is_empty() {
        node_labels["node.kubernetes.io/instance-type"] = json!(instance_type);
    }
    out.push(json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE_NAME, "labels": node_labels},
        "spec": {"podCIDR": "10.42.0.0/24"},
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": NODE_IP},
                {"type": "Hostname", "address": NODE_NAME},
            ],
            "capacity": {"cpu": "2", "memory": "8135360Ki", "pods": "110", "ephemeral-storage": "61255492Ki"},
            "allocatable": {"cpu": "2", "memory": "8135360Ki", "pods": "110", "ephemeral-storage": "59589964298"},
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
            ],
            "nodeInfo": {
                "kubeletVersion": git_version,
                "kubeProxyVersion": git_version,
                "containerRuntimeVersion": runtime,
                "operatingSystem": "linux",
                "architecture": "amd64",
                "osImage": "openSUSE Leap Micro 6.1",
                "kernelVersion": "6.4.0-150600.23.25-default",
                "machineID": "0123456789abcdef0123456789abcdef",
                "systemUUID": "01234567-89ab-cdef-0123-456789abcdef",
                "bootID": "01234567-89ab-cdef-0123-456789abcdef",
            },
        },
    }));
    let mut sc = json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "local-path"},
        "provisioner": "rancher.io/local-path",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
    });
    if config.default_storage_class {
        sc["metadata"]["annotations"] =
            json!({"storageclass.kubernetes.io/is-default-class": "true"});
    }
    out.push(sc);
    match config.flavour {
        Flavour::K3s => {
            out.push(json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "IngressClass",
                "metadata": {
                    "name": "traefik",
                    "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"},
                },
                "spec": {"controller": "traefik.io/ingress-controller"},
            }));
            out.push(ready_deployment(
                "kube-system",
                "traefik",
                "rancher/mirrored-library-traefik:3.3.6",
            ));
        }
        Flavour::Rke2 => {
            out.push(json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "IngressClass",
                "metadata": {
                    "name": "nginx",
                    "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"},
                },
                "spec": {"controller": "k8s.io/ingress-nginx"},
            }));
        }
        Flavour::Plain => {}
    }
    out.push(ready_deployment(
        "kube-system",
        "coredns",
        "rancher/mirrored-coredns-coredns:1.12.1",
    ));
    if config.cert_manager {
        for (name, image) in [
            (
                "cert-manager",
                "quay.io/jetstack/cert-manager-controller:v1.18.2",
            ),
            (
                "cert-manager-cainjector",
                "quay.io/jetstack/cert-manager-cainjector:v1.18.2",
            ),
            (
                "cert-manager-webhook",
                "quay.io/jetstack/cert-manager-webhook:v1.18.2",
            ),
        ] {
            out.push(ready_deployment("cert-manager", name, image));
        }
    }
    for ns in namespaces {
        out.push(json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "default", "namespace": ns},
        }));
    }
    out
}
