//! kubectl's global flags reach the client: two simulated clusters behind one kubeconfig (and
//! behind KUBECONFIG=a:b), told apart by the server image each one runs. The plugin runs
//! through the real `kubectl`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use uyuni_testdata::{SimCluster, SimConfig};

const NS: &str = "uyuni";

fn deployment(name: &str, component: &str, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {
                "app.kubernetes.io/part-of": "uyuni",
                "app.kubernetes.io/component": component,
            },
        },
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": image}]},
            },
        },
    })
}

/// A simulated cluster running an Uyuni server whose image tag is `tag`.
pub fn cluster_with_server(tag: &str) -> SimCluster {
    SimCluster::start_blocking(SimConfig {
        objects: vec![
            deployment(
                "uyuni",
                "server",
                &format!("registry.opensuse.org/uyuni/server:{tag}"),
            ),
            deployment(
                "uyuni-db",
                "db",
                &format!("registry.opensuse.org/uyuni/server-postgresql:{tag}"),
            ),
        ],
        ..SimConfig::default()
    })
    .expect("simulated cluster")
}

/// The simulated cluster's kubeconfig with its names prefixed by `prefix`: cluster `P`, users
/// `P-admin` and `P-wrong-token`, contexts `P` and `P-wrong-token`.
fn renamed(sim: &SimCluster, prefix: &str) -> Value {
    let text = std::fs::read_to_string(sim.kubeconfig_path()).expect("kubeconfig");
    let mut kc: Value = serde_saphyr::from_str(&text).expect("kubeconfig YAML");
    let rename = |name: &str| name.replacen("uyuni-sim", prefix, 1);
    for list in ["clusters", "users", "contexts"] {
        for entry in kc[list].as_array_mut().expect("list") {
            let name = rename(entry["name"].as_str().expect("name"));
            entry["name"] = json!(name);
            if list == "contexts" {
                let ctx = &mut entry["context"];
                let cluster = rename(ctx["cluster"].as_str().expect("cluster"));
                let user = rename(ctx["user"].as_str().expect("user"));
                ctx["cluster"] = json!(cluster);
                ctx["user"] = json!(user);
            }
        }
    }
    kc["current-context"] = json!(prefix);
    kc
}

fn write_yaml(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(value).expect("json")).expect("write");
}

