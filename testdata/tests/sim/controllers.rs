//! The simulated controllers' transitions.

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};
use uyuni_testdata::{
    DeploymentScript, JobScript, PatchSecret, Scenario, SideEffect, SimCluster, SimConfig,
};

use super::{WAIT, fast, has_condition, job, namespace, start};

fn scenario(jobs: &[(&str, JobScript)], deployments: &[(&str, DeploymentScript)]) -> Scenario {
    Scenario {
        jobs: jobs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        deployments: deployments
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
        timing: fast(),
        ..Scenario::default()
    }
}

async fn sim_with(s: Scenario) -> SimCluster {
    let sim = start(SimConfig {
        scenario: s,
        ..SimConfig::default()
    })
    .await;
    sim.put(namespace("uyuni")).expect("ns");
    sim
}

fn get_job(sim: &SimCluster, name: &str) -> Value {
    sim.get("batch/v1", "Job", Some("uyuni"), name)
        .expect("job")
}

fn pods(sim: &SimCluster) -> Vec<Value> {
    sim.objects("v1", "Pod", Some("uyuni"))
}

fn secret_value(secret: &Value, key: &str) -> String {
    let b = B64
        .decode(
            secret["data"][key]
                .as_str()
                .unwrap_or_else(|| panic!("no key {key}")),
        )
        .expect("base64");
    String::from_utf8(b).expect("utf8")
}

#[tokio::test]
async fn job_runs_a_pod_to_success() {
    let sim = sim_with(scenario(
        &[("data-sync", JobScript::succeed(100, &["copying", "done"]))],
        &[],
    ))
    .await;
    sim.put(job("sync-1", Some("data-sync"))).expect("job");
    // Active with a running pod first.
    assert!(
        sim.wait_until(WAIT, |s| get_job(s, "sync-1")["status"]["active"]
            == json!(1))
            .await
    );
    let job_obj = get_job(&sim, "sync-1");
    assert!(job_obj["status"]["startTime"].is_string());
    let pod = &pods(&sim)[0];
    let name = pod["metadata"]["name"].as_str().expect("name");
    assert!(
        name.starts_with("sync-1-") && name.len() == "sync-1-".len() + 5,
        "{name}"
    );
    assert_eq!(
        pod["metadata"]["labels"]["batch.kubernetes.io/job-name"],
        json!("sync-1")
    );
    assert_eq!(
        pod["metadata"]["labels"]["controller-uid"],
        job_obj["metadata"]["uid"]
    );
    let owner = &pod["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].clone(), owner["controller"].clone()),
        (json!("Job"), json!(true))
    );

    assert!(
        sim.wait_until(WAIT, |s| has_condition(
            &get_job(s, "sync-1"),
            "Complete",
            "True"
        ))
        .await
    );
    let done = get_job(&sim, "sync-1");
    assert!(has_condition(&done, "SuccessCriteriaMet", "True"));
    assert_eq!(done["status"]["succeeded"], json!(1));
    assert!(done["status"]["active"].is_null());
    assert!(done["status"]["completionTime"].is_string());
    let pod = &pods(&sim)[0];
    assert_eq!(pod["status"]["phase"], json!("Succeeded"));
    assert_eq!(
        pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        json!(0)
    );
    let log = sim
        .pod_log(
            "uyuni",
            pod["metadata"]["name"].as_str().expect("name"),
            Some("main"),
        )
        .expect("log");
    assert_eq!(log, vec!["copying", "done"]);
}

