//! `upgrade`'s plan on an installed server: the inspections first, the refusals before any
//! write of the server's, the backup or the PostgreSQL major upgrade before any image changes,
//! install's end state on the new images, and nothing planned once it is done.

use uyuni_core::catalogue::names;
use uyuni_core::labels;
use uyuni_core::object::{Kind, ObjectRef};
use uyuni_core::params::{InstallParams, MigrateArgs, MigrateParams, Origin, UpgradeParams};
use uyuni_core::plan::upgrade::{UpgradeRecord, live_image};
use uyuni_core::plan::{PlanError, Planner};
use uyuni_core::{Action, Object, Observed, preview};

use crate::common;
use crate::install::install_args;

pub(crate) const FROM: &str = "2025.10";
pub(crate) const TO: &str = "2026.04";

pub(crate) fn installed_with_tag(tag: &str) -> InstallParams {
    let mut args = install_args();
    args.spec.tag = Some(tag.to_owned());
    InstallParams::from_args(&args).expect("valid install arguments")
}

/// A server installed with `FROM`, as the install's preview leaves it.
pub(crate) fn installed() -> Observed {
    preview(&installed_with_tag(FROM), &common::empty_cluster())
        .expect("install plans")
        .end
}

pub(crate) fn upgrade_to(tag: &str) -> UpgradeParams {
    let mut install = installed_with_tag(tag);
    install.run_id = "20261204120000".to_owned();
    UpgradeParams {
        origin: Origin::Installed(Box::new(install)),
        backup: true,
        rollback: false,
    }
}

/// What the inspection Job of `image` reports: the release its tag names, and PostgreSQL
/// `pg_major(image)` for a database image.
fn report(image: &str, pg_major: &dyn Fn(&str) -> u32) -> String {
    let tag = image.rsplit(':').next().unwrap_or_default();
    if image.contains("postgresql") {
        format!("pg_major={}\n", pg_major(image))
    } else {
        format!("product=uyuni\nrelease={tag}\n")
    }
}

/// What the inspection Jobs report, database images PostgreSQL `pg_major(image)`.
fn inspections(pg_major: &dyn Fn(&str) -> u32) -> impl Fn(&str, &str) -> Option<String> {
    move |step: &str, image: &str| {
        step.starts_with("inspect-")
            .then(|| report(image, pg_major))
    }
}

/// `step` carried out on the simulated cluster; an inspection Job's pod reports what
/// [`report`] says of its image, as the run copies it onto the Job.
fn carried_out(
    observed: &Observed,
    namespace: &str,
    step: &uyuni_core::Step,
    pg_major: &dyn Fn(&str) -> u32,
) -> Observed {
    common::carried_out_reporting(observed, namespace, step, &inspections(pg_major))
}

/// Runs `params`' plan step by step on the simulated cluster, the inspection Jobs reporting
/// what `pg_major` says of database images; returns the steps carried out and the end.
pub(crate) fn run(
    params: &UpgradeParams,
    start: &Observed,
    pg_major: &dyn Fn(&str) -> u32,
) -> Result<(Vec<uyuni_core::Step>, Observed), PlanError> {
    common::run_reporting(params, start, &inspections(pg_major))
}

fn ids(steps: &[uyuni_core::Step]) -> Vec<&str> {
    steps.iter().map(|s| s.id.as_str()).collect()
}

fn position(ids: &[&str], id: &str) -> usize {
    ids.iter()
        .position(|s| *s == id)
        .unwrap_or_else(|| panic!("{id} missing from {ids:?}"))
}

pub(crate) fn same_major(_: &str) -> u32 {
    18
}

/// An install run with the new tag afterwards changes neither Deployment (its own image checks
/// of the new images aside).
fn assert_install_keeps(end: &Observed) {
    let install = installed_with_tag(TO).plan(end).expect("install plans");
    for id in ["db-deployment", "server-deployment"] {
        let step = install.steps.iter().find(|s| s.id == id).expect("planned");
        assert_eq!(step.action, Action::None, "{id}: {}", step.reason);
    }
}

fn claim_of(observed: &Observed) -> Option<String> {
    uyuni_core::resolve::live_db_claim(observed)
}

