//! The real control plane: kube-apiserver, etcd, kube-controller-manager and kube-scheduler,
//! built from their upstream Go modules (`testdata/controlplane`) and run on loopback by
//! `scripts/cluster.sh`. [`RealCluster`] starts one in a temporary directory and stops exactly
//! its processes when dropped.
//!
//! Objects are validated, admitted, defaulted and stored by upstream's code, and upstream's
//! controllers act on them. One Node, `node0`, is our node agent (`uyuni-node-agent`,
//! [`crate::agent`]): the scheduler binds pods to it and it plays them with a [`Scenario`]
//! (the demo's migration unless [`RealCluster::start_with`] names another), so pods run, Jobs
//! complete or fail, Deployments become Available and `kubectl logs` works, with the states,
//! exit codes, logs and readiness the scenario says (no container process runs, no probe).
//! [`RealCluster::start_real_node`] adds a second Node, [`REAL_NODE`]: upstream's kubelet,
//! containerd and runc, whose pods are real containers of images built here.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::scenario::Scenario;
use crate::sim::Flavour;

/// Set by `scripts/test.sh` once it has built the control plane: the tests that need it then
/// run; in CI (`CI=true`) they fail without it rather than skip.
pub const ENV: &str = "UYUNI_REAL_CONTROL_PLANE";

/// Set by `scripts/test.sh` once it has built the real node (kubelet, containerd, CNI, the
/// images) and installed runc: the tests that need a real node then run; in CI they fail
/// without it rather than skip.
pub const NODE_ENV: &str = "UYUNI_REAL_NODE";

/// The Node the kubelet registers in a cluster started by [`RealCluster::start_real_node`].
pub const REAL_NODE: &str = "realnode";

/// Whether the tests that need a real node run here; `Err` says why not, as [`available`].
pub fn node_available() -> Result<(), String> {
    available()?;
    match std::env::var(NODE_ENV).as_deref() {
        Ok("1") => Ok(()),
        _ => Err(format!(
            "{NODE_ENV} is not 1: the real node was not built for this run \
             (`scripts/cluster.sh build` as root with Debian's runc installed, then {NODE_ENV}=1; \
             scripts/test.sh does both)"
        )),
    }
}

/// The repository's `scripts/cluster.sh`.
pub fn cluster_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/cluster.sh")
}

/// Whether the tests that need the real control plane run here. `Err` says why not, in one line
/// naming what to do; the caller fails in CI and skips (saying so) elsewhere.
pub fn available() -> Result<(), String> {
    match std::env::var(ENV).as_deref() {
        Ok("1") => Ok(()),
        _ => Err(format!(
            "{ENV} is not 1: the real control plane was not built for this run \
             (`scripts/cluster.sh build`, then {ENV}=1; scripts/test.sh does both)"
        )),
    }
}

/// The node agent cargo built beside the running test (`target/debug/uyuni-node-agent`, next
/// to `target/debug/deps/TEST`): the current one, where cluster.sh would only build a missing one.
fn built_bin(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join(name);
    bin.is_file().then_some(bin)
}

/// How to start a [`RealCluster`].
#[derive(Debug, Clone, PartialEq)]
pub struct RealConfig {
    /// What the node agent plays; `None`: the demo's migration scenario.
    pub scenario: Option<Scenario>,
    /// The distribution objects the add-ons create (ingress classes, CRDs).
    pub flavour: Flavour,
    /// The cert-manager stand-in, its CRDs and namespace.
    pub cert_manager: bool,
    /// Whether `uyuni-cluster-addons` runs at all (its own tests start it themselves).
    pub addons: bool,
}

impl Default for RealConfig {
    fn default() -> RealConfig {
        RealConfig {
            scenario: None,
            flavour: Flavour::K3s,
            cert_manager: true,
            addons: true,
        }
    }
}

#[derive(Debug)]
pub struct RealCluster {
    dir: tempfile::TempDir,
    server: String,
}

impl RealCluster {
    /// Starts a control plane in a new temporary directory, its node agent playing the demo's
    /// migration scenario; returns once Node node0 is Ready.
    pub fn start() -> Result<RealCluster, String> {
        RealCluster::start_config(&RealConfig::default())
    }

    /// Like [`RealCluster::start`], the node agent playing `scenario` (written to DIR).
    pub fn start_with(scenario: &Scenario) -> Result<RealCluster, String> {
        RealCluster::start_config(&RealConfig {
            scenario: Some(scenario.clone()),
            ..RealConfig::default()
        })
    }

    /// Starts a control plane as `config` says; returns once Node node0 is Ready and the
    /// add-ons (when they run) have created their objects.
    pub fn start_config(config: &RealConfig) -> Result<RealCluster, String> {
        RealCluster::launch(config, None, false)
    }

    /// Starts a control plane as `config` says with, beside node0, a real node: Node
    /// [`REAL_NODE`], upstream's kubelet on containerd and runc, running the images
    /// `testdata/images` builds (`scripts/cluster.sh up --real-node`). The whole cluster runs in
    /// a private network namespace (`DIR/netns`); its API server is reached here at
    /// [`RealCluster::server`] all the same. Returns once both Nodes are Ready.
    pub fn start_real_node(config: &RealConfig) -> Result<RealCluster, String> {
        RealCluster::launch(config, None, true)
    }

