//! The test handle: [`SimCluster`] starts the simulated API server and lets a test look inside.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::certs::ServerPki;
use crate::engine::{ApiError, FaultState, Shared, WriteOpts, lock, now};
use crate::resources::{ResourceType, builtin_resources};
use crate::rng::Rng;
use crate::scenario::{Faults, Scenario};
use crate::store::{Key, State, WrittenObject};

/// The kind of cluster to imitate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Flavour {
    /// Traefik CRDs and IngressClass `traefik` (plus k3s's HelmChartConfig CRD).
    #[default]
    K3s,
    /// IngressClass `nginx` and the HelmChartConfig CRD.
    Rke2,
    /// No ingress class, no distribution CRDs.
    Plain,
}

impl std::str::FromStr for Flavour {
    type Err = String;
    fn from_str(s: &str) -> Result<Flavour, String> {
        match s {
            "k3s" => Ok(Flavour::K3s),
            "rke2" => Ok(Flavour::Rke2),
            "plain" => Ok(Flavour::Plain),
            other => Err(format!("unknown flavour {other:?} (k3s, rke2 or plain)")),
        }
    }
}

/// How to start a simulated cluster.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub flavour: Flavour,
    /// cert-manager's CRDs, its Deployments in namespace `cert-manager`, and its controller.
    pub cert_manager: bool,
    /// StorageClass `local-path` is annotated as the default.
    pub default_storage_class: bool,
    /// The minor version `/version` reports (the kubectl dispatcher picks its kubectl by it).
    pub server_minor: u32,
    pub scenario: Scenario,
    /// Replaces `scenario.faults` when not the default.
    pub faults: Faults,
    /// The namespace of the kubeconfig's context, if any.
    pub namespace: Option<String>,
    /// Where to write `kubeconfig`; a temp dir owned by the SimCluster when `None`.
    pub dir: Option<PathBuf>,
    /// 0 picks a free port.
    pub port: u16,
    /// Also append the request log to this file, one JSON object per line.
    pub request_log_file: Option<PathBuf>,
    /// Where the upstream CRD files are; see [`crate::cluster::default_crds_dir`].
    pub crds_dir: Option<PathBuf>,
    /// Objects the cluster already has at start, stored as given (status included, defaults
    /// for uid/timestamps filled in, missing namespaces created). Controllers do not act on
    /// them: they react to changes after the start.
    pub objects: Vec<Value>,
    /// Seeds generated names and uids.
    pub seed: u64,
    /// (verb, resource) pairs a `SelfSubjectAccessReview` answers `allowed: false` for, in
    /// every namespace (`("create", "jobs")`, `("get", "pods/log")` for a subresource);
    /// everything else is allowed. Only the reviews
    /// answer so: the requests themselves are not refused.
    pub denied_access: Vec<(String, String)>,
    /// Added before the answer to every resource request, watches' setup included; replaces
    /// the faults' `latency_ms` when set. Models a remote API server (`uyuni-sim --latency`).
    pub latency_ms: Option<u64>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            flavour: Flavour::K3s,
            cert_manager: true,
            default_storage_class: true,
            server_minor: 33,
            scenario: Scenario::default(),
            faults: Faults::default(),
            namespace: None,
            dir: None,
            port: 0,
            request_log_file: None,
            crds_dir: None,
            objects: Vec::new(),
            seed: 1,
            denied_access: Vec::new(),
            latency_ms: None,
        }
    }
}

/// One request the server received.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub seq: u64,
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: Option<String>,
    pub accept: Option<String>,
    pub user_agent: Option<String>,
    /// 0 when the connection was dropped without an answer.
    pub status: u16,
    /// POST/PUT/PATCH/DELETE of a resource without `dryRun` (SelfSubjectAccessReviews, which
    /// store nothing, excepted). Failed writes count too: check `status`.
    pub write: bool,
    pub dry_run: bool,
    /// The Kubernetes verb (`get`, `list`, `watch`, `create`, …) of resource requests.
    pub verb: Option<String>,
    pub group: Option<String>,
    /// Plural, with the subresource: `jobs`, `pods/log`, `deployments/scale`.
    pub resource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    /// The injected fault, if any: `drop` or `status 503`.
    pub fault: Option<String>,
    pub authenticated: bool,
    pub duration_ms: u64,
    /// When the request arrived (before any injected latency), in microseconds since the
    /// cluster started: the clock of [`JobEnd::at_us`].
    #[serde(default)]
    pub at_us: u64,
}

