use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::labels;

/// The namespace of the installation. Only created when absent: an existing namespace is the
/// user's and is left as it is.
pub fn namespace(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(labels::labels("namespace")),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}
