//! The patch formats the API server accepts: JSON merge patch (RFC 7386), an approximation of
//! strategic merge patch, JSON patch (RFC 6902), and the `managedFields` bookkeeping of
//! server-side apply.

use serde_json::{Map, Value, json};

/// RFC 7386: objects merge recursively, `null` deletes, everything else replaces.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else {
        return;
    };
    for (k, v) in patch_map {
        if v.is_null() {
            target_map.remove(k);
        } else {
            merge_patch(target_map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// The merge key of the lists kubectl patches strategically, by field name (from the
/// `patchMergeKey` tags of the Kubernetes API types the project uses). `ports` is keyed by
/// `containerPort` in a container and by `port` in a Service, so both are tried.
fn merge_keys(field: &str) -> &'static [&'static str] {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "secrets"
        | "resourceClaims" => &["name"],
        "volumeMounts" | "volumeDevices" => &["mountPath", "devicePath"],
        "ports" => &["containerPort", "port"],
        "conditions" => &["type"],
        "hostAliases" => &["ip"],
        "topologySpreadConstraints" => &["topologyKey"],
        "ownerReferences" => &["uid"],
        _ => &[],
    }
}

/// Strategic merge patch, as far as this project's objects need it: maps merge like a merge
/// patch; lists with a known merge key merge element-wise by that key (`$patch: delete` removes
/// an element); other lists replace; the `$setElementOrder`, `$retainKeys` and
/// `$deleteFromPrimitiveList` directives are honoured roughly or dropped.
pub fn strategic_merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if patch_map.get("$patch").and_then(Value::as_str) == Some("replace") {
        let mut replacement = patch_map.clone();
        replacement.remove("$patch");
        *target = Value::Object(replacement);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target_map) = target else {
        return;
    };
    if let Some(Value::Array(retain)) = patch_map.get("$retainKeys") {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        target_map.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in patch_map {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(remove)) = (target_map.get_mut(field), v)
            {
                list.retain(|item| !remove.contains(item));
            }
            continue;
        }
        if v.is_null() {
            target_map.remove(k);
            continue;
        }
        match (target_map.get_mut(k), v) {
            (Some(Value::Array(existing)), Value::Array(items)) if !merge_keys(k).is_empty() => {
                merge_list(existing, items, merge_keys(k));
            }
            (Some(existing), Value::Object(_)) if existing.is_object() => {
                strategic_merge_patch(existing, v);
            }
            _ => {
                target_map.insert(k.clone(), strip_directives(v));
            }
        }
    }
}

