use uyuni_testdata::{JobOutcome, JobScript, Scenario, SideEffect, Verb, scenarios};

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
    let failing = s.in_namespace("uyuni-failing");
    assert_eq!(failing.jobs["db-fixup"].outcome, JobOutcome::Fail);
    assert!(!failing.jobs.contains_key("data-sync"));
}

/// A namespace's entry replaces the jobs, deployments and timing for the pods there; every other
/// namespace plays the scenario itself.
#[test]
fn a_namespace_plays_its_own_scenario_and_the_others_the_whole() {
    let mut whole = scenarios::migration();
    let mut failing = Scenario::default();
    failing
        .jobs
        .insert("db-fixup".into(), JobScript::fail(2, &["failed"]));
    failing.timing.pod_start_ms = 7;
    whole.namespaces.insert("uyuni-failing".into(), failing);

    let there = whole.in_namespace("uyuni-failing");
    let script = there
        .job_script("db-fixup", 0)
        .expect("the namespace's step");
    assert_eq!((script.outcome, script.exit_code), (JobOutcome::Fail, 2));
    assert!(there.job_script("data-sync", 0).is_none());
    assert_eq!(there.timing.pod_start_ms, 7);

    let elsewhere = whole.in_namespace("uyuni");
    assert_eq!(
        elsewhere.job_script("db-fixup", 0).map(|s| s.outcome),
        Some(JobOutcome::Succeed)
    );
    assert!(elsewhere.job_script("data-sync", 0).is_some());
    assert_eq!(elsewhere.timing, whole.timing);

    // And it survives the file the node agent reads.
    let text = serde_json::to_string(&whole).expect("serializable");
    assert_eq!(Scenario::parse(&text).expect("parses"), whole);
}

#[test]
fn json_round_trip() {
    let s = scenarios::migration();
    let text = serde_json::to_string(&s).expect("serializable");
    assert_eq!(Scenario::parse(&text).expect("parses"), s);
    assert!(Scenario::parse("jobs: [1]").is_err());
}

/// `edit_job_data` edits what the step's Job writes into Secrets, and nothing for a step the
/// scenario does not have.
#[test]
fn edit_job_data_edits_the_steps_secret_data() {
    let mut s = scenarios::migration();
    let before = s.clone();
    s.edit_job_data("no-such-step", |data| {
        data.insert("never".into(), "x".into());
    });
    assert_eq!(s, before);
    s.edit_job_data("data-sync", |data| {
        data.insert("pg_version".into(), "14".into());
        data.remove("ca.key");
    });
    let effects = &s.jobs["data-sync"].side_effects;
    assert!(!effects.is_empty());
    for effect in effects {
        let SideEffect::PatchSecret(p) = effect;
        assert_eq!(p.string_data["pg_version"], "14");
        assert!(!p.string_data.contains_key("ca.key"));
    }
}

/// The server images' kind (`ca_copy`): today's in the migration scenario, for the server check
/// and every inspection of a server image alike; the older kind in its variant, nothing else
/// changed.
#[test]
fn server_images_report_their_kind_and_the_variant_reports_the_older_one() {
    let steps = [
        "image-check-server",
        "inspect-running-server",
        "inspect-server",
    ];
    let kind = |s: &Scenario, step: &str| {
        s.jobs[step]
            .termination_message
            .as_deref()
            .and_then(|m| m.lines().find_map(|l| l.strip_prefix("ca_copy=")))
            .map(str::to_owned)
    };
    let today = scenarios::migration();
    let older = scenarios::migration_with_server_images_not_copying_the_ca();
    for step in steps {
        assert_eq!(
            kind(&today, step).as_deref(),
            Some("salt-file-root"),
            "{step}"
        );
        assert_eq!(kind(&older, step).as_deref(), Some("none"), "{step}");
    }
    let mut same = older.clone();
    for step in steps {
        same.jobs.insert(step.to_owned(), today.jobs[step].clone());
    }
    assert_eq!(same, today);
}
