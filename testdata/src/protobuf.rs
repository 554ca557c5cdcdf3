//! Just enough of Kubernetes' protobuf encoding to read what kubectl's typed commands send
//! (`kubectl create namespace|configmap|secret` post protobuf bodies and do not fall back to
//! JSON): the `k8s\0` envelope, ObjectMeta's common fields, and Namespace, ConfigMap, Secret and
//! SelfSubjectAccessReview.
//! Answers stay JSON (those clients accept it).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};

/// One decoded field: number and payload (varints as numbers, the rest as bytes).
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(out);
        }
    }
    None
}

/// All fields of a message, in order.
fn fields(buf: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut pos = 0;
    let mut out = Vec::new();
    while pos < buf.len() {
        let tag = varint(buf, &mut pos)?;
        let field = match tag & 7 {
            0 => Field::Varint(varint(buf, &mut pos)?),
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).ok()?;
                let bytes = buf.get(pos..pos.checked_add(len)?)?;
                pos += len;
                Field::Bytes(bytes)
            }
            1 => {
                pos += 8;
                Field::Varint(0)
            }
            5 => {
                pos += 4;
                Field::Varint(0)
            }
            _ => return None,
        };
        out.push((tag >> 3, field));
    }
    Some(out)
}

fn text(b: &[u8]) -> Value {
    Value::String(String::from_utf8_lossy(b).into_owned())
}

/// A map entry message (key 1, value 2) into `map`; `bytes_value` base64-encodes the value
/// as JSON does for `[]byte`.
fn map_entry(b: &[u8], map: &mut Map<String, Value>, bytes_value: bool) -> Option<()> {
    let mut key = String::new();
    let mut value = Value::String(String::new());
    for (n, f) in fields(b)? {
        if let Field::Bytes(v) = f {
            match n {
                1 => key = String::from_utf8_lossy(v).into_owned(),
                2 if bytes_value => value = json!(B64.encode(v)),
                2 => value = text(v),
                _ => {}
            }
        }
    }
    map.insert(key, value);
    Some(())
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut meta = Map::new();
    let mut labels = Map::new();
    let mut annotations = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(v)) => {
                meta.insert("name".into(), text(v));
            }
            (2, Field::Bytes(v)) => {
                meta.insert("generateName".into(), text(v));
            }
            (3, Field::Bytes(v)) => {
                meta.insert("namespace".into(), text(v));
            }
            (6, Field::Bytes(v)) => {
                meta.insert("resourceVersion".into(), text(v));
            }
            (11, Field::Bytes(v)) => map_entry(v, &mut labels, false)?,
            (12, Field::Bytes(v)) => map_entry(v, &mut annotations, false)?,
            _ => {}
        }
    }
    if !labels.is_empty() {
        meta.insert("labels".into(), Value::Object(labels));
    }
    if !annotations.is_empty() {
        meta.insert("annotations".into(), Value::Object(annotations));
    }
    Some(Value::Object(meta))
}

/// The string fields of a message, by field number (embedded messages left out).
fn strings(b: &[u8], names: &[(u64, &str)]) -> Option<Value> {
    let mut out = Map::new();
    for (n, f) in fields(b)? {
        if let (Some((_, name)), Field::Bytes(v)) = (names.iter().find(|(m, _)| *m == n), f) {
            out.insert((*name).to_owned(), text(v));
        }
    }
    Some(Value::Object(out))
}

/// `SelfSubjectAccessReviewSpec` (k8s.io/api/authorization/v1/generated.proto), what `kubectl
/// auth can-i` sends as protobuf: its resource or non-resource attributes (the field and label
/// selector attributes left out).
fn review_spec(b: &[u8]) -> Option<Value> {
    let mut spec = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(v)) => {
                let names = [
                    (1, "namespace"),
                    (2, "verb"),
                    (3, "group"),
                    (4, "version"),
                    (5, "resource"),
                    (6, "subresource"),
                    (7, "name"),
                ];
                spec.insert("resourceAttributes".into(), strings(v, &names)?);
            }
            (2, Field::Bytes(v)) => {
                let names = [(1, "path"), (2, "verb")];
                spec.insert("nonResourceAttributes".into(), strings(v, &names)?);
            }
            _ => {}
        }
    }
    Some(Value::Object(spec))
}

/// Decodes a `k8s\0`-enveloped Namespace, ConfigMap, Secret or SelfSubjectAccessReview into its
/// JSON form.
pub fn decode(body: &[u8]) -> Option<Value> {
    let unknown = body.strip_prefix(b"k8s\0")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, f) in fields(unknown)? {
        match (n, f) {
            (1, Field::Bytes(type_meta)) => {
                for (m, g) in fields(type_meta)? {
                    if let Field::Bytes(v) = g {
                        match m {
                            1 => api_version = String::from_utf8_lossy(v).into_owned(),
                            2 => kind = String::from_utf8_lossy(v).into_owned(),
                            _ => {}
                        }
                    }
                }
            }
            (2, Field::Bytes(v)) => raw = v,
            _ => {}
        }
    }
    let mut obj = json!({"apiVersion": api_version, "kind": kind});
    let mut data = Map::new();
    let mut string_data = Map::new();
    for (n, f) in fields(raw)? {
        match (kind.as_str(), n, f) {
            (_, 1, Field::Bytes(v)) => obj["metadata"] = object_meta(v)?,
            ("ConfigMap", 2, Field::Bytes(v)) => map_entry(v, &mut data, false)?,
            ("ConfigMap", 4, Field::Varint(v)) | ("Secret", 5, Field::Varint(v)) => {
                obj["immutable"] = json!(v != 0);
            }
            ("Secret", 2, Field::Bytes(v)) => map_entry(v, &mut data, true)?,
            ("Secret", 3, Field::Bytes(v)) => obj["type"] = text(v),
            ("Secret", 4, Field::Bytes(v)) => map_entry(v, &mut string_data, false)?,
            ("SelfSubjectAccessReview", 2, Field::Bytes(v)) => obj["spec"] = review_spec(v)?,
            ("Namespace" | "ConfigMap" | "Secret" | "SelfSubjectAccessReview", _, _) => {}
            _ => return None,
        }
    }
    if !data.is_empty() {
        obj["data"] = Value::Object(data);
    }
    if !string_data.is_empty() {
        obj["stringData"] = Value::Object(string_data);
    }
    Some(obj)
}
