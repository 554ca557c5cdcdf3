//! `uyuni-cluster-addons` against the real control plane: the distribution's objects are
//! admitted and served, the real PV controller binds the volumes our provisioner makes (and
//! the real DefaultStorageClass admission gives class-less claims `local-path`), released
//! volumes are deleted only when they should be, and the cert-manager stand-in issues a chain
//! that verifies. Without the node agent no pod runs, so the scheduler's part in
//! WaitForFirstConsumer provisioning (setting `volume.kubernetes.io/selected-node`) is played
//! by the test.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;
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
    Some(
        // Without the launcher's add-ons: each test starts its own, with the flags it tests.
        RealCluster::start_config(&RealConfig {
            addons: false,
            ..RealConfig::default()
        })
        .expect("the real control plane starts"),
    )
}

/// The add-ons process; killed on drop. Its log is `DIR/logs/addons.log`.
struct Addons {
    child: Child,
    log: PathBuf,
    volumes: PathBuf,
}

impl Drop for Addons {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Addons {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Starts `uyuni-cluster-addons` with `args` and waits for its `addons ready` line. Its
/// controllers resync every half second (not every 5 s) and log each pass, so that a test
/// waits for passes ([`wait_for_passes`]) rather than for a fixed time.
fn start_addons(cluster: &RealCluster, args: &[&str]) -> Addons {
    let log = cluster.dir().join("logs/addons.log");
    let volumes = cluster.dir().join("volumes");
    let child = Command::new(env!("CARGO_BIN_EXE_uyuni-cluster-addons"))
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .arg("--volumes-dir")
        .arg(&volumes)
        .args(["--resync-ms", "500"])
        .args(args)
        .env("RUST_LOG", "info,uyuni_testdata::addons=debug")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("the add-ons' log file"))
        .spawn()
        .expect("uyuni-cluster-addons starts");
    let mut addons = Addons {
        child,
        log,
        volumes,
    };
    let stdout = addons.child.stdout.take().expect("stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    match rx.recv_timeout(Duration::from_secs(90)) {
        Ok(line) if line == "addons ready" => addons,
        other => panic!(
            "uyuni-cluster-addons did not say `addons ready` ({other:?}); its log:\n{}",
            addons.log()
        ),
    }
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

fn ok(cluster: &RealCluster, args: &[&str], stdin: Option<&str>) -> String {
    let out = kubectl(cluster, args, stdin);
    assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The object as JSON, or `None` if it does not exist.
fn get(cluster: &RealCluster, args: &[&str]) -> Option<Value> {
    let mut all = vec!["get", "-o", "json"];
    all.extend_from_slice(args);
    let out = kubectl(cluster, &all, None);
    if !out.status.success() {
        assert!(text(&out).contains("NotFound"), "{}", text(&out));
        return None;
    }
    Some(serde_json::from_slice(&out.stdout).expect("kubectl -o json prints JSON"))
}

/// Polls `check` until it returns `Some`, for up to `secs` seconds.
fn wait_for<T>(addons: &Addons, what: &str, secs: u64, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs}s waiting for {what}; the add-ons' log:\n{}",
            addons.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// How many reconcile passes `controller` (`provisioner`, `cert-manager`) has finished.
fn passes(addons: &Addons, controller: &str) -> usize {
    addons
        .log()
        .matches(&format!("{controller}: pass done"))
        .count()
}

/// Waits until `controller` has finished `n` more reconcile passes: what it would do to the
/// objects as they are now, it has done by then (the pass running now may have read them
/// before, so `n` of at least 2 covers one whole pass).
fn wait_for_passes(addons: &Addons, controller: &str, n: usize) {
    let start = passes(addons, controller);
    wait_for(
        addons,
        &format!("{n} more passes of the {controller}"),
        60,
        || (passes(addons, controller) >= start + n).then_some(()),
    );
}

fn ready(object: &Value) -> Option<&Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Ready")
}

fn is_ready(object: &Value) -> bool {
    ready(object).is_some_and(|c| c["status"] == "True")
}

fn claim(name: &str, class: Option<&str>) -> String {
    let class = class.map_or(String::new(), |c| format!("  storageClassName: {c}\n"));
    format!(
        "apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {name}, namespace: uyuni}}
spec:
{class}  accessModes: [ReadWriteOnce]
  resources: {{requests: {{storage: 1Gi}}}}
"
    )
}

fn bound_pv(cluster: &RealCluster, addons: &Addons, name: &str) -> Value {
    let pvc = wait_for(addons, &format!("claim {name} Bound"), 60, || {
        get(cluster, &["pvc", name, "-n", "uyuni"]).filter(|p| p["status"]["phase"] == "Bound")
    });
    let pv_name = format!("pvc-{}", pvc["metadata"]["uid"].as_str().expect("a uid"));
    assert_eq!(pvc["spec"]["volumeName"], pv_name.as_str(), "{pvc}");
    get(cluster, &["pv", &pv_name]).expect("the bound PV exists")
}

fn decoded(secret: &Value, field: &str) -> String {
    let b64 = secret["data"][field].as_str().unwrap_or_default();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64"),
    )
    .expect("PEM is text")
}

fn openssl_verify(dir: &Path, ca: &str, leaf: &str) -> Output {
    std::fs::write(dir.join("ca.pem"), ca).expect("write");
    std::fs::write(dir.join("leaf.pem"), leaf).expect("write");
    Command::new("openssl")
        .args(["verify", "-CAfile", "ca.pem", "leaf.pem"])
        .current_dir(dir)
        .output()
        .expect("openssl runs")
}

const CHAIN: &str = "apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: selfsigned, namespace: uyuni}
spec: {selfSigned: {}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: uyuni-ca, namespace: uyuni}
spec:
  isCA: true
  commonName: uyuni-ca
  secretName: uyuni-ca
  duration: 8760h
  issuerRef: {name: selfsigned, kind: Issuer}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: uyuni-ca-issuer, namespace: uyuni}
