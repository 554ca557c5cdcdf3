//! The node agent's real execution (pods annotated `uyuni.test/execute: "true"`) on the real
//! control plane: the command runs on the host, its exit code goes to the pod status where
//! upstream's Job controller reads it, its output to `kubectl logs` (live with `-f`), its
//! environment from the API's Secrets, and deleting the pod ends the process.

use crate::agent_support;

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_support::{apply, eventually, kubectl, ok, text};
use uyuni_testdata::real::RealCluster;

fn jsonpath(cluster: &RealCluster, args: &[&str], path: &str) -> String {
    let arg = format!("jsonpath={path}");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-o", &arg]);
    ok(cluster, &all)
}

/// A pod that asks for execution, restartPolicy Never, one container `main`.
fn pod(name: &str, container: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: exec
  annotations: {{uyuni.test/execute: 'true'}}
spec:
  restartPolicy: Never
  containers:
  - {container}
"
    )
}

const SETUP: &str = "apiVersion: v1
kind: Namespace
metadata: {name: exec}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: exec}
stringData: {token: s3cret-value}
---
apiVersion: batch/v1
kind: Job
metadata: {name: fails, namespace: exec}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations: {uyuni.test/execute: 'true'}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: registry.opensuse.org/uyuni/server-migration:latest
        command: [sh, -c, 'echo out; echo err >&2; exit 3']
";

/// The pid a pod's `echo pid $$` printed.
fn printed_pid(cluster: &RealCluster, pod: &str) -> u32 {
    eventually(30, &format!("{pod} prints its pid"), || {
        let out = kubectl(cluster, &["logs", "-n", "exec", pod]);
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .strip_prefix("pid ")
            .and_then(|p| p.parse().ok())
    })
}

fn pod_path(cluster: &RealCluster, pod: &str, path: &str) -> String {
    jsonpath(cluster, &["get", "pod", "-n", "exec", pod], path)
}