#[tokio::test]
async fn job_failure_and_unscripted_jobs() {
    let sim = sim_with(scenario(
        &[("db-upgrade", JobScript::fail(3, &["pg_upgrade failed"]))],
        &[],
    ))
    .await;
    sim.put(job("up", Some("db-upgrade"))).expect("job");
    sim.put(job("plain", None)).expect("job");
    assert!(
        sim.wait_until(WAIT, |s| has_condition(&get_job(s, "up"), "Failed", "True"))
            .await
    );
    let failed = get_job(&sim, "up");
    assert!(has_condition(&failed, "FailureTarget", "True"));
    let reasons: Vec<&Value> = failed["status"]["conditions"]
        .as_array()
        .expect("conds")
        .iter()
        .map(|c| &c["reason"])
        .collect();
    assert!(reasons.iter().all(|r| **r == json!("BackoffLimitExceeded")));
    assert_eq!(failed["status"]["failed"], json!(1));
    let pod = pods(&sim)
        .into_iter()
        .find(|p| p["metadata"]["labels"]["job-name"] == json!("up"))
        .expect("pod");
    assert_eq!(pod["status"]["phase"], json!("Failed"));
    assert_eq!(
        pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"],
        json!(3)
    );
    // No scenario entry: success after a short delay with a one-line log.
    assert!(
        sim.wait_until(WAIT, |s| has_condition(
            &get_job(s, "plain"),
            "Complete",
            "True"
        ))
        .await
    );
    let pod = pods(&sim)
        .into_iter()
        .find(|p| p["metadata"]["labels"]["job-name"] == json!("plain"))
        .expect("pod");
    assert_eq!(
        sim.pod_log(
            "uyuni",
            pod["metadata"]["name"].as_str().expect("name"),
            None
        )
        .expect("log")
        .len(),
        1
    );
}

#[tokio::test]
async fn job_stuck_pod_stays_pending() {
    let sim = sim_with(scenario(
        &[
            ("pull", JobScript::stuck("ImagePullBackOff")),
            ("config", JobScript::stuck("CreateContainerConfigError")),
        ],
        &[],
    ))
    .await;
    sim.put(job("pull", Some("pull"))).expect("job");
    sim.put(job("config", Some("config"))).expect("job");
    let waiting = |s: &SimCluster, job: &str| -> Option<String> {
        s.objects("v1", "Pod", Some("uyuni"))
            .into_iter()
            .find(|p| p["metadata"]["labels"]["job-name"] == json!(job))
            .and_then(|p| {
                p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                    .as_str()
                    .map(str::to_string)
            })
    };
    assert!(
        sim.wait_until(WAIT, |s| waiting(s, "pull").as_deref()
            == Some("ImagePullBackOff"))
            .await
    );
    assert!(
        sim.wait_until(WAIT, |s| waiting(s, "config").as_deref()
            == Some("CreateContainerConfigError"))
            .await
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let j = get_job(&sim, "pull");
    assert_eq!(j["status"]["active"], json!(1));
    assert!(j["status"]["conditions"].is_null());
    assert!(
        pods(&sim)
            .iter()
            .all(|p| p["status"]["phase"] == json!("Pending"))
    );
}

#[tokio::test]
async fn job_side_effect_patches_the_secret_and_later_attempts_differ() {
    let mut flaky = JobScript::fail(
        1,
        &["ssh: connect to host uyuni.example.com port 22: Connection refused"],
    );
    flaky.later_attempts = vec![JobScript::succeed(50, &["ok"]).patching_secret(
        "data",
        &[("job", "$JOB_NAME"), ("fqdn", "uyuni.example.com")],
    )];
    let sim = sim_with(scenario(&[("data-sync", flaky)], &[])).await;
    sim.put(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "data", "namespace": "uyuni"}, "stringData": {"keep": "me"}})).expect("secret");
    let created = sim.job_created_channel("data-sync");
    sim.put(job("sync-a", Some("data-sync"))).expect("job");
    assert_eq!(created.recv_timeout(WAIT).expect("hook").attempt, 0);
    assert!(
        sim.wait_until(WAIT, |s| has_condition(
            &get_job(s, "sync-a"),
            "Failed",
            "True"
        ))
        .await
    );
    sim.put(job("sync-b", Some("data-sync"))).expect("job");
    assert_eq!(created.recv_timeout(WAIT).expect("hook").attempt, 1);
    assert!(
        sim.wait_until(WAIT, |s| has_condition(
            &get_job(s, "sync-b"),
            "Complete",
            "True"
        ))
        .await
    );
    let secret = sim
        .get("v1", "Secret", Some("uyuni"), "data")
        .expect("secret");
    assert_eq!(secret_value(&secret, "job"), "sync-b");
    assert_eq!(secret_value(&secret, "fqdn"), "uyuni.example.com");
    assert_eq!(secret_value(&secret, "keep"), "me");
    let managers: Vec<&str> = secret["metadata"]["managedFields"]
        .as_array()
        .expect("mf")
        .iter()
        .filter_map(|m| m["manager"].as_str())
        .collect();
    assert!(managers.contains(&"uyuni-job"), "{managers:?}");
}

