//! `stop` and `start`: every Deployment back at the count it had, the database stopped last
//! and started first, an interrupted stop never recording a 0 it caused itself.

use uyuni_core::catalogue::names;
use uyuni_core::observed::desired_replicas;
use uyuni_core::params::{InstallParams, ServerParams, ServerSpecArgs};
use uyuni_core::plan::PlanError;
use uyuni_core::plan::lifecycle::{self, Lifecycle, LifecycleParams};
use uyuni_core::{Action, Observed, preview, simulate};

use crate::common;

pub(crate) fn params(action: Lifecycle) -> LifecycleParams {
    LifecycleParams {
        server: ServerParams::from_args(
            common::NAMESPACE,
            true,
            &Default::default(),
            common::RUN_ID,
            "0.1.0",
            &ServerSpecArgs::default(),
        )
        .expect("valid"),
        action,
    }
}

/// An installed server with two hub replicas and TFTP.
pub(crate) fn installed() -> Observed {
    let mut args = crate::install::install_args();
    args.spec.hubxmlrpc_replicas = Some(2);
    let install = InstallParams::from_args(&args).expect("valid");
    preview(&install, &common::empty_cluster())
        .expect("plans")
        .end
}

fn replicas(o: &Observed) -> Vec<(String, i32)> {
    lifecycle::ORDER
        .iter()
        .filter_map(|n| Some(((*n).to_owned(), desired_replicas(o.deployment(n)?))))
        .collect()
}

fn scaled(p: &uyuni_core::Plan) -> Vec<(String, i32)> {
    p.steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::Scale { name, replicas, .. } => Some((name.clone(), *replicas)),
            _ => None,
        })
        .collect()
}

#[test]
fn lifecycle_stop_then_start_restores_every_replica_count() {
    let running = installed();
    let before = replicas(&running);
    assert!(before.contains(&("hub-xmlrpc".to_owned(), 2)), "{before:?}");

    let stop = params(Lifecycle::Stop);
    let plan = lifecycle::plan(&stop, &running).expect("plans");
    let order: Vec<String> = scaled(&plan).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        order.first().map(String::as_str),
        Some(names::SERVER_DEPLOYMENT)
    );
    assert_eq!(order.last().map(String::as_str), Some(names::DB_DEPLOYMENT));
    let stopped = preview(&stop, &running).expect("stops").end;
    assert!(
        replicas(&stopped).iter().all(|(_, n)| *n == 0),
        "{:?}",
        replicas(&stopped)
    );
    assert!(lifecycle::plan(&stop, &stopped).expect("plans").is_done());
    assert!(!lifecycle::serving(&stopped));

    let start = params(Lifecycle::Start);
    let plan = lifecycle::plan(&start, &stopped).expect("plans");
    assert_eq!(
        scaled(&plan).first().map(|(n, _)| n.as_str()),
        Some(names::DB_DEPLOYMENT),
        "the database starts first"
    );
    let started = preview(&start, &stopped).expect("starts").end;
    assert_eq!(replicas(&started), before);
    assert!(lifecycle::plan(&start, &started).expect("plans").is_done());
}

#[test]
fn lifecycle_an_interrupted_stop_keeps_the_counts_it_recorded() {
    let running = installed();
    let stop = params(Lifecycle::Stop);
    // The record and the server's stop ran, then the run was interrupted.
    let mut state = running.clone();
    let plan = lifecycle::plan(&stop, &state).expect("plans");
    for step in plan.steps.iter().take(2) {
        state = simulate(&state, common::NAMESPACE, step);
    }
    assert_eq!(
        desired_replicas(state.deployment(names::SERVER_DEPLOYMENT).expect("there")),
        0
    );
    let stopped = preview(&stop, &state).expect("stops").end;
    let recorded = lifecycle::recorded(&stopped);
    assert_eq!(
        recorded.get(names::SERVER_DEPLOYMENT),
        Some(&1),
        "{recorded:?}"
    );
    assert_eq!(
        recorded.get(names::HUB_DEPLOYMENT),
        Some(&2),
        "{recorded:?}"
    );
    let started = preview(&params(Lifecycle::Start), &stopped)
        .expect("starts")
        .end;
    assert_eq!(replicas(&started), replicas(&running));
}