spec: {ca: {secretName: uyuni-ca}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: uyuni-cert, namespace: uyuni}
spec:
  commonName: uyuni.example.com
  dnsNames: [uyuni.example.com]
  secretName: uyuni-cert
  issuerRef: {name: uyuni-ca-issuer, kind: Issuer}
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: missing-ca}
spec: {ca: {secretName: no-such-secret}}
";

#[test]
fn k3s_with_cert_manager_serves_its_objects_provisions_and_issues() {
    let Some(cluster) = cluster() else { return };
    let addons = start_addons(
        &cluster,
        &[
            "--flavour",
            "k3s",
            "--cert-manager",
            "--binding-mode",
            "Immediate",
        ],
    );

    // The CRDs are Established (the add-ons waited for that before saying ready).
    for crd in [
        "certificates.cert-manager.io",
        "issuers.cert-manager.io",
        "clusterissuers.cert-manager.io",
        "ingressroutes.traefik.io",
        "helmchartconfigs.helm.cattle.io",
    ] {
        let crd = get(&cluster, &["crd", crd]).expect("the CRD exists");
        assert!(
            crd["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Established" && c["status"] == "True"),
            "{crd}"
        );
    }
    let classes = ok(&cluster, &["get", "ingressclass"], None);
    assert!(classes.contains("traefik"), "{classes}");
    let sc = ok(&cluster, &["get", "sc"], None);
    assert!(
        sc.lines()
            .any(|l| l.starts_with("local-path (default)") && l.contains("rancher.io/local-path")),
        "{sc}"
    );
    for d in [
        "cert-manager",
        "cert-manager-cainjector",
        "cert-manager-webhook",
    ] {
        assert!(get(&cluster, &["deployment", d, "-n", "cert-manager"]).is_some());
    }
    assert!(get(&cluster, &["deployment", "traefik", "-n", "kube-system"]).is_some());

    ok(&cluster, &["create", "namespace", "uyuni"], None);

    // A class-less claim: the real DefaultStorageClass admission gives it local-path, the real
    // PV controller leaves it to rancher.io/local-path, we make the PV, the controller binds.
    ok(
        &cluster,
        &["apply", "-f", "-"],
        Some(&claim("var-pgsql", None)),
    );
    let pvc = get(&cluster, &["pvc", "var-pgsql", "-n", "uyuni"]).expect("the claim");
    assert_eq!(pvc["spec"]["storageClassName"], "local-path", "{pvc}");
    let pv = bound_pv(&cluster, &addons, "var-pgsql");
    assert_eq!(pv["spec"]["claimRef"]["uid"], pvc["metadata"]["uid"]);
    assert_eq!(pv["spec"]["capacity"]["storage"], "1Gi");
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(
        pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"],
        "rancher.io/local-path"
    );
    let dir = addons.volumes.join("uyuni-var-pgsql");
    assert!(dir.is_dir(), "{} was not created", dir.display());
    let pv_name = pv["metadata"]["name"].as_str().expect("a name").to_string();

    // A Retain class: its volume outlives the claim, directory and all.
    ok(
        &cluster,
        &["apply", "-f", "-"],
        Some(
            "apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local-path-retain}
provisioner: rancher.io/local-path
reclaimPolicy: Retain
volumeBindingMode: Immediate
",
        ),
    );
    ok(
        &cluster,
        &["apply", "-f", "-"],
        Some(&claim("kept", Some("local-path-retain"))),
    );
    let kept = bound_pv(&cluster, &addons, "kept");
    assert_eq!(kept["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    let kept_name = kept["metadata"]["name"]
        .as_str()
        .expect("a name")
        .to_string();

    // Deleting the claims: the Delete volume goes with its directory, the Retain one stays.
    ok(
        &cluster,
        &["delete", "pvc", "var-pgsql", "kept", "-n", "uyuni"],
        None,
    );
    wait_for(&addons, "the released Delete PV to go", 60, || {
        get(&cluster, &["pv", &pv_name]).is_none().then_some(())
    });
    assert!(!dir.exists(), "{} was not removed", dir.display());
    let kept = wait_for(&addons, "the Retain PV to be Released", 60, || {
        get(&cluster, &["pv", &kept_name]).filter(|p| p["status"]["phase"] == "Released")
    });
    // Nor is a released Delete volume that another provisioner made ours to delete.
    ok(
        &cluster,
        &["apply", "-f", "-"],
        Some(
            "apiVersion: v1
kind: PersistentVolume
metadata:
  name: foreign
  annotations: {pv.kubernetes.io/provisioned-by: nfs.csi.k8s.io}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  storageClassName: nfs
  hostPath: {path: /srv/nfs/foreign}
  claimRef: {namespace: uyuni, name: gone, uid: 00000000-0000-0000-0000-000000000000}
",
        ),
    );
    wait_for(&addons, "the foreign PV to be Released", 60, || {
        get(&cluster, &["pv", "foreign"])
            .filter(|p| p["status"]["phase"] != "Available" && p["status"]["phase"] != "Pending")
    });
    // Several resyncs later both are still there.
    wait_for_passes(&addons, "provisioner", 3);
    assert!(get(&cluster, &["pv", &kept_name]).is_some(), "{kept}");
    assert!(get(&cluster, &["pv", "foreign"]).is_some());
    assert!(addons.volumes.join("uyuni-kept").is_dir());
    // The same claim again: a volume of its own, not the retained one's directory.
    ok(
        &cluster,
        &["apply", "-f", "-"],
        Some(&claim("kept", Some("local-path-retain"))),
    );
    let again = bound_pv(&cluster, &addons, "kept");
    assert_ne!(again["metadata"]["name"], kept_name.as_str());
    let path = again["spec"]["hostPath"]["path"]
        .as_str()
        .expect("a hostPath");
    assert_ne!(Path::new(path), addons.volumes.join("uyuni-kept"));
    assert!(Path::new(path).is_dir());

    // cert-manager: selfSigned Issuer → CA Certificate → CA Issuer → server Certificate.
    ok(&cluster, &["apply", "-f", "-"], Some(CHAIN));
    let cert = wait_for(&addons, "Certificate uyuni-cert Ready", 60, || {
        get(&cluster, &["certificate", "uyuni-cert", "-n", "uyuni"]).filter(is_ready)
    });
    assert_eq!(cert["status"]["revision"], 1, "{cert}");
    for field in ["notBefore", "notAfter", "renewalTime"] {
        assert!(cert["status"][field].is_string(), "{field}: {cert}");
    }
    assert_eq!(ready(&cert).expect("Ready")["observedGeneration"], 1);
    for issuer in ["selfsigned", "uyuni-ca-issuer"] {
        let issuer = get(&cluster, &["issuer", issuer, "-n", "uyuni"]).expect("the issuer");
        assert!(is_ready(&issuer), "{issuer}");
    }
    let ca_issuer = get(&cluster, &["issuer", "uyuni-ca-issuer", "-n", "uyuni"]).expect("issuer");
    assert_eq!(
        ready(&ca_issuer).expect("Ready")["reason"],
        "KeyPairVerified"
    );

    let ca = get(&cluster, &["secret", "uyuni-ca", "-n", "uyuni"]).expect("the CA's Secret");
    let leaf = get(&cluster, &["secret", "uyuni-cert", "-n", "uyuni"]).expect("the Secret");
    assert_eq!(leaf["type"], "kubernetes.io/tls");
    let a = &leaf["metadata"]["annotations"];
    assert_eq!(a["cert-manager.io/certificate-name"], "uyuni-cert");
    assert_eq!(a["cert-manager.io/issuer-name"], "uyuni-ca-issuer");
    assert_eq!(a["cert-manager.io/issuer-kind"], "Issuer");
    assert_eq!(a["cert-manager.io/common-name"], "uyuni.example.com");
    assert_eq!(decoded(&leaf, "ca.crt"), decoded(&ca, "tls.crt"));
    assert!(decoded(&leaf, "tls.key").contains("PRIVATE KEY"));
    let tmp = tempfile::tempdir().expect("a temp dir");
    let verified = openssl_verify(
        tmp.path(),
        &decoded(&ca, "tls.crt"),
        &decoded(&leaf, "tls.crt"),
    );
    assert!(verified.status.success(), "{}", text(&verified));
    // And not against a CA that did not sign it (the control plane's own).
    let other_ca =
        std::fs::read_to_string(cluster.dir().join("pki/ca.crt")).expect("the cluster CA");
    let not_own = openssl_verify(tmp.path(), &other_ca, &decoded(&leaf, "tls.crt"));
    assert!(!not_own.status.success(), "{}", text(&not_own));

    // A CA issuer whose Secret is missing stays not Ready, with cert-manager's reason.
    let missing = wait_for(&addons, "ClusterIssuer missing-ca's condition", 30, || {
        get(&cluster, &["clusterissuer", "missing-ca"]).filter(|i| ready(i).is_some())
    });
    let c = ready(&missing).expect("Ready");
    assert_eq!(c["status"], "False", "{missing}");
    assert_eq!(c["reason"], "ErrGetKeyPair");
    assert_eq!(
        c["message"],
        "Error getting keypair for CA issuer: secret \"no-such-secret\" not found"
    );
}

#[test]
fn rke2_waits_for_the_first_consumer_and_pins_the_volume_to_its_node() {
    let Some(cluster) = cluster() else { return };
    let addons = start_addons(&cluster, &["--flavour", "rke2"]);

    let classes = ok(&cluster, &["get", "ingressclass", "-o", "name"], None);
    assert_eq!(classes.trim(), "ingressclass.networking.k8s.io/nginx");
    assert!(get(&cluster, &["crd", "helmchartconfigs.helm.cattle.io"]).is_some());
    assert!(get(&cluster, &["crd", "certificates.cert-manager.io"]).is_none());
    assert!(get(&cluster, &["namespace", "cert-manager"]).is_none());
    let sc = get(&cluster, &["sc", "local-path"]).expect("the StorageClass");
    assert_eq!(sc["volumeBindingMode"], "WaitForFirstConsumer");
    assert_eq!(sc["reclaimPolicy"], "Delete");

    ok(&cluster, &["create", "namespace", "uyuni"], None);
    ok(
        &cluster,
        &["apply", "-f", "-"],
        Some(&claim("var-cache", None)),
    );
    // No consumer yet: no volume, however long we wait (a few resyncs).
    wait_for_passes(&addons, "provisioner", 3);
    let pending = get(&cluster, &["pvc", "var-cache", "-n", "uyuni"]).expect("the claim");
    assert_eq!(pending["status"]["phase"], "Pending", "{pending}");
    let uid = pending["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    assert!(get(&cluster, &["pv", &format!("pvc-{uid}")]).is_none());

    // The node, as the node agent registers one, but with a hostname label that is not its
    // name (kubelet's --hostname-override): the volume is pinned by the label.
    ok(
        &cluster,
        &["apply", "-f", "-"],
        Some(
            "apiVersion: v1
kind: Node
metadata:
  name: node-1
  labels: {kubernetes.io/hostname: node-1.example.com}
",
        ),
    );
    // What the scheduler does once it places the claim's first pod.
    ok(
        &cluster,
        &[
            "annotate",
            "pvc",
            "var-cache",
            "-n",
            "uyuni",
            "volume.kubernetes.io/selected-node=node-1",
        ],
        None,
    );
    let pv = wait_for(&addons, "the PV of the claim", 60, || {
        get(&cluster, &["pv", &format!("pvc-{uid}")])
    });
    assert_eq!(
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0],
        serde_json::json!({"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1.example.com"]}),
        "{pv}"
    );
    let annotated = get(&cluster, &["pvc", "var-cache", "-n", "uyuni"]).expect("the claim");
    assert_eq!(
        annotated["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"],
        "rancher.io/local-path",
        "the real PV controller left the claim to our provisioner: {annotated}"
    );
    bound_pv(&cluster, &addons, "var-cache");

    // A restart bootstraps again without changing anything (server-side apply of the same
    // manifests by the same manager is a no-op: the resourceVersions stay).
    let version = |args: &[&str]| {
        get(&cluster, args).expect("the object")["metadata"]["resourceVersion"].clone()
    };
    let before = (
        version(&["sc", "local-path"]),
        version(&["ingressclass", "nginx"]),
        version(&["crd", "helmchartconfigs.helm.cattle.io"]),
        version(&["deployment", "coredns", "-n", "kube-system"]),
    );
    drop(addons);
    let _again = start_addons(&cluster, &["--flavour", "rke2"]);
    let after = (
        version(&["sc", "local-path"]),
        version(&["ingressclass", "nginx"]),
        version(&["crd", "helmchartconfigs.helm.cattle.io"]),
        version(&["deployment", "coredns", "-n", "kube-system"]),
    );
    assert_eq!(before, after);
}
