//! Each Job that calls the API runs as its own ServiceAccount, allowed to patch its own Secret
//! only: the data-sync Job `uyuni-migration-data`, the CA key Job `uyuni-ca`. A migration
//! whose CA key Job ran as the data-sync Job's account (before each had its own) does not run
//! it again.

use crate::common;

use k8s_openapi::api::batch::v1::Job;
use uyuni_core::builders::tls;
use uyuni_core::catalogue::names;
use uyuni_core::labels;
use uyuni_core::object::Kind;
use uyuni_core::{Action, Object, Observed, plan, preview, simulate};

fn service_account(job: &Job) -> Option<String> {
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.service_account_name.clone())
}

fn written(steps: &[uyuni_core::Step]) -> Vec<Object> {
    steps.iter().filter_map(|s| s.action.object()).collect()
}

#[test]
fn the_data_sync_and_ca_key_jobs_run_as_accounts_allowed_to_patch_their_own_secret_only() {
    let params = common::params();
    let objects = written(
        &preview(&params, &common::empty_cluster())
            .expect("plans")
            .executed,
    );
    let account_of = |step: &str| -> Vec<Option<String>> {
        objects
            .iter()
            .filter_map(|o| match o {
                Object::Job(j)
                    if j.metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(labels::STEP_ANNOTATION))
                        .is_some_and(|s| s == step) =>
                {
                    Some(service_account(j))
                }
                _ => None,
            })
            .collect()
    };
    let sync = account_of("data-sync");
    assert!(!sync.is_empty());
    assert!(
        sync.iter()
            .all(|a| a.as_deref() == Some(names::MIGRATION_SERVICE_ACCOUNT)),
        "{sync:?}"
    );
    assert_eq!(
        account_of("ca-key"),
        [Some(names::CA_KEY_SERVICE_ACCOUNT.to_owned())]
    );
    assert_ne!(
        names::MIGRATION_SERVICE_ACCOUNT,
        names::CA_KEY_SERVICE_ACCOUNT
    );
    assert!(
        objects
            .iter()
            .any(|o| matches!(o, Object::ServiceAccount(sa)
        if sa.metadata.name.as_deref() == Some(names::CA_KEY_SERVICE_ACCOUNT)))
    );
    // Which account may patch which Secret, through the RoleBindings and Roles written.
    let mut grants = Vec::new();
    for object in &objects {
        let Object::RoleBinding(binding) = object else {
            continue;
        };
        let role = objects
            .iter()
            .find_map(|o| match o {
                Object::Role(r) if r.metadata.name.as_ref() == Some(&binding.role_ref.name) => {
                    Some(r)
                }
                _ => None,
            })
            .expect("the bound Role is written");
        for subject in binding.subjects.iter().flatten() {
            for rule in role.rules.iter().flatten() {
                assert_eq!(rule.verbs, ["patch"]);
                assert_eq!(rule.resources.as_deref(), Some(&["secrets".to_owned()][..]));
                for secret in rule.resource_names.iter().flatten() {
                    grants.push((subject.name.clone(), secret.clone()));
                }
            }
        }
    }
    grants.sort();
    assert_eq!(
        grants,
        [
            (names::CA_KEY_SERVICE_ACCOUNT, names::CA_SECRET),
            (
                names::MIGRATION_SERVICE_ACCOUNT,
                names::MIGRATION_DATA_SECRET
            ),
        ]
        .map(|(a, s)| (a.to_owned(), s.to_owned()))
    );
}

/// The CA key Job as a version before this one wrote it: run as the data-sync Job's account,
/// so of another spec (another hash).
fn older_ca_key_job(new: &Job) -> Job {
    let mut job = new.clone();
    if let Some(pod) = job.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        pod.service_account_name = Some(names::MIGRATION_SERVICE_ACCOUNT.to_owned());
    }
    job.metadata.annotations.get_or_insert_default().insert(
        labels::SPEC_HASH_ANNOTATION.to_owned(),
        "0123456789abcdef".to_owned(),
    );
    job
}

#[test]
fn a_ca_key_job_of_the_older_spec_is_awaited_and_then_not_run_again() {
    let params = common::params();
    let start = common::after_sync(&params);
    let whole = preview(&params, &start).expect("plans");
    // The state when the migration was about to run the CA key Job.
    let mut state: Observed = start.clone();
    let mut new_job = None;
    for step in &whole.executed {
        if let Action::RunJob { job, .. } = &step.action
            && step.id == tls::CA_KEY_STEP
        {
            new_job = Some((**job).clone());
            break;
        }
        state = simulate(&state, &params.namespace, step);
    }
    let old = older_ca_key_job(&new_job.expect("the CA key Job runs"));
    let old_name = old.metadata.name.clone().expect("name");
    // It was created by the older version and still runs: awaited, not run beside.
    state.insert(Object::Job(old.clone()));
    let next = plan(&params, &state).expect("plans");
    let step = next.next_step().expect("a step").clone();
    assert_eq!(step.id, tls::CA_KEY_STEP, "{step:#?}");
    assert!(
        matches!(&step.action, Action::AwaitJob { name, .. } if *name == old_name),
        "{step:#?}"
    );
    // It succeeded: the rest of the migration runs, but no CA key Job.
    let state = simulate(&state, &params.namespace, &step);
    assert!(
        state
            .secret(names::CA_SECRET)
            .and_then(|s| s.data.as_ref())
            .and_then(|d| d.get("tls.key"))
            .is_some_and(|k| !k.0.is_empty())
    );
    let rest = preview(&params, &state).expect("plans");
    assert!(
        !rest.executed.iter().any(|s| s.id == tls::CA_KEY_STEP),
        "{:#?}",
        rest.executed
    );
    assert_eq!(rest.end.attempts(tls::CA_KEY_STEP).all().len(), 1);
    // The CA key Job's own account and binding are written all the same.
    assert!(
        rest.end
            .contains(Kind::ServiceAccount, names::CA_KEY_SERVICE_ACCOUNT)
    );
}
