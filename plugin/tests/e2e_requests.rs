//! What a full migration costs in round trips: the built plugin, through the real `kubectl`,
//! against the simulated cluster with zero-length Jobs. Counts are deterministic (times are
//! not, and no test here asserts one); the bound is issue 12's: a write per object, a log
//! stream per Job, one list and watch per kind observed (the pods' included), none per wait.

use crate::support;

use std::collections::BTreeMap;

use support::{Env, NS, ssh_flags, text};
use uyuni_testdata::{ErrorFault, FaultTarget, Faults, RequestRecord, SimConfig, Verb, scenarios};

/// The operation record's requests (`uyuni_core::operation`): its ConfigMaps by name, and
/// the LIST of them by their selector.
fn is_record(r: &RequestRecord) -> bool {
    r.resource.as_deref() == Some("configmaps")
        && (r
            .name
            .as_deref()
            .is_some_and(|n| n.starts_with("uyuni-operation-"))
            || r.query.contains("component%3Doperation")
            || r.query.contains("component=operation"))
}

/// `verb class → count`, and `verb resource → count` for the report; the operation record's
/// requests count under `operation-records`, apart from the steps' ConfigMaps.
fn counts(log: &[RequestRecord]) -> (BTreeMap<&'static str, usize>, BTreeMap<String, usize>) {
    let mut by_verb = BTreeMap::new();
    let mut by_resource = BTreeMap::new();
    for r in log {
        *by_verb.entry(r.verb_class()).or_insert(0) += 1;
        let resource = if is_record(r) {
            "operation-records"
        } else {
            r.resource.as_deref().unwrap_or(&r.path)
        };
        let key = format!("{} {resource}", r.verb_class());
        *by_resource.entry(key).or_insert(0) += 1;
    }
    (by_verb, by_resource)
}

/// A full migration with zero-length Jobs under `faults`, with `args` added; the requests in
/// the migration's namespace (and cluster-wide) by verb and by resource.
fn migrate_counting(
    faults: Faults,
    args: &[&str],
) -> (BTreeMap<&'static str, usize>, BTreeMap<String, usize>) {
    let mut scenario = scenarios::migration();
    for job in scenario.jobs.values_mut() {
        job.duration_ms = 0;
    }
    scenario.faults = faults;
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    env.sim.clear_request_log();
    let mut flags = ssh_flags();
    flags.extend(args.iter().map(|a| (*a).to_owned()));
    let out = env.migrate(&flags);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let log: Vec<RequestRecord> = env
        .sim
        .request_log()
        .into_iter()
        .filter(|r| r.namespace.as_deref().is_none_or(|n| n == NS))
        .collect();
    counts(&log)
}

#[test]
fn a_full_migration_costs_a_request_per_write_and_job_and_a_list_per_kind() {
    let (by_verb, by_resource) = migrate_counting(Faults::default(), &[]);
    eprintln!("requests of a full migration, by verb: {by_verb:?}");
    for (k, n) in &by_resource {
        eprintln!("  {n:5} {k}");
    }
    let total: usize = by_verb.values().sum();
    eprintln!("total {total}");
    // Measured: 6,825 requests when every turn of the loop GET every object (80 turns), 1,467
    // with a LIST per kind per turn, about 500 with plain writes run in one pass, 236 with the
    // observation fed by watches, 182 with the permissions read from rules reviews, 135 to 143
    // with the waits reading the observer's watches. What is left beyond the 76 object writes,
    // the 5 reviews and one LIST and WATCH per kind observed is each Job's create and log
    // stream (a log reopened now and then), and the GET of what a Job produced.
    //
    // Each kind is listed and watched once in the whole run (its watch's initial list), not
    // once per turn nor per wait: the pods too (one watch, shared by the waits), and the
    // Issuer and Certificates waited for until Ready.
    for (key, n) in &by_resource {
        if let Some(resource) = key.strip_prefix("LIST ") {
            assert!(*n <= 1, "{resource} listed {n} times: {by_resource:?}");
        }
        if let Some(resource) = key.strip_prefix("WATCH ") {
            assert!(*n <= 1, "{resource} watched {n} times: {by_resource:?}");
        }
    }
    // The permissions are read from one SelfSubjectRulesReview per namespace; an access
    // review is asked only for what the rules do not show (the cluster-scoped ones).
    let rules = by_resource
        .get("CREATE/PATCH selfsubjectrulesreviews")
        .copied()
        .unwrap_or(0);
    let reviews = by_resource
        .get("CREATE/PATCH selfsubjectaccessreviews")
        .copied()
        .unwrap_or(0);
    assert!(
        rules >= 1 && reviews <= 5,
        "{rules} rules reviews, {reviews} access reviews"
    );
    // A write does not read its object first (the snapshot says whether it exists), and a
    // Deployment wait reads its Deployment from the watch: the GETs left are the Jobs' logs
    // (10 Jobs, a log reopened now and then) and the Secrets the Jobs produced.
    // (Measured 12 to 17 log requests: a zero-length Job's log often ends before its pod's
    // status says the container ended, and is read again then.)
    let gets = by_verb.get("GET").copied().unwrap_or(0);
    assert!(gets <= 26, "{gets} GETs: {by_resource:?}");
    let logs = by_resource.get("GET pods/log").copied().unwrap_or(0);
    assert!(logs <= 20, "{logs} log requests: {by_resource:?}");
    // The operation record: one LIST of the records, its creation, then one merge patch
    // before each step whose end the cluster decides (12 Jobs, 4 waits) and one at the end
    // (measured: 1 + 1 + 17). Not per poll, not per plain write.
    let record_writes = by_resource
        .get("CREATE/PATCH operation-records")
        .copied()
        .unwrap_or(0);
    assert!(
        (2..=20).contains(&record_writes),
        "{record_writes} writes of the record: {by_resource:?}"
    );
    // The margin is for what the timing of a wait changes (how often a Job's log is reopened).
    // Measured 165 with the record (146 without: its 19 requests above).
    assert!(total <= 170, "{total} requests: {by_verb:?}");
}

