//! Running again is safe: once the final sync is done, no flag makes a run work on the
//! database's data a second time, and once the server's Deployments run on the data, none
//! changes it at all.
//!
//! Invariants, numbered as the failures report them:
//! 11. From every state a migration passes through after its final sync (and those states with
//!     the database Jobs deleted, or the Deployments written without their data-sync
//!     annotation), whatever image, registry, pull-policy, pull-Secret, component and TFTP
//!     flags a re-run gives: a database step whose Job succeeded is never run or awaited again.
//! 12. Once Deployment `db` or `uyuni` was made for the sync's data, no step runs or awaits a
//!     Job that mounts a database claim (`var-pgsql*`), and once `uyuni` was, not the migration
//!     SQL either; no step scales `uyuni` or `db` to 0.
//! 13. A re-run that would change an image of a Deployment on data it owns is refused before
//!     any step, naming the Deployment, both images and the run without the image flags; every
//!     other re-run of the states above converges.

use crate::common;

use proptest::prelude::*;
use uyuni_core::catalogue::steps;
use uyuni_core::labels;
use uyuni_core::plan::phase;
use uyuni_core::{
    Action, Kind, MigrateArgs, MigrateParams, Object, Observed, PlanError, preview, simulate,
};

const DATABASE_STEPS: [&str; 4] = [
    steps::DB_FIXUP,
    steps::DB_UPGRADE,
    steps::DB_PASSWORDS,
    steps::DB_MIGRATION_SQL,
];

fn args() -> MigrateArgs {
    common::args_with_ssh(&common::private_key("fixture-private-key"))
}

fn params_of(args: &MigrateArgs) -> MigrateParams {
    MigrateParams::from_args(args).expect("valid")
}

/// Every state of a whole migration from its final sync on: the states after each executed
/// step of the preview, the first one the synced state itself.
fn states(params: &MigrateParams, pg_version: &str) -> Vec<Observed> {
    let mut state = common::after_sync(params);
    set_pg_version(&mut state, pg_version);
    let p = preview(params, &state).expect("preview");
    let mut out = vec![state.clone()];
    for step in &p.executed {
        state = simulate(&state, &params.namespace, step);
        out.push(state.clone());
    }
    out
}

fn set_pg_version(o: &mut Observed, version: &str) {
    if let Some(Object::Secret(s)) = o.objects.get_mut(&uyuni_core::ObjectRef::new(
        Kind::Secret,
        common::DATA_SECRET,
    )) && let Some(d) = s.data.as_mut()
    {
        d.insert(
            uyuni_core::scripts::data_keys::PG_VERSION.into(),
            k8s_openapi::ByteString(version.as_bytes().to_vec()),
        );
    }
}

fn job_step_of(job: &k8s_openapi::api::batch::v1::Job) -> Option<&str> {
    job.metadata
        .annotations
        .as_ref()?
        .get(labels::STEP_ANNOTATION)
        .map(String::as_str)
}

/// The database steps whose Job succeeded in `o`.
fn succeeded_steps(o: &Observed) -> Vec<String> {
    o.objects
        .values()
        .filter_map(|obj| match obj {
            Object::Job(job)
                if uyuni_core::observed::job_state(job)
                    == uyuni_core::observed::JobState::Succeeded =>
            {
                job_step_of(job).map(str::to_owned)
            }
            _ => None,
        })
        .filter(|s| DATABASE_STEPS.contains(&s.as_str()))
        .collect()
}

/// The claims a Job mounts.
fn job_claims(job: &k8s_openapi::api::batch::v1::Job) -> Vec<String> {
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .collect()
}

/// The step id of a Job step (`RunJob`, `AwaitJob`), as the plan names it.
fn job_action_step(step: &uyuni_core::Step) -> Option<&str> {
    match &step.action {
        Action::RunJob { .. } | Action::AwaitJob { .. } => Some(step.id.as_str()),
        _ => None,
    }
}