impl RequestRecord {
    /// The request's class for counting round trips: `GET`, `LIST`, `WATCH`, `CREATE/PATCH`
    /// (create, update, patch), `DELETE` (delete, deletecollection) for resource requests,
    /// `OTHER` for the rest (`/version`, discovery, OpenAPI).
    pub fn verb_class(&self) -> &'static str {
        match self.verb.as_deref() {
            Some("get") => "GET",
            Some("list") => "LIST",
            Some("watch") => "WATCH",
            Some("create" | "update" | "patch") => "CREATE/PATCH",
            Some("delete" | "deletecollection") => "DELETE",
            _ => "OTHER",
        }
    }

    /// A write that succeeded.
    pub fn is_successful_write(&self) -> bool {
        self.write && (200..300).contains(&self.status)
    }
}

/// A Job of a given step was created (the argument of job hooks).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobCreated {
    pub step: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    /// 0 for the step's first Job in the namespace, 1 for the second…
    pub attempt: usize,
}

/// A Job the simulated Job controller ended (see [`SimCluster::job_ends`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobEnd {
    pub namespace: String,
    pub name: String,
    pub succeeded: bool,
    /// When its final status was written, in microseconds since the cluster started (the clock
    /// of [`RequestRecord::at_us`]); watchers see it from then on.
    pub at_us: u64,
}

/// Why the simulated cluster could not start or do what was asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimError(pub String);

impl std::fmt::Display for SimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SimError {}

impl From<ApiError> for SimError {
    fn from(e: ApiError) -> SimError {
        SimError(format!("{} ({}): {}", e.code, e.reason, e.message))
    }
}

/// A running simulated cluster. Dropping it stops the server.
pub struct SimCluster {
    shared: Arc<Shared>,
    url: String,
    dir: PathBuf,
    kubeconfig_path: PathBuf,
    _tempdir: Option<tempfile::TempDir>,
    shutdown_tx: watch::Sender<bool>,
    runtime_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// Fills in server-set metadata of a seed object and stores it as given.
fn seed_object(state: &mut State, rng: &mut Rng, mut obj: Value) -> Result<Value, SimError> {
    let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
    let kind = obj["kind"].as_str().unwrap_or_default().to_string();
    let rt = state
        .type_for(&api_version, &kind)
        .ok_or_else(|| SimError(format!("unknown type {api_version} {kind}")))?;
    let name = obj["metadata"]["name"]
        .as_str()
        .ok_or_else(|| SimError(format!("a {kind} without metadata.name")))?
        .to_string();
    let ns = if rt.namespaced {
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        obj["metadata"]["namespace"] = json!(ns);
        if !state.namespace_exists(&ns) {
            seed_object(
                state,
                rng,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )?;
        }
        ns
    } else {
        String::new()
    };
    let meta = &mut obj["metadata"];
    if meta["uid"].is_null() {
        meta["uid"] = json!(rng.uuid());
    }
    if meta["creationTimestamp"].is_null() {
        meta["creationTimestamp"] = json!(now());
    }
    if meta["generation"].is_null() {
        meta["generation"] = json!(1);
    }
    if rt.group.is_empty() && rt.kind == "Namespace" {
        obj["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
        if obj["status"].is_null() {
            obj["status"] = json!({"phase": "Active"});
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
        }
    }
    if rt.group.is_empty() && rt.kind == "Secret" {
        if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
            for (k, v) in sd {
                obj["data"][k] = json!(B64.encode(v.as_str().unwrap_or_default()));
            }
        }
        if obj["type"].is_null() {
            obj["type"] = json!("Opaque");
        }
    }
    if rt.kind == "CustomResourceDefinition" {
        for t in ResourceType::from_crd(&obj) {
            if state.find_type(&t.group, &t.version, &t.plural).is_none() {
                state.types.push(t);
            }
        }
        obj["status"] = json!({
            "acceptedNames": obj["spec"]["names"].clone(),
            "conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}],
        });
    }
    Ok(state.put(Key::new(&rt, &ns, &name), obj))
}

fn kubeconfig_yaml(url: &str, ca_pem: &str, token: &str, namespace: Option<&str>) -> String {
    let ns_line = namespace
        .map(|ns| format!("    namespace: {ns}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: uyuni-sim\n  cluster:\n    server: {url}\n    certificate-authority-data: {ca}\n\
         users:\n\
         - name: uyuni-sim-admin\n  user:\n    token: {token}\n\
         - name: uyuni-sim-wrong-token\n  user:\n    token: not-the-token\n\
         contexts:\n\
         - name: uyuni-sim\n  context:\n    cluster: uyuni-sim\n    user: uyuni-sim-admin\n{ns_line}\
         - name: uyuni-sim-wrong-token\n  context:\n    cluster: uyuni-sim\n    user: uyuni-sim-wrong-token\n{ns_line}\
         current-context: uyuni-sim\n",
        ca = B64.encode(ca_pem),
    )
}

impl SimCluster {
    /// Starts the server on the current tokio runtime (its tasks live there).
    pub async fn start(config: SimConfig) -> Result<SimCluster, SimError> {
        let pki = ServerPki::generate().map_err(SimError)?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port))
            .await
            .map_err(|e| SimError(format!("cannot listen on 127.0.0.1:{}: {e}", config.port)))?;
        let addr = listener
            .local_addr()
            .map_err(|e| SimError(format!("no local address: {e}")))?;
        let url = format!("https://127.0.0.1:{}", addr.port());

        let (tempdir, dir) = match &config.dir {
            Some(d) => {
                std::fs::create_dir_all(d)
                    .map_err(|e| SimError(format!("cannot create {}: {e}", d.display())))?;
                (None, d.clone())
            }
            None => {
                let t = tempfile::Builder::new()
                    .prefix("uyuni-sim-")
                    .tempdir()
                    .map_err(|e| SimError(format!("cannot create a temp dir: {e}")))?;
                let p = t.path().to_path_buf();
                (Some(t), p)
            }
        };
        // The token only has to differ between runs; the clock is random enough for that.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let token = format!(
            "sim-{:016x}",
            Rng::new(nanos ^ u64::from(addr.port())).next_u64()
        );

