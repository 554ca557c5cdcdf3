//! One snapshot of what the planner asked to see. Reads only.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, LimitRange, Namespace, PersistentVolumeClaim, ResourceQuota, Secret, Service,
    ServiceAccount,
};
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Resource;
use kube::api::{Api, ListParams};
use kube::core::ClusterResourceScope;
use serde::de::DeserializeOwned;
use tokio::time::Instant;
use uyuni_core::{Kind, Object, ObjectRef, Observation, Observed};

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};

use crate::cache::{Cache, PodScope, Scope, Sight};
use crate::execute::Executed;
use crate::watch::View;
use uyuni_core::labels::selects;

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
    observe_once(client, observation, progress).await
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

/// How long an observation waits for the watches to hold what the run wrote or waited for
/// before it reads the cluster directly instead (and a wait, before it watches on its own).
/// Events arrive within milliseconds; this only bounds a watch that is stuck (a proxy that
/// buffers, a server that dropped it silently). [`Observer::with_barrier_timeout`] changes it.
pub const BARRIER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the first observation waits for every watch's initial list before it reads the
/// cluster directly (and keeps the watches for the next turn).
const FIRST_LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// A version the next observation must include: a store has seen it, or has re-listed since.
#[derive(Debug, Clone)]
struct Expected {
    scope: Scope,
    name: String,
    resource_version: String,
    /// The store's count of lists when the version was expected.
    lists: u64,
}

/// Observes the same [`Observation`] turn after turn of the loop: the cluster's facts once,
/// then one watch per kind the observation reads (its initial list is the first observation's
/// request; see `cache`). Each later observation reads the watches' stores, once they hold
/// every version the run's steps reported ([`Observer::expect`]): no request. A scope whose
/// watch the server refuses is read directly, as is everything when the watches fall behind.
pub struct Observer {
    client: kube::Client,
    observation: Observation,
    cluster: Option<ClusterFacts>,
    cache: Option<Cache>,
    expected: Vec<Expected>,
    barrier_timeout: Duration,
    /// The watches' changes, marked seen when an observation starts: [`Observer::changed`]
    /// then sees every change since the last observation began.
    changes: Option<tokio::sync::watch::Receiver<u64>>,
}

/// A wait's view of the object it waits for in an observer's store, caught up with what the
/// run wrote of it.
pub(crate) struct Shared<'a, K> {
    pub view: View<'a, K>,
    /// The object as the store holds it.
    pub current: K,
}

impl Observer {
    pub fn new(client: kube::Client, observation: Observation) -> Observer {
        Observer {
            client,
            observation,
            cluster: None,
            cache: None,
            expected: Vec::new(),
            barrier_timeout: BARRIER_TIMEOUT,
            changes: None,
        }
    }

    /// How long an observation (or a wait) waits for the watches to hold what the run wrote
    /// before it reads (or watches) directly; [`BARRIER_TIMEOUT`] unless set.
    #[must_use]
    pub fn with_barrier_timeout(mut self, timeout: Duration) -> Observer {
        self.barrier_timeout = timeout;
        self
    }

