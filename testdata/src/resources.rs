//! The resource types the simulated API server knows: the built-in ones from a table, custom ones
//! from CustomResourceDefinitions (read from files at start, or POSTed by a client).

use serde_json::{Value, json};

/// One served resource (a plural of a group/version), as discovery describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Subresources served: `status`, `scale`, `log`.
    pub subresources: Vec<String>,
    /// Only `create` (SelfSubjectAccessReview, SelfSubjectRulesReview): nothing is stored.
    pub create_only: bool,
}

impl ResourceType {
    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `jobs.batch`, or `pods` for the core group: how Status messages name a resource.
    pub fn qualified_plural(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The URL prefix of the collection, without namespace: `/api/v1` or `/apis/g/v`.
    pub fn gv_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    pub fn verbs(&self) -> Vec<&'static str> {
        if self.create_only {
            vec!["create"]
        } else {
            vec![
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ]
        }
    }

    /// Matches a name as kubectl would type it: plural, singular, kind or short name,
    /// case-insensitively.
    pub fn matches_name(&self, name: &str) -> bool {
        self.plural.eq_ignore_ascii_case(name)
            || self.singular.eq_ignore_ascii_case(name)
            || self.kind.eq_ignore_ascii_case(name)
            || self
                .short_names
                .iter()
                .any(|s| s.eq_ignore_ascii_case(name))
    }

    /// Builds the type from a CustomResourceDefinition object, one per served version.
    pub fn from_crd(crd: &Value) -> Vec<ResourceType> {
        let spec = &crd["spec"];
        let names = &spec["names"];
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let kind = names["kind"].as_str().unwrap_or_default().to_string();
        let plural = names["plural"].as_str().unwrap_or_default().to_string();
        let singular = names["singular"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_ascii_lowercase());
        let mut out = Vec::new();
        for version in spec["versions"].as_array().into_iter().flatten() {
            if version["served"] == Value::Bool(false) {
                continue;
            }
            let mut subresources = Vec::new();
            if version["subresources"].get("status").is_some() {
                subresources.push("status".to_string());
            }
            if version["subresources"].get("scale").is_some() {
                subresources.push("scale".to_string());
            }
            out.push(ResourceType {
                group: spec["group"].as_str().unwrap_or_default().to_string(),
                version: version["name"].as_str().unwrap_or_default().to_string(),
                kind: kind.clone(),
                plural: plural.clone(),
                singular: singular.clone(),
                namespaced: spec["scope"].as_str() != Some("Cluster"),
                short_names: strings(&names["shortNames"]),
                categories: strings(&names["categories"]),
                subresources,
                create_only: false,
            });
        }
        out
    }

