//! Writes and reads the records of operations (`uyuni_core::operation`): the record is written
//! by server-side apply when the run's first write is made, changed by merge patches of the
//! keys that changed at step boundaries, and the oldest beyond the kept number deleted. Every
//! request is retried as the rest of the run's are; what a failure means for the run is the
//! caller's decision (`plugin::drive`: a warning, never the run's end).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use uyuni_core::labels::FIELD_MANAGER;
use uyuni_core::operation::SELECTOR;

use crate::error::{EffectsError, Target, Verb};
use crate::progress::NoProgress;
use crate::retry::with_retry;

/// Every record in `namespace` (none when the namespace does not exist).
pub async fn list(client: &kube::Client, namespace: &str) -> Result<Vec<ConfigMap>, EffectsError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let what = Target::selected("configmap", SELECTOR, namespace);
    crate::observe::paged(&NoProgress, &what, |params: ListParams| {
        let api = api.clone();
        let params = params.labels(SELECTOR);
        async move { api.list(&params).await }
    })
    .await
}

/// Writes the whole record `config_map` (server-side apply, taking over any field).
pub async fn apply(
    client: &kube::Client,
    namespace: &str,
    config_map: &ConfigMap,
) -> Result<(), EffectsError> {
    let name = config_map.metadata.name.clone().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(config_map);
    let target = Target::named("configmap", &name, Some(namespace));
    with_retry(&NoProgress, Verb::Apply, &target, || {
        api.patch(&name, &params, &patch)
    })
    .await
    .map(|_| ())
}

/// Sets `data`'s keys of record `name` (a merge patch: other keys stay).
pub async fn update(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    data: &BTreeMap<String, String>,
) -> Result<(), EffectsError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let body = serde_json::json!({ "data": data });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let patch = Patch::Merge(&body);
    let target = Target::named("configmap", name, Some(namespace));
    with_retry(&NoProgress, Verb::Apply, &target, || {
        api.patch(name, &params, &patch)
    })
    .await
    .map(|_| ())
}

/// Deletes record `name`; one already gone is fine.
pub async fn delete(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(), EffectsError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let target = Target::named("configmap", name, Some(namespace));
    let params = DeleteParams::default();
    match with_retry(&NoProgress, Verb::Delete, &target, || {
        api.delete(name, &params)
    })
    .await
    {
        Ok(_) => Ok(()),
        Err(EffectsError::Api { source, .. }) if matches!(&*source, kube::Error::Api(s) if s.code == 404) => {
            Ok(())
        }
        Err(e) => Err(e),
    }
}