struct Env {
    a: SimCluster,
    b: SimCluster,
    dir: tempfile::TempDir,
    bin: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let a = cluster_with_server("a-1.0");
        let b = cluster_with_server("b-2.0");
        let dir = tempfile::tempdir().expect("tempdir");
        let (ka, kb) = (renamed(&a, "a"), renamed(&b, "b"));
        write_yaml(&dir.path().join("a.yaml"), &ka);
        write_yaml(&dir.path().join("b.yaml"), &kb);
        let mut merged = ka.clone();
        for list in ["clusters", "users", "contexts"] {
            let extra = kb[list].as_array().cloned().unwrap_or_default();
            merged[list].as_array_mut().expect("list").extend(extra);
        }
        write_yaml(&dir.path().join("merged.yaml"), &merged);
        let bin = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(
            assert_cmd::cargo::cargo_bin("kubectl-uyuni"),
            bin.path().join("kubectl-uyuni"),
        )
        .expect("symlink");
        Env { a, b, dir, bin }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `kubectl uyuni ARGS…` with a clean environment (no KUBECONFIG, an empty HOME).
    fn kubectl_uyuni(&self, args: &[&str], kubeconfig_env: Option<String>) -> Output {
        let mut cmd = Command::new("kubectl");
        cmd.env(
            "PATH",
            format!(
                "{}:{}",
                self.bin.path().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("HOME", self.dir.path())
        .env("KUBECACHEDIR", self.dir.path().join("cache"))
        .env("NO_COLOR", "1")
        .env_remove("KUBECONFIG")
        .env_remove("RUST_LOG");
        if let Some(env) = kubeconfig_env {
            cmd.env("KUBECONFIG", env);
        }
        cmd.arg("uyuni").args(args).output().expect("kubectl runs")
    }

    fn version(&self, args: &[&str], kubeconfig_env: Option<String>) -> (Value, String) {
        let mut all = vec!["version", "-o", "json", "-n", NS];
        all.extend_from_slice(args);
        let out = self.kubectl_uyuni(&all, kubeconfig_env);
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{all:?} failed: {stderr}");
        let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{all:?}: stdout is not JSON ({e}):\n{}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        (json, stderr)
    }
}

fn server_tag(v: &Value) -> &str {
    v["server"]["tag"].as_str().unwrap_or("<none>")
}

#[test]
fn context_picks_the_cluster() {
    let env = Env::new();
    let merged = env.file("merged.yaml");
    let merged = merged.to_str().expect("utf-8 path");
    let (v, _) = env.version(&["--kubeconfig", merged], None);
    assert_eq!(server_tag(&v), "a-1.0", "the current context is a: {v}");
    assert_eq!(v["cluster"]["context"], "a");

    env.a.clear_request_log();
    env.b.clear_request_log();
    let (v, _) = env.version(&["--kubeconfig", merged, "--context", "b"], None);
    assert_eq!(server_tag(&v), "b-2.0", "{v}");
    assert_eq!(v["db"]["tag"], "b-2.0");
    assert_eq!(v["cluster"]["context"], "b");
    assert!(env.a.request_log().is_empty(), "cluster a was asked");
    assert!(
        env.b
            .request_log()
            .iter()
            .any(|r| r.resource.as_deref() == Some("deployments") && r.authenticated),
        "cluster b was not asked for its Deployments"
    );

    // --context=b, and --cluster overriding the context's cluster.
    let (v, _) = env.version(&["--kubeconfig", merged, "--context=b"], None);
    assert_eq!(server_tag(&v), "b-2.0");
    let (v, _) = env.version(
        &["--kubeconfig", merged, "--context", "b", "--cluster", "a"],
        None,
    );
    assert_eq!(
        v["cluster"]["reachable"], false,
        "b's token is not valid on cluster a: {v}"
    );
}

#[test]
fn kubeconfig_env_with_two_files_merges_them() {
    let env = Env::new();
    let list = std::env::join_paths([
        env.file("a.yaml"),
        env.file("missing.yaml"),
        env.file("b.yaml"),
    ])
    .expect("join")
    .into_string()
    .expect("utf-8");
    let (v, _) = env.version(&[], Some(list.clone()));
    assert_eq!(
        server_tag(&v),
        "a-1.0",
        "the first file's current context wins: {v}"
    );
    let (v, _) = env.version(&["--context", "b"], Some(list.clone()));
    assert_eq!(server_tag(&v), "b-2.0", "{v}");
    // --kubeconfig replaces KUBECONFIG, as in kubectl.
    let b = env.file("b.yaml");
    let (v, _) = env.version(&["--kubeconfig", b.to_str().expect("utf-8")], Some(list));
    assert_eq!(server_tag(&v), "b-2.0", "{v}");
}

#[test]
fn namespace_and_user_flags_reach_the_client() {
    let env = Env::new();
    let merged = env.file("merged.yaml");
    let merged = merged.to_str().expect("utf-8 path");
    let (v, _) = env.version(&["--kubeconfig", merged, "-n", "elsewhere"], None);
    assert_eq!(v["cluster"]["namespace"], "elsewhere");
    assert_eq!(v["cluster"]["reachable"], true);
    assert!(
        v["server"].is_null(),
        "no server in namespace elsewhere: {v}"
    );

    // kubectl's --user (outside migrate) and --kube-user choose the kubeconfig user.
    for flag in ["--user", "--kube-user"] {
        let (v, stderr) = env.version(&["--kubeconfig", merged, flag, "a-wrong-token"], None);
        assert_eq!(v["cluster"]["reachable"], false, "{flag}: {v}");
        assert!(stderr.contains("note: server version unknown"), "{stderr}");
    }
    let (v, _) = env.version(&["--kubeconfig", merged, "--user", "a-admin"], None);
    assert_eq!(server_tag(&v), "a-1.0");
    // An unknown user is named, as kubectl does.
    let (_, stderr) = env.version(&["--kubeconfig", merged, "--user", "nobody"], None);
    assert!(stderr.contains("user \"nobody\" not found"), "{stderr}");

    // Before `migrate`, --user would be ambiguous: refused as a usage error.
    let out = env.kubectl_uyuni(
        &[
            "--kubeconfig",
            merged,
            "--user",
            "a-admin",
            "migrate",
            "uyuni.example.com",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--kube-user"), "{stderr}");
    // Two different users are refused too.
    let out = env.kubectl_uyuni(
        &["--kube-user", "a-admin", "version", "--user", "b-admin"],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn kubectl_verbosity_levels_are_understood() {
    let env = Env::new();
    let merged = env.file("merged.yaml");
    let merged = merged.to_str().expect("utf-8 path");
    for v in [&["-v=4"][..], &["-v", "4"], &["-v4"], &["--v=5"], &["-vv"]] {
        let mut args = vec!["--kubeconfig", merged];
        args.extend_from_slice(v);
        let (json, stderr) = env.version(&args, None);
        assert_eq!(server_tag(&json), "a-1.0");
        assert!(
            stderr.contains("DEBUG"),
            "{v:?} should log at debug level:\n{stderr}"
        );
    }
    let (_, stderr) = env.version(&["--kubeconfig", merged, "-v=0"], None);
    assert!(!stderr.contains("DEBUG"), "{stderr}");
    let (_, stderr) = env.version(&["--kubeconfig", merged, "-v", "2"], None);
    assert!(!stderr.contains("DEBUG"), "-v 2 is info only: {stderr}");
}

#[test]
fn request_timeout_and_insecure_flags_are_accepted() {
    let env = Env::new();
    let merged = env.file("merged.yaml");
    let merged = merged.to_str().expect("utf-8 path");
    let (v, _) = env.version(
        &[
            "--kubeconfig",
            merged,
            "--request-timeout",
            "10s",
            "--insecure-skip-tls-verify",
        ],
        None,
    );
    assert_eq!(server_tag(&v), "a-1.0");
    // kubectl's forms: seconds alone, Go durations, 0 for none.
    for timeout in ["0", "30", "1m", "2h", "1h30m", "1.5s"] {
        let (v, _) = env.version(
            &["--kubeconfig", merged, "--request-timeout", timeout],
            None,
        );
        assert_eq!(server_tag(&v), "a-1.0", "--request-timeout {timeout}");
    }
    // A value that is no duration is a usage error, as kubectl's.
    let out = env.kubectl_uyuni(
        &[
            "--kubeconfig",
            merged,
            "--request-timeout",
            "soon",
            "version",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--request-timeout"), "{stderr}");
}
