//! Every `-o json|yaml` output parses, keeps its documented field names, and goes to stdout
//! alone (notes and logs go to stderr).

use crate::support;

use std::process::Output;

use assert_cmd::Command;
use serde_json::{Value, json};
use uyuni_testdata::{SimCluster, SimConfig, scenarios};

/// The field set of every document (docs/output.md).
const API_VERSION: &str = "kubectl-uyuni.io/v1alpha1";

fn plugin(home: &std::path::Path) -> Command {
    let mut cmd = Command::cargo_bin("kubectl-uyuni").expect("binary built");
    cmd.env("HOME", home)
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG");
    cmd
}

fn server_cluster() -> SimCluster {
    let deployment = |name: &str, component: &str, image: &str| {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": "uyuni", "labels": {
                "app.kubernetes.io/part-of": "uyuni",
                "app.kubernetes.io/component": component,
            }},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                    {"name": name, "image": image},
                ]}},
            },
        })
    };
    SimCluster::start_blocking(SimConfig {
        objects: vec![
            deployment(
                "uyuni",
                "server",
                "registry.opensuse.org/uyuni/server:2025.10",
            ),
            deployment(
                "uyuni-db",
                "db",
                "registry.opensuse.org/uyuni/server-postgresql@sha256:0123",
            ),
        ],
        ..SimConfig::default()
    })
    .expect("simulated cluster")
}

fn parse(out: &Output, format: &str) -> Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    match format {
        "json" => serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("-o json is not JSON ({e}):\n{text}")),
        _ => serde_saphyr::from_str(&text)
            .unwrap_or_else(|e| panic!("-o yaml is not YAML ({e}):\n{text}")),
    }
}

/// The documented field names (docs/output.md).
fn assert_version_shape(v: &Value) {
    assert_eq!(v["apiVersion"], API_VERSION);
    assert_eq!(v["kind"], "Version");
    assert_eq!(v["clientVersion"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(
        v["clientVersion"]["platform"]
            .as_str()
            .is_some_and(|p| p.contains('/'))
    );
    for key in ["reachable", "context", "namespace"] {
        assert!(
            v["cluster"].get(key).is_some(),
            "cluster.{key} missing: {v}"
        );
    }
    for key in ["server", "db"] {
        assert!(v.get(key).is_some(), "{key} missing: {v}");
    }
}

#[test]
fn version_json_and_yaml_with_a_server() {
    let sim = server_cluster();
    let home = tempfile::tempdir().expect("tempdir");
    let mut outputs = Vec::new();
    for format in ["json", "yaml"] {
        let out = plugin(home.path())
            .arg("--kubeconfig")
            .arg(sim.kubeconfig_path())
            .args(["-n", "uyuni", "version", "-o", format])
            .output()
            .expect("runs");
        let v = parse(&out, format);
        assert_version_shape(&v);
        assert_eq!(v["cluster"]["reachable"], true);
        assert_eq!(v["cluster"]["namespace"], "uyuni");
        assert_eq!(v["cluster"]["context"], "uyuni-sim");
        assert_eq!(
            v["server"],
            json!({
                "deployment": "uyuni",
                "container": "uyuni",
                "image": "registry.opensuse.org/uyuni/server:2025.10",
                "tag": "2025.10",
                "digest": null,
            })
        );
        assert_eq!(v["db"]["tag"], Value::Null);
        assert_eq!(v["db"]["digest"], "sha256:0123");
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push(v);
    }
    assert_eq!(outputs[0], outputs[1], "JSON and YAML carry the same data");

    // The human form names both images.
    let out = plugin(home.path())
        .arg("--kubeconfig")
        .arg(sim.kubeconfig_path())
        .args(["-n", "uyuni", "version"])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Server: registry.opensuse.org/uyuni/server:2025.10"),
        "{text}"
    );
    assert!(
        text.contains("DB:     registry.opensuse.org/uyuni/server-postgresql@sha256:0123"),
        "{text}"
    );
}

#[test]
fn version_without_a_cluster_still_prints_data_and_succeeds() {
    let home = tempfile::tempdir().expect("tempdir");
    let kubeconfig = home.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .expect("kubeconfig");
    for format in ["json", "yaml"] {
        for args in [
            vec!["--kubeconfig".to_owned(), kubeconfig.display().to_string()],
            vec![], // no kubeconfig at all
        ] {
            let out = plugin(home.path())
                .args(&args)
                .args(["version", "-o", format])
                .output()
                .expect("runs");
            let v = parse(&out, format);
            assert_version_shape(&v);
            assert_eq!(v["cluster"]["reachable"], false);
            assert!(v["server"].is_null());
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.starts_with("note: server version unknown"),
                "{stderr}"
            );
        }
    }
}

