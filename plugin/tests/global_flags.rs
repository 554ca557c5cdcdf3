//! kubectl's global flags reach the client: two simulated clusters behind one kubeconfig (and
//! behind KUBECONFIG=a:b), told apart by the server image each one runs. The plugin runs
//! through the real `kubectl`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

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

/// What no message to a user may hold: Rust's `Debug` of a struct or an `Option`.
fn assert_no_debug(what: &str, text: &str) {
    for dump in ["Status {", "Error {", "Some(", "ErrorResponse {"] {
        assert!(!text.contains(dump), "{what}: {dump:?} in:\n{text}");
    }
}

fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A port on 127.0.0.1 nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

impl Env {
    /// A kubeconfig whose one cluster has no server and whose one user no credentials: only
    /// the flags can make it work.
    fn bare_kubeconfig(&self) -> String {
        let path = self.file("bare.yaml");
        write_yaml(
            &path,
            &json!({
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "bare",
                "clusters": [{"name": "bare", "cluster": {}}],
                "users": [{"name": "nobody", "user": {}}],
                "contexts": [{"name": "bare", "context": {"cluster": "bare", "user": "nobody"}}],
            }),
        );
        path.to_str().expect("utf-8 path").to_owned()
    }

    fn ca_file(&self) -> String {
        let path = self.file("ca.pem");
        std::fs::write(&path, self.a.ca_pem()).expect("write CA");
        path.to_str().expect("utf-8 path").to_owned()
    }
}

