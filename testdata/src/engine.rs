//! The API semantics shared by the HTTP front end, the simulated controllers and the test API:
//! create, update, patch, delete with defaulting, validation, dry-run, managedFields, and the
//! bookkeeping around a committed write (change notification, hooks, the written-objects log).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value, json};
use tokio::sync::watch;

use crate::patch;
use crate::resources::ResourceType;
use crate::rng::Rng;
use crate::scenario::{Faults, Scenario};
use crate::sim::{Flavour, JobCreated, JobEnd, RequestRecord, SimConfig};
use crate::store::{Key, State, WrittenObject};
use crate::validate;

/// An API error, answered as a `Status` object.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    pub details: Option<Value>,
    pub retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    fn with_details(mut self, details: Value) -> ApiError {
        self.details = Some(details);
        self
    }

    pub fn not_found(rt: &ResourceType, name: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{}\" not found", rt.qualified_plural(), name),
        )
        .with_details(json!({"name": name, "group": rt.group, "kind": rt.plural}))
    }

    pub fn namespace_not_found(ns: &str) -> ApiError {
        ApiError::new(404, "NotFound", format!("namespaces \"{ns}\" not found"))
            .with_details(json!({"name": ns, "kind": "namespaces"}))
    }

    pub fn already_exists(rt: &ResourceType, name: &str) -> ApiError {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{}\" already exists", rt.qualified_plural(), name),
        )
        .with_details(json!({"name": name, "group": rt.group, "kind": rt.plural}))
    }

    pub fn conflict(rt: &ResourceType, name: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                rt.qualified_plural(),
                name
            ),
        )
        .with_details(json!({"name": name, "group": rt.group, "kind": rt.plural}))
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 422 Invalid with one cause per field error, as `apierrors.NewInvalid` builds it
    /// (staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go): the message aggregates the
    /// errors (`[a, b]` when several, duplicates dropped), each cause carries the error's type
    /// as its reason, its field and its body.
    pub fn invalid(rt: &ResourceType, name: &str, problems: &[validate::FieldError]) -> ApiError {
        let kind_group = if rt.group.is_empty() {
            rt.kind.clone()
        } else {
            format!("{}.{}", rt.kind, rt.group)
        };
        let mut summary: Vec<String> = Vec::new();
        for p in problems {
            let line = p.to_string();
            if !summary.contains(&line) {
                summary.push(line);
            }
        }
        let message = if summary.len() == 1 {
            summary[0].clone()
        } else {
            format!("[{}]", summary.join(", "))
        };
        let causes: Vec<Value> = problems
            .iter()
            .map(|p| json!({"reason": p.reason, "message": p.body, "field": p.field}))
            .collect();
        ApiError::new(
            422,
            "Invalid",
            format!("{kind_group} \"{name}\" is invalid: {message}"),
        )
        .with_details(json!({"name": name, "group": rt.group, "kind": rt.kind, "causes": causes}))
    }

    pub fn status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = self.details.clone();
        if let Some(secs) = self.retry_after {
            let d = details.get_or_insert_with(|| json!({}));
            d["retryAfterSeconds"] = json!(secs);
        }
        if let Some(mut d) = details {
            // `group` is `omitempty` in metav1.StatusDetails: the core group is left out.
            if let Some(m) = d.as_object_mut()
                && m.get("group").is_some_and(|g| g == "")
            {
                m.remove("group");
            }
            status["details"] = d;
        }
        status
    }
}

/// Options of one write, from the query string (or chosen by a controller).
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    pub dry_run: bool,
    pub field_manager: Option<String>,
    /// `Strict`, `Warn` or `Ignore` (absent means `Warn` in the real server).
    pub field_validation: Option<String>,
    pub force: bool,
    pub user_agent: String,
    /// A client write (kept in the written-objects log); controllers pass `false`.
    pub from_client: bool,
}

impl WriteOpts {
    pub fn controller(manager: &str) -> WriteOpts {
        WriteOpts {
            field_manager: Some(manager.to_string()),
            user_agent: manager.to_string(),
            ..WriteOpts::default()
        }
    }

    /// The manager recorded in managedFields: the explicit one, or the user agent's program
    /// name as the real server derives it.
    fn manager(&self) -> String {
        self.field_manager.clone().unwrap_or_else(|| {
            let ua = self.user_agent.split('/').next().unwrap_or_default();
            if ua.is_empty() {
                "unknown".to_string()
            } else {
                ua.to_string()
            }
        })
    }
}

/// The successful result of a write.
#[derive(Debug, Clone)]
pub struct WriteOk {
    pub object: Value,
    pub code: u16,
    pub warnings: Vec<String>,
}

/// The patch formats, by Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// A callback run when a Job with a given step annotation is created.
pub type JobHook = Arc<dyn Fn(&JobCreated) + Send + Sync>;

/// Fault bookkeeping: the active faults, their generator and which fail-once faults fired.
pub struct FaultState {
    pub faults: Faults,
    pub rng: Rng,
    pub fired: Vec<bool>,
    /// Committed writes counted for `hold_after_write`.
    pub writes: u32,
    /// Whether a write is being held unanswered.
    pub holding: bool,
}

impl FaultState {
    pub fn new(faults: Faults) -> FaultState {
        FaultState {
            rng: Rng::new(faults.seed),
            fired: vec![false; faults.fail_once.len()],
            writes: 0,
            holding: false,
            faults,
        }
    }
}

