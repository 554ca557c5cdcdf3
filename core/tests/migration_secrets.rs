//! The Secrets only a migration uses — the SSH key to its source, its CA key's password — are
//! deleted as the last steps of a finished migration, unless `--keep-migration-data`; a run
//! after that needs neither, and nothing else is deleted on that path.

use crate::common;

use uyuni_core::catalogue::{data_keys, names};
use uyuni_core::object::{Kind, ObjectRef};
use uyuni_core::plan::{Action, migration_secret_deletion};
use uyuni_core::{MigrateParams, Observed, plan, preview};

fn without_ssh_flags(params: &MigrateParams) -> MigrateParams {
    MigrateParams {
        ssh_key: None,
        ca_password: None,
        ..params.clone()
    }
}

fn has_secret(o: &Observed, name: &str) -> bool {
    o.secret(name).is_some()
}

#[test]
fn a_finished_migration_deletes_the_ssh_key_and_the_ca_password_last() {
    let params = common::params();
    let preview = preview(&params, &common::after_sync(&params)).expect("plans");
    assert!(!has_secret(&preview.end, names::SSH_KEY_SECRET));
    assert!(!has_secret(&preview.end, names::CA_PASSWORD_SECRET));
    // The credentials the server runs on stay.
    for kept in [names::DB_SECRET, names::CA_SECRET] {
        assert!(has_secret(&preview.end, kept), "{kept} was deleted");
    }
    // The deletions come after every other step: the server is ready first.
    let deleting: Vec<usize> = preview
        .executed
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s.action, Action::Delete { .. }))
        .map(|(i, _)| i)
        .collect();
    let n = preview.executed.len();
    assert_eq!(deleting, vec![n - 2, n - 1], "{:#?}", preview.executed);
    // Deletes nothing else: exactly these two targets.
    let targets: Vec<String> = preview.executed[n - 2..]
        .iter()
        .map(|s| s.target.name.clone())
        .collect();
    assert_eq!(
        targets,
        [names::SSH_KEY_SECRET, names::CA_PASSWORD_SECRET].map(String::from)
    );
    // A run after that, without any SSH key or password given, plans nothing.
    let again = plan(&without_ssh_flags(&params), &preview.end).expect("plans");
    assert!(again.is_done(), "{:#?}", again.next_step());
    // Nor does one that gives the key again: it is not written back.
    assert!(plan(&params, &preview.end).expect("plans").is_done());
}

#[test]
fn keep_migration_data_keeps_both_secrets_and_a_later_run_without_it_deletes_them() {
    let params = MigrateParams {
        keep_migration_data: true,
        ..common::params()
    };
    let end = preview(&params, &common::after_sync(&params))
        .expect("plans")
        .end;
    assert!(has_secret(&end, names::SSH_KEY_SECRET));
    assert!(has_secret(&end, names::CA_PASSWORD_SECRET));
    assert!(plan(&params, &end).expect("plans").is_done());
    // The choice is the run's: one without the flag finishes the clean-up.
    let later = without_ssh_flags(&MigrateParams {
        keep_migration_data: false,
        ..params
    });
    let end = preview(&later, &end).expect("plans").end;
    assert!(!has_secret(&end, names::SSH_KEY_SECRET));
    assert!(!has_secret(&end, names::CA_PASSWORD_SECRET));
}

#[test]
fn a_prepare_copy_and_an_unfinished_migration_keep_the_ssh_key() {
    let params = common::params();
    let prepare = MigrateParams {
        prepare: true,
        ..params.clone()
    };
    let end = preview(&prepare, &common::empty_cluster())
        .expect("plans")
        .end;
    assert!(has_secret(&end, names::SSH_KEY_SECRET));
    // After the copy while the source serves, the final run still needs it: no deletion is
    // planned before the final sync has run.
    let final_plan = plan(&params, &end).expect("plans");
    assert!(
        !final_plan
            .steps
            .iter()
            .any(|s| matches!(s.action, Action::Delete { .. })),
        "{:#?}",
        final_plan.steps
    );
}

