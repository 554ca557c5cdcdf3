//! The real control plane from upstream (scripts/cluster.sh): it starts, reports v1.37, has etcd
//! behind it, refuses what a real cluster refuses, and `down` leaves no process behind.

use std::process::Output;

use uyuni_testdata::Flavour;
use uyuni_testdata::real::{self, RealCluster, RealConfig};

/// The cluster, or `None` (said so) where it was not built; in CI its absence fails the test.
fn cluster() -> Option<RealCluster> {
    if let Err(why) = real::available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the real control plane is needed in CI: {why}"
        );
        println!("real control plane NOT tested: {why}");
        return None;
    }
    // The plain flavour without the cert-manager stand-in: nothing here uses their CRDs, and a
    // start without them costs about 2 s less CPU.
    Some(
        RealCluster::start_config(&RealConfig {
            flavour: Flavour::Plain,
            cert_manager: false,
            ..RealConfig::default()
        })
        .expect("the real control plane starts"),
    )
}

fn kubectl(cluster: &RealCluster, args: &[&str], stdin: Option<&str>) -> Output {
    cluster
        .kubectl(args, stdin.unwrap_or_default())
        .expect("kubectl runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

const DUPLICATE_PORT_NAMES: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: uyuni
  namespace: default
spec:
  selector:
    matchLabels: {app: uyuni}
  template:
    metadata:
      labels: {app: uyuni}
    spec:
      containers:
      - name: uyuni
        image: registry.opensuse.org/uyuni/server:latest
        ports:
        - {name: jmx, containerPort: 5556}
        - {name: jmx, containerPort: 5557}
";

#[test]
fn the_real_control_plane_starts_validates_and_stops() {
    let Some(cluster) = cluster() else { return };

    let version = kubectl(&cluster, &["get", "--raw", "/version"], None);
    assert!(version.status.success(), "{}", text(&version));
    let version: serde_json::Value =
        serde_json::from_slice(&version.stdout).expect("/version is JSON");
    assert!(
        version["gitVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("v1.37.")),
        "{version}"
    );

    let livez = kubectl(&cluster, &["get", "--raw", "/livez?verbose"], None);
    assert!(text(&livez).contains("[+]etcd ok"), "{}", text(&livez));

    // The controllers run: the ServiceAccount controller made the default account.
    let sa = kubectl(
        &cluster,
        &["get", "serviceaccount", "default", "-n", "default"],
        None,
    );
    assert!(sa.status.success(), "{}", text(&sa));

    // Upstream's validation, with upstream's message (the fidelity issue's defect 1).
    let refused = kubectl(&cluster, &["apply", "-f", "-"], Some(DUPLICATE_PORT_NAMES));
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(
        text(&refused)
            .contains("spec.template.spec.containers[0].ports[1].name: Duplicate value: \"jmx\""),
        "{}",
        text(&refused)
    );
    let absent = kubectl(
        &cluster,
        &["get", "deployment", "uyuni", "-n", "default"],
        None,
    );
    assert_eq!(absent.status.code(), Some(1), "{}", text(&absent));

    let pids = cluster.pids();
    let names: Vec<&str> = pids.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "uyuni-cluster-addons",
            "uyuni-node-agent"
        ]
    );
    assert!(pids.iter().all(|(_, pid)| alive(*pid)));
    cluster.stop().expect("down");
    for (name, pid) in &pids {
        assert!(!alive(*pid), "{name} ({pid}) still runs after down");
    }
    assert!(cluster.pids().is_empty());
}

#[test]
fn a_component_that_exits_during_start_up_is_named_with_its_log_and_the_rest_is_stopped() {
    if let Err(why) = real::available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the real control plane is needed in CI: {why}"
        );
        println!("real control plane NOT tested: {why}");
        return;
    }
    // The node agent starts last but for the add-ons: everything upstream runs by then.
    let dir = tempfile::Builder::new()
        .prefix("uyuni-real-cluster-")
        .tempdir()
        .expect("tempdir");
    let out = std::process::Command::new("bash")
        .arg(real::cluster_script())
        .arg("up")
        .arg(dir.path())
        .env("UYUNI_NODE_AGENT_BIN", "/bin/false")
        .output()
        .expect("cluster.sh runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let log = dir.path().join("logs/uyuni-node-agent.log");
    assert!(
        stderr.contains(&format!(
            "uyuni-node-agent exited during start-up (its log: {}",
            log.display()
        )),
        "{stderr}"
    );
    // `down` ran: what did start (etcd, the apiserver, the controllers; each names the
    // directory in its flags) is stopped.
    let needle = dir.path().display().to_string();
    let mut started = 0;
    for name in ["etcd", "kube-apiserver", "kube-controller-manager"] {
        if dir.path().join(format!("logs/{name}.log")).exists() {
            started += 1;
        }
    }
    assert_eq!(started, 3, "the upstream components had started: {stderr}");
    let left: Vec<String> = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (cmdline.contains(&needle) && alive(pid)).then_some(cmdline)
        })
        .collect();
    assert!(
        left.is_empty(),
        "still running after the failed start: {left:?}"
    );
}

/// `up --owner PID` leaves a watcher (`cluster.sh __owned DIR PID`) that stops the cluster and
/// removes DIR once the owner has ended (the shared clusters of a test process are never
/// dropped). Played here with stand-ins: two `sleep`s recorded as components, and a third as
/// the owner.
#[test]
fn an_owned_cluster_is_stopped_and_removed_once_its_owner_has_ended() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let dir = tempfile::Builder::new()
        .prefix("uyuni-real-cluster-")
        .tempdir()
        .expect("tempdir")
        .keep();
    std::fs::create_dir_all(dir.join("pids")).expect("pids");
    let sleep = || {
        Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .expect("sleep runs")
    };
    let mut components = [sleep(), sleep()];
    for (name, child) in ["etcd", "kube-apiserver"].iter().zip(&components) {
        std::fs::write(dir.join("pids").join(name), child.id().to_string()).expect("pid file");
    }
    let mut owner = sleep();
    let mut watcher = Command::new("bash")
        .arg(real::cluster_script())
        .arg("__owned")
        .arg(&dir)
        .arg(owner.id().to_string())
        .spawn()
        .expect("cluster.sh runs");

    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        dir.join("pids/etcd").exists(),
        "the watcher acted while its owner ran"
    );
    owner.kill().expect("kill the owner");
    owner.wait().expect("reap the owner");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = watcher.try_wait().expect("watcher") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the watcher still waits 20 s after its owner ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status}");
    for child in &mut components {
        // Stopped by `down` (SIGKILL for the upstream components): reaped here, their parent.
        let status = child.wait().expect("reap");
        assert!(!status.success(), "{status}");
    }
    assert!(!dir.exists(), "{} was not removed", dir.display());
}

#[test]
fn up_refuses_an_owner_that_does_not_run() {
    let out = std::process::Command::new("bash")
        .arg(real::cluster_script())
        .args(["up", "/nonexistent/cluster", "--owner", "999999999"])
        .output()
        .expect("cluster.sh runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--owner 999999999: no such process"),
        "{stderr}"
    );
}
