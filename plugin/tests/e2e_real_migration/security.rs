//! The pod security work on the real control plane. `restart` of a server whose Deployments
//! were written without the pod security settings brings them in its own rollout.
//!
//! `--network-policy`: upstream's apiserver admits NetworkPolicy `db`
//! as the tool writes it, with the selectors the policy needs; a run without the flag keeps
//! it, `--network-policy=false` removes it, and `uninstall` removes it with the rest.
//!
//! The real plane runs no network plugin (our node agent plays the pods, no packets flow), so
//! the policy is not enforced here: what is tested is the object upstream stores, not the
//! traffic it lets through. The selectors are checked against the pods' labels by the core's
//! tests (`core/tests/network_policy.rs`).

use std::process::Output;

use serde_json::{Value, json};
use uyuni_testdata::Flavour;

use super::{RealEnv, both, condition, config, real_plane_or_skip};
use crate::support::text;

const NS_NETWORK_POLICY: &str = "uyuni-netpol";
const NS_RESTART_HARDENING: &str = "uyuni-restart-hardening";
const FQDN: &str = "server.example.com";

fn install(env: &RealEnv, extra: &[&str]) -> Output {
    let mut args = vec!["install", FQDN];
    args.extend_from_slice(extra);
    env.command(&args)
        .env("UYUNI_ADMIN_PASSWORD", "netpol-admin-Pa55")
        .output()
        .expect("kubectl runs")
}

fn policies(env: &RealEnv) -> Vec<Value> {
    env.items(&["networkpolicies", "-n", env.ns])
}

#[test]
fn an_install_with_network_policy_writes_it_and_false_removes_it() {
    if !real_plane_or_skip("--network-policy") {
        return;
    }
    // k3s: Traefik is the cluster's default IngressClass, so the report database's route
    // goes through its pods.
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_NETWORK_POLICY);
    let out = install(&env, &["--network-policy", "--coco-replicas", "1"]);
    assert!(out.status.success(), "{}", both(&out));
    let written = policies(&env);
    assert_eq!(written.len(), 1, "{written:#?}");
    let policy = &written[0];
    assert_eq!(policy["metadata"]["name"], "db");
    assert_eq!(
        policy["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "kubectl-uyuni"
    );
    let spec = &policy["spec"];
    assert_eq!(
        spec["podSelector"],
        json!({"matchLabels": {"app.kubernetes.io/component": "db", "app.kubernetes.io/part-of": "uyuni"}})
    );
    assert_eq!(spec["policyTypes"], json!(["Ingress"]));
    let port = json!([{"port": 5432, "protocol": "TCP"}]);
    assert_eq!(
        spec["ingress"][0],
        json!({
            "from": [{"podSelector": {
                "matchLabels": {"app.kubernetes.io/part-of": "uyuni"},
                "matchExpressions": [{"key": "app.kubernetes.io/component", "operator": "In",
                    "values": ["server", "coco-attestation", "db-migration-sql"]}]
            }}],
            "ports": port
        })
    );
    assert_eq!(
        spec["ingress"][1],
        json!({
            "from": [{"namespaceSelector": {}, "podSelector": {"matchExpressions": [
                {"key": "app.kubernetes.io/name", "operator": "In", "values": ["traefik"]}]}}],
            "ports": port
        })
    );
    // The database's pods are the ones it selects, the consumers the ones it lets in.
    let db = env.get(&["deployment", "db", "-n", env.ns]);
    for (k, v) in spec["podSelector"]["matchLabels"]
        .as_object()
        .expect("labels")
    {
        assert_eq!(&db["spec"]["template"]["metadata"]["labels"][k], v, "{k}");
    }
    for name in ["uyuni", "coco-attestation"] {
        let d = env.get(&["deployment", name, "-n", env.ns]);
        let component = &d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"];
        assert!(
            spec["ingress"][0]["from"][0]["podSelector"]["matchExpressions"][0]["values"]
                .as_array()
                .expect("values")
                .contains(component),
            "{name}: {component}"
        );
    }
    let annotations = db["metadata"]["annotations"].to_string();
    assert!(!annotations.contains("CKV2_K8S_6"), "{annotations}");

    // Remembered: a run without the flag keeps it and has nothing to do.
    let again = install(&env, &[]);
    assert!(again.status.success(), "{}", both(&again));
    assert!(text(&again).1.contains("Nothing to do"), "{}", both(&again));
    assert_eq!(policies(&env).len(), 1);

    // Turned off: deleted, and the database's pods left running.
    let db_uid = db["metadata"]["uid"].clone();
    let off = install(&env, &["--network-policy=false"]);
    assert!(off.status.success(), "{}", both(&off));
    assert!(policies(&env).is_empty(), "{:#?}", policies(&env));
    assert_eq!(
        env.get(&["deployment", "db", "-n", env.ns])["metadata"]["uid"],
        db_uid
    );

    // On again, then uninstall removes it with the rest of the tool's objects.
    let on = install(&env, &["--network-policy"]);
    assert!(on.status.success(), "{}", both(&on));
    assert_eq!(policies(&env).len(), 1);
    let removed = env.uyuni(&["uninstall", "--yes"]);
    assert!(removed.status.success(), "{}", both(&removed));
    assert!(policies(&env).is_empty(), "{:#?}", policies(&env));
}