#[derive(Debug, Clone)]
struct Rerun {
    pg_version: &'static str,
    /// Index into the states of the migration (clamped).
    at: usize,
    pull_policy: Option<&'static str>,
    registry_host: Option<&'static str>,
    tag: Option<&'static str>,
    db_tag: Option<&'static str>,
    dbupgrade_tag: Option<&'static str>,
    image_pull_secret: bool,
    coco_replicas: Option<u32>,
    hubxmlrpc_replicas: Option<u32>,
    tftp: Option<bool>,
    /// The user deleted the database steps' Jobs.
    jobs_deleted: bool,
    /// The Deployments were written without the data-sync annotation (an earlier version).
    unannotated: bool,
}

fn rerun() -> impl Strategy<Value = Rerun> {
    (
        (
            prop_oneof![Just("14"), Just("16"), Just("18")],
            0usize..200,
            proptest::option::of(prop_oneof![
                Just("Always"),
                Just("IfNotPresent"),
                Just("Never")
            ]),
            proptest::option::of(Just("mirror.example.com:5000")),
            proptest::option::of(Just("2025.10")),
            proptest::option::of(Just("18.1")),
            proptest::option::of(Just("2025.10")),
        ),
        (
            any::<bool>(),
            proptest::option::of(0u32..3),
            proptest::option::of(0u32..3),
            proptest::option::of(any::<bool>()),
            any::<bool>(),
            any::<bool>(),
        ),
    )
        .prop_map(
            |(
                (pg_version, at, pull_policy, registry_host, tag, db_tag, dbupgrade_tag),
                (
                    image_pull_secret,
                    coco_replicas,
                    hubxmlrpc_replicas,
                    tftp,
                    jobs_deleted,
                    unannotated,
                ),
            )| Rerun {
                pg_version,
                at,
                pull_policy,
                registry_host,
                tag,
                db_tag,
                dbupgrade_tag,
                image_pull_secret,
                coco_replicas,
                hubxmlrpc_replicas,
                tftp,
                jobs_deleted,
                unannotated,
            },
        )
}

fn rerun_args(r: &Rerun) -> MigrateArgs {
    let mut a = args();
    a.spec.pull_policy = r.pull_policy.map(str::to_owned);
    a.spec.registry_host = r.registry_host.map(str::to_owned);
    a.spec.tag = r.tag.map(str::to_owned);
    a.spec.db_tag = r.db_tag.map(str::to_owned);
    a.spec.dbupgrade_tag = r.dbupgrade_tag.map(str::to_owned);
    a.spec.image_pull_secret = r.image_pull_secret.then(|| "my-pull-secret".to_owned());
    a.spec.coco_replicas = r.coco_replicas;
    a.spec.hubxmlrpc_replicas = r.hubxmlrpc_replicas;
    a.spec.tftp = r.tftp;
    a
}

/// The state the re-run starts from, edited as the case says.
fn start_state(r: &Rerun, states: &[Observed]) -> Observed {
    let o = states[r.at % states.len()].clone();
    let objects: Vec<Object> = o
        .objects
        .values()
        .filter(|obj| match obj {
            Object::Job(job) => {
                !(r.jobs_deleted && job_step_of(job).is_some_and(|s| DATABASE_STEPS.contains(&s)))
            }
            _ => true,
        })
        .cloned()
        .map(|obj| match obj {
            Object::Deployment(mut d) if r.unannotated => {
                if let Some(a) = d.metadata.annotations.as_mut() {
                    a.remove(labels::DATA_SYNC_ANNOTATION);
                }
                Object::Deployment(d)
            }
            other => other,
        })
        .collect();
    let mut o = rebuilt(o, objects);
    if r.image_pull_secret {
        o.insert(Object::Secret(k8s_openapi::api::core::v1::Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("my-pull-secret".into()),
                namespace: Some(common::NAMESPACE.into()),
                ..Default::default()
            },
            type_: Some("kubernetes.io/dockerconfigjson".into()),
            ..Default::default()
        }));
    }
    o
}

/// `o` with these objects instead of its own, filed as an observation files them.
fn rebuilt(o: Observed, objects: Vec<Object>) -> Observed {
    let mut fresh = Observed {
        objects: Default::default(),
        ..o
    };
    for obj in objects {
        fresh.insert(obj);
    }
    fresh
}

