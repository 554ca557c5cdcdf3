//! Migrations against the real control plane: upstream's kube-apiserver, etcd, controllers and
//! scheduler v1.37, our node agent running the pods (the scenario plays what the Jobs' scripts
//! would do, as the pods' ServiceAccounts), the local-path provisioner and the cert-manager
//! stand-in (`scripts/cluster.sh up`). The Job controller completes the Jobs, the Deployment
//! controller rolls the Deployments out through ReplicaSets, the PV controller binds the claims,
//! RBAC decides what the data-sync pod may patch — none of it is our simulation.
//!
//! The tests share one control plane per configuration (flavour, cert-manager), started by the
//! first test that needs it ([`RealCluster::shared`]; a start is about 7 s of CPU): each test
//! migrates into a namespace of its own, and the node agent plays each namespace's scenario
//! ([`shared_scenario`]). Run in one process (scripts/run-tests.py runs them at once, with
//! `--test-threads=6`), they start three control planes instead of six.

use crate::support;

mod install;
mod rbac;
mod security;
mod status;
mod uninstall;
mod upgrade;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;
use support::{CA_PASSWORD, SOURCE, assert_no_secret, ssh_flags, text, third_party_flags};
use uyuni_testdata::real::{self, RealCluster, RealConfig};
use uyuni_testdata::{Flavour, Scenario, scenarios};

/// The namespaces of the tests, one each (the clusters are shared).
const NS_COMPLETE: &str = "uyuni";
const NS_PREPARE: &str = "uyuni-prepare";
const NS_THIRD_PARTY: &str = "uyuni-third-party";
const NS_FAILING: &str = "uyuni-failing";
const NS_PSA: &str = "uyuni-psa";
const NS_RBAC: &str = "uyuni-rbac";
const NS_REMEMBERED: &str = "uyuni-remembered";
const NS_LEASE: &str = "uyuni-lease";

/// The source's third-party certificate and key (self-signed), the same for every caller: the
/// scenario that carries them is part of the shared cluster's configuration.
fn source_certificate() -> &'static (String, String) {
    static MADE: OnceLock<(String, String)> = OnceLock::new();
    MADE.get_or_init(|| {
        use uyuni_testdata::certs::{Signer, issue};
        let issued = issue(
            &serde_json::json!({"dnsNames": [SOURCE]}),
            Signer::SelfSigned,
        )
        .expect("certificate");
        (issued.tls_crt, issued.tls_key)
    })
}

/// What the node agent plays in every shared cluster: the demo's migration; in NS_COMPLETE a
/// source with the Hub XML-RPC API and debug logging (so that their objects too meet the real
/// apiserver); in NS_THIRD_PARTY a source with a third-party certificate and PostgreSQL 18; in
/// NS_FAILING a db-fixup that fails once.
pub(crate) fn shared_scenario() -> Scenario {
    let mut shared = scenarios::migration();

    let mut complete = scenarios::migration();
    complete.edit_job_data("data-sync", |data| {
        data.insert("has_hubxmlrpc".into(), "true".into());
        data.insert("debug".into(), "true".into());
    });
    shared.namespaces.insert(NS_COMPLETE.into(), complete);

    let (cert, key) = source_certificate();
    let mut third_party = scenarios::migration();
    if let Some(job) = third_party.jobs.get_mut("data-sync") {
        job.duration_ms = 300;
    }
    third_party.edit_job_data("data-sync", |data| {
        data.remove("ca.key");
        data.insert("server.crt".into(), cert.clone());
        data.insert("server.key".into(), key.clone());
        // Self-signed: its own CA, which the source trusts.
        data.insert("ca.crt".into(), cert.clone());
        data.insert("pg_version".into(), "18".into());
    });
    shared.namespaces.insert(NS_THIRD_PARTY.into(), third_party);

    let mut failing = scenarios::migration();
    let ok = failing.jobs.get("db-fixup").cloned().unwrap_or_default();
    let mut fail_once = uyuni_testdata::JobScript::fail(1, &["ERROR: the fix-up failed"]);
    fail_once.later_attempts = vec![ok];
    failing.jobs.insert("db-fixup".into(), fail_once);
    shared.namespaces.insert(NS_FAILING.into(), failing);

    // Copies long enough for two runs started together to meet at the lease.
    let mut lease = scenarios::migration();
    if let Some(job) = lease.jobs.get_mut("data-sync") {
        job.duration_ms = 8_000;
    }
    shared.namespaces.insert(NS_LEASE.into(), lease);
    install::add_scenarios(&mut shared);
    upgrade::add_scenarios(&mut shared);
    shared
}

/// The shared cluster of a flavour, with or without the cert-manager stand-in.
pub(crate) fn config(flavour: Flavour, cert_manager: bool) -> RealConfig {
    RealConfig {
        scenario: Some(shared_scenario()),
        flavour,
        cert_manager,
        ..RealConfig::default()
    }
}

pub(crate) struct RealEnv {
    pub(crate) cluster: &'static RealCluster,
    /// The test's own namespace in the shared cluster.
    pub(crate) ns: &'static str,
    bin: tempfile::TempDir,
    cache: tempfile::TempDir,
}

