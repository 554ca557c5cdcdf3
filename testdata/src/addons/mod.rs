//! The add-ons of the real control plane (`scripts/cluster.sh`, [`crate::real`]): what a k3s,
//! RKE2 or plain cluster has besides its control plane and nodes, and what a migration needs.
//!
//! `uyuni-cluster-addons` is an API client like any controller, acting only through the API:
//! - [`bootstrap`]: the distribution's objects that uyuni-sim pre-creates ([`crate::cluster`]):
//!   CRDs (waited for until Established), IngressClasses, the cert-manager namespace and
//!   Deployments, and the default StorageClass `local-path`;
//! - [`provisioner`]: a dynamic volume provisioner for `rancher.io/local-path`, with hostPath
//!   volumes in a directory of ours;
//! - [`certmanager`]: a stand-in for cert-manager's controller (selfSigned and CA issuers).
//!
//! The controllers are level-triggered: a watch event of a kind they care about (or a periodic
//! tick, for retries) makes them list their objects and reconcile every one. The clusters are
//! small (tens of objects), so that costs little and no event can be missed.

pub mod bootstrap;
pub mod certmanager;
pub mod provisioner;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use futures::StreamExt as _;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::Value;
use tokio::sync::Notify;

use crate::sim::Flavour;

/// The field manager of everything the add-ons write (except where they mirror a manager name
/// cert-manager uses).
pub const FIELD_MANAGER: &str = "uyuni-cluster-addons";

/// How often the controllers reconcile without an event by default: the retry interval of a
/// failed step (`--resync-ms`).
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(5);

/// `volumeBindingMode` of the default StorageClass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingMode {
    Immediate,
    WaitForFirstConsumer,
}

impl BindingMode {
    pub fn as_str(self) -> &'static str {
        match self {
            BindingMode::Immediate => "Immediate",
            BindingMode::WaitForFirstConsumer => "WaitForFirstConsumer",
        }
    }
}

impl std::str::FromStr for BindingMode {
    type Err = String;
    fn from_str(s: &str) -> Result<BindingMode, String> {
        match s {
            "Immediate" => Ok(BindingMode::Immediate),
            "WaitForFirstConsumer" => Ok(BindingMode::WaitForFirstConsumer),
            other => Err(format!(
                "unknown binding mode {other:?} (Immediate or WaitForFirstConsumer)"
            )),
        }
    }
}

/// What to install and run.
#[derive(Debug, Clone)]
pub struct AddonsConfig {
    pub flavour: Flavour,
    pub cert_manager: bool,
    /// Where the provisioner creates the volumes' directories.
    pub volumes_dir: PathBuf,
    /// The upstream CRD files (as uyuni-sim finds them: [`crate::cluster::default_crds_dir`]).
    pub crds_dir: PathBuf,
    pub binding_mode: BindingMode,
    /// How often the controllers reconcile without an event ([`DEFAULT_RESYNC`]; the tests
    /// that wait for a few passes make it shorter).
    pub resync: Duration,
}

/// A kind the add-ons read or write.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

impl Kind {
    pub const fn new(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
        namespaced: bool,
    ) -> Kind {
        Kind {
            group,
            version,
            kind,
            plural,
            namespaced,
        }
    }

    pub fn resource(&self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(self.group, self.version, self.kind),
            self.plural,
        )
    }

    /// The API of this kind in `namespace` (ignored for cluster-scoped kinds), or across all
    /// namespaces with `None`.
    pub fn api(&self, client: &kube::Client, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) if self.namespaced => {
                Api::namespaced_with(client.clone(), ns, &self.resource())
            }
            _ => Api::all_with(client.clone(), &self.resource()),
        }
    }
}

pub const CRD: Kind = Kind::new(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    false,
);
pub const NAMESPACE: Kind = Kind::new("", "v1", "Namespace", "namespaces", false);
pub const SECRET: Kind = Kind::new("", "v1", "Secret", "secrets", true);
pub const PVC: Kind = Kind::new(
    "",
    "v1",
    "PersistentVolumeClaim",
    "persistentvolumeclaims",
    true,
);
pub const NODE: Kind = Kind::new("", "v1", "Node", "nodes", false);
pub const PV: Kind = Kind::new("", "v1", "PersistentVolume", "persistentvolumes", false);
pub const STORAGE_CLASS: Kind = Kind::new(
    "storage.k8s.io",
    "v1",
    "StorageClass",
    "storageclasses",
    false,
);
pub const INGRESS_CLASS: Kind = Kind::new(
    "networking.k8s.io",
    "v1",
    "IngressClass",
    "ingressclasses",
    false,
);
pub const DEPLOYMENT: Kind = Kind::new("apps", "v1", "Deployment", "deployments", true);
pub const ISSUER: Kind = Kind::new("cert-manager.io", "v1", "Issuer", "issuers", true);
pub const CLUSTER_ISSUER: Kind = Kind::new(
    "cert-manager.io",
    "v1",
    "ClusterIssuer",
    "clusterissuers",
    false,
);
pub const CERTIFICATE: Kind =
    Kind::new("cert-manager.io", "v1", "Certificate", "certificates", true);

