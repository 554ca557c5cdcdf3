//! One builder function per Kubernetes object. Builders are total: they take validated
//! parameters and return k8s-openapi structs, labels from [`crate::labels`].

pub mod data_sync;
pub mod migration;
pub mod namespace;
pub mod pvc;

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::labels;

/// Object names, as the reference and the official chart use them.
pub mod names {
    pub const SSH_KEY_SECRET: &str = "uyuni-migration-key";
    pub const SSH_CONFIG_MAP: &str = "uyuni-migration-ssh";
    pub const MIGRATION_SERVICE_ACCOUNT: &str = "uyuni-migration";
    pub const MIGRATION_ROLE: &str = "uyuni-migration";
    pub const MIGRATION_ROLE_BINDING: &str = "uyuni-migration";
    pub const MIGRATION_DATA_SECRET: &str = "uyuni-migration-data";
    /// Prefix of data-sync Job names; the run id follows.
    pub const DATA_SYNC_JOB_PREFIX: &str = "uyuni-data-sync";
}

/// Components, as the `app.kubernetes.io/component` label says them.
pub mod components {
    pub const MIGRATION: &str = "migration";
    pub const SERVER: &str = "server";
    pub const DB: &str = "db";
}

/// Metadata of a namespaced object the tool owns.
pub fn meta(name: &str, namespace: &str, component: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(labels::labels(component)),
        ..ObjectMeta::default()
    }
}

pub(crate) fn string_map<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}