#[test]
fn an_upgrade_without_a_major_change_keeps_a_backup_before_any_image_changes() {
    let start = installed();
    let params = upgrade_to(TO);
    let (steps, end) = run(&params, &start, &same_major).expect("upgrades");
    let done = ids(&steps);
    for id in [
        "inspect-running-server",
        "inspect-running-db",
        "inspect-server",
        "inspect-db",
    ] {
        assert!(
            position(&done, id) < position(&done, "upgrade-record"),
            "{id} after the first write: {done:?}"
        );
    }
    assert!(position(&done, "upgrade-record") < position(&done, "scale-uyuni"));
    assert!(position(&done, "scale-uyuni") < position(&done, "scale-db"));
    assert!(position(&done, "scale-db") < position(&done, "db-backup"));
    assert!(position(&done, "db-backup") < position(&done, "db-deployment"));
    assert!(position(&done, "db-ready") < position(&done, "server-deployment"));
    for name in [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT] {
        let image = live_image(&end, name).expect("image");
        assert!(image.ends_with(&format!(":{TO}")), "{name} runs {image}");
    }
    assert_eq!(claim_of(&end).as_deref(), Some("var-pgsql18"));
    let record = UpgradeRecord::read(&end).expect("the upgrade is recorded");
    assert!(record.from[names::SERVER_DEPLOYMENT].ends_with(FROM));
    assert!(record.to[names::SERVER_DEPLOYMENT].ends_with(TO));
    assert_eq!(record.backup_claim, "var-pgsql18-backup");
    assert_eq!(record.release_from, FROM);
    assert_eq!(record.release_to, TO);
    // The backup Job copies the database's volume into the backup volume, in the image the
    // database ran before.
    let backup = steps.iter().find(|s| s.id == "db-backup").expect("backup");
    let Action::RunJob { job, .. } = &backup.action else {
        panic!("not a Job")
    };
    let pod = job
        .spec
        .as_ref()
        .expect("spec")
        .template
        .spec
        .as_ref()
        .expect("pod");
    assert!(
        pod.containers[0]
            .image
            .as_deref()
            .is_some_and(|i| i.ends_with(FROM))
    );
    let claims: Vec<&str> = pod
        .volumes
        .iter()
        .flatten()
        .filter_map(|v| {
            v.persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str())
        })
        .collect();
    assert_eq!(claims, ["var-pgsql18", "var-pgsql18-backup"]);
    // Done: a re-run plans nothing, and so does install with the new tag.
    let again = params.plan(&end).expect("plans again");
    assert!(again.is_done(), "{:?}", again.next_step());
    assert_install_keeps(&end);
}

#[test]
fn an_upgrade_to_a_new_postgresql_major_keeps_the_old_volume_untouched() {
    let start = installed();
    let params = upgrade_to(TO);
    let major = |image: &str| if image.ends_with(TO) { 19 } else { 18 };
    let (steps, end) = run(&params, &start, &major).expect("upgrades");
    let done = ids(&steps);
    assert!(position(&done, "scale-db") < position(&done, "pvc-var-pgsql19"));
    assert!(position(&done, "pvc-var-pgsql19") < position(&done, "db-upgrade"));
    assert!(position(&done, "db-upgrade") < position(&done, "db-deployment"));
    assert!(!done.contains(&"db-backup"), "{done:?}");
    assert_eq!(claim_of(&end).as_deref(), Some("var-pgsql19"));
    // The old volume is neither written nor deleted.
    for step in &steps {
        let writes_old = step.target == ObjectRef::new(Kind::PersistentVolumeClaim, "var-pgsql18");
        assert!(!writes_old, "{step:?}");
    }
    assert_eq!(
        end.get(Kind::PersistentVolumeClaim, "var-pgsql18"),
        start.get(Kind::PersistentVolumeClaim, "var-pgsql18")
    );
    let upgrade = steps
        .iter()
        .find(|s| s.id == "db-upgrade")
        .expect("upgrade");
    let Action::RunJob { job, .. } = &upgrade.action else {
        panic!("not a Job")
    };
    let env = job
        .spec
        .as_ref()
        .expect("spec")
        .template
        .spec
        .as_ref()
        .expect("pod")
        .containers[0]
        .env
        .clone()
        .unwrap_or_default();
    let value = |name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    assert_eq!(value("FROM_MAJOR").as_deref(), Some("18"));
    assert_eq!(value("TO_MAJOR").as_deref(), Some("19"));
    let again = params.plan(&end).expect("plans again");
    assert!(again.is_done(), "{:?}", again.next_step());
    // A later install run keeps the database on the upgraded volume.
    assert_install_keeps(&end);
}

/// The steps before the refusal: only the inspection Jobs were written.
fn refused(params: &UpgradeParams, pg_major: &dyn Fn(&str) -> u32) -> PlanError {
    let start = installed();
    run(params, &start, pg_major).expect_err("refused")
}

#[test]
fn a_downgrade_is_refused_naming_both_releases() {
    let start = installed();
    let (_, upgraded) = run(&upgrade_to(TO), &start, &same_major).expect("upgrades");
    let err = run(&upgrade_to(FROM), &upgraded, &same_major).expect_err("refused");
    let text = err.to_string();
    assert!(matches!(err, PlanError::UpgradeRefused { .. }), "{err:?}");
    assert!(text.contains(FROM) && text.contains(TO), "{text}");
}

#[test]
fn an_older_postgresql_and_an_unreadable_release_are_refused_before_any_write() {
    let older = |image: &str| if image.ends_with(TO) { 16 } else { 18 };
    let err = refused(&upgrade_to(TO), &older);
    assert!(
        err.to_string().contains("PostgreSQL 18") && err.to_string().contains("PostgreSQL 16"),
        "{err}"
    );
    let err = refused(&upgrade_to("latest"), &same_major);
    assert!(
        matches!(err, PlanError::InspectionIncomplete { .. }),
        "{err:?}"
    );
    // Refused after the inspections only: the plan before the refusal wrote Jobs, nothing else.
    let start = installed();
    let params = upgrade_to(TO);
    let plan = params.plan(&start).expect("plans the inspections");
    for step in &plan.steps {
        if let Some(object) = step.action.object() {
            assert!(
                matches!(object, Object::Job(_)),
                "{} writes {:?}",
                step.id,
                object.object_ref()
            );
        }
    }
}

