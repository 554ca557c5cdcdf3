//! The event sources of the waits: a watch of their own ([`Watch`], what a wait opened before
//! issue 12 and still opens without an [`crate::Observer`]) or a view of the observer's stores
//! ([`View`]), which costs no request. A [`Source`] starts on the view when there is one and
//! falls back to its own watch when the store's watch is refused.

use std::collections::{BTreeMap, VecDeque};
use std::pin::Pin;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::time::Sleep;

use crate::cache::{Cache, Sight, Stored};
use crate::error::{EffectsError, Target, Verb};
use crate::progress::Progress;
use crate::retry::{self, Disposition, MAX_ATTEMPTS, classify_watch, report_retry};

/// Ends at `deadline`, or never without one: the timeout branch of a wait's `select!`, whose
/// limit is a field of the step (`None`: no limit).
pub(crate) async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => futures::future::pending().await,
    }
}

/// The watch of `api` (kube's `watcher`: list, then watch, resuming), every object without its
/// `metadata.managedFields`. That is server-side apply's record of who set which field, often
/// as large as the rest of the object; nothing here reads it (diffs leave it out), and it was
/// copied, converted and freed with every object kept: in a simulated migration, freeing the
/// Jobs' entries alone was a fifth of the plugin's Job waits (perf, frame pointers).
pub(crate) fn stream<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl futures::Stream<Item = watcher::Result<Event<K>>> + Send
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher::watcher(api, config).modify(|object: &mut K| object.meta_mut().managed_fields = None)
}

/// A watch that re-establishes itself, with backoff and a `Retrying` event after each failure.
/// Nothing is requested until it is first polled.
pub(crate) struct Watch<K: 'static> {
    stream: BoxStream<'static, watcher::Result<Event<K>>>,
    pause: Option<Pin<Box<Sleep>>>,
    failures: u32,
    target: Target,
}

impl<K> Watch<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    pub(crate) fn new(api: Api<K>, config: watcher::Config, target: Target) -> Watch<K> {
        Watch {
            stream: stream(api, config).boxed(),
            pause: None,
            failures: 0,
            target,
        }
    }

    /// The next event. Cancel-safe: the pause and the stream live in `self`.
    pub(crate) async fn next(&mut self, progress: &dyn Progress) -> Result<Event<K>, EffectsError> {
        loop {
            if let Some(pause) = self.pause.as_mut() {
                pause.await;
                self.pause = None;
            }
            match self.stream.next().await {
                Some(Ok(event)) => {
                    self.failures = 0;
                    return Ok(event);
                }
                Some(Err(watcher::Error::WatchFailed(err))) if retry::is_timeout(&err) => {
                    // A quiet watch outlived the read timeout; the watcher resumes it from the
                    // last resourceVersion on the next poll.
                    tracing::debug!(target = %self.target, "quiet watch timed out; resuming");
                }
                Some(Err(err)) => {
                    self.failures += 1;
                    if let watcher::Error::InitialListFailed(e)
                    | watcher::Error::WatchStartFailed(e) = &err
                        && let Some(unreachable) = retry::unreachable(e, self.failures)
                    {
                        return Err(unreachable);
                    }
                    let disposition = classify_watch(&err);
                    if disposition == Disposition::Fail || self.failures >= MAX_ATTEMPTS {
                        return Err(EffectsError::Watch {
                            verb: Verb::Watch,
                            target: self.target.clone(),
                            attempts: self.failures,
                            source: Box::new(err),
                        });
                    }
                    let delay = retry::delay(disposition, self.failures);
                    report_retry(
                        progress,
                        Verb::Watch,
                        &self.target,
                        self.failures,
                        delay,
                        &err.to_string(),
                    );
                    self.pause = Some(Box::pin(tokio::time::sleep(delay)));
                }
                // A watcher never ends; should one, there is nothing more to learn from it.
                None => futures::future::pending::<()>().await,
            }
        }
    }
}

/// Which objects of a store a view follows, as the store holds them now.
type Reader<'a, K> = Box<dyn Fn(&Cache) -> Sight<BTreeMap<String, K>> + Send + Sync + 'a>;

