//! Custom resources (cert-manager's Issuer and Certificate): what the cluster serves, reading
//! and server-side applying them as dynamic objects, and waiting for their `Ready` condition.

use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use tokio::time::Instant;
use uyuni_core::labels::FIELD_MANAGER;
use uyuni_core::object::{CustomKind, CustomObject};
use uyuni_core::observed::custom_ready;
use uyuni_core::plan::DeploymentWait;
use uyuni_core::{Kind, Object, ObjectRef};

use crate::error::{EffectsError, Target, Verb};
use crate::progress::{Progress, ProgressEvent};
use crate::retry::{self, with_retry};

pub(crate) fn resource(kind: CustomKind) -> ApiResource {
    let (group, version) = kind
        .api_version()
        .split_once('/')
        .unwrap_or(("", kind.api_version()));
    ApiResource {
        group: group.to_owned(),
        version: version.to_owned(),
        api_version: kind.api_version().to_owned(),
        kind: kind.kind().to_owned(),
        plural: kind.plural().to_owned(),
    }
}

/// The resources a group version serves, as `group/version/plural`; none when the group is
/// not served (its CRDs are not installed).
pub(crate) async fn served(
    client: &kube::Client,
    group_version: &str,
    progress: &dyn Progress,
) -> Result<Vec<String>, EffectsError> {
    let target = Target::named("apiresources", group_version, None);
    let listed = with_retry(progress, Verb::Get, &target, || async {
        match client.list_api_group_resources(group_version).await {
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            other => other.map(Some),
        }
    })
    .await?;
    Ok(listed
        .map(|l| {
            l.resources
                .into_iter()
                .filter(|r| !r.name.contains('/'))
                .map(|r| format!("{group_version}/{}", r.name))
                .collect()
        })
        .unwrap_or_default())
}

pub(crate) fn to_custom(kind: CustomKind, object: DynamicObject) -> CustomObject {
    let status = object.data.get("status").cloned();
    CustomObject {
        kind,
        metadata: object.metadata,
        spec: object
            .data
            .get("spec")
            .cloned()
            .unwrap_or(serde_json::Value::Null),
        status,
    }
}

pub(crate) async fn get(
    client: &kube::Client,
    ns: &str,
    kind: CustomKind,
    name: &str,
    progress: &dyn Progress,
) -> Result<Option<CustomObject>, EffectsError> {
    let ns = kind.fixed_namespace().unwrap_or(ns);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource(kind));
    let target = Target::named(kind.plural(), name, Some(ns));
    Ok(
        with_retry(progress, Verb::Get, &target, || api.get_opt(name))
            .await?
            .map(|o| to_custom(kind, o)),
    )
}

/// Every object of a kind in `ns` (the kind's own namespace if it has one).
pub(crate) async fn list(
    client: &kube::Client,
    ns: &str,
    kind: CustomKind,
    progress: &dyn Progress,
) -> Result<Vec<CustomObject>, EffectsError> {
    let ns = kind.fixed_namespace().unwrap_or(ns);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource(kind));
    let target = Target::every(&kind.kind().to_ascii_lowercase(), ns);
    let items = crate::observe::paged(progress, &target, |params| {
        let api = api.clone();
        async move { api.list(&params).await }
    })
    .await?;
    Ok(items.into_iter().map(|o| to_custom(kind, o)).collect())
}

/// The cluster's IngressClasses; none when they may not be listed.
pub(crate) async fn ingress_classes(
    client: &kube::Client,
    progress: &dyn Progress,
) -> Result<Vec<uyuni_core::observed::IngressClassInfo>, EffectsError> {
    use k8s_openapi::api::networking::v1::IngressClass;
    let api: Api<IngressClass> = Api::all(client.clone());
    let target = Target::named("ingressclasses", "", None);
    let listed = with_retry(progress, Verb::List, &target, || async {
        match api.list(&kube::api::ListParams::default()).await {
            // Not allowed to list them: the same as none; --ingress chooses then.
            Err(kube::Error::Api(status)) if status.code == 403 || status.code == 404 => Ok(None),
            other => other.map(Some),
        }
    })
    .await?;
    Ok(listed
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .map(|c| uyuni_core::observed::IngressClassInfo {
            default: c
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("ingressclass.kubernetes.io/is-default-class"))
                .is_some_and(|v| v == "true"),
            name: c.metadata.name.unwrap_or_default(),
            controller: c.spec.and_then(|s| s.controller).unwrap_or_default(),
        })
        .collect())
}

