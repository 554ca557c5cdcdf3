//! One writer at a time (issue 33), end to end through the real `kubectl` against the simulated
//! cluster: two runs started together in one namespace make one data copy and the other run
//! refuses, naming the holder; a holder killed with SIGKILL leaves its Lease behind, which a new
//! run takes over once it has run out, or at once with `--force-unlock`; a run releases it at
//! its end and on SIGTERM; a dry run never touches it. The same on the real control plane in
//! `e2e_real_migration.rs`.

use crate::support;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Env, NS, SOURCE, quick_migration, ssh_flags, text};
use uyuni_testdata::SimConfig;

const LEASE: &str = "kubectl-uyuni";

/// `kubectl uyuni … migrate SOURCE --yes ARGS…`, started in the background, its output piped.
fn spawn_migrate(env: &Env, extra: &[&str]) -> Child {
    let mut args: Vec<String> = vec![
        "uyuni".into(),
        "--kubeconfig".into(),
        env.kubeconfig().display().to_string(),
        "-n".into(),
        NS.into(),
        "migrate".into(),
        SOURCE.into(),
        "--yes".into(),
    ];
    args.extend(ssh_flags());
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    env.kubectl()
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs")
}

fn lease(env: &Env) -> Option<Value> {
    env.sim
        .get("coordination.k8s.io/v1", "Lease", Some(NS), LEASE)
}

fn holder_pid(lease: &Value) -> Option<u32> {
    lease["metadata"]["annotations"]["kubectl-uyuni.io/pid"]
        .as_str()
        .and_then(|p| p.parse().ok())
}

/// Waits (without asserting on time) until `condition`, for at most two minutes.
fn wait_for(what: &str, condition: impl Fn() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "still waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name}");
}

fn refused_naming(out: &Output, holder_pid: u32) -> String {
    let (stdout, stderr) = text(out);
    assert!(
        !out.status.success(),
        "the second run should refuse\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for part in [
        format!("another run is writing to namespace {NS}").as_str(),
        "`kubectl uyuni --kubeconfig",
        &format!("migrate {SOURCE} --yes"),
        &format!("(process {holder_pid}), since "),
        "holds Lease kubectl-uyuni; its lease runs out at ",
        "Nothing was written",
        "--force-unlock`",
    ] {
        assert!(stderr.contains(part), "{part:?} in:\n{stderr}");
    }
    stderr
}

/// A namespace where a `--prepare` copy was made, and from now on a data sync long enough for
/// a test to act while it runs (the holder is stopped by a signal meanwhile): the case
/// of two final runs started together.
fn env_prepared_with_long_sync() -> Env {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    let mut flags = ssh_flags();
    flags.push("--prepare".into());
    let out = env.migrate(&flags);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let mut scenario = env.sim.scenario();
    if let Some(job) = scenario.jobs.get_mut("data-sync") {
        job.duration_ms = 600_000;
    }
    env.sim.set_scenario(scenario);
    env
}

