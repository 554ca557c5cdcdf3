//! One snapshot of what the planner asked to see. Reads only.

use std::collections::BTreeSet;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PersistentVolumeClaim, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Resource;
use kube::api::{Api, ListParams};
use kube::core::ClusterResourceScope;
use serde::de::DeserializeOwned;
use uyuni_core::{Kind, Object, ObjectRef, Observation, Observed};

use crate::error::{EffectsError, Target, Verb};
use crate::progress::{NoProgress, Progress};
use crate::retry::with_retry;

/// Page size of the Job list: the same as client-go's pager. Mechanics, not a decision: it
/// changes how many requests a LIST takes, never what is observed, so the plan does not carry it.
const PAGE_SIZE: u32 = 500;

/// Fetches every object `observation` names (absent ones are simply missing from the result)
/// and the Jobs matching its selector. Retries are logged with `tracing` only; use
/// [`observe_with_progress`] to see them.
pub async fn observe(
    client: &kube::Client,
    observation: &Observation,
) -> Result<Observed, EffectsError> {
    observe_with_progress(client, observation, &NoProgress).await
}

/// [`observe`], reporting retries to `progress`.
pub async fn observe_with_progress(
    client: &kube::Client,
    observation: &Observation,
    progress: &dyn Progress,
) -> Result<Observed, EffectsError> {
    Observer::new(client.clone(), observation.clone())
        .observe(progress)
        .await
}

/// What a run learns of the cluster once: the custom resources it serves, its IngressClasses
/// and StorageClasses. A run does not install CRDs or classes, so re-reading them on every turn
/// of the loop only multiplied requests.
#[derive(Debug, Clone)]
struct ClusterFacts {
    served: Vec<String>,
    ingress_classes: Vec<uyuni_core::observed::IngressClassInfo>,
    storage_classes: Option<Vec<uyuni_core::storage::StorageClassInfo>>,
}

/// Observes the same [`Observation`] turn after turn of the loop: the cluster's facts once,
/// then each kind the observation lists ([`Observation::listed_kinds`]) with one LIST of the
/// namespace, the other objects with one GET each, and the Jobs by selector.
pub struct Observer {
    client: kube::Client,
    observation: Observation,
    cluster: Option<ClusterFacts>,
}

impl Observer {
    pub fn new(client: kube::Client, observation: Observation) -> Observer {
        Observer {
            client,
            observation,
            cluster: None,
        }
    }

    /// One snapshot of what the observation names; every object read now, the cluster's
    /// facts as first read.
    pub async fn observe(&mut self, progress: &dyn Progress) -> Result<Observed, EffectsError> {
        let client = &self.client;
        let observation = &self.observation;
        let ns = observation.namespace.as_str();
        let cluster = match &self.cluster {
            Some(facts) => facts.clone(),
            None => {
                let mut served = Vec::new();
                for group_version in &observation.api_groups {
                    served.extend(crate::custom::served(client, group_version, progress).await?);
                }
                let facts = ClusterFacts {
                    served,
                    ingress_classes: crate::custom::ingress_classes(client, progress).await?,
                    storage_classes: storage_classes(client, progress).await?,
                };
                self.cluster = Some(facts.clone());
                facts
            }
        };
        let mut observed = Observed::default();
        observed.served.extend(cluster.served);
        observed.ingress_classes = cluster.ingress_classes;
        observed.storage_classes = cluster.storage_classes;
        let listed = observation.listed_kinds();
        for kind in &listed {
            if let Kind::Custom(custom) = kind
                && !observed.serves(*custom)
            {
                continue;
            }
            let wanted: BTreeSet<&str> = observation
                .named
                .iter()
                .filter(|t| t.kind == *kind)
                .map(|t| t.name.as_str())
                .collect();
            tracing::debug!(?kind, namespace = ns, "list");
            for object in list(client, ns, *kind, progress).await? {
                if wanted.contains(object.object_ref().name.as_str()) {
                    observed.insert(object);
                }
            }
        }
        for target in &observation.named {
            if listed.contains(&target.kind) {
                continue;
            }
            if let Kind::Custom(kind) = target.kind
                && !observed.serves(kind)
            {
                continue;
            }
            tracing::debug!(%target, namespace = ns, "get");
            if let Some(object) = get(client, ns, target, progress).await? {
                observed.insert(object);
            }
        }
        for job in list_jobs(client, ns, &observation.job_selector, progress).await? {
            observed.insert(Object::Job(job));
        }
        Ok(observed)
    }
}