#[test]
fn lifecycle_without_a_server_is_refused() {
    let refused =
        lifecycle::plan(&params(Lifecycle::Start), &common::empty_cluster()).expect_err("refused");
    assert!(matches!(refused, PlanError::NoServer { .. }), "{refused:?}");
    let text = refused.to_string();
    assert!(
        text.contains("`kubectl uyuni -n ") && text.contains(" install FQDN`"),
        "{text}"
    );
}

#[test]
fn lifecycle_restart_rolls_the_server_out_again_and_leaves_the_database() {
    let running = installed();
    let restart = params(Lifecycle::Restart);
    let plan = lifecycle::plan(&restart, &running).expect("plans");
    let restarted: Vec<String> = plan
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::Scale {
                name,
                restarted_at: Some(at),
                ..
            } => {
                assert_eq!(at, common::RUN_ID);
                Some(name.clone())
            }
            _ => None,
        })
        .collect();
    assert!(
        restarted.contains(&names::SERVER_DEPLOYMENT.to_owned()),
        "{restarted:?}"
    );
    assert!(
        !restarted.contains(&names::DB_DEPLOYMENT.to_owned()),
        "{restarted:?}"
    );
    let after = preview(&restart, &running).expect("restarts").end;
    assert_eq!(replicas(&after), replicas(&running), "the counts stay");
    assert!(lifecycle::plan(&restart, &after).expect("plans").is_done());
}

/// A restart replaces running pods: on a server `stop` stopped it is refused, naming `start`,
/// before any write (as `upgrade` is).
#[test]
fn lifecycle_restart_of_a_stopped_server_is_refused_naming_start() {
    let stopped = preview(&params(Lifecycle::Stop), &installed())
        .expect("stops")
        .end;
    let refused = lifecycle::plan(&params(Lifecycle::Restart), &stopped).expect_err("refused");
    assert!(
        matches!(&refused, PlanError::RestartStopped { deployment, .. } if deployment == names::SERVER_DEPLOYMENT),
        "{refused:?}"
    );
    let text = refused.to_string();
    assert!(
        text.contains("is stopped")
            && text.contains(" start`")
            && text.contains("Nothing was written"),
        "{text}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// Whatever the components' counts, and wherever a stop is interrupted, stop then start
    /// brings every Deployment back to the count it had.
    #[test]
    fn lifecycle_stop_then_start_restores_any_counts(
        hub in 0u32..3,
        coco in 0u32..2,
        tftp in proptest::bool::ANY,
        cut in 0usize..8,
    ) {
        let mut args = crate::install::install_args();
        args.spec.hubxmlrpc_replicas = Some(hub);
        args.spec.coco_replicas = Some(coco);
        args.spec.tftp = Some(tftp);
        let install = InstallParams::from_args(&args).expect("valid");
        let running = preview(&install, &common::empty_cluster()).expect("plans").end;
        let stop = params(Lifecycle::Stop);
        // A first stop interrupted after `cut` steps, then a stop run to its end.
        let mut state = running.clone();
        for _ in 0..cut {
            let plan = lifecycle::plan(&stop, &state).expect("plans");
            let Some(step) = plan.next_step() else { break };
            state = simulate(&state, common::NAMESPACE, step);
        }
        let stopped = preview(&stop, &state).expect("stops").end;
        proptest::prop_assert!(replicas(&stopped).iter().all(|(_, n)| *n == 0));
        let started = preview(&params(Lifecycle::Start), &stopped).expect("starts").end;
        proptest::prop_assert_eq!(replicas(&started), replicas(&running));
    }
}

/// The step lists `stop --dry-run` and then `start --dry-run` print for an installed server
/// with two hub replicas: the samples in docs/lifecycle.md (the docs test compares them).
#[test]
fn lifecycle_stop_and_start_previews_are_unchanged() {
    let running = installed();
    let stop = preview(&params(Lifecycle::Stop), &running).expect("plans");
    let start = preview(&params(Lifecycle::Start), &stop.end).expect("plans");
    let mut golden = uyuni_testdata::golden::GoldenDir::new("preview-stop-start");
    golden.file("stop.txt", uyuni_core::render::steps_text(&stop.steps));
    golden.file("start.txt", uyuni_core::render::steps_text(&start.steps));
    golden.check();
}
