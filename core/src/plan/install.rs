//! `install`'s plan: the opening every command shares (namespace, pull Secret, mirror claim,
//! image checks, the recorded specification), the claims, the fresh server's credentials and
//! its `uyuni-config`, then the server's end state as `migrate` ends with it
//! ([`super::end_state`]) on a database the image sets up at its first start.
//!
//! What the official chart's documentation has the administrator create by hand before
//! `helm install` (`containers/server-helm/README.md`: the four basic-auth Secrets, the TLS
//! Secrets and the CA ConfigMaps) is written here, the passwords of the database accounts
//! generated when not given and never changed once their Secret exists.

use super::database::{DatabaseCommand, DatabaseSteps, service_steps};
use super::{Plan, PlanError, Step, apply_step, keep_step};
use crate::builders::{database, install};
use crate::catalogue::names;
use crate::labels;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::Observed;
use crate::params::InstallParams;
use crate::settings::ServerSettings;

/// Whether an object carries the install origin ([`labels::ORIGIN_ANNOTATION`]).
pub(super) fn installed_here(observed: &Observed, target: &ObjectRef) -> bool {
    observed.objects.get(target).is_some_and(|o| {
        o.metadata()
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::ORIGIN_ANNOTATION))
            .is_some_and(|v| v == labels::ORIGIN_INSTALL)
    })
}

/// Before any write of a migration: a namespace whose server this tool installed is not a
/// migration's target (the data sync would replace the installed server's data).
pub(super) fn refuse_installed(namespace: &str, observed: &Observed) -> Result<(), PlanError> {
    let installed: Vec<String> = [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT]
        .into_iter()
        .filter(|name| installed_here(observed, &ObjectRef::new(Kind::Deployment, *name)))
        .map(|name| format!("Deployment {name}"))
        .collect();
    if installed.is_empty() {
        return Ok(());
    }
    Err(PlanError::InstalledServerPresent {
        namespace: namespace.to_owned(),
        found: installed.join(" and "),
    })
}

/// The claims an install writes: the specification's, the database's being `var-pgsql18`.
fn claims(params: &InstallParams) -> Vec<String> {
    params.spec.volumes.iter().map(|v| v.name.clone()).collect()
}

/// Before any write: the namespace holds no other server or migration, and no claim this
/// install would use holds data it did not write (unless `--reuse-volumes`).
fn check_namespace(params: &InstallParams, observed: &Observed) -> Result<(), PlanError> {
    let ns = &params.namespace;
    let others: Vec<String> = [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT]
        .into_iter()
        .filter(|name| {
            let target = ObjectRef::new(Kind::Deployment, *name);
            observed.objects.contains_key(&target) && !installed_here(observed, &target)
        })
        .map(|name| format!("Deployment {name}"))
        .collect();
    if !others.is_empty() {
        return Err(PlanError::ServerPresent {
            namespace: ns.clone(),
            found: others.join(" and "),
        });
    }
    let syncs = observed.jobs_for_step(crate::catalogue::steps::DATA_SYNC);
    if let Some(job) = syncs.first() {
        return Err(PlanError::MigrationPresent {
            namespace: ns.clone(),
            found: format!(
                "data-sync Job {}",
                job.metadata.name.clone().unwrap_or_default()
            ),
        });
    }
    if observed.contains(Kind::Secret, names::MIGRATION_DATA_SECRET) {
        return Err(PlanError::MigrationPresent {
            namespace: ns.clone(),
            found: format!("Secret {}", names::MIGRATION_DATA_SECRET),
        });
    }
    if !params.reuse_volumes {
        // The volume this install's `db` runs on is its own, also when an upgrade to a new
        // PostgreSQL major created it.
        let db_volume = installed_here(
            observed,
            &ObjectRef::new(Kind::Deployment, names::DB_DEPLOYMENT),
        )
        .then(|| crate::resolve::live_db_claim(observed))
        .flatten();
        let held: Vec<String> = claims(params)
            .into_iter()
            .filter(|name| {
                let target = ObjectRef::new(Kind::PersistentVolumeClaim, name.clone());
                observed.objects.contains_key(&target)
                    && !installed_here(observed, &target)
                    && db_volume.as_ref() != Some(name)
            })
            .collect();
        if !held.is_empty() {
            return Err(PlanError::ClaimsHoldData {
                namespace: ns.clone(),
                claims: held,
            });
        }
    }
    Ok(())
}