/// Merges a keyed list: patch elements update the element with the same key or are appended.
fn merge_list(existing: &mut Vec<Value>, items: &[Value], keys: &[&str]) {
    for item in items {
        let key = keys.iter().find(|k| item.get(**k).is_some());
        let Some(key) = key else {
            existing.push(strip_directives(item));
            continue;
        };
        let wanted = &item[*key];
        let position = existing.iter().position(|e| e.get(*key) == Some(wanted));
        let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
        match (position, delete) {
            (Some(i), true) => {
                existing.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic_merge_patch(&mut existing[i], item),
            (None, false) => existing.push(strip_directives(item)),
        }
    }
}

/// Removes `$…` directives from a value that is inserted whole.
fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// Decodes one JSON pointer token (`~1` is `/`, `~0` is `~`).
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn split_pointer(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let rest = path
        .strip_prefix('/')
        .ok_or_else(|| format!("invalid JSON pointer {path:?}"))?;
    Ok(rest.split('/').map(unescape).collect())
}

fn pointer_get<'a>(doc: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    let mut cur = doc;
    for t in tokens {
        cur = match cur {
            Value::Object(m) => m.get(t)?,
            Value::Array(a) => a.get(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn parent_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    let mut cur = doc;
    for t in tokens {
        cur = match cur {
            Value::Object(m) => m.get_mut(t)?,
            Value::Array(a) => a.get_mut(t.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn json_add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let tokens = split_pointer(path)?;
    let Some((last, parents)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    let parent = parent_mut(doc, parents).ok_or_else(|| format!("path {path:?} not found"))?;
    match parent {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
                return Ok(());
            }
            let i: usize = last
                .parse()
                .map_err(|_| format!("invalid array index in {path:?}"))?;
            if i > a.len() {
                return Err(format!("index out of range in {path:?}"));
            }
            a.insert(i, value);
            Ok(())
        }
        _ => Err(format!("parent of {path:?} is not a container")),
    }
}

fn json_remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let tokens = split_pointer(path)?;
    let (last, parents) = tokens
        .split_last()
        .ok_or_else(|| "cannot remove the whole document".to_string())?;
    let parent = parent_mut(doc, parents).ok_or_else(|| format!("path {path:?} not found"))?;
    match parent {
        Value::Object(m) => m
            .remove(last)
            .ok_or_else(|| format!("unable to remove nonexistent key: {last}: missing value")),
        Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| format!("invalid array index in {path:?}"))?;
            if i >= a.len() {
                return Err(format!("index out of range in {path:?}"));
            }
            Ok(a.remove(i))
        }
        _ => Err(format!("parent of {path:?} is not a container")),
    }
}

/// RFC 6902 JSON patch. Errors read like the API server's (`the server rejected our request
/// due to an error in our request` is what kubectl prints around them).
pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let ops = ops
        .as_array()
        .ok_or_else(|| "a JSON patch must be an array of operations".to_string())?;
    for op in ops {
        let kind = op["op"].as_str().ok_or("operation without \"op\"")?;
        let path = op["path"].as_str().ok_or("operation without \"path\"")?;
        match kind {
            "add" => json_add(doc, path, op["value"].clone())?,
            "remove" => {
                json_remove(doc, path)?;
            }
            "replace" => {
                let tokens = split_pointer(path)?;
                let target = parent_mut(doc, &tokens).ok_or_else(|| {
                    format!("replace operation does not apply: doc is missing key: {path}")
                })?;
                *target = op["value"].clone();
            }
            "move" => {
                let from = op["from"].as_str().ok_or("move without \"from\"")?;
                let value = json_remove(doc, from)?;
                json_add(doc, path, value)?;
            }
            "copy" => {
                let from = op["from"].as_str().ok_or("copy without \"from\"")?;
                let value = pointer_get(doc, &split_pointer(from)?)
                    .cloned()
                    .ok_or_else(|| format!("copy from {from:?}: not found"))?;
                json_add(doc, path, value)?;
            }
            "test" => {
                let actual = pointer_get(doc, &split_pointer(path)?);
                if actual != Some(&op["value"]) {
                    return Err(format!("testing value {path} failed: test failed"));
                }
            }
            other => return Err(format!("unexpected kind: {other}")),
        }
    }
    Ok(())
}

/// Fields of the built-in types that server-side apply treats as one value (`+structType=atomic`,
/// `+mapType=atomic` in the API types): owned as a whole, never field by field.
fn atomic_field(field: &str) -> bool {
    matches!(
        field,
        "selector"
            | "nodeSelector"
            | "roleRef"
            | "secretKeyRef"
            | "configMapKeyRef"
            | "fieldRef"
            | "resourceFieldRef"
    )
}

/// The `fieldsV1` set of a body, roughly as the API server computes it: one `f:<field>` per
/// map key; list elements with a merge key become `k:{…}` (ports keyed with their protocol,
/// `TCP` when not given, as the schema's default key), other lists and the atomic fields of
/// built-in kinds are one value.
pub fn fields_v1(body: &Value) -> Value {
    fn walk(v: &Value, field: &str, builtin: bool) -> Value {
        match v {
            Value::Object(_) if builtin && atomic_field(field) => Value::Object(Map::new()),
            Value::Object(m) => {
                let mut out = Map::new();
                for (k, child) in m {
                    out.insert(format!("f:{k}"), walk(child, k, builtin));
                }
                Value::Object(out)
            }
            Value::Array(items) if !merge_keys(field).is_empty() => {
                let mut out = Map::new();
                for item in items {
                    let keys = merge_keys(field);
                    if let Some(key) = keys.iter().find(|k| item.get(**k).is_some()) {
                        let mut key_obj = Map::new();
                        key_obj.insert((*key).to_string(), item[*key].clone());
                        if field == "ports" {
                            key_obj.insert(
                                "protocol".to_string(),
                                item.get("protocol")
                                    .cloned()
                                    .unwrap_or_else(|| json!("TCP")),
                            );
                        }
                        let mut entry = walk(item, "", builtin);
                        if let Value::Object(m) = &mut entry {
                            m.insert(".".to_string(), Value::Object(Map::new()));
                        }
                        out.insert(format!("k:{}", Value::Object(key_obj)), entry);
                    }
                }
                Value::Object(out)
            }
            _ => Value::Object(Map::new()),
        }
    }
    let group = body["apiVersion"]
        .as_str()
        .and_then(|v| v.rsplit_once('/'))
        .map_or("", |(g, _)| g);
    let builtin = !group.contains('.') || group.ends_with(".k8s.io");
    let mut top = body.clone();
    if let Value::Object(m) = &mut top {
        // The identity fields are not owned by anyone.
        m.remove("apiVersion");
        m.remove("kind");
        if let Some(Value::Object(meta)) = m.get_mut("metadata") {
            for k in [
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "managedFields",
            ] {
                meta.remove(k);
            }
            if meta.is_empty() {
                m.remove("metadata");
            }
        }
    }
    walk(&top, "", builtin)
}

/// Removes from `obj` the leaf fields the manager owned before (`old`) but no longer applies
/// (`new`): how server-side apply deletes a field that disappeared from the applied manifest.
/// Only map fields are handled; list elements are left alone.
pub fn remove_dropped_fields(obj: &mut Value, old: &Value, new: &Value) {
    let (Value::Object(old_m), Some(obj_m)) = (old, obj.as_object_mut()) else {
        return;
    };
    for (k, old_child) in old_m {
        let Some(field) = k.strip_prefix("f:") else {
            continue;
        };
        let granular = old_child
            .as_object()
            .is_some_and(|m| m.keys().any(|c| c.starts_with("f:")));
        match new.get(k) {
            // A map owned field by field loses only those fields (`metadata` keeps its name).
            None if granular => {
                if let Some(child) = obj_m.get_mut(field) {
                    remove_dropped_fields(child, old_child, &Value::Object(Map::new()));
                    if child.as_object().is_some_and(Map::is_empty) {
                        obj_m.remove(field);
                    }
                }
            }
            None => {
                obj_m.remove(field);
            }
            Some(new_child) => {
                if let Some(child) = obj_m.get_mut(field) {
                    remove_dropped_fields(child, old_child, new_child);
                }
            }
        }
    }
}

/// The leaf field paths of a `fieldsV1` set (map fields only; list elements are skipped).
fn leaf_paths(fields: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let Value::Object(m) = fields else {
        return;
    };
    let children: Vec<(&String, &Value)> = m.iter().filter(|(k, _)| k.starts_with("f:")).collect();
    if children.is_empty() && !prefix.is_empty() {
        out.push(prefix.clone());
        return;
    }
    for (k, v) in children {
        prefix.push(k[2..].to_string());
        leaf_paths(v, prefix, out);
        prefix.pop();
    }
}

fn value_at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, seg| cur.get(seg))
}

