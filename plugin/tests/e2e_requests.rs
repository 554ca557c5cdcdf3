//! What a full migration costs in round trips: the built plugin, through the real `kubectl`,
//! against the simulated cluster with zero-length Jobs. Counts are deterministic (times are
//! not, and no test here asserts one); the bound is issue 12's: a write per object, a log
//! stream per Job, one list and watch per kind observed (the pods' included), none per wait.

use crate::support;

use std::collections::BTreeMap;

use support::{Env, NS, ssh_flags, text};
use uyuni_testdata::{ErrorFault, FaultTarget, Faults, RequestRecord, SimConfig, Verb, scenarios};

/// `verb class → count`, and `verb resource → count` for the report.
fn counts(log: &[RequestRecord]) -> (BTreeMap<&'static str, usize>, BTreeMap<String, usize>) {
    let mut by_verb = BTreeMap::new();
    let mut by_resource = BTreeMap::new();
    for r in log {
        *by_verb.entry(r.verb_class()).or_insert(0) += 1;
        let key = format!(
            "{} {}",
            r.verb_class(),
            r.resource.as_deref().unwrap_or(&r.path)
        );
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
    // The margin is for what the timing of a wait changes (how often a Job's log is reopened).
    assert!(total <= 150, "{total} requests: {by_verb:?}");
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