    /// The store of `kind`'s object `name` in `namespace`, once it holds every version of it the
    /// run reported (and `version`, the one a step just wrote); `None` when there is no such
    /// store, its watch gave up, it does not catch up within the barrier's timeout or it does
    /// not hold the object: the wait then watches on its own, as without an observer.
    pub(crate) async fn shared<K: crate::cache::Stored + Clone + 'static>(
        &self,
        kind: Kind,
        namespace: &str,
        name: &str,
        version: Option<&str>,
        typed: fn(&Object) -> Option<K>,
    ) -> Option<Shared<'_, K>> {
        let cache = self.cache.as_ref()?;
        let scope = match kind {
            Kind::Job => self.jobs_scope(),
            _ if self.observation.named.iter().any(|t| t.kind == kind) => self.scope_of(kind),
            _ => return None,
        };
        if scope.namespace.as_deref() != Some(namespace) || cache.failed(&scope) {
            return None;
        }
        let mut wanted: Vec<Expected> = self
            .expected
            .iter()
            .filter(|e| e.scope == scope && e.name == name)
            .cloned()
            .collect();
        wanted.extend(version.map(|v| Expected {
            lists: cache.lists(&scope),
            scope: scope.clone(),
            name: name.to_owned(),
            resource_version: v.to_owned(),
        }));
        let caught_up = |c: &Cache| {
            c.listed_scope(&scope)
                && wanted
                    .iter()
                    .all(|e| c.holds(&e.scope, &e.name, &e.resource_version, e.lists))
        };
        // A watch failing now will not catch up soon: no use waiting for it.
        cache
            .wait_until(Instant::now() + self.barrier_timeout, |c| {
                c.troubled(&scope) || caught_up(c)
            })
            .await;
        let held = caught_up(cache);
        let current = match cache.read(&scope, |m| m.get(name).and_then(typed)) {
            Sight::Listed(Some(current)) if held => current,
            _ => {
                tracing::debug!(%name, held, "the store does not hold the object; watching alone");
                return None;
            }
        };
        let owned = name.to_owned();
        let view = View::new(cache, move |c: &Cache| {
            match c.read(&scope, |m| m.get(&owned).and_then(typed)) {
                Sight::Listed(object) => {
                    Sight::Listed(object.map(|o| (owned.clone(), o)).into_iter().collect())
                }
                Sight::Unlisted => Sight::Unlisted,
                Sight::Failed => Sight::Failed,
            }
        });
        Some(Shared { view, current })
    }

    /// Whether the watch of the Jobs covers a Job labelled `labels` (else its store would never
    /// hold it, and a wait would only learn so at the barrier's timeout).
    pub(crate) fn watches_job(
        &self,
        labels: Option<&std::collections::BTreeMap<String, String>>,
    ) -> bool {
        let selector = &self.observation.job_selector;
        selector.is_empty() || selects(selector, labels)
    }

    /// A wait's view of the pods that `filter` (an equality label selector) selects, from the
    /// one pods watch of the run (started by the first wait); `None` where that watch does not
    /// cover them (`template`: the pods' template, whose labels they carry), and the wait
    /// watches its own.
    pub(crate) fn shared_pods(
        &self,
        namespace: &str,
        template: Option<&PodTemplateSpec>,
        filter: String,
    ) -> Option<View<'_, Pod>> {
        let cache = self.cache.as_ref()?;
        let selector = &self.observation.job_selector;
        let labels = template
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.as_ref());
        if namespace != self.observation.namespace
            || selector.is_empty()
            || !selects(selector, labels)
        {
            return None;
        }
        let scope = PodScope {
            namespace: namespace.to_owned(),
            labels: selector.clone(),
        };
        cache.watch_pods(&scope);
        Some(View::new(cache, move |c: &Cache| {
            c.read_pods(&scope, |pods| {
                pods.iter()
                    .filter(|(_, p)| selects(&filter, p.metadata.labels.as_ref()))
                    .map(|(n, p)| (n.clone(), p.clone()))
                    .collect()
            })
        }))
    }

    /// The pods `selector` selects in the observation's namespace, from a watch the observer
    /// keeps (started by the first call, which waits for its list); read directly when the
    /// server refuses the watch. What `status --watch` reads beside each observation.
    pub async fn pods(&self, selector: &str) -> Result<Vec<Pod>, EffectsError> {
        let namespace = self.observation.namespace.clone();
        let Some(cache) = self.cache.as_ref() else {
            return crate::logs::pods(&self.client, &namespace, selector).await;
        };
        let scope = PodScope {
            namespace: namespace.clone(),
            labels: selector.to_owned(),
        };
        cache.watch_pods(&scope);
        cache
            .wait_until(Instant::now() + FIRST_LIST_TIMEOUT, |c| {
                !matches!(c.read_pods(&scope, |_| ()), Sight::Unlisted)
            })
            .await;
        match cache.read_pods(&scope, |pods| pods.values().cloned().collect()) {
            Sight::Listed(pods) => Ok(pods),
            Sight::Unlisted | Sight::Failed => {
                crate::logs::pods(&self.client, &namespace, selector).await
            }
        }
    }

    /// Waits until a watch of the observer (its pods' included) sees a change: what
    /// `status --watch` awaits between two reports. Returns at once before the first
    /// observation, which starts the watches.
    pub async fn changed(&mut self) {
        let Some(changes) = self.changes.as_mut() else {
            return;
        };
        // The sender lives as long as the cache: an error cannot happen while `self` lives.
        let _ = changes.changed().await;
    }

    /// The observation read.
    pub fn observation(&self) -> &Observation {
        &self.observation
    }

    /// Tells the observer what a step wrote or waited for: the next observation includes these
    /// versions (or newer).
    pub fn expect(&mut self, executed: &Executed) {
        let Some(cache) = &self.cache else {
            // Nothing is watched yet: the first observation reads everything anyway.
            return;
        };
        for version in &executed.versions {
            for scope in self.scopes_of(version.target.kind) {
                if scope.namespace != version.namespace {
                    continue;
                }
                self.expected.push(Expected {
                    lists: cache.lists(&scope),
                    scope,
                    name: version.target.name.clone(),
                    resource_version: version.resource_version.clone(),
                });
            }
        }
    }

    /// One snapshot of what the observation names: from the watches' stores once they hold
    /// what was expected, else read now; the cluster's facts as first read.
    pub async fn observe(&mut self, progress: &dyn Progress) -> Result<Observed, EffectsError> {
        let cluster = self.cluster_facts(progress).await?;
        if self.cache.is_none() {
            let scopes = self.scopes(&cluster);
            let cache = Cache::start(&self.client, scopes);
            self.changes = Some(cache.changes());
            let listed = cache
                .wait_until(Instant::now() + FIRST_LIST_TIMEOUT, Cache::listed)
                .await;
            self.cache = Some(cache);
            if !listed {
                tracing::debug!("the watches did not list in time; reading directly");
                return self.read_directly(&cluster, progress).await;
            }
        }
        let expected = std::mem::take(&mut self.expected);
        let cache = self.cache.as_ref().expect("started above");
        if let Some(changes) = self.changes.as_mut() {
            changes.borrow_and_update();
        }
        let waited = Instant::now();
        let held = cache
            .wait_until(waited + self.barrier_timeout, |c| {
                expected
                    .iter()
                    .all(|e| c.holds(&e.scope, &e.name, &e.resource_version, e.lists))
            })
            .await;
        tracing::debug!(
            expected = expected.len(),
            waited_ms = waited.elapsed().as_millis(),
            held,
            "observation from the watches"
        );
        if !held {
            tracing::debug!(
                missing = ?expected.iter().filter(|e| !cache.holds(&e.scope, &e.name, &e.resource_version, e.lists)).collect::<Vec<_>>(),
                "the watches did not catch up in time; reading directly"
            );
            return self.read_directly(&cluster, progress).await;
        }
        self.read_cache(&cluster, progress).await
    }

    async fn cluster_facts(
        &mut self,
        progress: &dyn Progress,
    ) -> Result<ClusterFacts, EffectsError> {
        if let Some(facts) = &self.cluster {
            return Ok(facts.clone());
        }
        let client = &self.client;
        let mut served = Vec::new();
        for group_version in &self.observation.api_groups {
            served.extend(crate::custom::served(client, group_version, progress).await?);
        }
        let facts = ClusterFacts {
            served,
            ingress_classes: crate::custom::ingress_classes(client, progress).await?,
            storage_classes: storage_classes(client, progress).await?,
        };
        self.cluster = Some(facts.clone());
        Ok(facts)
    }

    /// The watch that reads `kind`'s named objects.
    fn scope_of(&self, kind: Kind) -> Scope {
        let ns = &self.observation.namespace;
        match kind {
            Kind::Namespace => Scope {
                kind,
                namespace: None,
                labels: None,
                fields: Some(format!("metadata.name={ns}")),
            },
            Kind::Custom(custom) => Scope {
                kind,
                namespace: Some(custom.fixed_namespace().unwrap_or(ns).to_owned()),
                labels: None,
                fields: None,
            },
            _ => Scope {
                kind,
                namespace: Some(ns.clone()),
                labels: None,
                fields: None,
            },
        }
    }

    /// The watch that reads the Jobs by the observation's selector.
    fn jobs_scope(&self) -> Scope {
        let selector = &self.observation.job_selector;
        Scope {
            kind: Kind::Job,
            namespace: Some(self.observation.namespace.clone()),
            labels: (!selector.is_empty()).then(|| selector.clone()),
            fields: None,
        }
    }

    /// The watches that may hold an object of `kind`.
    fn scopes_of(&self, kind: Kind) -> Vec<Scope> {
        let mut out = Vec::new();
        if self.observation.named.iter().any(|t| t.kind == kind) {
            out.push(self.scope_of(kind));
        }
        if kind == Kind::Job {
            out.push(self.jobs_scope());
        }
        out
    }

    /// One watch per kind the observation names (custom kinds where served), and the Jobs'.
    fn scopes(&self, cluster: &ClusterFacts) -> Vec<Scope> {
        let served = served_of(cluster);
        let mut out: Vec<Scope> = self
            .observation
            .named
            .iter()
            .filter(|t| match t.kind {
                Kind::Custom(custom) => served.serves(custom),
                _ => true,
            })
            .map(|t| self.scope_of(t.kind))
            .collect();
        out.extend(
            self.observation
                .every
                .iter()
                .map(|kind| self.scope_of(*kind)),
        );
        out.push(self.jobs_scope());
        out.sort();
        out.dedup();
        out
    }

    /// The snapshot from the stores; a scope whose watch gave up is read now.
    async fn read_cache(
        &self,
        cluster: &ClusterFacts,
        progress: &dyn Progress,
    ) -> Result<Observed, EffectsError> {
        let cache = self.cache.as_ref().expect("started");
        let ns = self.observation.namespace.as_str();
        let mut observed = served_of(cluster);
        for target in &self.observation.named {
            if let Kind::Custom(custom) = target.kind
                && !observed.serves(custom)
            {
                continue;
            }
            let scope = self.scope_of(target.kind);
            let object = if cache.failed(&scope) {
                get(&self.client, ns, target, progress).await?
            } else {
                cache.get(&scope, &target.name)
            };
            if let Some(object) = object {
                observed.insert(object);
            }
        }
        for kind in &self.observation.every {
            let scope = self.scope_of(*kind);
            let objects = if cache.failed(&scope) {
                list(&self.client, ns, *kind, progress).await?
            } else {
                cache.all(&scope)
            };
            for object in objects {
                observed.insert(object);
            }
        }
        let jobs = self.jobs_scope();
        if cache.failed(&jobs) {
            for job in list_jobs(&self.client, ns, &self.observation.job_selector, progress).await?
            {
                observed.insert(Object::Job(job));
            }
        } else {
            for job in cache.all(&jobs) {
                observed.insert(job);
            }
        }
        Ok(observed)
    }

    /// Every object the observation names read now: a LIST per kind with two names or more,
    /// a GET for each other object, a LIST of each kind it reads every object of, and the Jobs
    /// by selector.
    async fn read_directly(
        &self,
        cluster: &ClusterFacts,
        progress: &dyn Progress,
    ) -> Result<Observed, EffectsError> {
        let client = &self.client;
        let observation = &self.observation;
        let ns = observation.namespace.as_str();
        let mut observed = served_of(cluster);
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
        for kind in &observation.every {
            tracing::debug!(?kind, namespace = ns, "list every");
            for object in list(client, ns, *kind, progress).await? {
                observed.insert(object);
            }
        }
        for job in list_jobs(client, ns, &observation.job_selector, progress).await? {
            observed.insert(Object::Job(job));
        }
        Ok(observed)
    }
}

