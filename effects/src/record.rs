//! Reads the record of the server's specification (`uyuni_core::record`) before the flags are
//! validated: the run's parameters are made from it and the flags together.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use uyuni_core::catalogue::names::SERVER_SPEC_CONFIG_MAP;

use crate::error::{EffectsError, Target, Verb};
use crate::progress::Progress;
use crate::retry::with_retry;

/// The data of ConfigMap `uyuni-server-spec` in `namespace`; empty when it does not exist, or
/// its namespace does not (a first run).
pub async fn server_spec(
    client: &kube::Client,
    namespace: &str,
    progress: &dyn Progress,
) -> Result<BTreeMap<String, String>, EffectsError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let target = Target::named("configmap", SERVER_SPEC_CONFIG_MAP, Some(namespace));
    // get_opt turns 404 into None, which also covers "the namespace does not exist".
    let found = with_retry(progress, Verb::Get, &target, || {
        api.get_opt(SERVER_SPEC_CONFIG_MAP)
    })
    .await?;
    Ok(found.and_then(|c| c.data).unwrap_or_default())
}

/// Which command made the server in a namespace, as `upgrade` needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerOrigin {
    /// Nothing of a server: no Deployment `uyuni`, no data sync.
    None,
    /// `install`, with the name the server was set up with (`UYUNI_HOSTNAME`).
    Installed { fqdn: String },
    /// `migrate`, from this source (its newest data-sync Job's annotation).
    Migrated { source: String },
}

/// Reads Deployment `uyuni` (its origin annotation and `UYUNI_HOSTNAME`) and, for a server
/// that was not installed, the data-sync Jobs' source.
pub async fn server_origin(
    client: &kube::Client,
    namespace: &str,
    progress: &dyn Progress,
) -> Result<ServerOrigin, EffectsError> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::batch::v1::Job;
    use uyuni_core::catalogue::names::SERVER_DEPLOYMENT;
    use uyuni_core::labels;
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let target = Target::named("deployment", SERVER_DEPLOYMENT, Some(namespace));
    let found = with_retry(progress, Verb::Get, &target, || {
        api.get_opt(SERVER_DEPLOYMENT)
    })
    .await?;
    if let Some(d) = &found
        && d.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::ORIGIN_ANNOTATION))
            .is_some_and(|o| o == labels::ORIGIN_INSTALL)
    {
        let fqdn = d
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.containers.first())
            .and_then(|c| c.env.as_ref())
            .and_then(|env| env.iter().find(|e| e.name == "UYUNI_HOSTNAME"))
            .and_then(|e| e.value.clone())
            .unwrap_or_default();
        return Ok(ServerOrigin::Installed { fqdn });
    }
    let jobs: Api<Job> = Api::namespaced(client.clone(), namespace);
    let selector = format!(
        "{}={}",
        labels::STEP_LABEL,
        uyuni_core::catalogue::steps::DATA_SYNC
    );
    let list = kube::api::ListParams::default().labels(&selector);
    let what = Target::named("jobs", &selector, Some(namespace));
    let syncs = with_retry(progress, Verb::List, &what, || jobs.list(&list)).await?;
    let source = syncs
        .items
        .iter()
        .filter_map(|j| {
            let a = j.metadata.annotations.as_ref()?;
            Some((
                j.metadata.creation_timestamp.clone(),
                a.get(labels::SOURCE_ANNOTATION)?.clone(),
            ))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, source)| source);
    Ok(match source {
        Some(source) => ServerOrigin::Migrated { source },
        None => ServerOrigin::None,
    })
}
