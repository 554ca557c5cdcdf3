//! A migration's SSH material: the key Secret and the known_hosts ConfigMap, from flags or
//! reused after checking them.

use crate::builders::migration;
use crate::builders::tls;
use crate::catalogue::{data_keys, names};
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
    let target = ObjectRef::new(Kind::Secret, names::SSH_KEY_SECRET);
    // After the final sync nothing logs in to the source again: a key deleted when the
    // migration finished (`cleanup_steps`) is neither needed nor written anew.
    if observed.secret(names::SSH_KEY_SECRET).is_none()
        && super::sync::final_sync_succeeded(observed)
    {
        return Ok(keep_step(
            "ssh-key",
            description,
            target,
            "not needed: the final data sync has run".into(),
        ));
    }
    if let Some(key) = &params.ssh_key {
        let intended = Object::Secret(migration::ssh_key_secret(ns, key));
        return Ok(apply_step("ssh-key", description, intended, observed));
    }
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

/// The last steps of a finished migration: the secret values of Secret uyuni-migration-data
/// emptied ([`redaction_step`]), then the Secrets only the migration used — the SSH key
/// that logs in to the source, the password of the source's CA key — deleted, once every step
/// before has succeeded (the server runs; the CA key is decrypted into Secret uyuni-ca), or
/// kept with `--keep-migration-data`. Nothing needs them later: the SSH key step plans nothing
/// once the final sync has run, and the CA's steps ask for the password only while Secret
/// uyuni-ca lacks the key. A `--prepare` run and an unfinished migration keep them.
pub(in crate::plan) fn cleanup_steps(
    params: &MigrateParams,
    observed: &Observed,
) -> Result<Vec<Step>, PlanError> {
    let mut steps: Vec<Step> = redaction_step(params, observed).into_iter().collect();
    for (name, what) in [
        (
            names::SSH_KEY_SECRET,
            "the SSH key that logs in to the source",
        ),
        (
            names::CA_PASSWORD_SECRET,
            "the password of the source's CA key",
        ),
    ] {
        let target = ObjectRef::new(Kind::Secret, name);
        let description = format!("Secret {name}, {what}: the migration has finished");
        if params.keep_migration_data {
            if observed.objects.contains_key(&target) {
                steps.push(keep_step(
                    &format!("keep-secrets-{name}"),
                    description,
                    target,
                    "kept (--keep-migration-data)".into(),
                ));
            }
        } else {
            steps.push(crate::plan::steps::migration_secret_deletion(
                observed,
                target,
                description,
            )?);
        }
    }
    Ok(steps)
}

/// The step that empties the secret values of Secret `uyuni-migration-data` (the source's
/// database passwords, its encrypted CA key or its server key) once each is in its home Secret
/// ([`data_keys::HOMES`]), from where every later run reads it (`Observed::extracted`): a value
/// is emptied only after its home was written and checked, so a run interrupted anywhere finds
/// each value in one place or the other. The non-secret facts stay: later runs plan from them.
/// A value no Secret of the server holds (the source's key when `--ssl-*` files replaced it)
/// stays. `None` when there is no such Secret.
fn redaction_step(params: &MigrateParams, observed: &Observed) -> Option<Step> {
    let secret = observed.secret(names::MIGRATION_DATA_SECRET)?;
    let data = secret.data.clone().unwrap_or_default();
    let id = "redact-migration-data";
    let description = format!(
        "Secret {} without the secret values the server's Secrets hold: the migration has finished",
        names::MIGRATION_DATA_SECRET
    );
    let target = ObjectRef::new(Kind::Secret, names::MIGRATION_DATA_SECRET);
    let done = crate::observed::redacted_keys(secret);
    let holds = |key: &str| data.get(key).is_some_and(|v| !v.0.is_empty());
    let at_home = |key: &str, home: &str, home_key: &str| {
        let Some(home) = observed.secret(home) else {
            return false;
        };
        if key == data_keys::CA_KEY {
            // The home holds the key decrypted: it is there when Secret uyuni-ca is complete
            // for the source's CA certificate.
            let ca = data
                .get(data_keys::CA_CERT)
                .and_then(|c| std::str::from_utf8(&c.0).ok());
            return ca.is_some_and(|ca| tls::ca_secret_complete(home, ca));
        }
        let home_value = home.data.as_ref().and_then(|d| d.get(home_key));
        home_value.is_some_and(|h| Some(h) == data.get(key))
    };
    let mut redacted = Vec::new();
    let mut staying = Vec::new();
    for (key, home, home_key) in data_keys::HOMES {
        if done.contains(&key) || (holds(key) && at_home(key, home, home_key)) {
            redacted.push(key);
        } else if holds(key) {
            staying.push(key);
        }
    }
    let pending = redacted.iter().any(|k| !done.contains(k));
    if params.keep_migration_data && pending {
        return Some(keep_step(
            id,
            description,
            target,
            format!("kept (--keep-migration-data): {}", redacted.join(", ")),
        ));
    }
    if !pending {
        let reason = match (redacted.is_empty(), staying.is_empty()) {
            (_, false) => format!(
                "{} stays: no Secret of the server holds it",
                staying.join(", ")
            ),
            (false, true) => "holds no secret value: they are in the server's Secrets".into(),
            (true, true) => "holds no secret value".into(),
        };
        return Some(keep_step(id, description, target, reason));
    }
    let intended = migration::redacted_migration_data(&params.namespace, &data, &redacted);
    Some(apply_step(
        id,
        description,
        Object::Secret(intended),
        observed,
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
