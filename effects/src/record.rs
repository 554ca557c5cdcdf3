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

/// The name an installed server was set up with: `UYUNI_HOSTNAME` of Deployment `uyuni`'s
/// container in `namespace`; `None` when there is no such Deployment or variable.
pub async fn installed_fqdn(
    client: &kube::Client,
    namespace: &str,
    progress: &dyn Progress,
) -> Result<Option<String>, EffectsError> {
    use k8s_openapi::api::apps::v1::Deployment;
    use uyuni_core::catalogue::names::SERVER_DEPLOYMENT;
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let target = Target::named("deployment", SERVER_DEPLOYMENT, Some(namespace));
    let found = with_retry(progress, Verb::Get, &target, || {
        api.get_opt(SERVER_DEPLOYMENT)
    })
    .await?;
    Ok(found
        .and_then(|d| d.spec)
        .and_then(|s| s.template.spec)
        .and_then(|p| p.containers.into_iter().next())
        .and_then(|c| c.env)
        .and_then(|env| env.into_iter().find(|e| e.name == "UYUNI_HOSTNAME"))
        .and_then(|e| e.value))
}
