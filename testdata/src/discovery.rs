//! Discovery documents (legacy and aggregated), OpenAPI v3 stubs and `/version`.

use serde_json::{Value, json};

use crate::resources::{ResourceType, group_versions};
use crate::sim::Flavour;

/// The patch release reported for each minor: recent real releases, so the dispatcher and the
/// version checks see something plausible.
fn patch_release(minor: u32) -> u32 {
    match minor {
        27 => 16,
        28 => 15,
        29 => 15,
        30 => 14,
        31 => 13,
        32 => 9,
        33 => 5,
        34 => 1,
        _ => 0,
    }
}

/// `v1.33.5+k3s1` and friends.
pub fn git_version(minor: u32, flavour: Flavour) -> String {
    let suffix = match flavour {
        Flavour::K3s => "+k3s1",
        Flavour::Rke2 => "+rke2r1",
        Flavour::Plain => "",
    };
    format!("v1.{minor}.{}{suffix}", patch_release(minor))
}

pub fn version(minor: u32, flavour: Flavour) -> Value {
    json!({
        "major": "1",
        "minor": minor.to_string(),
        "emulationMajor": "1",
        "emulationMinor": minor.to_string(),
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": minor.saturating_sub(1).to_string(),
        "gitVersion": git_version(minor, flavour),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-10-01T00:00:00Z",
        "goVersion": "go1.24.6",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn api_versions(server_addr: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_addr}],
    })
}

