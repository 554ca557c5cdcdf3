//! One builder function per Kubernetes object. Builders are total: they take validated
//! parameters and return k8s-openapi structs, labels from [`crate::labels`].

pub mod data_sync;
pub mod database;
pub mod hardening;
pub mod image_check;
pub mod image_inspect;
pub mod ingress;
pub mod install;
pub mod job;
pub mod migration;
pub mod namespace;
pub mod network_policy;
pub mod pvc;
pub mod registry;
pub mod server;
pub mod spec;
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

/// Metadata of a namespaced object the tool owns.
pub fn meta(name: &str, namespace: &str, component: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.to_owned()),
        labels: Some(labels::labels(component)),
        ..ObjectMeta::default()
    }
}

/// The annotation that ties a Deployment running on the server's data to where the data came
/// from: its data sync ([`labels::DATA_SYNC_ANNOTATION`]), or an install
/// ([`labels::ORIGIN_ANNOTATION`]). On the Deployment's own metadata, not its pod template: it
/// changes with a new sync only, and must not restart pods by itself.
pub(crate) fn origin_annotation(
    settings: &crate::settings::ServerSettings,
) -> BTreeMap<String, String> {
    match &settings.origin {
        crate::settings::Origin::DataSync(job) => {
            BTreeMap::from([(labels::DATA_SYNC_ANNOTATION.to_owned(), job.clone())])
        }
        crate::settings::Origin::Install => BTreeMap::from([(
            labels::ORIGIN_ANNOTATION.to_owned(),
            labels::ORIGIN_INSTALL.to_owned(),
        )]),
    }
}

/// A Deployment of one component with the chart's labels and selector (images-today §C.2).
/// Always `Recreate`: the server's volumes are ReadWriteOnce, and a host-network pod (TFTP)
/// cannot start next to its predecessor on the same node, so a rolling update would wait for
/// ever with one replica.
pub(crate) fn deployment(
    namespace: &str,
    spec: &crate::params::ServerSpec,
    name: &str,
    component: &str,
    replicas: i32,
    pod: PodSpec,
) -> Deployment {
    Deployment {
        metadata: meta(name, namespace, component),
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
                    image_pull_secrets: registry::pod_pull_secrets(spec),
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
