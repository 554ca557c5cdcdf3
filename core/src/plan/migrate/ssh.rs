//! A migration's SSH material: the key Secret and the known_hosts ConfigMap, from flags or
//! reused after checking them.

use crate::builders::migration;
use crate::catalogue::names;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::Observed;
use crate::params::MigrateParams;
use crate::plan::{PlanError, Step, apply_step, keep_step};
use crate::ssh;

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

pub(in crate::plan) fn ssh_key_step(
    params: &MigrateParams,
    observed: &Observed,
) -> Result<Step, PlanError> {
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

pub(in crate::plan) fn ssh_config_step(
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