#[test]
fn a_namespace_without_a_server_is_refused() {
    let err = upgrade_to(TO)
        .plan(&common::empty_cluster())
        .expect_err("refused");
    assert!(
        matches!(err, PlanError::NoServerToUpgrade { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("install FQDN"), "{err}");
}

#[test]
fn an_interrupted_upgrade_goes_on_and_another_target_is_refused_meanwhile() {
    let start = installed();
    let params = upgrade_to(TO);
    let (steps, _) = run(&params, &start, &same_major).expect("upgrades");
    // Stop right after the database moved to the new image.
    let mut observed = start.clone();
    let mut copy = params.clone();
    copy.backup = true;
    for step in &steps {
        observed = carried_out(&observed, &params.namespace, step, &same_major);
        if step.id == "db-deployment" {
            break;
        }
    }
    // Another target while this upgrade is unfinished: refused.
    let err = upgrade_to("2026.10").plan(&observed).expect_err("refused");
    assert!(
        matches!(err, PlanError::UpgradeUnfinished { .. }),
        "{err:?}"
    );
    // The same one goes on: the backup is not taken again (the database runs the new image).
    let (rest, end) = run(&copy, &observed, &same_major).expect("goes on");
    let rest_ids = ids(&rest);
    assert!(!rest_ids.contains(&"db-backup"), "{rest_ids:?}");
    assert!(rest_ids.contains(&"server-deployment"), "{rest_ids:?}");
    assert!(params.plan(&end).expect("plans").is_done());
}

pub(crate) fn rollback_of(params: &UpgradeParams) -> UpgradeParams {
    UpgradeParams {
        rollback: true,
        ..params.clone()
    }
}

#[test]
fn a_rollback_restores_the_backup_and_the_recorded_images_only() {
    let start = installed();
    let params = upgrade_to(TO);
    let (_, upgraded) = run(&params, &start, &same_major).expect("upgrades");
    let record = UpgradeRecord::read(&upgraded).expect("recorded");
    let back = rollback_of(&params);
    let (steps, end) = run(&back, &upgraded, &same_major).expect("rolls back");
    let done = ids(&steps);
    assert!(position(&done, "scale-uyuni") < position(&done, "scale-db"));
    assert!(position(&done, "scale-db") < position(&done, "db-restore"));
    assert!(position(&done, "db-restore") < position(&done, "db-deployment"));
    // Only images the record names before the upgrade.
    let recorded: Vec<&String> = record.from.values().collect();
    for step in &steps {
        if let Some(Object::Deployment(d)) = step.action.object() {
            let image = d
                .spec
                .as_ref()
                .expect("spec")
                .template
                .spec
                .as_ref()
                .expect("pod")
                .containers[0]
                .image
                .clone()
                .expect("image");
            assert!(recorded.contains(&&image), "{} sets {image}", step.id);
        }
    }
    for name in [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT] {
        assert_eq!(
            live_image(&end, name),
            record.from.get(name).cloned(),
            "{name}"
        );
    }
    let closed = UpgradeRecord::read(&end).expect("kept");
    assert!(!closed.rolled_back.is_empty());
    // Again: nothing left to do.
    let again = back.plan(&end).expect("plans");
    assert!(again.is_done(), "{:?}", again.next_step());
    // A new upgrade after it takes a new backup.
    let mut again = upgrade_to(TO);
    again.run_id = "20261204130000".to_owned();
    let (steps, _) = run(&again, &end, &same_major).expect("upgrades again");
    assert!(ids(&steps).contains(&"db-backup"), "{:?}", ids(&steps));
}

/// `status` during a rollback says it is under way and how to go on; after it, rolled back
/// with no problem left of the upgrade.
#[test]
fn status_shows_a_rollback_under_way_until_it_has_ended() {
    use uyuni_core::status::{Reason, report};
    let kubectl = uyuni_core::kubectl::Kubectl::default();
    let params = upgrade_to(TO);
    let ns = params.namespace.clone();
    let upgrade_state = |observed: &Observed| {
        let status = report(&ns, observed, &[], &kubectl);
        let state = status.upgrade.as_ref().map(|u| u.state);
        let unfinished: Vec<String> = status
            .problems
            .iter()
            .filter(|p| p.reason == Reason::RollbackUnfinished)
            .map(|p| p.message.clone())
            .collect();
        (state, unfinished)
    };
    let (_, upgraded) = run(&params, &installed(), &same_major).expect("upgrades");
    assert_eq!(upgrade_state(&upgraded), (Some("complete"), vec![]));
    let back = rollback_of(&params);
    // The rollback's steps one by one, as a run killed after each would leave the cluster.
    let mut observed = upgraded;
    let mut seen_under_way = false;
    while let Some(step) = back.plan(&observed).expect("plans").next_step().cloned() {
        observed = carried_out(&observed, &ns, &step, &same_major);
        let (state, unfinished) = upgrade_state(&observed);
        if back.plan(&observed).expect("plans").is_done() {
            break;
        }
        assert_eq!(state, Some("rolling-back"), "after {}", step.id);
        assert_eq!(unfinished.len(), 1, "after {}", step.id);
        assert!(
            unfinished[0].contains("kubectl uyuni -n uyuni upgrade --rollback"),
            "{}",
            unfinished[0]
        );
        seen_under_way = true;
    }
    assert!(seen_under_way, "the rollback took a single step");
    assert_eq!(upgrade_state(&observed), (Some("rolled-back"), vec![]));
}

#[test]
fn a_rollback_after_a_major_upgrade_returns_to_the_old_volume_and_without_a_backup_is_refused() {
    let start = installed();
    let params = upgrade_to(TO);
    let major = |image: &str| if image.ends_with(TO) { 19 } else { 18 };
    let (_, upgraded) = run(&params, &start, &major).expect("upgrades");
    let (steps, end) = run(&rollback_of(&params), &upgraded, &major).expect("rolls back");
    assert!(!ids(&steps).contains(&"db-restore"));
    assert_eq!(claim_of(&end).as_deref(), Some("var-pgsql18"));
    assert!(
        end.contains(Kind::PersistentVolumeClaim, "var-pgsql19"),
        "a claim was deleted"
    );

    let no_backup = UpgradeParams {
        backup: false,
        ..upgrade_to(TO)
    };
    let (_, upgraded) = run(&no_backup, &start, &same_major).expect("upgrades");
    let err = rollback_of(&no_backup)
        .plan(&upgraded)
        .expect_err("refused");
    assert!(err.to_string().contains("--no-backup"), "{err}");
    let err = rollback_of(&params).plan(&start).expect_err("refused");
    assert!(
        matches!(err, PlanError::NothingToRollBack { .. }),
        "{err:?}"
    );
}

/// The steps an upgrade carries out, with and without a PostgreSQL major change, and a
/// rollback's, as the dry run and the progress show them.
#[test]
fn upgrade_and_rollback_steps_are_as_recorded() {
    let start = installed();
    let params = upgrade_to(TO);
    let (same, upgraded) = run(&params, &start, &same_major).expect("upgrades");
    let major = |image: &str| if image.ends_with(TO) { 19 } else { 18 };
    let (to_19, _) = run(&params, &start, &major).expect("upgrades");
    let (back, _) = run(&rollback_of(&params), &upgraded, &same_major).expect("rolls back");
    let mut golden = uyuni_testdata::golden::GoldenDir::new("upgrade-steps");
    for (name, steps) in [
        ("same-major.txt", &same),
        ("major.txt", &to_19),
        ("rollback.txt", &back),
    ] {
        golden.file(name, uyuni_core::render::steps_text(steps));
    }
    golden.check();
}

pub(crate) fn migrated_with_tag(tag: Option<&str>) -> MigrateParams {
    let mut args: MigrateArgs = common::args_with_ssh(&common::private_key("fixture-private-key"));
    args.spec.tag = tag.map(str::to_owned);
    MigrateParams::from_args(&args).expect("valid")
}

/// A migrated server upgrades on migrate's own end state; an unfinished migration is refused.
#[test]
fn a_migrated_server_upgrades_on_migrates_end_state_and_an_unfinished_one_is_refused() {
    let migrated = migrated_with_tag(Some(FROM));
    let start = common::after_migration(&migrated);
    let mut target = migrated_with_tag(Some(TO));
    target.run_id = "20261204120000".to_owned();
    // The migration's run had the source's key; an upgrade gives none and reuses the Secret.
    target.ssh_key = None;
    target.ssh_config = None;
    let params = UpgradeParams {
        origin: Origin::Migrated(Box::new(target)),
        backup: true,
        rollback: false,
    };
    let (steps, end) = run(&params, &start, &same_major).expect("upgrades");
    let done = ids(&steps);
    assert!(
        position(&done, "db-backup") < position(&done, "db-deployment"),
        "{done:?}"
    );
    for name in [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT] {
        assert!(
            live_image(&end, name).is_some_and(|i| i.ends_with(TO)),
            "{name}"
        );
    }
    // No data step of the migration ran again.
    for id in [
        "data-sync",
        "db-fixup",
        "db-upgrade",
        "db-passwords",
        "db-migration-sql",
        "ca-key",
    ] {
        assert!(!done.contains(&id), "{id} ran again: {done:?}");
    }
    assert!(params.plan(&end).expect("plans").is_done());

    // And back: the backup restored, migrate's end state on the images before.
    let (back, rolled) = run(&rollback_of(&params), &end, &same_major).expect("rolls back");
    assert!(ids(&back).contains(&"db-restore"), "{:?}", ids(&back));
    for name in [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT] {
        assert!(
            live_image(&rolled, name).is_some_and(|i| i.ends_with(FROM)),
            "{name}"
        );
    }
    for id in [
        "data-sync",
        "db-fixup",
        "db-upgrade",
        "db-passwords",
        "db-migration-sql",
    ] {
        assert!(!ids(&back).contains(&id), "{id} ran in the rollback");
    }

    let err = params
        .plan(&common::after_sync(&migrated))
        .expect_err("refused");
    assert!(
        matches!(err, PlanError::MigrationUnfinished { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("migrate uyuni.example.com"),
        "{err}"
    );
}

/// The new image on `db` or `uyuni`, written by this step.
fn sets_new_image(step: &uyuni_core::Step) -> bool {
    match step.action.object() {
        Some(Object::Deployment(d)) => {
            let name = d.metadata.name.clone().unwrap_or_default();
            (name == names::SERVER_DEPLOYMENT || name == names::DB_DEPLOYMENT)
                && d.spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref())
                    .and_then(|p| p.containers[0].image.clone())
                    .is_some_and(|i| i.ends_with(TO))
        }
        _ => false,
    }
}

fn succeeded(observed: &Observed, step: &str) -> bool {
    observed
        .jobs_for_step(step)
        .iter()
        .any(|j| uyuni_core::observed::job_state(j) == uyuni_core::observed::JobState::Succeeded)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]
    /// Whatever the major change, the backup choice and which attempts of the data Job fail:
    /// no plan sets `db` or the server to a new image before the database's data step
    /// succeeded, no plan deletes anything (the old volume and the backup stay), and the
    /// upgrade still ends with the new images once an attempt succeeds.
    #[test]
    fn no_new_image_before_the_data_step_and_nothing_deleted(
        major in proptest::bool::ANY,
        backup in proptest::bool::ANY,
        failures in 0usize..3,
    ) {
        let start = installed();
        let mut params = upgrade_to(TO);
        params.backup = backup;
        let pg = move |image: &str| if major && image.ends_with(TO) { 19 } else { 18 };
        let data_step = match (major, backup) {
            (true, _) => Some("db-upgrade"),
            (false, true) => Some("db-backup"),
            (false, false) => None,
        };
        let mut observed = start.clone();
        let mut failed = 0;
        let mut done = false;
        for _ in 0..200 {
            let plan = params.plan(&observed).expect("plans");
            for step in &plan.steps {
                proptest::prop_assert!(!matches!(step.action, Action::Delete { .. }), "{} deletes", step.id);
            }
            let Some(step) = plan.next_step().cloned() else {
                done = true;
                break;
            };
            if sets_new_image(&step) && let Some(data) = data_step {
                proptest::prop_assert!(succeeded(&observed, data), "{} before {data} succeeded", step.id);
            }
            if Some(step.id.as_str()) == data_step && failed < failures {
                // This attempt fails: the Job as the cluster would show it.
                if let Action::RunJob { job, .. } = &step.action {
                    observed.insert(Object::Job(common::finished((**job).clone(), false)));
                    failed += 1;
                    continue;
                }
            }
            observed = carried_out(&observed, &params.namespace, &step, &pg);
        }
        proptest::prop_assert!(done, "did not converge");
        proptest::prop_assert!(live_image(&observed, names::DB_DEPLOYMENT).is_some_and(|i| i.ends_with(TO)));
        proptest::prop_assert!(observed.contains(Kind::PersistentVolumeClaim, "var-pgsql18"));
    }
}

/// A rollback after an upgrade whose backup failed (the database never ran the new image):
/// no restore, the server started again on its images.
#[test]
fn a_rollback_after_a_failed_backup_starts_the_server_on_its_images() {
    let start = installed();
    let params = upgrade_to(TO);
    let (steps, _) = run(&params, &start, &same_major).expect("upgrades");
    let mut observed = start.clone();
    for step in &steps {
        if step.id == "db-backup" {
            if let Action::RunJob { job, .. } = &step.action {
                observed.insert(Object::Job(common::finished((**job).clone(), false)));
            }
            break;
        }
        observed = carried_out(&observed, &params.namespace, step, &same_major);
    }
    assert_eq!(
        observed
            .deployment(names::SERVER_DEPLOYMENT)
            .and_then(|d| d.spec.as_ref())
            .and_then(|s| s.replicas),
        Some(0)
    );
    let (back, end) = run(&rollback_of(&params), &observed, &same_major).expect("rolls back");
    let done = ids(&back);
    assert!(!done.contains(&"db-restore"), "{done:?}");
    assert!(done.contains(&"server-deployment"), "{done:?}");
    assert!(live_image(&end, names::SERVER_DEPLOYMENT).is_some_and(|i| i.ends_with(FROM)));
    assert_eq!(
        end.deployment(names::SERVER_DEPLOYMENT)
            .and_then(|d| d.spec.as_ref())
            .and_then(|s| s.replicas),
        Some(1)
    );
}

/// An upgrade to the images the server runs writes nothing: no inspection, no backup volume.
#[test]
fn an_upgrade_to_the_images_it_runs_plans_nothing() {
    let start = installed();
    let plan = upgrade_to(FROM).plan(&start).expect("plans");
    assert!(plan.is_done(), "{:?}", plan.next_step());
}

/// Every Job of an install, a migration and an upgrade that runs without a ServiceAccount of
/// its own gets no token; every Job runs with the runtime's seccomp profile and without
/// privilege escalation; none of that is part of the database Jobs' identity.
#[test]
fn jobs_that_never_call_the_api_get_no_token() {
    let migrated = common::params();
    let start = common::after_sync(&migrated);
    let preview = uyuni_core::preview(&migrated, &start).expect("plans");
    let (upgrade, _) = run(&upgrade_to(TO), &installed(), &same_major).expect("upgrades");
    let install = uyuni_core::preview(&installed_with_tag(FROM), &common::empty_cluster())
        .expect("plans")
        .executed;
    let mut seen = 0;
    for step in preview.executed.iter().chain(&upgrade).chain(&install) {
        let Action::RunJob { job, .. } = &step.action else {
            continue;
        };
        let pod = job
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod");
        let own = pod.service_account_name.is_some();
        assert_eq!(
            pod.automount_service_account_token,
            (!own).then_some(false),
            "{}",
            step.id
        );
        assert_eq!(
            pod.security_context
                .as_ref()
                .and_then(|s| s.seccomp_profile.as_ref())
                .map(|p| p.type_.as_str()),
            Some("RuntimeDefault"),
            "{}",
            step.id
        );
        assert!(
            pod.containers.iter().all(|c| c
                .security_context
                .as_ref()
                .and_then(|s| s.allow_privilege_escalation)
                == Some(false)),
            "{}",
            step.id
        );
        seen += 1;
    }
    assert!(seen > 10, "{seen} Jobs");
    // A database Job built by a version that mounted the token is the same work.
    let fixup = preview
        .executed
        .iter()
        .find(|s| s.id == "db-fixup")
        .expect("fix-up");
    let Action::RunJob { job, .. } = &fixup.action else {
        panic!("not a Job")
    };
    let mut older = (**job).clone();
    if let Some(pod) = older.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        // What that version wrote: no token choice, no seccomp profile, no container security
        // context, no resources.
        pod.automount_service_account_token = None;
        if let Some(sc) = pod.security_context.as_mut() {
            sc.seccomp_profile = None;
        }
        if pod.security_context == Some(Default::default()) {
            pod.security_context = None;
        }
        for c in &mut pod.containers {
            c.security_context = None;
            c.resources = None;
        }
    }
    // Its identity as that version computed it: the spec without the images and pull Secrets.
    let mut identity = older.spec.clone().expect("spec");
    if let Some(pod) = identity.template.spec.as_mut() {
        pod.image_pull_secrets = None;
        for c in pod
            .containers
            .iter_mut()
            .chain(pod.init_containers.iter_mut().flatten())
        {
            c.image = None;
            c.image_pull_policy = None;
        }
    }
    older.metadata.annotations.get_or_insert_default().insert(
        labels::SPEC_HASH_ANNOTATION.to_owned(),
        uyuni_core::builders::data_sync::spec_hash(&identity),
    );
    let mut observed = start.clone();
    observed.insert(Object::Job(common::finished(older, true)));
    let plan = uyuni_core::plan::plan(&migrated, &observed).expect("plans");
    let step = plan
        .steps
        .iter()
        .find(|s| s.id == "db-fixup")
        .expect("planned");
    assert_eq!(step.action, Action::None, "{}", step.reason);
}

/// A quota in the namespace: `requests.storage` of `hard`, `used` of it taken.
fn storage_quota(hard: &str, used: &str) -> Object {
    Object::ResourceQuota(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "storage", "namespace": "uyuni"},
            "spec": {"hard": {"requests.storage": hard}},
            "status": {"hard": {"requests.storage": hard}, "used": {"requests.storage": used}},
        }))
        .expect("a ResourceQuota"),
    )
}