/// Server-side apply; see [`crate::apply::Prior`] for what is read before.
pub(crate) async fn apply(
    client: &kube::Client,
    ns: &str,
    object: &CustomObject,
    prior: &crate::apply::Prior,
    progress: &dyn Progress,
) -> Result<crate::apply::Applied, EffectsError> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource(object.kind));
    let target = Target::named(object.kind.plural(), &name, Some(ns));
    let before = match prior {
        crate::apply::Prior::Unknown => {
            with_retry(progress, Verb::Get, &target, || api.get_metadata_opt(&name))
                .await?
                .map(|m| m.metadata.resource_version)
        }
        crate::apply::Prior::Absent => None,
        crate::apply::Prior::Present(version) => Some(version.clone()),
    };
    let value = serde_json::to_value(object).unwrap_or(serde_json::Value::Null);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(&value);
    let after = with_retry(progress, Verb::Apply, &target, || {
        api.patch(&name, &params, &patch)
    })
    .await?
    .metadata
    .resource_version;
    Ok(crate::apply::outcome(before, after))
}

/// Waits until the object's `Ready` condition is `True` for its current generation: read from
/// the observer's watch of its kind, in the migrate loop (caught up with what the run wrote of
/// it), else (or when that watch fails) from a watch of its own.
pub(crate) async fn await_ready(
    client: &kube::Client,
    namespace: &str,
    step: &str,
    target: &ObjectRef,
    wait: DeploymentWait,
    observer: Option<&crate::Observer>,
    progress: &dyn Progress,
) -> Result<CustomObject, EffectsError> {
    let Kind::Custom(kind) = target.kind else {
        return Err(EffectsError::MalformedObject {
            step: step.to_owned(),
            verb: Verb::Watch,
            target: Target::named(target.kind.resource(), &target.name, Some(namespace)),
            missing: "a Ready condition (it is not a custom resource)",
        });
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &resource(kind));
    let what = Target::named(kind.plural(), &target.name, Some(namespace));
    progress.event(ProgressEvent::WaitingForReady {
        target,
        timeout: wait.timeout_seconds.map(Duration::from_secs),
    });
    let started = Instant::now();
    let limit = wait.timeout_seconds.map(Duration::from_secs);
    let mut view = match observer {
        Some(o) => o
            .shared(target.kind, namespace, &target.name, None, |o| match o {
                Object::Custom(c) => Some(c.clone()),
                _ => None,
            })
            .await
            .map(|shared| shared.view),
        None => None,
    };
    // Requests nothing unless read: where the view serves, never.
    let mut stream = crate::watch::stream(
        api,
        watcher::Config::default().fields(&format!("metadata.name={}", target.name)),
    )
    .map(move |event| {
        event.map(|e| match e {
            Event::Apply(o) => Event::Apply(to_custom(kind, o)),
            Event::InitApply(o) => Event::InitApply(to_custom(kind, o)),
            Event::Delete(o) => Event::Delete(to_custom(kind, o)),
            Event::Init => Event::Init,
            Event::InitDone => Event::InitDone,
        })
    })
    .boxed();
    let mut last_reason = String::from("no Ready condition yet");
    let mut failures = 0u32;
    loop {
        let deadline = crate::watch::until(limit.map(|l| started + l));
        tokio::select! {
            () = deadline => {
                return Err(EffectsError::NotReady {
                    step: step.to_owned(),
                    target: what,
                    waited: started.elapsed(),
                    reason: last_reason,
                });
            }
            event = async {
                if let Some(v) = view.as_mut() {
                    if let Some(event) = v.next().await {
                        return Some(Ok(event));
                    }
                    tracing::debug!(target = %what, "shared watch failing; watching alone");
                    view = None;
                }
                stream.next().await
            } => match event {
                Some(Ok(Event::Apply(object) | Event::InitApply(object))) => {
                    failures = 0;
                    if custom_ready(&object) {
                        return Ok(object);
                    }
                    if let Some(c) = object
                        .status
                        .as_ref()
                        .and_then(|s| s["conditions"].as_array())
                        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
                    {
                        last_reason = format!(
                            "Ready={} {}: {}",
                            c["status"].as_str().unwrap_or_default(),
                            c["reason"].as_str().unwrap_or_default(),
                            c["message"].as_str().unwrap_or_default()
                        );
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => {
                    failures += 1;
                    if failures >= retry::MAX_ATTEMPTS {
                        return Err(EffectsError::Watch {
                            verb: Verb::Watch,
                            target: what,
                            attempts: failures,
                            source: Box::new(err),
                        });
                    }
                    tokio::time::sleep(retry::delay(retry::classify_watch(&err), failures)).await;
                }
                None => futures::future::pending::<()>().await,
            }
        }
    }
}