/// The name an installed server was set up with: `UYUNI_HOSTNAME` of its Deployment.
fn installed_fqdn(observed: &Observed) -> Option<String> {
    let target = ObjectRef::new(Kind::Deployment, names::SERVER_DEPLOYMENT);
    if !installed_here(observed, &target) {
        return None;
    }
    observed
        .deployment(names::SERVER_DEPLOYMENT)?
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == "UYUNI_HOSTNAME")?
        .value
        .clone()
}

/// The first claim of the namespace whose data an install set up under another name than
/// `fqdn`: the claim and that name ([`labels::SERVER_NAME_ANNOTATION`]).
fn claim_set_up_as_other(observed: &Observed, fqdn: &str) -> Option<(String, String)> {
    observed.objects.values().find_map(|object| {
        let Object::PersistentVolumeClaim(claim) = object else {
            return None;
        };
        let name = claim
            .metadata
            .annotations
            .as_ref()?
            .get(labels::SERVER_NAME_ANNOTATION)?;
        (name != fqdn).then(|| {
            (
                claim.metadata.name.clone().unwrap_or_default(),
                name.clone(),
            )
        })
    })
}

/// Before any write: once the server Deployment exists, its first start may have set the
/// server up under its name; another name would restart it as a server it is not (the image
/// does not rename itself). The same holds for claims kept by an uninstall: their data was set
/// up under the name they carry, and `--reuse-volumes` runs the server on that data.
fn check_fqdn(params: &InstallParams, observed: &Observed) -> Result<(), PlanError> {
    if let Some(installed) = installed_fqdn(observed)
        && installed != params.fqdn
    {
        return Err(PlanError::FqdnChange {
            namespace: params.namespace.clone(),
            installed: installed.clone(),
            asked: params.fqdn.clone(),
            same: params.kubectl.install(Some(&params.namespace), &installed),
        });
    }
    if let Some((claim, installed)) = claim_set_up_as_other(observed, &params.fqdn) {
        let ns = Some(params.namespace.as_str());
        return Err(PlanError::ClaimsSetUpAsOther {
            namespace: params.namespace.clone(),
            claim,
            advice: format!(
                "this run names it {asked}. The image does not rename a server whose data it finds; to run the server on these claims, run `{}`; to install {asked} afresh, choose another namespace with -n, or delete the kept claims and Secrets first with `{}` (their data cannot be recovered)",
                params.kubectl.install(ns, &installed),
                params.kubectl.uyuni(ns, "uninstall --purge-volumes"),
                asked = params.fqdn,
            ),
            installed,
        });
    }
    Ok(())
}

/// Before any write: a database reused from a claim this tool's install did not create was
/// set up with its accounts' passwords; a password generated now would lock the server out of
/// it. Each account whose Secret is gone needs its password given. (A claim of an install of
/// ours whose Secrets are gone is an install interrupted before it wrote them: its database
/// was never started.)
fn check_reused_credentials(params: &InstallParams, observed: &Observed) -> Result<(), PlanError> {
    let claim = crate::volumes::upgraded_database_volume();
    let target = ObjectRef::new(Kind::PersistentVolumeClaim, claim.clone());
    if !params.reuse_volumes
        || !observed.objects.contains_key(&target)
        || installed_here(observed, &target)
    {
        return Ok(());
    }
    let missing: Vec<String> = [
        (
            names::DB_ADMIN_SECRET,
            &params.db_admin,
            "--db-admin-password-file",
        ),
        (names::DB_SECRET, &params.db, "--db-password-file"),
        (
            names::REPORTDB_SECRET,
            &params.report_db,
            "--reportdb-password-file",
        ),
    ]
    .into_iter()
    .filter(|(secret, account, _)| {
        account.password.is_none() && !observed.contains(Kind::Secret, secret)
    })
    .map(|(secret, _, flag)| format!("Secret {secret} ({flag})"))
    .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(PlanError::ReusedDatabaseWithoutCredentials {
        namespace: params.namespace.clone(),
        claim,
        missing,
    })
}

