//! The harness the end-to-end tests share: the built plugin on a PATH of its own, run as
//! `kubectl uyuni …` through the real kubectl against a simulated cluster, and the checks every
//! run gets (no secret in the output, written objects valid against the official schemas).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use uyuni_testdata::{Scenario, SimCluster, SimConfig, scenarios};

pub mod records;

pub const SOURCE: &str = "uyuni.example.com";
pub const NS: &str = "uyuni";
/// The source CA's password, given through the environment unless a test says otherwise.
pub const CA_PASSWORD: &str = "ca secret #1";

/// The realistic migration scenario with a data sync of 0.4 s instead of 3 s: what the
/// end-to-end tests check does not depend on how long the copy takes.
pub fn quick_migration() -> Scenario {
    let mut s = scenarios::migration();
    if let Some(job) = s.jobs.get_mut("data-sync") {
        job.duration_ms = 400;
    }
    s
}

pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/fixtures/ssh")
}

/// The SSH flags of a first run, pointing at the fixture key pair.
pub fn ssh_flags() -> Vec<String> {
    let f = fixtures();
    [
        ("--ssh-key-private", "id_ed25519"),
        ("--ssh-key-public", "id_ed25519.pub"),
        ("--ssh-knownhosts", "known_hosts"),
        ("--ssh-config", "config"),
    ]
    .iter()
    .flat_map(|(flag, file)| [flag.to_string(), f.join(file).display().to_string()])
    .collect()
}

/// The fixture private key's body lines.
pub fn private_key_lines() -> Vec<String> {
    std::fs::read_to_string(fixtures().join("id_ed25519"))
        .expect("fixture key")
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::to_owned)
        .collect()
}

/// Secret values that must never reach the plugin's output.
/// The registry password the registry tests give in a file.
pub const REGISTRY_PASSWORD: &str = "registry pass \"word\"";

pub fn secrets() -> Vec<String> {
    let mut s = private_key_lines();
    s.push("correct horse battery".into());
    s.push("another one with spaces".into());
    s.push(CA_PASSWORD.into());
    s.push(REGISTRY_PASSWORD.into());
    s.push("MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQIc2ltdWxhdGVkAgIIADAMBggqhkiG".into());
    s
}

pub struct Env {
    pub sim: SimCluster,
    pub bin: tempfile::TempDir,
    pub cache: tempfile::TempDir,
    /// Whether runs get the CA password in `UYUNI_SSL_PASSWORD`.
    pub password_env: bool,
    /// Whether `migrate` runs get `--yes`: the tests run without a terminal, where a run that
    /// stops the source's services is refused without it.
    pub yes: bool,
}

impl Env {
    /// The migration scenario's cluster with Jobs that end at once.
    pub fn quick_jobs() -> Env {
        let mut scenario = scenarios::migration();
        for job in scenario.jobs.values_mut() {
            job.duration_ms = 0;
        }
        Env::new(SimConfig {
            scenario,
            ..SimConfig::default()
        })
    }

    pub fn new(config: SimConfig) -> Env {
        let sim = SimCluster::start_blocking(config).expect("simulated cluster");
        // A directory with only the plugin: kubectl finds it on PATH as `kubectl uyuni`.
        let bin = tempfile::tempdir().expect("tempdir");
        let plugin = assert_cmd::cargo::cargo_bin("kubectl-uyuni");
        std::os::unix::fs::symlink(&plugin, bin.path().join("kubectl-uyuni")).expect("symlink");
        Env {
            sim,
            bin,
            cache: tempfile::tempdir().expect("tempdir"),
            password_env: true,
            yes: true,
        }
    }