#[test]
fn only_the_migration_secrets_can_be_deleted_on_that_path() {
    let o = common::after_migration(&MigrateParams {
        keep_migration_data: true,
        ..common::params()
    });
    for name in [
        names::DB_SECRET,
        names::CA_SECRET,
        names::MIGRATION_DATA_SECRET,
    ] {
        let refused =
            migration_secret_deletion(&o, ObjectRef::new(Kind::Secret, name), String::new());
        assert!(refused.is_err(), "{name} may be deleted");
    }
    let claim = ObjectRef::new(Kind::PersistentVolumeClaim, names::SSH_KEY_SECRET);
    assert!(migration_secret_deletion(&o, claim, String::new()).is_err());
    let key = ObjectRef::new(Kind::Secret, names::SSH_KEY_SECRET);
    assert!(migration_secret_deletion(&o, key, String::new()).is_ok());
}

/// The secret values of Secret uyuni-migration-data: emptied by a finished migration.
const SECRET_KEYS: [&str; 3] = [
    data_keys::DB_PASSWORD,
    data_keys::REPORT_DB_PASSWORD,
    data_keys::CA_KEY,
];

fn data_value(o: &Observed, key: &str) -> Option<String> {
    o.secret(names::MIGRATION_DATA_SECRET)
        .and_then(|s| s.data.as_ref())
        .and_then(|d| d.get(key))
        .map(|v| String::from_utf8(v.0.clone()).expect("text"))
}

/// `end` with Secret uyuni-migration-data as the data-sync Job left it in `synced`.
fn unredacted(end: &Observed, synced: &Observed) -> Observed {
    let mut o = end.clone();
    o.insert(
        synced
            .get(Kind::Secret, names::MIGRATION_DATA_SECRET)
            .expect("synced data")
            .clone(),
    );
    o
}

/// A plan without the redaction's own step, which differs by nature.
fn without_redaction(plan: uyuni_core::Plan) -> Vec<uyuni_core::Step> {
    plan.steps
        .into_iter()
        .filter(|s| s.id != "redact-migration-data")
        .collect()
}

#[test]
fn a_finished_migration_empties_the_secret_values_of_its_data_and_keeps_the_facts() {
    let params = common::params();
    let synced = common::after_sync(&params);
    let preview = preview(&params, &synced).expect("plans");
    let end = &preview.end;
    for key in SECRET_KEYS {
        let before = data_value(&synced, key).expect("synced");
        assert!(!before.is_empty());
        assert_eq!(data_value(end, key).as_deref(), Some(""), "{key} stays");
    }
    assert_eq!(
        data_value(end, data_keys::REDACTED).as_deref(),
        Some("db_password report_db_password ca.key")
    );
    // The facts later runs plan from stay as the Job wrote them.
    for key in [
        data_keys::JOB,
        data_keys::DB_USER,
        data_keys::PG_VERSION,
        data_keys::TIMEZONE,
        data_keys::CA_CERT,
        data_keys::TFTP,
    ] {
        assert_eq!(data_value(end, key), data_value(&synced, key), "{key}");
    }
    // Emptied after everything that put the values in their home Secrets: the credentials
    // and the CA key Job.
    let at = |id: &str| {
        preview
            .executed
            .iter()
            .position(|s| s.id == id)
            .unwrap_or_else(|| panic!("{id} not carried out"))
    };
    let redaction = at("redact-migration-data");
    for home in [names::DB_SECRET, names::REPORTDB_SECRET, "ca-key"] {
        assert!(at(home) < redaction, "{home} after the redaction");
    }
    // The values are read from their homes: the same data, the CA key now the decrypted one.
    let read = end.extracted().expect("reads").expect("data");
    let raw = unredacted(end, &synced)
        .extracted()
        .expect("reads")
        .expect("data");
    assert_eq!(read.db_password, raw.db_password);
    assert_eq!(read.report_db_password, raw.report_db_password);
    assert!(read.ca_key.is_some());
    assert_eq!(
        uyuni_core::observed::ExtractedData {
            ca_key: None,
            ..read
        },
        uyuni_core::observed::ExtractedData {
            ca_key: None,
            ..raw
        }
    );
}

