//! The real node (`scripts/cluster.sh up --real-node`, testdata/node/realnode.sh): upstream's
//! kubelet on containerd and Debian's runc, registered with the real control plane, runs a Pod
//! and a Job from the images built here (testdata/images), `kubectl logs` and `kubectl exec`
//! go through the kubelet, and `down` leaves no process, mount, cgroup or network namespace of
//! it behind.

use std::path::{Path, PathBuf};
use std::process::Output;

use uyuni_testdata::Flavour;
use uyuni_testdata::real::{self, REAL_NODE, RealCluster, RealConfig};

/// One real node at a time in this process: the kernel settings the kubelet changes are the
/// machine's, and the first test checks that `down` puts back what it found.
static ONE_NODE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_node() -> std::sync::MutexGuard<'static, ()> {
    ONE_NODE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The cluster, or `None` (said so) where the real node was not built; in CI its absence
/// fails the test.
fn cluster() -> Option<RealCluster> {
    if let Err(why) = real::node_available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the real node is needed in CI: {why}"
        );
        println!("real node NOT tested: {why}");
        return None;
    }
    // No add-ons: nothing here uses their objects or claims.
    Some(
        RealCluster::start_real_node(&RealConfig {
            flavour: Flavour::Plain,
            cert_manager: false,
            addons: false,
            ..RealConfig::default()
        })
        .expect("the control plane with a real node starts"),
    )
}

fn kubectl(cluster: &RealCluster, args: &[&str], stdin: &str) -> Output {
    cluster.kubectl(args, stdin).expect("kubectl runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `kubectl ARGS`, which must succeed; its stdout.
fn ok(cluster: &RealCluster, args: &[&str], stdin: &str) -> String {
    let out = kubectl(cluster, args, stdin);
    assert!(
        out.status.success(),
        "kubectl {} failed: {}\n(the cluster's logs: {}/logs)",
        args.join(" "),
        text(&out),
        cluster.dir().display()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(cluster: &RealCluster, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&ok(cluster, &all, "")).expect("kubectl -o json prints JSON")
}

// Both pin themselves to the real node (node0, the agent, would play them otherwise) and
// never pull: their image exists only in the node's containerd.
const WORKLOADS: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: bb
  namespace: default
spec:
  nodeSelector: {kubernetes.io/hostname: realnode}
  terminationGracePeriodSeconds: 1
  containers:
  - name: bb
    image: docker.io/local/busybox:1
    imagePullPolicy: Never
    command: [sh, -c, 'echo "hello from $(hostname) as uid $(id -u)"; exec sleep 3600']
    securityContext: {runAsUser: 999}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: countdown
  namespace: default
spec:
  completions: 2
  backoffLimit: 0
  template:
    spec:
      nodeSelector: {kubernetes.io/hostname: realnode}
      restartPolicy: Never
      containers:
      - name: countdown
        image: docker.io/local/busybox:1
        imagePullPolicy: IfNotPresent
        command: [sh, -c, 'for i in 3 2 1; do echo "count $i"; done; echo liftoff']
"#;

/// What the cluster's real node leaves on the machine while it runs, found from outside it.
#[derive(Debug)]
struct Footprint {
    pids: Vec<u32>,
    netns_inode: u64,
    cgroups: Vec<PathBuf>,
}

fn cgroup_mounts() -> Vec<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .expect("/proc/self/mountinfo")
        .lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            let fstype = fields.get(sep + 1)?;
            (*fstype == "cgroup" || *fstype == "cgroup2").then(|| PathBuf::from(fields[4]))
        })
        .collect()
}

fn pids_in(tree: &Path) -> Vec<u32> {
    let mut pids = Vec::new();
    let Ok(entries) = std::fs::read_dir(tree) else {
        return pids;
    };
    if let Ok(procs) = std::fs::read_to_string(tree.join("cgroup.procs")) {
        pids.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
    }
    for entry in entries.filter_map(Result::ok) {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            pids.extend(pids_in(&entry.path()));
        }
    }
    pids
}

fn net_ns_of(pid: &str) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

