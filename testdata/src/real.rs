//! The real control plane: kube-apiserver, etcd, kube-controller-manager and kube-scheduler,
//! built from their upstream Go modules (`testdata/controlplane`) and run on loopback by
//! `scripts/cluster.sh`. [`RealCluster`] starts one in a temporary directory and stops exactly
//! its processes when dropped.
//!
//! Not built yet: the node agent that stands in for the kubelets, so no Node exists and pods
//! stay Pending; objects are validated, admitted, defaulted and stored by upstream's code.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Set by `scripts/test.sh` once it has built the control plane: the tests that need it then
/// run; in CI (`CI=true`) they fail without it rather than skip.
pub const ENV: &str = "UYUNI_REAL_CONTROL_PLANE";

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

#[derive(Debug)]
pub struct RealCluster {
    dir: tempfile::TempDir,
    server: String,
}

impl RealCluster {
    /// Starts a control plane in a new temporary directory; returns once it is ready.
    pub fn start() -> Result<RealCluster, String> {
        let dir = tempfile::Builder::new()
            .prefix("uyuni-real-cluster-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        let out = Command::new("bash")
            .arg(cluster_script())
            .arg("up")
            .arg(dir.path())
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
