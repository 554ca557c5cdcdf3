use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::builders::meta;

use crate::catalogue::components;
use crate::volumes::{VolumeClaim, VolumeRole};

/// A claim of the catalogue, ReadWriteOnce, with the requested size and class.
pub fn pvc(namespace: &str, claim: &VolumeClaim) -> PersistentVolumeClaim {
    let component = match claim.role {
        VolumeRole::Server => components::SERVER,
        VolumeRole::Database => components::DB,
        VolumeRole::Migration => components::MIGRATION,
    };
    PersistentVolumeClaim {
        metadata: meta(&claim.name, namespace, component),
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
            storage_class_name: claim.storage_class.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(claim.size.clone()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    }
}
