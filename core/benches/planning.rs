//! Benchmark of the pure planner (issue 12): `plan` and the whole dry-run preview on observed
//! states that grow with old Job attempts (Jobs are never deleted automatically, so a cluster
//! that has seen many runs keeps them all): about 50, 500 and 5,000 objects.
//!
//! `cargo bench -p kubectl-uyuni-core --bench planning`. It prints figures; it asserts nothing.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use uyuni_core::{MigrateParams, Object, Observed};

/// `extra` failed attempts of the image checks added to `observed`.
fn with_old_attempts(mut observed: Observed, params: &MigrateParams, extra: usize) -> Observed {
    let checks = uyuni_core::builders::image_check::jobs(params);
    for i in 0..extra {
        let mut job = checks[i % checks.len()].clone();
        let name = job.metadata.name.clone().unwrap_or_default();
        job.metadata.name = Some(format!("{name}-old{i}"));
        observed.insert(Object::Job(common::finished(job, false)));
    }
    observed
}

/// Mean time of `f` over enough runs to take about half a second (at least 3).
fn mean(mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    let mut runs = 0u32;
    while runs < 3 || start.elapsed() < Duration::from_millis(500) {
        f();
        runs += 1;
    }
    start.elapsed() / runs
}

fn main() {
    let params = common::params();
    let base_migrated = common::after_migration(&params);
    let base_empty = common::empty_cluster();
    let migrated_objects = base_migrated.objects.len();
    println!(
        "planning benchmark (release build): plan of a finished migration, preview from an empty namespace"
    );
    println!(
        "{:>8} {:>12} {:>14} {:>12} {:>14}",
        "objects", "plan (ms)", "per object µs", "preview (ms)", "steps"
    );
    for target in [50usize, 500, 5000] {
        let extra = target.saturating_sub(migrated_objects);
        let migrated = with_old_attempts(base_migrated.clone(), &params, extra);
        let empty = with_old_attempts(base_empty.clone(), &params, target);
        let objects = migrated.objects.len();
        let plan = mean(|| {
            let p = uyuni_core::plan::plan(&params, &migrated).expect("plans");
            std::hint::black_box(p);
        });
        let mut steps = 0;
        let preview = mean(|| {
            let p = uyuni_core::preview(&params, &empty).expect("previews");
            steps = p.executed.len();
            std::hint::black_box(p);
        });
        println!(
            "{objects:>8} {:>12.3} {:>14.2} {:>12.2} {steps:>14}",
            plan.as_secs_f64() * 1e3,
            plan.as_secs_f64() * 1e6 / objects as f64,
            preview.as_secs_f64() * 1e3,
        );
    }
}
