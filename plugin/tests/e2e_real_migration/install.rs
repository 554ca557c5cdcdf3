//! `kubectl uyuni install` against the real control plane (upstream's kube-apiserver, etcd,
//! controllers and scheduler, our node agent playing the pods, the cert-manager stand-in): a
//! fresh server with a CA generated through cert-manager, a second run that plans nothing, an
//! image change refused; third-party certificates on a cluster without cert-manager; an
//! interrupted install resumed; and bad input refused before any write. The clusters are the
//! ones the migration tests share (`super::config`), each test in a namespace of its own: a
//! module of `e2e_real_migration`, so that its tests run in that process, on its clusters.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use uyuni_testdata::{DeploymentScript, Flavour, Scenario, scenarios};

use super::{RealEnv, both, claims_of, condition, config, real_plane_or_skip, written_versions};
use crate::support::{SOURCE, text, third_party_flags};

const NS_INSTALL: &str = "uyuni-install";
const NS_INSTALL_THIRD_PARTY: &str = "uyuni-install-tp";
const NS_INSTALL_INTERRUPTED: &str = "uyuni-install-int";
const NS_INSTALL_REFUSED: &str = "uyuni-install-refused";
const NS_INSTALL_LOCKED: &str = "uyuni-install-locked";
const FQDN: &str = "server.example.com";
const ADMIN_PASSWORD: &str = "install-admin-Pa55";

/// What the node agent plays in the install namespaces: the image checks succeed (the
/// migration's scenario); in NS_INSTALL_INTERRUPTED the database takes long to be ready, so
/// that the run can be interrupted while it waits.
pub(crate) fn add_scenarios(shared: &mut Scenario) {
    let mut slow = scenarios::migration();
    slow.deployments.insert(
        "db".into(),
        DeploymentScript {
            ready_after_ms: Some(8_000),
            ..DeploymentScript::default()
        },
    );
    shared
        .namespaces
        .insert(NS_INSTALL_INTERRUPTED.into(), slow.clone());
    shared.namespaces.insert(NS_INSTALL_LOCKED.into(), slow);
}

fn install(env: &RealEnv, extra: &[&str]) -> Output {
    let mut args = vec!["install", FQDN];
    args.extend_from_slice(extra);
    env.command(&args)
        .env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .output()
        .expect("kubectl runs")
}

fn decoded(secret: &Value, key: &str) -> String {
    use base64::Engine as _;
    let b64 = secret["data"][key].as_str().unwrap_or_default();
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64)
            .expect("base64"),
    )
    .expect("UTF-8")
}