/// An empty snapshot carrying the cluster's facts.
fn served_of(cluster: &ClusterFacts) -> Observed {
    let mut observed = Observed::default();
    observed.served.extend(cluster.served.iter().cloned());
    observed.ingress_classes = cluster.ingress_classes.clone();
    observed.storage_classes = cluster.storage_classes.clone();
    observed
}

/// A single observation, read directly: what the dry run and one-shot readers need. Watches
/// would cost their own list and watch for one read.
async fn observe_once(
    client: &kube::Client,
    observation: &Observation,
    progress: &dyn Progress,
) -> Result<Observed, EffectsError> {
    let mut observer = Observer::new(client.clone(), observation.clone());
    let cluster = observer.cluster_facts(progress).await?;
    observer.read_directly(&cluster, progress).await
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
        Kind::NetworkPolicy => list_as(client, ns, kind, progress, Object::NetworkPolicy).await?,
        Kind::ResourceQuota => list_as(client, ns, kind, progress, Object::ResourceQuota).await?,
        Kind::LimitRange => list_as(client, ns, kind, progress, Object::LimitRange).await?,
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
        Kind::NetworkPolicy => get_namespaced::<NetworkPolicy>(client, ns, name, target, progress)
            .await?
            .map(Object::NetworkPolicy),
        Kind::ResourceQuota => get_namespaced::<ResourceQuota>(client, ns, name, target, progress)
            .await?
            .map(Object::ResourceQuota),
        Kind::LimitRange => get_namespaced::<LimitRange>(client, ns, name, target, progress)
            .await?
            .map(Object::LimitRange),
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
