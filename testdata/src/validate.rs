//! Validation of written objects: built-in kinds must deserialize as their k8s-openapi type
//! (what the real API server's decoding catches), plus the few semantic checks this project's
//! objects can trip over.

use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

use k8s_openapi::api;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;

/// A rejected object: `Err(message)` for undecodable objects, `Ok(unknown_fields)` otherwise.
fn roundtrip<T: DeserializeOwned + Serialize>(obj: &Value) -> Result<Vec<String>, String> {
    let typed: T = serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut unknown = Vec::new();
    unknown_fields(obj, &back, "", &mut unknown);
    Ok(unknown)
}

/// Fields present (and not null) in `input` but lost by the typed round trip: the fields the
/// type does not declare.
fn unknown_fields(input: &Value, back: &Value, path: &str, out: &mut Vec<String>) {
    match (input, back) {
        (Value::Object(i), Value::Object(b)) => {
            for (k, v) in i {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match b.get(k) {
                    Some(bv) => unknown_fields(v, bv, &p, out),
                    None if !v.is_null() => out.push(p),
                    None => {}
                }
            }
        }
        (Value::Array(i), Value::Array(b)) => {
            for (n, (iv, bv)) in i.iter().zip(b).enumerate() {
                unknown_fields(iv, bv, &format!("{path}[{n}]"), out);
            }
        }
        _ => {}
    }
}

/// Decodes a built-in object as its k8s-openapi type. Returns the unknown fields, or the
/// decoding error. Custom resources (and kinds not listed) decode as anything.
pub fn decode(group: &str, kind: &str, obj: &Value) -> Result<Vec<String>, String> {
    match (group, kind) {
        ("", "Namespace") => roundtrip::<api::core::v1::Namespace>(obj),
        ("", "ConfigMap") => roundtrip::<api::core::v1::ConfigMap>(obj),
        ("", "Secret") => roundtrip::<api::core::v1::Secret>(obj),
        ("", "Service") => roundtrip::<api::core::v1::Service>(obj),
        ("", "ServiceAccount") => roundtrip::<api::core::v1::ServiceAccount>(obj),
        ("", "PersistentVolumeClaim") => roundtrip::<api::core::v1::PersistentVolumeClaim>(obj),
        ("", "PersistentVolume") => roundtrip::<api::core::v1::PersistentVolume>(obj),
        ("", "Pod") => roundtrip::<api::core::v1::Pod>(obj),
        ("", "Node") => roundtrip::<api::core::v1::Node>(obj),
        ("", "Event") => roundtrip::<api::core::v1::Event>(obj),
        ("apps", "Deployment") => roundtrip::<api::apps::v1::Deployment>(obj),
        ("batch", "Job") => roundtrip::<api::batch::v1::Job>(obj),
        ("networking.k8s.io", "Ingress") => roundtrip::<api::networking::v1::Ingress>(obj),
        ("networking.k8s.io", "IngressClass") => {
            roundtrip::<api::networking::v1::IngressClass>(obj)
        }
        ("rbac.authorization.k8s.io", "Role") => roundtrip::<api::rbac::v1::Role>(obj),
        ("rbac.authorization.k8s.io", "RoleBinding") => {
            roundtrip::<api::rbac::v1::RoleBinding>(obj)
        }
        ("coordination.k8s.io", "Lease") => roundtrip::<api::coordination::v1::Lease>(obj),
        ("storage.k8s.io", "StorageClass") => roundtrip::<api::storage::v1::StorageClass>(obj),
        ("authorization.k8s.io", "SelfSubjectAccessReview") => {
            roundtrip::<api::authorization::v1::SelfSubjectAccessReview>(obj)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            roundtrip::<apiext::CustomResourceDefinition>(obj)
        }
        _ => Ok(Vec::new()),
    }
}

/// Whether a path as `unknown_fields` writes it (`a.b[0].c`) exists in `v`.
pub fn path_present(v: &Value, path: &str) -> bool {
    let mut cur = v;
    for part in path.split('.') {
        let (key, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        cur = match cur.get(key) {
            Some(next) => next,
            None => return false,
        };
        for index in indexes.split('[').filter(|s| !s.is_empty()) {
            let Some(n) = index.trim_end_matches(']').parse::<usize>().ok() else {
                return false;
            };
            cur = match cur.get(n) {
                Some(next) => next,
                None => return false,
            };
        }
    }
    true
}

/// Whether `name` is a DNS-1123 subdomain (what most kinds require of metadata.name).
pub fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

/// Semantic checks beyond decoding: `(field, message)` per problem.
pub fn semantic(group: &str, kind: &str, obj: &Value) -> Vec<(String, String)> {
    let mut problems = Vec::new();
    match (group, kind) {
        ("batch", "Job") => {
            let policy = obj["spec"]["template"]["spec"]["restartPolicy"].as_str();
            if !matches!(policy, Some("Never") | Some("OnFailure")) {
                problems.push((
                    "spec.template.spec.restartPolicy".to_string(),
                    match policy {
                        None => {
                            "Required value: valid values: \"OnFailure\", \"Never\"".to_string()
                        }
                        Some(p) => format!(
                            "Unsupported value: \"{p}\": supported values: \"OnFailure\", \"Never\""
                        ),
                    },
                ));
            }
            if obj["spec"]["template"]["spec"]["containers"]
                .as_array()
                .is_none_or(|c| c.is_empty())
            {
                problems.push((
                    "spec.template.spec.containers".to_string(),
                    "Required value".to_string(),
                ));
            }
        }
        ("apps", "Deployment") => {
            let selector = &obj["spec"]["selector"]["matchLabels"];
            let labels = &obj["spec"]["template"]["metadata"]["labels"];
            let matches = selector
                .as_object()
                .is_some_and(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
            if !matches {
                problems.push((
                    "spec.template.metadata.labels".to_string(),
                    "Invalid value: `selector` does not match template `labels`".to_string(),
                ));
            }
            if obj["spec"]["template"]["spec"]["containers"]
                .as_array()
                .is_none_or(|c| c.is_empty())
            {
                problems.push((
                    "spec.template.spec.containers".to_string(),
                    "Required value".to_string(),
                ));
            }
        }
        ("", "ConfigMap") => {
            for (k, v) in obj["data"].as_object().into_iter().flatten() {
                if !v.is_string() {
                    problems.push((format!("data[{k}]"), "Invalid value: not a string".into()));
                }
            }
        }
        _ => {}
    }
    problems
}

/// Checks an object the way the simulated API server does on a strict write: a built-in kind
/// must decode as its k8s-openapi type with no unknown fields, and pass the semantic checks
/// above. Custom resources pass. `Err` lists every problem.
pub fn check_object(obj: &Value) -> Result<(), Vec<String>> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let mut problems = match decode(group, kind, obj) {
        Ok(unknown) => unknown
            .into_iter()
            .map(|f| format!("{f}: unknown field"))
            .collect::<Vec<_>>(),
        Err(e) => vec![format!("cannot be handled as a {kind}: {e}")],
    };
    problems.extend(
        semantic(group, kind, obj)
            .into_iter()
            .map(|(f, m)| format!("{f}: {m}")),
    );
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}
