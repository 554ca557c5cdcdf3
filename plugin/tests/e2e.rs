//! End to end: the built plugin, run through the real `kubectl` (as `kubectl uyuni …`), against
//! the simulated cluster.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use uyuni_testdata::{JobScript, Scenario, SimCluster, SimConfig, scenarios};

const SOURCE: &str = "uyuni.example.com";
const NS: &str = "uyuni";
/// The source CA's password, given through the environment.
const CA_PASSWORD: &str = "ca secret #1";

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/fixtures/ssh")
}

fn ssh_flags() -> Vec<String> {
    let f = fixtures();
    [
        ("--ssh-key-private", "id_ed25519"),
        ("--ssh-key-public", "id_ed25519.pub"),
        ("--ssh-knownhosts", "known_hosts"),
        ("--ssh-config", "config"),
    ]
    .iter()
    .flat_map(|(flag, file)| [flag.to_string(), f.join(file).display().to_string()])
    .collect()
}

/// Secret values that must never reach the plugin's output.
fn secrets() -> Vec<String> {
    let key = std::fs::read_to_string(fixtures().join("id_ed25519")).expect("fixture key");
    let mut s: Vec<String> = key
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .map(str::to_owned)
        .collect();
    s.push("correct horse battery".into());
    s.push("another one with spaces".into());
    s.push(CA_PASSWORD.into());
    s.push("MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQIc2ltdWxhdGVkAgIIADAMBggqhkiG".into());
    s
}

/// A quick version of the realistic migration scenario.
fn quick_migration() -> Scenario {
    let mut s = scenarios::migration();
    if let Some(job) = s.jobs.get_mut("data-sync") {
        job.duration_ms = 400;
    }
    s
}

struct Env {
    sim: SimCluster,
    bin: tempfile::TempDir,
    cache: tempfile::TempDir,
}