/// Runs until the plan is refused; returns the steps carried out before and the refusal.
fn run_to_refusal(
    params: &UpgradeParams,
    start: &Observed,
    pg_major: &dyn Fn(&str) -> u32,
) -> (Vec<String>, PlanError) {
    let mut observed = start.clone();
    let mut executed = Vec::new();
    for _ in 0..50 {
        let step = match params.plan(&observed) {
            Err(err) => return (executed, err),
            Ok(plan) => plan.next_step().cloned().expect("refused before the end"),
        };
        observed = carried_out(&observed, &params.namespace, &step, pg_major);
        executed.push(step.id);
    }
    panic!("no refusal in 50 steps");
}

#[test]
fn too_little_room_for_the_new_volume_is_refused_before_any_write_of_the_servers() {
    let mut start = installed();
    let size = match start.get(Kind::PersistentVolumeClaim, "var-pgsql18") {
        Some(object) => object.to_json()["spec"]["resources"]["requests"]["storage"].clone(),
        None => panic!("no database claim"),
    };
    assert_eq!(size, "50Gi", "the fixture's database volume");
    // 60Gi with the database's 50Gi used: 10Gi left for a 50Gi backup.
    start.insert(storage_quota("60Gi", "50Gi"));
    let params = upgrade_to(TO);
    let (done, err) = run_to_refusal(&params, &start, &same_major);
    assert!(
        done.iter().all(|id| id.starts_with("inspect-")),
        "written before the refusal: {done:?}"
    );
    assert_eq!(done.len(), 4, "{done:?}");
    let text = err.to_string();
    assert!(matches!(err, PlanError::UpgradeRefused { .. }), "{err:?}");
    for part in [
        "ResourceQuota storage",
        "10.0 GiB",
        "var-pgsql18-backup needs 50Gi",
        "describe resourcequota storage",
        "--no-backup",
        "upgrade --rollback",
        "Nothing of the server was changed",
    ] {
        assert!(text.contains(part), "{part:?} missing: {text}");
    }
    // The dry run meets it too.
    let preview = preview(&params, &start);
    assert!(preview.is_err(), "the preview went on");

    // Without a backup there is no new volume: the upgrade goes on.
    let no_backup = UpgradeParams {
        backup: false,
        ..params.clone()
    };
    run(&no_backup, &start, &same_major).expect("upgrades without a backup");

    // A new major needs its volume whatever --no-backup says; with room, it goes on.
    let major = |image: &str| if image.ends_with(TO) { 19 } else { 18 };
    let (_, err) = run_to_refusal(&no_backup, &start, &major);
    let text = err.to_string();
    assert!(
        text.contains("var-pgsql19 needs 50Gi") && !text.contains("--no-backup"),
        "{text}"
    );
    start.insert(storage_quota("100Gi", "50Gi"));
    let (_, end) = run(&params, &start, &major).expect("upgrades with room");
    assert_eq!(claim_of(&end).as_deref(), Some("var-pgsql19"));
}

