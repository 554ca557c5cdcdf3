use uyuni_testdata::{Scenario, SideEffect, Verb, scenarios};

/// The example in the module documentation parses, field for field.
#[test]
fn documented_example_parses() {
    let doc = include_str!("../../src/scenario.rs");
    let yaml: String = doc
        .lines()
        .skip_while(|l| !l.starts_with("//! ```yaml"))
        .skip(1)
        .take_while(|l| !l.starts_with("//! ```"))
        .map(|l| {
            l.strip_prefix("//! ")
                .or_else(|| l.strip_prefix("//!"))
                .unwrap_or(l)
        })
        .collect::<Vec<_>>()
        .join("\n");
    let s = Scenario::parse(&yaml).expect("the documented example parses");
    let sync = &s.jobs["data-sync"];
    assert_eq!(sync.duration_ms, 3000);
    assert_eq!(sync.waiting_reason, "ImagePullBackOff");
    let SideEffect::PatchSecret(p) = &sync.side_effects[0];
    assert_eq!(p.string_data["job"], "$JOB_NAME");
    assert_eq!(p.at_ms, Some(1500));
    assert_eq!(s.deployments["uyuni"].waiting_reason, "CrashLoopBackOff");
    assert_eq!(s.faults.errors[0].status, 503);
    assert_eq!(s.faults.errors[0].target.resource.as_deref(), Some("jobs"));
    assert_eq!(s.faults.drops[0].target.verb, Some(Verb::Patch));
    assert_eq!(
        s.faults.fail_once[0].target.name.as_deref(),
        Some("uyuni-migration-data")
    );
    assert_eq!(s.timing.namespace_delete_ms, 50);
}

#[test]
fn json_round_trip() {
    let s = scenarios::migration();
    let text = serde_json::to_string(&s).expect("serializable");
    assert_eq!(Scenario::parse(&text).expect("parses"), s);
    assert!(Scenario::parse("jobs: [1]").is_err());
}