/// A credential Secret: written once, with the password given or generated then, and kept
/// from then on, whatever a later run is given or generates (the database was set up with
/// the first one).
fn credential_step(
    observed: &Observed,
    name: &str,
    description: String,
    build: impl FnOnce() -> k8s_openapi::api::core::v1::Secret,
) -> Step {
    let target = ObjectRef::new(Kind::Secret, name);
    if observed.objects.contains_key(&target) {
        keep_step(
            name,
            description,
            target,
            "exists; kept (the server was set up with it)".into(),
        )
    } else {
        apply_step(name, description, Object::Secret(build()), observed)
    }
}

/// The database accounts' Secrets, in the chart's names.
fn database_credentials(params: &InstallParams, observed: &Observed) -> Vec<Step> {
    let ns = &params.namespace;
    let origin = |given: bool| if given { "given" } else { "generated" };
    [
        (
            names::DB_ADMIN_SECRET,
            "the PostgreSQL superuser",
            &params.db_admin,
        ),
        (
            names::DB_SECRET,
            "the server's database account",
            &params.db,
        ),
        (
            names::REPORTDB_SECRET,
            "the report database's account",
            &params.report_db,
        ),
    ]
    .into_iter()
    .map(|(name, what, account)| {
        credential_step(
            observed,
            name,
            format!(
                "{name}: {what} {} (password {})",
                account.user,
                origin(account.password.is_some())
            ),
            || database::credentials_secret(ns, name, &account.user, account.password().expose()),
        )
    })
    .collect()
}

/// The first administrator's and the SCC Secrets: the image's first start reads them.
fn setup_credentials(params: &InstallParams, observed: &Observed) -> Result<Vec<Step>, PlanError> {
    let ns = &params.namespace;
    let admin_target = ObjectRef::new(Kind::Secret, names::ADMIN_SECRET);
    let admin_description = format!(
        "{}: the first administrator {}",
        names::ADMIN_SECRET,
        params.admin_login
    );
    let mut steps = vec![match &params.admin_password {
        _ if observed.objects.contains_key(&admin_target) => keep_step(
            names::ADMIN_SECRET,
            admin_description,
            admin_target,
            "exists; kept (the administrator is created with it at the first start)".into(),
        ),
        Some(password) => apply_step(
            names::ADMIN_SECRET,
            admin_description,
            Object::Secret(install::admin_secret(
                ns,
                &params.admin_login,
                password.expose(),
            )),
            observed,
        ),
        None => return Err(PlanError::AdminPasswordNeeded),
    }];
    if let Some((user, password)) = &params.scc {
        steps.push(apply_step(
            names::SCC_SECRET,
            format!("{}: the SCC organisation credentials", names::SCC_SECRET),
            Object::Secret(install::scc_secret(ns, user, password.expose())),
            observed,
        ));
    }
    Ok(steps)
}

/// Plans `install` from what was observed.
pub fn plan(params: &InstallParams, observed: &Observed) -> Result<Plan, PlanError> {
    let params = &*crate::resolve::in_effect(params, observed);
    let params = &*crate::resolve::install_in_effect(params, observed);
    let ns = &params.namespace;
    // Refused in this order, before any write.
    check_namespace(params, observed)?;
    check_fqdn(params, observed)?;
    check_reused_credentials(params, observed)?;
    super::phase::check_installed_images(params, observed)?;
    let prepared = prepare(params, observed, None)?;
    let mut steps = super::opening(
        params,
        observed,
        crate::builders::image_check::install_jobs(params),
    )?;
    steps.extend(body(params, observed, prepared)?);
    Ok(Plan {
        namespace: ns.clone(),
        steps,
    })
}

