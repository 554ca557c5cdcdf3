//! The database phase of a migration, after a complete final sync, in two parts around the TLS
//! phase. The data part: fix-up of the synced data and the PostgreSQL major upgrade when the
//! data is older than the DB image. The service part: the credentials, the re-hash of md5
//! passwords, the `db` Deployment and its Services, the wait for it, and the migration-only SQL.
//! The `db` pod mounts Secret `db-cert`, so it comes after the TLS phase; the data part does not
//! need TLS and comes first.
//!
//! Order (nothing starts PostgreSQL on data that has not been upgraded): a running server and
//! `db` are stopped before a Job works on the data; fix-up → upgrade → (TLS) → credentials →
//! password re-hash → `db` Deployment → ready → SQL. Each step has an action until it is done,
//! and only the first step with an action is carried out, so a later step never runs before an
//! earlier one is complete.

use super::{PlanError, apply_step, deployment_step_with, job_step, keep_step};
use crate::builders::{database, pvc, server};
use crate::catalogue::names;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::{ExtractedData, Observed, deployment_stopped, desired_replicas};
use crate::params::{MigrateParams, ServerParams};
use crate::pg;
use crate::plan::{Action, DeploymentWait, JobWait, Op, Step};
use crate::resolve::Facts;
use crate::settings::ServerSettings;

/// The fix-up and the SQL are short; the limit still allows for pulling the image.
pub(super) const SHORT_JOB: JobWait = JobWait {
    timeout_seconds: Some(1800),
    log_tail_lines: 20,
};
/// `pg_upgrade` copies the whole database: its time grows with the data.
const UPGRADE_JOB: JobWait = JobWait {
    timeout_seconds: None,
    log_tail_lines: 30,
};
/// The DB image's bootstrap on migrated data can take a while; pods that cannot start end the
/// wait earlier.
pub const DB_READY_WAIT: DeploymentWait = DeploymentWait {
    timeout_seconds: Some(3900),
    unschedulable_grace_seconds: crate::plan::UNSCHEDULABLE_GRACE_SECONDS,
    log_tail_lines: 20,
};
/// Stopping waits for pods to go, not to start: there is no failing container to show.
const STOP_WAIT: DeploymentWait = DeploymentWait {
    timeout_seconds: Some(600),
    unschedulable_grace_seconds: crate::plan::UNSCHEDULABLE_GRACE_SECONDS,
    log_tail_lines: 0,
};

fn is_done(step: &Step) -> bool {
    step.action == Action::None
}

/// The claim steps keep what exists, as for the synced claims.
pub(super) fn claim_step(params: &ServerParams, observed: &Observed) -> Step {
    let claim = database::upgraded_claim(params);
    let id = format!("pvc-{}", claim.name);
    let description = format!(
        "volume {} for the database upgraded to PostgreSQL {}",
        claim.name,
        pg::TARGET_MAJOR
    );
    let target = ObjectRef::new(Kind::PersistentVolumeClaim, claim.name.clone());
    if observed.objects.contains_key(&target) {
        return keep_step(
            &id,
            description,
            target,
            "exists; existing claims are never recreated".into(),
        );
    }
    apply_step(
        &id,
        description,
        Object::PersistentVolumeClaim(pvc::pvc(&params.namespace, &claim)),
        observed,
    )
}

/// The database phase's steps, split where the TLS phase goes (see the module comment).
pub(super) struct DatabaseSteps {
    /// Stops, fix-up, upgrade: the data made fit for the DB image.
    pub data: Vec<Step>,
    /// Credentials, the password re-hash, Services, the `db` Deployment, its wait, the
    /// migration SQL.
    pub service: Vec<Step>,
}

