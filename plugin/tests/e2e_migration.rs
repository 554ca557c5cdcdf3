//! End to end, the whole migration: the built plugin, run through the real `kubectl`, against
//! the simulated cluster of each flavour, from an empty namespace to a running database (the
//! phases built so far), re-runs that plan nothing, failures in later steps that name the step
//! and resume, and the set of objects against a golden list.

use crate::support;

use serde_json::Value;
use support::{
    CA_PASSWORD, Env, NS, REGISTRY_PASSWORD, args, assert_no_secret, ssh_flags, text,
    third_party_flags, validate_custom_resources,
};
use uyuni_testdata::golden::check_golden;
use uyuni_testdata::{DeploymentScript, Flavour, JobScript, Scenario, SimConfig, scenarios};

/// The realistic migration scenario, quick, with the synced PostgreSQL major `pg_version`.
fn migration(pg_version: &str) -> Scenario {
    let mut s = scenarios::migration();
    if let Some(job) = s.jobs.get_mut("data-sync") {
        job.duration_ms = 300;
    }
    s.edit_job_data("data-sync", |data| {
        data.insert("pg_version".into(), pg_version.to_owned());
    });
    s
}

fn env_with(scenario: Scenario, flavour: Flavour, cert_manager: bool) -> Env {
    Env::new(SimConfig {
        scenario,
        flavour,
        cert_manager,
        ..SimConfig::default()
    })
}

fn env(scenario: Scenario, flavour: Flavour) -> Env {
    env_with(scenario, flavour, true)
}

/// `kind/name` of every object the tool manages in the namespace, sorted.
fn managed_objects(env: &Env) -> Vec<String> {
    let mut out = Vec::new();
    for (api, kind) in [
        ("v1", "Secret"),
        ("v1", "ConfigMap"),
        ("v1", "PersistentVolumeClaim"),
        ("v1", "ServiceAccount"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("v1", "Service"),
        ("apps/v1", "Deployment"),
        ("batch/v1", "Job"),
        ("networking.k8s.io/v1", "Ingress"),
        ("cert-manager.io/v1", "Issuer"),
        ("cert-manager.io/v1", "Certificate"),
        ("traefik.io/v1alpha1", "Middleware"),
        ("traefik.io/v1alpha1", "IngressRouteTCP"),
        ("traefik.io/v1alpha1", "IngressRouteUDP"),
    ] {
        for o in env.sim.objects(api, kind, Some(NS)) {
            if o["metadata"]["labels"]["app.kubernetes.io/managed-by"] != "kubectl-uyuni" {
                continue;
            }
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            // Job names carry the run id: the step stands for them; the operation records'
            // carry the run's start: the command stands for them.
            let name = match o["metadata"]["annotations"]["kubectl-uyuni.io/step"].as_str() {
                Some(step) if kind == "Job" => format!("<{step}>"),
                _ if o["metadata"]["labels"]["app.kubernetes.io/component"] == "operation" => {
                    format!(
                        "<operation {}>",
                        name.rsplit('-').next().unwrap_or_default()
                    )
                }
                _ => name.to_owned(),
            };
            out.push(format!("{kind}/{name}"));
        }
    }
    for o in env
        .sim
        .objects("helm.cattle.io/v1", "HelmChartConfig", Some("kube-system"))
    {
        if o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubectl-uyuni" {
            let name = o["metadata"]["name"].as_str().unwrap_or_default();
            out.push(format!("HelmChartConfig/kube-system/{name}"));
        }
    }
    out.sort();
    out
}

fn deployment_ready(d: &Value) -> bool {
    let want = d["spec"]["replicas"].as_i64().unwrap_or(1);
    d["status"]["readyReplicas"].as_i64() == Some(want)
        && d["status"]["observedGeneration"] == d["metadata"]["generation"]
}

