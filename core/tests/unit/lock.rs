use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use uyuni_core::kubectl::Kubectl;
use uyuni_core::lock::{self, Decision, LEASE_NAME, TakeOver, Taker};

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("time")
}

fn taker(pid: u32) -> Taker {
    Taker::new(
        "kubectl uyuni -n uyuni migrate uyuni.example.com --yes",
        "alice",
        "admin-1",
        pid,
        "20270115080000",
    )
}

/// The lease `holder` wrote at `written` and the server stored (a resourceVersion).
fn stored(holder: &Taker, written: Timestamp) -> Lease {
    let mut lease = lock::lease("uyuni", holder, written, 0);
    lease.metadata.resource_version = Some("42".into());
    lease
}

#[test]
fn a_namespace_without_a_lease_gets_one_held_by_this_run() {
    let me = taker(7);
    let Decision::Create(lease) = lock::decide(None, "uyuni", &me, at(0), false) else {
        panic!("a create");
    };
    assert_eq!(lease.metadata.name.as_deref(), Some(LEASE_NAME));
    assert_eq!(lease.metadata.namespace.as_deref(), Some("uyuni"));
    let labels = lease.metadata.labels.clone().expect("labels");
    assert_eq!(
        labels
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("kubectl-uyuni")
    );
    let spec = lease.spec.clone().expect("spec");
    assert_eq!(
        spec.holder_identity.as_deref(),
        Some("alice@admin-1/7/20270115080000")
    );
    assert_eq!(spec.lease_duration_seconds, Some(60));
    let holder = lock::holder(&lease).expect("held");
    assert_eq!(holder.command.as_deref(), Some(me.command.as_str()));
    assert_eq!(holder.user.as_deref(), Some("alice"));
    assert_eq!(holder.host.as_deref(), Some("admin-1"));
    assert_eq!(holder.pid, Some(7));
    assert_eq!(holder.since, Some(at(0)));
}

#[test]
fn a_lease_held_by_a_live_run_is_refused_until_it_runs_out() {
    let other = taker(1);
    let found = stored(&other, at(0));
    // 60 s of duration, plus a second for the precision of the server's clock as read.
    for now in [at(0), at(30), at(60)] {
        match lock::decide(Some(&found), "uyuni", &taker(2), now, false) {
            Decision::Refuse(holder) => assert_eq!(holder.identity, other.identity),
            d => panic!("refused at {now}: {d:?}"),
        }
    }
    match lock::decide(Some(&found), "uyuni", &taker(2), at(61), false) {
        Decision::Take {
            lease,
            from: Some(TakeOver::Expired(h)),
        } => {
            assert_eq!(h.identity, other.identity);
            assert_eq!(
                lease.metadata.resource_version.as_deref(),
                Some("42"),
                "the update is conditional on the version read"
            );
            let spec = lease.spec.expect("spec");
            assert_eq!(spec.holder_identity, Some(taker(2).identity));
            assert_eq!(spec.lease_transitions, Some(1));
        }
        d => panic!("taken over once run out: {d:?}"),
    }
}

#[test]
fn a_renewal_moves_the_end_of_the_lease() {
    let other = taker(1);
    let renewed = lock::renewed(&stored(&other, at(0)), at(50));
    assert_eq!(renewed.metadata.resource_version.as_deref(), Some("42"));
    assert!(matches!(
        lock::decide(Some(&renewed), "uyuni", &taker(2), at(100), false),
        Decision::Refuse(_)
    ));
    assert_eq!(lock::expires(&renewed), Some(at(111)));
}

#[test]
fn force_takes_a_live_lease_and_says_from_whom() {
    let other = taker(1);
    let found = stored(&other, at(0));
    let Decision::Take {
        from: Some(from @ TakeOver::Forced(_)),
        ..
    } = lock::decide(Some(&found), "uyuni", &taker(2), at(10), true)
    else {
        panic!("forced");
    };
    let warning = lock::take_over_warning(&from, "uyuni", at(10));
    assert!(
        warning.contains("--force-unlock")
            && warning.contains(&other.command)
            && warning.contains("alice on host admin-1 (process 1)")
            && warning.contains("two data copies into the same volumes"),
        "{warning}"
    );
}