/// What install's body is planned from, decided before any write: the facts, the settings,
/// the TLS steps and the TFTP decision.
pub(super) struct Prepared {
    facts: crate::resolve::Facts,
    settings: ServerSettings,
    tls: Vec<Step>,
    tftp: crate::resolve::TftpDecision,
}

/// Decides what the body needs, refusing what cannot be (cert-manager missing, storage, Pod
/// Security) before any write. `db_claim`: the database's volume an upgrade puts it on, instead
/// of the one it runs on.
pub(super) fn prepare(
    params: &InstallParams,
    observed: &Observed,
    db_claim: Option<String>,
) -> Result<Prepared, PlanError> {
    let mut facts = crate::resolve::install(params, observed);
    if let Some(claim) = db_claim {
        facts.db_claim = claim;
    }
    facts
        .preflight
        .cert_manager
        .map_err(|_| PlanError::CertManagerMissing)?;
    facts.preflight.storage.clone()?;
    let settings = ServerSettings::for_install(params);
    crate::pod_security::check_install(params, &settings, observed).map_err(|r| {
        PlanError::PodSecurity {
            namespace: r.namespace,
            enforced: r.enforced,
            needed: r.needed,
            reasons: r.reasons,
        }
    })?;
    let tls = super::tls::install_steps(params, observed, &facts)?;
    let tftp = facts
        .tftp
        .map_err(|_| PlanError::TftpNotRecorded { job: String::new() })?;
    Ok(Prepared {
        facts,
        settings,
        tls,
        tftp,
    })
}

/// Everything after the opening: the claims, the credentials and `uyuni-config`, then the end
/// state on a database the image sets up at its first start.
pub(super) fn body(
    params: &InstallParams,
    observed: &Observed,
    prepared: Prepared,
) -> Result<Vec<Step>, PlanError> {
    let ns = &params.namespace;
    let Prepared {
        facts,
        settings,
        tls,
        tftp,
    } = prepared;
    let mut steps: Vec<Step> = super::setup::pvc_steps(params, observed)
        .into_iter()
        .map(|step| mark_installed(step, &params.fqdn))
        .collect();
    let mut credentials = database_credentials(params, observed);
    credentials.extend(setup_credentials(params, observed)?);
    credentials.push(apply_step(
        "uyuni-config",
        format!(
            "ConfigMap {}: the server's name, e-mail and database endpoints",
            names::CONFIG_MAP
        ),
        Object::ConfigMap(install::uyuni_config(
            ns,
            &params.fqdn,
            &params.email,
            &settings.db_name,
        )),
        observed,
    ));
    let database = DatabaseSteps {
        // A fresh database: nothing to make fit for the image.
        data: Vec::new(),
        service: service_steps(
            params,
            observed,
            &settings,
            &facts.db_claim,
            DatabaseCommand {
                credentials,
                before_start: Vec::new(),
                after_ready: Vec::new(),
            },
        ),
    };
    steps.extend(super::end_state(
        params, observed, &settings, &facts, tftp, database, tls,
    ));
    Ok(steps)
}

/// A claim this install creates carries the install origin, so that a later run knows it
/// from a claim that held data before, and the server's name its data is set up under
/// ([`super::setup::named_claim`]).
fn mark_installed(step: Step, fqdn: &str) -> Step {
    let mut step = super::setup::named_claim(step, fqdn);
    if let super::Action::Apply(object) = &mut step.action
        && let Object::PersistentVolumeClaim(claim) = &mut **object
    {
        claim
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(
                labels::ORIGIN_ANNOTATION.to_owned(),
                labels::ORIGIN_INSTALL.to_owned(),
            );
    }
    step
}