/// Watches that fall behind (every watch event held back 300 ms, as by a buffering proxy)
/// past the observer's barrier (made 20 ms): each observation after a step it could not
/// predict gives up waiting for the watches and reads the cluster directly, each wait watches
/// its Job or Deployment on its own; the migration still goes through.
#[test]
fn watches_that_fall_behind_are_read_around() {
    let (_, by_resource) = migrate_counting(
        Faults {
            watch_event_delay_ms: Some(300),
            ..Faults::default()
        },
        &["--watch-barrier-timeout-ms", "20"],
    );
    let n = |key: &str| by_resource.get(key).copied().unwrap_or(0);
    // Read directly: the Jobs by selector and the ConfigMaps (three names: one LIST) on more
    // turns than the first.
    assert!(n("LIST jobs") > 1, "{by_resource:?}");
    assert!(n("LIST configmaps") > 1, "{by_resource:?}");
    // The waits did not find their Job in the lagging store: they watched it by name.
    assert!(n("WATCH jobs") > 1, "{by_resource:?}");
}

/// A server that refuses to list a kind (RBAC allows `get` only): its watch gives up before its
/// first list, and that kind is read by name on every turn instead; the migration goes through.
#[test]
fn a_kind_whose_watch_is_refused_is_read_by_name_on_every_turn() {
    let (_, by_resource) = migrate_counting(
        Faults {
            errors: vec![ErrorFault {
                target: FaultTarget::new(Some(Verb::List), Some("serviceaccounts"), None),
                rate: 1.0,
                status: 403,
                retry_after_seconds: 1,
            }],
            ..Faults::default()
        },
        &[],
    );
    let n = |key: &str| by_resource.get(key).copied().unwrap_or(0);
    assert_eq!(n("WATCH serviceaccounts"), 0, "{by_resource:?}");
    // The first observation and every one after a Job or a wait: several GETs.
    assert!(n("GET serviceaccounts") >= 3, "{by_resource:?}");
    // The other kinds are still watched, and listed once.
    assert_eq!(n("LIST configmaps"), 1, "{by_resource:?}");
    assert_eq!(n("WATCH configmaps"), 1, "{by_resource:?}");
}

/// A full install with zero-length Jobs under `faults`: its requests in the namespace (and
/// cluster-wide), and what it printed.
fn install_counting(faults: Faults) -> (Vec<RequestRecord>, std::process::Output) {
    let mut scenario = scenarios::migration();
    for job in scenario.jobs.values_mut() {
        job.duration_ms = 0;
    }
    scenario.faults = faults;
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    env.sim.clear_request_log();
    let out = env
        .kubectl()
        .env("UYUNI_ADMIN_PASSWORD", "install-admin-Pa55")
        .arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["-n", NS, "install", "server.example.com"])
        .output()
        .expect("kubectl runs");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    let log: Vec<RequestRecord> = env
        .sim
        .request_log()
        .into_iter()
        .filter(|r| r.namespace.as_deref().is_none_or(|n| n == NS))
        .collect();
    (log, out)
}