/// Neither the administrator's password nor the generated database passwords were printed.
fn assert_no_install_secret(env: &RealEnv, out: &Output) {
    let (stdout, stderr) = text(out);
    let mut secrets = vec![ADMIN_PASSWORD.to_owned()];
    for name in [
        "db-credentials",
        "db-admin-credentials",
        "reportdb-credentials",
    ] {
        let secret = env.get(&["secret", name, "-n", env.ns]);
        secrets.push(decoded(&secret, "password"));
    }
    for secret in secrets {
        assert!(
            !stdout.contains(&secret) && !stderr.contains(&secret),
            "a secret was printed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
    }
}

fn namespace_exists(env: &RealEnv, ns: &str) -> bool {
    env.items(&["namespaces"])
        .iter()
        .any(|n| n["metadata"]["name"] == ns)
}

fn ours(env: &RealEnv) -> Vec<Value> {
    env.items(&[
        "secrets,configmaps,persistentvolumeclaims,deployments,jobs",
        "-n",
        env.ns,
        "-l",
        "app.kubernetes.io/managed-by=kubectl-uyuni",
    ])
}

/// The README's install: a server-side dry run writes nothing; the install completes with a CA
/// cert-manager generates (every Job Complete, every Deployment Available, every Certificate
/// Ready, the CA ConfigMaps holding the generated CA, the database on var-pgsql18, the first
/// start's secrets from Secrets); no secret is printed; a second run, without the password,
/// plans nothing and writes nothing; another tag on the running server is refused.
#[test]
fn an_install_completes_with_a_generated_ca_and_a_second_run_plans_nothing() {
    if !real_plane_or_skip("install on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_INSTALL);

    let dry = install(&env, &["--dry-run=server"]);
    assert!(dry.status.success(), "{}", both(&dry));
    let (stdout, _) = text(&dry);
    assert!(stdout.contains("Install of server.example.com"), "{stdout}");
    assert!(!stdout.contains(ADMIN_PASSWORD), "{stdout}");
    assert!(
        !namespace_exists(&env, env.ns),
        "the server-side dry run created namespace {}",
        env.ns
    );

    let out = install(
        &env,
        &["--organization", "First Org", "--tz", "Europe/Berlin"],
    );
    assert!(out.status.success(), "{}", both(&out));
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("Uyuni server server.example.com installed")
            && stdout.contains("get secret db-credentials"),
        "{stdout}"
    );
    assert_no_install_secret(&env, &out);

    let jobs = env.items(&["jobs", "-n", env.ns]);
    let steps: Vec<&str> = jobs
        .iter()
        .filter_map(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/step"].as_str())
        .collect();
    assert!(
        steps.contains(&"image-check-server") && steps.contains(&"image-check-db"),
        "{steps:?}"
    );
    assert!(!steps.contains(&"data-sync"), "{steps:?}");
    // The server check's report, from its pod's termination message onto its Job: which kind
    // of server image (the scenario's, upstream's newest: it copies the CA into the Salt file
    // root at start).
    let check = jobs
        .iter()
        .find(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/step"] == "image-check-server")
        .expect("the server check Job");
    assert_eq!(
        check["metadata"]["annotations"]["kubectl-uyuni.io/inspection"].as_str(),
        Some("ca_copy=salt-file-root\n"),
        "{:#}",
        check["metadata"]
    );
    for job in &jobs {
        assert_eq!(
            condition(job, "Complete").as_deref(),
            Some("True"),
            "{:#}",
            job["status"]
        );
    }
    let deployments = env.items(&["deployments", "-n", env.ns]);
    for name in ["db", "uyuni"] {
        let d = deployments
            .iter()
            .find(|d| d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Deployment {name}"));
        assert_eq!(
            condition(d, "Available").as_deref(),
            Some("True"),
            "{name}: {:#}",
            d["status"]
        );
        assert_eq!(
            d["metadata"]["annotations"]["kubectl-uyuni.io/origin"], "install",
            "{name}"
        );
    }
    let db = env.get(&["deployment", "db", "-n", env.ns]);
    assert!(claims_of(&db).contains(&"var-pgsql18".to_owned()));
    let server = env.get(&["deployment", "uyuni", "-n", env.ns]);
    let envs = server["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let var = |name: &str| envs.iter().find(|e| e["name"] == name).cloned();
    let admin_pass = var("ADMIN_PASS").expect("ADMIN_PASS");
    assert_eq!(
        admin_pass["valueFrom"]["secretKeyRef"]["name"], "admin-credentials",
        "{admin_pass:#}"
    );
    assert!(admin_pass.get("value").is_none(), "{admin_pass:#}");
    assert_eq!(
        var("UYUNI_HOSTNAME").expect("UYUNI_HOSTNAME")["value"],
        FQDN
    );

    for name in ["uyuni-ca", "uyuni-cert", "db-cert"] {
        let cert = env.get(&["certificates.cert-manager.io", name, "-n", env.ns]);
        assert_eq!(condition(&cert, "Ready").as_deref(), Some("True"), "{name}");
    }
    let ca = env.get(&["certificates.cert-manager.io", "uyuni-ca", "-n", env.ns]);
    assert_eq!(ca["spec"]["isCA"], true);
    assert_eq!(ca["spec"]["subject"]["countries"][0], "DE");
    let ca_secret = env.get(&["secret", "uyuni-ca", "-n", env.ns]);
    let ca_pem = decoded(&ca_secret, "ca.crt");
    assert!(ca_pem.contains("BEGIN CERTIFICATE"), "{ca_pem}");
    for name in ["uyuni-ca", "db-ca"] {
        let cm = env.get(&["configmap", name, "-n", env.ns]);
        assert_eq!(
            cm["data"]["ca.crt"].as_str(),
            Some(ca_pem.as_str()),
            "{name}"
        );
    }
    let config = env.get(&["configmap", "uyuni-config", "-n", env.ns]);
    assert_eq!(config["data"]["fqdn"], FQDN);
    assert_eq!(config["data"]["db_name"], "susemanager");
    let credentials = env.get(&["secret", "db-credentials", "-n", env.ns]);
    assert_eq!(credentials["type"], "kubernetes.io/basic-auth");
    assert_eq!(decoded(&credentials, "username"), "spacewalk");
    let generated = decoded(&credentials, "password");
    assert!(
        generated.len() == 32 && generated.chars().all(|c| c.is_ascii_alphanumeric()),
        "a generated password of 32 letters and digits"
    );

    assert_eq!(var("ORG_NAME").expect("ORG_NAME")["value"], "First Org");
    // Again, without the administrator's password (its Secret is there) nor the first start's
    // flags (remembered): nothing changes.
    let before = written_versions(&env);
    let again = env
        .command(&["install", FQDN])
        .output()
        .expect("kubectl runs");
    let (_, stderr) = text(&again);
    assert!(again.status.success(), "{}", both(&again));
    assert!(stderr.contains("Nothing to do"), "{stderr}");
    assert_eq!(written_versions(&env), before, "the second run wrote");
    assert_eq!(
        decoded(
            &env.get(&["secret", "db-credentials", "-n", env.ns]),
            "password"
        ),
        generated,
        "the generated password changed"
    );
    report_holds_the_install(&env, &generated);

    let other = env
        .command(&["install", "other.example.com"])
        .output()
        .expect("kubectl runs");
    let (_, stderr) = text(&other);
    assert!(!other.status.success(), "{}", both(&other));
    assert!(
        stderr.contains("was installed as server.example.com"),
        "{stderr}"
    );
    assert_eq!(written_versions(&env), before, "the renaming run wrote");

    let refused = install(&env, &["--tag", "2025.10"]);
    let (_, stderr) = text(&refused);
    assert!(!refused.status.success(), "{}", both(&refused));
    assert!(
        stderr.contains("refused: this run would change the images of the server")
            && stderr.contains("installed by this tool")
            && stderr.contains("kubectl uyuni"),
        "{stderr}"
    );
    assert_eq!(written_versions(&env), before, "the refused run wrote");
}

/// rke2 without cert-manager: without certificate files the install stops before writing
/// anything; with them, it completes without any cert-manager object, the server's
/// certificate written from the files, and a second run plans nothing.
#[test]
fn an_install_with_third_party_certificates_needs_no_cert_manager() {
    if !real_plane_or_skip("install with third-party certificates") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::Rke2, false), NS_INSTALL_THIRD_PARTY);
    let refused = env
        .command(&["install", SOURCE])
        .env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .output()
        .expect("kubectl runs");
    let (_, stderr) = text(&refused);
    assert!(!refused.status.success(), "{}", both(&refused));
    assert!(stderr.contains("cert-manager"), "{stderr}");
    assert!(!namespace_exists(&env, env.ns), "the refused run wrote");

    let (_dir, flags, key) = third_party_flags();
    let mut args = vec!["install", SOURCE];
    args.extend(flags.iter().map(String::as_str));
    let out = env
        .command(&args)
        .env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    let (stdout, stderr) = text(&out);
    assert!(!stdout.contains(key.trim()) && !stderr.contains(key.trim()));
    assert_no_install_secret(&env, &out);
    let cert = env.get(&["secret", "uyuni-cert", "-n", env.ns]);
    assert_eq!(
        cert["metadata"]["annotations"]["kubectl-uyuni.io/third-party-certificate"],
        "true"
    );
    let deployments = env.items(&["deployments", "-n", env.ns]);
    for d in &deployments {
        assert_eq!(
            condition(d, "Available").as_deref(),
            Some("True"),
            "{:#}",
            d["status"]
        );
    }
    let before = written_versions(&env);
    let again = env
        .command(&["install", SOURCE])
        .output()
        .expect("kubectl runs");
    let (_, stderr) = text(&again);
    assert!(again.status.success(), "{}", both(&again));
    assert!(stderr.contains("Nothing to do"), "{stderr}");
    assert_eq!(written_versions(&env), before, "the second run wrote");
}

/// SIGINT while the install waits for the database: the message says how to resume, the
/// lease is released, and the same command finishes the install.
#[test]
fn an_interrupted_install_resumes() {
    if !real_plane_or_skip("an interrupted install") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_INSTALL_INTERRUPTED);
    let child = env
        .command(&["install", FQDN])
        .env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    loop {
        let db = env
            .items(&["deployments", "-n", env.ns])
            .into_iter()
            .any(|d| d["metadata"]["name"] == "db");
        if db {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the install never wrote Deployment db"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // kubectl execs its plugins, so the child's pid is the plugin's.
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(130), "{}", both(&out));
    assert!(
        stderr.contains("interrupted by SIGINT")
            && stderr.contains("kubectl uyuni --kubeconfig")
            && stderr.contains(&format!("install {FQDN}")),
        "{stderr}"
    );
    let again = env
        .command(&["install", FQDN])
        .output()
        .expect("kubectl runs");
    assert!(again.status.success(), "{}", both(&again));
    let (stdout, _) = text(&again);
    assert!(stdout.contains("installed"), "{stdout}");
    let server = env.get(&["deployment", "uyuni", "-n", env.ns]);
    assert_eq!(condition(&server, "Available").as_deref(), Some("True"));
}

/// Two commands at once: while an install waits for its database, `uninstall` is refused
/// before any write, naming the install that holds the namespace's lease, and the install
/// completes; once it has, the same uninstall goes through.
#[test]
fn an_uninstall_during_an_install_is_refused_naming_the_install() {
    if !real_plane_or_skip("install and uninstall at once") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_INSTALL_LOCKED);
    let child = env
        .command(&["install", FQDN])
        .env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while !env
        .items(&["deployments", "-n", env.ns])
        .into_iter()
        .any(|d| d["metadata"]["name"] == "db")
    {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the install never wrote Deployment db"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let before = ours(&env).len();
    let refused = env.uyuni(&["uninstall", "--yes"]);
    assert!(!refused.status.success(), "{}", both(&refused));
    let (_, stderr) = text(&refused);
    for part in [
        format!("another run is writing to namespace {NS_INSTALL_LOCKED}"),
        format!("install {FQDN}"),
        "Nothing was written".to_owned(),
    ] {
        assert!(stderr.contains(&part), "{part:?} in:\n{stderr}");
    }
    assert!(
        ours(&env).len() >= before,
        "the refused uninstall deleted something"
    );
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", both(&out));
    let server = env.get(&["deployment", "uyuni", "-n", env.ns]);
    assert_eq!(condition(&server, "Available").as_deref(), Some("True"));
    let gone = env.uyuni(&["uninstall", "--yes"]);
    assert!(gone.status.success(), "{}", both(&gone));
    assert!(
        !env.items(&["deployments", "-n", env.ns])
            .into_iter()
            .any(|d| d["metadata"]["name"] == "uyuni"),
        "uninstall left Deployment uyuni"
    );
}

/// Bad input is refused with what to do and nothing written: no administrator password
/// without a terminal, an invalid e-mail, FQDN or CA country, a server certificate without
/// its key, a namespace that holds another server, claims the install did not create.
#[test]
fn an_install_refuses_bad_input_before_any_write() {
    if !real_plane_or_skip("install's refusals") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_INSTALL_REFUSED);
    let (_dir, flags, _) = third_party_flags();
    let cert_only = vec!["--ssl-server-cert", flags[1].as_str()];
    let cases: Vec<(Vec<&str>, bool, &str)> = vec![
        (vec![], false, "--admin-password-file"),
        (vec!["--email", "Admin <a@b.example.com>"], true, "--email"),
        (vec!["--ssl-country", "DEU"], true, "--ssl-country"),
        (cert_only, true, "--ssl-server-key"),
    ];
    for (extra, with_password, expected) in cases {
        let mut args = vec!["install", FQDN];
        args.extend(extra.iter().copied());
        let mut command = env.command(&args);
        if with_password {
            command.env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD);
        }
        // A verbose run whose stderr is a file: its log lines carry no colour codes.
        let out = command
            .env_remove("NO_COLOR")
            .arg("-vv")
            .output()
            .expect("kubectl runs");
        let (_, stderr) = text(&out);
        assert!(!out.status.success(), "{args:?}: {}", both(&out));
        assert!(
            stderr.contains("DEBUG"),
            "{args:?}: no log lines in {stderr}"
        );
        assert!(
            !stderr.contains('\u{1b}'),
            "{args:?}: escape codes in {stderr}"
        );
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            !namespace_exists(&env, env.ns),
            "{args:?} created the namespace"
        );
    }
    let out = env
        .command(&["install", "Not_A_Name"])
        .env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .output()
        .expect("kubectl runs");
    // A value that cannot be used is a usage error (docs/output.md, "Exit codes").
    assert_eq!(out.status.code(), Some(2), "{}", both(&out));
    assert!(
        text(&out).1.contains("fully qualified domain name"),
        "{}",
        both(&out)
    );

    // Another server in the namespace, then a claim of someone else's.
    // No client-side validation: its fetch of the OpenAPI document can time out under load.
    let create = |args: &[&str]| {
        let args = [args, &["--validate=false"]].concat();
        let out = env.cluster.kubectl(&args, "").expect("kubectl runs");
        assert!(out.status.success(), "{}", both(&out));
    };
    create(&["create", "namespace", env.ns]);
    create(&[
        "create",
        "deployment",
        "uyuni",
        "--image=registry.example.com/other:1",
        "-n",
        env.ns,
    ]);
    let out = install(&env, &[]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        stderr.contains("holds a server already (Deployment uyuni)"),
        "{stderr}"
    );
    assert!(ours(&env).is_empty(), "the refused run wrote");
    let out = env
        .cluster
        .kubectl(&["delete", "deployment", "uyuni", "-n", env.ns], "")
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    let claim = serde_json::json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "var-spacewalk", "namespace": env.ns},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}
        }
    });
    let out = env
        .cluster
        .kubectl(
            &["apply", "--server-side", "--validate=false", "-f", "-"],
            &claim.to_string(),
        )
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    let out = install(&env, &[]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        stderr.contains("var-spacewalk") && stderr.contains("--reuse-volumes"),
        "{stderr}"
    );
    assert!(ours(&env).is_empty(), "the refused run wrote");
}