/// Every object of a kind in `ns`, page by page (none when the namespace does not exist).
async fn list(
    client: &kube::Client,
    ns: &str,
    kind: Kind,
    progress: &dyn Progress,
) -> Result<Vec<Object>, EffectsError> {
    Ok(match kind {
        // Cluster-scoped: never listed (see `Observation::listed_kinds`).
        Kind::Namespace => Vec::new(),
        Kind::Secret => list_as(client, ns, kind, progress, Object::Secret).await?,
        Kind::ConfigMap => list_as(client, ns, kind, progress, Object::ConfigMap).await?,
        Kind::PersistentVolumeClaim => {
            list_as(client, ns, kind, progress, Object::PersistentVolumeClaim).await?
        }
        Kind::ServiceAccount => list_as(client, ns, kind, progress, Object::ServiceAccount).await?,
        Kind::Role => list_as(client, ns, kind, progress, Object::Role).await?,
        Kind::RoleBinding => list_as(client, ns, kind, progress, Object::RoleBinding).await?,
        Kind::Job => list_as(client, ns, kind, progress, Object::Job).await?,
        Kind::Deployment => list_as(client, ns, kind, progress, Object::Deployment).await?,
        Kind::Service => list_as(client, ns, kind, progress, Object::Service).await?,
        Kind::Ingress => list_as(client, ns, kind, progress, Object::Ingress).await?,
        Kind::Custom(custom) => crate::custom::list(client, ns, custom, progress)
            .await?
            .into_iter()
            .map(Object::Custom)
            .collect(),
    })
}

/// A LIST of `K`, each wrapped as an [`Object`].
async fn list_as<K>(
    client: &kube::Client,
    ns: &str,
    kind: Kind,
    progress: &dyn Progress,
    wrap: fn(K) -> Object,
) -> Result<Vec<Object>, EffectsError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    Ok(list_namespaced::<K>(client, ns, kind, progress)
        .await?
        .into_iter()
        .map(wrap)
        .collect())
}

async fn list_namespaced<K>(
    client: &kube::Client,
    ns: &str,
    kind: Kind,
    progress: &dyn Progress,
) -> Result<Vec<K>, EffectsError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let what = Target::every(kind.resource(), ns);
    paged(progress, &what, |params| {
        let api = api.clone();
        async move { api.list(&params).await }
    })
    .await
}

/// Pages through a LIST (client-go's page size); a 404 (the namespace does not exist, on some
/// servers) is an empty list.
pub(crate) async fn paged<K, F, Fut>(
    progress: &dyn Progress,
    what: &Target,
    list: F,
) -> Result<Vec<K>, EffectsError>
where
    K: Clone,
    F: Fn(ListParams) -> Fut,
    Fut: std::future::Future<Output = Result<kube::core::ObjectList<K>, kube::Error>>,
{
    let mut items = Vec::new();
    let mut continue_token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(PAGE_SIZE);
        if let Some(token) = &continue_token {
            params = params.continue_token(token);
        }
        let page = with_retry(progress, Verb::List, what, || async {
            match list(params.clone()).await {
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(kube::core::ObjectList {
                    types: Default::default(),
                    metadata: Default::default(),
                    items: Vec::new(),
                }),
                other => other,
            }
        })
        .await?;
        items.extend(page.items);
        continue_token = page.metadata.continue_.filter(|t| !t.is_empty());
        if continue_token.is_none() {
            return Ok(items);
        }
    }
}

