//! The operation record (`operation`): its fingerprint and content never hold a secret, its
//! kept logs stay within their bounds, its names sort and never collide, the newest ten are
//! kept, and what a failed run leaves says where and why.

use uyuni_core::operation::{
    self, Failure, LOG_TAIL_BYTES, LOGS_TOTAL_BYTES, Logs, Operation, Outcome, StepPhase,
    TRUNCATED_MARK,
};
use uyuni_core::secret::SecretString;
use uyuni_core::{Step, preview};

use crate::common;

fn migration_steps() -> Vec<Step> {
    preview::foreseen(&common::params(), &common::empty_cluster())
}

#[test]
fn the_fingerprint_changes_with_a_flag_but_never_holds_or_follows_a_secret() {
    let params = common::params();
    let fingerprint = operation::fingerprint(&params);
    assert!(fingerprint.starts_with("sha256:"), "{fingerprint}");

    // Another CA password and another SSH key: the same fingerprint (neither is in it).
    let mut other_secrets = uyuni_core::MigrateParams::from_args(&common::args_with_ssh(
        &common::private_key("another-key"),
    ))
    .expect("valid");
    other_secrets.ca_password = Some(SecretString::new("another CA password"));
    assert_eq!(operation::fingerprint(&other_secrets), fingerprint);

    // Another run of the same parameters: the same fingerprint.
    let mut again = params.clone();
    again.server.run_id = "20261204000000".to_owned();
    assert_eq!(operation::fingerprint(&again), fingerprint);

    // Another flag: another fingerprint.
    let mut other = params.clone();
    other.compress = !other.compress;
    assert_ne!(operation::fingerprint(&other), fingerprint);
}

#[test]
fn a_migrations_record_holds_no_secret() {
    let params = common::params();
    let steps = migration_steps();
    let mut record = Operation::new(
        "migrate",
        "1.0.0",
        common::RUN_ID,
        operation::fingerprint(&params),
        "2026-12-04T10:00:00Z",
        &steps,
    );
    for step in &steps {
        record.start_step(step, "2026-12-04T10:00:01Z", None);
        record.step_done("2026-12-04T10:00:02Z", None);
    }
    record.finish("2026-12-04T10:00:03Z", None);
    let config_map = operation::config_map(
        common::NAMESPACE,
        "uyuni-operation-x",
        &record,
        Default::default(),
    );
    let text = serde_json::to_string(&config_map).expect("serialises");
    let key = common::private_key("fixture-private-key");
    let body = common::key_body_line(&key);
    for secret in [body, common::CA_PASSWORD] {
        assert!(
            !text.contains(secret),
            "the record holds a secret: {secret}"
        );
    }
    assert!(text.contains("data-sync"), "{text}");
}

#[test]
fn a_record_reads_back_as_written() {
    let steps = migration_steps();
    let mut record = Operation::new("migrate", "1.0.0", "r", "sha256:0".into(), "t0", &steps);
    record.start_step(&steps[0], "t1", Some(("job-a".into(), 1)));
    let mut logs = Logs::default();
    logs.push("job-a", "one");
    logs.push("job-a", "two");
    let cm = operation::config_map("ns", "uyuni-operation-1-migrate", &record, logs.all());
    let stored = operation::read(&cm).expect("a record");
    assert_eq!(stored.operation, record);
    assert_eq!(stored.logs["job-a"], "one\ntwo\n");
    assert_eq!(
        operation::kept_log(&[stored], "job-a"),
        Some(("uyuni-operation-1-migrate", "one\ntwo\n"))
    );
    let labels = cm.metadata.labels.expect("labels");
    assert_eq!(labels["app.kubernetes.io/component"], "operation");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "kubectl-uyuni");
}

