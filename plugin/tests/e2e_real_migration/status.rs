//! `kubectl uyuni status` and `kubectl uyuni logs` against the real control plane, on an
//! installed server: healthy (exit 0 with --exit-code), then its Deployment scaled to 0 by
//! plain kubectl, which `status -w` sees from its watches and `status --exit-code` reports as
//! stopped (exit 3); the log of a step's Job and of the database's pod; an unknown step
//! refused with the known ones; a namespace with nothing of ours (exit 4). A module of
//! `e2e_real_migration`, on its shared clusters, in a namespace of its own.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use uyuni_testdata::Flavour;

use super::{RealEnv, both, config, real_plane_or_skip};
use crate::support::text;

const NS_STATUS: &str = "uyuni-status";
const NS_STATUS_NONE: &str = "uyuni-status-none";
const FQDN: &str = "status.example.com";

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("JSON ({e}): {}", both(out)))
}

/// Reads `child`'s stdout on a thread until `wanted` is in what it printed, or `limit`.
fn wait_for_output(
    lines: &mpsc::Receiver<String>,
    seen: &mut String,
    wanted: &str,
    limit: Duration,
) -> bool {
    let deadline = Instant::now() + limit;
    while !seen.contains(wanted) {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
            }
            Err(_) => return false,
        }
    }
    true
}

#[test]
fn status_and_logs_of_an_installed_server_then_stopped() {
    if !real_plane_or_skip("status and logs on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_STATUS);

    let out = env
        .command(&["install", FQDN])
        .env("UYUNI_ADMIN_PASSWORD", "status-admin-Pa55")
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));

    // Healthy: exit 0 with --exit-code, and the typed report.
    let out = env.uyuni(&["status", "--exit-code"]);
    assert!(out.status.success(), "{}", both(&out));
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains(&format!("Namespace {NS_STATUS}: healthy")),
        "{stdout}"
    );
    assert!(stdout.contains("image-check-server"), "{stdout}");
    let report = json_of(&env.uyuni(&["status", "-o", "json"]));
    assert_eq!(report["healthy"], true, "{report:#}");
    let server = report["workloads"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["component"] == "server"))
        .unwrap_or_else(|| panic!("no server: {report:#}"));
    assert_eq!(server["desiredReplicas"], 1, "{server:#}");
    assert_eq!(server["readyReplicas"], 1, "{server:#}");
    assert_eq!(server["state"], "ready");
    assert!(
        report["claims"].as_array().is_some_and(|c| c
            .iter()
            .any(|c| c["name"] == "var-pgsql18" && c["bound"] == true)),
        "{report:#}"
    );

    // `status -w` prints again when a watch sees the server stopped by plain kubectl.
    let mut watch = env
        .command(&["status", "-w", "-o", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl runs");
    let stdout = watch.stdout.take().expect("piped");
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    let first = wait_for_output(
        &lines,
        &mut seen,
        "\"healthy\": true",
        Duration::from_secs(60),
    );
    assert!(first, "status -w printed no healthy report:\n{seen}");
    let out = env
        .cluster
        .kubectl(
            &[
                "-n",
                NS_STATUS,
                "scale",
                "deployment",
                "uyuni",
                "--replicas=0",
            ],
            "",
        )
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    let stopped = wait_for_output(
        &lines,
        &mut seen,
        "\"reason\": \"stopped\"",
        Duration::from_secs(60),
    );
    let _ = watch.kill();
    let _ = watch.wait();
    assert!(stopped, "status -w did not report the stop:\n{seen}");

    // Stopped: --exit-code says so with 3.
    let out = env.uyuni(&["status", "--exit-code"]);
    assert_eq!(out.status.code(), Some(3), "{}", both(&out));
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains("NOT HEALTHY") && stdout.contains("stopped"),
        "{stdout}"
    );
    assert!(stderr.contains("Deployment uyuni stopped"), "{stderr}");

    // The log of a step's Job, and the list of steps.
    let out = env.uyuni(&["logs", "image-check-server"]);
    assert!(out.status.success(), "{}", both(&out));
    let (stdout, _) = text(&out);
    assert!(stdout.contains("SUPPORTED: server image"), "{stdout}");
    let out = env.uyuni(&[
        "logs",
        "image-check-server",
        "--attempt",
        "1",
        "--tail",
        "1",
    ]);
    assert!(out.status.success(), "{}", both(&out));
    let out = env.uyuni(&["logs"]);
    assert!(out.status.success(), "{}", both(&out));
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("image-check-server") && stdout.contains("image-check-db"),
        "{stdout}"
    );

    // A component's log: the database still runs.
    let out = env.uyuni(&["logs", "--component", "db", "--tail", "10", "--timestamps"]);
    assert!(out.status.success(), "{}", both(&out));

    // An unknown step: the known ones in the error.
    let out = env.uyuni(&["logs", "no-such-step"]);
    assert!(!out.status.success(), "{}", both(&out));
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains("no-such-step") && stderr.contains("image-check-server"),
        "{stderr}"
    );

    // Nothing of ours: a clear message, exit 4 with --exit-code, 0 without.
    let none = RealEnv::start(&config(Flavour::K3s, true), NS_STATUS_NONE);
    let out = none.uyuni(&["status"]);
    assert!(out.status.success(), "{}", both(&out));
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("Nothing of kubectl-uyuni's is in namespace uyuni-status-none")
            && stdout.contains("install"),
        "{stdout}"
    );
    let out = none.uyuni(&["status", "--exit-code"]);
    assert_eq!(out.status.code(), Some(4), "{}", both(&out));
}