impl RealEnv {
    pub(crate) fn start(config: &RealConfig, ns: &'static str) -> RealEnv {
        let cluster = RealCluster::shared(config).expect("the real control plane starts");
        let bin = tempfile::tempdir().expect("tempdir");
        let plugin = assert_cmd::cargo::cargo_bin("kubectl-uyuni");
        std::os::unix::fs::symlink(&plugin, bin.path().join("kubectl-uyuni")).expect("symlink");
        RealEnv {
            cluster,
            ns,
            bin,
            cache: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// `kubectl uyuni --kubeconfig ADMIN -n uyuni ARGS…` through the real kubectl.
    pub(crate) fn uyuni(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("kubectl runs")
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let path = format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = Command::new("kubectl");
        command
            .env("PATH", path)
            .env("KUBECACHEDIR", self.cache.path())
            .env_remove("KUBECONFIG")
            .env("UYUNI_SSL_PASSWORD", CA_PASSWORD)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .arg("uyuni")
            .arg("--kubeconfig")
            .arg(self.cluster.kubeconfig_path())
            .args(["-n", self.ns])
            .args(args);
        command
    }

    /// Like [`RealEnv::uyuni`], without the CA password in the environment.
    fn uyuni_without_ca_password(&self, args: &[&str]) -> Output {
        self.command(args)
            .env_remove("UYUNI_SSL_PASSWORD")
            .output()
            .expect("kubectl runs")
    }

    fn migrate(&self, extra: &[String]) -> Output {
        let mut args = vec!["migrate", SOURCE, "--yes"];
        args.extend(extra.iter().map(String::as_str));
        self.uyuni(&args)
    }

    /// `kubectl get ARGS -o json` as the cluster admin.
    pub(crate) fn get(&self, args: &[&str]) -> Value {
        let mut all = vec!["get"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["-o", "json"]);
        let out = self.cluster.kubectl(&all, "").expect("kubectl runs");
        assert!(out.status.success(), "kubectl get {args:?}: {}", both(&out));
        serde_json::from_slice(&out.stdout).expect("JSON")
    }

    pub(crate) fn items(&self, args: &[&str]) -> Vec<Value> {
        self.get(args)["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

pub(crate) fn both(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    format!("stdout:\n{stdout}\nstderr:\n{stderr}")
}

pub(crate) fn condition(obj: &Value, kind: &str) -> Option<String> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str())
        .map(str::to_owned)
}

pub(crate) fn real_plane_or_skip(what: &str) -> bool {
    if let Err(why) = real::available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the real control plane is needed in CI: {why}"
        );
        println!("{what} NOT tested: {why}");
        return false;
    }
    true
}

/// What our field manager wrote, as (kind/name, its managedFields entries): unchanged unless
/// a run of ours wrote to the object.
pub(crate) fn written_versions(env: &RealEnv) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = env
        .items(&[
            "secrets,configmaps,services,persistentvolumeclaims,jobs,serviceaccounts,roles,rolebindings",
            "-n",
            env.ns,
            "-l",
            "app.kubernetes.io/managed-by=kubectl-uyuni",
        ])
        .iter()
        .map(|o| {
            (
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default()
                ),
                // What our field manager last wrote, not the resourceVersion: the PV
                // controller binds a claim (annotations, volumeName, status) whenever its pod
                // is scheduled, which is no write of ours.
                ours_written(o),
            )
        })
        .collect();
    out.sort();
    out
}