#[test]
fn e2e_lease_two_final_runs_started_together_make_one_copy_and_the_other_refuses_naming_the_holder()
{
    let env = env_prepared_with_long_sync();
    let mut runs = vec![spawn_migrate(&env, &[]), spawn_migrate(&env, &[])];
    // The one that refuses ends; the holder waits for its copy until it is stopped.
    let ended = loop {
        if let Some(i) = runs
            .iter_mut()
            .position(|r| r.try_wait().expect("wait").is_some())
        {
            break i;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let refusal = runs.remove(ended).wait_with_output().expect("output");
    let holding = runs.remove(0);
    let holder = lease(&env).expect("the lease is held");
    let pid = holder_pid(&holder).expect("the holder's pid");
    // kubectl runs the plugin in its own process (exec): the lease names the other child.
    assert_eq!(
        holding.id(),
        pid,
        "the lease names the process that holds it"
    );
    let stderr = refused_naming(&refusal, pid);
    wait_for("the holder's final copy", || {
        env.syncs_of_mode("final").len() == 1
    });

    // SIGTERM: the holder stops and releases the lease; its Job keeps running.
    signal(&holding, "TERM");
    let out = holding.wait_with_output().expect("output");
    let (_, holder_stderr) = text(&out);
    assert_eq!(out.status.code(), Some(143), "{holder_stderr}");
    assert!(
        holder_stderr.contains("interrupted by SIGTERM"),
        "{holder_stderr}"
    );
    assert!(lease(&env).is_none(), "released on SIGTERM");
    assert_eq!(
        env.syncs_of_mode("final").len(),
        1,
        "one final data copy: the refused run started none\n{stderr}"
    );
}

#[test]
fn e2e_lease_a_holder_killed_with_sigkill_is_taken_over_with_force_unlock_at_once() {
    let mut scenario = quick_migration();
    if let Some(job) = scenario.jobs.get_mut("data-sync") {
        job.duration_ms = 3_000;
    }
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    env.create_namespace();
    let created = env.sim.job_created_channel("data-sync");
    let mut killed = spawn_migrate(&env, &[]);
    let sync = created
        .recv_timeout(Duration::from_secs(120))
        .expect("a data-sync Job is created");
    let pid = killed.id();
    killed.kill().expect("SIGKILL");
    let _ = killed.wait();
    let left = lease(&env).expect("a killed run leaves its lease behind");
    assert_eq!(holder_pid(&left), Some(pid));

    // Its lease has not run out (60 s): refused, nothing written.
    let before = env.sim.request_log().len();
    let out = env.migrate(&ssh_flags());
    refused_naming(&out, pid);
    // The killed run's data-sync Job goes on, and its pod reports its progress on it.
    let writes: Vec<String> = env.sim.request_log()[before..]
        .iter()
        .filter(|r| r.write && r.name.as_deref() != Some(sync.name.as_str()))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "the refused run wrote {writes:?}");

    // --force-unlock takes it over at once, saying from whom and what that risks.
    let mut flags = ssh_flags();
    flags.push("--force-unlock".into());
    let out = env.migrate(&flags);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains(
            "--force-unlock: taking Lease kubectl-uyuni in namespace uyuni over from `kubectl uyuni"
        ) && stderr.contains(&format!("(process {pid})"))
            && stderr.contains("two data copies into the same volumes"),
        "{stderr}"
    );
    assert!(lease(&env).is_none(), "released at the end of the run");
}

#[test]
fn e2e_lease_a_holder_killed_with_sigkill_is_taken_over_once_its_lease_ran_out() {
    let mut scenario = quick_migration();
    if let Some(job) = scenario.jobs.get_mut("data-sync") {
        job.duration_ms = 3_000;
    }
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    env.create_namespace();
    let created = env.sim.job_created_channel("data-sync");
    let mut killed = spawn_migrate(&env, &["--lease-duration-seconds", "2"]);
    created
        .recv_timeout(Duration::from_secs(120))
        .expect("a data-sync Job is created");
    let pid = killed.id();
    killed.kill().expect("SIGKILL");
    let _ = killed.wait();
    let left = lease(&env).expect("a killed run leaves its lease behind");
    assert_eq!(left["spec"]["leaseDurationSeconds"], 2);
    // `status` reads the lease for the record the killed run left: still held by that run
    // (it cannot tell a run killed just now from one that runs), then, once it has run out,
    // gone.
    let last_operation = || {
        let out = env.uyuni(&["status"]);
        text(&out)
            .0
            .lines()
            .find(|l| l.starts_with("Last operation: migrate"))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no record line:\n{}", text(&out).0))
    };
    let while_held = last_operation();

    // Until it has run out by the server's clock (renewTime + duration, plus a second for the
    // precision of the clock as read, plus one for this test's reading), then a plain run.
    let renewed: k8s_openapi::jiff::Timestamp = left["spec"]["renewTime"]
        .as_str()
        .expect("renewTime")
        .parse()
        .expect("a time");
    let end = renewed + k8s_openapi::jiff::SignedDuration::from_secs(4);
    wait_for("the lease to run out", || {
        k8s_openapi::jiff::Timestamp::now() > end
    });
    // Read before the lease had run out, or a second later than the renewal read above.
    assert!(
        while_held.contains("running (it holds the namespace's lease)")
            || while_held.contains("its run is gone"),
        "{while_held}"
    );
    let gone = last_operation();
    assert!(
        gone.contains(
            "not ended, and its run is gone (killed, or cut off): run the same command again"
        ),
        "{gone}"
    );
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains(
            "took over Lease kubectl-uyuni in namespace uyuni: its holder, `kubectl uyuni"
        ) && stderr.contains(&format!("(process {pid})"))
            && stderr.contains("stopped renewing it"),
        "{stderr}"
    );
    assert!(lease(&env).is_none(), "released at the end of the run");
}