#[test]
fn a_failed_run_says_which_step_failed_and_why_and_leaves_the_rest_pending() {
    let steps = migration_steps();
    let mut record = Operation::new("migrate", "1.0.0", "r", "sha256:0".into(), "t0", &steps);
    record.start_step(&steps[0], "t1", None);
    record.step_done("t2", None);
    record.start_step(&steps[1], "t3", Some(("job-b".into(), 1)));
    record.finish(
        "t4",
        Some(Failure {
            error: "step x failed: Job job-b failed\nmore".into(),
            reason: Some("BackoffLimitExceeded".into()),
            summary: Some("rsync: connection refused".into()),
        }),
    );
    assert_eq!(record.outcome, Outcome::Failed);
    assert_eq!(
        record.error.as_deref(),
        Some("step x failed: Job job-b failed")
    );
    let failed = record.failed_step().expect("a failed step");
    assert_eq!(failed.id, steps[1].id);
    assert_eq!(failed.exit_reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(failed.summary.as_deref(), Some("rsync: connection refused"));
    assert_eq!(record.steps[0].phase, StepPhase::Done);
    assert!(
        record.steps[2..]
            .iter()
            .all(|s| s.phase == StepPhase::Pending)
    );

    // A run that succeeded: the foreseen steps it did not carry out were done already.
    let mut ok = Operation::new("migrate", "1.0.0", "r", "sha256:0".into(), "t0", &steps);
    ok.start_step(&steps[0], "t1", None);
    ok.step_done("t2", None);
    ok.finish("t3", None);
    assert_eq!(ok.outcome, Outcome::Succeeded);
    assert!(ok.steps[1..].iter().all(|s| s.phase == StepPhase::Skipped));
}

#[test]
fn each_kept_log_is_its_last_16_kib_and_all_of_them_stay_within_the_total() {
    let mut logs = Logs::default();
    let line = "x".repeat(99);
    for i in 0..2000 {
        logs.push("job-1", &format!("{i:05} {line}"));
    }
    let text = &logs.all()["log.job-1"];
    assert!(
        text.len() <= LOG_TAIL_BYTES + TRUNCATED_MARK.len() + 1,
        "{}",
        text.len()
    );
    assert!(text.starts_with(TRUNCATED_MARK), "{}", &text[..200]);
    assert!(text.ends_with(&format!("01999 {line}\n")));
    // A line longer than the whole tail keeps its end.
    logs.push("job-long", &"y".repeat(3 * LOG_TAIL_BYTES));
    assert!(logs.all()["log.job-long"].len() <= LOG_TAIL_BYTES + TRUNCATED_MARK.len() + 1);

    // Many Jobs: the oldest logs are dropped first, the newest kept whole.
    let mut many = Logs::default();
    for job in 0..40 {
        for i in 0..200 {
            many.push(&format!("job-{job:02}"), &format!("{i:05} {line}"));
        }
    }
    let all = many.all();
    let total: usize = all.values().map(String::len).sum();
    assert!(total <= LOGS_TOTAL_BYTES + 40 * 200, "{total}");
    assert!(
        all["log.job-00"].contains("dropped"),
        "{}",
        all["log.job-00"]
    );
    assert!(all["log.job-39"].ends_with(&format!("00199 {line}\n")));
    // Only what changed is written again.
    let changed = many.take_changed();
    assert_eq!(changed.len(), 40);
    many.push("job-39", "one more");
    assert_eq!(
        many.take_changed().keys().collect::<Vec<_>>(),
        ["log.job-39"]
    );
}

#[test]
fn names_sort_by_start_and_the_newest_ten_are_kept() {
    let taken = ["uyuni-operation-20261204100000-migrate".to_owned()];
    assert_eq!(
        operation::name("20261204100000", "migrate", |n| taken
            .iter()
            .any(|t| t == n)),
        "uyuni-operation-20261204100000-migrate-02"
    );
    assert_eq!(
        operation::name("20261204100001", "migrate", |n| taken
            .iter()
            .any(|t| t == n)),
        "uyuni-operation-20261204100001-migrate"
    );
    let existing: Vec<String> = (0..12)
        .map(|i| format!("uyuni-operation-202612041000{i:02}-install"))
        .collect();
    let new = "uyuni-operation-20261204110000-upgrade";
    assert_eq!(
        operation::to_prune(&existing, new),
        existing[..3].to_vec(),
        "12 old and a new one: the 3 oldest go"
    );
    assert!(operation::to_prune(&existing[..9], new).is_empty());
}