/// The entries of `kubectl-uyuni`'s field managers in an object's managedFields: when it last
/// wrote which fields (unchanged unless it wrote something).
fn ours_written(object: &Value) -> String {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| {
            m["manager"]
                .as_str()
                .is_some_and(|n| n.starts_with("kubectl-uyuni"))
        })
        .map(|m| {
            format!(
                "{} {} {} {}",
                m["manager"], m["operation"], m["time"], m["fieldsV1"]
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The README's migration, with the fixture's flags and `--configure-ingress-controller`, on
/// the real control plane, from a source with the Hub XML-RPC API and debug logging: the
/// server-side dry run writes nothing; the run completes, the source's PostgreSQL 16 data
/// upgraded to 18 (every Job Complete by the Job controller, every Deployment Available by the
/// Deployment controller, the Hub's included, every claim Bound to a provisioned volume),
/// Traefik's HelmChartConfig written; a second run plans nothing and writes nothing. Every
/// object a migration writes, the optional ones included, is so admitted by upstream's
/// validation, defaulting and admission with server-side apply and our field manager.
#[test]
fn a_migration_completes_on_the_real_control_plane_and_a_second_run_plans_nothing() {
    if !real_plane_or_skip("the migration on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_COMPLETE);

    let mut flags = ssh_flags();
    flags.push("--configure-ingress-controller".into());
    let mut dry = vec![
        "migrate".to_owned(),
        SOURCE.to_owned(),
        "--dry-run=server".to_owned(),
    ];
    dry.extend(flags.iter().cloned());
    let dry: Vec<&str> = dry.iter().map(String::as_str).collect();
    let out = env.uyuni(&dry);
    assert!(out.status.success(), "{}", both(&out));
    assert_no_secret(&out);
    let namespaces = env.items(&["namespaces"]);
    assert!(
        !namespaces.iter().any(|n| n["metadata"]["name"] == env.ns),
        "the server-side dry run created namespace {}",
        env.ns
    );

    let out = env.migrate(&flags);
    assert!(out.status.success(), "{}", both(&out));
    assert_no_secret(&out);
    // The Secrets only the migration used are gone once it finished; the second run below,
    // without any SSH flag, needs neither.
    let secrets = env.items(&["secrets", "-n", env.ns]);
    for gone in ["uyuni-migration-key", "uyuni-ca-password"] {
        assert!(
            !secrets.iter().any(|s| s["metadata"]["name"] == gone),
            "Secret {gone} is left after the migration"
        );
    }
    assert!(
        secrets.iter().any(|s| s["metadata"]["name"] == "uyuni-ca"),
        "Secret uyuni-ca is missing"
    );

    let jobs = env.items(&["jobs", "-n", env.ns]);
    assert!(
        jobs.iter()
            .any(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/step"] == "data-sync"),
        "no data-sync Job: {jobs:#?}"
    );
    for job in &jobs {
        let name = job["metadata"]["name"].as_str().unwrap_or_default();
        assert_eq!(
            condition(job, "Complete").as_deref(),
            Some("True"),
            "Job {name} is not Complete: {:#}",
            job["status"]
        );
    }
    // The source runs PostgreSQL 16, the image 18: the data is upgraded into a new claim that
    // the database then runs on.
    assert!(
        jobs.iter()
            .any(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/step"] == "db-upgrade"),
        "no db-upgrade Job: {jobs:#?}"
    );
    let db = env.get(&["deployment", "db", "-n", env.ns]);
    assert!(
        claims_of(&db).contains(&"var-pgsql18".to_owned()),
        "{:?}",
        claims_of(&db)
    );
    let deployments = env.items(&["deployments", "-n", env.ns]);
    for name in ["uyuni", "hub-xmlrpc"] {
        assert!(
            deployments.iter().any(|d| d["metadata"]["name"] == name),
            "no Deployment {name}"
        );
    }
    for d in &deployments {
        let name = d["metadata"]["name"].as_str().unwrap_or_default();
        assert_eq!(
            condition(d, "Available").as_deref(),
            Some("True"),
            "Deployment {name} is not Available: {:#}",
            d["status"]
        );
    }
    let claims = env.items(&["persistentvolumeclaims", "-n", env.ns]);
    assert!(claims.len() > 20, "{} claims", claims.len());
    for claim in &claims {
        let name = claim["metadata"]["name"].as_str().unwrap_or_default();
        // WaitForFirstConsumer: a claim no pod mounts yet stays Pending, as on k3s.
        let phase = claim["status"]["phase"].as_str().unwrap_or_default();
        assert!(
            phase == "Bound" || phase == "Pending",
            "claim {name}: {phase}"
        );
        assert_eq!(claim["spec"]["storageClassName"], "local-path", "{name}");
    }
    // What the data-sync pod patched as its ServiceAccount, through the Role we wrote: the
    // facts stay, the secret values were emptied once the server's Secrets held them.
    let data = env.get(&["secret", "uyuni-migration-data", "-n", env.ns]);
    assert!(
        data["data"].as_object().is_some_and(|d| d.len() > 3),
        "{data:#}"
    );
    assert_migration_data_redacted(&env, &["db_password", "report_db_password", "ca.key"]);
    // The CA key Job ran as its own ServiceAccount, which patched Secret uyuni-ca.
    for job in jobs_of(&env, "ca-key") {
        assert_eq!(
            job["spec"]["template"]["spec"]["serviceAccountName"], "uyuni-ca-key",
            "{job:#}"
        );
    }
    assert!(
        secret_text(&env, "uyuni-ca", "tls.key").is_some_and(|k| !k.is_empty()),
        "the CA key Job did not write the key"
    );

    let traefik = || env.get(&["helmchartconfig", "traefik", "-n", "kube-system"]);
    let config = traefik();
    let values = config["spec"]["valuesContent"].as_str().unwrap_or_default();
    assert!(
        values.contains("salt-publish:") && values.contains("exposedPort: 4505"),
        "{values}"
    );

    let before = written_versions(&env);
    assert!(!before.is_empty());
    let again = env.migrate(&["--configure-ingress-controller".to_owned()]);
    let (_, stderr) = text(&again);
    assert!(again.status.success(), "{}", both(&again));
    assert!(stderr.contains("Nothing to do"), "{stderr}");
    assert_eq!(
        written_versions(&env),
        before,
        "the second run changed objects"
    );
    assert_eq!(
        traefik()["metadata"]["resourceVersion"],
        config["metadata"]["resourceVersion"],
        "the second run changed the HelmChartConfig"
    );

    // Another tag on the running server is an upgrade: refused before any write (it once
    // stopped the server and rebuilt the database from the migration-time copy).
    let deployment_versions = || {
        let mut v: Vec<(String, String)> = env
            .items(&["deployments", "-n", env.ns])
            .iter()
            .map(|d| {
                (
                    d["metadata"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned(),
                    // The spec's version: the controllers keep writing the status.
                    d["metadata"]["generation"].to_string(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let deployments_before = deployment_versions();
    let refused = env.migrate(&[
        "--configure-ingress-controller".to_owned(),
        "--tag".to_owned(),
        "2025.10".to_owned(),
    ]);
    let (_, stderr) = text(&refused);
    assert!(!refused.status.success(), "{}", both(&refused));
    assert!(
        stderr.contains("refused: this run would change the images of the server")
            && stderr.contains("this run asks for registry.opensuse.org/uyuni/server:2025.10"),
        "{stderr}"
    );
    assert_eq!(written_versions(&env), before, "the refused run wrote");
    assert_eq!(
        deployment_versions(),
        deployments_before,
        "the refused run changed a Deployment"
    );
    assert!(Path::new(&env.cluster.kubeconfig_path()).is_file());
}

fn jobs_of(env: &RealEnv, step: &str) -> Vec<Value> {
    env.items(&["jobs", "-n", env.ns])
        .into_iter()
        .filter(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/step"] == step)
        .collect()
}

/// rke2 without cert-manager, the certificates given as files: a `--prepare` copy while the
/// source serves, then the final run with only the certificate flags; each copy is its own
/// Job, completed by the Job controller.
#[test]
fn prepare_then_final_on_rke2_with_third_party_certificates() {
    if !real_plane_or_skip("--prepare and the final run on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::Rke2, false), NS_PREPARE);
    let (_certs, tls, _key) = third_party_flags();
    let mut prepare = vec!["migrate", SOURCE, "--prepare"];
    let ssh = ssh_flags();
    prepare.extend(ssh.iter().map(String::as_str));
    // The certificates are an input of the final run, checked before the first write.
    prepare.extend(tls.iter().map(String::as_str));
    let out = env.uyuni(&prepare);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        env.items(&["deployments", "-n", env.ns]).is_empty(),
        "--prepare started a Deployment"
    );
    let syncs = jobs_of(&env, "data-sync");
    assert_eq!(syncs.len(), 1, "{syncs:#?}");
    assert_eq!(condition(&syncs[0], "Complete").as_deref(), Some("True"));

    // The certificates again (--prepare writes no TLS object); the SSH material is kept.
    let out = env.migrate(&tls);
    assert!(out.status.success(), "{}", both(&out));
    assert_no_secret(&out);
    let syncs = jobs_of(&env, "data-sync");
    let modes: Vec<&str> = syncs
        .iter()
        .filter_map(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/sync-mode"].as_str())
        .collect();
    assert!(
        modes.contains(&"prepare") && modes.contains(&"final"),
        "{modes:?}"
    );
    let server = env.get(&["deployment", "uyuni", "-n", env.ns]);
    assert_eq!(condition(&server, "Available").as_deref(), Some("True"));
    // The certificates came from the files: no cert-manager object was needed or written.
    let cert = env.get(&["secret", "uyuni-cert", "-n", env.ns]);
    assert_eq!(cert["type"], "kubernetes.io/tls");
}

/// `--prepare --tag X`, then a final run without `--tag`: the server runs at tag X, from the
/// record the prepare run wrote in ConfigMap `uyuni-server-spec` (written, read back and
/// applied again through upstream's apiserver and server-side apply).
#[test]
fn a_tag_given_to_prepare_is_remembered_by_the_final_run() {
    if !real_plane_or_skip("the remembered flags on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_REMEMBERED);
    let mut prepare = vec!["migrate", SOURCE, "--prepare", "--tag", "2025.10"];
    let ssh = ssh_flags();
    prepare.extend(ssh.iter().map(String::as_str));
    let out = env.uyuni(&prepare);
    assert!(out.status.success(), "{}", both(&out));
    let spec = env.get(&["configmap", "uyuni-server-spec", "-n", env.ns]);
    assert_eq!(spec["data"]["tag"], "2025.10", "{spec:#}");

    // --keep-migration-data: the Secrets and values only the migration used stay.
    let keep = ["--keep-migration-data".to_owned()];
    let out = env.migrate(&keep);
    assert!(out.status.success(), "{}", both(&out));
    let server = env.get(&["deployment", "uyuni", "-n", env.ns]);
    let image = server["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default();
    assert!(image.ends_with("/uyuni/server:2025.10"), "{image}");
    assert_eq!(condition(&server, "Available").as_deref(), Some("True"));
    assert_migration_data_kept(&env);
    let secrets = env.items(&["secrets", "-n", env.ns]);
    for kept in ["uyuni-migration-key", "uyuni-ca-password"] {
        assert!(
            secrets.iter().any(|s| s["metadata"]["name"] == kept),
            "Secret {kept} was deleted"
        );
    }

    // Once more without the tag: nothing is written, nothing reverted.
    let before = written_versions(&env);
    let again = env.migrate(&keep);
    let (_, stderr) = text(&again);
    assert!(again.status.success(), "{}", both(&again));
    assert!(stderr.contains("Nothing to do"), "{stderr}");
    assert_eq!(written_versions(&env), before, "the run changed objects");

    // A run without --keep-migration-data finishes the clean-up.
    let out = env.migrate(&[]);
    assert!(out.status.success(), "{}", both(&out));
    assert_migration_data_redacted(&env, &["db_password", "report_db_password", "ca.key"]);
    let secrets = env.items(&["secrets", "-n", env.ns]);
    for gone in ["uyuni-migration-key", "uyuni-ca-password"] {
        assert!(
            !secrets.iter().any(|s| s["metadata"]["name"] == gone),
            "Secret {gone} is left after the migration"
        );
    }
    // And a run after that reads the emptied values from the server's Secrets: nothing to do.
    let again = env.migrate(&[]);
    let (_, stderr) = text(&again);
    assert!(again.status.success(), "{}", both(&again));
    assert!(stderr.contains("Nothing to do"), "{stderr}");
}

/// Secret uyuni-migration-data holds `redacted` emptied and says so; the facts later runs
/// plan from stay.
fn assert_migration_data_redacted(env: &RealEnv, redacted: &[&str]) {
    let value = |key: &str| secret_text(env, "uyuni-migration-data", key);
    for key in redacted {
        assert_eq!(
            value(key).as_deref(),
            Some(""),
            "{key} is left in uyuni-migration-data"
        );
    }
    assert_eq!(
        value("redacted").as_deref(),
        Some(redacted.join(" ").as_str())
    );
    for key in ["job", "db_user", "pg_version", "ca.crt"] {
        assert!(value(key).is_some_and(|v| !v.is_empty()), "{key} is gone");
    }
}

/// Secret uyuni-migration-data still holds its secret values, as the data sync wrote them.
fn assert_migration_data_kept(env: &RealEnv) {
    let value = |key: &str| secret_text(env, "uyuni-migration-data", key);
    for key in ["db_password", "report_db_password", "ca.key"] {
        assert!(
            value(key).is_some_and(|v| !v.is_empty()),
            "{key} was emptied"
        );
    }
    assert_eq!(value("redacted"), None);
}

/// The Secret's `key`, decoded.
fn secret_text(env: &RealEnv, name: &str, key: &str) -> Option<String> {
    use base64::Engine as _;
    let secret = env.get(&["secret", name, "-n", env.ns]);
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(secret["data"][key].as_str()?)
        .ok()?;
    String::from_utf8(bytes).ok()
}

pub(crate) fn claims_of(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v["persistentVolumeClaim"]["claimName"].as_str())
        .map(str::to_owned)
        .collect()
}

/// The third TLS mode on the plain flavour: the source has a third-party server certificate and
/// key but no Uyuni CA key, so the migration keeps that certificate (no Issuer, no CA key Job,
/// no CA password needed); the source's PostgreSQL is already the image's major, so no upgrade
/// Job runs. The run completes, Secret uyuni-cert holds the source's certificate and key, and
/// a second run plans nothing.
#[test]
fn a_third_party_certificate_found_on_the_source_is_kept_on_the_real_control_plane() {
    if !real_plane_or_skip("the source's third-party certificate on the real control plane") {
        return;
    }
    // The scenario of NS_THIRD_PARTY (shared_scenario): this certificate and key on the
    // source, no CA key, PostgreSQL 18.
    let (cert, key) = source_certificate();
    let env = RealEnv::start(&config(Flavour::Plain, true), NS_THIRD_PARTY);
    // No CA password: the source has no CA key to decrypt.
    let mut args = vec!["migrate", SOURCE, "--yes"];
    let flags = ssh_flags();
    args.extend(flags.iter().map(String::as_str));
    let out = env.uyuni_without_ca_password(&args);
    assert!(out.status.success(), "{}", both(&out));
    assert_no_secret(&out);
    let key_body = key.lines().nth(1).expect("key line");
    let (stdout, stderr) = text(&out);
    assert!(
        !stdout.contains(key_body) && !stderr.contains(key_body),
        "the key leaked"
    );

    let jobs = env.items(&["jobs", "-n", env.ns]);
    for job in &jobs {
        let name = job["metadata"]["name"].as_str().unwrap_or_default();
        assert_eq!(
            condition(job, "Complete").as_deref(),
            Some("True"),
            "Job {name} is not Complete: {:#}",
            job["status"]
        );
    }
    let steps: Vec<&str> = jobs
        .iter()
        .filter_map(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/step"].as_str())
        .collect();
    assert!(
        steps.contains(&"data-sync") && steps.contains(&"db-fixup"),
        "{steps:?}"
    );
    assert!(
        !steps.contains(&"ca-key") && !steps.contains(&"db-upgrade"),
        "a CA key or upgrade Job ran: {steps:?}"
    );
    let server = env.get(&["deployment", "uyuni", "-n", env.ns]);
    assert_eq!(
        condition(&server, "Available").as_deref(),
        Some("True"),
        "{:#}",
        server["status"]
    );
    let db = env.get(&["deployment", "db", "-n", env.ns]);
    assert_eq!(condition(&db, "Available").as_deref(), Some("True"));
    assert!(
        claims_of(&db).contains(&"var-pgsql".to_owned()),
        "{:?}",
        claims_of(&db)
    );
    // The source's certificate and key, not one issued here.
    assert_eq!(
        secret_text(&env, "uyuni-cert", "tls.crt").as_deref(),
        Some(cert.as_str())
    );
    assert_eq!(
        secret_text(&env, "uyuni-cert", "tls.key").map(|k| k.trim_end().to_owned()),
        Some(key.trim_end().to_owned())
    );
    assert_eq!(
        env.get(&["secret", "uyuni-cert", "-n", env.ns])["type"],
        "kubernetes.io/tls"
    );
    let issuers = env.items(&["issuers.cert-manager.io", "-n", env.ns]);
    assert!(issuers.is_empty(), "an Issuer was written: {issuers:#?}");
    // The source's server key is kept in Secret uyuni-cert only.
    assert_migration_data_redacted(&env, &["db_password", "report_db_password", "server.key"]);

    let before = written_versions(&env);
    let again = env.uyuni_without_ca_password(&["migrate", SOURCE, "--yes"]);
    let (_, stderr) = text(&again);
    assert!(again.status.success(), "{}", both(&again));
    assert!(stderr.contains("Nothing to do"), "{stderr}");
    assert_eq!(
        written_versions(&env),
        before,
        "the second run changed objects"
    );
}

/// On the plain flavour, a step whose Job fails (the real Job controller marks it Failed) stops
/// the run with the step named; the next run retries it as a new Job and completes; the failed
/// Job stays for its logs.
#[test]
fn a_failed_step_stops_the_run_and_the_next_run_retries_it_as_a_new_job() {
    if !real_plane_or_skip("resuming after a failed step on the real control plane") {
        return;
    }
    // The plain flavour: no ingress controller, no distribution CRDs. The scenario of
    // NS_FAILING (shared_scenario): db-fixup fails once, then succeeds.
    let env = RealEnv::start(&config(Flavour::Plain, true), NS_FAILING);
    let out = env.migrate(&ssh_flags());
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{}", both(&out));
    assert!(stderr.contains("db-fixup"), "{stderr}");
    assert!(
        env.items(&["deployment", "-n", env.ns])
            .iter()
            .all(|d| d["metadata"]["name"] != "uyuni"),
        "the server was started after a failed fix-up"
    );
    let failed = jobs_of(&env, "db-fixup");
    assert_eq!(failed.len(), 1);
    assert_eq!(condition(&failed[0], "Failed").as_deref(), Some("True"));

    let out = env.migrate(&[]);
    assert!(out.status.success(), "{}", both(&out));
    let fixups = jobs_of(&env, "db-fixup");
    assert_eq!(fixups.len(), 2, "{fixups:#?}");
    assert_eq!(
        fixups
            .iter()
            .filter(|j| condition(j, "Complete").as_deref() == Some("True"))
            .count(),
        1
    );
    let server = env.get(&["deployment", "uyuni", "-n", env.ns]);
    assert_eq!(condition(&server, "Available").as_deref(), Some("True"));
}

/// Every pod template of the objects a dry run shows (`--dry-run -o yaml`: the Jobs and
/// Deployments the run would write, as it would write them).
fn pod_templates(objects: &[Value]) -> Vec<(String, Value)> {
    objects
        .iter()
        .filter_map(|object| {
            let template = &object["spec"]["template"];
            template["spec"].is_object().then(|| {
                (
                    format!(
                        "{}/{}",
                        object["kind"].as_str().unwrap_or_default(),
                        object["metadata"]["name"].as_str().unwrap_or_default()
                    ),
                    template.clone(),
                )
            })
        })
        .collect()
}

/// PodSecurity on the real apiserver: a namespace that enforces `baseline` is refused before any
/// write, naming what needs more; and upstream's admission agrees — the server's pod, created
/// with `--dry-run=server` in such a namespace, is refused by PodSecurity for the same
/// capability, while every pod template of the plan is admitted under `privileged`.
#[test]
fn pod_security_the_plugin_refuses_what_the_real_admission_would_refuse() {
    if !real_plane_or_skip("PodSecurity on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_PSA);
    let kubectl = |args: &[&str], stdin: &str| env.cluster.kubectl(args, stdin).expect("kubectl");
    for (ns, level) in [(env.ns, "baseline"), ("psa-privileged", "privileged")] {
        let out = kubectl(&["create", "namespace", ns, "--validate=false"], "");
        assert!(out.status.success(), "{}", both(&out));
        let label = format!("pod-security.kubernetes.io/enforce={level}");
        let out = kubectl(&["label", "namespace", ns, &label], "");
        assert!(out.status.success(), "{}", both(&out));
    }

    let out = env.migrate(&ssh_flags());
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        stderr.contains("enforces PodSecurity level baseline") && stderr.contains("SYS_ADMIN"),
        "{stderr}"
    );
    let written = env.items(&[
        "all,secrets,configmaps,persistentvolumeclaims,serviceaccounts,roles,rolebindings",
        "-n",
        env.ns,
        "-l",
        "app.kubernetes.io/managed-by=kubectl-uyuni",
    ]);
    assert!(
        written.is_empty(),
        "written despite the refusal: {written:#?}"
    );

    // The plan's pod templates, from a dry run into a namespace without labels.
    let mut args = vec!["migrate", SOURCE, "--dry-run", "-o", "yaml"];
    let flags = ssh_flags();
    args.extend(flags.iter().map(String::as_str));
    let path = format!(
        "{}:{}",
        env.bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("kubectl")
        .env("PATH", path)
        .env("KUBECACHEDIR", env.cache.path())
        .env_remove("KUBECONFIG")
        .env("UYUNI_SSL_PASSWORD", CA_PASSWORD)
        .stdin(Stdio::null())
        .arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.cluster.kubeconfig_path())
        .args(["-n", "psa-preview"])
        .args(&args)
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    let objects: Vec<Value> =
        serde_saphyr::from_multiple(&String::from_utf8_lossy(&out.stdout)).expect("YAML objects");
    let templates = pod_templates(&objects);
    assert!(
        templates.iter().any(|(name, _)| name == "Deployment/uyuni"),
        "{:?}",
        templates.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );

    let admit = |ns: &str, name: &str, template: &Value| {
        let mut spec = template["spec"].clone();
        // The ServiceAccount admission would refuse a missing account; PodSecurity is the question.
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("serviceAccountName");
        }
        let pod = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "psa-check", "namespace": ns},
            "spec": spec,
        });
        let out = kubectl(
            &[
                "create",
                "--dry-run=server",
                "--validate=false",
                "-f",
                "-",
                "-o",
                "name",
            ],
            &pod.to_string(),
        );
        (out.status.success(), format!("{name}: {}", both(&out)))
    };
    for (name, template) in &templates {
        let (ok, text) = admit("psa-privileged", name, template);
        assert!(ok, "refused under privileged: {text}");
    }
    let server = &templates
        .iter()
        .find(|(name, _)| name == "Deployment/uyuni")
        .expect("the server")
        .1;
    let (ok, text) = admit(env.ns, "Deployment/uyuni", server);
    assert!(
        !ok,
        "upstream admitted the server's pod under baseline: {text}"
    );
    assert!(
        text.contains("violates PodSecurity \"baseline:latest\"") && text.contains("SYS_ADMIN"),
        "{text}"
    );
}

/// The ClusterRole of a user who may make every request of a migration, and `get pods/log`
/// only when `with_log`.
fn migrator_role(with_log: bool) -> Value {
    let mut rules = vec![
        serde_json::json!({"apiGroups": [""], "resources": [
            "namespaces", "secrets", "configmaps", "persistentvolumeclaims",
            "serviceaccounts", "services", "pods",
        ], "verbs": ["*"]}),
        serde_json::json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}),
        serde_json::json!({"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]}),
        serde_json::json!({"apiGroups": ["rbac.authorization.k8s.io"],
            "resources": ["roles", "rolebindings"], "verbs": ["*"]}),
        serde_json::json!({"apiGroups": ["networking.k8s.io"],
            "resources": ["ingresses", "ingressclasses"], "verbs": ["*"]}),
        serde_json::json!({"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"],
            "verbs": ["get", "list", "watch"]}),
        // The namespace's Lease, one writer at a time.
        serde_json::json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
            "verbs": ["get", "create", "update", "delete"]}),
        serde_json::json!({"apiGroups": ["cert-manager.io", "traefik.io", "helm.cattle.io"],
            "resources": ["*"], "verbs": ["*"]}),
    ];
    if with_log {
        rules.push(
            serde_json::json!({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}),
        );
    }
    serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "uyuni-migrator"},
        "rules": rules,
    })
}

/// RBAC on the real apiserver: a user whose role grants every request of the migration but
/// `get pods/log` is refused before any write, naming that permission and its `auth can-i`;
/// granted it too, the dry run finds every permission allowed. So the reviewed list, reads and
/// the subresource included, is what upstream's authorizer decides on.
#[test]
fn rbac_a_user_without_pods_log_is_refused_before_any_write_and_with_it_all_is_allowed() {
    if !real_plane_or_skip("RBAC review on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_RBAC);
    let kubectl = |args: &[&str], stdin: &str| env.cluster.kubectl(args, stdin).expect("kubectl");
    let apply = |object: &Value| {
        let out = kubectl(
            &["apply", "--server-side", "--validate=false", "-f", "-"],
            &object.to_string(),
        );
        assert!(out.status.success(), "{}", both(&out));
    };
    apply(&migrator_role(false));
    apply(&serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "uyuni-migrator"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
            "name": "uyuni-migrator"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
            "name": "migrator"}],
    }));
    let as_migrator = |extra: &[&str]| {
        let mut args = vec!["--as", "migrator", "migrate", SOURCE, "--yes"];
        args.extend_from_slice(extra);
        let flags = ssh_flags();
        args.extend(flags.iter().map(String::as_str));
        env.uyuni(&args)
    };

    let out = as_migrator(&[]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        stderr.contains(&format!("get pods/log in namespace {}", env.ns))
            && stderr.contains("auth can-i get pods --subresource=log`")
            && stderr.contains("Nothing was written"),
        "{stderr}"
    );
    let missing = stderr
        .split("missing: ")
        .nth(1)
        .and_then(|m| m.split(". Ask").next())
        .unwrap_or_default();
    assert_eq!(
        missing.matches(" in namespace ").count(),
        1,
        "only pods/log is missing: {missing}"
    );
    let ns = kubectl(&["get", "namespace", env.ns], "");
    assert!(!ns.status.success(), "namespace {} was created", env.ns);

    apply(&migrator_role(true));
    let out = as_migrator(&["--dry-run"]);
    let (stdout, _) = text(&out);
    assert!(out.status.success(), "{}", both(&out));
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("Permissions"))
        .unwrap_or_else(|| panic!("no Permissions input:\n{stdout}"));
    assert!(
        line.contains("allowed") && !line.contains("MISSING"),
        "{line}"
    );
}

/// The pid in the namespace's Lease, if one is held.
fn lease_pid(env: &RealEnv) -> Option<u32> {
    env.items(&["leases", "-n", env.ns])
        .iter()
        .find(|l| l["metadata"]["name"] == "kubectl-uyuni")
        .and_then(|l| l["metadata"]["annotations"]["kubectl-uyuni.io/pid"].as_str())
        .and_then(|p| p.parse().ok())
}

fn wait_until(what: &str, condition: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(300),
            "still waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// One writer at a time on the real control plane (issue 33): after a `--prepare` copy, two
/// final runs started together make one final copy, and the other refuses naming the holder;
/// SIGTERM releases the holder's Lease; a holder killed with SIGKILL leaves it, and the next
/// run takes it over once it ran out (by the API server's clock) and finishes the migration.
#[test]
fn lease_two_final_runs_make_one_copy_and_a_killed_holder_is_taken_over_once_its_lease_ran_out() {
    if !real_plane_or_skip("one writer at a time on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::Plain, true), NS_LEASE);
    let flags = ssh_flags();
    let spawn = |extra: &[&str]| {
        let mut args = vec!["migrate", SOURCE, "--yes"];
        args.extend(flags.iter().map(String::as_str));
        args.extend_from_slice(extra);
        env.command(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs")
    };
    let out = spawn(&["--prepare"]).wait_with_output().expect("output");
    assert!(out.status.success(), "{}", both(&out));
    let finals = || {
        jobs_of(&env, "data-sync")
            .iter()
            .filter(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/sync-mode"] == "final")
            .count()
    };

    let mut runs = vec![spawn(&[]), spawn(&[])];
    let ended = loop {
        if let Some(i) = runs
            .iter_mut()
            .position(|r| r.try_wait().expect("wait").is_some())
        {
            break i;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let refusal = runs.remove(ended).wait_with_output().expect("output");
    let holding = runs.remove(0);
    let pid = lease_pid(&env).expect("the lease is held");
    assert_eq!(
        holding.id(),
        pid,
        "the lease names the process that holds it"
    );
    let (_, stderr) = text(&refusal);
    assert!(!refusal.status.success(), "{}", both(&refusal));
    for part in [
        &format!("another run is writing to namespace {NS_LEASE}"),
        &format!("migrate {SOURCE} --yes"),
        &format!("(process {pid}), since "),
        "Nothing was written",
        "--force-unlock`",
    ] {
        assert!(stderr.contains(part), "{part:?} in:\n{stderr}");
    }
    wait_until("the holder's final copy", || finals() == 1);
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let out = holding.wait_with_output().expect("output");
    assert_eq!(out.status.code(), Some(143), "{}", both(&out));
    assert_eq!(lease_pid(&env), None, "released on SIGTERM");

    // A run with a 2 s lease, killed while it holds it: the next run waits for it to run out.
    let mut killed = spawn(&["--lease-duration-seconds", "2"]);
    let killed_pid = killed.id();
    wait_until("the second holder", || lease_pid(&env) == Some(killed_pid));
    killed.kill().expect("SIGKILL");
    let _ = killed.wait();
    let left = env.get(&["lease", "kubectl-uyuni", "-n", env.ns]);
    let renewed: k8s_openapi::jiff::Timestamp = left["spec"]["renewTime"]
        .as_str()
        .expect("renewTime")
        .parse()
        .expect("a time");
    let end = renewed + k8s_openapi::jiff::SignedDuration::from_secs(4);
    wait_until("the lease to run out", || {
        k8s_openapi::jiff::Timestamp::now() > end
    });
    let out = env.migrate(&[]);
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        stderr.contains("took over Lease kubectl-uyuni")
            && stderr.contains(&format!("(process {killed_pid})")),
        "{stderr}"
    );
    assert_eq!(finals(), 1, "one final copy in all");
    assert_eq!(lease_pid(&env), None, "released at the end");
}