/// An upgrade resumed after its outage began, before its backup volume was created (the run
/// was interrupted, or the quota changed meanwhile): the room is checked again, and the
/// refusal says the upgrade has begun, the database is untouched, and the ways on.
#[test]
fn a_resumed_upgrade_checks_the_room_for_its_backup_until_the_volume_exists() {
    let params = upgrade_to(TO);
    let mut observed = installed();
    loop {
        let plan = params.plan(&observed).expect("plans");
        let step = plan
            .next_step()
            .cloned()
            .expect("not done before the backup");
        if step.id == "pvc-var-pgsql18-backup" {
            break;
        }
        observed = carried_out(&observed, &params.namespace, &step, &same_major);
    }
    assert_eq!(
        observed
            .deployment(names::SERVER_DEPLOYMENT)
            .and_then(|d| d.spec.as_ref())
            .and_then(|s| s.replicas),
        Some(0),
        "the outage began"
    );
    observed.insert(storage_quota("60Gi", "50Gi"));
    let err = params.plan(&observed).expect_err("refused");
    assert!(matches!(err, PlanError::UpgradeStalled { .. }), "{err:?}");
    let text = err.to_string();
    for part in [
        "cannot go on",
        "ResourceQuota storage",
        "var-pgsql18-backup needs 50Gi",
        "--no-backup",
        "The database is as it was before the upgrade",
        "upgrade --rollback",
    ] {
        assert!(text.contains(part), "{part:?} missing: {text}");
    }
    assert!(
        !text.contains("Nothing of the server was changed"),
        "{text}"
    );
    // With room, it goes on to the end.
    observed.insert(storage_quota("100Gi", "50Gi"));
    let (_, end) = run(&params, &observed, &same_major).expect("upgrades");
    assert!(claim_of(&end).is_some());
    assert!(end.contains(Kind::PersistentVolumeClaim, "var-pgsql18-backup"));
}