/// The kind of a manifest, among those the bootstrap applies.
pub fn kind_of(object: &Value) -> Option<Kind> {
    let api_version = object["apiVersion"].as_str()?;
    let kind = object["kind"].as_str()?;
    [
        CRD,
        NAMESPACE,
        SECRET,
        PVC,
        PV,
        STORAGE_CLASS,
        INGRESS_CLASS,
        DEPLOYMENT,
        ISSUER,
        CLUSTER_ISSUER,
        CERTIFICATE,
    ]
    .into_iter()
    .find(|k| {
        let av = if k.group.is_empty() {
            k.version.to_string()
        } else {
            format!("{}/{}", k.group, k.version)
        };
        av == api_version && k.kind == kind
    })
}

/// A string field of `metadata`, or "".
pub fn meta<'a>(object: &'a Value, field: &str) -> &'a str {
    object["metadata"][field].as_str().unwrap_or_default()
}

/// An annotation, if set.
pub fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"]["annotations"][key].as_str()
}

/// Every object of a kind, across namespaces, as JSON.
pub async fn list(client: &kube::Client, kind: Kind) -> anyhow::Result<Vec<Value>> {
    let objects = kind
        .api(client, None)
        .list(&ListParams::default())
        .await
        .with_context(|| format!("cannot list {}", kind.plural))?;
    objects
        .items
        .into_iter()
        .map(|o| {
            let mut v = serde_json::to_value(&o)?;
            // A list's items carry no apiVersion/kind; the controllers' pure parts read them.
            v["apiVersion"] = Value::from(
                o.types
                    .map_or_else(|| kind.resource().api_version, |t| t.api_version),
            );
            v["kind"] = Value::from(kind.kind);
            Ok(v)
        })
        .collect::<Result<Vec<Value>, serde_json::Error>>()
        .with_context(|| format!("cannot read the listed {}", kind.plural))
}

/// One object, or `None` if it does not exist.
pub async fn get(
    client: &kube::Client,
    kind: Kind,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<Value>> {
    let object = kind
        .api(client, Some(namespace))
        .get_opt(name)
        .await
        .with_context(|| format!("cannot read {} {namespace}/{name}", kind.kind))?;
    object
        .map(|o| serde_json::to_value(&o))
        .transpose()
        .context("cannot read the object")
}

/// Server-side apply of a whole manifest, forcing ownership: the add-ons own what they write.
pub async fn apply(
    client: &kube::Client,
    object: &Value,
    field_manager: &str,
) -> anyhow::Result<Value> {
    let kind = kind_of(object).with_context(|| {
        format!(
            "the add-ons cannot apply a {} {}",
            object["apiVersion"], object["kind"]
        )
    })?;
    let name = meta(object, "name");
    let namespace = meta(object, "namespace");
    let applied = kind
        .api(client, Some(namespace))
        .patch(
            name,
            &PatchParams::apply(field_manager).force(),
            &Patch::Apply(object),
        )
        .await
        .with_context(|| format!("cannot apply {} {namespace}/{name}", kind.kind))?;
    serde_json::to_value(&applied).context("cannot read the applied object")
}

/// Wakes `notify` on every event of a kind's watch, for as long as the process runs. Watch
/// errors (a restarted apiserver, `410 Gone`) are retried with kube-rs's default backoff.
pub fn trigger_on(client: &kube::Client, kind: Kind, notify: Arc<Notify>) {
    let api = kind.api(client, None);
    tokio::spawn(async move {
        let mut events = std::pin::pin!(
            watcher(api, watcher::Config::default().any_semantic()).default_backoff()
        );
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::InitApply(_) | watcher::Event::Init) => {}
                Ok(_) => notify.notify_one(),
                Err(e) => tracing::warn!("watch of {} failed (retrying): {e}", kind.plural),
            }
        }
    });
}

/// Runs `reconcile` on every wake-up of `notify` and every `resync`, forever. A failed
/// reconcile is logged and retried on the next wake-up. Each pass logs `NAME: pass done` at
/// debug level: a test that asserts something stays as it is counts passes instead of sleeping.
pub async fn reconcile_loop<F, Fut>(
    name: &str,
    notify: Arc<Notify>,
    resync: Duration,
    mut reconcile: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    loop {
        if let Err(e) = reconcile().await {
            tracing::warn!("{name}: {e:#}");
        }
        tracing::debug!("{name}: pass done");
        tokio::select! {
            _ = notify.notified() => {}
            _ = tokio::time::sleep(resync) => {}
        }
        // Several events usually arrive together (an object and its status): one pass for all.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Connects with `kubeconfig`.
pub async fn client(kubeconfig: &std::path::Path) -> anyhow::Result<kube::Client> {
    // rustls needs one process-wide crypto provider; ring is the one the workspace builds.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let file = kube::config::Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("cannot read the kubeconfig {}", kubeconfig.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await
            .with_context(|| format!("cannot use the kubeconfig {}", kubeconfig.display()))?;
    kube::Client::try_from(config).context("cannot build an API client from the kubeconfig")
}

/// Bootstraps, calls `ready` once the objects are in place, then runs the controllers until
/// one of them ends (they do not, short of a panic).
pub async fn run(
    client: kube::Client,
    config: AddonsConfig,
    ready: impl FnOnce(),
) -> anyhow::Result<()> {
    bootstrap::bootstrap(&client, &config).await?;
    ready();
    let provisioner = tokio::spawn(provisioner::run(client.clone(), config.clone()));
    if config.cert_manager {
        let certs = tokio::spawn(certmanager::run(client.clone(), config.resync));
        tokio::select! {
            r = provisioner => r.context("the provisioner panicked")?,
            r = certs => r.context("the cert-manager stand-in panicked")?,
        }
    } else {
        provisioner.await.context("the provisioner panicked")?
    }
}