#[test]
fn later_runs_plan_the_same_with_the_data_emptied_as_with_it_kept() {
    use uyuni_core::params::{Origin, UpgradeParams};
    use uyuni_core::plan::Planner;
    use uyuni_core::plan::lifecycle::{self, Lifecycle, LifecycleParams};
    let params = common::params();
    let synced = common::after_sync(&params);
    let redacted = preview(&params, &synced).expect("plans").end;
    assert_eq!(
        data_value(&redacted, data_keys::DB_PASSWORD).as_deref(),
        Some("")
    );
    let kept = unredacted(&redacted, &synced);
    let rerun = without_ssh_flags(&params);
    for params in [&rerun, &params] {
        assert_eq!(
            without_redaction(plan(params, &redacted).expect("plans")),
            without_redaction(plan(params, &kept).expect("plans"))
        );
    }
    // An upgrade of the migrated server, to another tag: every step the same.
    let mut target = rerun.clone();
    target.run_id = "20261204120000".to_owned();
    target.spec.image.server = format!("{}-next", target.spec.image.server);
    let upgrade = UpgradeParams {
        origin: Origin::Migrated(Box::new(target)),
        backup: true,
        rollback: false,
    };
    assert_eq!(
        upgrade.plan(&redacted).expect("plans"),
        upgrade.plan(&kept).expect("plans")
    );
    // Stop and start.
    for action in [Lifecycle::Stop, Lifecycle::Start, Lifecycle::Restart] {
        let lifecycle = LifecycleParams {
            server: (*params).clone(),
            action,
        };
        assert_eq!(
            lifecycle::plan(&lifecycle, &redacted).expect("plans"),
            lifecycle::plan(&lifecycle, &kept).expect("plans")
        );
    }
    // A whole re-run from the emptied state ends where one from the kept state ends.
    let from_redacted = preview(&rerun, &redacted).expect("plans");
    assert!(
        from_redacted.executed.is_empty(),
        "{:#?}",
        from_redacted.executed
    );
    let from_kept = preview(&rerun, &kept).expect("plans");
    assert_eq!(
        from_kept
            .executed
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>(),
        ["redact-migration-data"]
    );
    assert_eq!(from_kept.end, redacted);
}

#[test]
fn a_migration_interrupted_anywhere_resumes_to_the_same_emptied_data() {
    let params = common::params();
    let synced = common::after_sync(&params);
    let whole = preview(&params, &synced).expect("plans");
    let mut state = synced.clone();
    for step in &whole.executed {
        let resumed = preview(&params, &state).expect("a resumed run plans");
        assert_eq!(resumed.end, whole.end, "resumed before {}", step.id);
        state = uyuni_core::simulate(&state, &params.namespace, step);
        // Every value is in one place or the other at every boundary.
        let data = state.extracted().expect("reads").expect("data");
        assert_eq!(data.db_password.expose(), "s3cret pass#1");
        assert!(data.ca_key.is_some());
    }
}

#[test]
fn keep_migration_data_keeps_the_secret_values_and_a_lost_home_is_named() {
    let keep = MigrateParams {
        keep_migration_data: true,
        ..common::params()
    };
    let synced = common::after_sync(&keep);
    let end = preview(&keep, &synced).expect("plans").end;
    for key in SECRET_KEYS {
        assert_eq!(data_value(&end, key), data_value(&synced, key), "{key}");
    }
    assert_eq!(data_value(&end, data_keys::REDACTED), None);

    // Emptied, then the home of the passwords lost: the run says where the value went.
    let params = without_ssh_flags(&common::params());
    let mut broken = preview(&common::params(), &synced).expect("plans").end;
    broken
        .objects
        .remove(&ObjectRef::new(Kind::Secret, names::DB_SECRET));
    let err = plan(&params, &broken).expect_err("refused").to_string();
    assert!(
        err.contains("no longer holds \"db_password\"")
            && err.contains("Restore Secret db-credentials"),
        "{err}"
    );
}
