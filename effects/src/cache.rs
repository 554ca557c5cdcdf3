//! The observation's cache: one watch per kind the observation reads, each feeding a store of
//! the objects it covers. The first observation lists each kind once (the watch's initial
//! list); every later one reads the stores, without a request, once they hold what the run
//! itself wrote or waited for (the barrier: [`Cache::holds`]).
//!
//! The watches are kube-runtime's `watcher` (list, then watch from the list's
//! resourceVersion, re-listing by itself after a 410 Gone), over dynamic objects so that one
//! code path serves every kind; each event is turned into the typed [`Object`] the planner
//! reads. A watch the server refuses before its first list (403 Forbidden, 404 of the resource)
//! gives up, and [`crate::Observer`] reads that scope directly on every turn instead.
//!
//! The waits read the same stores (the Job, the Deployment) and one more watch, started at
//! the first wait and then shared by every later one: the pods of our workloads, by label
//! selector. Every event bumps one counter ([`Cache::changes`]), which is what a wait awaits
//! between two reads of the stores.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, LimitRange, Namespace, PersistentVolumeClaim, Pod, ResourceQuota, Secret, Service,
    ServiceAccount,
};
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::TypeMeta;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uyuni_core::{Kind, Object};

use crate::retry;

/// How many resourceVersions of one object a store remembers having seen: enough for the
/// barrier, which asks for the version a step saw last, soon after the step.
const VERSIONS_KEPT: usize = 16;

/// Page size of the initial lists: client-go's pager's.
const PAGE_SIZE: u32 = 500;

/// What one watch covers: a kind, in a namespace (`None`: cluster-scoped), narrowed by
/// selectors.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Scope {
    pub kind: Kind,
    pub namespace: Option<String>,
    pub labels: Option<String>,
    pub fields: Option<String>,
}

#[derive(Debug)]
struct State<T> {
    /// The objects the watch covers now, by name.
    objects: BTreeMap<String, T>,
    /// A re-list in progress: the objects listed so far, which replace `objects` at its end.
    relisting: Option<BTreeMap<String, T>>,
    /// The resourceVersions seen per name, newest last.
    seen: HashMap<String, VecDeque<String>>,
    /// Initial lists completed (the first, and each re-list).
    lists: u64,
    /// Why the watch gave up; its scope is then read directly.
    failed: Option<String>,
    /// The watch failed and has not delivered an event since: a wait does not trust the store
    /// then, and watches on its own (which retries, reports and gives up as a wait should).
    failing: bool,
}

impl<T> Default for State<T> {
    fn default() -> Self {
        State {
            objects: BTreeMap::new(),
            relisting: None,
            seen: HashMap::new(),
            lists: 0,
            failed: None,
            failing: false,
        }
    }
}

impl<T> State<T> {
    fn saw(&mut self, name: &str, version: Option<&str>) {
        let Some(version) = version else { return };
        let seen = self.seen.entry(name.to_owned()).or_default();
        if seen.back().is_some_and(|v| v == version) {
            return;
        }
        seen.push_back(version.to_owned());
        if seen.len() > VERSIONS_KEPT {
            seen.pop_front();
        }
    }
}

/// What a store holds now, as a reader sees it.
pub(crate) enum Sight<T> {
    /// The watch has not listed yet.
    Unlisted,
    /// The watch gave up (refused), or is failing now: read or watch directly instead.
    Failed,
    Listed(T),
}

/// The pods watch: pods of a namespace by label selector.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct PodScope {
    pub namespace: String,
    pub labels: String,
}

