//! Seeded API faults over whole runs (issue 37): full migrations and installs through the real
//! kubectl on the simulated cluster, a tenth of their API requests failing — 500, 503, 429 with
//! Retry-After, dropped connections — and every watch ended early, all complete, each to the
//! same objects as a run without faults, with exactly one successful Job per step and no Job
//! that failed.
//!
//! Upgrades (from an install made without faults) too, on half as many seeds.
//!
//! `UYUNI_FAULT_SEEDS` sets how many seeds each test runs (default 20).

use std::collections::BTreeMap;
use std::process::{Command, Output};

use uyuni_testdata::{DropFault, ErrorFault, FaultTarget, Faults, SimConfig, scenarios};

use crate::support::{Env, NS, SOURCE, ssh_flags, text};

pub(crate) const ADMIN_PASSWORD: &str = "install-admin-Pa55";

fn seeds() -> u64 {
    std::env::var("UYUNI_FAULT_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

/// A tenth of the requests fail: 3% each answered 500, 503 and 429 (Retry-After 1 s), 1%
/// dropped without an answer; every watch ends after three events — closed (even seeds) or with
/// a 410 Expired error event, after which the client lists again (odd seeds).
fn faulty(seed: u64) -> Faults {
    let error = |status, rate| ErrorFault {
        target: FaultTarget::default(),
        rate,
        status,
        retry_after_seconds: 1,
    };
    Faults {
        seed,
        errors: vec![error(500, 0.03), error(503, 0.03), error(429, 0.03)],
        drops: vec![DropFault {
            target: FaultTarget::default(),
            rate: 0.01,
        }],
        watch_close_after_events: seed.is_multiple_of(2).then_some(3),
        watch_expire_after_events: (!seed.is_multiple_of(2)).then_some(3),
        ..Faults::default()
    }
}

pub(crate) fn env(faults: Faults) -> Env {
    let mut scenario = scenarios::migration();
    for job in scenario.jobs.values_mut() {
        job.duration_ms = 0;
    }
    scenario.faults = faults;
    Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    })
}

/// The objects the tool wrote, by kind and name (a Job by its name without the run id), and
/// per Job name how many succeeded and how many failed.
pub(crate) type EndState = (Vec<String>, BTreeMap<String, (u32, u32)>);

pub(crate) fn end_state(env: &Env) -> EndState {
    let mut objects = Vec::new();
    let mut jobs: BTreeMap<String, (u32, u32)> = BTreeMap::new();
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
    ] {
        for o in env.sim.objects(api, kind, Some(NS)) {
            if o["metadata"]["labels"]["app.kubernetes.io/managed-by"] != "kubectl-uyuni" {
                continue;
            }
            // Each run's own record (an interrupted run leaves one more).
            if o["metadata"]["labels"]["app.kubernetes.io/component"] == "operation" {
                continue;
            }
            let name = o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if kind == "Job" {
                // The name without its run id: a step can run several kinds of Job
                // (data-sync: the copy while the source serves, then the final one).
                let step = name
                    .rsplit_once('-')
                    .filter(|(_, id)| id.len() == 14 && id.bytes().all(|b| b.is_ascii_digit()))
                    .map_or(name.clone(), |(base, _)| base.to_owned());
                let count = |field: &str| o["status"][field].as_u64().unwrap_or(0) as u32;
                let entry = jobs.entry(step.clone()).or_default();
                entry.0 += u32::from(count("succeeded") > 0);
                entry.1 += u32::from(count("failed") > 0);
                objects.push(format!("Job {step}"));
            } else {
                objects.push(format!("{kind} {name}"));
            }
        }
    }
    objects.sort();
    objects.dedup();
    (objects, jobs)
}

/// The retry schedule (and Retry-After) a tenth as long: the same tries in the same order.
pub(crate) const SHORTER: [&str; 2] = ["--retry-delay-divisor", "10"];

