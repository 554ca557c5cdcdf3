//! The record of each operation (`uyuni_core::operation`) on the simulated cluster: a
//! migration leaves one ConfigMap saying what ran, with every step done or found done, each
//! Job's attempt and the end of its log; `status` shows it; `logs` reads a kept log once the
//! Job's pod is gone; `report` bundles it with the objects, their pods and the events.

use crate::support;

use support::{Env, NS, quick_migration, ssh_flags, text};
use uyuni_testdata::SimConfig;

/// The records in the namespace, oldest first: name, record, data.
fn records(env: &Env) -> Vec<(String, serde_json::Value, serde_json::Value)> {
    support::records::operations(&env.sim, NS)
}

#[test]
fn a_migration_records_its_steps_jobs_and_logs_and_status_and_logs_read_them() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!stderr.contains("record of this operation"), "{stderr}");

    let found = records(&env);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (name, record, data) = &found[0];
    assert!(
        name.starts_with("uyuni-operation-") && name.ends_with("-migrate"),
        "{name}"
    );
    assert_eq!(record["command"], "migrate", "{record:#}");
    assert_eq!(record["outcome"], "succeeded", "{record:#}");
    assert!(
        record["fingerprint"]
            .as_str()
            .is_some_and(|f| f.starts_with("sha256:")),
        "{record:#}"
    );
    let steps = record["steps"].as_array().expect("steps");
    assert!(steps.len() > 20, "{record:#}");
    for step in steps {
        assert!(
            step["phase"] == "done" || step["phase"] == "skipped",
            "{step:#}"
        );
    }
    // Each Job step names its Job and attempt, and its Job's log is kept.
    let sync = steps
        .iter()
        .find(|s| s["id"] == "data-sync")
        .unwrap_or_else(|| panic!("no data-sync step: {record:#}"));
    let job = sync["job"].as_str().expect("the data sync's Job");
    // Its Jobs: the copy while the source serves, then the final one, which is the step's.
    let jobs = env.jobs_of("data-sync");
    assert_eq!(jobs.len(), 2);
    assert_eq!(sync["attempt"], 2, "{sync:#}");
    assert!(
        jobs.iter().any(|j| j["metadata"]["name"] == job),
        "{sync:#}"
    );
    let log = data[format!("log.{job}")].as_str().unwrap_or_default();
    assert!(!log.is_empty(), "no kept log of {job}: {data:#}");
    assert_eq!(
        sync["summary"].as_str(),
        log.lines().last(),
        "{sync:#}\n{log}"
    );

    // status: the last operation's command and outcome.
    let out = env.uyuni(&["status"]);
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains("Last operation: migrate, succeeded"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let out = env.uyuni(&["status", "-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["recorded"]["command"], "migrate", "{report:#}");
    assert_eq!(report["recorded"]["outcome"], "succeeded", "{report:#}");

    // The Jobs' pods gone, `logs` reads the kept logs and says so.
    for pod in env.sim.objects("v1", "Pod", Some(NS)) {
        let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
        if pod_name.starts_with("uyuni-data-sync-") {
            env.sim
                .delete("v1", "Pod", Some(NS), pod_name)
                .expect("pod deleted");
        }
    }
    let out = env.uyuni(&["logs", "data-sync", "--all-attempts"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains(log), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stderr.contains("kept in the operation record"), "{stderr}");
}

#[test]
fn a_report_bundles_the_record_its_logs_and_the_objects_with_secrets_masked() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    let out = env.migrate(&ssh_flags());
    assert!(out.status.success(), "{}", text(&out).1);
    let (name, record, data) = records(&env).pop().expect("a record");

    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("bundle.tar.gz");
    let out = env.uyuni(&[
        "report",
        "--file",
        file.to_str().expect("utf-8"),
        "-o",
        "json",
    ]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let result: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(result["kind"], "Report", "{result:#}");
    assert!(result["serverVersion"].is_string(), "{result:#}");

    let files = support::records::unpack(&file);
    let prefix = format!("uyuni-report-{NS}/");
    let get = |path: &str| {
        files
            .get(&format!("{prefix}{path}"))
            .unwrap_or_else(|| panic!("no {path} in {:?}", files.keys()))
    };
    // The record, every step done or found done, and each kept log.
    let kept: serde_json::Value =
        serde_json::from_str(get(&format!("operations/{name}.json"))).expect("the record");
    assert_eq!(kept, record);
    let mut logs = 0;
    for (key, log) in data.as_object().expect("data") {
        if let Some(job) = key.strip_prefix("log.") {
            assert_eq!(get(&format!("operations/{name}/{job}.log")), log);
            logs += 1;
        }
    }
    assert!(logs >= 5, "{logs} logs");
    // The objects, the pods, the events and the summary.
    assert!(get("objects/deployment_uyuni.yaml").contains("kind: Deployment"));
    assert!(
        files
            .keys()
            .any(|k| k.starts_with(&format!("{prefix}pods/")))
    );
    assert!(files.contains_key(&format!("{prefix}events.yaml")));
    let summary: serde_json::Value = serde_json::from_str(get("report.json")).expect("JSON");
    assert_eq!(summary["toolVersion"], env!("CARGO_PKG_VERSION"));
    // A Secret by its keys, every value masked.
    let secret = get("objects/secret_db-credentials.yaml");
    assert!(secret.contains("password:"), "{secret}");
    for line in secret
        .lines()
        .filter(|l| l.trim_start().starts_with("password:"))
    {
        assert!(line.contains("***"), "{secret}");
    }
}

#[test]
fn a_failed_run_is_recorded_with_its_step_and_exit_reason_and_status_shows_it() {
    let mut scenario = quick_migration();
    scenario.jobs.insert(
        "db-fixup".into(),
        uyuni_testdata::JobScript::fail(3, &["fixing up", "psql: the fix-up failed"]),
    );
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    let out = env.migrate(&ssh_flags());
    assert!(!out.status.success(), "the fix-up fails");

    let (_, record, _) = records(&env).pop().expect("a record");
    assert_eq!(record["outcome"], "failed", "{record:#}");
    assert!(
        record["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{record:#}"
    );
    let steps = record["steps"].as_array().expect("steps");
    let failed: Vec<&serde_json::Value> = steps.iter().filter(|s| s["phase"] == "failed").collect();
    assert_eq!(failed.len(), 1, "{record:#}");
    assert_eq!(failed[0]["id"], "db-fixup", "{record:#}");
    assert!(failed[0]["exitReason"].is_string(), "{record:#}");
    assert_eq!(
        failed[0]["summary"], "psql: the fix-up failed",
        "{record:#}"
    );
    // Nothing after it ran.
    let at = steps
        .iter()
        .position(|s| s["phase"] == "failed")
        .expect("failed");
    assert!(
        steps[at + 1..].iter().all(|s| s["phase"] == "pending"),
        "{record:#}"
    );

    let out = env.uyuni(&["status"]);
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains("Last operation: migrate, failed")
            && stdout.contains("failed at step db-fixup"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    let out = env.uyuni(&["status", "-o", "json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["recorded"]["failedStep"], "db-fixup", "{report:#}");
}

/// Ctrl-C during the data sync: the record says `interrupted`, by which signal, with the
/// sync still `running` (its Job goes on); the run again ends with a record of its own.
#[test]
fn a_run_stopped_by_sigint_is_recorded_as_interrupted() {
    let mut scenario = quick_migration();
    // Long enough to be seen running and interrupted (the loop below looks every 50 ms), short
    // enough that the run again, which waits on the same Job, is not the module's long pole.
    if let Some(job) = scenario.jobs.get_mut("data-sync") {
        job.duration_ms = 5_000;
    }
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    let child = crate::e2e_faults::migrate(&env, &[])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = std::time::Instant::now();
    let running_sync = |env: &Env| {
        records(env).iter().any(|(_, r, _)| {
            r["steps"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|s| s["id"] == "data-sync" && s["phase"] == "running")
        })
    };
    while !running_sync(&env) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "the data sync never showed running: {:#?}",
            records(&env)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // kubectl execs its plugins: the child's pid is the plugin's.
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(130), "{}", text(&out).1);

    let (_, record, _) = records(&env).pop().expect("a record");
    assert_eq!(record["outcome"], "interrupted", "{record:#}");
    assert_eq!(record["error"], "interrupted by SIGINT", "{record:#}");
    assert!(record["ended"].is_string(), "{record:#}");

    let out = crate::e2e_faults::migrate(&env, &[])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", text(&out).1);
    let found = records(&env);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!(found[1].1["outcome"], "succeeded");
}