fn all_pids() -> Vec<String> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.chars().all(|c| c.is_ascii_digit()))
        .collect()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn footprint(cluster: &RealCluster) -> Footprint {
    use std::os::unix::fs::MetadataExt;
    let name = format!(
        "uyuni-{}",
        cluster
            .dir()
            .file_name()
            .expect("the cluster has a directory of its own")
            .to_string_lossy()
    );
    let cgroups: Vec<PathBuf> = cgroup_mounts()
        .into_iter()
        .map(|m| m.join(&name))
        .filter(|p| p.is_dir())
        .collect();
    assert!(
        !cgroups.is_empty(),
        "the kubelet's cgroup root /{name} is in no cgroup hierarchy"
    );
    let netns_inode = std::fs::metadata(cluster.dir().join("netns"))
        .expect("DIR/netns is the cluster's network namespace")
        .ino();
    let ns = format!("net:[{netns_inode}]");
    // Every process in that namespace (the components, the shims, the pods) and in the
    // kubelet's cgroups (the pods' processes, whatever their pid namespace).
    let mut pids: Vec<u32> = all_pids()
        .into_iter()
        .filter(|p| net_ns_of(p).as_deref() == Some(ns.as_str()))
        .filter_map(|p| p.parse().ok())
        .collect();
    for cgroup in &cgroups {
        pids.extend(pids_in(cgroup));
    }
    pids.extend(cluster.pids().into_iter().map(|(_, pid)| pid));
    pids.sort_unstable();
    pids.dedup();
    Footprint {
        pids,
        netns_inode,
        cgroups,
    }
}

/// The host's kernel settings the kubelet changes at start; `down` puts them back.
const KUBELET_SYSCTLS: [&str; 4] = [
    "/proc/sys/vm/overcommit_memory",
    "/proc/sys/vm/panic_on_oom",
    "/proc/sys/kernel/panic",
    "/proc/sys/kernel/panic_on_oops",
];

fn sysctls() -> Vec<String> {
    KUBELET_SYSCTLS
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect()
}

