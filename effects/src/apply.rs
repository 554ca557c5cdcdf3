//! Server-side apply of one object, typed per kind.

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use kube::core::ClusterResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;
use uyuni_core::labels::FIELD_MANAGER;
use uyuni_core::{Object, ObjectRef};

use crate::error::{EffectsError, Target, Verb};
use crate::progress::Progress;
use crate::retry::with_retry;

/// What an apply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The object did not exist before.
    pub created: bool,
    /// Its resourceVersion moved: the API server stored something new.
    pub changed: bool,
}

/// Applies `object` with field manager `kubectl-uyuni`, forcing ownership of the fields it sets
/// (the tool owns its objects; a conflict would only stop a run the user asked for).
/// Namespaced objects go to their own `metadata.namespace`, else to `namespace`.
pub(crate) async fn apply_object(
    client: &kube::Client,
    namespace: &str,
    step: &str,
    object: &Object,
    progress: &dyn Progress,
) -> Result<Applied, EffectsError> {
    let target = object.object_ref();
    let ns = object.metadata().namespace.as_deref().unwrap_or(namespace);
    if target.name.is_empty() {
        return Err(EffectsError::MalformedObject {
            step: step.to_owned(),
            verb: Verb::Apply,
            target: Target::named(target.kind.resource(), "", Some(ns)),
            missing: "metadata.name",
        });
    }
    tracing::debug!(%target, namespace = ns, "server-side apply");
    match object {
        Object::Namespace(o) => apply_cluster(client, &target, o, progress).await,
        Object::Secret(o) => apply_namespaced(client, ns, &target, o, progress).await,
        Object::ConfigMap(o) => apply_namespaced(client, ns, &target, o, progress).await,
        Object::PersistentVolumeClaim(o) => {
            apply_namespaced(client, ns, &target, o, progress).await
        }
        Object::ServiceAccount(o) => apply_namespaced(client, ns, &target, o, progress).await,
        Object::Role(o) => apply_namespaced(client, ns, &target, o, progress).await,
        Object::RoleBinding(o) => apply_namespaced(client, ns, &target, o, progress).await,
        Object::Job(o) => apply_namespaced(client, ns, &target, o, progress).await,
        Object::Deployment(o) => apply_namespaced(client, ns, &target, o, progress).await,
        Object::Service(o) => apply_namespaced(client, ns, &target, o, progress).await,
        Object::Ingress(o) => apply_namespaced(client, ns, &target, o, progress).await,
        Object::Custom(o) => crate::custom::apply(client, ns, o, progress)
            .await
            .map(|(created, changed)| Applied { created, changed }),
    }
}

pub(crate) async fn apply_namespaced<K>(
    client: &kube::Client,
    ns: &str,
    target: &ObjectRef,
    object: &K,
    progress: &dyn Progress,
) -> Result<Applied, EffectsError>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let what = Target::named(target.kind.resource(), &target.name, Some(ns));
    apply_with(api, &what, &target.name, object, progress).await
}

async fn apply_cluster<K>(
    client: &kube::Client,
    target: &ObjectRef,
    object: &K,
    progress: &dyn Progress,
) -> Result<Applied, EffectsError>
where
    K: Resource<Scope = ClusterResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let what = Target::named(target.kind.resource(), &target.name, None);
    apply_with(api, &what, &target.name, object, progress).await
}

async fn apply_with<K>(
    api: Api<K>,
    what: &Target,
    name: &str,
    object: &K,
    progress: &dyn Progress,
) -> Result<Applied, EffectsError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    // Only the metadata is read before: enough to tell created from updated, without fetching
    // Secret data that this process has no use for.
    let before = with_retry(progress, Verb::Get, what, || api.get_metadata_opt(name))
        .await?
        .and_then(|m| m.metadata.resource_version);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let patch = Patch::Apply(object);
    // Apply is idempotent, so a retry after a lost answer is harmless.
    let after = with_retry(progress, Verb::Apply, what, || {
        api.patch(name, &params, &patch)
    })
    .await?
    .meta()
    .resource_version
    .clone();
    Ok(Applied {
        created: before.is_none(),
        changed: before.is_none() || before != after,
    })
}
