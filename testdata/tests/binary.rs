//! The `uyuni-sim` binary: prints the kubeconfig path first, serves until SIGTERM, writes the
//! request log and the written objects.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_uyuni-sim");

/// Kills the server if the test fails before stopping it.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn kubectl() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("kubectl"))
            .find(|p| p.is_file())
    });
    if found.is_none() && std::env::var("UYUNI_SKIP_KUBECTL").as_deref() != Ok("1") {
        panic!("kubectl is not on PATH (set UYUNI_SKIP_KUBECTL=1 to skip these tests)");
    }
    found
}

#[test]
fn serve_prints_the_kubeconfig_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let sim_dir = dir.path().join("sim");
    let dump = dir.path().join("written");
    let scenario = dir.path().join("scenario.yaml");
    std::fs::write(
        &scenario,
        "jobs:\n  data-sync:\n    outcome: fail\n    exitCode: 2\ntiming:\n  podCreateMs: 5\n",
    )
    .expect("write");
    let mut child = Running(
        Command::new(BIN)
            .args(["serve", "--flavour", "rke2", "--minor", "33", "--dir"])
            .arg(&sim_dir)
            .arg("--scenario")
            .arg(&scenario)
            .arg("--dump-written")
            .arg(&dump)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("uyuni-sim starts"),
    );
    let stdout = child.0.stdout.take().expect("stdout");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("first line");
    let kubeconfig = sim_dir.join("kubeconfig");
    assert_eq!(first.trim(), format!("KUBECONFIG={}", kubeconfig.display()));
    assert!(kubeconfig.exists());

    if let Some(kubectl) = kubectl() {
        let cache = tempfile::tempdir().expect("cache");
        // kubectl's typed `create` commands send protobuf bodies.
        for args in [
            &["create", "configmap", "hello", "--from-literal=a=b"][..],
            &["create", "namespace", "uyuni"],
            &[
                "create",
                "secret",
                "generic",
                "ssh",
                "-n",
                "uyuni",
                "--from-literal=key=x y",
            ],
        ] {
            let out = Command::new(&kubectl)
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(args)
                .env("KUBECACHEDIR", cache.path())
                .output()
                .expect("kubectl runs");
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let out = Command::new(&kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([
                "get",
                "secret",
                "ssh",
                "-n",
                "uyuni",
                "-o",
                "jsonpath={.data.key}",
            ])
            .env("KUBECACHEDIR", cache.path())
            .output()
            .expect("kubectl runs");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "eCB5");
    }

    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let exit = child.0.wait().expect("exits");
    assert!(exit.success(), "{exit:?}");

    let log = std::fs::read_to_string(sim_dir.join("requests.jsonl")).expect("request log");
    if kubectl().is_some() {
        assert!(log.lines().any(|l| l.contains("\"method\":\"POST\"")));
        let files: Vec<_> = std::fs::read_dir(&dump)
            .expect("dump dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files.len(), 3, "{files:?}");
        assert!(files.contains(&"0000-configmap-default-hello.json".to_string()));
    }
}

#[test]
fn a_bad_scenario_is_an_error() {
    let out = Command::new(BIN)
        .args(["serve", "--scenario", "builtin:nope"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown built-in scenario"));
    let out = Command::new(BIN)
        .args(["serve", "--flavour", "openshift"])
        .output()
        .expect("runs");
    assert!(!out.status.success());
}