#[test]
fn e2e_lease_a_dry_run_never_touches_the_lease_and_a_run_into_a_new_namespace_takes_it() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    let leases = |env: &Env| {
        env.sim
            .request_log()
            .iter()
            .filter(|r| r.resource.as_deref() == Some("leases"))
            .map(|r| format!("{} {}", r.verb.as_deref().unwrap_or("?"), r.status))
            .collect::<Vec<_>>()
    };
    let mut flags = ssh_flags();
    flags.push("--dry-run".into());
    let out = env.migrate(&flags);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(leases(&env), Vec::<String>::new(), "a dry run");

    // The namespace does not exist: the run creates it, then takes the lease, renews it while
    // it runs, and releases it at its end.
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let seen = leases(&env);
    assert!(
        seen.first().map(String::as_str) == Some("get 404")
            && seen.contains(&"create 201".to_owned())
            && seen.last().map(String::as_str) == Some("delete 200"),
        "{seen:?}"
    );
    assert!(lease(&env).is_none());
    let first_lease_write = env
        .sim
        .request_log()
        .iter()
        .position(|r| r.write && r.status < 300 && r.resource.as_deref() == Some("leases"))
        .expect("the lease was created");
    let writes_before: Vec<String> = env.sim.request_log()[..first_lease_write]
        .iter()
        .filter(|r| r.write && r.status < 300)
        .map(|r| format!("{} {}", r.method, r.resource.as_deref().unwrap_or(&r.path)))
        .collect();
    assert_eq!(
        writes_before,
        ["PATCH namespaces"],
        "only the namespace is written before the lease"
    );
}

#[test]
fn e2e_lease_a_run_that_lost_its_lease_stops_before_its_next_write() {
    let mut scenario = quick_migration();
    // Long against the run's renewals (every second with a 3 s lease): the run notices the
    // loss while it waits for this Job.
    if let Some(job) = scenario.jobs.get_mut("data-sync") {
        job.duration_ms = 10_000;
    }
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    env.create_namespace();
    let created = env.sim.job_created_channel("data-sync");
    let run = spawn_migrate(&env, &["--lease-duration-seconds", "3"]);
    created
        .recv_timeout(Duration::from_secs(120))
        .expect("a data-sync Job is created");
    let jobs = |env: &Env| {
        env.sim
            .objects("batch/v1", "Job", Some(NS))
            .iter()
            .map(|j| support::name(j).to_owned())
            .collect::<Vec<_>>()
    };
    let jobs_then = jobs(&env);
    // Another run takes the lease over, as --force-unlock does.
    let mut taken = lease(&env).expect("held");
    taken["spec"]["holderIdentity"] = "bob@elsewhere/1/20270101000000".into();
    taken["metadata"]["annotations"]["kubectl-uyuni.io/pid"] = "1".into();
    env.sim.put(taken).expect("taken over");

    let out = run.wait_with_output().expect("output");
    let (stdout, stderr) = text(&out);
    assert!(
        !out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains(
            "this run no longer holds Lease kubectl-uyuni in namespace uyuni (another run took it over"
        ) && stderr.contains("so it stopped before its next write"),
        "{stderr}"
    );
    assert_eq!(
        jobs(&env),
        jobs_then,
        "no Job after the one it waited for\n{stderr}"
    );
    assert_eq!(
        lease(&env).expect("the lease stays its new holder's")["spec"]["holderIdentity"],
        "bob@elsewhere/1/20270101000000"
    );
}