#[tokio::test]
async fn job_side_effect_on_a_missing_secret_fails_the_job() {
    let script = JobScript::succeed(20, &["syncing"]).patching_secret("missing", &[("a", "b")]);
    let mut created = JobScript::succeed(20, &[]);
    created.side_effects = vec![SideEffect::PatchSecret(PatchSecret {
        name: "made".to_string(),
        string_data: [("a".to_string(), "b".to_string())].into(),
        at_ms: Some(0),
        create_if_missing: true,
    })];
    let sim = sim_with(scenario(&[("a", script), ("b", created)], &[])).await;
    sim.put(job("a", Some("a"))).expect("job");
    sim.put(job("b", Some("b"))).expect("job");
    assert!(
        sim.wait_until(WAIT, |s| has_condition(&get_job(s, "a"), "Failed", "True"))
            .await
    );
    let pod = pods(&sim)
        .into_iter()
        .find(|p| p["metadata"]["labels"]["job-name"] == json!("a"))
        .expect("pod");
    let log = sim
        .pod_log(
            "uyuni",
            pod["metadata"]["name"].as_str().expect("name"),
            None,
        )
        .expect("log");
    assert!(
        log.last()
            .expect("line")
            .contains("secrets \"missing\" not found"),
        "{log:?}"
    );
    assert!(
        sim.wait_until(WAIT, |s| has_condition(
            &get_job(s, "b"),
            "Complete",
            "True"
        ))
        .await
    );
    assert!(sim.get("v1", "Secret", Some("uyuni"), "made").is_some());
}

fn deployment(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "uyuni"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": name, "image": "registry.opensuse.org/uyuni/server:latest"}]}}}
    })
}

#[tokio::test]
async fn deployment_becomes_available_and_scales_to_zero() {
    let sim = sim_with(scenario(&[], &[])).await;
    sim.put(deployment("uyuni", 1)).expect("deployment");
    let dep = |s: &SimCluster| {
        s.get("apps/v1", "Deployment", Some("uyuni"), "uyuni")
            .expect("d")
    };
    assert!(
        sim.wait_until(WAIT, |s| has_condition(&dep(s), "Available", "True"))
            .await
    );
    let d = dep(&sim);
    for f in [
        "replicas",
        "readyReplicas",
        "availableReplicas",
        "updatedReplicas",
        "observedGeneration",
    ] {
        assert_eq!(d["status"][f], json!(1), "{f}");
    }
    let pod = &pods(&sim)[0];
    assert_eq!(pod["status"]["phase"], json!("Running"));
    assert_eq!(pod["metadata"]["labels"]["app"], json!("uyuni"));

    let mut scaled = d.clone();
    scaled["spec"]["replicas"] = json!(0);
    sim.put(scaled).expect("scaled");
    assert!(
        sim.wait_until(WAIT, |s| pods(s).is_empty()
            && dep(s)["status"]["observedGeneration"] == json!(2))
            .await
    );
    assert!(dep(&sim)["status"]["readyReplicas"].is_null());
}

#[tokio::test]
async fn deployment_stuck_shows_the_waiting_reason() {
    let sim = sim_with(scenario(
        &[],
        &[
            ("crash", DeploymentScript::stuck("CrashLoopBackOff")),
            ("pull", DeploymentScript::stuck("ImagePullBackOff")),
        ],
    ))
    .await;
    sim.put(deployment("crash", 1)).expect("d");
    sim.put(deployment("pull", 1)).expect("d");
    let reason = |s: &SimCluster, app: &str| -> Option<String> {
        s.objects("v1", "Pod", Some("uyuni"))
            .into_iter()
            .find(|p| p["metadata"]["labels"]["app"] == json!(app))
            .and_then(|p| {
                p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                    .as_str()
                    .map(str::to_string)
            })
    };
    assert!(
        sim.wait_until(WAIT, |s| reason(s, "crash").as_deref()
            == Some("CrashLoopBackOff"))
            .await
    );
    assert!(
        sim.wait_until(WAIT, |s| reason(s, "pull").as_deref()
            == Some("ImagePullBackOff"))
            .await
    );
    let d = sim
        .get("apps/v1", "Deployment", Some("uyuni"), "crash")
        .expect("d");
    assert!(has_condition(&d, "Available", "False"));
    assert_eq!(d["status"]["unavailableReplicas"], json!(1));
    assert!(d["status"]["readyReplicas"].is_null());
}

