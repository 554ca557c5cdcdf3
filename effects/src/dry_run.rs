//! `--dry-run=server`: each write of a plan sent to the API server as a server-side apply with
//! `dryRun=All`, so admission and validation errors show before anything is written.
//!
//! It works on any kind through discovery (`GET /apis/{group}/{version}`) and `DynamicObject`,
//! so it needs no change when the planner learns new kinds.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use uyuni_core::Object;
use uyuni_core::labels::FIELD_MANAGER;

use crate::error::{EffectsError, Target, Verb};
use crate::progress::Progress;
use crate::retry::with_retry;

/// What the API server said of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerDryRun {
    /// It would be accepted.
    Accepted,
    /// It would be refused; the server's message.
    Rejected(String),
    /// Not sent: the reason (its namespace does not exist yet, so the server cannot judge it).
    ClientSideOnly(String),
}

/// Sends `object` as a dry-run server-side apply. `namespace_exists`: whether the object's
/// namespace exists now (objects of a namespace the plan creates are checked client-side only).
pub async fn server_dry_run(
    client: &kube::Client,
    namespace: &str,
    namespace_exists: bool,
    object: &Object,
    progress: &dyn Progress,
) -> Result<ServerDryRun, EffectsError> {
    let value = object.to_json();
    let api_version = value["apiVersion"].as_str().unwrap_or_default().to_owned();
    let kind = value["kind"].as_str().unwrap_or_default().to_owned();
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g.to_owned(), v.to_owned()),
        None => (String::new(), api_version.clone()),
    };
    let gvk = GroupVersionKind::gvk(&group, &version, &kind);
    let name = object.name().to_owned();
    let discovery_target = Target::named(&kind.to_ascii_lowercase(), &name, None);
    let (resource, caps) = with_retry(progress, Verb::Get, &discovery_target, || {
        pinned_kind(client, &gvk)
    })
    .await?;
    let ns = object.metadata().namespace.as_deref().unwrap_or(namespace);
    let (api, target): (Api<DynamicObject>, Target) = match caps.scope {
        Scope::Cluster => (
            Api::all_with(client.clone(), &resource),
            Target::named(&resource.plural, &name, None),
        ),
        Scope::Namespaced => {
            if !namespace_exists {
                return Ok(ServerDryRun::ClientSideOnly(format!(
                    "namespace {ns} does not exist yet"
                )));
            }
            (
                Api::namespaced_with(client.clone(), ns, &resource),
                Target::named(&resource.plural, &name, Some(ns)),
            )
        }
    };
    let params = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    let patch = Patch::Apply(&value);
    match with_retry(progress, Verb::Apply, &target, || {
        api.patch(&name, &params, &patch)
    })
    .await
    {
        Ok(_) => Ok(ServerDryRun::Accepted),
        Err(EffectsError::Api { source, .. }) if matches!(&*source, kube::Error::Api(s) if (400..500).contains(&s.code) && s.code != 401 && s.code != 429) =>
        {
            let message = match &*source {
                kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
                other => other.to_string(),
            };
            Ok(ServerDryRun::Rejected(message))
        }
        Err(other) => Err(other),
    }
}