/// Runs the plugin again once the cause of a failure is gone (the scenario replaced, when
/// given), and expects success.
fn run_again(env: &Env, scenario: Option<Scenario>, args: &[String]) {
    if let Some(scenario) = scenario {
        env.sim.set_scenario(scenario);
    }
    let again = env.migrate(args);
    let (stdout, stderr) = text(&again);
    assert!(
        again.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

/// Only the namespace and the image checks were written: no SSH material, no volume, no sync.
fn assert_only_checks_written(env: &Env) {
    assert!(
        env.sim
            .objects("v1", "PersistentVolumeClaim", Some(NS))
            .is_empty()
    );
    assert!(env.sim.objects("v1", "Secret", Some(NS)).is_empty());
    assert!(env.jobs_of("data-sync").is_empty());
}

/// After a resumed run: how many Jobs each step has (a failed one is kept beside its retry, a
/// done one is not run again), and the Deployment that had not come up before is ready.
fn assert_resumed(env: &Env, jobs: &[(&str, usize)], deployment: &str) {
    for (step, count) in jobs {
        assert_eq!(env.jobs_of(step).len(), *count, "Jobs of step {step}");
    }
    let d = env
        .sim
        .get("apps/v1", "Deployment", Some(NS), deployment)
        .unwrap_or_else(|| panic!("Deployment {deployment}"));
    assert!(deployment_ready(&d), "{deployment} not ready");
}

fn claim_of(d: &Value) -> String {
    d["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find_map(|v| v["persistentVolumeClaim"]["claimName"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// Where the client's first write of `kind/name` comes among all client writes; for a Job,
/// `name` is its step.
fn first_write(env: &Env, kind: &str, name: &str) -> usize {
    env.sim
        .written()
        .iter()
        .position(|w| {
            let m = &w.object["metadata"];
            w.object["kind"] == kind
                && (m["name"] == name || m["annotations"]["kubectl-uyuni.io/step"] == name)
        })
        .unwrap_or_else(|| panic!("{kind}/{name} was never written"))
}

/// The whole run on one flavour: every Deployment ready, the objects as the golden list says,
/// and a second run that writes nothing.
/// How the migrated server gets its certificates.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Tls {
    /// The source's CA, reused through cert-manager (the CA password in the environment).
    ReusedCa,
    /// Certificate files given with --ssl-*, on a cluster without cert-manager.
    ThirdParty,
}

fn full_migration(flavour: Flavour, pg_version: &str, tls: Tls) {
    let flavour_name = format!("{flavour:?}").to_ascii_lowercase();
    let upgraded = pg_version != "18";
    let golden = format!(
        "e2e-migration-{flavour_name}-{}-{}",
        match tls {
            Tls::ReusedCa => "reused-ca",
            Tls::ThirdParty => "third-party",
        },
        if upgraded { "upgrade" } else { "no-upgrade" }
    );
    let golden = golden.as_str();
    let (_certs, tls_flags, tls_key) = third_party_flags();
    let (env, flags) = match tls {
        Tls::ReusedCa => (env(migration(pg_version), flavour), ssh_flags()),
        Tls::ThirdParty => {
            let mut env = env_with(migration(pg_version), flavour, false);
            env.password_env = false;
            (env, [ssh_flags(), tls_flags].concat())
        }
    };
    let out = env.migrate(&flags);
    let (stdout, stderr) = text(&out);
    assert!(
        out.status.success(),
        "{flavour:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_no_secret(&out);
    let key_body = tls_key.lines().nth(1).expect("key line");
    assert!(
        !stdout.contains(key_body) && !stderr.contains(key_body),
        "the key leaked"
    );
    assert!(stdout.contains("Database now:"), "{stdout}");

    for d in env.sim.objects("apps/v1", "Deployment", Some(NS)) {
        assert!(deployment_ready(&d), "not ready: {d:#}");
    }
    let db = env
        .sim
        .get("apps/v1", "Deployment", Some(NS), "db")
        .expect("db");
    assert_eq!(
        claim_of(&db),
        if upgraded { "var-pgsql18" } else { "var-pgsql" }
    );
    assert_eq!(
        db["spec"]["template"]["spec"]["securityContext"]["fsGroup"],
        999
    );
    // TLS for external report-database clients: Secret db-cert at /etc/pki, issued before the
    // pod that mounts it was created.
    let cert_volume = db["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["secret"]["secretName"] == "db-cert")
        .expect("the db pod mounts Secret db-cert");
    assert_eq!(
        cert_volume["secret"]["items"][1],
        serde_json::json!({"key": "tls.key", "path": "tls/private/pg-spacewalk.key", "mode": 0o440})
    );
    let cert_mount = db["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["name"] == cert_volume["name"])
        .expect("mounted");
    assert_eq!(cert_mount["mountPath"], "/etc/pki");
    assert!(env.sim.get("v1", "Secret", Some(NS), "db-cert").is_some());
    let cert_kind = match tls {
        Tls::ReusedCa => "Certificate",
        Tls::ThirdParty => "Secret",
    };
    assert!(
        first_write(&env, cert_kind, "db-cert") < first_write(&env, "Deployment", "db"),
        "the db Deployment was written before its certificate"
    );
    assert_eq!(
        env.jobs_of("ca-key").len(),
        usize::from(tls == Tls::ReusedCa),
        "the CA key is decrypted only when the CA is reused"
    );
    // The roles' passwords are re-hashed before PostgreSQL serves them with scram-only pg_hba.
    let data_done = if upgraded {
        first_write(&env, "Job", "db-upgrade")
    } else {
        first_write(&env, "Job", "db-fixup")
    };
    let rehash = first_write(&env, "Job", "db-passwords");
    assert!(
        data_done < rehash && rehash < first_write(&env, "Deployment", "db"),
        "db-passwords out of order"
    );
    for step in ["db-fixup", "db-passwords", "db-migration-sql"] {
        assert_eq!(env.jobs_of(step).len(), 1, "{step}");
    }
    // A copy while the source serves, whose data every input was checked on, then the final.
    assert_eq!(env.syncs_of_mode("prepare").len(), 1);
    assert_eq!(env.syncs_of_mode("final").len(), 1);
    let written_job = |mode: &str| {
        env.sim.written().iter().position(|w| {
            w.object["kind"] == "Job"
                && w.object["metadata"]["annotations"]["kubectl-uyuni.io/sync-mode"] == mode
        })
    };
    assert!(
        written_job("prepare") < written_job("final"),
        "the copy while the source serves comes first"
    );
    assert_eq!(env.jobs_of("db-upgrade").len(), usize::from(upgraded));
    for name in [
        "db-admin-credentials",
        "db-credentials",
        "reportdb-credentials",
    ] {
        let s = env.sim.get("v1", "Secret", Some(NS), name).expect(name);
        assert_eq!(s["type"], "kubernetes.io/basic-auth", "{name}");
    }
    for name in ["db", "reportdb"] {
        let s = env.sim.get("v1", "Service", Some(NS), name).expect(name);
        assert_eq!(s["spec"]["ports"][0]["port"], 5432);
        assert_eq!(s["spec"]["selector"]["app.kubernetes.io/component"], "db");
    }
    // The source served TFTP: its Deployment runs (checked ready above) behind a UDP
    // LoadBalancer; only k3s's ServiceLB gives it an address, and the run says either way.
    let tftp = env
        .sim
        .get("v1", "Service", Some(NS), "tftp")
        .expect("Service tftp");
    assert_eq!(tftp["spec"]["type"], "LoadBalancer");
    assert_eq!(tftp["spec"]["ports"][0]["protocol"], "UDP");
    assert!(
        env.sim
            .get("apps/v1", "Deployment", Some(NS), "tftp")
            .is_some()
    );
    if flavour == Flavour::K3s {
        assert!(
            stdout.contains("TFTP answers at 10.0.0.10, port 69/UDP"),
            "{stdout}"
        );
    } else {
        assert!(
            stdout.contains("Service tftp (LoadBalancer, port 69/UDP) has no external address yet")
                && stdout.contains("MetalLB"),
            "{stdout}"
        );
    }
    check_golden(
        golden,
        "objects.txt",
        &(managed_objects(&env).join("\n") + "\n"),
    );
    validate_custom_resources(&env.sim);

    // Again, without any flag (the SSH material and the certificates are kept): nothing to
    // do, nothing written.
    env.sim.clear_request_log();
    let again = env.migrate(&[]);
    let (stdout, stderr) = text(&again);
    assert!(
        again.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains("Nothing to do"), "{stderr}");
    let writes: Vec<_> = env
        .sim
        .request_log()
        .into_iter()
        .filter(|r| r.is_successful_write())
        .collect();
    assert!(writes.is_empty(), "second run wrote: {writes:?}");

    if flavour == Flavour::K3s && upgraded {
        rerun_with_changed_flags(&env);
    }
}

/// A re-run with changed flags on a finished migration whose server runs: another tag is an
/// upgrade, refused with nothing written (it once stopped the server and rebuilt the database
/// from the migration-time copy, losing what the server wrote since); another pull policy
/// rewrites the Deployments, and runs no database Job and stops nothing.
fn rerun_with_changed_flags(env: &Env) {
    env.sim.clear_request_log();
    let out = env.migrate(&args(&["--tag", "2025.10", "--compress"]));
    let (stdout, stderr) = text(&out);
    assert!(
        !out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("refused: this run would change the images of the server")
            && stderr.contains("Deployment uyuni runs registry.opensuse.org/uyuni/server:latest, this run asks for registry.opensuse.org/uyuni/server:2025.10")
            // The upgrade it advises carries the run's connection flags (issue 38).
            && stderr.contains(&format!(
                "Run `kubectl uyuni --kubeconfig {} --context uyuni-sim -n uyuni upgrade` with the same image flags",
                env.kubeconfig().display()
            ))
            && stderr.contains("migrate uyuni.example.com --compress`"),
        "{stderr}"
    );
    let writes: Vec<_> = env
        .sim
        .request_log()
        .into_iter()
        .filter(|r| r.is_successful_write())
        .collect();
    assert!(writes.is_empty(), "the refused run wrote: {writes:?}");

    let fixups = env.jobs_of("db-fixup").len();
    let upgrades = env.jobs_of("db-upgrade").len();
    env.sim.clear_request_log();
    let out = env.migrate(&args(&["--pull-policy", "IfNotPresent"]));
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let writes: Vec<_> = env
        .sim
        .request_log()
        .into_iter()
        .filter(|r| r.is_successful_write())
        .collect();
    for w in &writes {
        let resource = w.resource.as_deref().unwrap_or_default();
        let name = w.name.as_deref().unwrap_or_default();
        // The image checks read the images again with the new policy; nothing else runs.
        let image_check = resource == "jobs" && name.starts_with("uyuni-image-check-");
        // The record of the server's specification takes the new policy too.
        let record = resource == "configmaps" && name == "uyuni-server-spec";
        // The run's one-writer lease, taken and released.
        let lease = resource == "leases";
        // The run's operation record.
        let operation = resource == "configmaps" && name.starts_with("uyuni-operation-");
        assert!(
            resource == "deployments" || image_check || record || lease || operation,
            "{} {resource} {name}",
            w.method
        );
    }
    assert!(
        writes
            .iter()
            .any(|w| w.resource.as_deref() == Some("deployments")),
        "the Deployments take the new policy: {writes:?}"
    );
    assert_eq!(env.jobs_of("db-fixup").len(), fixups);
    assert_eq!(env.jobs_of("db-upgrade").len(), upgrades);
    for job in env.sim.objects("batch/v1", "Job", Some(NS)) {
        let step = job["metadata"]["annotations"]["kubectl-uyuni.io/step"]
            .as_str()
            .unwrap_or_default();
        let policy = &job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"];
        assert!(
            step.starts_with("image-check") || policy != "IfNotPresent",
            "Job of step {step} ran again"
        );
    }
    for name in ["uyuni", "db"] {
        let d = env
            .sim
            .get("apps/v1", "Deployment", Some(NS), name)
            .expect(name);
        assert_eq!(d["spec"]["replicas"], 1, "{name} was scaled");
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent",
            "{name}"
        );
    }
    // The policy is remembered: run again without the flag, nothing to do.
    let again = env.migrate(&[]);
    let (stdout, stderr) = text(&again);
    assert!(
        again.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains("Nothing to do"), "{stderr}");
}

/// Full migrations over flavours, TLS modes and PostgreSQL upgrades (see the list below).
macro_rules! full_migrations {
    ($($name:ident: $flavour:expr, $pg:literal, $tls:expr;)*) => {
        $(
            #[test]
            fn $name() {
                full_migration($flavour, $pg, $tls);
            }
        )*
    };
}

// Pairwise, not the whole product: every pair of values of (flavour, TLS mode, PostgreSQL
// upgrade) is in one case, each upgrade source (14, 16) once at least. The three-way product
// added six more full migrations (the largest share of the suite's time) and no pair that these
// miss; the real control plane runs k3s with the reused CA, rke2 with certificate files and the
// plain flavour besides (e2e_real_migration.rs).
full_migrations! {
    k3s_reused_ca_with_upgrade_from_16: Flavour::K3s, "16", Tls::ReusedCa;
    k3s_third_party_without_upgrade: Flavour::K3s, "18", Tls::ThirdParty;
    rke2_reused_ca_without_upgrade: Flavour::Rke2, "18", Tls::ReusedCa;
    rke2_third_party_with_upgrade_from_14: Flavour::Rke2, "14", Tls::ThirdParty;
    plain_reused_ca_with_upgrade_from_16: Flavour::Plain, "16", Tls::ReusedCa;
    plain_third_party_without_upgrade: Flavour::Plain, "18", Tls::ThirdParty;
}

#[test]
fn an_unsupported_database_image_is_refused_before_anything_else_is_written_and_resumes() {
    let mut scenario = migration("16");
    scenario.jobs.insert(
        "image-check-db".into(),
        JobScript::fail(
            1,
            &["UNSUPPORTED: database image registry.opensuse.org/uyuni/server-postgresql:latest runs PostgreSQL 16; the migration targets PostgreSQL 18"],
        ),
    );
    let env = env(scenario, Flavour::K3s);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    assert!(stderr.contains("image-check-db"), "{stderr}");
    assert!(stderr.contains("runs PostgreSQL 16"), "{stderr}");
    assert_only_checks_written(&env);
    assert!(
        env.jobs_of("image-check-db-upgrade").is_empty(),
        "checks stop at the first refusal"
    );
    assert_no_secret(&out);

    run_again(&env, Some(migration("16")), &ssh_flags());
    assert_eq!(
        env.jobs_of("image-check-server").len(),
        1,
        "a passed check is not repeated"
    );
    assert_eq!(
        env.jobs_of("image-check-db").len(),
        2,
        "the refused check is kept"
    );
    assert_eq!(
        env.jobs_of("data-sync").len(),
        2,
        "one prepare copy, one final sync"
    );
}

#[test]
fn a_server_image_that_cannot_be_pulled_ends_the_run_with_the_reason_before_any_write() {
    let mut scenario = migration("16");
    scenario.jobs.insert(
        "image-check-server".into(),
        JobScript::stuck("ErrImagePull"),
    );
    let env = env(scenario, Flavour::Plain);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    assert!(stderr.contains("ErrImagePull"), "{stderr}");
    assert!(stderr.contains("image-check-server"), "{stderr}");
    assert_only_checks_written(&env);
}

#[test]
fn registry_credentials_become_a_pull_secret_that_every_pod_uses() {
    let env = env(migration("16"), Flavour::K3s);
    let dir = tempfile::tempdir().expect("tempdir");
    let password_file = dir.path().join("registry-password");
    std::fs::write(&password_file, format!("{REGISTRY_PASSWORD}\n")).expect("write");
    let mut flags = ssh_flags();
    flags.extend([
        "--registry-user".to_owned(),
        "scc-user".to_owned(),
        "--registry-password-file".to_owned(),
        password_file.display().to_string(),
    ]);
    let mut preview_flags = flags.clone();
    preview_flags.push("--dry-run".to_owned());
    let preview = env.migrate(&preview_flags);
    assert!(preview.status.success(), "{}", text(&preview).1);
    assert!(text(&preview).0.contains("secret/registry-credentials"));
    assert_no_secret(&preview);

    let out = env.migrate(&flags);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_no_secret(&out);
    let config = secret_text(&env, "registry-credentials", ".dockerconfigjson").expect("secret");
    let config: Value = serde_json::from_str(&config).expect("docker config JSON");
    assert_eq!(
        config["auths"]["registry.opensuse.org"]["password"],
        REGISTRY_PASSWORD
    );
    let mut pods = 0;
    for (api, kind) in [("batch/v1", "Job"), ("apps/v1", "Deployment")] {
        for object in env.sim.objects(api, kind, Some(NS)) {
            let secrets = &object["spec"]["template"]["spec"]["imagePullSecrets"];
            assert_eq!(
                secrets,
                &serde_json::json!([{"name": "registry-credentials"}]),
                "{kind} {}",
                object["metadata"]["name"]
            );
            pods += 1;
        }
    }
    assert!(pods >= 10, "{pods}");

    // A later run without the flags keeps using it, and changes nothing.
    let again = env.migrate(&[]);
    assert!(again.status.success(), "{}", text(&again).1);
    assert!(
        text(&again).1.contains("Nothing to do"),
        "{}",
        text(&again).1
    );
}

#[test]
fn a_downgrade_is_refused_after_the_sync_before_any_other_write() {
    let env = env(migration("19"), Flavour::K3s);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    assert!(stderr.contains("downgrade"), "{stderr}");
    assert!(env.jobs_of("db-fixup").is_empty());
    assert!(
        env.sim
            .get("apps/v1", "Deployment", Some(NS), "db")
            .is_none()
    );
    assert!(
        env.sim
            .get("v1", "Secret", Some(NS), "db-credentials")
            .is_none()
    );
    assert_no_secret(&out);
}

#[test]
fn a_failed_upgrade_names_the_step_shows_its_log_and_resumes() {
    let mut scenario = migration("16");
    scenario.jobs.insert(
        "db-upgrade".into(),
        JobScript::fail(
            1,
            &[
                "Upgrading the database from PostgreSQL 16 to 18",
                "pg_upgrade: old cluster does not use data checksums but the new one does",
            ],
        ),
    );
    let env = env(scenario, Flavour::Rke2);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    assert!(stderr.contains("db-upgrade"), "{stderr}");
    assert!(stderr.contains("does not use data checksums"), "{stderr}");
    assert!(
        env.sim
            .get("apps/v1", "Deployment", Some(NS), "db")
            .is_none(),
        "no PostgreSQL on data that was not upgraded"
    );

    run_again(&env, Some(migration("16")), &[]);
    // The failed Job is kept; nothing done before is run again.
    assert_resumed(
        &env,
        &[("db-upgrade", 2), ("db-fixup", 1), ("data-sync", 2)],
        "db",
    );
}

#[test]
fn a_failed_password_rehash_keeps_the_database_stopped_and_resumes() {
    let mut scenario = migration("16");
    scenario.jobs.insert(
        "db-passwords".into(),
        JobScript::fail(
            1,
            &[
                "Starting a temporary PostgreSQL server, reachable only through a socket in this pod",
                "ERROR: role pythia_susemanager (the username of Secret reportdb-credentials) does not exist in the migrated database",
                "Stopping the temporary PostgreSQL server",
            ],
        ),
    );
    let env = env(scenario, Flavour::K3s);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    assert!(stderr.contains("db-passwords"), "{stderr}");
    assert!(
        stderr.contains("does not exist in the migrated database"),
        "{stderr}"
    );
    assert!(
        env.sim
            .get("apps/v1", "Deployment", Some(NS), "db")
            .is_none(),
        "no database before its roles can log in"
    );
    assert_no_secret(&out);

    run_again(&env, Some(migration("16")), &[]);
    assert_eq!(
        env.jobs_of("db-passwords").len(),
        2,
        "the failed Job is kept"
    );
    assert_eq!(
        env.jobs_of("db-upgrade").len(),
        1,
        "the upgrade is not run again"
    );
    let db = env
        .sim
        .get("apps/v1", "Deployment", Some(NS), "db")
        .expect("db");
    assert!(deployment_ready(&db));
}

#[test]
fn a_database_that_cannot_start_ends_the_wait_with_the_reason_and_resumes() {
    let mut scenario = migration("16");
    scenario
        .deployments
        .insert("db".into(), DeploymentScript::stuck("CrashLoopBackOff"));
    let env = env(scenario, Flavour::Plain);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    assert!(
        stderr.contains("db-ready") && stderr.contains("CrashLoopBackOff"),
        "{stderr}"
    );
    assert!(
        env.jobs_of("db-migration-sql").is_empty(),
        "no SQL without a database"
    );

    env.sim.set_scenario(migration("16"));
    // The controller acts on spec changes: a restart stands for the fixed cause.
    let mut db = env
        .sim
        .get("apps/v1", "Deployment", Some(NS), "db")
        .expect("db");
    db["spec"]["template"]["metadata"]["annotations"] =
        serde_json::json!({"kubectl.kubernetes.io/restartedAt": "now"});
    env.sim.put(db).expect("restart");
    let again = env.migrate(&[]);
    let (stdout, stderr) = text(&again);
    assert!(
        again.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(env.jobs_of("db-migration-sql").len(), 1);
}

#[test]
fn dry_run_before_the_sync_shows_the_database_phase_with_placeholders() {
    let env = env(migration("16"), Flavour::K3s);
    let out = env.migrate(&[ssh_flags(), vec!["--dry-run".into()]].concat());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_no_secret(&out);
    for expected in [
        "job/uyuni-db-fixup-",
        "persistentvolumeclaim/var-pgsql18",
        "job/uyuni-db-upgrade-",
        "secret/db-admin-credentials",
        "job/uyuni-db-passwords-",
        "service/reportdb",
        "deployment/db",
        "job/uyuni-db-migration-sql-",
        "service/tftp",
        "deployment/tftp",
        "if tftp.socket is enabled on the source: known after data-sync",
        "<known after data-sync>",
    ] {
        assert!(
            stdout.contains(expected),
            "dry run lacks {expected:?}:\n{stdout}"
        );
    }
    assert!(env.sim.request_log().iter().all(|r| !r.write));
}

// ---------------------------------------------------------------------------------------------
// TLS modes

fn secret_text(env: &Env, name: &str, key: &str) -> Option<String> {
    use base64::Engine as _;
    let s = env.sim.get("v1", "Secret", Some(NS), name)?;
    let b64 = s["data"][key].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    String::from_utf8(bytes).ok()
}

#[test]
fn the_reused_ca_issues_the_server_certificates_through_cert_manager() {
    let env = env(migration("16"), Flavour::K3s);
    let out = env.migrate(
        &[
            ssh_flags(),
            vec!["--ssl-cname".into(), "alias.example.com".into()],
        ]
        .concat(),
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_no_secret(&out);
    assert!(
        secret_text(&env, "uyuni-ca", "tls.key").is_some_and(|k| k.contains("PRIVATE KEY")),
        "the CA key Job filled the key"
    );
    let issuer = env
        .sim
        .get("cert-manager.io/v1", "Issuer", Some(NS), "uyuni-ca-issuer")
        .expect("issuer");
    assert_eq!(issuer["spec"]["ca"]["secretName"], "uyuni-ca");
    let cert = env
        .sim
        .get("cert-manager.io/v1", "Certificate", Some(NS), "uyuni-cert")
        .expect("certificate");
    assert_eq!(
        cert["spec"]["dnsNames"],
        serde_json::json!(["uyuni.example.com", "alias.example.com"])
    );
    let issued = env
        .sim
        .get("v1", "Secret", Some(NS), "uyuni-cert")
        .expect("uyuni-cert");
    assert_eq!(issued["type"], "kubernetes.io/tls");
    assert_eq!(
        issued["metadata"]["labels"]["app.kubernetes.io/part-of"], "uyuni",
        "secretTemplate labels"
    );
    assert!(env.sim.get("v1", "Secret", Some(NS), "db-cert").is_some());
    let ca = env
        .sim
        .get("v1", "ConfigMap", Some(NS), "uyuni-ca")
        .expect("uyuni-ca");
    assert!(
        ca["data"]["ca.crt"]
            .as_str()
            .is_some_and(|c| c.contains("BEGIN CERTIFICATE"))
    );
    assert!(env.sim.get("v1", "ConfigMap", Some(NS), "db-ca").is_some());
    assert_eq!(env.jobs_of("ca-key").len(), 1);
    validate_custom_resources(&env.sim);
}

#[test]
fn without_the_ca_password_the_run_stops_with_instructions_and_resumes_with_it() {
    let mut env = env(migration("16"), Flavour::Rke2);
    env.password_env = false;
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    assert!(
        stderr.contains("--ssl-password-file") && stderr.contains("UYUNI_SSL_PASSWORD"),
        "{stderr}"
    );
    assert!(
        env.jobs_of("db-fixup").is_empty(),
        "the password is asked for at the first plan after the sync, before the database work"
    );
    assert!(env.jobs_of("ca-key").is_empty());

    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("ca-password");
    std::fs::write(&file, format!("{CA_PASSWORD}\n")).expect("write");
    // Kept, to be read below: without the flag a finished migration deletes it.
    let again = env.migrate(&[
        "--ssl-password-file".into(),
        file.display().to_string(),
        "--keep-migration-data".into(),
    ]);
    let (stdout, stderr) = text(&again);
    assert!(
        again.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_no_secret(&again);
    assert_eq!(
        secret_text(&env, "uyuni-ca-password", "password").as_deref(),
        Some(CA_PASSWORD),
        "the first line of the file, exactly"
    );
    assert_eq!(
        env.jobs_of("db-fixup").len(),
        1,
        "nothing done before is repeated"
    );
}

#[test]
fn without_cert_manager_the_run_stops_before_any_write() {
    let env = env_with(migration("16"), Flavour::Plain, false);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    assert!(
        stderr.contains("cert-manager") && stderr.contains("--ssl-server-cert"),
        "{stderr}"
    );
    assert!(
        env.sim.request_log().iter().all(|r| !r.write),
        "wrote before the preflight"
    );

    // A dry run shows the whole migration anyway, under a warning that a real run would stop.
    let preview = env.migrate(&[ssh_flags(), vec!["--dry-run".to_owned()]].concat());
    let (stdout, stderr) = text(&preview);
    assert!(
        preview.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("warning:") && stderr.contains("assumes cert-manager is installed"),
        "{stderr}"
    );
    assert!(stdout.contains("issuer/uyuni-ca-issuer"), "{stdout}");
    assert!(stdout.contains("deployment/uyuni"), "{stdout}");
    assert!(
        env.sim.request_log().iter().all(|r| !r.write),
        "a dry run wrote"
    );
}

#[test]
fn third_party_certificates_become_the_tls_secrets_as_given() {
    let (_dir, flags, key) = third_party_flags();
    let mut env = env_with(migration("16"), Flavour::Plain, false);
    env.password_env = false;
    let out = env.migrate(&[ssh_flags(), flags].concat());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(
        secret_text(&env, "uyuni-cert", "tls.key").as_deref(),
        Some(format!("{}\n", key.trim_end()).as_str())
    );
    assert!(
        secret_text(&env, "db-cert", "tls.crt").is_some_and(|c| c.contains("BEGIN CERTIFICATE"))
    );
    assert!(env.sim.get("v1", "ConfigMap", Some(NS), "db-ca").is_some());
}

#[test]
fn a_third_party_certificate_found_on_the_source_is_kept() {
    let mut scenario = migration("16");
    let (cert, key) = {
        use uyuni_testdata::certs::{Signer, issue};
        let i = issue(
            &serde_json::json!({"dnsNames": ["uyuni.example.com"]}),
            Signer::SelfSigned,
        )
        .expect("certificate");
        (i.tls_crt, i.tls_key)
    };
    scenario.edit_job_data("data-sync", |data| {
        data.remove("ca.key");
        data.insert("server.crt".into(), cert.clone());
        data.insert("server.key".into(), key.clone());
        // Self-signed: it is its own CA, which the source trusts (the migration checks that
        // the certificate chains to it).
        data.insert("ca.crt".into(), cert.clone());
    });
    let mut env = env_with(scenario, Flavour::K3s, true);
    env.password_env = false;
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(
        secret_text(&env, "uyuni-cert", "tls.crt").as_deref(),
        Some(cert.as_str())
    );
    assert!(
        env.sim
            .get("cert-manager.io/v1", "Issuer", Some(NS), "uyuni-ca-issuer")
            .is_none()
    );
}

// ---------------------------------------------------------------------------------------------
// Server

#[test]
fn the_hub_xmlrpc_api_follows_the_source_and_the_server_gets_its_environment() {
    let mut scenario = migration("16");
    scenario.edit_job_data("data-sync", |data| {
        data.insert("has_hubxmlrpc".into(), "true".into());
        data.insert("debug".into(), "true".into());
    });
    let env = env(scenario, Flavour::K3s);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let hub = env
        .sim
        .get("apps/v1", "Deployment", Some(NS), "hub-xmlrpc")
        .expect("hub");
    assert!(deployment_ready(&hub));
    let svc = env
        .sim
        .get("v1", "Service", Some(NS), "hub-xmlrpc")
        .expect("service");
    assert_eq!(svc["spec"]["ports"][0]["port"], 2830);
    assert!(
        env.sim.get("v1", "Service", Some(NS), "search").is_some(),
        "debug port"
    );
    let server = env
        .sim
        .get("apps/v1", "Deployment", Some(NS), "uyuni")
        .expect("server");
    assert!(deployment_ready(&server));
    assert_eq!(server["spec"]["strategy"]["type"], "Recreate");
    let container = &server["spec"]["template"]["spec"]["containers"][0];
    let env_value = |name: &str| {
        container["env"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|e| e["name"] == name)
            .cloned()
    };
    assert_eq!(
        env_value("UYUNI_HOSTNAME").expect("hostname")["value"],
        "uyuni.example.com"
    );
    assert_eq!(
        env_value("MANAGER_DB_NAME").expect("db name")["value"],
        "susemanager"
    );
    assert_eq!(env_value("DEBUG_JAVA").expect("debug")["value"], "true");
    assert_eq!(
        env_value("MANAGER_PASS").expect("pass")["valueFrom"]["secretKeyRef"]["name"],
        "db-credentials"
    );
    // As the chart sets it: the image mounts cgroup2 for systemd only then.
    assert_eq!(env_value("container").expect("container")["value"], "oci");
    let security = &container["securityContext"];
    assert_eq!(
        security["capabilities"]["add"],
        serde_json::json!(["SYS_ADMIN"])
    );
    assert!(security["privileged"].is_null(), "{security}");
    let ports = container["ports"].as_array().expect("ports");
    assert!(ports.iter().all(|p| p["name"].is_null()), "{ports:?}");
    assert!(container["startupProbe"]["failureThreshold"].as_i64() >= Some(8640));
}

/// The scenario's data sync with the source's `tftp` value.
fn with_source_tftp(mut scenario: Scenario, value: &str) -> Scenario {
    scenario.edit_job_data("data-sync", |data| {
        data.insert("tftp".into(), value.into());
    });
    scenario
}

#[test]
fn tftp_follows_the_source_and_the_flags_move_it_to_the_host_network() {
    let env = env(with_source_tftp(migration("16"), "false"), Flavour::Plain);
    let out = env.migrate(&[ssh_flags(), vec!["-o".into(), "json".into()]].concat());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let result: Value = serde_json::from_str(&stdout).expect("json result");
    assert_eq!(
        result["tftp"],
        serde_json::json!({"source": false, "deployed": false, "hostNetwork": false})
    );
    assert!(
        env.sim
            .get("apps/v1", "Deployment", Some(NS), "tftp")
            .is_none()
    );
    assert!(env.sim.get("v1", "Service", Some(NS), "tftp").is_none());

    // The flags win over the source: TFTP on the node's network, no Service.
    let again = env.migrate(&["--tftp".into(), "--tftp-host-network".into()]);
    let (stdout, stderr) = text(&again);
    assert!(
        again.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("on its node's network"), "{stdout}");
    assert!(stdout.contains("--tftp-host-network"), "{stdout}");
    let d = env
        .sim
        .get("apps/v1", "Deployment", Some(NS), "tftp")
        .expect("tftp");
    assert!(deployment_ready(&d));
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["dnsPolicy"], "ClusterFirstWithHostNet");
    assert_eq!(
        pod["containers"][0]["image"],
        "registry.opensuse.org/uyuni/proxy-tftpd:latest"
    );
    assert_eq!(
        pod["containers"][0]["command"][2], "web.uyuni.svc",
        "it fetches from Service web"
    );
    assert!(env.sim.get("v1", "Service", Some(NS), "tftp").is_none());
    assert_eq!(env.syncs_of_mode("final").len(), 1, "no new sync");
    assert_eq!(env.jobs_of("data-sync").len(), 2, "no new sync");
}

#[test]
fn a_tftp_server_that_cannot_start_ends_the_wait_with_the_step_named() {
    let mut scenario = migration("16");
    scenario
        .deployments
        .insert("tftp".into(), DeploymentScript::stuck("ImagePullBackOff"));
    let env = env(scenario, Flavour::K3s);
    let out = env.migrate(
        &[
            ssh_flags(),
            vec!["--tftp-image".into(), "example.com/no-such-tftpd".into()],
        ]
        .concat(),
    );
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    assert!(
        stderr.contains("tftp-ready") && stderr.contains("ImagePullBackOff"),
        "{stderr}"
    );
    let server = env
        .sim
        .get("apps/v1", "Deployment", Some(NS), "uyuni")
        .expect("server");
    assert!(deployment_ready(&server), "the server came up first");
}

#[test]
fn a_server_that_cannot_start_ends_the_wait_with_the_step_named() {
    let mut scenario = migration("16");
    scenario
        .deployments
        .insert("uyuni".into(), DeploymentScript::stuck("ImagePullBackOff"));
    let env = env(scenario, Flavour::Rke2);
    let out = env.migrate(&[ssh_flags(), vec!["--tag".into(), "no-such-tag".into()]].concat());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    assert!(
        stderr.contains("server-ready") && stderr.contains("ImagePullBackOff"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("-n {NS} describe pod")),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------------
// Networking

#[test]
fn on_k3s_traefik_routes_and_with_the_flag_its_helmchartconfig() {
    let env = env(migration("16"), Flavour::K3s);
    let out = env.migrate(&[ssh_flags(), vec!["--configure-ingress-controller".into()]].concat());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let ssl = env
        .sim
        .get(
            "networking.k8s.io/v1",
            "Ingress",
            Some(NS),
            "uyuni-ingress-ssl",
        )
        .expect("ingress");
    assert_eq!(ssl["spec"]["ingressClassName"], "traefik");
    assert_eq!(ssl["spec"]["tls"][0]["secretName"], "uyuni-cert");
    let redirect = env
        .sim
        .get(
            "networking.k8s.io/v1",
            "Ingress",
            Some(NS),
            "uyuni-ingress-ssl-redirect",
        )
        .expect("redirect");
    assert_eq!(
        redirect["metadata"]["annotations"]["traefik.ingress.kubernetes.io/router.middlewares"],
        "uyuni-uyuni-https-redirect@kubernetescrd",
        "the middleware of this namespace (D24)"
    );
    let route = env
        .sim
        .get(
            "traefik.io/v1alpha1",
            "IngressRouteTCP",
            Some(NS),
            "salt-publish-route",
        )
        .expect("route");
    assert_eq!(route["spec"]["entryPoints"][0], "salt-publish");
    let config = env
        .sim
        .get(
            "helm.cattle.io/v1",
            "HelmChartConfig",
            Some("kube-system"),
            "traefik",
        )
        .expect("HelmChartConfig");
    let values = config["spec"]["valuesContent"].as_str().unwrap_or_default();
    assert!(
        values.contains("salt-publish:") && values.contains("exposedPort: 4505"),
        "{values}"
    );
    assert!(
        !values.contains("web-http"),
        "HTTP goes through the Ingress (D24)"
    );
    assert!(
        !stdout.contains("--configure-ingress-controller"),
        "{stdout}"
    );
    validate_custom_resources(&env.sim);
}

#[test]
fn on_rke2_without_the_flag_the_nginx_configuration_is_printed_and_a_users_config_is_kept() {
    let env = env(migration("16"), Flavour::Rke2);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("--configure-ingress-controller"),
        "{stdout}"
    );
    assert!(
        stdout.contains("\"4505\": \"uyuni/salt:4505\""),
        "real Services (D13):\n{stdout}"
    );
    let nossl = env
        .sim
        .get(
            "networking.k8s.io/v1",
            "Ingress",
            Some(NS),
            "uyuni-ingress-nossl",
        )
        .expect("ingress");
    assert_eq!(nossl["spec"]["ingressClassName"], "nginx");
    assert_eq!(
        nossl["metadata"]["annotations"]["nginx.ingress.kubernetes.io/ssl-redirect"],
        "false"
    );
    assert!(
        nossl["spec"]["rules"][0]["http"]["paths"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|p| p["pathType"] == "Prefix"
                && !p["path"].as_str().unwrap_or_default().contains('(')),
        "no regular expressions in Prefix paths (D53)"
    );
    assert!(
        env.sim
            .get(
                "helm.cattle.io/v1",
                "HelmChartConfig",
                Some("kube-system"),
                "rke2-ingress-nginx"
            )
            .is_none()
    );

    // The user has their own configuration: it is left alone, the values are printed.
    env.sim
        .put(serde_json::json!({
            "apiVersion": "helm.cattle.io/v1",
            "kind": "HelmChartConfig",
            "metadata": {"name": "rke2-ingress-nginx", "namespace": "kube-system"},
            "spec": {"valuesContent": "controller:\n  replicaCount: 2\n"},
        }))
        .expect("user config");
    let again = env.migrate(&["--configure-ingress-controller".into()]);
    let (stdout, stderr) = text(&again);
    assert!(
        again.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let config = env
        .sim
        .get(
            "helm.cattle.io/v1",
            "HelmChartConfig",
            Some("kube-system"),
            "rke2-ingress-nginx",
        )
        .expect("config");
    assert_eq!(
        config["spec"]["valuesContent"],
        "controller:\n  replicaCount: 2\n"
    );
    assert!(stdout.contains("merge these values"), "{stdout}");
}

#[test]
fn without_an_ingress_controller_the_run_completes_and_says_how_to_expose_the_server() {
    let env = env(migration("16"), Flavour::Plain);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.contains("No ingress controller was detected"),
        "{stdout}"
    );
    assert!(stdout.contains("salt 4505/TCP"), "{stdout}");
    assert!(
        env.sim
            .objects("networking.k8s.io/v1", "Ingress", Some(NS))
            .is_empty()
    );
}

#[test]
fn prepare_copies_only_and_a_plain_migrate_afterwards_goes_all_the_way() {
    let env = env(migration("16"), Flavour::K3s);
    let out = env.migrate(&[ssh_flags(), vec!["--prepare".into()]].concat());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("keeps serving"), "{stdout}");
    // The final run's command, pasteable: with the namespace and the run's flags.
    assert!(
        stdout.contains("`kubectl uyuni --kubeconfig ")
            && stdout.contains(&format!(
                "-n {NS} migrate uyuni.example.com --ssh-key-private"
            )),
        "{stdout}"
    );
    // What the final run's copy is bounded by: this copy's time, from the Job's status.
    assert!(stdout.contains("This copy took "), "{stdout}");
    assert!(
        env.jobs_of("db-fixup").is_empty(),
        "--prepare stops after the sync"
    );
    assert!(
        env.sim
            .get("apps/v1", "Deployment", Some(NS), "db")
            .is_none()
    );

    run_again(&env, None, &[]);
    let syncs = env.jobs_of("data-sync");
    assert_eq!(syncs.len(), 2, "the final sync follows the prepare one");
    assert!(
        syncs
            .iter()
            .any(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/sync-mode"] == "final")
    );
    let server = env
        .sim
        .get("apps/v1", "Deployment", Some(NS), "uyuni")
        .expect("server");
    assert!(deployment_ready(&server));
}

/// What a prepare run's data sync measured (the keys `data-sync.sh` records) becomes the
/// expected window of the final run, printed and in `-o json`; the server's start is unknown
/// before any final run.
#[test]
fn a_prepare_run_prints_the_expected_window_from_what_its_sync_measured() {
    let mut scenario = migration("16");
    scenario.edit_job_data("data-sync", |data| {
        for (key, value) in [
            ("delta_bytes", "52428800"),
            ("scan_ms", "3000"),
            ("copied_bytes", "1048576000"),
            ("copy_ms", "20000"),
            ("rest_ms", "1500"),
        ] {
            data.insert(key.into(), value.into());
        }
    });
    let env = env(scenario, Flavour::K3s);
    let out = env.migrate(
        &[
            ssh_flags(),
            vec!["--prepare".into(), "-o".into(), "json".into()],
        ]
        .concat(),
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let result: Value = serde_json::from_str(&stdout).expect("stdout is JSON");
    assert_eq!(result["apiVersion"], "kubectl-uyuni.io/v1alpha1");
    assert_eq!(result["mode"], "prepare");
    let window = &result["expectedWindow"];
    assert_eq!(window["syncJob"], result["syncJob"]);
    assert_eq!(window["deltaBytes"], 52_428_800);
    // 1000 MiB in 20 s: 50 MiB/s; 50 MiB left is 1 s after the 3 s scan.
    assert_eq!(window["copyBytesPerSecond"], 52_428_800);
    assert_eq!(window["copySeconds"], 4);
    assert_eq!(window["afterCopySeconds"], 2);
    assert!(window["stopAndStartSeconds"].is_null(), "{window}");
    assert!(window["seconds"].is_null(), "{window}");
    assert!(result["expectedOutageSeconds"].is_i64(), "{result}");

    let human = env.migrate(&[ssh_flags(), vec!["--prepare".into()]].concat());
    let (stdout, stderr) = text(&human);
    assert!(
        human.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("Expected window of the final run: about 6s plus the services' stop and the server's start.")
            && stdout.contains("server's start: unknown"),
        "{stdout}"
    );
}

#[test]
fn a_wrong_ca_password_fails_the_ca_key_step_with_its_log_and_the_right_one_resumes() {
    let mut scenario = migration("16");
    let ok = scenario.jobs.get("ca-key").cloned().expect("ca-key script");
    let mut wrong = JobScript::fail(
        1,
        &[
            "Decrypting the CA key",
            "ERROR: cannot decrypt the CA key: the CA password is wrong (give the right one with --ssl-password-file or UYUNI_SSL_PASSWORD, then run again)",
        ],
    );
    wrong.later_attempts = vec![ok];
    scenario.jobs.insert("ca-key".into(), wrong);
    let env = env(scenario, Flavour::K3s);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    assert!(stderr.contains("step ca-key"), "{stderr}");
    assert!(stderr.contains("the CA password is wrong"), "{stderr}");
    assert_no_secret(&out);
    assert!(
        env.sim
            .get("apps/v1", "Deployment", Some(NS), "uyuni")
            .is_none(),
        "the server does not start without its certificates"
    );

    run_again(&env, None, &[]);
    assert_resumed(
        &env,
        &[("ca-key", 2), ("data-sync", 2), ("db-upgrade", 1)],
        "uyuni",
    );
}

// ---------------------------------------------------------------------------------------------
// Safe by construction (issue 18): no outage, overwrite or dead end the user did not ask for

/// Successful writes the simulated cluster has logged since the last clear.
fn writes(env: &Env) -> Vec<String> {
    env.sim
        .request_log()
        .into_iter()
        .filter(|r| r.is_successful_write())
        .map(|r| format!("{r:?}"))
        .collect()
}

#[test]
fn prepare_after_a_finished_migration_is_refused_and_changes_nothing() {
    let env = env(migration("16"), Flavour::K3s);
    let out = env.migrate(&ssh_flags());
    assert!(out.status.success(), "{}", text(&out).1);
    let jobs_before = env.jobs_of("data-sync").len();

    env.sim.clear_request_log();
    let out = env.migrate(&["--prepare".into()]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // What was found, and what the user may want instead.
    assert!(stderr.contains("--prepare refused"), "{stderr}");
    assert!(stderr.contains("Deployment uyuni runs"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "`kubectl uyuni --kubeconfig {} --context uyuni-sim -n {NS} migrate uyuni.example.com` (without --prepare)",
            env.kubeconfig().display()
        )),
        "{stderr}"
    );
    let final_job = name_of_final(&env);
    assert!(
        stderr.contains(&format!(
            "kubectl --kubeconfig {} --context uyuni-sim -n {NS} delete job {final_job}",
            env.kubeconfig().display()
        )),
        "{stderr}"
    );
    assert!(
        writes(&env).is_empty(),
        "the refused run wrote: {:?}",
        writes(&env)
    );
    assert_eq!(env.jobs_of("data-sync").len(), jobs_before, "no new copy");

    // No dead end: the final run still finds everything done.
    let again = env.migrate(&[]);
    let (stdout, stderr) = text(&again);
    assert!(
        again.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains("Nothing to do"), "{stderr}");
}

fn name_of_final(env: &Env) -> String {
    let finals = env.syncs_of_mode("final");
    assert_eq!(finals.len(), 1);
    finals[0]["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_missing_ca_password_is_refused_before_the_source_is_stopped() {
    let mut env = env(migration("16"), Flavour::K3s);
    env.password_env = false;
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("the source's CA key is encrypted"),
        "{stderr}"
    );
    assert!(stderr.contains("--ssl-password-file"), "{stderr}");
    // Learnt from a copy made while the source serves; the final sync, which stops the
    // source's services, was never created.
    assert_eq!(env.syncs_of_mode("prepare").len(), 1);
    assert!(
        env.syncs_of_mode("final").is_empty(),
        "the final data sync ran without the password"
    );
    assert!(
        env.sim.get("v1", "Secret", Some(NS), "uyuni-ca").is_none(),
        "nothing of the TLS phase was written"
    );
    assert_no_secret(&out);

    // With the password, the run goes on from that copy: no second copy while serving.
    env.password_env = true;
    run_again(&env, None, &[]);
    assert_eq!(env.syncs_of_mode("prepare").len(), 1);
    assert_eq!(env.syncs_of_mode("final").len(), 1);
    assert_resumed(&env, &[("ca-key", 1)], "uyuni");
}

#[test]
fn a_final_run_without_yes_and_without_a_terminal_is_refused_before_anything_is_written() {
    let mut env = env(migration("16"), Flavour::K3s);
    env.yes = false;
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains("stops the services of uyuni.example.com"),
        "{stderr}"
    );
    assert!(
        stderr.contains("pass --yes") && stderr.contains("--prepare"),
        "{stderr}"
    );
    assert!(
        writes(&env).is_empty(),
        "the refused run wrote: {:?}",
        writes(&env)
    );
    assert!(env.jobs_of("data-sync").is_empty());

    // --prepare never asks: it copies while the source serves.
    let prepare = env.migrate(&[ssh_flags(), vec!["--prepare".into()]].concat());
    assert!(prepare.status.success(), "{}", text(&prepare).1);
    assert_eq!(env.syncs_of_mode("prepare").len(), 1);
    assert!(env.syncs_of_mode("final").is_empty());
    // The final run after it is refused too without --yes, before its sync.
    let again = env.migrate(&[]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again).1);
    assert!(env.syncs_of_mode("final").is_empty());
}

#[test]
fn the_dry_run_names_the_outage_step_the_window_after_a_prepare_and_the_missing_inputs() {
    let mut env = env(migration("16"), Flavour::K3s);
    env.password_env = false;
    env.yes = false;
    let dry = |env: &Env| {
        let out = env.migrate(&[ssh_flags(), vec!["--dry-run".into()]].concat());
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
        assert_no_secret(&out);
        (stdout, stderr)
    };
    let (stdout, _) = dry(&env);
    assert!(stdout.contains("Outage and inputs:"), "{stdout}");
    assert!(
        stdout.contains("The services of uyuni.example.com stop at step")
            && stdout.contains("(data-sync, the final copy)"),
        "{stdout}"
    );
    assert!(stdout.contains("Expected outage: unknown"), "{stdout}");
    let ca_line = |s: &str| {
        s.lines()
            .find(|l| l.trim_start().starts_with("CA key password"))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        ca_line(&stdout).contains("known from the copy made while"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Outage confirmation") && stdout.contains("pass --yes"),
        "{stdout}"
    );

    let prepare = env.migrate(&[ssh_flags(), vec!["--prepare".into()]].concat());
    assert!(prepare.status.success(), "{}", text(&prepare).1);
    env.sim.clear_request_log();
    let (stdout, stderr) = dry(&env);
    assert!(
        stdout.contains("Expected outage: the final copy, about")
            && stdout.contains("Job uyuni-data-sync-"),
        "{stdout}"
    );
    assert!(ca_line(&stdout).contains("MISSING"), "{stdout}");
    assert!(
        stderr.contains("the source's CA key is encrypted")
            && stderr.contains("assumes the password is given"),
        "{stderr}"
    );
    assert!(writes(&env).is_empty(), "the dry run wrote");
}
