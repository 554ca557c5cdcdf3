//! Golden plans and previews for fixtures: rewrite with `UPDATE_GOLDEN=1 cargo test`.

mod common;

use std::path::PathBuf;

use similar::TextDiff;
use uyuni_core::{Observed, plan, preview, render};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/golden")
}

/// Compares `actual` with the golden file, showing a unified diff on mismatch.
fn check_golden(name: &str, actual: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_dir()).expect("golden dir");
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if expected != actual {
        let diff = TextDiff::from_lines(&expected, actual)
            .unified_diff()
            .header(&format!("golden/{name}"), "actual")
            .to_string();
        panic!("{name} differs from the golden file (UPDATE_GOLDEN=1 rewrites it):\n{diff}");
    }
}

#[test]
fn plan_for_an_empty_cluster() {
    let params = common::params();
    let plan = plan(&params, &Observed::default()).expect("plan");
    let json = serde_json::to_string_pretty(&plan).expect("json");
    check_golden("plan-empty-cluster.json", &format!("{json}\n"));
}

#[test]
fn preview_for_an_empty_cluster() {
    let params = common::params();
    let observed = Observed::default();
    let preview = preview(&params, &observed).expect("preview");
    check_golden(
        "preview-empty-cluster.txt",
        &render::human_preview(&preview.steps, &observed, 3),
    );
}

#[test]
fn plan_after_a_finished_sync_does_nothing() {
    let params = common::params();
    let observed = common::after_sync(&params);
    let plan = plan(&params, &observed).expect("plan");
    assert!(plan.is_done(), "{:#?}", plan.next_step());
    let lines: String = plan
        .steps
        .iter()
        .map(|s| render::step_line(s) + "\n")
        .collect();
    check_golden("plan-after-sync.txt", &lines);
}