fn pvc(name: &str, class: Option<&str>) -> Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "uyuni"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    });
    if let Some(c) = class {
        p["spec"]["storageClassName"] = json!(c);
    }
    p
}

#[tokio::test]
async fn pvcs_bind_with_a_storage_class_and_wait_without() {
    let with_default = sim_with(scenario(&[], &[])).await;
    with_default.put(pvc("var-pgsql", None)).expect("pvc");
    let claim = |s: &SimCluster, n: &str| {
        s.get("v1", "PersistentVolumeClaim", Some("uyuni"), n)
            .expect("pvc")
    };
    assert!(
        with_default
            .wait_until(WAIT, |s| claim(s, "var-pgsql")["status"]["phase"]
                == json!("Bound"))
            .await
    );
    let c = claim(&with_default, "var-pgsql");
    assert_eq!(c["spec"]["storageClassName"], json!("local-path"));
    assert_eq!(c["status"]["capacity"]["storage"], json!("10Gi"));
    let pv_name = format!("pvc-{}", c["metadata"]["uid"].as_str().expect("uid"));
    assert_eq!(c["spec"]["volumeName"], json!(pv_name));
    let pv = with_default
        .get("v1", "PersistentVolume", None, &pv_name)
        .expect("pv");
    assert_eq!(pv["spec"]["capacity"]["storage"], json!("10Gi"));
    assert_eq!(pv["spec"]["claimRef"]["name"], json!("var-pgsql"));
    assert_eq!(pv["status"]["phase"], json!("Bound"));

    let without = start(SimConfig {
        default_storage_class: false,
        scenario: scenario(&[], &[]),
        ..SimConfig::default()
    })
    .await;
    without.put(namespace("uyuni")).expect("ns");
    without.put(pvc("unclassed", None)).expect("pvc");
    without.put(pvc("named", Some("local-path"))).expect("pvc");
    without
        .put(pvc("unknown-class", Some("fast-ssd")))
        .expect("pvc");
    assert!(
        without
            .wait_until(WAIT, |s| claim(s, "named")["status"]["phase"]
                == json!("Bound"))
            .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        claim(&without, "unclassed")["status"]["phase"],
        json!("Pending")
    );
    assert_eq!(
        claim(&without, "unknown-class")["status"]["phase"],
        json!("Pending")
    );
}

