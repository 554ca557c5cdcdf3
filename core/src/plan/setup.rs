//! The steps every command shares before the server's own: its claims, the pull Secret.

use super::{PlanError, Step, apply_step, keep_step};

use crate::builders::{pvc, registry};

use crate::catalogue::names;
use crate::labels;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::Observed;
use crate::params::{PullSecret, ServerParams};
use crate::volumes;

/// A claim a command creates carries the name of the server its data is (or will be) set up
/// under ([`labels::SERVER_NAME_ANNOTATION`]): an install's FQDN, a migration's source FQDN,
/// which the migrated server keeps. An install on kept claims under another name is refused
/// (`install::check_fqdn`): the images never rename a server. Only a step that creates the
/// claim is marked; a kept claim is never written.
pub(super) fn named_claim(mut step: Step, fqdn: &str) -> Step {
    if let super::Action::Apply(object) = &mut step.action
        && let Object::PersistentVolumeClaim(claim) = &mut **object
    {
        claim
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(labels::SERVER_NAME_ANNOTATION.to_owned(), fqdn.to_owned());
    }
    step
}

pub(super) fn pvc_steps(params: &ServerParams, observed: &Observed) -> Vec<Step> {
    params
        .spec.volumes
        .iter()
        .map(|claim| {
            let id = format!("pvc-{}", claim.name);
            let description = match claim.role {
                volumes::VolumeRole::Server => format!("volume {} for {}", claim.name, claim.mount_path),
                volumes::VolumeRole::Database => format!("volume {} for the database data", claim.name),
                volumes::VolumeRole::Migration => {
                    format!("volume {} for the migration's working files", claim.name)
                }
            };
            let target = ObjectRef::new(Kind::PersistentVolumeClaim, claim.name.clone());
            match observed.objects.get(&target) {
                None => apply_step(&id, description, Object::PersistentVolumeClaim(pvc::pvc(&params.namespace, claim)), observed),
                Some(Object::PersistentVolumeClaim(live)) => {
                    let live_size = live
                        .spec
                        .as_ref()
                        .and_then(|s| s.resources.as_ref())
                        .and_then(|r| r.requests.as_ref())
                        .and_then(|r| r.get("storage"))
                        .map(|q| q.0.clone())
                        .unwrap_or_default();
                    let reason = if live_size == claim.size {
                        "exists; existing claims are never recreated".to_owned()
                    } else {
                        format!("exists with {live_size} (asked {}); existing claims are never recreated or resized", claim.size)
                    };
                    keep_step(&id, description, target, reason)
                }
                Some(_) => keep_step(&id, description, target, "exists".into()),
            }
        })
        .collect()
}

/// The pull Secret comes first: every pod, the image checks' included, needs it.
pub(super) fn pull_secret_step(
    params: &ServerParams,
    observed: &Observed,
) -> Result<Option<Step>, PlanError> {
    let ns = &params.namespace;
    Ok(match &params.spec.pull_secret {
        PullSecret::None => None,
        PullSecret::Credentials {
            registry,
            user,
            password,
        } => Some(apply_step(
            "registry-credentials",
            format!("pull Secret for {registry}, referenced by every pod"),
            Object::Secret(registry::pull_secret(ns, registry, user, password.expose())),
            observed,
        )),
        PullSecret::Reused => Some(keep_step(
            "registry-credentials",
            "pull Secret referenced by every pod".to_owned(),
            ObjectRef::new(Kind::Secret, names::REGISTRY_SECRET),
            "exists; reused (no registry flags given)".to_owned(),
        )),
        PullSecret::Existing(name) => {
            let secret = observed
                .secret(name)
                .ok_or_else(|| PlanError::PullSecretMissing {
                    name: name.clone(),
                    namespace: ns.clone(),
                })?;
            let kind = secret.type_.clone().unwrap_or_default();
            if !matches!(
                kind.as_str(),
                "kubernetes.io/dockerconfigjson" | "kubernetes.io/dockercfg"
            ) {
                return Err(PlanError::PullSecretType {
                    name: name.clone(),
                    namespace: ns.clone(),
                    kind,
                });
            }
            Some(keep_step(
                "registry-credentials",
                "your pull Secret, referenced by every pod".to_owned(),
                ObjectRef::new(Kind::Secret, name.clone()),
                "exists; never written (--image-pull-secret)".to_owned(),
            ))
        }
    })
}