#[test]
fn a_pod_and_a_job_run_in_containerd_on_the_real_node_and_down_leaves_nothing_behind() {
    let _one = one_node();
    let sysctls_before = sysctls();
    let Some(cluster) = cluster() else { return };

    // The kubelet registered itself, and its runtime is containerd's CRI.
    let node = json(&cluster, &["get", "node", REAL_NODE]);
    let info = &node["status"]["nodeInfo"];
    assert_eq!(info["kubeletVersion"], "v1.37.2", "{info}");
    let runtime = info["containerRuntimeVersion"].as_str().unwrap_or_default();
    assert!(
        runtime.starts_with("containerd://2.4.2"),
        "the real node's runtime is {runtime:?}, not containerd 2.4.2"
    );

    ok(&cluster, &["apply", "-f", "-"], WORKLOADS);
    // Watches, not a fixed pause: each waits for the condition's event (the time is a bound).
    ok(
        &cluster,
        &[
            "wait",
            "--for=condition=Ready",
            "pod/bb",
            "-n",
            "default",
            "--timeout=300s",
        ],
        "",
    );
    ok(
        &cluster,
        &[
            "wait",
            "--for=condition=Complete",
            "job/countdown",
            "-n",
            "default",
            "--timeout=300s",
        ],
        "",
    );

    // The container is containerd's, of the image imported under that name: its ID is the
    // image's config digest that testdata/images/mkimage.py wrote.
    let pod = json(&cluster, &["get", "pod", "bb", "-n", "default"]);
    assert_eq!(pod["spec"]["nodeName"], REAL_NODE);
    let status = &pod["status"]["containerStatuses"][0];
    let images = std::fs::read_to_string(cluster.dir().join("node/images"))
        .expect("the launcher lists the images it imported in DIR/node/images");
    let busybox_digest = images
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(1) == Some(&"docker.io/local/busybox:1")).then(|| f[2].to_owned())
        })
        .expect("busybox is in DIR/node/images");
    let image_id = status["imageID"].as_str().unwrap_or_default();
    assert!(
        image_id.ends_with(&busybox_digest),
        "the container's imageID {image_id:?} is not busybox's {busybox_digest}: {status}"
    );
    let container_id = status["containerID"].as_str().unwrap_or_default();
    assert!(
        container_id.starts_with("containerd://"),
        "the container's ID {container_id:?} is not containerd's"
    );

    // Its output, read by the kubelet from the log containerd wrote; the container's own
    // hostname (its UTS namespace) and the uid the pod asked for.
    let logs = ok(&cluster, &["logs", "bb", "-n", "default"], "");
    assert_eq!(logs.trim(), "hello from bb as uid 999", "{logs}");
    // Written under the cluster's directory (the kubelet's podLogsDir), not the machine's
    // /var/log/pods.
    let uid = pod["metadata"]["uid"].as_str().expect("the pod has a uid");
    let pod_logs = format!("default_bb_{uid}");
    assert!(
        cluster
            .dir()
            .join("node/pods-logs")
            .join(&pod_logs)
            .is_dir(),
        "no {pod_logs} in DIR/node/pods-logs"
    );
    assert!(!Path::new("/var/log/pods").join(&pod_logs).exists());
    // kubectl exec: the API server to the kubelet to containerd's stream server to runc.
    let exec = ok(
        &cluster,
        &["exec", "bb", "-n", "default", "--", "cat", "/etc/passwd"],
        "",
    );
    assert!(exec.contains("postgres:x:999:999"), "{exec}");

    let job = json(&cluster, &["get", "job", "countdown", "-n", "default"]);
    assert_eq!(job["status"]["succeeded"], 2, "{}", job["status"]);
    let job_logs = ok(&cluster, &["logs", "job/countdown", "-n", "default"], "");
    assert_eq!(
        job_logs.trim(),
        "count 3\ncount 2\ncount 1\nliftoff",
        "{job_logs}"
    );

    // Nothing of the pods can leave the machine: their namespace has no route beyond its own
    // networks (the kubelet's veth, the pods' bridge).
    let netns = format!("--net={}", cluster.dir().join("netns").display());
    let routes = std::process::Command::new("nsenter")
        .args([netns.as_str(), "ip", "-4", "route", "show"])
        .output()
        .expect("nsenter runs ip");
    assert!(routes.status.success(), "{}", text(&routes));
    let routes = String::from_utf8_lossy(&routes.stdout).into_owned();
    let mut networks: Vec<&str> = routes
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    networks.sort_unstable();
    assert_eq!(networks, ["10.200.0.0/24", "10.244.0.0/24"], "{routes}");

    // Then `down`: nothing of the node is left.
    let before = footprint(&cluster);
    assert!(
        before.pids.len() > 8,
        "fewer processes than the components, shims and pods: {before:?}"
    );
    let dir = cluster.dir().to_owned();
    cluster.stop().expect("scripts/cluster.sh down succeeds");

    let left: Vec<u32> = before.pids.iter().copied().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "processes left running: {left:?}");
    let ns = format!("net:[{}]", before.netns_inode);
    let in_ns: Vec<String> = all_pids()
        .into_iter()
        .filter(|p| net_ns_of(p).as_deref() == Some(ns.as_str()))
        .collect();
    assert!(in_ns.is_empty(), "processes left in {ns}: {in_ns:?}");
    let mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .expect("/proc/self/mountinfo")
        .lines()
        .filter(|l| l.contains(dir.to_string_lossy().as_ref()) || l.contains(&ns))
        .map(str::to_owned)
        .collect();
    assert!(mounts.is_empty(), "mounts left: {mounts:#?}");
    let cgroups: Vec<&PathBuf> = before.cgroups.iter().filter(|c| c.exists()).collect();
    assert!(cgroups.is_empty(), "cgroups left: {cgroups:?}");
    assert!(
        !dir.join("netns").exists(),
        "the network namespace's file is left"
    );
    let links: Vec<PathBuf> = std::fs::read_dir("/var/log/containers")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| std::fs::read_link(p).is_ok_and(|t| t.starts_with(&dir)))
        .collect();
    assert!(links.is_empty(), "the kubelet's log links left: {links:?}");
    assert_eq!(
        sysctls(),
        sysctls_before,
        "the kernel settings {KUBELET_SYSCTLS:?} were not put back"
    );
}

// The database stand-in (testdata/images/postgres-entrypoint.sh) on a claim of the default
// StorageClass: the add-ons' provisioner makes a hostPath volume under DIR/volumes for the node
// the scheduler picked, the real kubelet mounts it. As on the official chart's pod, PostgreSQL
// runs as 999; a hostPath volume takes no fsGroup, so a root init container hands it over.
const DATABASE_CLAIM: &str = r#"apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: pgdata
  namespace: default
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
"#;