/// Watches and their stores; the watches end when it is dropped.
pub(crate) struct Cache {
    client: kube::Client,
    stores: BTreeMap<Scope, Arc<Mutex<State<Object>>>>,
    /// Started by the first wait that reads them (`&self`: the waits only borrow the cache).
    pods: Mutex<BTreeMap<PodScope, Arc<Mutex<State<Pod>>>>>,
    /// Bumped after every event of every watch.
    changed: Arc<watch::Sender<u64>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Cache {
    fn drop(&mut self) {
        for task in lock(&self.tasks).iter() {
            task.abort();
        }
    }
}

fn lock<T>(state: &Mutex<T>) -> MutexGuard<'_, T> {
    // A task that panicked holding the lock left a store no worse than a stale one.
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Cache {
    /// Starts one watch per scope.
    pub(crate) fn start(client: &kube::Client, scopes: impl IntoIterator<Item = Scope>) -> Cache {
        let changed = Arc::new(watch::channel(0u64).0);
        let mut stores = BTreeMap::new();
        let mut tasks = Vec::new();
        for scope in scopes {
            if stores.contains_key(&scope) {
                continue;
            }
            let state = Arc::new(Mutex::new(State::default()));
            let resource = api_resource(scope.kind);
            let api: Api<DynamicObject> = match &scope.namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let mut config = watcher::Config::default().page_size(PAGE_SIZE);
            if let Some(labels) = &scope.labels {
                config = config.labels(labels);
            }
            if let Some(fields) = &scope.fields {
                config = config.fields(fields);
            }
            let types = TypeMeta {
                api_version: resource.api_version.clone(),
                kind: resource.kind.clone(),
            };
            let kind = scope.kind;
            let typed = move |mut o: DynamicObject| {
                if o.types.is_none() {
                    o.types = Some(types.clone());
                }
                to_object(kind, o)
            };
            tasks.push(tokio::spawn(feed(
                api,
                config,
                format!("{scope:?}"),
                typed,
                Arc::clone(&state),
                Arc::clone(&changed),
            )));
            stores.insert(scope, state);
        }
        Cache {
            client: client.clone(),
            stores,
            pods: Mutex::new(BTreeMap::new()),
            changed,
            tasks: Mutex::new(tasks),
        }
    }

    /// Starts the pods watch of `scope` unless it runs already.
    pub(crate) fn watch_pods(&self, scope: &PodScope) {
        let mut pods = lock(&self.pods);
        if pods.contains_key(scope) {
            return;
        }
        let state = Arc::new(Mutex::new(State::default()));
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &scope.namespace);
        let config = watcher::Config::default()
            .page_size(PAGE_SIZE)
            .labels(&scope.labels);
        let task = tokio::spawn(feed(
            api,
            config,
            format!("{scope:?}"),
            Some,
            Arc::clone(&state),
            Arc::clone(&self.changed),
        ));
        lock(&self.tasks).push(task);
        pods.insert(scope.clone(), state);
    }

    /// A receiver that sees every change of every store: what a wait awaits between reads.
    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// `read` of the scope's objects, as the store holds them now.
    pub(crate) fn read<R>(
        &self,
        scope: &Scope,
        read: impl FnOnce(&BTreeMap<String, Object>) -> R,
    ) -> Sight<R> {
        match self.stores.get(scope) {
            None => Sight::Failed,
            Some(state) => sight(&lock(state), read),
        }
    }

    /// `read` of the pods of `scope`'s watch, as its store holds them now.
    pub(crate) fn read_pods<R>(
        &self,
        scope: &PodScope,
        read: impl FnOnce(&BTreeMap<String, Pod>) -> R,
    ) -> Sight<R> {
        let state = lock(&self.pods).get(scope).cloned();
        match state {
            None => Sight::Failed,
            Some(state) => sight(&lock(&state), read),
        }
    }

    /// Waits until `done` holds of the cache, re-checking after every change of a store;
    /// whether it held before `deadline`.
    pub(crate) async fn wait_until(
        &self,
        deadline: Instant,
        done: impl Fn(&Cache) -> bool,
    ) -> bool {
        let mut changes = self.changes();
        loop {
            // Marked seen before the check, so that a change between the two is not missed.
            changes.borrow_and_update();
            if done(self) {
                return true;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                // The sender lives as long as `self`: never; and a timeout is the answer.
                Ok(Err(_)) | Err(_) => return done(self),
            }
        }
    }

    /// Every watch has listed once, or given up.
    pub(crate) fn listed(&self) -> bool {
        self.stores.values().all(|s| {
            let s = lock(s);
            s.lists > 0 || s.failed.is_some()
        })
    }

    /// Whether the scope's watch has listed once, or given up.
    pub(crate) fn listed_scope(&self, scope: &Scope) -> bool {
        self.stores.get(scope).is_none_or(|s| {
            let s = lock(s);
            s.lists > 0 || s.failed.is_some()
        })
    }