/// An install costs what issue 34 allows: a write per object, a create and a log stream per
/// Job, one LIST and one WATCH per kind observed (the waits read the watches, at no request
/// of their own), the permission reviews; no GET of an object before its write.
#[test]
fn a_full_install_costs_a_request_per_write_and_job_and_a_list_per_kind() {
    let (log, out) = install_counting(Faults::default());
    let (by_verb, by_resource) = counts(&log);
    eprintln!("requests of a full install, by verb: {by_verb:?}");
    for (k, n) in &by_resource {
        eprintln!("  {n:5} {k}");
    }
    for (key, n) in &by_resource {
        if let Some(resource) = key.strip_prefix("LIST ") {
            assert!(*n <= 1, "{resource} listed {n} times: {by_resource:?}");
        }
        if let Some(resource) = key.strip_prefix("WATCH ") {
            assert!(*n <= 1, "{resource} watched {n} times: {by_resource:?}");
        }
    }
    // Every object the install writes, written once: 59 objects, 2 Jobs, the Lease (taken
    // and released) and the permission reviews; and the operation record, created, then
    // written before each Job and wait the run carried out and at the end (measured 1 + 8; a
    // loaded machine adds a wait for what was not ready yet, and with it a write).
    let (_, stderr) = text(&out);
    let boundaries = stderr
        .lines()
        .filter(|l| l.contains("step ") && (l.contains(": ▶ run Job") || l.contains(": … wait")))
        .count();
    assert!(boundaries >= 4, "{boundaries} Jobs and waits:\n{stderr}");
    eprintln!("{boundaries} Jobs and waits carried out");
    let record_writes = by_resource
        .get("CREATE/PATCH operation-records")
        .copied()
        .unwrap_or(0);
    assert!(
        (2..=2 + boundaries).contains(&record_writes),
        "{record_writes} writes of the record for {boundaries} Jobs and waits: {by_resource:?}"
    );
    let writes = by_verb.get("CREATE/PATCH").copied().unwrap_or(0) - record_writes;
    assert!(writes <= 59 + 2 + 3 + 6, "{writes} writes: {by_resource:?}");
    // The GETs are the two Jobs' logs (a zero-length Job's log is reopened now and then), the
    // recorded specification read before the parameters are made, the Lease before the first
    // write, and the version of each Certificate's Secret once it is Ready (the next
    // observation waits for its watch to show it): 3 Certificates.
    let logs = by_resource.get("GET pods/log").copied().unwrap_or(0);
    assert!(logs <= 6, "{logs} log requests: {by_resource:?}");
    let gets = by_verb.get("GET").copied().unwrap_or(0);
    assert!(gets - logs <= 1 + 1 + 3, "{gets} GETs: {by_resource:?}");
    let secret_gets = by_resource.get("GET secrets").copied().unwrap_or(0);
    assert!(
        secret_gets <= 3,
        "{secret_gets} Secret GETs: {by_resource:?}"
    );
    let total: usize = by_verb.values().sum();
    // With the record's 10 requests (its LIST and 9 writes).
    assert!(total <= 140, "{total} requests: {by_verb:?}");
}

/// The faults only a fake server injects, over an install: a Secret's write answered 500, the
/// server Deployment's 429 with Retry-After and a ConfigMap's 503, each once, and every watch
/// event held back: the install goes through, each refused write sent again and accepted.
#[test]
fn an_install_goes_through_transient_api_errors() {
    let once = |resource: &str, name: &str, status: u16| uyuni_testdata::FailOnce {
        target: FaultTarget::new(Some(Verb::Patch), Some(resource), Some(name)),
        status,
        retry_after_seconds: 1,
    };
    let (log, out) = install_counting(Faults {
        fail_once: vec![
            once("secrets", "admin-credentials", 500),
            once("deployments", "uyuni", 429),
            once("configmaps", "uyuni-config", 503),
        ],
        watch_event_delay_ms: Some(50),
        ..Faults::default()
    });
    let (stdout, _) = text(&out);
    assert!(stdout.contains("installed"), "{stdout}");
    for (resource, name, status) in [
        ("secrets", "admin-credentials", 500),
        ("deployments", "uyuni", 429),
        ("configmaps", "uyuni-config", 503),
    ] {
        let writes: Vec<u16> = log
            .iter()
            .filter(|r| {
                r.write
                    && r.resource.as_deref() == Some(resource)
                    && r.name.as_deref() == Some(name)
            })
            .map(|r| r.status)
            .collect();
        assert_eq!(
            writes.first(),
            Some(&status),
            "{resource}/{name}: {writes:?}"
        );
        assert!(
            writes.iter().skip(1).any(|s| (200..300).contains(s)),
            "{resource}/{name} never accepted: {writes:?}"
        );
    }
}
