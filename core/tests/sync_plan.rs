//! When the planner runs the data sync again, and when it must not.

use crate::common;

use uyuni_core::{Action, MigrateParams, Op, plan};

fn sync_step(params: &MigrateParams, observed: &uyuni_core::Observed) -> uyuni_core::Step {
    plan(params, observed)
        .expect("plan")
        .steps
        .into_iter()
        .find(|s| s.id == "data-sync")
        .expect("data-sync step")
}

#[test]
fn a_finished_final_sync_is_not_repeated_when_parameters_change() {
    let params = common::params();
    let observed = common::after_sync(&params);
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    args.spec.tag = Some("2026.11".into());
    args.run_id = "20261201120000".into();
    let changed = MigrateParams::from_args(&args).expect("valid");
    let step = sync_step(&changed, &observed);
    assert_eq!(step.op, Op::Done, "{step:?}");
    assert_eq!(step.action, Action::None);
}

#[test]
fn each_prepare_run_copies_again() {
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    args.prepare = true;
    let first = MigrateParams::from_args(&args).expect("valid");
    let observed = common::after_sync(&first);
    // The same run (resumed) has its copy; a later --prepare run copies again.
    args.run_id = "20261201120000".into();
    let later = MigrateParams::from_args(&args).expect("valid");
    assert_eq!(sync_step(&later, &observed).op, Op::RunJob);
}
