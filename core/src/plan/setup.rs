//! The steps before the data sync: SSH material, claims, the pull Secret.

use super::{PlanError, Step, apply_step, keep_step};

use crate::builders::{migration, pvc, registry};

use crate::catalogue::names;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::Observed;
use crate::params::{MigrateParams, PullSecret, ServerParams};
use crate::ssh;
use crate::volumes;

fn invalid(
    object: ObjectRef,
    namespace: &str,
    key: &'static str,
    problem: impl ToString,
) -> PlanError {
    PlanError::SshObjectInvalid {
        object,
        namespace: namespace.to_owned(),
        key,
        problem: problem.to_string(),
    }
}

pub(super) fn ssh_key_step(params: &MigrateParams, observed: &Observed) -> Result<Step, PlanError> {
    let ns = &params.namespace;
    let description = format!(
        "SSH key the data-sync Job logs in to {} with",
        params.source_fqdn
    );
    if let Some(key) = &params.ssh_key {
        let intended = Object::Secret(migration::ssh_key_secret(ns, key));
        return Ok(apply_step("ssh-key", description, intended, observed));
    }
    let target = ObjectRef::new(Kind::Secret, names::SSH_KEY_SECRET);
    let secret =
        observed
            .secret(names::SSH_KEY_SECRET)
            .ok_or_else(|| PlanError::SshKeyMissing {
                namespace: ns.clone(),
            })?;
    let value = |key: &'static str| -> Result<String, PlanError> {
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone())
            .unwrap_or_default();
        let text = String::from_utf8(bytes)
            .map_err(|_| invalid(target.clone(), ns, key, "is not text"))?;
        if text.trim().is_empty() {
            return Err(invalid(target.clone(), ns, key, "is missing or empty"));
        }
        Ok(text)
    };
    ssh::check_private_key(&value("key")?).map_err(|p| invalid(target.clone(), ns, "key", p))?;
    let public = value("key.pub")?;
    ssh::check_public_key(&public).map_err(|p| invalid(target.clone(), ns, "key.pub", p))?;
    ssh::check_key_pair(&value("key")?, &public).map_err(|p| {
        let key = if p == ssh::SshProblem::NotAPrivateKey {
            "key"
        } else {
            "key.pub"
        };
        invalid(target.clone(), ns, key, p)
    })?;
    Ok(keep_step(
        "ssh-key",
        description,
        target,
        "exists; reused (no SSH key flags given)".into(),
    ))
}

pub(super) fn ssh_config_step(
    params: &MigrateParams,
    observed: &Observed,
) -> Result<Step, PlanError> {
    let ns = &params.namespace;
    let description = "SSH known_hosts and config of the data-sync Job".to_owned();
    if let Some(ssh) = &params.ssh_config {
        let intended = Object::ConfigMap(migration::ssh_config_map(ns, ssh));
        return Ok(apply_step("ssh-config", description, intended, observed));
    }
    let target = ObjectRef::new(Kind::ConfigMap, names::SSH_CONFIG_MAP);
    let cm =
        observed
            .config_map(names::SSH_CONFIG_MAP)
            .ok_or_else(|| PlanError::SshConfigMissing {
                namespace: ns.clone(),
            })?;
    let data = cm.data.clone().unwrap_or_default();
    if !data.contains_key("config") {
        return Err(invalid(
            target,
            ns,
            "config",
            "is missing (it may be empty, but must exist)",
        ));
    }
    let known_hosts = data.get("known_hosts").cloned().unwrap_or_default();
    ssh::check_known_hosts(&known_hosts, &params.source_fqdn)
        .map_err(|p| invalid(target.clone(), ns, "known_hosts", p))?;
    Ok(keep_step(
        "ssh-config",
        description,
        target,
        "exists; reused (no SSH flags given)".into(),
    ))
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
