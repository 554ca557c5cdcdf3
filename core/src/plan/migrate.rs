//! `migrate`'s own planning: the checks of its phases, its opening (SSH material, the data
//! sync and its read-back) and what follows a complete final sync (the database's data made
//! fit for the image, the migrated CA or certificate), before the end state every command
//! shares (`super::end_state`). Everything here serves the migration only.

use crate::builders::{image_check, migration};
use crate::catalogue::names;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::Observed;
use crate::params::MigrateParams;
use crate::plan::{
    Action, Plan, PlanError, Planner, Step, apply_step, database, end_state, install, keep_step,
    opening,
    setup::{named_claim, pvc_steps},
    tls,
};

pub mod phase;
mod ssh;
pub(in crate::plan) mod sync;

use ssh::{cleanup_steps, ssh_config_step, ssh_key_step};
pub(in crate::plan) use sync::IMAGE_CHECK_WAIT;
use sync::sync_steps;
pub use sync::{PREPARE_CHECK_STEP, PREPARE_SYNC_STEP};

impl Planner for MigrateParams {
    fn server(&self) -> &crate::params::ServerParams {
        self
    }
    fn observation(&self) -> crate::observed::Observation {
        crate::observed::observation(self)
    }
    fn plan(&self, observed: &Observed) -> Result<Plan, PlanError> {
        plan(self, observed)
    }
    fn with_stand_in(&self, error: &PlanError) -> Option<Self> {
        (*error == PlanError::CaPasswordNeeded && self.ca_password.is_none()).then(|| {
            MigrateParams {
                ca_password: Some(crate::secret::SecretString::new(
                    crate::observed::PLACEHOLDER,
                )),
                ..self.clone()
            }
        })
    }
}

/// Every step after a complete final sync, planned from its data. Also run on the data of the
/// prepare copy before the final sync, for its errors: a refusal then comes while the source
/// still serves.
pub(in crate::plan) fn after_sync(
    params: &MigrateParams,
    observed: &Observed,
    data: &crate::observed::ExtractedData,
    db_claim: Option<String>,
) -> Result<Vec<Step>, PlanError> {
    // Decided before the first write after the sync, so that a run that cannot decide
    // changes nothing.
    let mut facts = crate::resolve::resolve(params, observed, data);
    if let Some(claim) = db_claim {
        facts.db_claim = claim;
    }
    let tftp = facts.tftp.map_err(|_| PlanError::TftpNotRecorded {
        job: data.job.clone(),
    })?;
    // The `db` pod mounts Secret `db-cert`: the TLS phase goes between the database's data
    // and its service. Planned in this order so that a refused PostgreSQL version is the
    // error reported, before a missing CA password.
    let database = database::steps(params, observed, data, &facts)?;
    let tls = tls::steps(params, observed, data, &facts)?;
    let settings = crate::settings::ServerSettings::migrated(data);
    Ok(end_state(
        params, observed, &settings, &facts, tftp, database, tls,
    ))
}

/// Plans `migrate` from what was observed.
pub fn plan(params: &MigrateParams, observed: &Observed) -> Result<Plan, PlanError> {
    let params = &*crate::resolve::in_effect(params, observed);
    let ns = &params.namespace;
    // The phase check is the planner's own (its phases, its errors); the others are decided in
    // `resolve`, except Pod Security, which builds the pods from the facts. Refused in this
    // order, before any write.
    install::refuse_installed(ns, observed)?;
    crate::plan::phase::check(params, observed)?;
    crate::plan::phase::check_images(params, observed)?;
    let preflight = crate::resolve::preflight(params, observed);
    preflight
        .cert_manager
        .map_err(|_| PlanError::CertManagerMissing)?;
    preflight.storage?;
    crate::pod_security::check(params, observed).map_err(|r| PlanError::PodSecurity {
        namespace: r.namespace,
        enforced: r.enforced,
        needed: r.needed,
        reasons: r.reasons,
    })?;
    // The --ssl-* certificates' names, before any write while no copy has told the source's
    // java.hostname; a --prepare run copies first and is checked on the copy's data.
    if !params.prepare && !matches!(observed.extracted(), Ok(Some(d)) if !d.placeholder) {
        let mut names = vec![params.source_fqdn.clone()];
        let cnames = params
            .spec
            .tls
            .cnames
            .iter()
            .filter(|c| **c != params.source_fqdn);
        names.extend(cnames.cloned());
        tls::check_file_names(
            params,
            &params.source_fqdn,
            &names,
            "Nothing was written",
            tls::migrated_name_reason(&params.source_fqdn, true),
        )?;
    }
    let mut steps = opening(params, observed, image_check::jobs(params))?;
    steps.extend(body(params, observed, None)?);
    // Last, after the end state: only `migrate` itself, not an upgrade of a migrated server.
    if !params.prepare && sync::final_sync_succeeded(observed) {
        steps.extend(cleanup_steps(params, observed)?);
    }
    Ok(Plan {
        namespace: ns.clone(),
        steps,
    })
}

/// Everything after the opening: the SSH material, the claims, the data sync and, after a
/// complete final sync, the database, TLS and the end state. `db_claim`: the database's
/// volume an upgrade puts it on, instead of the one the migration chose.
pub(in crate::plan) fn body(
    params: &MigrateParams,
    observed: &Observed,
    db_claim: Option<String>,
) -> Result<Vec<Step>, PlanError> {
    let ns = &params.namespace;
    let mut steps = vec![ssh_key_step(params, observed)?];
    steps.push(ssh_config_step(params, observed)?);
    steps.extend(
        pvc_steps(params, observed)
            .into_iter()
            .map(|step| named_claim(step, &params.source_fqdn)),
    );
    steps.push(apply_step(
        "sync-service-account",
        "ServiceAccount the data-sync Job runs as".into(),
        Object::ServiceAccount(migration::service_account(ns)),
        observed,
    ));
    steps.push(apply_step(
        "sync-role",
        format!(
            "permission to patch Secret {} only",
            names::MIGRATION_DATA_SECRET
        ),
        Object::Role(migration::role(ns)),
        observed,
    ));
    steps.push(apply_step(
        "sync-role-binding",
        "grants that permission to the data-sync ServiceAccount".into(),
        Object::RoleBinding(migration::role_binding(ns)),
        observed,
    ));
    let data_target = ObjectRef::new(Kind::Secret, names::MIGRATION_DATA_SECRET);
    let data_description = "Secret the data-sync Job reports its findings in".to_owned();
    if observed.objects.contains_key(&data_target) {
        steps.push(keep_step(
            "migration-data-secret",
            data_description,
            data_target,
            "exists".into(),
        ));
    } else {
        steps.push(apply_step(
            "migration-data-secret",
            data_description,
            Object::Secret(migration::migration_data_secret(ns)),
            observed,
        ));
    }
    let sync = sync_steps(params, observed)?;
    // The rest of the migration follows a complete final sync; --prepare stops after the copy.
    let synced = sync.iter().all(|s| s.action == Action::None);
    steps.extend(sync);
    if synced
        && !params.prepare
        && let Ok(Some(data)) = observed.extracted()
    {
        steps.extend(after_sync(params, observed, &data, db_claim)?);
    }
    Ok(steps)
}
