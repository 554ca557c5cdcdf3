//! One builder function per Kubernetes object. Builders are total: they take validated
//! parameters and return k8s-openapi structs, labels from [`crate::labels`].

pub mod data_sync;
pub mod database;
pub mod image_check;
pub mod ingress;
pub mod job;
pub mod migration;
pub mod namespace;
pub mod pvc;
pub mod registry;
pub mod server;
pub mod tftp;
pub mod tls;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    ConfigMapVolumeSource, PersistentVolumeClaimVolumeSource, PodSpec, PodTemplateSpec, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

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
    /// The chart's credential Secrets (images-today §C.1).
    pub const DB_ADMIN_SECRET: &str = "db-admin-credentials";
    pub const DB_SECRET: &str = "db-credentials";
    pub const REPORTDB_SECRET: &str = "reportdb-credentials";
    pub const DB_DEPLOYMENT: &str = "db";
    pub const DB_SERVICE: &str = "db";
    pub const REPORTDB_SERVICE: &str = "reportdb";
    /// The CA as a TLS Secret, the CA issuer's key pair (reference §5.4).
    pub const CA_SECRET: &str = "uyuni-ca";
    /// The source CA's password, for the Job that decrypts the CA key in the cluster.
    pub const CA_PASSWORD_SECRET: &str = "uyuni-ca-password";
    pub const CA_ISSUER: &str = "uyuni-ca-issuer";
    /// The server's TLS Secret, and its Certificate (chart names, images-today §C.1).
    pub const SERVER_CERT_SECRET: &str = "uyuni-cert";
    pub const DB_CERT_SECRET: &str = "db-cert";
    pub const CA_CONFIG_MAP: &str = "uyuni-ca";
    pub const DB_CA_CONFIG_MAP: &str = "db-ca";
    /// Role and RoleBinding letting the CA key Job write the key into Secret `uyuni-ca`.
    pub const CA_KEY_ROLE: &str = "uyuni-ca-key";
    /// Ingresses (reference §6.3).
    pub const INGRESS_SSL: &str = "uyuni-ingress-ssl";
    pub const INGRESS_NOSSL: &str = "uyuni-ingress-nossl";
    pub const INGRESS_REDIRECT: &str = "uyuni-ingress-ssl-redirect";
    /// Traefik's HTTPS redirect middleware.
    pub const HTTPS_REDIRECT: &str = "uyuni-https-redirect";
    /// The distributions' HelmChartConfig objects, in kube-system.
    pub const TRAEFIK_CONFIG: &str = "traefik";
    pub const NGINX_CONFIG: &str = "rke2-ingress-nginx";
    /// The registry pull Secret the tool writes from `--registry-user` (reference §1.8).
    pub const REGISTRY_SECRET: &str = "registry-credentials";
}

/// Components, as the `app.kubernetes.io/component` label says them.
pub mod components {
    pub const MIGRATION: &str = "migration";
    pub const SERVER: &str = "server";
    pub const DB: &str = "db";
    pub const TLS: &str = "tls";
    pub const HUB_XMLRPC: &str = "hub-xmlrpc";
    /// The chart's `coco.yaml` says `coco-attestation`.
    pub const COCO: &str = "coco-attestation";
    pub const TFTP: &str = "tftp";
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

/// A Deployment of one component with the chart's labels and selector (images-today §C.2).
/// Always `Recreate`: the server's volumes are ReadWriteOnce, and a host-network pod (TFTP)
/// cannot start next to its predecessor on the same node, so a rolling update would wait for
/// ever with one replica.
pub(crate) fn deployment(
    params: &crate::params::MigrateParams,
    name: &str,
    component: &str,
    replicas: i32,
    pod: PodSpec,
) -> Deployment {
    Deployment {
        metadata: meta(name, &params.namespace, component),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".to_owned()),
                ..DeploymentStrategy::default()
            }),
            selector: LabelSelector {
                match_labels: Some(database::selector(component)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels::labels(component)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    image_pull_secrets: registry::pod_pull_secrets(params),
                    ..pod
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

pub(crate) fn string_map<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
    pairs
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A pod volume for a claim, named after it (`volume_name`) or otherwise.
pub(crate) fn pvc_volume(volume_name: &str, claim: &str) -> Volume {
    Volume {
        name: volume_name.to_owned(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.to_owned(),
            ..PersistentVolumeClaimVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// A pod volume for a ConfigMap.
pub(crate) fn config_map_volume(volume_name: &str, config_map: &str) -> Volume {
    Volume {
        name: volume_name.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: config_map.to_owned(),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    }
}

/// A read-write mount of a whole volume.
pub(crate) fn mount(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        ..VolumeMount::default()
    }
}