/// Every command that writes holds the lease (issue 37): with a live run's Lease in the
/// namespace, install, upgrade, stop, start, restart and uninstall each refuse naming it and
/// write nothing; without one, each takes it (created before its first other write) and
/// deletes it at its end. (A run with nothing to do writes nothing and takes no lease.)
#[test]
fn e2e_lease_every_writing_command_refuses_while_another_run_holds_it_and_takes_it_otherwise() {
    use crate::e2e_faults::{env as quick_env, install, installed_2025_10, upgrade};
    use uyuni_testdata::Faults;

    const OTHER_PID: u32 = 4242;
    let env = quick_env(Faults::default());
    installed_2025_10(&env);
    let hold = || {
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        env.sim
            .put(serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": LEASE,
                    "namespace": NS,
                    "annotations": {
                        "kubectl-uyuni.io/command": "kubectl uyuni -n uyuni upgrade --tag 2026.04",
                        "kubectl-uyuni.io/user": "alice",
                        "kubectl-uyuni.io/host": "laptop",
                        "kubectl-uyuni.io/pid": OTHER_PID.to_string(),
                    },
                },
                "spec": {
                    "holderIdentity": "alice@laptop/4242/20261204120000",
                    "leaseDurationSeconds": 3600,
                    "acquireTime": now,
                    "renewTime": now,
                },
            }))
            .expect("a live run's lease");
    };
    let free = || {
        assert_eq!(
            lease(&env).and_then(|l| holder_pid(&l)),
            Some(OTHER_PID),
            "the live run's lease is left as it was"
        );
        env.sim
            .delete("coordination.k8s.io/v1", "Lease", Some(NS), LEASE)
            .expect("the other run ended");
    };
    let refused = |name: &str, mut command: Command| {
        let before = env.sim.request_log().len();
        let out = command.output().expect("kubectl runs");
        let (stdout, stderr) = text(&out);
        assert!(!out.status.success(), "{name} ran:\n{stdout}\n{stderr}");
        for part in [
            &format!("another run is writing to namespace {NS}"),
            &format!("(process {OTHER_PID}), since "),
            "Nothing was written",
            "--force-unlock`",
        ] {
            assert!(stderr.contains(part), "{name}: {part:?} in:\n{stderr}");
        }
        let writes: Vec<String> = env.sim.request_log()[before..]
            .iter()
            .filter(|r| r.write && r.resource.as_deref() != Some("selfsubjectaccessreviews"))
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        assert!(writes.is_empty(), "the refused {name} wrote {writes:?}");
    };
    let takes = |name: &str, mut command: Command| {
        let before = env.sim.request_log().len();
        let out = command.output().expect("kubectl runs");
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{name}:\n{stdout}\n{stderr}");
        let log = env.sim.request_log()[before..].to_vec();
        let writes: Vec<(String, String)> = log
            .iter()
            .filter(|r| r.write && r.status < 300)
            .filter(|r| r.resource.as_deref() != Some("selfsubjectaccessreviews"))
            .map(|r| {
                (
                    r.verb.clone().unwrap_or_default(),
                    r.resource.clone().unwrap_or_default(),
                )
            })
            .collect();
        assert!(writes.len() > 2, "{name} wrote nothing: {writes:?}");
        assert_eq!(
            writes.first(),
            Some(&("create".to_owned(), "leases".to_owned())),
            "{name} wrote before taking the lease: {writes:?}"
        );
        assert_eq!(
            writes.last(),
            Some(&("delete".to_owned(), "leases".to_owned())),
            "{name} did not release the lease last: {writes:?}"
        );
        assert!(lease(&env).is_none(), "{name} left its lease behind");
    };
    let stop = || uyuni_command(&env, &["stop", "--yes"]);
    let restart = || uyuni_command(&env, &["restart", "--yes"]);
    let uninstall = || uyuni_command(&env, &["uninstall", "--yes"]);

    // A running server: upgrade, stop, restart and uninstall would write.
    hold();
    refused("upgrade", upgrade(&env, &[]));
    refused("stop", stop());
    refused("restart", restart());
    refused("uninstall", uninstall());
    free();
    takes("upgrade", upgrade(&env, &[]));
    takes("stop", stop());
    // A stopped server: start would write.
    hold();
    refused("start", uyuni_command(&env, &["start"]));
    free();
    takes("start", uyuni_command(&env, &["start"]));
    takes("restart", restart());
    takes("uninstall", uninstall());
    // An emptied namespace: install would write.
    hold();
    refused("install", install(&env, &[]));
    free();
    takes("install", install(&env, &[]));
}

