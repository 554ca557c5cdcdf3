//! The migration's supporting objects: SSH material, the ServiceAccount the data-sync Job runs as
//! with the one permission it needs, and the Secret it writes its findings into.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};

use crate::builders::{meta, string_map};

use crate::catalogue::{components, data_keys, names};
use crate::params::{SshConfig, SshKeyPair};

pub fn ssh_key_secret(namespace: &str, key: &SshKeyPair) -> Secret {
    Secret {
        metadata: meta(names::SSH_KEY_SECRET, namespace, components::MIGRATION),
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([
            (
                "key".to_owned(),
                ByteString(key.private.expose().as_bytes().to_vec()),
            ),
            (
                "key.pub".to_owned(),
                ByteString(key.public.as_bytes().to_vec()),
            ),
        ])),
        ..Secret::default()
    }
}

pub fn ssh_config_map(namespace: &str, ssh: &SshConfig) -> ConfigMap {
    ConfigMap {
        metadata: meta(names::SSH_CONFIG_MAP, namespace, components::MIGRATION),
        data: Some(string_map([
            ("config", ssh.config.as_str()),
            ("known_hosts", ssh.known_hosts.as_str()),
        ])),
        ..ConfigMap::default()
    }
}

pub fn service_account(namespace: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(
            names::MIGRATION_SERVICE_ACCOUNT,
            namespace,
            components::MIGRATION,
        ),
        ..ServiceAccount::default()
    }
}

/// Only `patch`, only on Secret `uyuni-migration-data` (the one request `data-sync.sh` makes,
/// through `lib.sh`'s `patch_secret`): the Job can report what it
/// found and nothing else.
pub fn role(namespace: &str) -> Role {
    Role {
        metadata: meta(names::MIGRATION_ROLE, namespace, components::MIGRATION),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".to_owned()]),
            resource_names: Some(vec![names::MIGRATION_DATA_SECRET.to_owned()]),
            verbs: vec!["patch".to_owned()],
            ..PolicyRule::default()
        }]),
    }
}

pub fn role_binding(namespace: &str) -> RoleBinding {
    RoleBinding {
        metadata: meta(
            names::MIGRATION_ROLE_BINDING,
            namespace,
            components::MIGRATION,
        ),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: names::MIGRATION_ROLE.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: names::MIGRATION_SERVICE_ACCOUNT.to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }]),
    }
}

/// Created empty; the data-sync Job fills it (create cannot be limited to one name by RBAC, so
/// the tool creates it and the Job only patches it).
/// Secret `uyuni-migration-data` as a finished migration leaves it: the values of `data` (what
/// the data-sync Job wrote) with the secret ones of `redacted` emptied, and the list of those
/// in key [`data_keys::REDACTED`]. The whole data is written, not just the emptied keys: the
/// write replaces what the Job's own merge patch set.
pub fn redacted_migration_data(
    namespace: &str,
    data: &BTreeMap<String, ByteString>,
    redacted: &[&str],
) -> Secret {
    let mut data = data.clone();
    for key in redacted {
        data.insert((*key).to_owned(), ByteString(Vec::new()));
    }
    data.insert(
        data_keys::REDACTED.to_owned(),
        ByteString(redacted.join(" ").into_bytes()),
    );
    Secret {
        data: Some(data),
        ..migration_data_secret(namespace)
    }
}

pub fn migration_data_secret(namespace: &str) -> Secret {
    Secret {
        metadata: meta(
            names::MIGRATION_DATA_SECRET,
            namespace,
            components::MIGRATION,
        ),
        type_: Some("Opaque".to_owned()),
        ..Secret::default()
    }
}