/// Everything the server, the controllers and the test handle share.
pub struct Shared {
    pub config: SimConfig,
    pub state: Mutex<State>,
    /// Bumped after every committed change or log line: watches and log followers wait on it.
    pub changes: watch::Sender<u64>,
    pub scenario: Mutex<Scenario>,
    pub faults: Mutex<FaultState>,
    pub requests: Mutex<Vec<RequestRecord>>,
    pub request_log_file: Option<Mutex<std::fs::File>>,
    pub hooks: Mutex<Vec<(String, JobHook)>>,
    pub rng: Mutex<Rng>,
    pub token: String,
    /// The sim's CA (PEM certificate and key), also used by the built-in scenario.
    pub ca_cert_pem: String,
    /// CA certificates issued by the simulated cert-manager, by PEM, to sign with them later.
    pub issued_cas: Mutex<BTreeMap<String, rcgen::CertificateParams>>,
    pub shutdown: watch::Receiver<bool>,
    pub server_addr: Mutex<String>,
    /// The zero of [`RequestRecord::at_us`] and [`JobEnd::at_us`]: one clock for both, so a
    /// benchmark can tell how long after a Job ended a client's next request came.
    pub started: std::time::Instant,
    /// Every Job the simulated controller ended, in order.
    pub job_ends: Mutex<Vec<JobEnd>>,
}