/// `kubectl uyuni --kubeconfig K -n uyuni ARGS…` as a command.
fn uyuni_command(env: &Env, args: &[&str]) -> Command {
    let mut c = env.kubectl();
    c.arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["-n", NS])
        .args(args);
    c
}

/// Two different commands at once (issue 37): while an upgrade runs (its Jobs made to last), a
/// stop is refused naming the upgrade that holds the namespace's lease, writing nothing; the
/// upgrade completes, and the same stop then goes through.
#[test]
fn e2e_lease_a_stop_during_an_upgrade_is_refused_naming_the_upgrade() {
    use crate::e2e_faults::{env as quick_env, installed_2025_10, upgrade};
    use uyuni_testdata::Faults;

    let env = quick_env(Faults::default());
    installed_2025_10(&env);
    let mut scenario = env.sim.scenario();
    for job in scenario.jobs.values_mut() {
        job.duration_ms = 1_000;
    }
    env.sim.set_scenario(scenario);
    let created = env.sim.job_created_channel("*");
    let running = upgrade(&env, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs");
    created
        .recv_timeout(Duration::from_secs(120))
        .expect("the upgrade starts a Job");
    let holder = lease(&env).expect("the upgrade holds the lease");
    assert_eq!(holder_pid(&holder), Some(running.id()));
    assert!(
        holder["metadata"]["annotations"]["kubectl-uyuni.io/command"]
            .as_str()
            .is_some_and(|c| c.contains("upgrade --tag 2026.04")),
        "{holder:#?}"
    );
    let stop = || {
        env.kubectl()
            .arg("uyuni")
            .arg("--kubeconfig")
            .arg(env.kubeconfig())
            .args(["-n", NS, "stop", "--yes"])
            .output()
            .expect("kubectl runs")
    };
    let refused = stop();
    let (_, stderr) = text(&refused);
    assert!(!refused.status.success(), "{stderr}");
    for part in [
        &format!("another run is writing to namespace {NS}"),
        "upgrade --tag 2026.04",
        &format!("(process {}), since ", running.id()),
        "Nothing was written",
    ] {
        assert!(stderr.contains(part), "{part:?} in:\n{stderr}");
    }
    // The upgrade writes meanwhile: what a stop writes first is its record and its replica
    // counts, and neither is there.
    let stop_writes: Vec<String> = env
        .sim
        .objects("v1", "ConfigMap", Some(NS))
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str())
        .filter(|n| n.ends_with("-stop") || *n == "uyuni-replicas")
        .map(str::to_owned)
        .collect();
    assert!(
        stop_writes.is_empty(),
        "the refused stop wrote {stop_writes:?}"
    );
    let out = running.wait_with_output().expect("the upgrade ends");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let stopped = stop();
    let (stdout, stderr) = text(&stopped);
    assert!(
        stopped.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(lease(&env).is_none(), "released at the end of the stop");
}