    /// The control plane of this test process for `config`: the first call starts it (as
    /// [`RealCluster::start_config`] does), the later ones with an equal configuration get the
    /// same cluster, so that the tests of one binary share one start (about 7 s of CPU each).
    /// It is never dropped: `scripts/cluster.sh up --owner` stops it and removes its directory
    /// once this process has ended, whether its tests passed, panicked or were killed. The
    /// tests that share it keep apart by namespace, and [`Scenario::namespaces`] gives each
    /// namespace the scenario its test needs. Starts are one at a time.
    pub fn shared(config: &RealConfig) -> Result<&'static RealCluster, String> {
        type Started = Vec<(RealConfig, &'static RealCluster)>;
        static STARTED: std::sync::Mutex<Started> = std::sync::Mutex::new(Vec::new());
        let mut started = STARTED
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, cluster)) = started.iter().find(|(c, _)| c == config) {
            return Ok(cluster);
        }
        let cluster: &'static RealCluster = Box::leak(Box::new(RealCluster::launch(
            config,
            Some(std::process::id()),
            false,
        )?));
        started.push((config.clone(), cluster));
        Ok(cluster)
    }

    fn launch(
        config: &RealConfig,
        owner: Option<u32>,
        real_node: bool,
    ) -> Result<RealCluster, String> {
        let scenario = config.scenario.as_ref();
        let dir = tempfile::Builder::new()
            .prefix("uyuni-real-cluster-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let mut command = Command::new("bash");
        command.arg(cluster_script()).arg("up").arg(dir.path());
        if let Some(scenario) = scenario {
            let file = dir.path().join("scenario.json");
            let text = serde_json::to_string_pretty(scenario)
                .map_err(|e| format!("cannot write the scenario as JSON: {e}"))?;
            std::fs::write(&file, text)
                .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
            command.arg("--scenario").arg(file);
        }
        let flavour = match config.flavour {
            Flavour::K3s => "k3s",
            Flavour::Rke2 => "rke2",
            Flavour::Plain => "plain",
        };
        command.args(["--flavour", flavour]);
        if !config.cert_manager {
            command.arg("--no-cert-manager");
        }
        if !config.addons {
            command.arg("--no-addons");
        }
        if real_node {
            command.arg("--real-node");
        }
        if let Some(pid) = owner {
            command.args(["--owner", &pid.to_string()]);
        }
        for (name, var) in [
            ("uyuni-node-agent", "UYUNI_NODE_AGENT_BIN"),
            ("uyuni-cluster-addons", "UYUNI_CLUSTER_ADDONS_BIN"),
        ] {
            if std::env::var_os(var).is_none()
                && let Some(bin) = built_bin(name)
            {
                command.env(var, bin);
            }
        }
        let out = command
            .output()
            .map_err(|e| format!("cannot run scripts/cluster.sh: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "scripts/cluster.sh up failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let server = std::fs::read_to_string(dir.path().join("server"))
            .map_err(|e| format!("scripts/cluster.sh wrote no server address: {e}"))?
            .trim()
            .to_owned();
        Ok(RealCluster { dir, server })
    }

    /// The cluster admin's kubeconfig.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// `https://127.0.0.1:PORT`.
    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `kubectl --kubeconfig ADMIN ARGS…` with `stdin` as input: kubectl 1.37 from
    /// `UYUNI_KUBECTL_137` (scripts/test.sh sets it), else the one on PATH.
    pub fn kubectl(&self, args: &[&str], stdin: &str) -> std::io::Result<Output> {
        use std::io::Write;
        let bin = std::env::var("UYUNI_KUBECTL_137").unwrap_or_else(|_| "kubectl".to_owned());
        let mut child = Command::new(bin)
            .arg("--kubeconfig")
            .arg(self.kubeconfig_path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        if let Some(mut input) = child.stdin.take() {
            input.write_all(stdin.as_bytes())?;
        }
        child.wait_with_output()
    }

    /// The pids `up` recorded, by component; empty once stopped.
    pub fn pids(&self) -> Vec<(String, u32)> {
        let Ok(entries) = std::fs::read_dir(self.dir.path().join("pids")) else {
            return Vec::new();
        };
        let mut pids: Vec<(String, u32)> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                let pid = std::fs::read_to_string(e.path())
                    .ok()?
                    .trim()
                    .parse()
                    .ok()?;
                Some((e.file_name().to_string_lossy().into_owned(), pid))
            })
            .collect();
        pids.sort();
        pids
    }

    /// Stops every process `up` started. Also done on drop.
    pub fn stop(&self) -> Result<(), String> {
        let out = Command::new("bash")
            .arg(cluster_script())
            .arg("down")
            .arg(self.dir.path())
            .output()
            .map_err(|e| format!("cannot run scripts/cluster.sh: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "scripts/cluster.sh down failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}