    /// Puts a stand-in `ssh` on the runs' PATH that prints `output` (what `du` would).
    pub fn with_ssh_stub(self, output: &str) -> Env {
        let ssh = self.bin.path().join("ssh");
        std::fs::write(&ssh, format!("#!/bin/sh\nprintf '{output}'\n")).expect("ssh stub");
        std::fs::set_permissions(&ssh, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        self
    }

    pub fn kubeconfig(&self) -> &Path {
        self.sim.kubeconfig_path()
    }

    /// The real kubectl, with the plugin on PATH and a discovery cache of its own.
    pub fn kubectl(&self) -> Command {
        let mut cmd = Command::new("kubectl");
        let path = format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env("PATH", path)
            .env("KUBECACHEDIR", self.cache.path())
            .env_remove("KUBECONFIG")
            .env_remove("UYUNI_SSL_PASSWORD")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        if self.password_env {
            cmd.env("UYUNI_SSL_PASSWORD", CA_PASSWORD);
        }
        cmd
    }

    /// `kubectl uyuni --kubeconfig K -n uyuni ARGS…`
    pub fn uyuni(&self, args: &[&str]) -> Output {
        self.uyuni_command(args).output().expect("kubectl runs")
    }

    /// [`Env::uyuni`] with an install's administrator password in the environment.
    pub fn uyuni_as_admin(&self, password: &str, args: &[&str]) -> Output {
        self.uyuni_command(args)
            .env("UYUNI_ADMIN_PASSWORD", password)
            .output()
            .expect("kubectl runs")
    }

    fn uyuni_command(&self, args: &[&str]) -> Command {
        let mut cmd = self.kubectl();
        cmd.arg("uyuni")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(["-n", NS])
            .args(args);
        cmd
    }

    /// `kubectl uyuni … migrate SOURCE [--yes] ARGS…`
    pub fn migrate(&self, args: &[String]) -> Output {
        let mut all = vec!["migrate", SOURCE];
        if self.yes {
            all.push("--yes");
        }
        all.extend(args.iter().map(String::as_str));
        self.uyuni(&all)
    }

    /// The Jobs of one step.
    pub fn jobs_of(&self, step: &str) -> Vec<Value> {
        self.sim
            .objects("batch/v1", "Job", Some(NS))
            .into_iter()
            .filter(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/step"] == step)
            .collect()
    }

    /// The data-sync Jobs of one mode (`prepare` or `final`).
    pub fn syncs_of_mode(&self, mode: &str) -> Vec<Value> {
        self.jobs_of("data-sync")
            .into_iter()
            .filter(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/sync-mode"] == mode)
            .collect()
    }

    pub fn create_namespace(&self) {
        self.sim
            .put(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
            .expect("namespace");
    }
}

/// Arguments as owned strings.
pub fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

pub fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn stdout(out: &Output) -> String {
    text(out).0
}

pub fn stderr(out: &Output) -> String {
    text(out).1
}

pub fn assert_no_secret(out: &Output) {
    let (stdout, stderr) = text(out);
    for secret in secrets() {
        assert!(!stdout.contains(&secret), "secret {secret:?} on stdout");
        assert!(!stderr.contains(&secret), "secret {secret:?} on stderr");
    }
}

pub fn name(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap_or_default()
}

/// Every custom resource the plugin wrote passes its CRD's schema (strictly: no unknown
/// fields), checked with Python's jsonschema from the project venv (scripts/test.sh).
pub fn validate_custom_resources(sim: &SimCluster) {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    let objects: Vec<Value> = sim
        .written()
        .iter()
        .map(|w| w.body.clone())
        .filter(|b| b["apiVersion"].as_str().is_some_and(|a| a.contains(".io/")))
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("objects.json");
    std::fs::write(&file, serde_json::to_string(&objects).expect("json")).expect("write");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/crd_validate.py");
    let crds = uyuni_testdata::cluster::default_crds_dir();
    // Exit 3 (or no venv at all): jsonschema or PyYAML is missing, the check cannot be made.
    let out = Command::new(&python)
        .arg(script)
        .arg(crds)
        .arg(&file)
        .output();
    let Some(out) = out.ok().filter(|o| o.status.code() != Some(3)) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must provide .venv with jsonschema and PyYAML (kubernetes-validate's)"
        );
        eprintln!("note: no python with jsonschema; custom resources not schema-checked");
        return;
    };
    assert!(
        out.status.success(),
        "custom resources rejected by their CRD schemas:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--ssl-server-cert`, `--ssl-server-key`, `--ssl-ca-root` of a freshly issued certificate,
/// in files that live as long as the returned directory.
pub fn third_party_flags() -> (tempfile::TempDir, Vec<String>, String) {
    use uyuni_testdata::certs::{Signer, issue};
    let issued = issue(
        &serde_json::json!({"dnsNames": [SOURCE]}),
        Signer::SelfSigned,
    )
    .expect("certificate");
    let dir = tempfile::tempdir().expect("tempdir");
    let write = |name: &str, content: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, content).expect("write");
        p.display().to_string()
    };
    let flags = vec![
        "--ssl-server-cert".to_owned(),
        write("server.crt", &issued.tls_crt),
        "--ssl-server-key".to_owned(),
        write("server.key", &issued.tls_key),
        "--ssl-ca-root".to_owned(),
        write("ca.crt", &issued.ca_crt),
    ];
    (dir, flags, issued.tls_key)
}
