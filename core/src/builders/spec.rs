//! ConfigMap `uyuni-server-spec`: the server's specification as the flags chose it, which every
//! later run starts from (`crate::record`).

use k8s_openapi::api::core::v1::ConfigMap;

use crate::catalogue::{components, names};
use crate::params::ServerParams;

/// The record of the run's remembered flags. No value is secret: the record is made from the
/// non-secret flags only.
pub fn server_spec(params: &ServerParams) -> ConfigMap {
    ConfigMap {
        metadata: super::meta(
            names::SERVER_SPEC_CONFIG_MAP,
            &params.namespace,
            components::SERVER,
        ),
        // Absent rather than empty: the API server drops an empty map, and the planner would
        // then see a difference on every run.
        data: (!params.spec_record.is_empty()).then(|| params.spec_record.clone()),
        ..ConfigMap::default()
    }
}