/// The commands of pods in namespace `exec` of `cluster`, whose pods play no scenario (see
/// `node_agent.rs`, whose test runs this beside its own on one cluster).
pub(crate) fn commands_where_asked(cluster: &RealCluster) {
    apply(
        cluster,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: exec}\n",
    );
    eventually(30, "the default ServiceAccount of namespace exec", || {
        kubectl(cluster, &["get", "sa", "default", "-n", "exec"])
            .status
            .success()
            .then_some(())
    });
    apply(cluster, SETUP);
    apply(
        cluster,
        &pod(
            "secret-env",
            "{name: main, image: x, command: [sh, -c, 'echo \"token=$TOKEN\"'], env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: creds, key: token}}}]}",
        ),
    );
    apply(
        cluster,
        &pod(
            "secret-missing",
            "{name: main, image: x, command: [sh, -c, 'echo never'], env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: absent, key: token}}}]}",
        ),
    );
    apply(
        cluster,
        &pod(
            "no-command",
            "{name: main, image: registry.opensuse.org/uyuni/server:latest}",
        ),
    );
    // Init containers first; an emptyDir is shared through its variable.
    apply(
        cluster,
        "apiVersion: v1
kind: Pod
metadata:
  name: shared
  namespace: exec
  annotations: {uyuni.test/execute: 'true'}
spec:
  restartPolicy: Never
  volumes: [{name: work, emptyDir: {}}]
  initContainers:
  - {name: init, image: x, command: [sh, -c, 'echo from-init > \"$UYUNI_SANDBOX_MOUNT_WORK/f\"'], volumeMounts: [{name: work, mountPath: /work}]}
  containers:
  - {name: main, image: x, command: [sh, -c, 'cat \"$UYUNI_SANDBOX_MOUNT_WORK/f\"; pwd'], volumeMounts: [{name: work, mountPath: /work}]}
",
    );

    // The real Job controller fails the Job from the real exit code.
    eventually(60, "Job fails is Failed", || {
        let failed = jsonpath(
            cluster,
            &["get", "job", "-n", "exec", "fails"],
            "{.status.conditions[?(@.type==\"Failed\")].status}",
        );
        (failed == "True").then_some(())
    });
    let code = jsonpath(
        cluster,
        &["get", "pod", "-n", "exec", "-l", "job-name=fails"],
        "{.items[0].status.phase} {.items[0].status.containerStatuses[0].state.terminated.exitCode} {.items[0].status.containerStatuses[0].state.terminated.reason}",
    );
    assert_eq!(code, "Failed 3 Error");
    let logs = ok(cluster, &["logs", "-n", "exec", "job/fails"]);
    let lines: Vec<&str> = logs.lines().collect();
    assert!(
        lines.contains(&"out") && lines.contains(&"err") && lines.len() == 2,
        "{logs:?}"
    );

    // secretKeyRef, read through the API.
    eventually(30, "secret-env succeeded", || {
        (pod_path(cluster, "secret-env", "{.status.phase}") == "Succeeded").then_some(())
    });
    assert_eq!(
        ok(cluster, &["logs", "-n", "exec", "secret-env"]),
        "token=s3cret-value\n"
    );
    // A missing Secret: kubelet's waiting reason, and the pod stays Pending.
    let waiting = eventually(30, "secret-missing waits", || {
        let w = pod_path(
            cluster,
            "secret-missing",
            "{.status.phase} {.status.containerStatuses[0].state.waiting.reason}: {.status.containerStatuses[0].state.waiting.message}",
        );
        w.contains("CreateContainerConfigError").then_some(w)
    });
    assert_eq!(
        waiting,
        "Pending CreateContainerConfigError: secret \"absent\" not found"
    );
    // No command and no image to take an entrypoint from: it cannot start.
    let start = eventually(30, "no-command failed", || {
        let s = pod_path(
            cluster,
            "no-command",
            "{.status.phase} {.status.containerStatuses[0].state.terminated.reason} {.status.containerStatuses[0].state.terminated.exitCode}|{.status.containerStatuses[0].state.terminated.message}",
        );
        s.starts_with("Failed").then_some(s)
    });
    assert!(
        start.starts_with("Failed StartError 128|") && start.contains("no command specified"),
        "{start}"
    );
    // The init container ran first, in the same emptyDir; main in its own working directory.
    let deadline = Instant::now() + Duration::from_secs(30);
    while pod_path(cluster, "shared", "{.status.phase}") != "Succeeded" {
        assert!(
            Instant::now() < deadline,
            "within 30 s: shared succeeded\n{}",
            ok(
                cluster,
                &["get", "pod", "-n", "exec", "shared", "-o", "yaml"]
            )
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let shared = ok(cluster, &["logs", "-n", "exec", "shared", "-c", "main"]);
    let shared: Vec<&str> = shared.lines().collect();
    assert_eq!(shared.first(), Some(&"from-init"), "{shared:?}");
    assert!(
        shared
            .get(1)
            .is_some_and(|pwd| pwd.ends_with("/containers/main") && pwd.contains("exec_shared_")),
        "{shared:?}"
    );
    let init_state = pod_path(
        cluster,
        "shared",
        "{.status.initContainerStatuses[0].state.terminated.reason}",
    );
    assert_eq!(init_state, "Completed");

    // `kubectl logs -f` streams the lines while the command runs.
    apply(
        cluster,
        &pod(
            "ticker",
            "{name: main, image: x, command: [sh, -c, 'for i in 1 2 3 4; do echo tick$i; sleep 0.7; done']}",
        ),
    );
    eventually(30, "ticker runs", || {
        (pod_path(cluster, "ticker", "{.status.phase}") == "Running").then_some(())
    });
    let bin = std::env::var("UYUNI_KUBECTL_137").unwrap_or_else(|_| "kubectl".to_owned());
    let mut follow = Command::new(bin)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["logs", "-f", "-n", "exec", "ticker"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl logs -f runs");
    let stdout = follow.stdout.take().expect("stdout");
    let mut seen: Vec<(Instant, String)> = Vec::new();
    for line in std::io::BufReader::new(stdout).lines() {
        seen.push((Instant::now(), line.expect("a line")));
    }
    let ended = Instant::now();
    assert!(follow.wait().expect("kubectl ends").success());
    let names: Vec<&str> = seen.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(names, ["tick1", "tick2", "tick3", "tick4"]);
    // The first line came well before the stream ended (with the process).
    assert!(
        ended.duration_since(seen[0].0) >= Duration::from_millis(1000),
        "tick1 was not streamed live: {:?} before the end",
        ended.duration_since(seen[0].0)
    );

    // Deleting a pod ends its process (SIGTERM) and then the pod.
    apply(
        cluster,
        &pod(
            "sleeper",
            "{name: main, image: x, command: [sh, -c, 'echo pid $$; exec sleep 600']}",
        ),
    );
    let pid = printed_pid(cluster, "sleeper");
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    let cmdline = std::fs::read(proc_dir.join("cmdline")).expect("the process runs");
    assert!(
        String::from_utf8_lossy(&cmdline).starts_with("sleep\x00600"),
        "{cmdline:?}"
    );
    let started = Instant::now();
    ok(cluster, &["delete", "pod", "-n", "exec", "sleeper"]);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "SIGTERM, not the grace period, ended it"
    );
    eventually(10, "the process is gone", || {
        (!proc_dir.exists()).then_some(())
    });
    let gone = kubectl(cluster, &["get", "pod", "-n", "exec", "sleeper"]);
    assert!(
        !gone.status.success() && text(&gone).contains("NotFound"),
        "{}",
        text(&gone)
    );
}

/// Stopping the agent (cluster.sh down) ends the commands still running: they are in their own
/// process groups and would outlive it. Starts one in `cluster`; `(its /proc directory, its
/// working directory)`, for [`survivor_gone`] once the cluster is stopped.
pub(crate) fn survivor(cluster: &RealCluster) -> (std::path::PathBuf, std::path::PathBuf) {
    apply(
        cluster,
        &pod(
            "survivor",
            "{name: main, image: x, command: [sh, -c, 'echo pid $$; exec sleep 600']}",
        ),
    );
    let pid = printed_pid(cluster, "survivor");
    let proc_dir = std::path::PathBuf::from(format!("/proc/{pid}"));
    // Its working directory, in the agent's default sandbox (under the temp dir).
    let cwd = std::fs::read_link(proc_dir.join("cwd")).expect("the process runs");
    assert!(cwd.starts_with(std::env::temp_dir()), "{}", cwd.display());
    (proc_dir, cwd)
}

/// After `down`: the survivor's process and the agent's default sandbox are gone.
pub(crate) fn survivor_gone(proc_dir: &std::path::Path, cwd: &std::path::Path) {
    eventually(15, "the survivor's process is gone", || {
        (!proc_dir.exists()).then_some(())
    });
    // The default sandbox goes with the agent.
    assert!(!cwd.exists(), "{} outlived the agent", cwd.display());
}
