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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    /// The object did not exist before.
    pub created: bool,
    /// Its resourceVersion moved: the API server stored something new.
    pub changed: bool,
    /// The resourceVersion the server answered with: the next observation must include it.
    pub resource_version: Option<String>,
}

/// What the snapshot a step was planned from says of the object an apply writes. Known, it
/// spares the read before the write (created or changed is told from it); unknown, the apply
/// reads the object's metadata first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Prior {
    #[default]
    Unknown,
    Absent,
    /// Present, at this resourceVersion (none when the snapshot is a prediction).
    Present(Option<String>),
}

impl Prior {
    /// What `observed` (the snapshot `step` was planned from, read through `observation`)
    /// holds of the object the step writes; `Unknown` for a step that writes no object or one
    /// the observation does not read (its absence from the snapshot would mean nothing).
    pub fn for_step(
        observation: &uyuni_core::Observation,
        observed: &uyuni_core::Observed,
        step: &uyuni_core::Step,
    ) -> Prior {
        let target = match &step.action {
            uyuni_core::Action::Apply(object) => object.object_ref(),
            uyuni_core::Action::RunJob { job, .. } => ObjectRef::new(
                uyuni_core::Kind::Job,
                job.metadata.name.clone().unwrap_or_default(),
            ),
            _ => return Prior::Unknown,
        };
        // Jobs are read by the observation's selector, which the plan's Jobs carry.
        let read = target.kind == uyuni_core::Kind::Job || observation.named.contains(&target);
        if read {
            Prior::of(observed, &target)
        } else {
            Prior::Unknown
        }
    }

    /// What `observed` holds of `target`.
    pub fn of(observed: &uyuni_core::Observed, target: &ObjectRef) -> Prior {
        match observed.objects.get(target) {
            Some(object) => Prior::Present(object.metadata().resource_version.clone()),
            None => Prior::Absent,
        }
    }
}

/// Applies `object` with field manager `kubectl-uyuni`, forcing ownership of the fields it sets
/// (the tool owns its objects; a conflict would only stop a run the user asked for).
/// Namespaced objects go to their own `metadata.namespace`, else to `namespace`.
pub(crate) async fn apply_object(
    client: &kube::Client,
    namespace: &str,
    step: &str,
    object: &Object,
    prior: &Prior,
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
        Object::Namespace(o) => apply_cluster(client, &target, o, prior, progress).await,
        Object::Secret(o) => apply_namespaced(client, ns, &target, o, prior, progress).await,
        Object::ConfigMap(o) => apply_namespaced(client, ns, &target, o, prior, progress).await,
        Object::PersistentVolumeClaim(o) => {
            apply_namespaced(client, ns, &target, o, prior, progress).await
        }
        Object::ServiceAccount(o) => {
            apply_namespaced(client, ns, &target, o, prior, progress).await
        }
        Object::Role(o) => apply_namespaced(client, ns, &target, o, prior, progress).await,
        Object::RoleBinding(o) => apply_namespaced(client, ns, &target, o, prior, progress).await,
        Object::Job(o) => apply_namespaced(client, ns, &target, o, prior, progress).await,
        Object::Deployment(o) => apply_namespaced(client, ns, &target, o, prior, progress).await,
        Object::Service(o) => apply_namespaced(client, ns, &target, o, prior, progress).await,
        Object::Ingress(o) => apply_namespaced(client, ns, &target, o, prior, progress).await,
        Object::NetworkPolicy(o) => apply_namespaced(client, ns, &target, o, prior, progress).await,
        // Only read (no plan writes them); applied like any object should one ever be.
        Object::ResourceQuota(o) => apply_namespaced(client, ns, &target, o, prior, progress).await,
        Object::LimitRange(o) => apply_namespaced(client, ns, &target, o, prior, progress).await,
        Object::Custom(o) => crate::custom::apply(client, ns, o, prior, progress).await,
    }
}

pub(crate) async fn apply_namespaced<K>(
    client: &kube::Client,
    ns: &str,
    target: &ObjectRef,
    object: &K,
    prior: &Prior,
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
    apply_with(api, &what, &target.name, object, prior, progress).await
}

async fn apply_cluster<K>(
    client: &kube::Client,
    target: &ObjectRef,
    object: &K,
    prior: &Prior,
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
    apply_with(api, &what, &target.name, object, prior, progress).await
}

async fn apply_with<K>(
    api: Api<K>,
    what: &Target,
    name: &str,
    object: &K,
    prior: &Prior,
    progress: &dyn Progress,
) -> Result<Applied, EffectsError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let before = match prior {
        // Only the metadata is read: enough to tell created from updated, without fetching
        // Secret data that this process has no use for.
        Prior::Unknown => with_retry(progress, Verb::Get, what, || api.get_metadata_opt(name))
            .await?
            .map(|m| m.metadata.resource_version),
        Prior::Absent => None,
        Prior::Present(version) => Some(version.clone()),
    };
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
    Ok(outcome(before, after))
}

/// Created when there was nothing before; changed when the resourceVersion moved.
pub(crate) fn outcome(before: Option<Option<String>>, after: Option<String>) -> Applied {
    Applied {
        created: before.is_none(),
        changed: before.as_ref().is_none_or(|b| *b != after),
        resource_version: after,
    }
}
