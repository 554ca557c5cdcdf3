//! Deleting one object and waiting until it is gone: the DELETE with the step's propagation
//! policy, then a watch of the object by name (the observer's store where it holds it, else a
//! watch of its own), never a poll.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, PropagationPolicy};
use kube::runtime::watcher::{self, Event};
use tokio::time::Instant;
use uyuni_core::plan::{DeleteWait, Propagation};
use uyuni_core::{Kind, Object, ObjectRef};

use crate::error::{EffectsError, Target, Verb};
use crate::observe::Observer;
use crate::progress::Progress;
use crate::retry::with_retry;
use crate::watch::Watch;

fn policy(propagation: Propagation) -> PropagationPolicy {
    match propagation {
        Propagation::Foreground => PropagationPolicy::Foreground,
        Propagation::Background => PropagationPolicy::Background,
    }
}

/// Whether an event of a watch of one object by name says it is gone: deleted, or not among
/// what a (re)list found. `listed` tracks whether the current list has shown it.
fn gone<K>(event: &Event<K>, listed: &mut bool) -> bool {
    match event {
        Event::Init => {
            *listed = false;
            false
        }
        Event::InitApply(_) => {
            *listed = true;
            false
        }
        Event::InitDone => !*listed,
        Event::Apply(_) => false,
        Event::Delete(_) => true,
    }
}

/// Deletes `target` with `propagation` and waits until it is gone, at most `wait`. A 404 is
/// success: the object is gone already (an earlier attempt, or someone else, deleted it).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn delete(
    client: &kube::Client,
    namespace: &str,
    step: &str,
    target: &ObjectRef,
    propagation: Propagation,
    wait: DeleteWait,
    observer: Option<&Observer>,
    progress: &dyn Progress,
) -> Result<(), EffectsError> {
    let ns = match target.kind {
        Kind::Namespace => None,
        Kind::Custom(kind) => Some(kind.fixed_namespace().unwrap_or(namespace)),
        _ => Some(namespace),
    };
    let resource = crate::cache::api_resource(target.kind);
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let what = Target::named(target.kind.resource(), &target.name, ns);
    let params = DeleteParams {
        propagation_policy: Some(policy(propagation)),
        ..DeleteParams::default()
    };
    // The observer's store, where it holds the object: when the wait ends there, the next
    // observation (read from the same store) no longer holds it either. Taken before the
    // DELETE: after it, the store may have seen the object go already, and `shared` serves
    // only an object its store holds.
    let mut view = match (observer, ns) {
        (Some(o), Some(ns)) => o
            .shared(target.kind, ns, &target.name, None, |o: &Object| {
                Some(o.clone())
            })
            .await
            .map(|shared| shared.view),
        _ => None,
    };
    tracing::debug!(%target, namespace = ?ns, propagation = propagation.as_str(), "delete");
    let found = with_retry(progress, Verb::Delete, &what, || async {
        match api.delete(&target.name, &params).await {
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            other => other.map(|_| true),
        }
    })
    .await?;
    if !found {
        tracing::debug!(%target, "already gone");
        return Ok(());
    }
    let mut own = Watch::new(
        api,
        watcher::Config::default().fields(&format!("metadata.name={}", target.name)),
        what.clone(),
    );
    let started = Instant::now();
    let limit = wait.timeout_seconds.map(Duration::from_secs);
    let mut listed = false;
    loop {
        let deadline = crate::watch::until(limit.map(|l| started + l));
        tokio::select! {
            () = deadline => {
                return Err(EffectsError::NotDeleted {
                    step: step.to_owned(),
                    target: what,
                    waited: started.elapsed(),
                    propagation: propagation.as_str(),
                });
            }
            ended = async {
                if let Some(v) = view.as_mut() {
                    if let Some(event) = v.next().await {
                        return Ok(gone(&event, &mut listed));
                    }
                    tracing::debug!(target = %what, "shared watch failing; watching alone");
                    view = None;
                    listed = false;
                }
                own.next(progress).await.map(|event| gone(&event, &mut listed))
            } => {
                if ended? {
                    return Ok(());
                }
            }
        }
    }
}