#[tokio::test]
async fn certificates_get_tls_secrets_from_their_issuers() {
    let sim = sim_with(scenario(&[], &[])).await;
    let cm = |kind: &str, name: &str, spec: Value| {
        let mut o = json!({"apiVersion": "cert-manager.io/v1", "kind": kind, "metadata": {"name": name}, "spec": spec});
        if kind != "ClusterIssuer" {
            o["metadata"]["namespace"] = json!("uyuni");
        }
        o
    };
    sim.put(cm("Issuer", "selfsigned", json!({"selfSigned": {}})))
        .expect("issuer");
    sim.put(cm(
        "Certificate",
        "ca",
        json!({
            "isCA": true, "commonName": "uyuni-ca", "secretName": "uyuni-ca",
            "issuerRef": {"name": "selfsigned", "kind": "Issuer"}
        }),
    ))
    .expect("ca cert");
    sim.put(cm(
        "Issuer",
        "uyuni-ca-issuer",
        json!({"ca": {"secretName": "uyuni-ca"}}),
    ))
    .expect("ca issuer");
    sim.put(cm("Certificate", "uyuni-cert", json!({
        "commonName": "uyuni.example.com", "dnsNames": ["uyuni.example.com"], "secretName": "uyuni-cert",
        "issuerRef": {"name": "uyuni-ca-issuer", "kind": "Issuer", "group": "cert-manager.io"},
        "secretTemplate": {"labels": {"app.kubernetes.io/part-of": "uyuni"}, "annotations": {"a": "b"}}
    })))
    .expect("cert");
    let get =
        |s: &SimCluster, kind: &str, n: &str| s.get("cert-manager.io/v1", kind, Some("uyuni"), n);
    assert!(
        sim.wait_until(WAIT, |s| get(s, "Certificate", "uyuni-cert")
            .is_some_and(|c| has_condition(&c, "Ready", "True")))
            .await
    );
    assert!(has_condition(
        &get(&sim, "Issuer", "uyuni-ca-issuer").expect("issuer"),
        "Ready",
        "True"
    ));
    assert!(has_condition(
        &get(&sim, "Issuer", "selfsigned").expect("issuer"),
        "Ready",
        "True"
    ));
    let ca = sim
        .get("v1", "Secret", Some("uyuni"), "uyuni-ca")
        .expect("ca secret");
    let leaf = sim
        .get("v1", "Secret", Some("uyuni"), "uyuni-cert")
        .expect("leaf secret");
    assert_eq!(leaf["type"], json!("kubernetes.io/tls"));
    assert!(secret_value(&leaf, "tls.crt").starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(secret_value(&leaf, "tls.key").contains("PRIVATE KEY"));
    assert_eq!(secret_value(&leaf, "ca.crt"), secret_value(&ca, "tls.crt"));
    assert_ne!(secret_value(&leaf, "tls.crt"), secret_value(&ca, "tls.crt"));
    assert_eq!(
        leaf["metadata"]["labels"]["app.kubernetes.io/part-of"],
        json!("uyuni")
    );
    assert_eq!(leaf["metadata"]["annotations"]["a"], json!("b"));
    assert_eq!(
        leaf["metadata"]["annotations"]["cert-manager.io/certificate-name"],
        json!("uyuni-cert")
    );
}

#[tokio::test]
async fn namespaces_get_a_default_service_account() {
    let sim = sim_with(scenario(&[], &[])).await;
    assert!(
        sim.wait_until(WAIT, |s| s
            .get("v1", "ServiceAccount", Some("uyuni"), "default")
            .is_some())
            .await
    );
}

#[tokio::test]
async fn everything_the_controllers_write_is_a_valid_object() {
    let sim = sim_with(scenario(
        &[("stuck", JobScript::stuck("ImagePullBackOff"))],
        &[("crash", DeploymentScript::stuck("CrashLoopBackOff"))],
    ))
    .await;
    sim.put(job("ok", None)).expect("job");
    sim.put(job("stuck", Some("stuck"))).expect("job");
    sim.put(deployment("web", 1)).expect("d");
    sim.put(deployment("crash", 1)).expect("d");
    sim.put(pvc("data", None)).expect("pvc");
    sim.put(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "lb", "namespace": "uyuni"},
                   "spec": {"type": "LoadBalancer", "ports": [{"port": 443}]}})).expect("svc");
    assert!(
        sim.wait_until(WAIT, |s| has_condition(
            &get_job(s, "ok"),
            "Complete",
            "True"
        ) && s
            .get("apps/v1", "Deployment", Some("uyuni"), "web")
            .is_some_and(|d| has_condition(&d, "Available", "True"))
            && s.get("v1", "PersistentVolumeClaim", Some("uyuni"), "data")
                .is_some_and(|p| p["status"]["phase"] == json!("Bound")))
            .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    for (api_version, kind) in [
        ("v1", "Pod"),
        ("batch/v1", "Job"),
        ("apps/v1", "Deployment"),
        ("v1", "PersistentVolumeClaim"),
        ("v1", "PersistentVolume"),
        ("v1", "Service"),
        ("v1", "Namespace"),
        ("v1", "Node"),
        ("v1", "ServiceAccount"),
        ("storage.k8s.io/v1", "StorageClass"),
        ("networking.k8s.io/v1", "IngressClass"),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    ] {
        let objects = sim.objects(api_version, kind, None);
        assert!(!objects.is_empty(), "{kind}");
        for obj in objects {
            if let Err(problems) = uyuni_testdata::check_object(&obj) {
                panic!("{kind} {}: {problems:?}", obj["metadata"]["name"]);
            }
        }
    }
}