fn check_rerun(r: &Rerun, states: &[Observed]) -> Result<(), TestCaseError> {
    let start = start_state(r, states);
    let params = params_of(&rerun_args(r));
    let sync_job = start.extracted().expect("data").expect("data").job;
    let db_owned = phase::taken_over(&start, "db", &sync_job);
    let server_owned = phase::taken_over(&start, "uyuni", &sync_job);
    let done_before = succeeded_steps(&start);
    let result = preview(&params, &start);
    let p = match result {
        Err(PlanError::ImageChangeOnRunningServer { changes, same, .. }) => {
            // 13: refused only where a Deployment owns the data, naming what changes.
            prop_assert!(
                db_owned || server_owned,
                "refused without an owner: {changes}"
            );
            prop_assert!(changes.contains("this run asks for"), "{changes}");
            prop_assert!(
                !same.contains("--tag") && !same.contains("--registry-host"),
                "{same}"
            );
            return Ok(());
        }
        Err(e) => return Err(TestCaseError::fail(format!("refused: {e}"))),
        Ok(p) => p,
    };
    prop_assert!(p.final_plan.is_done(), "13: did not converge");
    for step in &p.executed {
        if let Some(id) = job_action_step(step) {
            // 11
            prop_assert!(
                !(DATABASE_STEPS.contains(&id) && done_before.iter().any(|d| d == id)),
                "11: {id} runs again after it succeeded ({done_before:?})"
            );
            if let Action::RunJob { job, .. } = &step.action {
                let claims = job_claims(job);
                // 12
                prop_assert!(
                    !((db_owned || server_owned)
                        && claims.iter().any(|c| c.starts_with("var-pgsql"))),
                    "12: {id} mounts {claims:?} while the database owns the data"
                );
            }
            prop_assert!(
                !((db_owned || server_owned) && DATABASE_STEPS[..3].contains(&id)),
                "12: {id} runs on owned data"
            );
            prop_assert!(
                !(server_owned && id == steps::DB_MIGRATION_SQL),
                "12: the migration SQL runs again after the server ran"
            );
        }
        if let Action::Scale { name, replicas, .. } = &step.action {
            prop_assert!(
                !((db_owned || server_owned)
                    && *replicas == 0
                    && (name == "uyuni" || name == "db")),
                "12: {name} scaled to 0 on a re-run"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn invariants_11_to_13_a_rerun_never_works_on_owned_data(r in rerun()) {
        let states = states(&params_of(&args()), r.pg_version);
        check_rerun(&r, &states)?;
    }
}

/// The finished migration: the server and the database run on the sync's data.
pub(crate) fn finished() -> (MigrateParams, Observed) {
    let params = params_of(&args());
    let states = states(&params, "16");
    let end = states.last().expect("end").clone();
    assert!(phase::data_taken_over(&end).is_some());
    (params, end)
}

#[test]
fn a_changed_tag_on_a_finished_migration_is_refused_naming_both_images() {
    let (_, end) = finished();
    let mut a = args();
    a.spec.tag = Some("2025.10".into());
    a.kubectl.migrate_flags = vec!["--tag".into(), "2025.10".into(), "--compress".into()];
    let err = uyuni_core::plan(&params_of(&a), &end).expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("Deployment uyuni runs") && text.contains(":2025.10"),
        "{text}"
    );
    assert!(text.contains("Deployment db runs"), "{text}");
    assert!(text.contains("upgrade"), "{text}");
    assert!(
        text.contains("migrate uyuni.example.com --compress`"),
        "the run again without --tag: {text}"
    );
    assert!(text.contains("Nothing was written"), "{text}");
}

#[test]
fn a_changed_pull_policy_on_a_finished_migration_rewrites_objects_and_runs_no_job() {
    let (_, end) = finished();
    let mut a = args();
    a.spec.pull_policy = Some("IfNotPresent".into());
    let params = params_of(&a);
    let p = preview(&params, &end).expect("preview");
    assert!(
        !p.executed.is_empty(),
        "the Deployments take the new policy"
    );
    for step in &p.executed {
        // The image checks run again for the new policy: they read the images, not the data.
        if step.id.starts_with("image-check-") {
            continue;
        }
        assert!(
            matches!(
                step.action,
                Action::Apply(_) | Action::WaitDeployment { .. }
            ),
            "{} {:?}",
            step.id,
            step.op
        );
    }
}

#[test]
fn a_plain_rerun_of_a_finished_migration_plans_nothing() {
    let (params, end) = finished();
    let p = uyuni_core::plan(&params, &end).expect("plan");
    assert!(p.is_done(), "{:?}", p.next_step());
}

#[test]
fn the_database_steps_are_identified_by_what_they_do_to_the_data() {
    let params = params_of(&args());
    let mut a = args();
    a.spec.tag = Some("2025.10".into());
    a.spec.pull_policy = Some("IfNotPresent".into());
    a.spec.registry_host = Some("mirror.example.com:5000".into());
    let other = params_of(&a);
    let data = common::after_sync(&params)
        .extracted()
        .expect("data")
        .expect("data");
    let hash = |job: k8s_openapi::api::batch::v1::Job| {
        job.metadata
            .annotations
            .expect("annotations")
            .get(labels::SPEC_HASH_ANNOTATION)
            .cloned()
            .expect("hash")
    };
    let upgrade = uyuni_core::pg::Upgrade::Needed { from: 16 };
    use uyuni_core::builders::database;
    assert_eq!(
        hash(database::fixup_job(&params, &data, upgrade)),
        hash(database::fixup_job(&other, &data, upgrade))
    );
    assert_eq!(
        hash(database::upgrade_job(&params, &data, Some(16))),
        hash(database::upgrade_job(&other, &data, Some(16)))
    );
    // What the Job does to the data still counts: another source version is another upgrade.
    assert_ne!(
        hash(database::upgrade_job(&params, &data, Some(16))),
        hash(database::upgrade_job(&params, &data, Some(14)))
    );
    // And another data sync is other data.
    let other_sync = uyuni_core::ExtractedData {
        job: "uyuni-data-sync-20270101000000".into(),
        ..data.clone()
    };
    assert_ne!(
        hash(database::passwords_job(&params, &data, upgrade)),
        hash(database::passwords_job(&params, &other_sync, upgrade))
    );
}

#[test]
fn a_new_final_sync_after_the_documented_reset_runs_the_database_steps_again() {
    // docs/phases.md, "To copy from the source again": stop db and uyuni, delete the final sync Job,
    // run again. The Deployments then carry the old sync's annotation: the new data is not
    // theirs yet, and its database steps run.
    let (params, end) = finished();
    let data = end.extracted().expect("data").expect("data");
    let new_job = "uyuni-data-sync-20270101000000";
    let objects: Vec<Object> = end
        .objects
        .values()
        .cloned()
        .map(|obj| match obj {
            Object::Job(mut job) if job.metadata.name.as_deref() == Some(data.job.as_str()) => {
                job.metadata.name = Some(new_job.into());
                Object::Job(job)
            }
            Object::Deployment(mut d) => {
                if let Some(spec) = d.spec.as_mut() {
                    spec.replicas = Some(0);
                }
                d.status = None;
                Object::Deployment(d)
            }
            other => other,
        })
        .collect();
    let mut replaced = rebuilt(end.clone(), objects);
    replaced.insert(common::extracted_secret(
        new_job,
        "s3cret pass#1",
        Some("-----BEGIN ENCRYPTED PRIVATE KEY-----\nCAKEYBODY\n-----END ENCRYPTED PRIVATE KEY-----\n"),
    ));
    assert!(phase::data_taken_over(&replaced).is_none());
    let p = preview(&params, &replaced).expect("preview");
    let ran: Vec<&str> = p.executed.iter().filter_map(job_action_step).collect();
    assert!(ran.contains(&steps::DB_FIXUP), "{ran:?}");
    assert!(ran.contains(&steps::DB_MIGRATION_SQL), "{ran:?}");
    let end = p.end;
    let annotation = end
        .deployment("db")
        .and_then(|d| d.metadata.annotations.as_ref())
        .and_then(|a| a.get(labels::DATA_SYNC_ANNOTATION))
        .cloned();
    assert_eq!(annotation.as_deref(), Some(new_job));
}