fn lifecycle(
    action: uyuni_core::plan::lifecycle::Lifecycle,
) -> uyuni_core::plan::lifecycle::LifecycleParams {
    uyuni_core::plan::lifecycle::LifecycleParams {
        server: (*upgrade_to(FROM)).clone(),
        action,
    }
}

#[test]
fn a_server_stop_stopped_is_refused_before_any_write_until_it_is_started() {
    use uyuni_core::plan::lifecycle::Lifecycle;
    let running = installed();
    let stopped = preview(&lifecycle(Lifecycle::Stop), &running)
        .expect("stops")
        .end;
    let params = upgrade_to(TO);
    let err = params.plan(&stopped).expect_err("refused");
    let text = err.to_string();
    assert!(matches!(err, PlanError::ServerStopped { .. }), "{err:?}");
    assert!(
        text.contains("is stopped")
            && text.contains("uyuni -n uyuni start")
            && text.contains("Nothing was written"),
        "{text}"
    );
    // Started again: the upgrade records the counts the server runs with, never zeros.
    let started = preview(&lifecycle(Lifecycle::Start), &stopped)
        .expect("starts")
        .end;
    let (_, end) = run(&params, &started, &same_major).expect("upgrades");
    let record = UpgradeRecord::read(&end).expect("recorded");
    assert!(
        !record.replicas.is_empty() && record.replicas.values().all(|n| *n > 0),
        "{:?}",
        record.replicas
    );
    // An upgrade's own outage is no stop: a run interrupted there goes on.
    let mut observed = started.clone();
    let mut scaled_down = false;
    for _ in 0..200 {
        let plan = params.plan(&observed).expect("goes on");
        let Some(step) = plan.next_step().cloned() else {
            break;
        };
        scaled_down |= step.id == "scale-db";
        observed = carried_out(&observed, &params.namespace, &step, &same_major);
        if scaled_down {
            params
                .plan(&observed)
                .expect("an upgrade's outage is not refused");
        }
    }
    assert!(scaled_down);
}