/// The plugin through the real kubectl on the simulated cluster of `env`.
fn base(env: &Env) -> Command {
    let mut c = env.kubectl();
    c.arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["-n", NS]);
    c
}

pub(crate) fn migrate(env: &Env, extra: &[&str]) -> Command {
    let mut c = base(env);
    c.args(["migrate", SOURCE, "--yes"])
        .args(ssh_flags())
        .args(SHORTER)
        .args(extra);
    c
}

pub(crate) fn install(env: &Env, extra: &[&str]) -> Command {
    let mut c = base(env);
    c.env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .args(["install", "server.example.com"])
        .args(SHORTER)
        .args(extra);
    c
}

pub(crate) fn succeeded(out: &Output, what: &str) {
    let (stdout, stderr) = text(out);
    assert!(
        out.status.success(),
        "{what}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

pub(crate) fn installed_2025_10(env: &Env) {
    let out = install(env, &["--tag", "2025.10"])
        .output()
        .expect("kubectl runs");
    succeeded(&out, "install --tag 2025.10");
}

pub(crate) fn upgrade(env: &Env, extra: &[&str]) -> Command {
    let mut c = base(env);
    c.args(["upgrade", "--tag", "2026.04", "--yes"])
        .args(SHORTER)
        .args(extra);
    c
}

/// `command` run to its end.
fn run(mut command: Command) -> Output {
    command.output().expect("kubectl runs")
}

/// Runs `command` without faults, then once per seed with them; every faulty run completes to
/// the fault-free run's end state.
fn every_seed_ends_as_without_faults(name: &str, command: fn(&Env) -> Output) {
    with_setup_every_seed_ends_as_without_faults(name, |_| {}, command, seeds());
}

/// [`every_seed_ends_as_without_faults`] for `seeds` seeds, each run after `setup` (run
/// without faults).
fn with_setup_every_seed_ends_as_without_faults(
    name: &str,
    setup: fn(&Env),
    command: fn(&Env) -> Output,
    seeds: u64,
) {
    let clean = env(Faults::default());
    setup(&clean);
    succeeded(&command(&clean), &format!("{name} without faults"));
    let (objects, jobs) = end_state(&clean);
    assert!(
        jobs.values().all(|&(ok, failed)| ok == 1 && failed == 0),
        "{jobs:?}"
    );
    let mut injected = 0;
    for seed in 0..seeds {
        let faulty_env = env(Faults::default());
        setup(&faulty_env);
        faulty_env.sim.set_faults(faulty(seed));
        let out = command(&faulty_env);
        succeeded(&out, &format!("{name} with faults, seed {seed}"));
        let (faulty_objects, faulty_jobs) = end_state(&faulty_env);
        assert_eq!(faulty_objects, objects, "{name}, seed {seed}");
        assert_eq!(
            faulty_jobs, jobs,
            "{name}, seed {seed}: one successful Job per step"
        );
        injected += faulty_env
            .sim
            .request_log()
            .iter()
            .filter(|r| matches!(r.status, 0 | 429 | 500 | 503))
            .count();
    }
    assert!(
        seeds == 0 || injected > 0,
        "no fault reached the runs: the test proves nothing"
    );
}

#[test]
fn seeded_faults_over_whole_migrations_all_complete_as_without_faults() {
    every_seed_ends_as_without_faults("migrate", |env| run(migrate(env, &[])));
}

#[test]
fn seeded_faults_over_whole_installs_all_complete_as_without_faults() {
    every_seed_ends_as_without_faults("install", |env| run(install(env, &[])));
}

/// Half the seeds: an upgrade is a third of a migration's writes, and each run installs first.
#[test]
fn seeded_faults_over_whole_upgrades_all_complete_as_without_faults() {
    with_setup_every_seed_ends_as_without_faults(
        "upgrade",
        installed_2025_10,
        |env| run(upgrade(env, &[])),
        seeds().div_ceil(2),
    );
}