/// The cluster's StorageClasses; `None` when this user may not list them (a namespace admin
/// often may not: cluster-scoped), which must not block a migration the cluster can provision.
async fn storage_classes(
    client: &kube::Client,
    progress: &dyn Progress,
) -> Result<Option<Vec<uyuni_core::storage::StorageClassInfo>>, EffectsError> {
    use k8s_openapi::api::storage::v1::StorageClass;
    let api: Api<StorageClass> = Api::all(client.clone());
    let target = Target::named("storageclasses", "", None);
    let listed = with_retry(progress, Verb::List, &target, || async {
        match api.list(&ListParams::default()).await {
            Err(kube::Error::Api(status)) if status.code == 403 || status.code == 404 => Ok(None),
            other => other.map(Some),
        }
    })
    .await?;
    Ok(listed.map(|l| {
        l.items
            .into_iter()
            .map(|c| uyuni_core::storage::StorageClassInfo {
                default: c
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(uyuni_core::storage::DEFAULT_CLASS_ANNOTATION))
                    .is_some_and(|v| v == "true"),
                name: c.metadata.name.unwrap_or_default(),
            })
            .collect()
    }))
}

/// One typed GET; `None` when the object (or its namespace) does not exist.
async fn get(
    client: &kube::Client,
    ns: &str,
    target: &ObjectRef,
    progress: &dyn Progress,
) -> Result<Option<Object>, EffectsError> {
    let name = target.name.as_str();
    Ok(match target.kind {
        Kind::Namespace => get_cluster::<Namespace>(client, target, progress)
            .await?
            .map(Object::Namespace),
        Kind::Secret => get_namespaced::<Secret>(client, ns, name, target, progress)
            .await?
            .map(Object::Secret),
        Kind::ConfigMap => get_namespaced::<ConfigMap>(client, ns, name, target, progress)
            .await?
            .map(Object::ConfigMap),
        Kind::PersistentVolumeClaim => {
            get_namespaced::<PersistentVolumeClaim>(client, ns, name, target, progress)
                .await?
                .map(Object::PersistentVolumeClaim)
        }
        Kind::ServiceAccount => {
            get_namespaced::<ServiceAccount>(client, ns, name, target, progress)
                .await?
                .map(Object::ServiceAccount)
        }
        Kind::Role => get_namespaced::<Role>(client, ns, name, target, progress)
            .await?
            .map(Object::Role),
        Kind::RoleBinding => get_namespaced::<RoleBinding>(client, ns, name, target, progress)
            .await?
            .map(Object::RoleBinding),
        Kind::Job => get_namespaced::<Job>(client, ns, name, target, progress)
            .await?
            .map(Object::Job),
        Kind::Deployment => get_namespaced::<Deployment>(client, ns, name, target, progress)
            .await?
            .map(Object::Deployment),
        Kind::Service => get_namespaced::<Service>(client, ns, name, target, progress)
            .await?
            .map(Object::Service),
        Kind::Ingress => get_namespaced::<Ingress>(client, ns, name, target, progress)
            .await?
            .map(Object::Ingress),
        Kind::Custom(kind) => crate::custom::get(client, ns, kind, name, progress)
            .await?
            .map(Object::Custom),
    })
}

async fn get_namespaced<K>(
    client: &kube::Client,
    ns: &str,
    name: &str,
    target: &ObjectRef,
    progress: &dyn Progress,
) -> Result<Option<K>, EffectsError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let what = Target::named(target.kind.resource(), name, Some(ns));
    // get_opt turns 404 into None, which also covers "the namespace does not exist".
    with_retry(progress, Verb::Get, &what, || api.get_opt(name)).await
}

async fn get_cluster<K>(
    client: &kube::Client,
    target: &ObjectRef,
    progress: &dyn Progress,
) -> Result<Option<K>, EffectsError>
where
    K: Resource<Scope = ClusterResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let what = Target::named(target.kind.resource(), &target.name, None);
    with_retry(progress, Verb::Get, &what, || api.get_opt(&target.name)).await
}

/// All Jobs matching `selector` in `ns`, page by page.
async fn list_jobs(
    client: &kube::Client,
    ns: &str,
    selector: &str,
    progress: &dyn Progress,
) -> Result<Vec<Job>, EffectsError> {
    let api: Api<Job> = Api::namespaced(client.clone(), ns);
    let what = Target::selected("job", selector, ns);
    // A namespace that does not exist has no Jobs; some servers answer 404 (`paged`).
    paged(progress, &what, |params| {
        let api = api.clone();
        let params = if selector.is_empty() {
            params
        } else {
            params.labels(selector)
        };
        async move { api.list(&params).await }
    })
    .await
}