#[test]
fn a_released_lease_or_our_own_is_taken_without_a_take_over() {
    let me = taker(2);
    let mut released = stored(&taker(1), at(0));
    if let Some(spec) = released.spec.as_mut() {
        spec.holder_identity = None;
    }
    assert!(matches!(
        lock::decide(Some(&released), "uyuni", &me, at(1), false),
        Decision::Take { from: None, .. }
    ));
    let ours = stored(&me, at(0));
    match lock::decide(Some(&ours), "uyuni", &me, at(1), false) {
        Decision::Take { from: None, lease } => {
            assert_eq!(lease.spec.expect("spec").lease_transitions, Some(0))
        }
        d => panic!("{d:?}"),
    }
}

#[test]
fn a_lease_without_times_counts_as_run_out() {
    let mut odd = stored(&taker(1), at(0));
    if let Some(spec) = odd.spec.as_mut() {
        spec.renew_time = None;
        spec.acquire_time = None;
    }
    assert!(!lock::held_at(&odd, at(0)));
}

#[test]
fn the_refusal_names_the_holder_and_both_ways_on() {
    let other = taker(1).with_duration(30);
    let found = stored(&other, at(0));
    let Decision::Refuse(holder) = lock::decide(Some(&found), "uyuni", &taker(2), at(20), false)
    else {
        panic!("refused");
    };
    let k = Kubectl {
        kubeconfig: None,
        context: Some("prod".into()),
        migrate_flags: Vec::new(),
        ..Default::default()
    };
    let repeat = k.migrate(Some("uyuni"), "uyuni.example.com", false);
    let text = lock::refusal(&holder, "uyuni", at(20), &k, &repeat);
    for part in [
        "another run is writing to namespace uyuni",
        "`kubectl uyuni -n uyuni migrate uyuni.example.com --yes` run by alice on host admin-1 (process 1)",
        &format!("since {} (20 s ago)", at(0)),
        &format!(
            "runs out at {} (in 11 s)",
            at(0) + SignedDuration::from_secs(31)
        ),
        "every 10 s",
        "Nothing was written",
        "`kubectl --context prod -n uyuni get lease kubectl-uyuni -o yaml`",
        "`kubectl uyuni --context prod -n uyuni migrate uyuni.example.com --force-unlock`",
    ] {
        assert!(text.contains(part), "{part:?} in {text}");
    }
}

#[test]
fn holding_the_lease_needs_its_four_verbs() {
    let needs = lock::needs("uyuni");
    let verbs: Vec<&str> = needs.iter().map(|a| a.verb.as_str()).collect();
    assert_eq!(verbs, ["get", "create", "update", "delete"]);
    assert!(needs.iter().all(|a| a.group == "coordination.k8s.io"
        && a.resource == "leases"
        && a.namespace.as_deref() == Some("uyuni")));
}

/// `status` tells a record's run that still runs from one that is gone by the lease: held, and
/// by that run (its identity ends with the run id), until it runs out.
#[test]
fn a_run_holds_the_lease_while_it_is_live_and_only_its_own() {
    let me = taker(7);
    let lease = stored(&me, at(0));
    assert!(lock::held_by_run(Some(&lease), "20270115080000", at(10)));
    // Another run's id, a run id that only ends the same, or no lease: not held by it.
    assert!(!lock::held_by_run(Some(&lease), "20270115090000", at(10)));
    assert!(!lock::held_by_run(Some(&lease), "15080000", at(10)));
    assert!(!lock::held_by_run(None, "20270115080000", at(10)));
    // Run out (60 s, not renewed): the run is gone.
    assert!(!lock::held_by_run(Some(&lease), "20270115080000", at(61)));
}
