//! The object store: every object by (group, plural, namespace, name), a global resourceVersion
//! counter, the full event history (watches resume from any resourceVersion), and pod logs.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// Where an object lives. The namespace is empty for cluster-scoped objects.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub group: String,
    pub plural: String,
    pub namespace: String,
    pub name: String,
}

impl Key {
    pub fn new(rt: &ResourceType, namespace: &str, name: &str) -> Key {
        Key {
            group: rt.group.clone(),
            plural: rt.plural.clone(),
            namespace: if rt.namespaced {
                namespace.to_string()
            } else {
                String::new()
            },
            name: name.to_string(),
        }
    }
}

/// The kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, kept forever so that a watch from any resourceVersion can be served.
#[derive(Debug, Clone)]
pub struct StoredEvent {
    pub rv: u64,
    pub key: Key,
    pub etype: EventType,
    pub object: Value,
}

/// The log of one container.
#[derive(Debug, Clone, Default)]
pub struct ContainerLog {
    pub lines: Vec<String>,
    /// The container terminated: a following reader stops after the last line.
    pub done: bool,
    /// Bytes of generated lines (see [`crate::JobScript::log_bytes`]) served before `lines`,
    /// made as they are read, never stored.
    pub generated_bytes: u64,
    /// A reader has read all of the generated part: the container goes on.
    pub generated_read: bool,
}

/// The generated part of a log: numbered lines of [`GENERATED_LINE_BYTES`] bytes each.
pub const GENERATED_LINE_BYTES: u64 = 100;

/// Generated lines `first..first + count` (0-based), newline-terminated.
pub fn generated_lines(first: u64, count: u64) -> String {
    const FILL: &str = "generated log line of the simulated container, as long as a busy rsync's -";
    let mut out = String::with_capacity((count * GENERATED_LINE_BYTES) as usize);
    for i in first..first + count {
        // 12 digits, a space, 86 characters of text and a newline: 100 bytes.
        let line = format!("{i:012} {FILL}");
        out.push_str(&line[..line.len().min(99)]);
        for _ in line.len()..99 {
            out.push('.');
        }
        out.push('\n');
    }
    out
}

/// An object a client wrote (not dry-run), for later validation.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct WrittenObject {
    pub verb: String,
    /// The request body as sent (for a patch, the patch).
    pub body: Value,
    /// The object as stored afterwards.
    pub object: Value,
}

#[derive(Debug, Default)]
pub struct State {
    pub rv: u64,
    pub objects: BTreeMap<Key, Value>,
    pub events: Vec<StoredEvent>,
    pub types: Vec<ResourceType>,
    pub logs: BTreeMap<(String, String, String), ContainerLog>,
    pub written: Vec<WrittenObject>,
    /// How many Jobs each step had so far (namespace/step), for `laterAttempts`.
    pub job_attempts: BTreeMap<String, usize>,
    /// Which attempt of its step each Job (by uid) is.
    pub job_attempt_of: BTreeMap<String, usize>,
}

impl State {
    /// Finds a served type by URL parts.
    pub fn find_type(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.plural == plural)
            .cloned()
    }

    /// Finds a served type by apiVersion and kind, plural, singular or short name.
    pub fn type_for(&self, api_version: &str, kind_or_plural: &str) -> Option<ResourceType> {
        let (group, version) = split_api_version(api_version);
        self.types
            .iter()
            .find(|t| t.group == group && t.version == version && t.matches_name(kind_or_plural))
            .cloned()
    }

    pub fn get(&self, key: &Key) -> Option<&Value> {
        self.objects.get(key)
    }

    /// Objects of a type, in one namespace or all (`None`).
    pub fn list(&self, rt: &ResourceType, namespace: Option<&str>) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|(k, _)| {
                k.group == rt.group
                    && k.plural == rt.plural
                    && namespace.is_none_or(|ns| !rt.namespaced || k.namespace == ns)
            })
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn record(&mut self, key: Key, etype: EventType, object: Value) {
        self.events.push(StoredEvent {
            rv: self.rv,
            key,
            etype,
            object,
        });
    }

    /// Stores a new or changed object with the next resourceVersion and records the event.
    pub fn put(&mut self, key: Key, mut obj: Value) -> Value {
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let etype = if self.objects.contains_key(&key) {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.objects.insert(key.clone(), obj.clone());
        self.record(key, etype, obj.clone());
        obj
    }

    /// Removes an object and, unless `orphan`, its dependents (ownerReferences) and, for a
    /// namespace, everything in it. Returns the removed object.
    pub fn remove(&mut self, key: &Key, orphan: bool) -> Option<Value> {
        let mut obj = self.objects.remove(key)?;
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.record(key.clone(), EventType::Deleted, obj.clone());
        let uid = obj["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if key.group.is_empty() && key.plural == "namespaces" {
            let contents: Vec<Key> = self
                .objects
                .keys()
                .filter(|k| k.namespace == key.name)
                .cloned()
                .collect();
            for k in contents {
                self.remove(&k, true);
            }
            self.logs.retain(|(ns, _, _), _| *ns != key.name);
        }
        let dependents: Vec<Key> = self
            .objects
            .iter()
            .filter(|(_, v)| owned_by(v, &uid))
            .map(|(k, _)| k.clone())
            .collect();
        for k in dependents {
            if orphan {
                if let Some(mut dep) = self.objects.get(&k).cloned() {
                    if let Some(refs) = dep["metadata"]["ownerReferences"].as_array_mut() {
                        refs.retain(|r| r["uid"].as_str() != Some(uid.as_str()));
                    }
                    self.put(k, dep);
                }
            } else {
                self.remove(&k, false);
            }
        }
        if key.group.is_empty() && key.plural == "pods" {
            let ns = key.namespace.clone();
            let name = key.name.clone();
            self.logs.retain(|(n, p, _), _| !(*n == ns && *p == name));
        }
        Some(obj)
    }

    pub fn namespace_exists(&self, ns: &str) -> bool {
        self.objects.contains_key(&Key {
            group: String::new(),
            plural: "namespaces".to_string(),
            namespace: String::new(),
            name: ns.to_string(),
        })
    }

    /// Whether the namespace is being deleted.
    pub fn namespace_terminating(&self, ns: &str) -> bool {
        self.objects
            .get(&Key {
                group: String::new(),
                plural: "namespaces".to_string(),
                namespace: String::new(),
                name: ns.to_string(),
            })
            .is_some_and(|n| n["metadata"]["deletionTimestamp"].is_string())
    }

    /// The name of the StorageClass annotated as the default, if any.
    pub fn default_storage_class(&self) -> Option<String> {
        self.objects
            .iter()
            .filter(|(k, _)| k.group == "storage.k8s.io" && k.plural == "storageclasses")
            .find(|(_, v)| {
                v["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"].as_str()
                    == Some("true")
            })
            .map(|(k, _)| k.name.clone())
    }

    /// Events after `rv`, in order.
    pub fn events_after(&self, rv: u64) -> &[StoredEvent] {
        let start = self.events.partition_point(|e| e.rv <= rv);
        &self.events[start..]
    }
}

/// Whether `obj` lists `uid` among its ownerReferences.
pub fn owned_by(obj: &Value, uid: &str) -> bool {
    !uid.is_empty()
        && obj["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|refs| refs.iter().any(|r| r["uid"].as_str() == Some(uid)))
}

/// `batch/v1` → (`batch`, `v1`); `v1` → (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}
