//! The Secrets only a migration uses — the SSH key to its source, its CA key's password — are
//! deleted as the last steps of a finished migration, unless `--keep-migration-data`; a run
//! after that needs neither, and nothing else is deleted on that path.

use crate::common;

use uyuni_core::catalogue::names;
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
