//! End to end: the built plugin, run through the real `kubectl` (as `kubectl uyuni …`), against
//! the simulated cluster: the data-sync slice of the migration (the later phases are in
//! e2e_migration.rs).

use crate::support;

use std::process::Stdio;
use std::time::Duration;

use support::{Env, NS, SOURCE, assert_no_secret, name, quick_migration, ssh_flags, text};
use uyuni_testdata::{JobScript, Scenario, SimConfig};

fn env(scenario: Scenario) -> Env {
    Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    })
}

/// The data-sync Jobs (the database Jobs that follow are tested in e2e_migration.rs).
fn sync_jobs(env: &Env) -> Vec<serde_json::Value> {
    env.jobs_of("data-sync")
}

#[test]
fn migrate_runs_through_the_data_sync_and_a_second_run_changes_nothing() {
    let env = env(quick_migration());
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
    // The SSH key is deleted once the migration has finished (`--keep-migration-data` keeps
    // it); the rest of the migration's access stays.
    assert!(
        env.sim
            .get("v1", "Secret", Some(NS), "uyuni-migration-key")
            .is_none(),
        "Secret uyuni-migration-key is left after the migration"
    );
    for (api, kind, n) in [
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

    // A copy while the source serves, whose data every input is checked on, then the final one.
    assert_eq!(sync_jobs(&env).len(), 2);
    assert_eq!(env.syncs_of_mode("prepare").len(), 1);
    let jobs = env.syncs_of_mode("final");
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
        sync_jobs(&env).len(),
        2,
        "a second run must not start another sync"
    );
    assert_eq!(name(&env.syncs_of_mode("final")[0]), sync_job);
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
    let env = env(quick_migration());
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
    let env = env(quick_migration());
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
    let env = env(scenario);
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "stdout:\n{stdout}");
    let failed = name(&sync_jobs(&env)[0]).to_owned();
    assert!(stderr.contains(&failed), "{stderr}");
    assert!(
        stderr.contains("rsync error: error in rsync protocol data stream (code 12)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "kubectl --kubeconfig {} --context uyuni-sim -n {NS} logs job/{failed}",
            env.kubeconfig().display()
        )),
        "{stderr}"
    );

    // The source is fixed; the next run retries as a new Job and keeps the failed one.
    env.sim.set_scenario(quick_migration());
    let retry = env.migrate(&[]);
    let (stdout, stderr) = text(&retry);
    assert!(
        retry.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // The failed copy (made while the source serves, so nothing was stopped), its retry, and
    // the final sync.
    let names: Vec<String> = sync_jobs(&env).iter().map(|j| name(j).to_owned()).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert_eq!(env.syncs_of_mode("final").len(), 1, "{names:?}");
    assert!(names.contains(&failed));
}

#[test]
fn an_interrupted_run_resumes_by_waiting_for_the_running_job() {
    let mut scenario = quick_migration();
    if let Some(job) = scenario.jobs.get_mut("data-sync") {
        job.duration_ms = 2500;
    }
    let env = env(scenario);
    let created = env.sim.job_created_channel("data-sync");
    let mut child = env
        .kubectl()
        .arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["-n", NS, "migrate", SOURCE, "--yes"])
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

    // Killed outright, the run left the namespace's Lease behind (e2e_lease: a run without
    // --force-unlock is refused until it runs out).
    let out = env.migrate(&["--force-unlock".to_owned()]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("await Job"),
        "the running Job is awaited:\n{stderr}"
    );
    // The copy it had started is awaited, not started again; the final sync follows.
    let prepares = env.syncs_of_mode("prepare");
    assert_eq!(prepares.len(), 1, "no second sync while one runs");
    assert_eq!(name(&prepares[0]), job.name);
    assert_eq!(env.syncs_of_mode("final").len(), 1);
}

#[test]
fn the_result_is_printed_as_data_with_o_json_and_yaml() {
    let env = env(quick_migration());
    let mut flags = ssh_flags();
    flags.extend(["-o".to_owned(), "json".to_owned()]);
    let out = env.migrate(&flags);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_no_secret(&out);
    let result: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is JSON");
    assert_eq!(result["source"], SOURCE);
    assert_eq!(result["mode"], "final");
    assert_eq!(result["timezone"], "Europe/Berlin");
    assert_eq!(result["sourcePostgresql"], "16");
    assert_eq!(result["database"]["volume"], "var-pgsql18");
    assert!(
        result["syncJob"]
            .as_str()
            .is_some_and(|j| j.starts_with("uyuni-data-sync-"))
    );

    // The outage, from what the cluster recorded: the simulated sync records no stop time,
    // so it counts from the final sync's start, and says so.
    let outage = &result["outage"];
    assert_eq!(outage["syncJob"], result["syncJob"]);
    assert_eq!(outage["stopRecorded"], false);
    let phases: Vec<&str> = outage["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| p["name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(phases, ["copy", "database", "server-start"]);
    let sum: i64 = outage["phases"]
        .as_array()
        .expect("phases")
        .iter()
        .map(|p| p["seconds"].as_i64().expect("seconds"))
        .sum();
    assert_eq!(outage["seconds"].as_i64(), Some(sum));
    assert!(result.get("expectedOutageSeconds").is_none());

    let again = env.migrate(&["-o".to_owned(), "yaml".to_owned()]);
    assert!(again.status.success(), "{}", text(&again).1);
    let yaml = text(&again).0;
    assert!(
        yaml.contains("mode: final") && yaml.contains("sourcePostgresql:"),
        "{yaml}"
    );
    let human = env.migrate(&[]);
    assert!(
        text(&human).0.contains("The source was down for ")
            && text(&human).0.contains("until the server was ready"),
        "{}",
        text(&human).0
    );
}

#[test]
fn a_target_image_older_than_5_2_is_refused_before_any_write() {
    let env = env(quick_migration());
    let mut flags = ssh_flags();
    flags.extend(["--tag".to_owned(), "5.1.2".to_owned()]);
    let out = env.migrate(&flags);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("release 5.1") && stderr.contains("--tag"),
        "{stderr}"
    );
    assert!(
        env.sim.request_log().iter().all(|r| !r.write),
        "wrote before refusing"
    );
}