pub(super) fn steps(
    params: &MigrateParams,
    observed: &Observed,
    data: &ExtractedData,
    facts: &Facts,
) -> Result<DatabaseSteps, PlanError> {
    let ns = &params.namespace;
    let upgrade = facts.pg.clone().map_err(|source| PlanError::PgVersion {
        job: data.job.clone(),
        namespace: ns.clone(),
        source,
    })?;

    let fixup = job_step(
        observed,
        database::fixup_job(params, data, upgrade),
        SHORT_JOB,
    );
    let upgrade_steps = match upgrade {
        pg::Upgrade::NotNeeded => Vec::new(),
        pg::Upgrade::Needed { from } => vec![
            claim_step(params, observed),
            job_step(
                observed,
                database::upgrade_job(params, data, Some(from)),
                UPGRADE_JOB,
            ),
        ],
        pg::Upgrade::Unknown => vec![
            claim_step(params, observed),
            job_step(
                observed,
                database::upgrade_job(params, data, None),
                UPGRADE_JOB,
            ),
        ],
    };

    // Planned here for `pending`; it runs in the service part, once the credentials exist.
    let passwords = job_step(
        observed,
        database::passwords_job(params, data, upgrade),
        SHORT_JOB,
    );

    // Once the database or the server runs on this sync's data, the data is theirs: a data
    // step that is not done (its Jobs deleted, or a spec this version builds differently) is
    // never run on it again, and the migration SQL not once the server ran.
    let db_owns = super::phase::taken_over(observed, names::DB_DEPLOYMENT, &data.job);
    let server_owns = super::phase::taken_over(observed, server::SERVER_DEPLOYMENT, &data.job);
    let owner = if server_owns {
        server::SERVER_DEPLOYMENT
    } else {
        names::DB_DEPLOYMENT
    };
    let settle = |step: Step| {
        if db_owns || server_owns {
            settled(step, owner, &data.job)
        } else {
            step
        }
    };
    let fixup = settle(fixup);
    let upgrade_steps: Vec<Step> = upgrade_steps.into_iter().map(settle).collect();
    let passwords = settle(passwords);
    let sql_owner = server_owns.then_some(&data.job);

    let mut steps = Vec::new();
    // PostgreSQL must not run on data a Job is about to change.
    let pending =
        !is_done(&fixup) || upgrade_steps.iter().any(|s| !is_done(s)) || !is_done(&passwords);
    // The database's consumers go first (images-today §D.3 ordering), then the database.
    for (name, id) in [
        (server::SERVER_DEPLOYMENT, "server-stop"),
        (server::HUB_DEPLOYMENT, "hub-xmlrpc-stop"),
        (server::COCO_DEPLOYMENT, "coco-stop"),
    ] {
        if let Some(d) = observed.deployment(name).filter(|_| pending)
            && !deployment_stopped(d)
        {
            steps.push(Step {
                id: id.to_owned(),
                description: format!("stop {name} while the database is worked on"),
                op: Op::Scale,
                target: ObjectRef::new(Kind::Deployment, name),
                reason: format!(
                    "{} replica(s) running and database Jobs pending",
                    desired_replicas(d)
                ),
                action: Action::Scale {
                    name: name.to_owned(),
                    replicas: 0,
                    wait: STOP_WAIT,
                    restarted_at: None,
                    hardened: None,
                },
            });
        }
    }
    if let Some(db) = observed
        .deployment(names::DB_DEPLOYMENT)
        .filter(|_| pending)
    {
        let target = ObjectRef::new(Kind::Deployment, names::DB_DEPLOYMENT);
        let description = "stop the database while its data is worked on".to_owned();
        if pending && !deployment_stopped(db) {
            steps.push(Step {
                id: "db-stop".to_owned(),
                description,
                op: Op::Scale,
                target,
                reason: format!(
                    "{} replica(s) running and database Jobs pending",
                    desired_replicas(db)
                ),
                action: Action::Scale {
                    name: names::DB_DEPLOYMENT.to_owned(),
                    replicas: 0,
                    wait: STOP_WAIT,
                    restarted_at: None,
                    hardened: None,
                },
            });
        } else {
            steps.push(keep_step("db-stop", description, target, "stopped".into()));
        }
    }
    steps.push(fixup);
    steps.extend(upgrade_steps);

    let ns = &params.namespace;
    let credentials = database::credential_secrets(ns, data)
        .into_iter()
        .map(|secret| {
            let name = secret.metadata.name.clone().unwrap_or_default();
            let description = format!("{name} with the credentials migrated from the source");
            apply_step(&name, description, Object::Secret(secret), observed)
        })
        .collect();
    let sql = job_step(
        observed,
        database::migration_sql_job(params, data),
        SHORT_JOB,
    );
    let sql = match sql_owner {
        Some(job) => settled(sql, server::SERVER_DEPLOYMENT, job),
        None => sql,
    };
    Ok(DatabaseSteps {
        data: steps,
        service: service_steps(
            params,
            observed,
            &ServerSettings::migrated(data),
            &facts.db_claim,
            DatabaseCommand {
                credentials,
                before_start: vec![passwords],
                after_ready: vec![sql],
            },
        ),
    })
}

