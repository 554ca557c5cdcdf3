//! What the node agent's real-plane tests (`node_agent.rs`, `node_agent_exec.rs`) share: the
//! cluster (its absence fails in CI), kubectl as the admin, and polling.
#![allow(dead_code)]

use std::process::Output;
use std::time::{Duration, Instant};

use uyuni_testdata::real::{self, RealCluster, RealConfig};
use uyuni_testdata::{Flavour, Scenario};

/// The cluster with its node agent playing `scenario`, or `None` (said so, naming `what`) where
/// the real control plane was not built; in CI its absence fails the test.
pub fn cluster(what: &str, scenario: &Scenario) -> Option<RealCluster> {
    if let Err(why) = real::available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the real control plane is needed in CI: {why}"
        );
        println!("{what} NOT tested on the real control plane: {why}");
        return None;
    }
    // The plain flavour without the cert-manager stand-in: the agent's tests use neither a
    // distribution's objects nor cert-manager, and a start without their CRDs costs about 2 s
    // less CPU (5.4 s against 7.4 s, up to down; the apiserver updates and publishes each CRD).
    Some(
        RealCluster::start_config(&RealConfig {
            scenario: Some(scenario.clone()),
            flavour: Flavour::Plain,
            cert_manager: false,
            ..RealConfig::default()
        })
        .expect("the real control plane starts"),
    )
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn kubectl(cluster: &RealCluster, args: &[&str]) -> Output {
    cluster.kubectl(args, "").expect("kubectl runs")
}

pub fn ok(cluster: &RealCluster, args: &[&str]) -> String {
    let out = kubectl(cluster, args);
    assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn apply(cluster: &RealCluster, yaml: &str) {
    let out = cluster
        .kubectl(&["apply", "-f", "-"], yaml)
        .expect("kubectl runs");
    assert!(out.status.success(), "apply: {}\n{yaml}", text(&out));
}

/// Polls `f` until it gives `Some`, for at most `secs`.
pub fn eventually<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "within {secs} s: {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}
