//! The node agent (`uyuni-node-agent`) on the real control plane: upstream's scheduler binds
//! pods to our Node, upstream's Job, ReplicaSet, Deployment and namespace controllers act on
//! what the agent reports, RBAC decides the side effects it runs as the pods' ServiceAccounts,
//! and real kubectl reads the logs through the apiserver from the agent's kubelet endpoint.

use crate::agent_support;

use std::time::{Duration, Instant};

use agent_support::{apply, eventually, kubectl, ok, text};
use uyuni_testdata::real::RealCluster;
use uyuni_testdata::{DeploymentScript, JobScript, Scenario};

fn job(name: &str, step: &str, service_account: &str) -> String {
    format!(
        "apiVersion: batch/v1
kind: Job
metadata:
  name: {name}
  namespace: agent
  annotations: {{kubectl-uyuni.io/step: {step}}}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      serviceAccountName: {service_account}
      initContainers:
      - {{name: prepare, image: registry.opensuse.org/uyuni/server-migration:latest}}
      containers:
      - {{name: main, image: registry.opensuse.org/uyuni/server-migration:latest}}
"
    )
}

const SETUP: &str = "apiVersion: v1
kind: Namespace
metadata: {name: agent}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: runner, namespace: agent}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: nobody, namespace: agent}
---
apiVersion: v1
kind: Secret
metadata: {name: target, namespace: agent}
stringData: {before: 'yes'}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: patch-target, namespace: agent}
rules:
- {apiGroups: [''], resources: [secrets], resourceNames: [target], verbs: [get, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: runner-patches-target, namespace: agent}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: patch-target}
subjects:
- {kind: ServiceAccount, name: runner, namespace: agent}
";

/// restartPolicy OnFailure: the failing container is restarted in place until the Job
/// controller gives up (restarts count against backoffLimit).
const RETRIED: &str = "apiVersion: batch/v1
kind: Job
metadata:
  name: retried-1
  namespace: agent
  annotations: {kubectl-uyuni.io/step: flaky}
spec:
  backoffLimit: 4
  template:
    spec:
      restartPolicy: OnFailure
      containers:
      - {name: main, image: registry.opensuse.org/uyuni/server-migration:latest}
";

const WEB: &str = "apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: agent}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - {name: web, image: registry.opensuse.org/uyuni/server:latest}
";

fn scenario() -> Scenario {
    let mut s = Scenario::default();
    s.jobs.insert(
        "sync".to_owned(),
        JobScript::succeed(
            6000,
            &[
                "syncing for $JOB_NAME",
                "still syncing",
                "Data synchronized",
            ],
        ),
    );
    s.jobs
        .insert("broken".to_owned(), JobScript::fail(3, &["about to fail"]));
    s.jobs.insert(
        "flaky".to_owned(),
        JobScript {
            duration_ms: 1500,
            ..JobScript::fail(2, &["about to fail"])
        },
    );
    s.jobs
        .insert("pull".to_owned(), JobScript::stuck("ImagePullBackOff"));
    s.jobs.insert(
        "extract".to_owned(),
        JobScript::succeed(500, &["extracting"]).patching_secret("target", &[("job", "$JOB_NAME")]),
    );
    s.deployments.insert(
        "web".to_owned(),
        DeploymentScript {
            ready_after_ms: Some(300),
            ..DeploymentScript::default()
        },
    );
    s
}

fn jsonpath(cluster: &RealCluster, args: &[&str], path: &str) -> String {
    let arg = format!("jsonpath={path}");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["-o", &arg]);
    ok(cluster, &all)
}

/// One cluster for both of the agent's tests, run side by side: this module's pods played
/// for the real controllers (namespace `agent`), and `node_agent_exec`'s commands (namespace
/// `exec`, whose pods play no scenario). A start of its own each cost about 5 s of CPU. Then
/// `down` stops the agent and what it runs.
#[test]
fn the_node_agent_runs_pods_for_the_real_controllers_and_commands_where_asked() {
    let mut scenario = scenario();
    scenario
        .namespaces
        .insert("exec".to_owned(), Scenario::default());
    let Some(cluster) = agent_support::cluster("node agent", &scenario) else {
        return;
    };
    std::thread::scope(|s| {
        let pods = s.spawn(|| pods_for_the_real_controllers(&cluster));
        let commands = s.spawn(|| crate::node_agent_exec::commands_where_asked(&cluster));
        for side in [pods.join(), commands.join()] {
            if let Err(panic) = side {
                std::panic::resume_unwind(panic);
            }
        }
    });
    let (survivor, sandbox) = crate::node_agent_exec::survivor(&cluster);

    // `down` stops the agent too, and the commands it runs.
    let pids = cluster.pids();
    assert!(
        pids.iter().any(|(n, _)| n == "uyuni-node-agent"),
        "{pids:?}"
    );
    cluster.stop().expect("down");
    for (name, pid) in &pids {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .unwrap_or_default()
                    .contains(") Z "),
            "{name} ({pid}) still runs after down"
        );
    }
    crate::node_agent_exec::survivor_gone(&survivor, &sandbox);
}