const DATABASE_POD: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: db
  namespace: default
spec:
  nodeSelector: {kubernetes.io/hostname: realnode}
  terminationGracePeriodSeconds: 10
  initContainers:
  - name: own
    image: docker.io/local/busybox:1
    imagePullPolicy: Never
    command: [chown, '999:999', /var/lib/pgsql/data]
    volumeMounts: [{name: data, mountPath: /var/lib/pgsql/data}]
  containers:
  - name: postgres
    image: docker.io/local/postgres:18
    imagePullPolicy: Never
    securityContext: {runAsUser: 999, runAsGroup: 999, runAsNonRoot: true}
    volumeMounts: [{name: data, mountPath: /var/lib/pgsql/data}]
    readinessProbe:
      exec: {command: [pg_isready, -h, /tmp, -U, postgres]}
      periodSeconds: 1
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: pgdata}
"#;

fn wait_ready(cluster: &RealCluster, pod: &str) {
    ok(
        cluster,
        &[
            "wait",
            "--for=condition=Ready",
            &format!("pod/{pod}"),
            "-n",
            "default",
            "--timeout=300s",
        ],
        "",
    );
}

fn psql(cluster: &RealCluster, sql: &str) -> String {
    ok(
        cluster,
        &[
            "exec", "db", "-n", "default", "-c", "postgres", "--", "psql", "-h", "/tmp", "-U",
            "postgres", "-tAc", sql,
        ],
        "",
    )
    .trim()
    .to_owned()
}

#[test]
fn postgres_18_runs_as_999_on_a_claim_of_the_default_class_and_keeps_its_data() {
    use std::os::unix::fs::MetadataExt;
    let _one = one_node();
    if let Err(why) = real::node_available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the real node is needed in CI: {why}"
        );
        println!("real node NOT tested: {why}");
        return;
    }
    let cluster = RealCluster::start_real_node(&RealConfig {
        flavour: Flavour::Plain,
        cert_manager: false,
        ..RealConfig::default()
    })
    .expect("the control plane with a real node and the add-ons starts");

    ok(&cluster, &["apply", "-f", "-"], DATABASE_CLAIM);
    ok(&cluster, &["apply", "-f", "-"], DATABASE_POD);
    wait_ready(&cluster, "db");

    let claim = json(&cluster, &["get", "pvc", "pgdata", "-n", "default"]);
    assert_eq!(claim["status"]["phase"], "Bound", "{}", claim["status"]);
    assert_eq!(claim["spec"]["storageClassName"], "local-path");
    let volume = claim["spec"]["volumeName"]
        .as_str()
        .expect("a bound claim names its volume");
    let pv = json(&cluster, &["get", "pv", volume]);
    let path = PathBuf::from(pv["spec"]["hostPath"]["path"].as_str().unwrap_or_default());
    assert!(
        path.starts_with(cluster.dir().join("volumes")),
        "the volume {} is not under DIR/volumes",
        path.display()
    );

    let version = psql(&cluster, "show server_version");
    assert!(version.starts_with("18."), "server_version {version:?}");
    assert_eq!(psql(&cluster, "select current_user"), "postgres");
    // initdb wrote the cluster into the claim's directory on this machine, as uid 999.
    let pg_version = path.join("PG_VERSION");
    let meta = std::fs::metadata(&pg_version)
        .unwrap_or_else(|e| panic!("{} is not there: {e}", pg_version.display()));
    assert_eq!((meta.uid(), meta.gid()), (999, 999));
    assert_eq!(
        std::fs::read_to_string(&pg_version)
            .expect("PG_VERSION")
            .trim(),
        "18"
    );

    // The data outlive the pod: a new one on the same claim finds them.
    psql(
        &cluster,
        "create table kept (x int); insert into kept values (42)",
    );
    ok(
        &cluster,
        &["delete", "pod", "db", "-n", "default", "--wait=true"],
        "",
    );
    ok(&cluster, &["apply", "-f", "-"], DATABASE_POD);
    wait_ready(&cluster, "db");
    assert_eq!(psql(&cluster, "select x from kept"), "42");
}