/// What a command adds to the database's service part: the credential Secrets (migrated, or
/// generated for a fresh server), Jobs on the data before `db` starts, and Jobs once it is
/// ready.
pub(super) struct DatabaseCommand {
    pub credentials: Vec<Step>,
    pub before_start: Vec<Step>,
    pub after_ready: Vec<Step>,
}

/// A Job step on data a Deployment runs on already: kept as it is when its Job succeeded,
/// otherwise never carried out (see [`super::phase::taken_over`]).
fn settled(step: Step, owner: &str, sync_job: &str) -> Step {
    if !matches!(step.action, Action::RunJob { .. } | Action::AwaitJob { .. }) {
        return step;
    }
    Step {
        op: Op::Unchanged,
        target: ObjectRef::new(Kind::Deployment, owner),
        reason: format!(
            "not run: Deployment {owner} runs on the data of Job {sync_job}, which this step would change"
        ),
        action: Action::None,
        ..step
    }
}

/// The PostgreSQL major of the database image `params` asks for, as a check or an inspection
/// of that image reported it (the newest first); `None` before either ran. A migration's is
/// [`pg::TARGET_MAJOR`]: its check takes no other.
pub fn reported_major(params: &ServerParams, observed: &Observed) -> Option<u32> {
    crate::resolve::reported(
        observed,
        &[
            crate::catalogue::steps::IMAGE_CHECK_DB,
            crate::builders::image_inspect::Role::Database.step(),
            crate::builders::image_inspect::Role::RunningDatabase.step(),
        ],
        &params.spec.image.database,
        |report| report.pg_major,
    )
}

/// The database as every command ends with it: the command's credentials and Jobs before the
/// start (migrate: the password re-hash), the Services, the `db` Deployment on `claim`, the
/// wait, and the command's Jobs once it is ready (migrate: the SQL).
pub(super) fn service_steps(
    params: &ServerParams,
    observed: &Observed,
    settings: &ServerSettings,
    claim: &str,
    command: DatabaseCommand,
) -> Vec<Step> {
    let ns = &params.namespace;
    let mut steps = command.credentials;
    // Their environment comes from the credential Secrets, written just before; the stops of
    // the data part have stopped the database for them.
    steps.extend(command.before_start);
    for service in [names::DB_SERVICE, names::REPORTDB_SERVICE] {
        steps.push(apply_step(
            &format!("service-{service}"),
            format!("Service {service} of the database"),
            Object::Service(database::service(
                ns,
                service,
                crate::ports::Features::default(),
            )),
            observed,
        ));
    }
    // A migration's check takes PostgreSQL TARGET_MAJOR only; a new server's image tells.
    let migrated = matches!(settings.origin, crate::settings::Origin::DataSync(_));
    let major = reported_major(params, observed).or(migrated.then_some(pg::TARGET_MAJOR));
    let what = match major {
        Some(major) => format!("the PostgreSQL {major} database"),
        None => "the database".to_owned(),
    };
    steps.push(deployment_step_with(
        "db-deployment",
        format!("{what} on volume {claim}"),
        database::db_deployment(params, settings, claim),
        observed,
        params.spec.network_policy,
    ));
    steps.push(super::deployment_wait_step(
        observed,
        "db-ready",
        names::DB_DEPLOYMENT,
        "wait until the database accepts connections".to_owned(),
        DB_READY_WAIT,
    ));
    steps.extend(command.after_ready);
    steps
}