        let request_log_file = match &config.request_log_file {
            Some(p) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| SimError(format!("cannot open {}: {e}", p.display())))?,
            )),
            None => None,
        };

        let mut rng = Rng::new(config.seed);
        let mut state = State {
            types: builtin_resources(),
            ..State::default()
        };
        for crd in crate::cluster::crds(&config) {
            seed_object(&mut state, &mut rng, crd)?;
        }
        for obj in crate::cluster::initial_objects(&config) {
            seed_object(&mut state, &mut rng, obj)?;
        }
        for obj in config.objects.clone() {
            seed_object(&mut state, &mut rng, obj)?;
        }
        let start_rv = state.rv;

        let mut faults = if config.faults == Faults::default() {
            config.scenario.faults.clone()
        } else {
            config.faults.clone()
        };
        if let Some(latency) = config.latency_ms {
            faults.latency_ms = latency;
        }
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let (changes, _) = watch::channel(0u64);
        let kubeconfig_path = dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig_path,
            kubeconfig_yaml(&url, &pki.ca_cert_pem, &token, config.namespace.as_deref()),
        )
        .map_err(|e| SimError(format!("cannot write {}: {e}", kubeconfig_path.display())))?;

        let shared = Arc::new(Shared {
            scenario: Mutex::new(config.scenario.clone()),
            faults: Mutex::new(FaultState::new(faults)),
            config,
            state: Mutex::new(state),
            changes,
            requests: Mutex::new(Vec::new()),
            request_log_file,
            hooks: Mutex::new(Vec::new()),
            rng: Mutex::new(rng),
            token,
            ca_cert_pem: pki.ca_cert_pem.clone(),
            issued_cas: Mutex::new(Default::default()),
            shutdown: shutdown_rx,
            server_addr: Mutex::new(addr.to_string()),
            started: std::time::Instant::now(),
            job_ends: Mutex::new(Vec::new()),
        });
        let acceptor = tokio_rustls::TlsAcceptor::from(pki.tls_config.clone());
        tokio::spawn(crate::http::serve(shared.clone(), listener, acceptor));
        tokio::spawn(crate::controllers::run(shared.clone(), start_rv));
        tracing::info!(%url, kubeconfig = %kubeconfig_path.display(), "simulated cluster started");
        Ok(SimCluster {
            shared,
            url,
            dir,
            kubeconfig_path,
            _tempdir: tempdir,
            shutdown_tx,
            runtime_thread: Mutex::new(None),
        })
    }

    /// Starts the server on a runtime of its own (a background thread), for sync tests.
    pub fn start_blocking(config: SimConfig) -> Result<SimCluster, SimError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("uyuni-sim".to_string())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = tx.send(Err(SimError(format!("cannot build a runtime: {e}"))));
                        return;
                    }
                };
                runtime.block_on(async move {
                    match SimCluster::start(config).await {
                        Ok(sim) => {
                            let mut shutdown = sim.shared.shutdown.clone();
                            if tx.send(Ok(sim)).is_ok() {
                                while !*shutdown.borrow_and_update() {
                                    if shutdown.changed().await.is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                        }
                    }
                });
            })
            .map_err(|e| SimError(format!("cannot spawn the server thread: {e}")))?;
        let sim = rx
            .recv()
            .map_err(|_| SimError("the server thread died while starting".to_string()))??;
        *lock(&sim.runtime_thread) = Some(handle);
        Ok(sim)
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The kubeconfig (contexts `uyuni-sim`, the current one, and `uyuni-sim-wrong-token`).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// The directory holding the kubeconfig.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// The CA certificate (PEM) the kubeconfig trusts.
    pub fn ca_pem(&self) -> &str {
        &self.shared.ca_cert_pem
    }

    pub fn config(&self) -> &SimConfig {
        &self.shared.config
    }

    /// Every request so far, in arrival order.
    pub fn request_log(&self) -> Vec<RequestRecord> {
        lock(&self.shared.requests).clone()
    }

    /// How many requests of each [`RequestRecord::verb_class`] arrived so far.
    pub fn request_counts(&self) -> std::collections::BTreeMap<&'static str, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for r in lock(&self.shared.requests).iter() {
            *counts.entry(r.verb_class()).or_insert(0) += 1;
        }
        counts
    }

    /// Every Job the simulated Job controller ended so far (succeeded or failed), in order,
    /// with the instant on the request log's clock: what a client's reaction is measured from.
    pub fn job_ends(&self) -> Vec<JobEnd> {
        lock(&self.shared.job_ends).clone()
    }

    pub fn clear_request_log(&self) {
        lock(&self.shared.requests).clear();
    }

    /// The requests that were writes (see [`RequestRecord::write`]).
    pub fn write_requests(&self) -> Vec<RequestRecord> {
        self.request_log().into_iter().filter(|r| r.write).collect()
    }

    /// Every successful client write (not dry-run): verb, request body, stored object.
    pub fn written(&self) -> Vec<WrittenObject> {
        self.shared.state().written.clone()
    }

    /// The objects as stored after every successful client create/update/patch (not deletes).
    pub fn written_objects(&self) -> Vec<Value> {
        self.written()
            .into_iter()
            .filter(|w| w.verb != "delete")
            .map(|w| w.object)
            .collect()
    }

    /// Writes each written object to `dir/NNNN-kind-namespace-name.json`; returns the count.
    pub fn dump_written(&self, dir: &Path) -> std::io::Result<usize> {
        std::fs::create_dir_all(dir)?;
        let objects = self.written_objects();
        for (i, obj) in objects.iter().enumerate() {
            let name = format!(
                "{i:04}-{}-{}-{}.json",
                obj["kind"]
                    .as_str()
                    .unwrap_or("object")
                    .to_ascii_lowercase(),
                obj["metadata"]["namespace"].as_str().unwrap_or("cluster"),
                obj["metadata"]["name"].as_str().unwrap_or("unnamed"),
            );
            let text = serde_json::to_string_pretty(obj).map_err(std::io::Error::other)?;
            std::fs::write(dir.join(name), text)?;
        }
        Ok(objects.len())
    }

    fn resource_type(&self, api_version: &str, kind: &str) -> Option<ResourceType> {
        self.shared.type_for(api_version, kind)
    }

    /// One object, by apiVersion, kind (or plural/short name), namespace and name.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let rt = self.resource_type(api_version, kind)?;
        let key = Key::new(&rt, namespace.unwrap_or_default(), name);
        self.shared.state().get(&key).cloned()
    }

    /// All objects of a type, in a namespace or in all (`None`).
    pub fn objects(&self, api_version: &str, kind: &str, namespace: Option<&str>) -> Vec<Value> {
        match self.resource_type(api_version, kind) {
            Some(rt) => self.shared.state().list(&rt, namespace),
            None => Vec::new(),
        }
    }

    /// Creates an object as a client would (defaulting, validation; controllers react), or
    /// replaces it if it exists. Not recorded as a client write.
    pub fn put(&self, obj: Value) -> Result<Value, SimError> {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        let rt = self
            .resource_type(&api_version, &kind)
            .ok_or_else(|| SimError(format!("unknown type {api_version} {kind}")))?;
        let ns = obj["metadata"]["namespace"]
            .as_str()
            .unwrap_or(if rt.namespaced { "default" } else { "" })
            .to_string();
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let opts = WriteOpts::controller("uyuni-sim-test");
        let exists = self.get(&api_version, &kind, Some(&ns), &name).is_some();
        let result = if exists {
            let mut body = obj;
            if let Some(m) = body["metadata"].as_object_mut() {
                m.remove("resourceVersion");
            }
            self.shared.update(&rt, &ns, &name, None, body, &opts)?
        } else {
            self.shared.create(&rt, &ns, obj, &opts, false)?
        };
        Ok(result.object)
    }

    /// Deletes an object (and its dependents) as a client would; `None` if it did not exist.
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let rt = self.resource_type(api_version, kind)?;
        let opts = WriteOpts::controller("uyuni-sim-test");
        self.shared
            .delete(&rt, namespace.unwrap_or_default(), name, None, None, &opts)
            .ok()
            .map(|w| w.object)
    }

    /// The log lines of a pod's container (the only one if `None`).
    pub fn pod_log(
        &self,
        namespace: &str,
        pod: &str,
        container: Option<&str>,
    ) -> Option<Vec<String>> {
        let state = self.shared.state();
        state
            .logs
            .iter()
            .find(|((ns, p, c), _)| ns == namespace && p == pod && container.is_none_or(|x| x == c))
            .map(|(_, log)| log.lines.clone())
    }

    /// The current scenario.
    pub fn scenario(&self) -> Scenario {
        lock(&self.shared.scenario).clone()
    }

    /// Replaces the scenario for objects created from now on. Its faults replace the active
    /// ones when they are not the default.
    pub fn set_scenario(&self, scenario: Scenario) {
        if scenario.faults != Faults::default() {
            self.set_faults(scenario.faults.clone());
        }
        *lock(&self.shared.scenario) = scenario;
    }

    /// Whether a write is held unanswered (`Faults::hold_after_write`): the client waits on
    /// it, right after the write took effect.
    pub fn holding(&self) -> bool {
        lock(&self.shared.faults).holding
    }

    /// Committed writes of the server's objects counted since the faults were set (what
    /// `Faults::hold_after_write` counts).
    pub fn writes_counted(&self) -> u32 {
        lock(&self.shared.faults).writes
    }

    /// Replaces the active faults (and restarts their random sequence from their seed).
    pub fn set_faults(&self, faults: Faults) {
        *lock(&self.shared.faults) = FaultState::new(faults);
    }

    /// Runs `f` whenever a Job whose `kubectl-uyuni.io/step` annotation is `step` (`*` for any
    /// step) is created, synchronously, before the create request is answered.
    pub fn on_job_created(&self, step: &str, f: impl Fn(&JobCreated) + Send + Sync + 'static) {
        lock(&self.shared.hooks).push((step.to_string(), Arc::new(f)));
    }

    /// A channel receiving every Job created for `step` from now on (for sync tests:
    /// `recv_timeout`).
    pub fn job_created_channel(&self, step: &str) -> std::sync::mpsc::Receiver<JobCreated> {
        let (tx, rx) = std::sync::mpsc::channel();
        let tx = Mutex::new(tx);
        self.on_job_created(step, move |job| {
            let _ = lock(&tx).send(job.clone());
        });
        rx
    }

    /// The same for async tests.
    pub fn job_created_stream(
        &self,
        step: &str,
    ) -> tokio::sync::mpsc::UnboundedReceiver<JobCreated> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.on_job_created(step, move |job| {
            let _ = tx.send(job.clone());
        });
        rx
    }

    /// Waits until `condition` holds for the cluster (checked after every change), up to
    /// `timeout`. Returns whether it held.
    pub async fn wait_until(
        &self,
        timeout: Duration,
        condition: impl Fn(&SimCluster) -> bool,
    ) -> bool {
        let mut changes = self.shared.changes.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            changes.borrow_and_update();
            if condition(self) {
                return true;
            }
            tokio::select! {
                r = changes.changed() => if r.is_err() { return condition(self) },
                _ = tokio::time::sleep_until(deadline) => return condition(self),
            }
        }
    }

    /// [`Self::wait_until`] for sync tests (polls every 10 ms).
    pub fn wait_until_blocking(
        &self,
        timeout: Duration,
        condition: impl Fn(&SimCluster) -> bool,
    ) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if condition(self) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the server and its controllers.
    pub async fn shutdown(self) {
        let _ = self.shutdown_tx.send(true);
        // Let the tasks see the signal before the caller's runtime goes on.
        tokio::task::yield_now().await;
    }
}

impl Drop for SimCluster {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
        if let Some(handle) = lock(&self.runtime_thread).take() {
            let _ = handle.join();
        }
    }
}