/// A server written before the pod security settings (simulated: the seccomp profile and the
/// token setting taken off the live templates by the cluster admin) gets them back from
/// `restart`, in the rollout that carries the restart's mark; the database is left running as
/// it was.
#[test]
fn a_restart_brings_the_pod_security_settings_to_an_older_server() {
    if !real_plane_or_skip("restart with the pod security settings") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::Plain, true), NS_RESTART_HARDENING);
    let out = install(&env, &["--hubxmlrpc-replicas", "1"]);
    assert!(out.status.success(), "{}", both(&out));
    let older = r#"[{"op":"remove","path":"/spec/template/spec/securityContext/seccompProfile"},
        {"op":"remove","path":"/spec/template/spec/automountServiceAccountToken"}]"#;
    for name in ["uyuni", "hub-xmlrpc"] {
        let patched = env
            .cluster
            .kubectl(
                &[
                    "patch",
                    "deployment",
                    name,
                    "-n",
                    env.ns,
                    "--type=json",
                    "-p",
                    older,
                ],
                "",
            )
            .expect("kubectl runs");
        assert!(patched.status.success(), "{}", both(&patched));
        let d = env.get(&["deployment", name, "-n", env.ns]);
        assert!(d["spec"]["template"]["spec"]["securityContext"]["seccompProfile"].is_null());
    }
    let db_before = env.get(&["deployment", "db", "-n", env.ns])["spec"]["template"].clone();

    let restarted = env.uyuni(&["restart", "--yes"]);
    assert!(restarted.status.success(), "{}", both(&restarted));
    for name in ["uyuni", "hub-xmlrpc"] {
        let d = env.get(&["deployment", name, "-n", env.ns]);
        let pod = &d["spec"]["template"]["spec"];
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"], "RuntimeDefault",
            "{name}: {pod:#}"
        );
        assert_eq!(pod["automountServiceAccountToken"], false, "{name}");
        assert!(
            d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
                .is_string(),
            "{name} not restarted"
        );
        assert_eq!(
            condition(&d, "Available").as_deref(),
            Some("True"),
            "{name}"
        );
    }
    assert_eq!(
        env.get(&["deployment", "db", "-n", env.ns])["spec"]["template"],
        db_before,
        "the database was touched"
    );
    // The templates are as an install writes them now: a re-run has nothing to do.
    let again = install(&env, &[]);
    assert!(again.status.success(), "{}", both(&again));
    assert!(text(&again).1.contains("Nothing to do"), "{}", both(&again));
}