/// Locks a mutex, ignoring poisoning: a panicking test thread must not take the simulated
/// cluster down with it.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The current Unix time in whole seconds.
pub fn now_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A Unix time as Kubernetes writes times (RFC 3339, whole seconds, UTC).
pub fn format_time(seconds: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(seconds)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// The current time as Kubernetes writes it.
pub fn now() -> String {
    format_time(now_seconds())
}

/// Whether the kind has `metadata.generation`: workloads, ingresses, CRDs and all custom
/// resources do; core objects (Secret, ConfigMap, PVC, …) do not.
pub fn tracks_generation(rt: &ResourceType) -> bool {
    matches!(
        rt.group.as_str(),
        "apps" | "batch" | "networking.k8s.io" | "apiextensions.k8s.io" | "policy"
    ) || !(rt.group.is_empty() || rt.group.ends_with(".k8s.io"))
}

/// Everything of an object except metadata and status: a change here bumps `generation`.
fn spec_part(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Value::Object(m) = &mut v {
        m.remove("metadata");
        m.remove("status");
    }
    v
}

/// Labels and annotations must be maps; k8s-openapi catches that for built-ins, this catches
/// it for custom resources too. (Their keys and values are checked in `validate`.)
fn check_metadata(obj: &Value) -> Vec<validate::FieldError> {
    let mut problems = Vec::new();
    for field in ["labels", "annotations"] {
        match &obj["metadata"][field] {
            Value::Null | Value::Object(_) => {}
            other => problems.push(validate::FieldError::invalid(
                format!("metadata.{field}"),
                validate::Bad::Raw(other.to_string()),
                "must be a map of strings",
            )),
        }
    }
    problems
}

impl Shared {
    pub fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Microseconds from the start of the cluster to `at` (0 for an earlier instant).
    pub fn micros_since_start(&self, at: std::time::Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.started).as_micros()).unwrap_or(u64::MAX)
    }

    pub fn notify_change(&self) {
        self.changes.send_modify(|c| *c = c.wrapping_add(1));
    }

    fn random_suffix(&self) -> String {
        lock(&self.rng).name_suffix(5)
    }

    fn uuid(&self) -> String {
        lock(&self.rng).uuid()
    }

    /// Decoding and validation (of an update too, with the stored object as `old`). Returns
    /// warnings (unknown fields under `Warn`). Dry-run writes pass here like any other.
    ///
    /// Unknown fields count only where the request body has them (`body`): fields the server or
    /// a controller set are not the client's doing. A JSON patch body (an array) has none.
    fn validate(
        &self,
        rt: &ResourceType,
        obj: &Value,
        opts: &WriteOpts,
        body: &Value,
        old: Option<&Value>,
    ) -> Result<Vec<String>, ApiError> {
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let unknown = match validate::decode(&rt.group, &rt.kind, obj) {
            Ok(u) => u
                .into_iter()
                .filter(|path| validate::path_present(body, path))
                .collect::<Vec<_>>(),
            Err(e) => {
                return Err(ApiError::invalid(
                    rt,
                    name,
                    &[validate::FieldError::custom(
                        "<body>",
                        "FieldValueInvalid",
                        format!(
                            "Invalid value: {} in version \"{}\" cannot be handled as a {}: {}",
                            rt.kind, rt.version, rt.kind, e
                        ),
                    )],
                ));
            }
        };
        // k8s-openapi keeps a Quantity as a string; the real decoder parses it, and a
        // malformed one fails the decoding (400), before any validation.
        if rt.group.is_empty()
            && rt.kind == "PersistentVolumeClaim"
            && let Some(q) = obj["spec"]["resources"]["requests"]["storage"].as_str()
            && validate::parse_quantity(q).is_none()
        {
            return Err(ApiError::bad_request(format!(
                "PersistentVolumeClaim in version \"{}\" cannot be handled as a \
                 PersistentVolumeClaim: {}",
                rt.version,
                validate::QUANTITY_ERROR
            )));
        }
        let mut problems = check_metadata(obj);
        let vopts = validate::Options {
            server_minor: self.config.server_minor,
        };
        problems.extend(validate::validate(&rt.group, &rt.kind, obj, old, &vopts));
        if !problems.is_empty() {
            return Err(ApiError::invalid(rt, name, &problems));
        }
        let mut warnings = Vec::new();
        if !unknown.is_empty() {
            match opts.field_validation.as_deref() {
                Some("Strict") => {
                    let problems: Vec<validate::FieldError> = unknown
                        .iter()
                        .map(|f| {
                            validate::FieldError::custom(
                                f.clone(),
                                "FieldValueInvalid",
                                "strict decoding error: unknown field".to_string(),
                            )
                        })
                        .collect();
                    return Err(ApiError::invalid(rt, name, &problems));
                }
                Some("Ignore") => {}
                _ => {
                    warnings.extend(unknown.iter().map(|f| format!("unknown field \"{f}\"")));
                }
            }
        }
        Ok(warnings)
    }

    /// A managedFields entry for this write.
    fn managed_entry(
        &self,
        rt: &ResourceType,
        opts: &WriteOpts,
        operation: &str,
        fields_from: &Value,
        subresource: Option<&str>,
    ) -> Value {
        let mut entry = json!({
            "manager": opts.manager(),
            "operation": operation,
            "apiVersion": rt.api_version(),
            "time": now(),
            "fieldsType": "FieldsV1",
            "fieldsV1": patch::fields_v1(fields_from),
        });
        if let Some(sub) = subresource {
            entry["subresource"] = json!(sub);
        }
        entry
    }

    /// Replaces the (manager, operation, subresource) entry in managedFields. An Apply owns
    /// exactly what it applied; an Update adds what it touched to what the manager owned.
    fn set_managed(obj: &mut Value, mut entry: Value) {
        let meta = &mut obj["metadata"];
        let mut list = meta["managedFields"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let key = (
            entry["manager"].clone(),
            entry["operation"].clone(),
            entry["subresource"].clone(),
        );
        let same = |e: &Value| {
            e["manager"] == key.0 && e["operation"] == key.1 && e["subresource"] == key.2
        };
        if entry["operation"] == json!("Update")
            && let Some(previous) = list.iter().find(|e| same(e))
        {
            let mut fields = previous["fieldsV1"].clone();
            patch::merge_patch(&mut fields, &entry["fieldsV1"]);
            entry["fieldsV1"] = fields;
        }
        list.retain(|e| !same(e));
        list.push(entry);
        // In the real server's order (k8s.io/apiserver, fieldmanager/internal/managedfields.go,
        // `sortEncodedManagedFields`): operation (Apply before Update), time (whole seconds:
        // RFC 3339 strings of one format compare as the times do), manager, apiVersion,
        // subresource. Appending instead reordered the list when a manager wrote again, so an
        // apply that changed nothing looked like a change after a controller's status update.
        let text = |e: &Value, k: &str| e[k].as_str().unwrap_or_default().to_owned();
        list.sort_by_key(|e| {
            ["operation", "time", "manager", "apiVersion", "subresource"].map(|k| text(e, k))
        });
        meta["managedFields"] = Value::Array(list);
    }

    /// Defaulting that happens on every write.
    fn default_always(&self, rt: &ResourceType, obj: &mut Value) {
        // The real server round-trips through Go types whose empty metadata maps and lists
        // are `omitempty`: `annotations: {}` does not survive a write.
        if let Some(meta) = obj["metadata"].as_object_mut() {
            meta.retain(|k, v| {
                let empty = v.as_object().is_some_and(|m| m.is_empty())
                    || v.as_array().is_some_and(|a| a.is_empty());
                !(empty
                    && matches!(
                        k.as_str(),
                        "labels" | "annotations" | "finalizers" | "ownerReferences"
                    ))
            });
        }
        if rt.group.is_empty() && rt.kind == "Secret" {
            if let Some(Value::Object(string_data)) =
                obj.as_object_mut().and_then(|m| m.remove("stringData"))
            {
                if !obj["data"].is_object() {
                    obj["data"] = json!({});
                }
                for (k, v) in string_data {
                    let s = v
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string());
                    obj["data"][k] = json!(B64.encode(s));
                }
            }
            if obj["type"].is_null() {
                obj["type"] = json!("Opaque");
            }
        }
        if rt.group == "apiextensions.k8s.io" && rt.kind == "CustomResourceDefinition" {
            let versions: Vec<Value> = obj["spec"]["versions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|v| v["storage"] == json!(true))
                .map(|v| v["name"].clone())
                .collect();
            obj["status"] = json!({
                "acceptedNames": obj["spec"]["names"].clone(),
                "conditions": [
                    {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                     "message": "no conflicts found", "lastTransitionTime": now()},
                    {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                     "message": "the initial names have been accepted", "lastTransitionTime": now()},
                ],
                "storedVersions": versions,
            });
        }
    }

    /// Defaulting of a new object (after metadata.uid is set).
    fn default_on_create(&self, rt: &ResourceType, obj: &mut Value, state: &State) {
        let uid = obj["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match (rt.group.as_str(), rt.kind.as_str()) {
            ("batch", "Job") => {
                let spec = &mut obj["spec"];
                if spec["manualSelector"] != json!(true) {
                    spec["selector"] =
                        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
                    let labels = &mut spec["template"]["metadata"]["labels"];
                    for (k, v) in [
                        ("batch.kubernetes.io/controller-uid", &uid),
                        ("batch.kubernetes.io/job-name", &name),
                        ("controller-uid", &uid),
                        ("job-name", &name),
                    ] {
                        labels[k] = json!(v);
                    }
                }
                for (k, v) in [
                    ("backoffLimit", json!(6)),
                    ("completions", json!(1)),
                    ("parallelism", json!(1)),
                    ("completionMode", json!("NonIndexed")),
                    ("suspend", json!(false)),
                    ("podReplacementPolicy", json!("TerminatingOrFailed")),
                    // Upstream's strategy records that the selector was generated.
                    ("manualSelector", json!(false)),
                ] {
                    if spec[k].is_null() {
                        spec[k] = v;
                    }
                }
                obj["status"] = json!({});
            }
            ("apps", "Deployment") => {
                let spec = &mut obj["spec"];
                for (k, v) in [
                    ("replicas", json!(1)),
                    ("revisionHistoryLimit", json!(10)),
                    ("progressDeadlineSeconds", json!(600)),
                    (
                        "strategy",
                        json!({"type": "RollingUpdate",
                               "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}),
                    ),
                ] {
                    if spec[k].is_null() {
                        spec[k] = v;
                    }
                }
                obj["status"] = json!({});
            }
            ("", "Service") => {
                let spec = &mut obj["spec"];
                if spec["type"].is_null() {
                    spec["type"] = json!("ClusterIP");
                }
                if spec["clusterIP"].is_null() && spec["type"] != json!("ExternalName") {
                    let n = lock(&self.rng).next_u64();
                    let ip = format!("10.43.{}.{}", (n >> 8) % 256, (n % 253) + 1);
                    spec["clusterIP"] = json!(ip);
                    spec["clusterIPs"] = json!([ip]);
                }
                for (k, v) in [
                    ("sessionAffinity", json!("None")),
                    ("ipFamilies", json!(["IPv4"])),
                    ("ipFamilyPolicy", json!("SingleStack")),
                    ("internalTrafficPolicy", json!("Cluster")),
                ] {
                    if spec[k].is_null() {
                        spec[k] = v;
                    }
                }
                for port in spec["ports"].as_array_mut().into_iter().flatten() {
                    if port["protocol"].is_null() {
                        port["protocol"] = json!("TCP");
                    }
                    if port["targetPort"].is_null() {
                        port["targetPort"] = port["port"].clone();
                    }
                }
                let external = matches!(spec["type"].as_str(), Some("LoadBalancer" | "NodePort"));
                if external {
                    // As the API server: node ports for every port, the Cluster policy by
                    // default, and a health check port for Local LoadBalancers.
                    if spec["externalTrafficPolicy"].is_null() {
                        spec["externalTrafficPolicy"] = json!("Cluster");
                    }
                    for port in spec["ports"].as_array_mut().into_iter().flatten() {
                        if port["nodePort"].is_null() {
                            port["nodePort"] = json!(30000 + lock(&self.rng).next_u64() % 2768);
                        }
                    }
                    if spec["type"] == json!("LoadBalancer") {
                        if spec["allocateLoadBalancerNodePorts"].is_null() {
                            spec["allocateLoadBalancerNodePorts"] = json!(true);
                        }
                        if spec["externalTrafficPolicy"] == json!("Local")
                            && spec["healthCheckNodePort"].is_null()
                        {
                            spec["healthCheckNodePort"] =
                                json!(30000 + lock(&self.rng).next_u64() % 2768);
                        }
                    }
                }
                if spec["sessionAffinity"] == json!("ClientIP")
                    && spec["sessionAffinityConfig"].is_null()
                {
                    spec["sessionAffinityConfig"] = json!({"clientIP": {"timeoutSeconds": 10800}});
                }
                if spec["type"] == json!("LoadBalancer") && self.config.flavour == Flavour::K3s {
                    // k3s's ServiceLB gives LoadBalancers the node's IP at once; RKE2 (ServiceLB
                    // off by default) and a plain cluster have no LoadBalancer implementation,
                    // so the address stays pending there.
                    obj["status"] = json!({"loadBalancer": {"ingress": [{"ip": crate::cluster::NODE_IP, "ipMode": "VIP"}]}});
                } else {
                    obj["status"] = json!({"loadBalancer": {}});
                }
            }
            ("", "PersistentVolumeClaim") => {
                if obj["spec"]["storageClassName"].is_null()
                    && let Some(sc) = state.default_storage_class()
                {
                    obj["spec"]["storageClassName"] = json!(sc);
                }
                if obj["spec"]["volumeMode"].is_null() {
                    obj["spec"]["volumeMode"] = json!("Filesystem");
                }
                obj["status"] = json!({"phase": "Pending"});
            }
            ("", "Namespace") => {
                obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
                obj["spec"] = json!({"finalizers": ["kubernetes"]});
                obj["status"] = json!({"phase": "Active"});
            }
            ("", "Pod") if obj["status"].is_null() => {
                obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
            }
            _ => {}
        }
    }

    /// Creates an object (POST to a collection).
    pub fn create(
        &self,
        rt: &ResourceType,
        namespace: &str,
        body: Value,
        opts: &WriteOpts,
        apply: bool,
    ) -> Result<WriteOk, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request must be an object",
            ));
        }
        let mut obj = body.clone();
        self.check_type_meta(rt, &mut obj)?;
        if rt.namespaced {
            // An empty namespace (protobuf bodies always carry the field) means "unset".
            if let Some(ns) = obj["metadata"]["namespace"].as_str()
                && !ns.is_empty()
                && ns != namespace
            {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace \
                         sent on the request",
                ));
            }
        } else if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove("namespace");
        }
        let state = self.state();
        self.create_in(rt, namespace, body, obj, opts, apply, state)
    }

    #[allow(clippy::too_many_arguments)]
    fn create_in(
        &self,
        rt: &ResourceType,
        namespace: &str,
        body: Value,
        mut obj: Value,
        opts: &WriteOpts,
        apply: bool,
        mut state: MutexGuard<'_, State>,
    ) -> Result<WriteOk, ApiError> {
        if rt.namespaced {
            obj["metadata"]["namespace"] = json!(namespace);
            if !state.namespace_exists(namespace) {
                return Err(ApiError::namespace_not_found(namespace));
            }
            if state.namespace_terminating(namespace) {
                let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                return Err(ApiError::new(
                    403,
                    "Forbidden",
                    format!(
                        "{} \"{name}\" is forbidden: unable to create new content in namespace \
                         {namespace} because it is being terminated",
                        rt.qualified_plural()
                    ),
                )
                .with_details(
                    json!({"name": name, "group": rt.group, "kind": rt.plural, "causes": [{
                    "reason": "NamespaceTerminating",
                    "message": format!("namespace {namespace} is being terminated"),
                    "field": "metadata.namespace"}]}),
                ));
            }
        }
        let name = match (
            obj["metadata"]["name"].as_str(),
            obj["metadata"]["generateName"].as_str(),
        ) {
            (Some(n), _) if !n.is_empty() => n.to_string(),
            (_, Some(prefix)) if !prefix.is_empty() => {
                format!("{prefix}{}", self.random_suffix())
            }
            _ => {
                return Err(ApiError::invalid(
                    rt,
                    "",
                    &[validate::FieldError::required(
                        "metadata.name",
                        "name or generateName is required",
                    )],
                ));
            }
        };
        obj["metadata"]["name"] = json!(name);
        let key = Key::new(rt, namespace, &name);
        if state.get(&key).is_some() {
            return Err(ApiError::already_exists(rt, &name));
        }
        {
            let meta = &mut obj["metadata"];
            meta["uid"] = json!(self.uuid());
            meta["creationTimestamp"] = json!(now());
            if tracks_generation(rt) {
                meta["generation"] = json!(1);
            } else if let Some(m) = meta.as_object_mut() {
                m.remove("generation");
            }
            if let Some(m) = meta.as_object_mut() {
                m.remove("resourceVersion");
                m.remove("managedFields");
                m.remove("deletionTimestamp");
            }
        }
        self.default_always(rt, &mut obj);
        self.default_on_create(rt, &mut obj, &state);
        // Managed fields come from what the client sent: what the server adds when it
        // prepares a new object (Job selector labels, status) belongs to no manager.
        let operation = if apply { "Apply" } else { "Update" };
        let entry = self.managed_entry(rt, opts, operation, &body, None);
        Self::set_managed(&mut obj, entry);
        let warnings = self.validate(rt, &obj, opts, &body, None)?;
        if opts.dry_run {
            return Ok(WriteOk {
                object: obj,
                code: 201,
                warnings,
            });
        }
        let stored = state.put(key, obj);
        if rt.kind == "CustomResourceDefinition" {
            for t in ResourceType::from_crd(&stored) {
                if state.find_type(&t.group, &t.version, &t.plural).is_none() {
                    state.types.push(t);
                }
            }
        }
        let attempt = if rt.group == "batch" && rt.kind == "Job" {
            stored["metadata"]["annotations"]["kubectl-uyuni.io/step"]
                .as_str()
                .map(|step| {
                    let counter = state
                        .job_attempts
                        .entry(format!("{namespace}/{step}"))
                        .or_insert(0);
                    *counter += 1;
                    (step.to_string(), *counter - 1)
                })
        } else {
            None
        };
        if let Some((_, n)) = &attempt {
            let uid = stored["metadata"]["uid"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            state.job_attempt_of.insert(uid, *n);
        }
        if opts.from_client {
            state.written.push(WrittenObject {
                verb: if apply { "patch" } else { "create" }.to_string(),
                body,
                object: stored.clone(),
            });
        }
        drop(state);
        self.notify_change();
        if let Some((step, attempt)) = attempt {
            self.fire_job_hooks(&JobCreated {
                step,
                namespace: namespace.to_string(),
                name: name.clone(),
                uid: stored["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                attempt,
            });
        }
        Ok(WriteOk {
            object: stored,
            code: 201,
            warnings,
        })
    }

    /// apiVersion and kind must match the URL when present, and are filled in when absent.
    fn check_type_meta(&self, rt: &ResourceType, obj: &mut Value) -> Result<(), ApiError> {
        if let Some(av) = obj["apiVersion"].as_str()
            && av != rt.api_version()
        {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({av}) does not match the expected API version \
                     ({})",
                rt.api_version()
            )));
        }
        if let Some(kind) = obj["kind"].as_str()
            && kind != rt.kind
        {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                rt.kind
            )));
        }
        obj["apiVersion"] = json!(rt.api_version());
        obj["kind"] = json!(rt.kind);
        if !obj["metadata"].is_object() {
            obj["metadata"] = json!({});
        }
        Ok(())
    }

    fn fire_job_hooks(&self, job: &JobCreated) {
        let hooks: Vec<JobHook> = lock(&self.hooks)
            .iter()
            .filter(|(step, _)| step == &job.step || step == "*")
            .map(|(_, h)| h.clone())
            .collect();
        for hook in hooks {
            hook(job);
        }
    }

    /// Replaces an object (PUT), or, with `subresource` `status`, only its status.
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        subresource: Option<&str>,
        body: Value,
        opts: &WriteOpts,
    ) -> Result<WriteOk, ApiError> {
        let state = self.state();
        let key = Key::new(rt, namespace, name);
        let Some(existing) = state.get(&key).cloned() else {
            return Err(ApiError::not_found(rt, name));
        };
        let mut incoming = body.clone();
        if subresource == Some("scale") {
            incoming = scale_to_object(&existing, &body)?;
        } else {
            self.check_type_meta(rt, &mut incoming)?;
        }
        self.commit_update(
            rt,
            key,
            existing,
            incoming,
            body,
            subresource,
            opts,
            "Update",
            "update",
            state,
        )
    }

    /// The common tail of update and patch: preconditions, immutable fields, status handling,
    /// defaulting, validation, dry-run, commit.
    #[allow(clippy::too_many_arguments)]
    fn commit_update(
        &self,
        rt: &ResourceType,
        key: Key,
        existing: Value,
        mut obj: Value,
        body: Value,
        subresource: Option<&str>,
        opts: &WriteOpts,
        operation: &str,
        verb: &str,
        mut state: MutexGuard<'_, State>,
    ) -> Result<WriteOk, ApiError> {
        let name = key.name.clone();
        if let Some(n) = obj["metadata"]["name"].as_str()
            && n != name
        {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({n}) does not match the name on the URL ({name})"
            )));
        }
        if let Some(rv) = obj["metadata"]["resourceVersion"].as_str()
            && !rv.is_empty()
            && Some(rv) != existing["metadata"]["resourceVersion"].as_str()
        {
            return Err(ApiError::conflict(rt, &name));
        }
        let has_status_sub = rt.subresources.iter().any(|s| s == "status");
        if subresource == Some("status") {
            let status = obj["status"].clone();
            obj = existing.clone();
            obj["status"] = status;
        } else if has_status_sub {
            obj["status"] = existing["status"].clone();
        }
        // Server-owned metadata survives every write.
        for field in [
            "uid",
            "creationTimestamp",
            "namespace",
            "name",
            "generation",
            "deletionTimestamp",
        ] {
            obj["metadata"][field] = existing["metadata"][field].clone();
        }
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.retain(|_, v| !v.is_null());
        }
        if obj["metadata"]["managedFields"].is_null() {
            obj["metadata"]["managedFields"] = existing["metadata"]["managedFields"].clone();
        }
        if let Value::Object(m) = &mut obj {
            m.retain(|_, v| !v.is_null());
        }
        if rt.group.is_empty() && rt.kind == "Service" && obj["spec"]["clusterIP"].is_null() {
            obj["spec"]["clusterIP"] = existing["spec"]["clusterIP"].clone();
            obj["spec"]["clusterIPs"] = existing["spec"]["clusterIPs"].clone();
        }
        self.default_always(rt, &mut obj);
        if tracks_generation(rt) && spec_part(&obj) != spec_part(&existing) {
            let generation = existing["metadata"]["generation"].as_i64().unwrap_or(1);
            obj["metadata"]["generation"] = json!(generation + 1);
        }
        let entry = self.managed_entry(rt, opts, operation, &body, subresource);
        Self::set_managed(&mut obj, entry);
        let warnings = self.validate(rt, &obj, opts, &body, Some(&existing))?;
        if opts.dry_run {
            return Ok(WriteOk {
                object: obj,
                code: 200,
                warnings,
            });
        }
        // An unchanged object keeps its resourceVersion and sends no event, as in Kubernetes;
        // a managedFields change counts, except for its timestamps.
        let without_times = |v: &Value| {
            let mut v = v.clone();
            for e in v["metadata"]["managedFields"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                if let Some(m) = e.as_object_mut() {
                    m.remove("time");
                }
            }
            v["metadata"]["resourceVersion"] = Value::Null;
            v
        };
        let stored = if without_times(&obj) == without_times(&existing) {
            existing
        } else {
            let stored = state.put(key, obj);
            if opts.from_client {
                state.written.push(WrittenObject {
                    verb: verb.to_string(),
                    body,
                    object: stored.clone(),
                });
            }
            stored
        };
        drop(state);
        self.notify_change();
        let object = if subresource == Some("scale") {
            object_to_scale(&stored)
        } else {
            stored
        };
        Ok(WriteOk {
            object,
            code: 200,
            warnings,
        })
    }

    /// Patches an object (PATCH). Server-side apply creates it when absent (201).
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        subresource: Option<&str>,
        patch_type: PatchType,
        body: Value,
        opts: &WriteOpts,
    ) -> Result<WriteOk, ApiError> {
        if patch_type == PatchType::Apply {
            if opts.field_manager.as_deref().is_none_or(str::is_empty) {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is \
                     required for apply patch",
                ));
            }
            if !body.is_object() {
                return Err(ApiError::bad_request("the apply patch must be an object"));
            }
            if body["metadata"]["name"].as_str().is_some_and(|n| n != name) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    body["metadata"]["name"].as_str().unwrap_or_default()
                )));
            }
        }
        let state = self.state();
        let key = Key::new(rt, namespace, name);
        let Some(existing) = state.get(&key).cloned() else {
            if patch_type == PatchType::Apply && subresource.is_none() {
                let mut body = body;
                body["metadata"]["name"] = json!(name);
                let mut obj = body.clone();
                self.check_type_meta(rt, &mut obj)?;
                return self.create_in(rt, namespace, body, obj, opts, true, state);
            }
            return Err(ApiError::not_found(rt, name));
        };
        let base = if subresource == Some("scale") {
            object_to_scale(&existing)
        } else {
            existing.clone()
        };
        let mut patched = base.clone();
        match patch_type {
            PatchType::Merge => patch::merge_patch(&mut patched, &body),
            PatchType::Strategic => {
                if rt.group.contains('.') && !rt.group.ends_with(".k8s.io") {
                    // Custom resources do not support strategic merge patch.
                    return Err(ApiError::new(
                        415,
                        "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted media \
                         types include: application/json-patch+json, \
                         application/merge-patch+json, application/apply-patch+yaml",
                    ));
                }
                patch::strategic_merge_patch(&mut patched, &body)
            }
            PatchType::Json => {
                patch::json_patch(&mut patched, &body)
                    .map_err(|e| ApiError::new(422, "Invalid", e))?;
            }
            PatchType::Apply => {
                let manager = opts.field_manager.clone().unwrap_or_default();
                if !opts.force {
                    let conflicts = patch::apply_conflicts(&existing, &body, &manager, subresource);
                    if !conflicts.is_empty() {
                        let list: Vec<String> = conflicts
                            .iter()
                            .map(|(m, p)| format!("conflict with \"{m}\": {p}"))
                            .collect();
                        let causes: Vec<Value> = conflicts
                            .iter()
                            .map(|(m, p)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\""), "field": p}))
                            .collect();
                        let plural = if list.len() == 1 { "" } else { "s" };
                        let mut e = ApiError::new(
                            409,
                            "Conflict",
                            format!(
                                "Apply failed with {} conflict{plural}: {}",
                                list.len(),
                                list.join("\n")
                            ),
                        );
                        // Upstream's apply conflict (`internal.NewConflictError`) names
                        // no object in its details, only the causes.
                        e.details = Some(json!({"causes": causes}));
                        return Err(e);
                    }
                }
                let previous = existing["metadata"]["managedFields"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|e| {
                        e["manager"].as_str() == Some(manager.as_str())
                            && e["operation"] == json!("Apply")
                            && e["subresource"].as_str() == subresource
                    })
                    .map(|e| e["fieldsV1"].clone());
                if let Some(previous) = previous {
                    patch::remove_dropped_fields(&mut patched, &previous, &patch::fields_v1(&body));
                }
                if opts.force {
                    patch::take_over_conflicts(
                        &mut patched,
                        &existing,
                        &body,
                        &manager,
                        subresource,
                    );
                }
                let mut body_clean = body.clone();
                if let Some(m) = body_clean["metadata"].as_object_mut() {
                    m.remove("managedFields");
                }
                patch::strategic_merge_patch(&mut patched, &body_clean);
            }
        }
        let obj = if subresource == Some("scale") {
            scale_to_object(&existing, &patched)?
        } else {
            patched
        };
        let operation = if patch_type == PatchType::Apply {
            "Apply"
        } else {
            "Update"
        };
        self.commit_update(
            rt,
            key,
            existing,
            obj,
            body,
            subresource,
            opts,
            operation,
            "patch",
            state,
        )
    }

    /// Deletes an object (DELETE) and its dependents (unless `Orphan`).
    pub fn delete(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        propagation: Option<&str>,
        precondition_rv: Option<&str>,
        opts: &WriteOpts,
    ) -> Result<WriteOk, ApiError> {
        let mut state = self.state();
        let key = Key::new(rt, namespace, name);
        let Some(existing) = state.get(&key).cloned() else {
            return Err(ApiError::not_found(rt, name));
        };
        if let Some(rv) = precondition_rv
            && Some(rv) != existing["metadata"]["resourceVersion"].as_str()
        {
            return Err(ApiError::conflict(rt, name));
        }
        if opts.dry_run {
            return Ok(WriteOk {
                object: existing,
                code: 200,
                warnings: Vec::new(),
            });
        }
        if rt.group.is_empty() && rt.kind == "Namespace" {
            // A namespace terminates first; the namespace controller removes its contents and
            // then the namespace itself, a moment later.
            if existing["metadata"]["deletionTimestamp"].is_string() {
                return Ok(WriteOk {
                    object: existing,
                    code: 200,
                    warnings: Vec::new(),
                });
            }
            let mut terminating = existing;
            terminating["metadata"]["deletionTimestamp"] = json!(now());
            terminating["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            terminating["status"]["phase"] = json!("Terminating");
            let stored = state.put(key, terminating);
            if opts.from_client {
                state.written.push(WrittenObject {
                    verb: "delete".to_string(),
                    body: Value::Null,
                    object: stored.clone(),
                });
            }
            drop(state);
            self.notify_change();
            return Ok(WriteOk {
                object: stored,
                code: 200,
                warnings: Vec::new(),
            });
        }
        let removed = state
            .remove(&key, propagation == Some("Orphan"))
            .unwrap_or(existing);
        if rt.kind == "CustomResourceDefinition" {
            let group = removed["spec"]["group"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let plural = removed["spec"]["names"]["plural"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            state
                .types
                .retain(|t| !(t.group == group && t.plural == plural));
            let instances: Vec<Key> = state
                .objects
                .keys()
                .filter(|k| k.group == group && k.plural == plural)
                .cloned()
                .collect();
            for k in instances {
                state.remove(&k, false);
            }
        }
        if opts.from_client {
            state.written.push(WrittenObject {
                verb: "delete".to_string(),
                body: Value::Null,
                object: removed.clone(),
            });
        }
        drop(state);
        self.notify_change();
        Ok(WriteOk {
            object: removed,
            code: 200,
            warnings: Vec::new(),
        })
    }

    /// Writes a controller's change to an object that exists (a status update, a label): a
    /// read-modify-write under the lock, with no validation or client bookkeeping. Returns the
    /// stored object, or `None` if it no longer exists (or `uid` no longer matches).
    pub fn modify(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        uid: Option<&str>,
        manager: &str,
        f: impl FnOnce(&mut Value),
    ) -> Option<Value> {
        let mut state = self.state();
        let key = Key::new(rt, namespace, name);
        let existing = state.get(&key)?.clone();
        if uid.is_some_and(|u| existing["metadata"]["uid"].as_str() != Some(u)) {
            return None;
        }
        let mut obj = existing.clone();
        f(&mut obj);
        if obj == existing {
            return Some(existing);
        }
        if tracks_generation(rt)
            && spec_part(&obj) != spec_part(&existing)
            && obj["status"] == existing["status"]
        {
            let generation = existing["metadata"]["generation"].as_i64().unwrap_or(1);
            obj["metadata"]["generation"] = json!(generation + 1);
        }
        let subresource = (obj["status"] != existing["status"]).then_some("status");
        let rt_opts = WriteOpts::controller(manager);
        let mut fields = Map::new();
        if subresource.is_some() {
            fields.insert("status".to_string(), obj["status"].clone());
        }
        let entry = self.managed_entry(rt, &rt_opts, "Update", &Value::Object(fields), subresource);
        Self::set_managed(&mut obj, entry);
        let stored = state.put(key, obj);
        drop(state);
        self.notify_change();
        Some(stored)
    }

    /// Creates an object as a controller would: no validation, no client bookkeeping.
    pub fn create_internal(
        &self,
        rt: &ResourceType,
        namespace: &str,
        obj: Value,
        manager: &str,
    ) -> Option<Value> {
        let opts = WriteOpts::controller(manager);
        self.create(rt, namespace, obj, &opts, false)
            .ok()
            .map(|w| w.object)
    }

    /// Type lookup by apiVersion and kind (or plural).
    pub fn type_for(&self, api_version: &str, kind: &str) -> Option<ResourceType> {
        self.state().type_for(api_version, kind)
    }

    /// Removes a terminating namespace and everything in it (the namespace controller's job).
    pub fn finalize_namespace(&self, name: &str) {
        let key = Key {
            group: String::new(),
            plural: "namespaces".to_string(),
            namespace: String::new(),
            name: name.to_string(),
        };
        {
            let mut state = self.state();
            if !state.namespace_terminating(name) {
                return;
            }
            state.remove(&key, false);
        }
        self.notify_change();
    }

    /// Appends lines to a container's log (and wakes followers).
    pub fn append_log(&self, ns: &str, pod: &str, container: &str, lines: &[String], done: bool) {
        {
            let mut state = self.state();
            let log = state
                .logs
                .entry((ns.to_string(), pod.to_string(), container.to_string()))
                .or_default();
            log.lines.extend(lines.iter().cloned());
            log.done |= done;
        }
        self.notify_change();
    }
}

/// A Deployment (or anything with spec.replicas) as an `autoscaling/v1` Scale.
pub fn object_to_scale(obj: &Value) -> Value {
    let selector = obj["spec"]["selector"]["matchLabels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"]["namespace"],
            "uid": obj["metadata"]["uid"],
            "resourceVersion": obj["metadata"]["resourceVersion"],
            "creationTimestamp": obj["metadata"]["creationTimestamp"],
        },
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(0)},
        "status": {"replicas": obj["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector},
    })
}

/// Applies a Scale's spec.replicas to the object it scales.
fn scale_to_object(existing: &Value, scale: &Value) -> Result<Value, ApiError> {
    let replicas = scale["spec"]["replicas"]
        .as_i64()
        .ok_or_else(|| ApiError::bad_request("Scale spec.replicas must be an integer"))?;
    let mut obj = existing.clone();
    obj["spec"]["replicas"] = json!(replicas);
    if let Some(rv) = scale["metadata"]["resourceVersion"].as_str() {
        obj["metadata"]["resourceVersion"] = json!(rv);
    }
    Ok(obj)
}