impl Env {
    fn new(scenario: Scenario) -> Env {
        let sim = SimCluster::start_blocking(SimConfig {
            scenario,
            ..SimConfig::default()
        })
        .expect("simulated cluster");
        // A directory with only the plugin: kubectl finds it on PATH as `kubectl uyuni`.
        let bin = tempfile::tempdir().expect("tempdir");
        let plugin = assert_cmd::cargo::cargo_bin("kubectl-uyuni");
        std::os::unix::fs::symlink(&plugin, bin.path().join("kubectl-uyuni")).expect("symlink");
        Env {
            sim,
            bin,
            cache: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn kubectl(&self) -> Command {
        let mut cmd = Command::new("kubectl");
        let path = format!(
            "{}:{}",
            self.bin.path().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env("PATH", path)
            .env("KUBECACHEDIR", self.cache.path())
            .env_remove("KUBECONFIG")
            .env("UYUNI_SSL_PASSWORD", CA_PASSWORD)
            .env("NO_COLOR", "1");
        cmd
    }

    fn kubeconfig(&self) -> &Path {
        self.sim.kubeconfig_path()
    }

    /// `kubectl uyuni --kubeconfig K -n uyuni migrate SOURCE ARGS…`
    fn migrate(&self, args: &[String]) -> Output {
        self.kubectl()
            .arg("uyuni")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(["-n", NS, "migrate", SOURCE])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("kubectl runs")
    }

    /// The data-sync Jobs (the database Jobs that follow are tested in e2e_migration.rs).
    fn jobs(&self) -> Vec<Value> {
        self.sim
            .objects("batch/v1", "Job", Some(NS))
            .into_iter()
            .filter(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/step"] == "data-sync")
            .collect()
    }
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn assert_no_secret(out: &Output) {
    let (stdout, stderr) = text(out);
    for secret in secrets() {
        assert!(!stdout.contains(&secret), "secret {secret:?} on stdout");
        assert!(!stderr.contains(&secret), "secret {secret:?} on stderr");
    }
}

fn name(v: &Value) -> &str {
    v["metadata"]["name"].as_str().unwrap_or_default()
}

/// Validates every object the plugin wrote against the official Kubernetes schemas with
/// `kubernetes-validate --strict`. Required in CI; elsewhere skipped with a note when absent.
fn validate_written(sim: &SimCluster) {
    let tool = std::env::var("UYUNI_KUBERNETES_VALIDATE").ok();
    let Some(tool) = tool.filter(|t| Path::new(t).exists()) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI must set UYUNI_KUBERNETES_VALIDATE (scripts/test.sh does)"
        );
        eprintln!("note: kubernetes-validate not available; written objects not schema-checked");
        return;
    };
    let docs: Vec<String> = sim
        .written()
        .iter()
        .filter(|w| w.body.get("kind").is_some())
        .map(|w| serde_json::to_string(&w.body).expect("json"))
        .collect();
    assert!(!docs.is_empty(), "nothing was written");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("written.yaml");
    std::fs::write(&file, docs.join("\n---\n")).expect("write");
    let out = Command::new(tool)
        .args(["--strict", "-k", "1.33", "--quiet"])
        .arg(&file)
        .output()
        .expect("kubernetes-validate runs");
    assert!(
        out.status.success(),
        "kubernetes-validate rejected written objects:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn migrate_runs_through_the_data_sync_and_a_second_run_changes_nothing() {
    let env = Env::new(quick_migration());
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_no_secret(&out);
    for expected in [
        "Europe/Berlin",
        "PostgreSQL:       16",
        "susemanager",
        "Uyuni-generated CA",
        "Not built yet",
    ] {
        assert!(
            stdout.contains(expected),
            "summary lacks {expected}:\n{stdout}"
        );
    }
    assert!(
        stderr.contains("Synchronizing"),
        "the Job's log is streamed:\n{stderr}"
    );

    // The objects of the slice exist.
    assert!(env.sim.get("v1", "Namespace", None, NS).is_some());
    let pvcs: Vec<String> = env
        .sim
        .objects("v1", "PersistentVolumeClaim", Some(NS))
        .iter()
        .map(|p| name(p).to_owned())
        .collect();
    for volume in uyuni_core::volumes::CATALOGUE {
        assert!(
            pvcs.iter().any(|p| p == volume.name),
            "PVC {} missing",
            volume.name
        );
    }
    for (api, kind, n) in [
        ("v1", "Secret", "uyuni-migration-key"),
        ("v1", "ConfigMap", "uyuni-migration-ssh"),
        ("v1", "ServiceAccount", "uyuni-migration"),
        ("rbac.authorization.k8s.io/v1", "Role", "uyuni-migration"),
        (
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            "uyuni-migration",
        ),
    ] {
        let obj = env
            .sim
            .get(api, kind, Some(NS), n)
            .unwrap_or_else(|| panic!("{kind} {n}"));
        assert_eq!(
            obj["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "kubectl-uyuni"
        );
    }
    let role = env
        .sim
        .get(
            "rbac.authorization.k8s.io/v1",
            "Role",
            Some(NS),
            "uyuni-migration",
        )
        .expect("role");
    assert_eq!(
        role["rules"][0]["resourceNames"],
        serde_json::json!(["uyuni-migration-data"])
    );
    assert_eq!(
        role["rules"][0]["verbs"],
        serde_json::json!(["get", "patch"])
    );

    let jobs = env.jobs();
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0];
    assert_eq!(
        job["metadata"]["annotations"]["kubectl-uyuni.io/step"],
        "data-sync"
    );
    assert!(job["metadata"]["annotations"]["kubectl-uyuni.io/spec-hash"].is_string());
    assert_eq!(job["spec"]["backoffLimit"], 0);
    assert!(job["spec"].get("ttlSecondsAfterFinished").is_none());
    let sync_job = name(job).to_owned();
    validate_written(&env.sim);

    // Again, without the SSH flags: the stored material is reused and nothing is written.
    env.sim.clear_request_log();
    let again = env.migrate(&[]);
    let (stdout, stderr) = text(&again);
    assert!(
        again.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains("Nothing to do"), "{stderr}");
    assert_eq!(
        env.jobs().len(),
        1,
        "a second run must not start another sync"
    );
    assert_eq!(name(&env.jobs()[0]), sync_job);
    let writes: Vec<_> = env
        .sim
        .request_log()
        .into_iter()
        .filter(|r| r.is_successful_write())
        .collect();
    assert!(writes.is_empty(), "second run wrote: {writes:?}");
    assert_no_secret(&again);
}

#[test]
fn dry_run_shows_every_object_masks_secrets_and_writes_nothing() {
    let env = Env::new(quick_migration());
    let out = env.migrate(&[ssh_flags(), vec!["--dry-run".into()]].concat());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_no_secret(&out);
    let mut expected = vec![
        "+++ intended/namespace/uyuni".to_owned(),
        "+++ intended/secret/uyuni-migration-key".to_owned(),
        "+++ intended/configmap/uyuni-migration-ssh".to_owned(),
        "+++ intended/serviceaccount/uyuni-migration".to_owned(),
        "+++ intended/role/uyuni-migration".to_owned(),
        "+++ intended/rolebinding/uyuni-migration".to_owned(),
        "+++ intended/secret/uyuni-migration-data".to_owned(),
        "+++ intended/job/uyuni-data-sync-".to_owned(),
    ];
    for volume in uyuni_core::volumes::CATALOGUE {
        expected.push(format!(
            "+++ intended/persistentvolumeclaim/{}\n",
            volume.name
        ));
    }
    for e in expected {
        assert!(stdout.contains(&e), "dry run lacks {e:?}");
    }
    assert!(stdout.contains("key: \"***\""), "secret values are masked");
    assert!(
        stdout.contains("<known after data-sync>"),
        "placeholders are explained"
    );
    let writes: Vec<_> = env
        .sim
        .request_log()
        .into_iter()
        .filter(|r| r.write)
        .collect();
    assert!(writes.is_empty(), "dry run wrote: {writes:?}");
    assert!(env.sim.get("v1", "Namespace", None, NS).is_none());
}

#[test]
fn missing_ssh_material_fails_before_any_write() {
    let env = Env::new(quick_migration());
    let out = env.migrate(&[]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("uyuni-migration-key") && stderr.contains("--ssh-key-private"),
        "{stderr}"
    );
    assert!(
        env.sim.request_log().iter().all(|r| !r.write),
        "wrote before validating"
    );
}

#[test]
fn a_failed_sync_names_the_job_shows_its_log_and_is_retried_as_a_new_job() {
    let mut scenario = quick_migration();
    scenario.jobs.insert(
        "data-sync".into(),
        JobScript::fail(
            12,
            &[
                "Synchronizing /var/lib/cobbler",
                "rsync: connection unexpectedly closed (0 bytes received so far) [Receiver]",
                "rsync error: error in rsync protocol data stream (code 12)",
            ],
        ),
    );
    let env = Env::new(scenario);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    let failed = name(&env.jobs()[0]).to_owned();
    assert!(stderr.contains(&failed), "{stderr}");
    assert!(
        stderr.contains("rsync error: error in rsync protocol data stream (code 12)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("kubectl logs -n {NS} job/{failed}")),
        "{stderr}"
    );

    // The source is fixed; the next run retries as a new Job and keeps the failed one.
    env.sim.set_scenario(quick_migration());
    std::thread::sleep(Duration::from_millis(1100)); // run ids have one-second resolution
    let retry = env.migrate(&[]);
    let (stdout, stderr) = text(&retry);
    assert!(
        retry.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let names: Vec<String> = env.jobs().iter().map(|j| name(j).to_owned()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&failed));
}

#[test]
fn an_interrupted_run_resumes_by_waiting_for_the_running_job() {
    let mut scenario = quick_migration();
    if let Some(job) = scenario.jobs.get_mut("data-sync") {
        job.duration_ms = 2500;
    }
    let env = Env::new(scenario);
    let created = env.sim.job_created_channel("data-sync");
    let mut child = env
        .kubectl()
        .arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["-n", NS, "migrate", SOURCE])
        .args(ssh_flags())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let job = created
        .recv_timeout(Duration::from_secs(60))
        .expect("the data-sync Job is created");
    child.kill().expect("kill");
    let _ = child.wait();

    let out = env.migrate(&[]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("await Job"),
        "the running Job is awaited:\n{stderr}"
    );
    let jobs = env.jobs();
    assert_eq!(jobs.len(), 1, "no second sync while one runs");
    assert_eq!(name(&jobs[0]), job.name);
}