/// The objects of a store that a wait follows, as the events a watch of its own would have
/// given: `Init`, an `InitApply` each and `InitDone` once the store has listed, then an `Apply`
/// for each new resourceVersion and a `Delete` for each object gone, after every change of the
/// cache.
pub(crate) struct View<'a, K> {
    cache: &'a Cache,
    read: Reader<'a, K>,
    changes: watch::Receiver<u64>,
    /// What was given so far, by name; `None` before the first `InitDone`.
    given: Option<BTreeMap<String, K>>,
    pending: VecDeque<Event<K>>,
}

impl<'a, K: Stored + Clone> View<'a, K> {
    pub(crate) fn new(
        cache: &'a Cache,
        read: impl Fn(&Cache) -> Sight<BTreeMap<String, K>> + Send + Sync + 'a,
    ) -> View<'a, K> {
        View {
            cache,
            read: Box::new(read),
            changes: cache.changes(),
            given: None,
            pending: VecDeque::new(),
        }
    }

    /// The next event; `None` when the store's watch gave up or is failing. Cancel-safe.
    pub(crate) async fn next(&mut self) -> Option<Event<K>> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            // Marked seen before the read, so that a change after it wakes the wait.
            self.changes.borrow_and_update();
            match (self.read)(self.cache) {
                Sight::Failed => return None,
                Sight::Unlisted => {}
                Sight::Listed(now) => self.compare(now),
            }
            if self.pending.is_empty() && self.changes.changed().await.is_err() {
                // The cache outlives every wait that borrows it: never.
                futures::future::pending::<()>().await;
            }
        }
    }

    fn compare(&mut self, now: BTreeMap<String, K>) {
        let version = |k: &K| k.meta().resource_version.clone();
        match self.given.take() {
            None => {
                self.pending.push_back(Event::Init);
                self.pending
                    .extend(now.values().cloned().map(Event::InitApply));
                self.pending.push_back(Event::InitDone);
            }
            Some(before) => {
                for (name, object) in &now {
                    if before.get(name).map(version) != Some(version(object)) {
                        self.pending.push_back(Event::Apply(object.clone()));
                    }
                }
                for (name, object) in before {
                    if !now.contains_key(&name) {
                        self.pending.push_back(Event::Delete(object));
                    }
                }
            }
        }
        self.given = Some(now);
    }
}

/// A wait's events: from the view while there is one and its store's watch works, else from
/// the wait's own watch (started only then).
pub(crate) struct Source<'a, K: 'static> {
    view: Option<View<'a, K>>,
    own: Watch<K>,
}

impl<'a, K> Source<'a, K>
where
    K: Resource + Stored + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    /// The events of object `name`: from `view` where the observer serves it, else from a
    /// watch of its own, by name.
    pub(crate) fn named(
        view: Option<View<'a, K>>,
        api: Api<K>,
        name: &str,
        target: Target,
    ) -> Source<'a, K> {
        let by_name = watcher::Config::default().fields(&format!("metadata.name={name}"));
        Source {
            view,
            own: Watch::new(api, by_name, target),
        }
    }

    /// The next event. Cancel-safe.
    pub(crate) async fn next(&mut self, progress: &dyn Progress) -> Result<Event<K>, EffectsError> {
        if let Some(view) = self.view.as_mut() {
            if let Some(event) = view.next().await {
                return Ok(event);
            }
            tracing::debug!(target = %self.own.target, "shared watch refused; watching alone");
            self.view = None;
        }
        self.own.next(progress).await
    }
}

impl<'a> Source<'a, Pod> {
    /// The events of the pods `selector` selects in `namespace`: from `view` where the run's
    /// pods watch serves them, else from a watch of its own.
    pub(crate) fn pods(
        view: Option<View<'a, Pod>>,
        api: Api<Pod>,
        selector: &str,
        namespace: &str,
    ) -> Source<'a, Pod> {
        Source {
            view,
            own: Watch::new(
                api,
                watcher::Config::default().labels(selector),
                Target::selected("pod", selector, namespace),
            ),
        }
    }
}
