//! Interruption at every step boundary and in the middle of every Job (issue 37): a
//! migration, an install and an upgrade through the real kubectl on uyuni-sim, the plugin
//! killed — by SIGKILL, and in a second test by SIGINT — then run again: every resumed run
//! ends as the uninterrupted one (the same objects, one successful Job per Job name, none
//! failed), and no claim that existed when it was killed was recreated (same UID).
//!
//! - At a boundary: right after each of its writes took effect (the simulated API server
//!   carries the write out and never answers it, `hold_after_write`).
//! - Mid-Job: while each Job of the run is running (that step's Jobs made to last, the plugin
//!   waiting on one); the next run waits on the same Job instead of starting another.
//!
//! A SIGINT run releases the namespace's lease: the next run goes on without
//! `--force-unlock`; after SIGKILL the lease stays until it runs out, and the next run takes
//! it over with `--force-unlock`, as the refusal says.
//!
//! `UYUNI_INTERRUPT_STRIDE=N` interrupts after every N-th write and in every N-th Job only
//! (default 1: all); `UYUNI_INTERRUPT_WORKERS=N` runs N cases at once (default 2).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use uyuni_testdata::Faults;

use crate::e2e_faults::{
    EndState, end_state, env, install, installed_2025_10, migrate, succeeded, upgrade,
};
use crate::support::{Env, NS, text};