fn has_path(fields: &Value, path: &[String]) -> bool {
    path.iter()
        .try_fold(fields, |cur, seg| cur.get(format!("f:{seg}")))
        .is_some()
}

/// Server-side apply conflicts: fields this apply sets to a value different from the current
/// one while another manager owns them, by apply or by update (structured-merge-diff's
/// `ConflictError`). Returns `(manager, .path)` pairs.
pub fn apply_conflicts(
    existing: &Value,
    body: &Value,
    manager: &str,
    subresource: Option<&str>,
) -> Vec<(String, String)> {
    conflicting_paths(existing, body, manager, subresource)
        .into_iter()
        .map(|(other, path)| (other, format!(".{}", path.join("."))))
        .collect()
}

fn conflicting_paths(
    existing: &Value,
    body: &Value,
    manager: &str,
    subresource: Option<&str>,
) -> Vec<(String, Vec<String>)> {
    let mut paths = Vec::new();
    leaf_paths(&fields_v1(body), &mut Vec::new(), &mut paths);
    let mut out = Vec::new();
    for entry in existing["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let other = entry["manager"].as_str().unwrap_or_default();
        if (other == manager && entry["operation"] == "Apply")
            || entry["subresource"].as_str() != subresource
        {
            continue;
        }
        for path in &paths {
            if has_path(&entry["fieldsV1"], path)
                && value_at(existing, path) != value_at(body, path)
            {
                out.push((other.to_string(), path.clone()));
            }
        }
    }
    out
}

/// A forced apply takes the conflicting fields over: the other managers no longer own them,
/// and a manager left owning nothing loses its entry.
pub fn take_over_conflicts(
    obj: &mut Value,
    existing: &Value,
    body: &Value,
    manager: &str,
    subresource: Option<&str>,
) {
    let conflicts = conflicting_paths(existing, body, manager, subresource);
    if conflicts.is_empty() {
        return;
    }
    let Some(entries) = obj["metadata"]["managedFields"].as_array_mut() else {
        return;
    };
    for entry in entries.iter_mut() {
        let other = entry["manager"].as_str().unwrap_or_default().to_owned();
        if (other == manager && entry["operation"] == "Apply")
            || entry["subresource"].as_str() != subresource
        {
            continue;
        }
        for (_, path) in conflicts.iter().filter(|(m, _)| *m == other) {
            remove_field(&mut entry["fieldsV1"], path);
        }
    }
    entries.retain(|e| e["fieldsV1"].as_object().is_none_or(|m| !m.is_empty()));
}

/// Removes `path` from a fieldsV1 set, and the maps it leaves empty.
fn remove_field(fields: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let Some(m) = fields.as_object_mut() else {
        return;
    };
    let key = format!("f:{first}");
    if rest.is_empty() {
        m.remove(&key);
        return;
    }
    if let Some(child) = m.get_mut(&key) {
        remove_field(child, rest);
        if child.as_object().is_some_and(|c| c.is_empty()) {
            m.remove(&key);
        }
    }
}