    /// The legacy discovery entry (`APIResource`) plus one per subresource.
    pub fn api_resources(&self) -> Vec<Value> {
        let mut main = json!({
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": self.verbs(),
        });
        if !self.short_names.is_empty() {
            main["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            main["categories"] = json!(self.categories);
        }
        let mut out = vec![main];
        for sub in &self.subresources {
            let (kind, verbs, group, version) = match sub.as_str() {
                "scale" => ("Scale", vec!["get", "patch", "update"], "autoscaling", "v1"),
                "log" => ("Pod", vec!["get"], "", ""),
                _ => (self.kind.as_str(), vec!["get", "patch", "update"], "", ""),
            };
            let mut entry = json!({
                "name": format!("{}/{}", self.plural, sub),
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if !group.is_empty() {
                entry["group"] = json!(group);
                entry["version"] = json!(version);
            }
            out.push(entry);
        }
        out
    }

    /// The aggregated discovery (`apidiscovery.k8s.io`) entry.
    pub fn aggregated_resource(&self) -> Value {
        let mut entry = json!({
            "resource": self.plural,
            "responseKind": {"group": self.group, "version": self.version, "kind": self.kind},
            "scope": if self.namespaced { "Namespaced" } else { "Cluster" },
            "singularResource": self.singular,
            "verbs": self.verbs(),
        });
        if !self.short_names.is_empty() {
            entry["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            entry["categories"] = json!(self.categories);
        }
        let subs: Vec<Value> = self
            .subresources
            .iter()
            .map(|sub| {
                let (group, version, kind, verbs) = match sub.as_str() {
                    "scale" => ("autoscaling", "v1", "Scale", vec!["get", "patch", "update"]),
                    "log" => ("", "v1", "Pod", vec!["get"]),
                    _ => (
                        self.group.as_str(),
                        self.version.as_str(),
                        self.kind.as_str(),
                        vec!["get", "patch", "update"],
                    ),
                };
                json!({
                    "subresource": sub,
                    "responseKind": {"group": group, "version": version, "kind": kind},
                    "verbs": verbs,
                })
            })
            .collect();
        if !subs.is_empty() {
            entry["subresources"] = Value::Array(subs);
        }
        entry
    }
}

/// Shorthand for the built-in table below.
fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short: &[&str],
    subresources: &[&str],
) -> ResourceType {
    ResourceType {
        group: group.to_string(),
        version: version.to_string(),
        kind: kind.to_string(),
        plural: plural.to_string(),
        singular: kind.to_ascii_lowercase(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        subresources: subresources.iter().map(|s| s.to_string()).collect(),
        create_only: false,
    }
}

/// The built-in resources this simulation serves (a subset of Kubernetes 1.33's).
pub fn builtin_resources() -> Vec<ResourceType> {
    let mut all = vec![
        builtin(
            "",
            "v1",
            "Namespace",
            "namespaces",
            false,
            &["ns"],
            &["status"],
        ),
        builtin("", "v1", "ConfigMap", "configmaps", true, &["cm"], &[]),
        builtin("", "v1", "Secret", "secrets", true, &[], &[]),
        builtin("", "v1", "Service", "services", true, &["svc"], &["status"]),
        builtin(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            &["sa"],
            &[],
        ),
        builtin(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
            &["pvc"],
            &["status"],
        ),
        builtin(
            "",
            "v1",
            "PersistentVolume",
            "persistentvolumes",
            false,
            &["pv"],
            &["status"],
        ),
        builtin("", "v1", "Pod", "pods", true, &["po"], &["status", "log"]),
        builtin("", "v1", "Node", "nodes", false, &["no"], &["status"]),
        builtin("", "v1", "Event", "events", true, &["ev"], &[]),
        builtin(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            true,
            &["deploy"],
            &["status", "scale"],
        ),
        builtin("batch", "v1", "Job", "jobs", true, &[], &["status"]),
        builtin(
            "networking.k8s.io",
            "v1",
            "Ingress",
            "ingresses",
            true,
            &["ing"],
            &["status"],
        ),
        builtin(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
            true,
            &["netpol"],
            &[],
        ),
        builtin(
            "networking.k8s.io",
            "v1",
            "IngressClass",
            "ingressclasses",
            false,
            &[],
            &[],
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "roles",
            true,
            &[],
            &[],
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            true,
            &[],
            &[],
        ),
        builtin(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            true,
            &[],
            &[],
        ),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            &["status"],
        ),
        builtin(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            false,
            &["sc"],
            &[],
        ),
    ];
    let mut ssar = builtin(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectAccessReview",
        "selfsubjectaccessreviews",
        false,
        &[],
        &[],
    );
    ssar.create_only = true;
    all.push(ssar);
    let mut ssrr = builtin(
        "authorization.k8s.io",
        "v1",
        "SelfSubjectRulesReview",
        "selfsubjectrulesreviews",
        false,
        &[],
        &[],
    );
    ssrr.create_only = true;
    all.push(ssrr);
    // kubectl's `all` category covers only workloads and services.
    for r in &mut all {
        if matches!(
            r.plural.as_str(),
            "pods" | "services" | "deployments" | "jobs"
        ) {
            r.categories = vec!["all".to_string()];
        }
    }
    all
}

/// The group/versions in discovery order: core first, then groups in the order first seen.
pub fn group_versions(types: &[ResourceType]) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for t in types {
        match out.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, versions)) => {
                if !versions.contains(&t.version) {
                    versions.push(t.version.clone());
                }
            }
            None => out.push((t.group.clone(), vec![t.version.clone()])),
        }
    }
    out
}