#[test]
fn server_token_and_certificate_authority_replace_the_kubeconfigs() {
    let env = Env::new();
    let bare = env.bare_kubeconfig();
    let ca = env.ca_file();
    let (url, token) = (env.a.url(), env.a.token());
    let (v, stderr) = env.version(
        &[
            "--kubeconfig",
            &bare,
            "--server",
            url,
            "--token",
            token,
            "--insecure-skip-tls-verify",
        ],
        None,
    );
    assert_eq!(server_tag(&v), "a-1.0", "{v}\n{stderr}");
    assert_eq!(v["cluster"]["context"], "bare");
    let (v, _) = env.version(
        &[
            "--kubeconfig",
            &bare,
            "-s",
            url,
            "--token",
            token,
            "--certificate-authority",
            &ca,
        ],
        None,
    );
    assert_eq!(server_tag(&v), "a-1.0", "{v}");
    // No kubeconfig at all (none in HOME, no KUBECONFIG): the flags are enough, as for kubectl.
    let (v, _) = env.version(
        &[
            &format!("--server={url}"),
            "--token",
            token,
            "--certificate-authority",
            &ca,
        ],
        None,
    );
    assert_eq!(server_tag(&v), "a-1.0", "{v}");
    assert_eq!(v["cluster"]["context"], Value::Null, "no context: {v}");
    // The flags win over the context's own cluster and user: b's context, a's server.
    let merged = env.file("merged.yaml");
    let (v, _) = env.version(
        &[
            "--kubeconfig",
            merged.to_str().expect("utf-8"),
            "--context",
            "b",
            "--server",
            url,
            "--token",
            token,
            "--insecure-skip-tls-verify",
        ],
        None,
    );
    assert_eq!(server_tag(&v), "a-1.0", "{v}");
    // kubectl refuses a CA file with --insecure-skip-tls-verify: a usage error.
    let out = env.kubectl_uyuni(
        &[
            "--kubeconfig",
            &bare,
            "-s",
            url,
            "--certificate-authority",
            &ca,
            "--insecure-skip-tls-verify",
            "version",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{:?}", texts(&out));
    // A server that is no URL, an empty context: value errors, exit 2 as usage errors.
    for args in [
        &["-s", "ftp://x", "status"][..],
        &["--context", "", "status"],
    ] {
        let mut all = vec!["--kubeconfig", &bare];
        all.extend_from_slice(args);
        let out = env.kubectl_uyuni(&all, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {:?}", texts(&out));
    }
    // HOST:PORT alone is https, as for kubectl.
    let host_port = url.trim_start_matches("https://");
    let (v, _) = env.version(
        &[
            "--kubeconfig",
            &bare,
            "-s",
            host_port,
            "--token",
            token,
            "--insecure-skip-tls-verify",
        ],
        None,
    );
    assert_eq!(server_tag(&v), "a-1.0", "{v}");
}

#[test]
fn a_token_reaches_the_server_but_no_output_and_no_object() {
    let env = Env::new();
    let bare = env.bare_kubeconfig();
    let ca = env.ca_file();
    let (url, token) = (env.a.url().to_owned(), env.a.token().to_owned());
    let password = env.file("admin.pass");
    std::fs::write(&password, "admin-password\n").expect("write");
    let password = password.to_str().expect("utf-8");
    let connection = |token: &str| -> Vec<String> {
        ["--kubeconfig", &bare, "-s", &url, "--token", token]
            .into_iter()
            .chain(["--certificate-authority", &ca, "-n", "tok"])
            .map(str::to_owned)
            .collect()
    };
    let run = |token: &str, args: &[&str]| {
        let mut all = connection(token);
        all.extend(args.iter().map(|a| (*a).to_owned()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        texts(&env.kubectl_uyuni(&all, None))
    };

    // A wrong token: the advice for a rejected token, without kube's dump, without the token.
    let wrong = "wrong-token-4f9c1e";
    let mut all = connection(wrong);
    all.extend(
        [
            "install",
            "uyuni.example.com",
            "--email",
            "a@example.com",
            "--dry-run",
        ]
        .map(str::to_owned),
    );
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let out = env.kubectl_uyuni(&all, None);
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The whole story, not the first request refused (a discovery of cert-manager's API).
    assert!(
        stderr.starts_with(
            "error: the API server of context bare refused this run's credentials: Unauthorized (401); the token given with --token was refused"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("cert-manager"), "{stderr}");
    assert_no_debug("rejected token", &stderr);
    assert!(
        !stdout.contains(wrong) && !stderr.contains(wrong),
        "{stdout}\n{stderr}"
    );

    // The right one, at every log level: a dry run, then the install itself.
    let (stdout, stderr) = run(
        &token,
        &[
            "install",
            "uyuni.example.com",
            "--email",
            "a@example.com",
            "--admin-password-file",
            password,
            "--dry-run",
            "-vvv",
        ],
    );
    assert!(
        stdout.contains("configmap/uyuni-server-spec"),
        "{stdout}\n{stderr}"
    );
    assert!(
        !stdout.contains(&token) && !stderr.contains(&token),
        "dry run shows the token"
    );
    let (stdout, stderr) = run(
        &token,
        &[
            "install",
            "uyuni.example.com",
            "--email",
            "a@example.com",
            "--admin-password-file",
            password,
            "-vvv",
        ],
    );
    assert!(!stdout.contains(&token), "stdout shows the token");
    assert!(!stderr.contains(&token), "the logs show the token");
    assert!(
        stderr.contains("step 1/"),
        "the install did not run:\n{stderr}"
    );
    let written = serde_json::to_string(&env.a.written_objects()).expect("json");
    assert!(
        !written.contains(&token),
        "an object written holds the token"
    );
    // The Lease's record of the command line holds the placeholder instead.
    assert!(
        written.contains("--token \\\"$TOKEN\\\""),
        "no placeholder in the Lease"
    );

    // A hint that needs the token names the placeholder, and says so.
    let port = closed_port();
    let mut all: Vec<String> = ["--kubeconfig", &bare, "-s"].map(str::to_owned).to_vec();
    all.extend([
        format!("https://127.0.0.1:{port}"),
        "--token".into(),
        token.clone(),
        "status".into(),
    ]);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let (stdout, stderr) = texts(&env.kubectl_uyuni(&all, None));
    assert!(
        stderr.contains("--token \"$TOKEN\" cluster-info"),
        "{stderr}"
    );
    assert!(stderr.contains("set TOKEN to your token"), "{stderr}");
    assert!(
        !stdout.contains(&token) && !stderr.contains(&token),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_api_server_fails_fast_naming_its_address_and_context() {
    let env = Env::new();
    let port = closed_port();
    let mut kc = renamed(&env.a, "a");
    kc["clusters"][0]["cluster"]["server"] = json!(format!("https://127.0.0.1:{port}"));
    let path = env.file("closed.yaml");
    write_yaml(&path, &kc);
    let path = path.to_str().expect("utf-8");
    for args in [
        &["status"][..],
        &[
            "install",
            "uyuni.example.com",
            "--email",
            "a@example.com",
            "--dry-run",
        ],
        &["stop", "--yes"],
    ] {
        let mut all = vec!["--kubeconfig", path, "-n", NS];
        all.extend_from_slice(args);
        let started = std::time::Instant::now();
        let out = env.kubectl_uyuni(&all, None);
        let took = started.elapsed();
        let (_, stderr) = texts(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            took < std::time::Duration::from_secs(5),
            "{args:?} took {took:?} to give up"
        );
        let expected = format!(
            "error: cannot reach the API server https://127.0.0.1:{port} of context a: connection refused"
        );
        assert!(stderr.starts_with(&expected), "{args:?}:\n{stderr}");
        assert!(
            stderr.contains(&format!(
                "`kubectl --kubeconfig {path} --context a cluster-info`"
            )),
            "{stderr}"
        );
        assert!(!stderr.contains("apiresources"), "{stderr}");
        assert_no_debug("unreachable", &stderr);
    }
}

/// A kubeconfig like context `a`'s whose server is `https://127.0.0.1:PORT`.
fn pointing_at(env: &Env, port: u16, name: &str) -> String {
    let mut kc = renamed(&env.a, "a");
    kc["clusters"][0]["cluster"]["server"] = json!(format!("https://127.0.0.1:{port}"));
    let path = env.file(name);
    write_yaml(&path, &kc);
    path.to_str().expect("utf-8").to_owned()
}

/// `status` against `port`, with `extra` flags: its exit code, stderr and how long it took.
fn status_timed(env: &Env, kubeconfig: &str, extra: &[&str]) -> (Option<i32>, String, Duration) {
    let mut all = vec!["--kubeconfig", kubeconfig, "-n", NS];
    all.extend_from_slice(extra);
    all.push("status");
    let started = Instant::now();
    let out = env.kubectl_uyuni(&all, None);
    let took = started.elapsed();
    (out.status.code(), texts(&out).1, took)
}

/// A server that accepts connections and never answers the TLS handshake (a hung API server,
/// a proxy that holds the connection): the run gives up at the connect timeout, 10 s by
/// default or `--request-timeout`, naming the address, the context and the limit, instead of
/// kube's 30 s (issue 38).
#[test]
fn a_server_that_never_answers_the_handshake_fails_at_the_connect_timeout() {
    let env = Env::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    // Accepts and holds every connection, sending nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            held.push(conn);
        }
    });
    let path = pointing_at(&env, port, "silent.yaml");
    let expected = |limit: &str| {
        format!(
            "error: cannot reach the API server https://127.0.0.1:{port} of context a: no connection within {limit}, the limit --request-timeout sets (1 attempt); check the address"
        )
    };
    let (code, stderr, took) = status_timed(&env, &path, &["--request-timeout", "1s"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.starts_with(&expected("1s")), "{stderr}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_no_debug("handshake timeout", &stderr);
    let (code, stderr, took) = status_timed(&env, &path, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.starts_with(&expected("10s")), "{stderr}");
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(20),
        "took {took:?}, not the 10 s connect timeout"
    );
}

/// An address that drops connection attempts (a firewall's blackhole): simulated on loopback
/// by a listener whose backlog is full, for which Linux drops further SYNs
/// (`tcp_abort_on_overflow` 0, its default) so that the TCP connect itself hangs. The run gives
/// up at `--request-timeout` naming the address (issue 38). A real blackholed address and a
/// route that never answers are not testable here; they take the same timeout, which bounds
/// kube's whole connector.
#[test]
fn an_address_that_drops_connections_fails_at_the_request_timeout() {
    let env = Env::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    let _entered = runtime.enter();
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    let listener = socket.listen(0).expect("listen");
    let address = listener.local_addr().expect("address");
    // Fill the backlog (nothing accepts) until a connection attempt hangs.
    let mut filled = Vec::new();
    let hangs = (0..16).any(|_| {
        match std::net::TcpStream::connect_timeout(&address, Duration::from_millis(300)) {
            Ok(stream) => {
                filled.push(stream);
                false
            }
            Err(e) => e.kind() == std::io::ErrorKind::TimedOut,
        }
    });
    assert!(hangs, "the full backlog did not make connecting hang");
    let path = pointing_at(&env, address.port(), "dropping.yaml");
    let (code, stderr, took) = status_timed(&env, &path, &["--request-timeout", "2s"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "error: cannot reach the API server https://{address} of context a: no connection within 2s, the limit --request-timeout sets"
        )),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(6), "took {took:?}");
    drop(listener);
}

#[test]
fn a_refused_request_names_it_and_every_can_i_carries_the_runs_identity() {
    use uyuni_testdata::{ErrorFault, FaultTarget, Faults, Verb};
    // A write refused after the preflight passed (an admission policy, a Role changed since).
    let sim = SimCluster::start_blocking(SimConfig {
        faults: Faults {
            errors: vec![ErrorFault {
                target: FaultTarget::new(Some(Verb::Patch), Some("configmaps"), None),
                rate: 1.0,
                status: 403,
                retry_after_seconds: 1,
            }],
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .expect("simulated cluster");
    let env = Env::new();
    let kc = sim.kubeconfig_path().to_str().expect("utf-8").to_owned();
    let password = env.file("admin.pass");
    std::fs::write(&password, "admin-password\n").expect("write");
    let identity = [
        "--kubeconfig",
        &kc,
        "--context",
        "uyuni-sim",
        "--cluster",
        "uyuni-sim",
        "--user",
        "uyuni-sim-admin",
        "--as",
        "alice",
        "--as-group",
        "ops",
    ];
    let can_i = format!(
        "kubectl --kubeconfig {kc} --context uyuni-sim --cluster uyuni-sim --user uyuni-sim-admin --as alice --as-group ops -n perm auth can-i"
    );
    let mut all = identity.to_vec();
    all.extend([
        "-n",
        "perm",
        "install",
        "uyuni.example.com",
        "--email",
        "a@example.com",
        "--admin-password-file",
        password.to_str().expect("utf-8"),
    ]);
    let out = env.kubectl_uyuni(&all, None);
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let error = stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line:\n{stderr}"));
    assert!(
        error.starts_with("error: cannot apply configmap/uyuni-server-spec in namespace perm: configmaps \"uyuni-server-spec\" is forbidden"),
        "{error}"
    );
    assert!(
        error.contains(&format!("`{can_i} patch configmap/uyuni-server-spec`")),
        "{error}"
    );
    assert_no_debug("refused write", &stderr);
    assert!(!stderr.contains("WARN"), "{stderr}");

    // Refused by the preflight: the list of what is missing, each with its can-i line.
    let denied = SimCluster::start_blocking(SimConfig {
        denied_access: vec![("create".into(), "jobs".into())],
        ..SimConfig::default()
    })
    .expect("simulated cluster");
    let kc2 = denied.kubeconfig_path().to_str().expect("utf-8").to_owned();
    let all: Vec<&str> = all
        .iter()
        .map(|a| if *a == kc { kc2.as_str() } else { a })
        .collect();
    let out = env.kubectl_uyuni(&all, None);
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("missing: create jobs.batch in namespace perm"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("`{} create jobs.batch`", can_i.replace(&kc, &kc2))),
        "{stderr}"
    );
    assert_no_debug("preflight", &stderr);

    // The Lease refused: its own message, the server's words once, nothing of kube's.
    let lease = SimCluster::start_blocking(SimConfig {
        faults: Faults {
            errors: vec![ErrorFault {
                target: FaultTarget::new(Some(Verb::Create), Some("leases"), None),
                rate: 1.0,
                status: 403,
                retry_after_seconds: 1,
            }],
            ..Faults::default()
        },
        ..SimConfig::default()
    })
    .expect("simulated cluster");
    let kc3 = lease.kubeconfig_path().to_str().expect("utf-8").to_owned();
    let all: Vec<&str> = all
        .iter()
        .map(|a| if *a == kc2 { kc3.as_str() } else { a })
        .collect();
    let out = env.kubectl_uyuni(&all, None);
    let (_, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: cannot create Lease kubectl-uyuni in namespace perm"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("is forbidden").count(), 1, "{stderr}");
    assert_no_debug("refused lease", &stderr);
}

#[test]
fn status_hints_carry_the_connection_flags() {
    let env = Env::new();
    let merged = env.file("merged.yaml");
    let merged = merged.to_str().expect("utf-8 path");
    let out = env.kubectl_uyuni(
        &[
            "--kubeconfig",
            merged,
            "--context",
            "a",
            "--cluster",
            "a",
            "-n",
            "empty",
            "status",
            "--user",
            "a-admin",
        ],
        None,
    );
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains(&format!(
            "`kubectl uyuni --kubeconfig {merged} --context a --cluster a --kube-user a-admin -n empty install FQDN`"
        )),
        "{stdout}"
    );
}

#[test]
fn a_refused_read_lists_every_missing_permission_with_the_runs_identity() {
    use uyuni_testdata::{ErrorFault, FaultTarget, Faults};
    // As a user bound to `view`: Secrets may not be read, nor anything written.
    let sim = SimCluster::start_blocking(SimConfig {
        faults: Faults {
            errors: vec![ErrorFault {
                target: FaultTarget::new(None, Some("secrets"), None),
                rate: 1.0,
                status: 403,
                retry_after_seconds: 1,
            }],
            ..Faults::default()
        },
        denied_access: vec![
            ("get".into(), "secrets".into()),
            ("list".into(), "secrets".into()),
            ("create".into(), "jobs".into()),
        ],
        ..SimConfig::default()
    })
    .expect("simulated cluster");
    let env = Env::new();
    let kc = sim.kubeconfig_path().to_str().expect("utf-8").to_owned();
    let password = env.file("admin.pass");
    std::fs::write(&password, "admin-password\n").expect("write");
    let can_i =
        format!("kubectl --kubeconfig {kc} --context uyuni-sim --as alice -n view auth can-i");
    for dry_run in [true, false] {
        let mut all = vec![
            "--kubeconfig",
            &kc,
            "--as",
            "alice",
            "-n",
            "view",
            "install",
            "uyuni.example.com",
            "--email",
            "a@example.com",
            "--admin-password-file",
            password.to_str().expect("utf-8"),
        ];
        if dry_run {
            all.push("--dry-run");
        }
        let out = env.kubectl_uyuni(&all, None);
        let (_, stderr) = texts(&out);
        assert_ne!(out.status.code(), Some(0), "{stderr}");
        assert!(
            stderr.contains("error: the API server refused to"),
            "dry run {dry_run}: {stderr}"
        );
        assert!(
            stderr.contains(
                "(403 Forbidden): you may not make every request this run makes; missing:"
            ),
            "{stderr}"
        );
        // What the run reads first is all it can plan from an empty namespace: the reads
        // are listed; the writes, planned from what those reads return, come with the
        // preflight once they are granted.
        assert!(
            stderr.contains(&format!(
                "missing: list secrets in namespace view (`{can_i} list secrets`)"
            )),
            "{stderr}"
        );
        assert_no_debug("refused read", &stderr);
        assert!(
            !stderr.contains("WARN"),
            "log lines around the error: {stderr}"
        );
    }
}

/// `logs` without a STEP lists the steps under a header whose `kubectl uyuni … logs STEP`
/// carries every identity flag of the run: pasted, it reads as the same user in the same
/// context and namespace.
#[test]
fn the_logs_step_list_names_the_command_with_the_runs_identity() {
    let env = Env::new();
    env.b
        .put(json!({
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "uyuni-db-fixup-20261129180000",
                "namespace": "uyuni",
                "labels": {
                    "app.kubernetes.io/part-of": "uyuni",
                    "app.kubernetes.io/managed-by": "kubectl-uyuni",
                },
                "annotations": {
                    "kubectl-uyuni.io/step": "db-fixup",
                    "kubectl-uyuni.io/description": "fix up the synced data",
                },
            },
            "spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "fixup", "image": "registry.opensuse.org/uyuni/server:latest"}],
            }}},
        }))
        .expect("Job");
    let merged = env.file("merged.yaml");
    let kc = merged.to_str().expect("utf-8");
    let out = env.kubectl_uyuni(
        &[
            "--kubeconfig",
            kc,
            "--context",
            "b",
            "--as",
            "alice",
            "-n",
            "uyuni",
            "logs",
        ],
        None,
    );
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("db-fixup"), "{stdout}");
    assert!(
        stdout.contains(&format!(
            "Steps with logs (`kubectl uyuni --kubeconfig {kc} --context b --as alice -n uyuni logs STEP`)"
        )),
        "{stdout}"
    );
}