    /// Whether the scope's watch gave up or is failing now.
    pub(crate) fn troubled(&self, scope: &Scope) -> bool {
        self.stores.get(scope).is_none_or(|s| {
            let s = lock(s);
            s.failed.is_some() || s.failing
        })
    }

    /// Whether the scope's watch gave up (or was never started): read it directly.
    pub(crate) fn failed(&self, scope: &Scope) -> bool {
        self.stores
            .get(scope)
            .is_none_or(|s| lock(s).failed.is_some())
    }

    /// Initial lists completed by the scope's watch.
    pub(crate) fn lists(&self, scope: &Scope) -> u64 {
        self.stores.get(scope).map_or(0, |s| lock(s).lists)
    }

    /// Whether the scope's store has seen `name` at `version` (or re-listed since `lists`).
    pub(crate) fn holds(&self, scope: &Scope, name: &str, version: &str, lists: u64) -> bool {
        self.stores.get(scope).is_none_or(|s| {
            let s = lock(s);
            s.failed.is_some()
                || s.lists > lists
                || s.seen
                    .get(name)
                    .is_some_and(|v| v.iter().any(|x| x == version))
        })
    }

    /// The object `name` of the scope's store.
    pub(crate) fn get(&self, scope: &Scope, name: &str) -> Option<Object> {
        self.stores
            .get(scope)
            .and_then(|s| lock(s).objects.get(name).cloned())
    }

    /// Every object of the scope's store.
    pub(crate) fn all(&self, scope: &Scope) -> Vec<Object> {
        self.stores
            .get(scope)
            .map(|s| lock(s).objects.values().cloned().collect())
            .unwrap_or_default()
    }
}

/// What a store keeps: something with object metadata.
pub(crate) trait Stored {
    fn meta(&self) -> &kube::core::ObjectMeta;
}

impl Stored for Object {
    fn meta(&self) -> &kube::core::ObjectMeta {
        self.metadata()
    }
}

impl Stored for Pod {
    fn meta(&self) -> &kube::core::ObjectMeta {
        &self.metadata
    }
}

impl Stored for Job {
    fn meta(&self) -> &kube::core::ObjectMeta {
        &self.metadata
    }
}

impl Stored for Deployment {
    fn meta(&self) -> &kube::core::ObjectMeta {
        &self.metadata
    }
}

impl Stored for uyuni_core::object::CustomObject {
    fn meta(&self) -> &kube::core::ObjectMeta {
        &self.metadata
    }
}

fn sight<T, R>(state: &State<T>, read: impl FnOnce(&BTreeMap<String, T>) -> R) -> Sight<R> {
    if state.failed.is_some() || state.failing {
        Sight::Failed
    } else if state.lists == 0 {
        Sight::Unlisted
    } else {
        Sight::Listed(read(&state.objects))
    }
}

/// Feeds one store from its watch until the cache is dropped, or until the server refuses the
/// watch before it ever listed. `convert` turns what the watch reads into what the store keeps
/// (`None`: unreadable, skipped).
async fn feed<K, T>(
    api: Api<K>,
    config: watcher::Config,
    scope: String,
    convert: impl Fn(K) -> Option<T>,
    state: Arc<Mutex<State<T>>>,
    changed: Arc<watch::Sender<u64>>,
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    T: Stored,
{
    let mut stream = crate::watch::stream(api, config).boxed();
    let mut failures = 0u32;
    let bump = || changed.send_modify(|n| *n = n.wrapping_add(1));
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(event) => event,
            Err(err) => {
                if refused(&err) && lock(&state).lists == 0 {
                    tracing::debug!(scope, error = %err, "watch refused; reading directly");
                    lock(&state).failed = Some(err.to_string());
                    bump();
                    return;
                }
                let quiet = matches!(&err, watcher::Error::WatchFailed(e) if retry::is_timeout(e));
                tracing::debug!(scope, error = %err, "watch failed; resuming");
                if !quiet {
                    lock(&state).failing = true;
                    bump();
                    failures = failures.saturating_add(1);
                    let pause = retry::delay(retry::classify_watch(&err), failures);
                    tokio::time::sleep(pause.min(Duration::from_secs(5))).await;
                }
                continue;
            }
        };
        failures = 0;
        {
            let mut s = lock(&state);
            s.failing = false;
            match event {
                Event::Init => s.relisting = Some(BTreeMap::new()),
                Event::InitApply(o) => {
                    if let Some(object) = convert(o) {
                        let name = object.meta().name.clone().unwrap_or_default();
                        s.saw(&name, object.meta().resource_version.as_deref());
                        s.relisting
                            .get_or_insert_with(BTreeMap::new)
                            .insert(name, object);
                    }
                }
                Event::InitDone => {
                    s.objects = s.relisting.take().unwrap_or_default();
                    s.lists += 1;
                }
                Event::Apply(o) => {
                    if let Some(object) = convert(o) {
                        let name = object.meta().name.clone().unwrap_or_default();
                        s.saw(&name, object.meta().resource_version.as_deref());
                        s.objects.insert(name, object);
                    }
                }
                Event::Delete(o) => {
                    let name = o.meta().name.clone();
                    if let Some(name) = name {
                        s.saw(&name, o.meta().resource_version.as_deref());
                        s.objects.remove(&name);
                    }
                }
            }
        }
        bump();
    }
}

