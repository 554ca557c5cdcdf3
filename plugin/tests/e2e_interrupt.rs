//! Interruption at every step boundary (issue 37): a migration and an install through the
//! real kubectl on uyuni-sim, the plugin killed right after each of its writes took effect
//! (the simulated API server carries the write out and never answers it, `hold_after_write`)
//! — by SIGKILL or SIGINT in turn — then run again: every resumed run ends as the
//! uninterrupted one (the same objects, one successful Job per Job name, none failed), and no
//! claim that existed when it was killed was recreated (same UID).
//!
//! A SIGINT run releases the namespace's lease: the next run goes on without
//! `--force-unlock`; after SIGKILL the lease stays until it runs out, and the next run takes
//! it over with `--force-unlock`, as the refusal says.
//!
//! `UYUNI_INTERRUPT_STRIDE=N` interrupts after every N-th write only (default 1: all).

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
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

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{name} {pid}");
}

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

/// One case: killed after write `k`; `None` when the run wrote less than that.
fn interrupted_then_resumed(case: &Case, k: u32, expected: &EndState) -> Option<()> {
    let Case { name, command, .. } = *case;
    let env = prepared(case);
    env.sim.set_faults(Faults {
        hold_after_write: Some(k),
        ..Faults::default()
    });
    let mut child = command(&env, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while !env.sim.holding() {
        if child.try_wait().expect("try_wait").is_some() {
            let out = child.wait_with_output().expect("wait");
            succeeded(&out, &format!("{name}: ended before write {k}"));
            return None;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "{name}: write {k} never came"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = k % 2 == 1;
    // kubectl execs its plugins: the child's pid is the plugin's.
    signal(child.id(), if kill { "KILL" } else { "INT" });
    let out = child.wait_with_output().expect("wait");
    if !kill {
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(130), "{name}, write {k}:\n{stderr}");
        assert!(
            stderr.contains("interrupted by SIGINT"),
            "{name}, write {k}:\n{stderr}"
        );
    }
    let before = claims(&env);
    env.sim.set_faults(Faults::default());
    let resumed = command(&env, if kill { &["--force-unlock"] } else { &[] })
        .output()
        .expect("kubectl runs");
    succeeded(&resumed, &format!("{name}: the run after write {k}"));
    let after = claims(&env);
    for (claim, uid) in &before {
        assert_eq!(
            after.get(claim),
            Some(uid),
            "{name}, write {k}: claim {claim} was recreated or deleted"
        );
    }
    assert_eq!(
        &end_state(&env),
        expected,
        "{name}: the run resumed after write {k} ended elsewhere"
    );
    Some(())
}

fn every_boundary(case: &Case) {
    let Case { name, command, .. } = *case;
    let clean = prepared(case);
    let out = command(&clean, &[]).output().expect("kubectl runs");
    succeeded(&out, &format!("{name} without interruption"));
    let writes = clean.sim.writes_counted();
    let expected = end_state(&clean);
    assert!(writes > 10, "{name}: only {writes} writes");
    let mut cases = 0;
    for k in (1..=writes).step_by(stride()) {
        if interrupted_then_resumed(case, k, &expected).is_some() {
            cases += 1;
        }
    }
    assert!(cases > 0, "{name}: no interruption happened");
    eprintln!("{name}: {cases} interruptions of {writes} write boundaries");
}

#[test]
fn a_migration_killed_after_any_write_ends_as_an_uninterrupted_one_when_run_again() {
    every_boundary(&Case {
        name: "migrate",
        setup: nothing,
        command: migrate,
    });
}

#[test]
fn an_install_killed_after_any_write_ends_as_an_uninterrupted_one_when_run_again() {
    every_boundary(&Case {
        name: "install",
        setup: nothing,
        command: install,
    });
}

#[test]
fn an_upgrade_killed_after_any_write_ends_as_an_uninterrupted_one_when_run_again() {
    every_boundary(&Case {
        name: "upgrade",
        setup: installed_2025_10,
        command: upgrade,
    });
}