const NS_LIFECYCLE: &str = "uyuni-lifecycle";

fn replicas(env: &RealEnv) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = env
        .items(&["deployments", "-n", env.ns])
        .iter()
        .map(|d| {
            (
                d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                d["spec"]["replicas"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    out.sort();
    out
}

/// stop, start and restart on an installed server: without a terminal and without --yes the stop of a
/// serving server is refused; with it every Deployment goes to 0, the database last, the
/// counts recorded; a second stop plans nothing; start brings each back to its count, the
/// Deployment controller's rollout Available again.
#[test]
fn stop_and_start_an_installed_server() {
    if !real_plane_or_skip("stop and start") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_LIFECYCLE);
    let out = install(&env, &["--hubxmlrpc-replicas", "2"]);
    assert!(out.status.success(), "{}", both(&out));
    let running = replicas(&env);
    assert!(
        running.contains(&("hub-xmlrpc".to_owned(), 2)),
        "{running:?}"
    );

    let refused = env.uyuni(&["stop"]);
    assert!(!refused.status.success(), "{}", both(&refused));
    assert!(text(&refused).1.contains("--yes"), "{}", both(&refused));
    assert_eq!(replicas(&env), running, "the refused stop scaled");

    let stopped = env.uyuni(&["stop", "--yes"]);
    assert!(stopped.status.success(), "{}", both(&stopped));
    assert!(
        text(&stopped).0.contains("is stopped"),
        "{}",
        both(&stopped)
    );
    assert!(
        replicas(&env).iter().all(|(_, n)| *n == 0),
        "{:?}",
        replicas(&env)
    );
    let recorded = env.get(&["configmap", "uyuni-replicas", "-n", env.ns]);
    assert_eq!(recorded["data"]["hub-xmlrpc"], "2", "{recorded:#}");
    let again = env.uyuni(&["stop", "--yes"]);
    assert!(again.status.success(), "{}", both(&again));
    assert!(text(&again).1.contains("Nothing to do"), "{}", both(&again));

    let started = env.uyuni(&["start"]);
    assert!(started.status.success(), "{}", both(&started));
    assert_eq!(replicas(&env), running);

    let restarted = env.uyuni(&["restart", "--yes"]);
    assert!(restarted.status.success(), "{}", both(&restarted));
    let server = env.get(&["deployment", "uyuni", "-n", env.ns]);
    assert!(
        server["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_string(),
        "{:#}",
        server["spec"]["template"]
    );
    let db = env.get(&["deployment", "db", "-n", env.ns]);
    assert!(
        db["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"]
            .is_null(),
        "the database was restarted"
    );
    assert_eq!(replicas(&env), running);

    // What stop recorded goes with the rest of the tool's objects.
    let removed = env.uyuni(&["uninstall", "--yes"]);
    assert!(removed.status.success(), "{}", both(&removed));
    assert!(
        !env.items(&["configmaps", "-n", env.ns])
            .iter()
            .any(|c| c["metadata"]["name"] == "uyuni-replicas"),
        "ConfigMap uyuni-replicas outlived the uninstall"
    );
    for d in env.items(&["deployments", "-n", env.ns]) {
        assert_eq!(
            condition(&d, "Available").as_deref(),
            Some("True"),
            "{:#}",
            d["status"]
        );
    }
}

const NS_CHAIN: &str = "uyuni-chain";

/// The server's life as issue 36 tells it, on one namespace: install → status healthy (exit 0)
/// → stop → status says stopped (exit 3) → start → status healthy → uninstall (the data kept) →
/// install --reuse-volumes on it → uninstall --purge-volumes --delete-namespace: nothing of
/// ours left.
#[test]
fn a_servers_life_install_status_stop_start_uninstall_reinstall_purge() {
    if !real_plane_or_skip("a server's life on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_CHAIN);
    let out = install(&env, &[]);
    assert!(out.status.success(), "{}", both(&out));
    let status = |expected: i32| {
        let out = env.uyuni(&["status", "--exit-code"]);
        assert_eq!(out.status.code(), Some(expected), "{}", both(&out));
        out
    };
    status(0);

    let out = env.uyuni(&["stop", "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    let stopped = status(3);
    assert!(text(&stopped).1.contains("stopped"), "{}", both(&stopped));

    let out = env.uyuni(&["start"]);
    assert!(out.status.success(), "{}", both(&out));
    status(0);

    let out = env.uyuni(&["uninstall", "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        env.items(&["deployments", "-n", env.ns]).is_empty(),
        "Deployments left after uninstall"
    );
    assert!(
        env.items(&["persistentvolumeclaims", "-n", env.ns])
            .iter()
            .any(|c| c["metadata"]["name"] == "var-pgsql18"),
        "the database claim was not kept"
    );

    let out = install(&env, &["--reuse-volumes"]);
    assert!(out.status.success(), "{}", both(&out));
    status(0);

    let out = env.uyuni(&[
        "uninstall",
        "--purge-volumes",
        "--delete-namespace",
        "--yes",
    ]);
    assert!(out.status.success(), "{}", both(&out));
    let left: Vec<String> = env
        .items(&[
            "secrets,configmaps,persistentvolumeclaims,deployments,jobs,services",
            "-n",
            env.ns,
            "-l",
            "app.kubernetes.io/managed-by=kubectl-uyuni",
        ])
        .iter()
        .map(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]))
        .collect();
    assert!(left.is_empty(), "left after the purge: {left:?}");
}

/// `report` after the install (the second run wrote nothing, so recorded nothing): the bundle
/// holds the install's record with every step done or found done, its Jobs' kept logs, the
/// objects, and no secret, as given or as a Secret's data holds it.
fn report_holds_the_install(env: &RealEnv, generated: &str) {
    use base64::Engine as _;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("report.tar.gz");
    let out = env.uyuni(&["report", "--file", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", both(&out));
    let files = crate::support::records::unpack(&file);
    let prefix = format!("uyuni-report-{}/", env.ns);
    let records: Vec<(&String, &String)> = files
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{prefix}operations/")) && k.ends_with(".json"))
        .collect();
    assert_eq!(records.len(), 1, "{:?}", files.keys());
    let record: Value = serde_json::from_str(records[0].1).expect("the record");
    assert_eq!(record["command"], "install", "{record:#}");
    assert_eq!(record["outcome"], "succeeded", "{record:#}");
    let steps = record["steps"].as_array().expect("steps");
    assert!(
        steps
            .iter()
            .all(|s| s["phase"] == "done" || s["phase"] == "skipped"),
        "{record:#}"
    );
    let jobs: Vec<&str> = steps.iter().filter_map(|s| s["job"].as_str()).collect();
    assert!(!jobs.is_empty(), "{record:#}");
    for job in jobs {
        assert!(
            files.keys().any(|k| k.ends_with(&format!("/{job}.log"))),
            "no kept log of {job}: {:?}",
            files.keys()
        );
    }
    assert!(
        files.contains_key(&format!("{prefix}objects/deployment_uyuni.yaml")),
        "{:?}",
        files.keys()
    );
    let summary: Value =
        serde_json::from_str(&files[&format!("{prefix}report.json")]).expect("report.json");
    assert!(summary["serverVersion"].is_string(), "{summary:#}");
    let secrets = [ADMIN_PASSWORD.to_owned(), generated.to_owned()];
    for secret in secrets {
        let encoded = base64::engine::general_purpose::STANDARD.encode(&secret);
        for (path, text) in &files {
            assert!(
                !text.contains(&secret) && !text.contains(&encoded),
                "a secret in {path}"
            );
        }
    }
}