/// A refusal that retrying will not change: not allowed, or no such resource.
fn refused(err: &watcher::Error) -> bool {
    match err {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status)) => {
            matches!(status.code, 401 | 403 | 404 | 405)
        }
        _ => false,
    }
}

/// The API resource of `kind`, as a dynamic object (what watching, listing and deleting by
/// kind need of it).
pub(crate) fn api_resource(kind: Kind) -> ApiResource {
    match kind {
        Kind::Namespace => ApiResource::erase::<Namespace>(&()),
        Kind::Secret => ApiResource::erase::<Secret>(&()),
        Kind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
        Kind::PersistentVolumeClaim => ApiResource::erase::<PersistentVolumeClaim>(&()),
        Kind::ServiceAccount => ApiResource::erase::<ServiceAccount>(&()),
        Kind::Role => ApiResource::erase::<Role>(&()),
        Kind::RoleBinding => ApiResource::erase::<RoleBinding>(&()),
        Kind::Job => ApiResource::erase::<Job>(&()),
        Kind::Deployment => ApiResource::erase::<Deployment>(&()),
        Kind::Service => ApiResource::erase::<Service>(&()),
        Kind::Ingress => ApiResource::erase::<Ingress>(&()),
        Kind::NetworkPolicy => ApiResource::erase::<NetworkPolicy>(&()),
        Kind::ResourceQuota => ApiResource::erase::<ResourceQuota>(&()),
        Kind::LimitRange => ApiResource::erase::<LimitRange>(&()),
        Kind::Custom(custom) => crate::custom::resource(custom),
    }
}

/// The typed object of a watch event; `None` (logged) when it does not parse as its kind.
fn to_object(kind: Kind, object: DynamicObject) -> Option<Object> {
    fn typed<K: serde::de::DeserializeOwned>(
        object: &DynamicObject,
        wrap: fn(K) -> Object,
    ) -> Option<Object> {
        let parsed = serde_json::to_value(object).and_then(serde_json::from_value::<K>);
        match parsed {
            Ok(o) => Some(wrap(o)),
            Err(err) => {
                tracing::debug!(name = ?object.metadata.name, error = %err, "unreadable object");
                None
            }
        }
    }
    match kind {
        Kind::Namespace => typed(&object, Object::Namespace),
        Kind::Secret => typed(&object, Object::Secret),
        Kind::ConfigMap => typed(&object, Object::ConfigMap),
        Kind::PersistentVolumeClaim => typed(&object, Object::PersistentVolumeClaim),
        Kind::ServiceAccount => typed(&object, Object::ServiceAccount),
        Kind::Role => typed(&object, Object::Role),
        Kind::RoleBinding => typed(&object, Object::RoleBinding),
        Kind::Job => typed(&object, Object::Job),
        Kind::Deployment => typed(&object, Object::Deployment),
        Kind::Service => typed(&object, Object::Service),
        Kind::Ingress => typed(&object, Object::Ingress),
        Kind::NetworkPolicy => typed(&object, Object::NetworkPolicy),
        Kind::ResourceQuota => typed(&object, Object::ResourceQuota),
        Kind::LimitRange => typed(&object, Object::LimitRange),
        Kind::Custom(custom) => Some(Object::Custom(crate::custom::to_custom(custom, object))),
    }
}
