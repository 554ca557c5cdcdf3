//! One rule for step numbers in every command's dry run and run: the steps a run carries out
//! count from 1 to N in the order it carries them out, the steps left as they are unnumbered;
//! the run's progress ([`Numbering`]) gives each step the number its dry run's list shows, and
//! a finished run ends at N/N even when the cluster finished a step by itself.

use uyuni_core::plan::Planner;
use uyuni_core::plan::lifecycle::{Lifecycle, LifecycleParams};
use uyuni_core::preview::{Numbering, Preview, steps_with_deletions};
use uyuni_core::render::{step_numbers, steps_text};
use uyuni_core::{Action, Observed, Op, Step, preview};

use crate::common;

/// The steps a list numbers, with their numbers.
fn numbered(steps: &[Step]) -> Vec<(usize, String)> {
    steps
        .iter()
        .zip(step_numbers(steps))
        .filter_map(|(s, n)| n.map(|n| (n, s.id.clone())))
        .collect()
}

/// What the run's progress numbers when every foreseen step comes in its turn.
fn run_numbers(preview: &Preview) -> Vec<(usize, usize, String)> {
    let mut numbering = Numbering::new(preview.executed.clone());
    let mut out = Vec::new();
    for (i, step) in preview.executed.iter().enumerate() {
        let n = numbering.step(step, preview.executed.len() - i);
        assert!(n.done_before.is_empty(), "{:?}", n.done_before);
        out.push((n.position, n.total, step.id.clone()));
    }
    assert_eq!(numbering.finish().0, Vec::new());
    out
}

/// The list a dry run prints numbers exactly the steps its run carries out, in that order, and
/// the run shows each under the same number, the last as N/N.
fn same_numbers(name: &str, listed: &[Step], preview: &Preview) {
    let list = numbered(listed);
    let run = run_numbers(preview);
    let n = preview.executed.len();
    assert_eq!(list.len(), n, "{name}: {}", steps_text(listed));
    for ((k, id), (position, total, run_id)) in list.iter().zip(&run) {
        assert_eq!((k, id), (position, run_id), "{name}");
        assert_eq!(*total, n, "{name}");
    }
    if n > 0 {
        assert_eq!(run.last().map(|r| (r.0, r.1)), Some((n, n)), "{name}");
        let text = steps_text(listed);
        assert!(text.contains(&format!("  1/{n} ")), "{name}: {text}");
        assert!(text.contains(&format!("{n}/{n} ")), "{name}: {text}");
    }
}

fn lifecycle(action: Lifecycle) -> LifecycleParams {
    LifecycleParams {
        server: uyuni_core::params::ServerParams::from_args(
            common::NAMESPACE,
            true,
            &Default::default(),
            common::RUN_ID,
            "0.1.0",
            &Default::default(),
        )
        .expect("valid"),
        action,
    }
}

fn check<P: Planner>(name: &str, params: &P, observed: &Observed) -> Preview {
    let p = preview(params, observed).expect("plans");
    same_numbers(name, &p.steps, &p);
    p
}

#[test]
fn step_numbers_of_the_dry_run_are_the_runs_for_every_command() {
    let migrate = common::params();
    check("migrate, empty", &migrate, &common::empty_cluster());
    let after_sync = check(
        "migrate, after sync",
        &migrate,
        &common::after_sync(&migrate),
    );
    // Unchanged steps come first there: numbering every line would put the first Job at 41.
    assert_eq!(
        numbered(&after_sync.steps).first().map(|(k, _)| *k),
        Some(1)
    );
    assert!(after_sync.steps[0].action == Action::None);
    let done = check(
        "migrate, done",
        &migrate,
        &common::after_migration(&migrate),
    );
    assert!(numbered(&done.steps).is_empty());
    let install = crate::install::install_params();
    let installed = check("install", &install, &common::empty_cluster()).end;
    check("stop", &lifecycle(Lifecycle::Stop), &installed);
    check("restart", &lifecycle(Lifecycle::Restart), &installed);
    // An upgrade's dry run (the inspections assumed to find no PostgreSQL major change).
    check(
        "upgrade",
        &crate::upgrade::upgrade_to(crate::upgrade::TO),
        &crate::upgrade::installed(),
    );
    let uninstall = crate::uninstall::uninstall_params(false, false);
    let p = preview(&uninstall, &installed).expect("plans");
    same_numbers("uninstall", &steps_with_deletions(&p), &p);
}

fn step(id: &str, op: Op) -> Step {
    Step {
        id: id.into(),
        description: format!("{id} description"),
        op,
        target: uyuni_core::ObjectRef::new(uyuni_core::Kind::Deployment, id),
        reason: String::new(),
        // The numbering reads ids only.
        action: Action::None,
    }
}

/// A wait the cluster finished by itself keeps its number (reported as done), a step the
/// preview did not foresee takes the next one and raises the total, and a finished run ends at
/// N/N with the waits it never needed.
#[test]
fn the_runs_numbers_skip_no_step_and_end_at_the_total() {
    let foreseen: Vec<Step> = ["a", "wait-b", "c", "wait-d", "wait-e"]
        .iter()
        .map(|id| {
            step(
                id,
                if id.starts_with("wait") {
                    Op::Wait
                } else {
                    Op::Create
                },
            )
        })
        .collect();
    let mut numbering = Numbering::new(foreseen.clone());
    let a = numbering.step(&foreseen[0], 5);
    assert_eq!((a.position, a.total), (1, 5));
    // wait-b was ready before its turn: c is still step 3, and wait-b is reported as step 2.
    let c = numbering.step(&foreseen[2], 3);
    assert_eq!((c.position, c.total), (3, 5));
    assert_eq!(
        c.done_before
            .iter()
            .map(|(k, s)| (*k, s.id.as_str()))
            .collect::<Vec<_>>(),
        vec![(2, "wait-b")]
    );
    // A retried step nobody foresaw: 4 of 6 now, and the rest move up by one.
    let retry = numbering.step(&step("c-again", Op::Create), 3);
    assert_eq!((retry.position, retry.total), (4, 6));
    let d = numbering.step(&foreseen[3], 2);
    assert_eq!((d.position, d.total), (5, 6));
    assert!(d.done_before.is_empty());
    let (left, total) = numbering.finish();
    assert_eq!(total, 6);
    assert_eq!(
        left.iter()
            .map(|(k, s)| (*k, s.id.as_str()))
            .collect::<Vec<_>>(),
        vec![(6, "wait-e")]
    );
}
