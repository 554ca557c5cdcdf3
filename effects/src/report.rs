//! Reads for `report`: the namespace's events and the API server's version. Reads only,
//! retried as every read.

use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};

use crate::error::{EffectsError, Target, Verb};
use crate::progress::NoProgress;
use crate::retry::with_retry;

/// Every event in `namespace` (core/v1, what `kubectl get events` lists).
pub async fn events(client: &kube::Client, namespace: &str) -> Result<Vec<Event>, EffectsError> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let what = Target::every("event", namespace);
    crate::observe::paged(&NoProgress, &what, |params: ListParams| {
        let api = api.clone();
        async move { api.list(&params).await }
    })
    .await
}

/// The API server's `/version` (its `gitVersion`: `v1.33.1+k3s1`).
pub async fn server_version(client: &kube::Client) -> Result<String, EffectsError> {
    let target = Target::named("version", "/version", None);
    with_retry(&NoProgress, Verb::Get, &target, || {
        client.apiserver_version()
    })
    .await
    .map(|info| info.git_version)
}
