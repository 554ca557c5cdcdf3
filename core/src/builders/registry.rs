//! The registry pull Secret (reference §1.8 with its R fixes): Secret `registry-credentials`
//! of type `kubernetes.io/dockerconfigjson`, its JSON built with a serialiser (D41), rewritten
//! when new credentials are given; and the `imagePullSecrets` every pod of the tool carries.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{LocalObjectReference, Secret};

use crate::builders::meta;

use crate::catalogue::{components, names};
use crate::params::ServerSpec;

/// The pull Secret for `user` on `registry`.
pub fn pull_secret(namespace: &str, registry: &str, user: &str, password: &str) -> Secret {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let config = serde_json::json!({
        "auths": {
            registry: {
                "username": user,
                "password": password,
                "auth": auth,
            }
        }
    });
    Secret {
        metadata: meta(names::REGISTRY_SECRET, namespace, components::MIGRATION),
        type_: Some("kubernetes.io/dockerconfigjson".to_owned()),
        data: Some(BTreeMap::from([(
            ".dockerconfigjson".to_owned(),
            ByteString(config.to_string().into_bytes()),
        )])),
        ..Secret::default()
    }
}

/// The `imagePullSecrets` of every pod the tool creates.
pub fn pod_pull_secrets(spec: &ServerSpec) -> Option<Vec<LocalObjectReference>> {
    spec.pull_secret_name().map(|name| {
        vec![LocalObjectReference {
            name: name.to_owned(),
        }]
    })
}