fn group_json(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({
        "name": group,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

pub fn api_group_list(types: &[ResourceType]) -> Value {
    let groups: Vec<Value> = group_versions(types)
        .into_iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_json(&g, &vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `GET /apis/{group}`.
pub fn api_group(types: &[ResourceType], group: &str) -> Option<Value> {
    group_versions(types)
        .into_iter()
        .find(|(g, _)| g == group)
        .map(|(g, vs)| {
            let mut v = group_json(&g, &vs);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            v
        })
}

/// `GET /api/v1` or `GET /apis/{g}/{v}`; `None` for an unknown group/version.
pub fn api_resource_list(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = types
        .iter()
        .filter(|t| t.group == group && t.version == version)
        .flat_map(ResourceType::api_resources)
        .collect();
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}

/// Which aggregated discovery version the Accept header asks for, if any (kubectl 1.27 knows
/// only v2beta1; 1.30 and later prefer v2).
pub fn aggregated_version(accept: &str) -> Option<&'static str> {
    for media in accept.split(',') {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        let has = |p: &str| params.contains(&p);
        if has("g=apidiscovery.k8s.io") && has("as=APIGroupDiscoveryList") {
            if has("v=v2") {
                return Some("v2");
            }
            if has("v=v2beta1") {
                return Some("v2beta1");
            }
        }
    }
    None
}

/// The aggregated discovery document of the core group (`core == true`) or of all others.
pub fn aggregated(types: &[ResourceType], core: bool, version: &str) -> Value {
    let items: Vec<Value> = group_versions(types)
        .into_iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, vs)| {
            let versions: Vec<Value> = vs
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = types
                        .iter()
                        .filter(|t| t.group == g && &t.version == v)
                        .map(ResourceType::aggregated_resource)
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let mut metadata = json!({"creationTimestamp": null});
            if !g.is_empty() {
                metadata["name"] = json!(g);
            }
            json!({"metadata": metadata, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    })
}

/// The OpenAPI v3 document of one group/version: operations only, no schemas. The
/// `x-kubernetes-group-version-kind` on each operation with a `fieldValidation` parameter is
/// what tells kubectl to validate server-side.
pub fn openapi_gv(types: &[ResourceType], group: &str, version: &str, minor: u32) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    let params = json!([
        {"name": "dryRun", "in": "query", "schema": {"type": "string"}},
        {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
        {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        {"name": "force", "in": "query", "schema": {"type": "boolean"}},
    ]);
    let mut any = false;
    for t in types
        .iter()
        .filter(|t| t.group == group && t.version == version)
    {
        any = true;
        let gvk = json!({"group": t.group, "version": t.version, "kind": t.kind});
        let op = |action: &str| {
            json!({
                "operationId": format!("{action}{}", t.kind),
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
            })
        };
        let base = if t.namespaced {
            format!("{}/namespaces/{{namespace}}/{}", t.gv_path(), t.plural)
        } else {
            format!("{}/{}", t.gv_path(), t.plural)
        };
        if t.create_only {
            paths.insert(base, json!({"post": op("post")}));
            continue;
        }
        paths.insert(
            base.clone(),
            json!({"get": op("list"), "post": op("post"), "delete": op("deletecollection")}),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}),
        );
        for sub in &t.subresources {
            if sub == "log" {
                continue;
            }
            paths.insert(
                format!("{base}/{{name}}/{sub}"),
                json!({"get": op("get"), "put": op("put"), "patch": op("patch")}),
            );
        }
    }
    if !any {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{minor}.0")},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

/// A short stable hash of a document: kubectl caches OpenAPI by it, so it must change when a
/// CRD adds resources.
pub fn hash(v: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// `GET /openapi/v3`: one entry per group/version.
pub fn openapi_root(types: &[ResourceType], minor: u32) -> Value {
    let mut paths = serde_json::Map::new();
    for (g, vs) in group_versions(types) {
        for v in vs {
            let (key, doc) = if g.is_empty() {
                (format!("api/{v}"), openapi_gv(types, &g, &v, minor))
            } else {
                (format!("apis/{g}/{v}"), openapi_gv(types, &g, &v, minor))
            };
            let h = doc.as_ref().map(hash).unwrap_or_default();
            paths.insert(
                key.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={h}")}),
            );
        }
    }
    json!({"paths": paths})
}

/// Protobuf field writers, for the one protobuf document served (`/openapi/v2`).
mod pb {
    fn varint(mut n: u64, out: &mut Vec<u8>) {
        while n >= 0x80 {
            out.push((n as u8 & 0x7f) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    /// A length-delimited field (strings and embedded messages).
    pub fn field(number: u64, bytes: &[u8], out: &mut Vec<u8>) {
        varint((number << 3) | 2, out);
        varint(bytes.len() as u64, out);
        out.extend_from_slice(bytes);
    }

    pub fn message(fields: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (n, b) in fields {
            field(*n, b, &mut out);
        }
        out
    }
}

/// `GET /openapi/v2` as gnostic's `openapi.v2.Document` protobuf: paths only, each resource's
/// PATCH operation with its `x-kubernetes-group-version-kind` and a `fieldValidation` query
/// parameter. kubectl 1.27 reads this (not v3) to decide on server-side validation; without
/// it `kubectl apply` fails.
pub fn openapi_v2_proto(types: &[ResourceType], minor: u32) -> Vec<u8> {
    use pb::message;
    let query_param = |name: &str| {
        // QueryParameterSubSchema{in=2, name=4, type=6} in NonBodyParameter(3) in
        // Parameter(2) in ParametersItem(1).
        let sub = message(&[
            (2, b"query".to_vec()),
            (4, name.as_bytes().to_vec()),
            (6, b"string".to_vec()),
        ]);
        let non_body = message(&[(3, sub)]);
        let parameter = message(&[(2, non_body)]);
        message(&[(1, parameter)])
    };
    let mut paths = Vec::new();
    for t in types.iter().filter(|t| !t.create_only) {
        let gvk_yaml = format!(
            "group: \"{}\"\nkind: {}\nversion: {}\n",
            t.group, t.kind, t.version
        );
        let any = message(&[(2, gvk_yaml.into_bytes())]);
        let extension = message(&[(1, b"x-kubernetes-group-version-kind".to_vec()), (2, any)]);
        let mut operation = vec![(5u64, format!("patch{}", t.kind).into_bytes())];
        for p in ["dryRun", "fieldManager", "fieldValidation", "force"] {
            operation.push((8, query_param(p)));
        }
        operation.push((13, extension));
        let path_item = message(&[(8, message(&operation))]);
        let base = if t.namespaced {
            format!(
                "{}/namespaces/{{namespace}}/{}/{{name}}",
                t.gv_path(),
                t.plural
            )
        } else {
            format!("{}/{}/{{name}}", t.gv_path(), t.plural)
        };
        paths.push((2u64, message(&[(1, base.into_bytes()), (2, path_item)])));
    }
    let info = message(&[
        (1, b"Kubernetes".to_vec()),
        (2, format!("v1.{minor}.0").into_bytes()),
    ]);
    message(&[(1, b"2.0".to_vec()), (2, info), (8, message(&paths))])
}

/// The same document as JSON, for clients that ask for JSON.
pub fn openapi_v2_json(types: &[ResourceType], minor: u32) -> Value {
    let mut paths = serde_json::Map::new();
    for t in types.iter().filter(|t| !t.create_only) {
        let base = if t.namespaced {
            format!(
                "{}/namespaces/{{namespace}}/{}/{{name}}",
                t.gv_path(),
                t.plural
            )
        } else {
            format!("{}/{}/{{name}}", t.gv_path(), t.plural)
        };
        let params: Vec<Value> = ["dryRun", "fieldManager", "fieldValidation", "force"]
            .iter()
            .map(|p| json!({"name": p, "in": "query", "type": "string"}))
            .collect();
        paths.insert(
            base,
            json!({"patch": {
                "operationId": format!("patch{}", t.kind),
                "parameters": params,
                "x-kubernetes-group-version-kind": {"group": t.group, "version": t.version, "kind": t.kind},
            }}),
        );
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{minor}.0")},
        "paths": paths,
        "definitions": {},
    })
}