fn stride() -> usize {
    std::env::var("UYUNI_INTERRUPT_STRIDE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(1)
}

/// How many cases run at once: `UYUNI_INTERRUPT_WORKERS`, else 2 (each case's runs use about
/// half a core: two keep a lane of the 2-core machines busy).
fn workers() -> usize {
    std::env::var("UYUNI_INTERRUPT_WORKERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(2)
}

fn claims(env: &Env) -> BTreeMap<String, String> {
    env.sim
        .objects("v1", "PersistentVolumeClaim", Some(NS))
        .into_iter()
        .map(|c| {
            (
                c["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                c["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn send(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name} {pid}");
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Signal {
    Kill,
    Int,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Signal::Kill => "KILL",
            Signal::Int => "INT",
        }
    }
}

/// Where the plugin is killed.
#[derive(Clone, Debug)]
enum At {
    /// Right after its `k`-th counted write took effect, the answer never sent.
    Write(u32),
    /// While the first Job of this step (its `kubectl-uyuni.io/step` annotation) runs.
    Job(String),
}

/// How long a Job of the step interrupted mid-Job runs: long enough for the plugin to be
/// killed while it waits on it, short enough for the next run to wait it out.
const JOB_MS: u64 = 1500;

/// A command under test: what runs before it (nothing, or the install an upgrade starts
/// from), and the command itself with extra flags.
struct Case {
    name: &'static str,
    setup: fn(&Env),
    command: fn(&Env, &[&str]) -> Command,
}

fn nothing(_: &Env) {}

/// A fresh simulated cluster where `case`'s setup has run; its writes are not counted.
fn prepared(case: &Case) -> Env {
    let env = env(Faults::default());
    (case.setup)(&env);
    env.sim.set_faults(Faults::default());
    env
}

/// One case: killed by `signal` at `at`; `None` when the run ended before it got there.
fn interrupted_then_resumed(
    case: &Case,
    at: &At,
    signal: Signal,
    expected: &EndState,
) -> Option<()> {
    let Case { name, command, .. } = *case;
    let env = prepared(case);
    let what = match at {
        At::Write(k) => format!("{name}, SIG{} after write {k}", signal.name()),
        At::Job(step) => format!("{name}, SIG{} during Job {step}", signal.name()),
    };
    let created = match at {
        At::Write(k) => {
            env.sim.set_faults(Faults {
                hold_after_write: Some(*k),
                ..Faults::default()
            });
            None
        }
        At::Job(step) => {
            let mut scenario = env.sim.scenario();
            let script = scenario.jobs.entry(step.clone()).or_default();
            script.duration_ms = JOB_MS;
            for later in &mut script.later_attempts {
                later.duration_ms = JOB_MS;
            }
            env.sim.set_scenario(scenario);
            Some(env.sim.job_created_channel(step))
        }
    };
    let reached = || match &created {
        None => env.sim.holding(),
        // The hook runs before the create is answered: give the plugin the answer and time
        // to wait on the Job (which runs JOB_MS).
        Some(rx) => rx.try_recv().is_ok_and(|_| {
            std::thread::sleep(Duration::from_millis(300));
            true
        }),
    };
    let mut child = command(&env, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while !reached() {
        if child.try_wait().expect("try_wait").is_some() {
            let out = child.wait_with_output().expect("wait");
            succeeded(&out, &format!("{what}: ended before it"));
            return None;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{what}: never came"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // kubectl execs its plugins: the child's pid is the plugin's.
    send(child.id(), signal.name());
    let out = child.wait_with_output().expect("wait");
    if signal == Signal::Int {
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(130), "{what}:\n{stderr}");
        assert!(
            stderr.contains("interrupted by SIGINT"),
            "{what}:\n{stderr}"
        );
    }
    let before = claims(&env);
    env.sim.set_faults(Faults::default());
    let resumed = command(
        &env,
        if signal == Signal::Kill {
            &["--force-unlock"]
        } else {
            &[]
        },
    )
    .output()
    .expect("kubectl runs");
    succeeded(&resumed, &format!("{what}: the next run"));
    let after = claims(&env);
    for (claim, uid) in &before {
        assert_eq!(
            after.get(claim),
            Some(uid),
            "{what}: claim {claim} was recreated or deleted"
        );
    }
    assert_eq!(
        &end_state(&env),
        expected,
        "{what}: the next run ended elsewhere"
    );
    Some(())
}

/// Every write boundary and every Job of `case`'s uninterrupted run, each interrupted by
/// `signal` in a fresh cluster.
fn every_interruption(case: &Case, signal: Signal) {
    let Case { name, command, .. } = *case;
    let clean = prepared(case);
    let jobs = clean.sim.job_created_channel("*");
    let out = command(&clean, &[]).output().expect("kubectl runs");
    succeeded(&out, &format!("{name} without interruption"));
    let writes = clean.sim.writes_counted();
    let expected = end_state(&clean);
    assert!(writes > 10, "{name}: only {writes} writes");
    let mut steps: Vec<String> = Vec::new();
    for job in jobs.try_iter() {
        if !steps.contains(&job.step) {
            steps.push(job.step);
        }
    }
    assert!(!steps.is_empty(), "{name}: no Job ran");
    let at: Vec<At> = (1..=writes)
        .step_by(stride())
        .map(At::Write)
        .chain(steps.iter().step_by(stride()).cloned().map(At::Job))
        .collect();
    // The cases are independent (a cluster each) and mostly wait on their runs: a few at
    // once keep the machine's cores busy instead of one case's waits stretching the module.
    let next = AtomicUsize::new(0);
    let cases = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..workers() {
            scope.spawn(|| {
                while let Some(at) = at.get(next.fetch_add(1, Ordering::Relaxed)) {
                    match (interrupted_then_resumed(case, at, signal, &expected), at) {
                        (Some(()), _) => {
                            cases.fetch_add(1, Ordering::Relaxed);
                        }
                        // The uninterrupted run created that Job: so must this one.
                        (None, At::Job(step)) => {
                            panic!("{name}: the run ended before Job {step} ran")
                        }
                        (None, At::Write(_)) => {}
                    }
                }
            });
        }
    });
    let cases = cases.into_inner();
    assert!(
        cases > steps.len(),
        "{name}: too few interruptions happened ({cases})"
    );
    eprintln!(
        "{name}: SIG{} in {cases} places of {} ({writes} write boundaries, {} Jobs)",
        signal.name(),
        at.len(),
        steps.len()
    );
}

const MIGRATE: Case = Case {
    name: "migrate",
    setup: nothing,
    command: migrate,
};

const INSTALL: Case = Case {
    name: "install",
    setup: nothing,
    command: install,
};

const UPGRADE: Case = Case {
    name: "upgrade",
    setup: installed_2025_10,
    command: upgrade,
};

#[test]
fn a_migration_killed_anywhere_ends_as_an_uninterrupted_one_when_run_again() {
    every_interruption(&MIGRATE, Signal::Kill);
}

#[test]
fn a_migration_interrupted_anywhere_ends_as_an_uninterrupted_one_when_run_again() {
    every_interruption(&MIGRATE, Signal::Int);
}

#[test]
fn an_install_killed_anywhere_ends_as_an_uninterrupted_one_when_run_again() {
    every_interruption(&INSTALL, Signal::Kill);
}

#[test]
fn an_install_interrupted_anywhere_ends_as_an_uninterrupted_one_when_run_again() {
    every_interruption(&INSTALL, Signal::Int);
}

#[test]
fn an_upgrade_killed_anywhere_ends_as_an_uninterrupted_one_when_run_again() {
    every_interruption(&UPGRADE, Signal::Kill);
}

#[test]
fn an_upgrade_interrupted_anywhere_ends_as_an_uninterrupted_one_when_run_again() {
    every_interruption(&UPGRADE, Signal::Int);
}