/// Upstream's controllers and the pods the agent plays for them, in namespace `agent`.
fn pods_for_the_real_controllers(cluster: &RealCluster) {
    // The Node is Ready, reachable on loopback, and holds a Lease.
    let ready = jsonpath(
        cluster,
        &["get", "node", "node0"],
        "{.status.conditions[?(@.type==\"Ready\")].status} {.status.addresses[0].address} {.status.nodeInfo.kubeletVersion}",
    );
    assert_eq!(ready, "True 127.0.0.1 v1.37.2");
    let lease = |c: &RealCluster| {
        jsonpath(
            c,
            &["get", "lease", "node0", "-n", "kube-node-lease"],
            "{.spec.renewTime}",
        )
    };
    let first_renewal = lease(cluster);
    assert!(!first_renewal.is_empty());
    let started = Instant::now();

    apply(cluster, SETUP);
    // The ServiceAccount controller makes `default`; pods need it (ServiceAccount admission).
    eventually(30, "the default ServiceAccount of namespace agent", || {
        kubectl(cluster, &["get", "sa", "default", "-n", "agent"])
            .status
            .success()
            .then_some(())
    });
    apply(cluster, &job("broken-1", "broken", "default"));
    apply(cluster, &job("pull-1", "pull", "default"));
    apply(cluster, &job("allowed-1", "extract", "runner"));
    apply(cluster, &job("denied-1", "extract", "nobody"));
    apply(cluster, WEB);
    apply(cluster, RETRIED);
    // OnFailure: restarted in place, the last instance's log as --previous.
    // Restarted and running again: the crashed instance is now the previous one (while it
    // backs off, kubelet too serves the crashed one as the current log).
    eventually(
        30,
        "retried-1's container runs again after a restart",
        || {
            let n = jsonpath(
                cluster,
                &["get", "pod", "-n", "agent", "-l", "job-name=retried-1"],
                "{.items[*].status.containerStatuses[*].restartCount} {.items[*].status.containerStatuses[*].state.running.startedAt}",
            );
            let (count, running) = n.split_once(' ').unwrap_or_default();
            (count.parse::<u32>().unwrap_or(0) >= 1 && !running.trim().is_empty()).then_some(())
        },
    );
    let previous = ok(
        cluster,
        &["logs", "-n", "agent", "job/retried-1", "--previous"],
    );
    assert_eq!(previous, "about to fail\n");
    // Last, so that it still runs when the follow below starts (it runs 6 s).
    apply(cluster, &job("sync-1", "sync", "default"));

    // A followed log (real kubectl → apiserver → the agent) streams the lines as they come and
    // ends when the container terminates.
    ok(
        cluster,
        &[
            "wait",
            "-n",
            "agent",
            "pod",
            "-l",
            "job-name=sync-1",
            "--for=condition=Ready",
            "--timeout=60s",
        ],
    );
    let followed = ok(cluster, &["logs", "-n", "agent", "-f", "job/sync-1"]);
    assert_eq!(
        followed,
        "syncing for sync-1\nstill syncing\nData synchronized\n"
    );
    // The real Job controller saw the pod succeed.
    ok(
        cluster,
        &[
            "wait",
            "-n",
            "agent",
            "job/sync-1",
            "--for=condition=Complete",
            "--timeout=60s",
        ],
    );
    let logs = ok(
        cluster,
        &[
            "logs",
            "-n",
            "agent",
            "job/sync-1",
            "--tail=1",
            "--timestamps",
        ],
    );
    assert!(
        logs.ends_with("Z Data synchronized\n") && logs.lines().count() == 1,
        "{logs}"
    );
    let init = jsonpath(
        cluster,
        &["get", "pod", "-n", "agent", "-l", "job-name=sync-1"],
        "{.items[0].status.initContainerStatuses[0].state.terminated.reason} {.items[0].status.phase} {.items[0].status.podIP}",
    );
    assert!(init.starts_with("Completed Succeeded 10.244."), "{init}");
    // The scheduler's condition is still there after the agent's status writes.
    let scheduled = jsonpath(
        cluster,
        &["get", "pod", "-n", "agent", "-l", "job-name=sync-1"],
        "{.items[0].status.conditions[?(@.type==\"PodScheduled\")].status}",
    );
    assert_eq!(scheduled, "True");

    // A failing step: Job Failed, the exit code in the pod's status.
    ok(
        cluster,
        &[
            "wait",
            "-n",
            "agent",
            "job/broken-1",
            "--for=condition=Failed",
            "--timeout=60s",
        ],
    );
    let exit = jsonpath(
        cluster,
        &["get", "pod", "-n", "agent", "-l", "job-name=broken-1"],
        "{.items[0].status.containerStatuses[0].state.terminated.exitCode} {.items[0].status.containerStatuses[0].state.terminated.reason} {.items[0].status.phase}",
    );
    assert_eq!(exit, "3 Error Failed");

    // The Job controller's verdict on retried-1 (its pod deleted, so the agent finishes it off).
    ok(
        cluster,
        &[
            "wait",
            "-n",
            "agent",
            "job/retried-1",
            "--for=condition=Failed",
            "--timeout=90s",
        ],
    );
    eventually(30, "retried-1's pod is gone", || {
        let out = ok(
            cluster,
            &[
                "get",
                "pods",
                "-n",
                "agent",
                "-l",
                "job-name=retried-1",
                "-o",
                "name",
            ],
        );
        out.trim().is_empty().then_some(())
    });

    // A stuck step: its waiting reason is what `kubectl get pods` shows.
    let shown = eventually(30, "pull-1's pod shows ImagePullBackOff", || {
        let out = ok(
            cluster,
            &["get", "pods", "-n", "agent", "-l", "job-name=pull-1"],
        );
        out.contains("ImagePullBackOff").then_some(out)
    });
    assert!(shown.contains("0/1"), "{shown}");
    // Its logs are refused as kubelet refuses them, the reason passed on by the apiserver.
    let refused = kubectl(cluster, &["logs", "-n", "agent", "job/pull-1"]);
    assert!(
        !refused.status.success()
            && text(&refused).contains("is waiting to start: ImagePullBackOff"),
        "{}",
        text(&refused)
    );

    // The kubelet endpoint wants a client certificate chained to the cluster CA.
    let port = jsonpath(
        cluster,
        &["get", "node", "node0"],
        "{.status.daemonEndpoints.kubeletEndpoint.Port}",
    );
    let pki = cluster.dir().join("pki");
    let url = format!("https://127.0.0.1:{port}/containerLogs/agent/no-such-pod/main");
    let curl = |with_cert: bool| {
        let mut c = std::process::Command::new("curl");
        c.args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
            .arg(pki.join("ca.crt"));
        if with_cert {
            c.arg("--cert")
                .arg(pki.join("admin.crt"))
                .arg("--key")
                .arg(pki.join("admin.key"));
        }
        c.arg(&url).output().expect("curl runs")
    };
    let anonymous = curl(false);
    assert!(
        !anonymous.status.success(),
        "no client certificate: {}",
        text(&anonymous)
    );
    let known = curl(true);
    assert_eq!(
        String::from_utf8_lossy(&known.stdout),
        "404",
        "{}",
        text(&known)
    );

    // Side effects run as the pod's ServiceAccount: allowed by the Role, the Secret is patched;
    // without one, the Job fails with the apiserver's refusal in its log.
    ok(
        cluster,
        &[
            "wait",
            "-n",
            "agent",
            "job/allowed-1",
            "--for=condition=Complete",
            "--timeout=60s",
        ],
    );
    let patched = jsonpath(
        cluster,
        &["get", "secret", "target", "-n", "agent"],
        "{.data.job}",
    );
    assert_eq!(patched, "YWxsb3dlZC0x", "base64 of allowed-1");
    ok(
        cluster,
        &[
            "wait",
            "-n",
            "agent",
            "job/denied-1",
            "--for=condition=Failed",
            "--timeout=60s",
        ],
    );
    let refused = ok(cluster, &["logs", "-n", "agent", "job/denied-1"]);
    assert!(
        refused.contains("Error from server (Forbidden)")
            && refused.contains("system:serviceaccount:agent:nobody"),
        "{refused}"
    );
    let exit = jsonpath(
        cluster,
        &["get", "pod", "-n", "agent", "-l", "job-name=denied-1"],
        "{.items[0].status.containerStatuses[0].state.terminated.exitCode}",
    );
    assert_eq!(exit, "1");

    // A Deployment becomes Available through its ReplicaSet; scaled to 0, no pod is left.
    ok(
        cluster,
        &[
            "wait",
            "-n",
            "agent",
            "deployment/web",
            "--for=condition=Available",
            "--timeout=60s",
        ],
    );
    let ready = jsonpath(
        cluster,
        &["get", "deployment", "web", "-n", "agent"],
        "{.status.readyReplicas}",
    );
    assert_eq!(ready, "2");
    ok(
        cluster,
        &["scale", "-n", "agent", "deployment/web", "--replicas=0"],
    );
    eventually(60, "no pod of web is left after scaling to 0", || {
        let out = ok(
            cluster,
            &["get", "pods", "-n", "agent", "-l", "app=web", "-o", "name"],
        );
        out.trim().is_empty().then_some(())
    });

    // The Lease was renewed meanwhile (every ~10 s).
    if let Some(wait) = Duration::from_secs(12).checked_sub(started.elapsed()) {
        std::thread::sleep(wait);
    }
    eventually(15, "the Lease is renewed", || {
        let now = lease(cluster);
        (now > first_renewal).then_some(())
    });

    // Deleting the namespace completes: the agent finishes off its Terminating pods.
    ok(cluster, &["delete", "namespace", "agent", "--timeout=90s"]);
    let gone = kubectl(cluster, &["get", "namespace", "agent"]);
    assert!(text(&gone).contains("NotFound"), "{}", text(&gone));
}