#[test]
fn an_unknown_format_is_a_usage_error() {
    let home = tempfile::tempdir().expect("tempdir");
    let out = plugin(home.path())
        .args(["version", "-o", "xml"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
}

/// `--dry-run -o json`: the versioned plan document, with the preview's sections beside it and,
/// with `--dry-run=server`, each write's verdict (a message only when it was not accepted).
#[test]
fn the_dry_run_document_is_versioned_and_keeps_its_fields() {
    let env = support::Env::new(SimConfig {
        scenario: scenarios::migration(),
        ..SimConfig::default()
    })
    .with_ssh_stub("4096\\t/var/lib/cobbler\\n");
    let mut args = vec![
        "migrate",
        support::SOURCE,
        "--yes",
        "--dry-run=server",
        "-o",
        "json",
    ];
    let flags = support::ssh_flags();
    args.extend(flags.iter().map(String::as_str));
    let out = env.uyuni(&args);
    let v = parse(&out, "json");
    assert_eq!(v["apiVersion"], API_VERSION);
    assert_eq!(v["kind"], "Plan");
    assert_eq!(v["namespace"], support::NS);
    for key in ["create", "update", "delete", "unchanged", "jobs"] {
        assert!(v["summary"][key].is_u64(), "summary.{key}: {v}");
    }
    for key in ["steps", "execution", "serverDryRun"] {
        assert!(v[key].is_array(), "{key} missing: {v}");
    }
    for key in ["dataPlane", "safety"] {
        assert!(v[key].is_object(), "{key} missing: {v}");
    }
    let step = &v["steps"][0];
    for key in ["id", "description", "op", "reason", "changes"] {
        assert!(step.get(key).is_some(), "steps[].{key} missing: {step}");
    }
    assert!(step["target"]["kind"].is_string() && step["target"]["name"].is_string());
    let steps = v["steps"].as_array().expect("steps");
    let sync = steps
        .iter()
        .find(|s| s["op"] == "run-job")
        .expect("a Job step");
    assert!(sync["wait"]["logTailLines"].is_u64(), "{sync}");
    assert!(sync["wait"].get("timeoutSeconds").is_some(), "{sync}");
    assert!(
        steps
            .iter()
            .filter(|s| s["op"] == "create")
            .all(|s| s.get("wait").is_none()),
        "a plain write has no wait"
    );
    for executed in v["execution"].as_array().expect("execution") {
        assert!(
            executed["id"].is_string() && executed["op"].is_string(),
            "{executed}"
        );
        assert!(executed["target"].is_string(), "kind/name: {executed}");
    }
    let checks = v["serverDryRun"].as_array().expect("serverDryRun");
    assert!(!checks.is_empty());
    for check in checks {
        assert!(check["target"].is_string(), "{check}");
        match check["result"].as_str() {
            Some("accepted") => assert!(check.get("message").is_none(), "{check}"),
            Some("rejected" | "client-side-only") => {
                assert!(check["message"].is_string(), "{check}");
            }
            other => panic!("unexpected result {other:?}: {check}"),
        }
    }
    // No namespace yet: it is accepted, the objects in it are checked client-side only.
    assert!(checks.iter().any(|c| c["result"] == "accepted"));
    assert!(checks.iter().any(|c| c["result"] == "client-side-only"));
}