/// `upgrade --rollback` of a server `stop` stopped after its upgrade is refused before any
/// write, naming `start`: it would otherwise start it again. Started, the rollback goes on; a
/// rollback interrupted in its own outage goes on too; after the rollback, a stopped server is
/// again not started by a re-run of it.
#[test]
fn a_rollback_of_a_server_stopped_after_its_upgrade_is_refused_until_it_is_started() {
    use uyuni_core::plan::lifecycle::Lifecycle;
    let params = upgrade_to(TO);
    let (_, upgraded) = run(&params, &installed(), &same_major).expect("upgrades");
    let stopped = preview(&lifecycle(Lifecycle::Stop), &upgraded)
        .expect("stops")
        .end;
    let back = UpgradeParams {
        rollback: true,
        ..params.clone()
    };
    let err = back.plan(&stopped).expect_err("refused");
    assert!(
        matches!(err, PlanError::StoppedBeforeRollback { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    for part in [
        "is stopped",
        "uyuni -n uyuni start",
        "upgrade --rollback",
        "Nothing was written",
    ] {
        assert!(text.contains(part), "{part:?} missing: {text}");
    }
    let started = preview(&lifecycle(Lifecycle::Start), &stopped)
        .expect("starts")
        .end;
    // Interrupted after its outage began: it goes on.
    let mut observed = started.clone();
    let mut scaled_down = false;
    for _ in 0..200 {
        let plan = back.plan(&observed).expect("goes on");
        let Some(step) = plan.next_step().cloned() else {
            break;
        };
        scaled_down |= step.id == "scale-db";
        observed = carried_out(&observed, &params.namespace, &step, &same_major);
    }
    assert!(scaled_down);
    let rolled_back = observed;
    for name in [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT] {
        assert!(
            live_image(&rolled_back, name).is_some_and(|i| i.ends_with(FROM)),
            "{name}"
        );
    }
    let stopped_again = preview(&lifecycle(Lifecycle::Stop), &rolled_back)
        .expect("stops")
        .end;
    let err = back.plan(&stopped_again).expect_err("refused again");
    assert!(
        matches!(err, PlanError::StoppedBeforeRollback { .. }),
        "{err:?}"
    );
}

/// Before a PostgreSQL major upgrade, its image is checked for the majors it goes between
/// (`pg_upgrade` of the new, the binaries of the old), before anything of the server's is
/// written; while the check has not passed, nothing more is planned. A same-major upgrade
/// needs no such check.
#[test]
fn the_database_upgrade_image_is_checked_for_the_majors_before_any_write() {
    let major = |image: &str| if image.ends_with(TO) { 19 } else { 18 };
    let params = upgrade_to(TO);
    let (steps, _) = run(&params, &installed(), &major).expect("upgrades");
    let done = ids(&steps);
    assert!(
        position(&done, "check-db-upgrade") < position(&done, "upgrade-record"),
        "{done:?}"
    );
    let check = steps
        .iter()
        .find(|s| s.id == "check-db-upgrade")
        .expect("the check");
    let Action::RunJob { job, .. } = &check.action else {
        panic!("not a Job")
    };
    let container = &job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod")
        .containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some(params.spec.image.database_upgrade.as_str())
    );
    let env = |name: &str| {
        container
            .env
            .iter()
            .flatten()
            .find(|e| e.name == name)
            .and_then(|e| e.value.clone())
    };
    assert_eq!(env("TARGET_MAJOR").as_deref(), Some("19"));
    assert_eq!(env("SOURCE_MAJORS").as_deref(), Some("18"));

    // The check failed: the next plan runs it again and plans no write of the server's.
    let mut observed = installed();
    for step in &steps {
        if step.id == "check-db-upgrade" {
            observed.insert(Object::Job(common::finished((**job).clone(), false)));
            break;
        }
        observed = carried_out(&observed, &params.namespace, step, &major);
    }
    let plan = params.plan(&observed).expect("plans");
    let next = plan.next_step().expect("a step");
    assert_eq!(next.id, "check-db-upgrade", "{}", next.reason);
    assert!(
        !plan.steps.iter().any(|s| s.id == "upgrade-record"),
        "{:?}",
        ids(&plan.steps)
    );

    let (same, _) = run(&params, &installed(), &same_major).expect("upgrades");
    assert!(!ids(&same).contains(&"check-db-upgrade"));
}

#[test]
fn the_database_step_names_the_postgresql_major_the_image_reported() {
    let major = |image: &str| if image.ends_with(TO) { 19 } else { 18 };
    let (steps, _) = run(&upgrade_to(TO), &installed(), &major).expect("upgrades");
    let db = steps
        .iter()
        .find(|s| s.id == "db-deployment")
        .expect("db planned");
    assert_eq!(
        db.description,
        "the PostgreSQL 19 database on volume var-pgsql19"
    );
}

#[test]
fn a_rollbacks_releases_go_from_the_upgraded_one_back_to_the_one_before() {
    let record = UpgradeRecord {
        release_from: "2025.10".into(),
        release_to: "2026.04".into(),
        ..Default::default()
    };
    assert_eq!(record.releases(false), ("2025.10", "2026.04"));
    assert_eq!(record.releases(true), ("2026.04", "2025.10"));
}
