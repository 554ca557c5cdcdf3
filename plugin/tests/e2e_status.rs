//! `status` and `logs` on the simulated cluster, for what only a fake server does on demand: a
//! database that crash loops after a migration stopped on it, and transient API errors on the
//! reads `status` makes (each retried, the report unchanged).

use crate::support;

use support::{Env, quick_migration, ssh_flags, text};
use uyuni_testdata::{DeploymentScript, FailOnce, FaultTarget, Faults, SimConfig, Verb};

#[test]
fn a_crash_looping_database_is_reported_through_transient_errors() {
    let mut scenario = quick_migration();
    scenario
        .deployments
        .insert("db".into(), DeploymentScript::stuck("CrashLoopBackOff"));
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    let out = env.migrate(&ssh_flags());
    assert!(!out.status.success(), "the migration waits on the database");

    let once = |resource: &str, status: u16| FailOnce {
        target: FaultTarget::new(Some(Verb::List), Some(resource), None),
        status,
        retry_after_seconds: 1,
    };
    env.sim.set_faults(Faults {
        fail_once: vec![once("pods", 503), once("jobs", 500)],
        ..Faults::default()
    });
    let out = env.uyuni(&["status", "--exit-code"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(3),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stdout.contains("NOT HEALTHY") && stdout.contains("crash looping"),
        "{stdout}"
    );
    assert!(
        stdout.contains("CrashLoopBackOff") && stdout.contains("Deployment db"),
        "{stdout}"
    );
    assert!(stderr.contains("Deployment db crash looping"), "{stderr}");

    let out = env.uyuni(&["status", "-o", "json"]);
    assert!(out.status.success(), "{}", text(&out).1);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let db = report["workloads"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["component"] == "db"))
        .unwrap_or_else(|| panic!("no db: {report:#}"));
    assert_eq!(db["state"], "crash-looping", "{db:#}");
    assert!(db["restarts"].is_number(), "{db:#}");
    // The migration's steps, with their Jobs, as the last operation.
    let steps: Vec<&str> = report["lastOperation"]["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["step"].as_str())
        .collect();
    for step in ["image-check-server", "data-sync", "db-fixup", "db-upgrade"] {
        assert!(steps.contains(&step), "{step} missing: {steps:?}");
    }

    // The data sync's log, read after the fact.
    let out = env.uyuni(&["logs", "data-sync"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stdout.is_empty(), "no log:\n{stderr}");

    // Its reader gone before the first line (`… | head`): a quiet end, as kubectl's.
    let mut child = env
        .kubectl()
        .arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["-n", support::NS, "logs", "data-sync"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("ends");
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("error"), "{stderr}");
}

/// `logs STEP -f` started while the step's Job writes: it prints the lines written so far, then
/// each as it comes, and ends when the container does.
#[test]
fn logs_follows_a_step_while_it_writes() {
    let mut scenario = quick_migration();
    let sync = scenario
        .jobs
        .get_mut("data-sync")
        .expect("a data-sync script");
    sync.duration_ms = 4_000;
    sync.log.push("the last line of the copy".into());
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    let mut args = vec!["uyuni".to_owned(), "--kubeconfig".to_owned()];
    args.push(env.kubeconfig().display().to_string());
    args.extend(["-n", support::NS, "migrate", support::SOURCE, "--prepare"].map(str::to_owned));
    args.extend(ssh_flags());
    let mut migrate = env
        .kubectl()
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("kubectl runs");

    // The data sync's pod runs (a test may poll the simulated cluster; the plugin does not).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let running = env
            .sim
            .objects("v1", "Pod", Some(support::NS))
            .iter()
            .any(|p| {
                // The data sync's pod carries no step label: its Job's name says it.
                p["metadata"]["labels"]["job-name"]
                    .as_str()
                    .is_some_and(|j| j.starts_with("uyuni-data-sync"))
                    && p["status"]["phase"] == "Running"
            });
        if running {
            break;
        }

        assert!(
            std::time::Instant::now() < deadline,
            "the data sync never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let out = env.uyuni(&["logs", "data-sync", "-f"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stdout.trim_end().ends_with("the last line of the copy"),
        "the follow ended before the container did:\n{stdout}"
    );
    let status = migrate.wait().expect("migrate ends");
    assert!(status.success());
}
