//! `upgrade`'s plan: a server this tool installed, moved to new images with its data kept and a
//! way back (images-today §D.3, mgradm's podman `Upgrade`, on Kubernetes).
//!
//! 1. The opening every command shares, up to its checks; the checks are the inspections of the
//!    images the server runs and of the ones asked for ([`crate::builders::image_inspect`]).
//!    Nothing more is planned until every report is in: the release order and the PostgreSQL
//!    majors decide the rest, and a refused upgrade (a downgrade, another product, a skipped
//!    release, an older PostgreSQL) has written nothing of the server's.
//! 2. The record of the specification, then ConfigMap `uyuni-upgrade`: the images and replica
//!    counts before the upgrade, the database's volumes and its backup, written once per
//!    upgrade before any image changes.
//! 3. The outage: the database's consumers scaled to 0, then `db` (the §D.3 order), while an
//!    image still differs or a data step is pending.
//! 4. The data: without a major change, a copy of the stopped database into a backup volume
//!    (unless `--no-backup`); with one, `pg_upgrade` into a new volume named for the new major,
//!    the old volume left as it was.
//! 5. Install's own end state on the new images (and the new volume): `db`, wait, the server,
//!    its components; the Deployments come back with their replica counts.
//!
//! A re-run goes on where a run stopped: the record names what the upgrade began from, a data
//! step whose Job succeeded is done, and one whose data `db` runs on already is never run
//! again.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::{Action, Plan, PlanError, Step, apply_step, install, job_step, keep_step};
use crate::builders::{database, image_inspect, meta, pvc};
use crate::catalogue::{components, names};
use crate::inspect::Inspection;
use crate::labels;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::{Observed, desired_replicas, job_state};
use crate::params::{Origin, UpgradeParams};
use crate::plan::{JobWait, Op};
use crate::volumes::{self, VolumeClaim, VolumeRole};

/// An inspection runs for seconds; the limit allows for pulling the image.
const INSPECT_WAIT: JobWait = JobWait {
    timeout_seconds: Some(1800),
    log_tail_lines: 20,
};
/// The backup copies the whole database: its time grows with the data.
const COPY_WAIT: JobWait = JobWait {
    timeout_seconds: None,
    log_tail_lines: 20,
};
/// `pg_upgrade` copies the whole database too.
const MAJOR_UPGRADE_WAIT: JobWait = JobWait {
    timeout_seconds: None,
    log_tail_lines: 30,
};

/// The Deployments an upgrade moves to new images, consumers of the database first.
pub const DEPLOYMENTS: [&str; 5] = super::lifecycle::ORDER;

pub use crate::volumes::BACKUP_SUFFIX;

/// The image of a Deployment's first container, as it runs now.
pub fn live_image(observed: &Observed, name: &str) -> Option<String> {
    observed
        .deployment(name)?
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .clone()
}

/// The image `params` asks for on Deployment `name`.
fn target_image<'a>(params: &'a UpgradeParams, name: &str) -> &'a str {
    let images = &params.spec.image;
    match name {
        names::SERVER_DEPLOYMENT => &images.server,
        names::DB_DEPLOYMENT => &images.database,
        names::HUB_DEPLOYMENT => &images.hub_xmlrpc,
        names::COCO_DEPLOYMENT => &images.coco,
        _ => &images.tftp,
    }
}

/// ConfigMap `uyuni-upgrade`: what an upgrade began from and goes to. Read back by later runs
/// (to go on with the same upgrade) and by a rollback.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct UpgradeRecord {
    /// Image by Deployment, before the upgrade.
    pub from: BTreeMap<String, String>,
    /// Image by Deployment, asked for.
    pub to: BTreeMap<String, String>,
    /// Replica count by Deployment, before the upgrade.
    pub replicas: BTreeMap<String, i32>,
    pub release_from: String,
    pub release_to: String,
    pub pg_major_from: u32,
    pub pg_major_to: u32,
    /// The database's volume before the upgrade, and after it.
    pub db_claim_from: String,
    pub db_claim_to: String,
    /// The copy of the database taken before the images changed; empty without one.
    pub backup_claim: String,
    /// The run that began the upgrade.
    pub run: String,
    /// ConfigMap `uyuni-server-spec`'s data before the upgrade: what a rollback records again.
    pub spec: BTreeMap<String, String>,
    /// The run of the rollback that returned to `from`; empty while the upgrade stands.
    pub rolled_back: String,
    /// The run of the rollback that began to return to `from` (its first write): the
    /// Deployments at 0 replicas from then on are its outage, not a stop.
    pub rolling_back: String,
}

impl UpgradeRecord {
    /// The releases a run went from and to: the upgrade's, or a rollback's, which goes from
    /// the upgraded release back to the one before.
    pub fn releases(&self, rollback: bool) -> (&str, &str) {
        if rollback {
            (&self.release_to, &self.release_from)
        } else {
            (&self.release_from, &self.release_to)
        }
    }

    /// The record in the cluster, if any; `None` also for one this version cannot read (it is
    /// then replaced only when its upgrade is complete, never silently).
    pub fn read(observed: &Observed) -> Option<UpgradeRecord> {
        let data = observed
            .config_map(names::UPGRADE_CONFIG_MAP)?
            .data
            .as_ref()?;
        let mut record = UpgradeRecord::default();
        for (key, value) in data {
            if let Some(name) = key.strip_prefix("from.") {
                record.from.insert(name.to_owned(), value.clone());
            } else if let Some(name) = key.strip_prefix("to.") {
                record.to.insert(name.to_owned(), value.clone());
            } else if let Some(flag) = key.strip_prefix("spec.") {
                record.spec.insert(flag.to_owned(), value.clone());
            } else if let Some(name) = key.strip_prefix("replicas.") {
                record
                    .replicas
                    .insert(name.to_owned(), value.parse().unwrap_or(1));
            }
        }
        let text = |key: &str| data.get(key).cloned().unwrap_or_default();
        record.release_from = text("release-from");
        record.release_to = text("release-to");
        record.pg_major_from = text("pg-major-from").parse().unwrap_or(0);
        record.pg_major_to = text("pg-major-to").parse().unwrap_or(0);
        record.db_claim_from = text("db-claim-from");
        record.db_claim_to = text("db-claim-to");
        record.backup_claim = text("backup-claim");
        record.run = text("run");
        record.rolled_back = text("rolled-back");
        record.rolling_back = text("rolling-back");
        Some(record)
    }

    /// The ConfigMap of this record.
    pub fn config_map(&self, namespace: &str) -> ConfigMap {
        let mut data = BTreeMap::new();
        for (name, image) in &self.from {
            data.insert(format!("from.{name}"), image.clone());
        }
        for (name, image) in &self.to {
            data.insert(format!("to.{name}"), image.clone());
        }
        for (name, count) in &self.replicas {
            data.insert(format!("replicas.{name}"), count.to_string());
        }
        for (flag, value) in &self.spec {
            data.insert(format!("spec.{flag}"), value.clone());
        }
        for (key, value) in [
            ("release-from", self.release_from.clone()),
            ("release-to", self.release_to.clone()),
            ("pg-major-from", self.pg_major_from.to_string()),
            ("pg-major-to", self.pg_major_to.to_string()),
            ("db-claim-from", self.db_claim_from.clone()),
            ("db-claim-to", self.db_claim_to.clone()),
            ("backup-claim", self.backup_claim.clone()),
            ("run", self.run.clone()),
        ] {
            data.insert(key.to_owned(), value);
        }
        if !self.rolled_back.is_empty() {
            data.insert("rolled-back".to_owned(), self.rolled_back.clone());
        }
        if !self.rolling_back.is_empty() {
            data.insert("rolling-back".to_owned(), self.rolling_back.clone());
        }
        ConfigMap {
            metadata: meta(names::UPGRADE_CONFIG_MAP, namespace, components::UPGRADE),
            data: Some(data),
            ..ConfigMap::default()
        }
    }

    /// Whether every Deployment the record names runs the image it goes to: the upgrade is
    /// complete as far as the images go.
    pub fn reached(&self, observed: &Observed) -> bool {
        runs(observed, &self.to)
    }
}

/// Whether every Deployment of `images` that exists runs the image it names.
fn runs(observed: &Observed, images: &BTreeMap<String, String>) -> bool {
    images
        .iter()
        .all(|(name, image)| live_image(observed, name).is_none_or(|live| live == *image))
}

/// The outage: the database's consumers first, then `db` (images-today §D.3), each stopped
/// while an image still differs (`runs_wanted`: whether Deployment NAME runs the image it
/// should) or a data step is pending; TFTP, which does not use the database, only for its own
/// image.
fn outage_steps(
    observed: &Observed,
    runs_wanted: impl Fn(&str) -> bool,
    db_differs: bool,
    pending: bool,
) -> Vec<Step> {
    DEPLOYMENTS
        .into_iter()
        .filter(|name| observed.deployment(name).is_some())
        .filter(|name| match *name {
            names::DB_DEPLOYMENT => pending || db_differs,
            names::TFTP_DEPLOYMENT => !runs_wanted(name),
            _ => pending || db_differs || !runs_wanted(name),
        })
        .map(|name| super::lifecycle::scale_step(name, 0, super::lifecycle::STOP_WAIT, observed))
        .collect()
}

/// The Job step of an inspection: done once its Job succeeded and the report is on it; a
/// succeeded Job whose report was not copied yet (a run interrupted between the two) is awaited
/// again, which copies it.
fn inspect_step(
    observed: &Observed,
    role: image_inspect::Role,
    image: &str,
    params: &UpgradeParams,
) -> Step {
    let step = job_step(
        observed,
        image_inspect::job(params, role, image),
        INSPECT_WAIT,
    );
    if step.op != Op::Done {
        return step;
    }
    let Some(Object::Job(job)) = observed.objects.get(&step.target) else {
        return step;
    };
    if report_of(job).is_some() {
        return step;
    }
    let name = step.target.name.clone();
    Step {
        op: Op::AwaitJob,
        reason: format!("Job {name} succeeded; its report is read from its pod"),
        action: Action::AwaitJob {
            name,
            wait: INSPECT_WAIT,
        },
        ..step
    }
}

/// The report a run copied onto an inspection Job.
fn report_of(job: &k8s_openapi::api::batch::v1::Job) -> Option<Inspection> {
    job.metadata
        .annotations
        .as_ref()?
        .get(labels::INSPECTION_ANNOTATION)
        .map(|text| Inspection::parse(text))
}

/// The reports of the four inspections, once every one is in.
struct Reports {
    running_server: Inspection,
    running_db: Inspection,
    server: Inspection,
    db: Inspection,
}

/// The one upgrade the reports allow: the releases and the PostgreSQL majors.
struct Decision {
    release_from: String,
    release_to: String,
    pg_from: u32,
    pg_to: u32,
}

fn missing(namespace: &str, image: &str, what: &str) -> PlanError {
    PlanError::InspectionIncomplete {
        namespace: namespace.to_owned(),
        image: image.to_owned(),
        missing: what.to_owned(),
    }
}

/// Before any write of the server's: the release order (no downgrade, no other product, no
/// skipped release) and the PostgreSQL majors (never older). A dry run's stand-in reports
/// decide nothing: the same release and major are assumed, and the preview says so.
fn decide(
    params: &UpgradeParams,
    from: &BTreeMap<String, String>,
    reports: &Reports,
) -> Result<Decision, PlanError> {
    let ns = &params.namespace;
    let server_from = from
        .get(names::SERVER_DEPLOYMENT)
        .cloned()
        .unwrap_or_default();
    let db_from = from.get(names::DB_DEPLOYMENT).cloned().unwrap_or_default();
    let images = &params.spec.image;
    let placeholder = [
        &reports.running_server,
        &reports.running_db,
        &reports.server,
        &reports.db,
    ]
    .iter()
    .any(|r| r.placeholder);
    if placeholder {
        let major = reports
            .running_db
            .pg_major
            .or(reports.db.pg_major)
            .unwrap_or(crate::pg::TARGET_MAJOR);
        return Ok(Decision {
            release_from: "(known once the inspection has run)".to_owned(),
            release_to: "(known once the inspection has run)".to_owned(),
            pg_from: major,
            pg_to: major,
        });
    }
    // What the image the server runs does not tell is that image's problem, not the flags':
    // they name the target only.
    let missing_in = |running: bool, image: &str, what: &str| {
        if running {
            PlanError::RunningInspectionIncomplete {
                namespace: ns.clone(),
                image: image.to_owned(),
                missing: what.to_owned(),
            }
        } else {
            missing(ns, image, what)
        }
    };
    let release = |report: &Inspection,
                   image: &str,
                   running: bool|
     -> Result<(crate::inspect::Product, crate::release::Release), PlanError> {
        let product = report.product.ok_or_else(|| {
            missing_in(
                running,
                image,
                "the product and release (no Uyuni or SUSE Multi-Linux Manager release file)",
            )
        })?;
        let text = report
            .release
            .clone()
            .ok_or_else(|| missing_in(running, image, "the release"))?;
        let parsed = crate::release::Release::parse(&text).map_err(|e| {
            missing_in(
                running,
                image,
                &format!("a release this tool can order: {e}"),
            )
        })?;
        Ok((product, parsed))
    };
    let (product_from, release_from) = release(&reports.running_server, &server_from, true)?;
    let (product_to, release_to) = release(&reports.server, &images.server, false)?;
    if product_from != product_to {
        return Err(PlanError::UpgradeRefused {
            namespace: ns.clone(),
            reason: format!(
                "the server runs {} {} ({server_from}) and {} is {} {}: an upgrade does not switch products",
                product_from.name(),
                release_from.text,
                images.server,
                product_to.name(),
                release_to.text
            ),
        });
    }
    crate::release::check_upgrade(&release_from, &release_to).map_err(|refusal| {
        PlanError::UpgradeRefused {
            namespace: ns.clone(),
            reason: format!(
                "{refusal} (the server runs {server_from}; asked for {})",
                images.server
            ),
        }
    })?;
    let pg_from = reports
        .running_db
        .pg_major
        .ok_or_else(|| missing_in(true, &db_from, "its PostgreSQL version"))?;
    let pg_to = reports
        .db
        .pg_major
        .ok_or_else(|| missing(ns, &images.database, "its PostgreSQL version"))?;
    if pg_to < pg_from {
        return Err(PlanError::UpgradeRefused {
            namespace: ns.clone(),
            reason: format!(
                "the database runs PostgreSQL {pg_from} ({db_from}) and {} is PostgreSQL {pg_to}: PostgreSQL cannot start on data of a newer major; use a database image of PostgreSQL {pg_from} or newer (--db-image/--pgsql-tag)",
                images.database
            ),
        });
    }
    Ok(Decision {
        release_from: release_from.text,
        release_to: release_to.text,
        pg_from,
        pg_to,
    })
}

/// A claim for the upgrade's data: the size and class of the database's volume now.
fn claim_like(observed: &Observed, namespace: &str, name: &str, like: &str) -> VolumeClaim {
    let live = match observed.get(Kind::PersistentVolumeClaim, like) {
        Some(Object::PersistentVolumeClaim(c)) => c.spec.clone(),
        _ => None,
    };
    let size = live
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_else(|| "50Gi".to_owned());
    let _ = namespace;
    VolumeClaim {
        name: name.to_owned(),
        mount_path: crate::scripts::database::UPGRADE_TARGET.to_owned(),
        size,
        storage_class: live.and_then(|s| s.storage_class_name),
        role: VolumeRole::Database,
    }
}

/// Refuses an upgrade whose new claim (the new major's volume, or the backup's) the namespace
/// would not admit, or the cluster not provision: it would fail after the server stopped.
/// `begun`: this upgrade's record is written already (a resumed run), so the refusal says in
/// which state the server is.
fn check_room(
    params: &UpgradeParams,
    observed: &Observed,
    major: bool,
    db_claim_from: &str,
    db_claim_to: &str,
    backup_claim: &str,
    begun: bool,
) -> Result<(), PlanError> {
    let ns = &params.namespace;
    let name = if major { db_claim_to } else { backup_claim };
    if name.is_empty() || observed.contains(Kind::PersistentVolumeClaim, name) {
        return Ok(());
    }
    let claim = claim_like(observed, ns, name, db_claim_from);
    let new = crate::quota::NewClaim {
        name: claim.name,
        size: claim.size,
        class: claim.storage_class,
    };
    let Err(refusal) = crate::quota::check(observed, std::slice::from_ref(&new)) else {
        return Ok(());
    };
    let fix = match (&*refusal, refusal.object()) {
        (crate::quota::Refusal::NoClass { .. }, _) => format!(
            "create the StorageClass again, or make one the default (`{}`)",
            params.kubectl.cmd(None, "get storageclass")
        ),
        (crate::quota::Refusal::QuotaUnknown { .. }, _) => {
            "run the upgrade again in a moment".to_owned()
        }
        (_, Some((resource, object))) => format!(
            "raise it or free room in the namespace (`{}`), then run the upgrade again",
            params
                .kubectl
                .cmd(Some(ns), &format!("describe {resource} {object}"))
        ),
        (_, None) => "free room in the namespace, then run the upgrade again".to_owned(),
    };
    let rollback = params.kubectl.uyuni(Some(ns), "upgrade --rollback");
    let way = if major {
        format!(
            "; the database upgraded to the new PostgreSQL major needs volume {name}, the size of {db_claim_from}"
        )
    } else {
        format!(
            "; or pass --no-backup, which takes no copy of the database and so gives up `{rollback}`"
        )
    };
    let reason = format!("{refusal}: {fix}{way}");
    if begun {
        return Err(PlanError::UpgradeStalled {
            namespace: ns.clone(),
            reason,
            rollback,
        });
    }
    Err(PlanError::UpgradeRefused {
        namespace: ns.clone(),
        reason,
    })
}

/// A claim step that keeps what exists (a claim is never recreated).
fn claim_step(
    observed: &Observed,
    namespace: &str,
    claim: &VolumeClaim,
    description: String,
) -> Step {
    let id = format!("pvc-{}", claim.name);
    let target = ObjectRef::new(Kind::PersistentVolumeClaim, claim.name.clone());
    if observed.objects.contains_key(&target) {
        return keep_step(
            &id,
            description,
            target,
            "exists; never recreated, never deleted".into(),
        );
    }
    apply_step(
        &id,
        description,
        Object::PersistentVolumeClaim(pvc::pvc(namespace, claim)),
        observed,
    )
}

/// A data step whose data `db` runs on already: never carried out again.
fn settled(step: Step, reason: String) -> Step {
    if !matches!(step.action, Action::RunJob { .. } | Action::AwaitJob { .. }) {
        return step;
    }
    Step {
        op: Op::Unchanged,
        target: ObjectRef::new(Kind::Deployment, names::DB_DEPLOYMENT),
        reason,
        action: Action::None,
        ..step
    }
}

/// Before any write: the server is the one its origin says, and a migrated one has finished
/// its migration (the server runs on the data of its final sync).
fn check_origin(params: &UpgradeParams, observed: &Observed) -> Result<(), PlanError> {
    let ns = &params.namespace;
    match &params.origin {
        Origin::Installed(_) => {
            for name in [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT] {
                if observed.deployment(name).is_some()
                    && !install::installed_here(observed, &ObjectRef::new(Kind::Deployment, name))
                {
                    return Err(PlanError::UpgradeOriginChanged {
                        namespace: ns.clone(),
                    });
                }
            }
            Ok(())
        }
        Origin::Migrated(p) => {
            if super::phase::data_taken_over(observed).is_some() {
                return Ok(());
            }
            Err(PlanError::MigrationUnfinished {
                namespace: ns.clone(),
                finish: p.kubectl.uyuni(
                    Some(ns),
                    &format!("migrate {}", crate::kubectl::shell_quote(&p.source_fqdn)),
                ),
            })
        }
    }
}

/// The end state on the images of `params`, with the database on `db_claim`, as the command
/// that made the server plans it.
fn end_state_steps(
    params: &UpgradeParams,
    observed: &Observed,
    db_claim: String,
) -> Result<Vec<Step>, PlanError> {
    match &params.origin {
        Origin::Installed(p) => {
            let prepared = install::prepare(p, observed, Some(db_claim))?;
            install::body(p, observed, prepared)
        }
        Origin::Migrated(p) => super::migrate::body(p, observed, Some(db_claim)),
    }
}

/// Plans `upgrade` from what was observed.
pub fn plan(params: &UpgradeParams, observed: &Observed) -> Result<Plan, PlanError> {
    let params = &*crate::resolve::in_effect(params, observed);
    if params.rollback {
        return rollback(params, observed);
    }
    let ns = &params.namespace;
    check_origin(params, observed)?;
    // The server: both Deployments present.
    let present: Vec<&str> = [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT]
        .into_iter()
        .filter(|name| observed.deployment(name).is_some())
        .collect();
    if present.len() < 2 {
        return Err(PlanError::NoServerToUpgrade {
            namespace: ns.clone(),
            install: params.kubectl.install(Some(ns), "FQDN"),
        });
    }
    // What the upgrade began from: the record's, when it is this upgrade's; otherwise what
    // runs now. Another upgrade that has not reached its images is refused.
    let target: BTreeMap<String, String> = DEPLOYMENTS
        .iter()
        .filter(|name| observed.deployment(name).is_some() || **name == names::SERVER_DEPLOYMENT)
        .map(|name| ((*name).to_owned(), target_image(params, name).to_owned()))
        .collect();
    let record = UpgradeRecord::read(observed);
    // A record a rollback closed is no upgrade to go on with.
    let continuing = record.as_ref().filter(|r| {
        r.rolled_back.is_empty()
            && r.to
                .iter()
                .all(|(name, image)| target.get(name).is_none_or(|t| t == image))
    });
    if let Some(r) = &record
        && continuing.is_none()
        && r.rolled_back.is_empty()
        && !r.reached(observed)
    {
        return Err(PlanError::UpgradeUnfinished {
            namespace: ns.clone(),
            to: r
                .to
                .get(names::SERVER_DEPLOYMENT)
                .cloned()
                .unwrap_or_default(),
        });
    }
    // A server `stop` stopped is started by the user, not by an upgrade: the upgrade would
    // otherwise record zeros as the counts to come back to, and could not tell whether the new
    // server starts. An upgrade's own outage (one that has not reached its images) is not a
    // stop.
    let underway = continuing.is_some_and(|r| !r.reached(observed));
    if !underway && let Some(stopped) = stopped_deployment(observed) {
        return Err(PlanError::ServerStopped {
            namespace: ns.clone(),
            deployment: stopped.to_owned(),
            start: params.kubectl.uyuni(Some(ns), "start"),
        });
    }
    let from: BTreeMap<String, String> = match continuing {
        Some(r) => r.from.clone(),
        None => DEPLOYMENTS
            .iter()
            .filter_map(|name| Some(((*name).to_owned(), live_image(observed, name)?)))
            .collect(),
    };
    let from_image = |name: &str| from.get(name).cloned().unwrap_or_default();

    // Every Deployment runs the images asked for and no upgrade to them is under way: nothing
    // to inspect, copy or stop; the end state as it stands (a re-run of a finished upgrade
    // keeps its record and Jobs as they are).
    if runs(observed, &target) && continuing.is_none() {
        let db_claim = crate::resolve::live_db_claim(observed)
            .unwrap_or_else(volumes::upgraded_database_volume);
        let mut steps = super::opening_checks(params, observed, Vec::new())?;
        steps.push(super::spec_record_step(params, observed));
        steps.extend(end_state_steps(params, observed, db_claim)?);
        return Ok(Plan {
            namespace: ns.clone(),
            steps,
        });
    }

    // The inspections: nothing more is planned until every report is in.
    let images = &params.spec.image;
    let inspections = [
        (
            image_inspect::Role::RunningServer,
            from_image(names::SERVER_DEPLOYMENT),
        ),
        (
            image_inspect::Role::RunningDatabase,
            from_image(names::DB_DEPLOYMENT),
        ),
        (image_inspect::Role::Server, images.server.clone()),
        (image_inspect::Role::Database, images.database.clone()),
    ];
    let checks: Vec<Step> = inspections
        .iter()
        .map(|(role, image)| inspect_step(observed, *role, image, params))
        .collect();
    let reports: Vec<Option<Inspection>> = checks
        .iter()
        .map(
            |step| match (&step.action, observed.objects.get(&step.target)) {
                (Action::None, Some(Object::Job(job)))
                    if job_state(job) == crate::observed::JobState::Succeeded =>
                {
                    report_of(job)
                }
                _ => None,
            },
        )
        .collect();
    let mut steps = super::opening_checks(params, observed, checks)?;
    let [
        Some(running_server),
        Some(running_db),
        Some(server),
        Some(db),
    ]: [Option<Inspection>; 4] = reports.try_into().unwrap_or([None, None, None, None])
    else {
        return Ok(Plan {
            namespace: ns.clone(),
            steps,
        });
    };
    let decision = decide(
        params,
        &from,
        &Reports {
            running_server,
            running_db,
            server,
            db,
        },
    )?;

    // A PostgreSQL major upgrade: its image must upgrade from the major the database runs to
    // the new one (`pg_upgrade` of the new, the binaries of the old). Checked before the first
    // write of the server's; nothing more is planned until the check has passed (a failed one
    // ends the run with its verdict, and runs again with the next run).
    if decision.pg_to > decision.pg_from {
        let check = job_step(
            observed,
            image_inspect::database_upgrade_check(params, decision.pg_from, decision.pg_to),
            INSPECT_WAIT,
        );
        let passed = check.op == Op::Done;
        steps.push(check);
        if !passed {
            return Ok(Plan {
                namespace: ns.clone(),
                steps,
            });
        }
    }

    // Where the data goes.
    let db_claim_from = match continuing {
        Some(r) if !r.db_claim_from.is_empty() => r.db_claim_from.clone(),
        _ => crate::resolve::live_db_claim(observed)
            .unwrap_or_else(volumes::upgraded_database_volume),
    };
    let major = decision.pg_to > decision.pg_from;
    // The run that began this upgrade: part of its data Jobs' identity, so that a later
    // upgrade (after a rollback, from the same images) copies anew.
    let upgrade_run = continuing.map_or_else(|| params.run_id.clone(), |r| r.run.clone());
    let db_claim_to = if major {
        format!("{}{}", volumes::DATABASE_VOLUME, decision.pg_to)
    } else {
        db_claim_from.clone()
    };
    let backup_claim = if major || !params.backup {
        String::new()
    } else {
        format!("{db_claim_from}{BACKUP_SUFFIX}")
    };

    // Before the first write of the server's: the namespace admits the claim the data step
    // creates (its class, its LimitRanges, its ResourceQuotas). And on every run until that
    // claim exists: a resumed upgrade (interrupted, or stopped by a failure) meets a quota
    // that changed meanwhile here, with the same advice, not as the API server's refusal at
    // the claim's step.
    check_room(
        params,
        observed,
        major,
        &db_claim_from,
        &db_claim_to,
        &backup_claim,
        continuing.is_some(),
    )?;

    // The record first, while ConfigMap uyuni-server-spec still holds the flags before the
    // upgrade; then the new flags.
    let record_step_id = "upgrade-record";
    let record_description = format!(
        "ConfigMap {}: the images and replica counts before the upgrade, and the database's way back",
        names::UPGRADE_CONFIG_MAP
    );
    match continuing {
        Some(_) => steps.push(keep_step(
            record_step_id,
            record_description,
            ObjectRef::new(Kind::ConfigMap, names::UPGRADE_CONFIG_MAP),
            "this upgrade's; kept as it began".into(),
        )),
        None => {
            let record = UpgradeRecord {
                from: from.clone(),
                to: target.clone(),
                replicas: DEPLOYMENTS
                    .iter()
                    .filter_map(|name| {
                        Some((
                            (*name).to_owned(),
                            desired_replicas(observed.deployment(name)?),
                        ))
                    })
                    .collect(),
                release_from: decision.release_from.clone(),
                release_to: decision.release_to.clone(),
                pg_major_from: decision.pg_from,
                pg_major_to: decision.pg_to,
                db_claim_from: db_claim_from.clone(),
                db_claim_to: db_claim_to.clone(),
                backup_claim: backup_claim.clone(),
                run: params.run_id.clone(),
                spec: observed
                    .config_map(names::SERVER_SPEC_CONFIG_MAP)
                    .and_then(|c| c.data.clone())
                    .unwrap_or_default(),
                rolled_back: String::new(),
                rolling_back: String::new(),
            };
            steps.push(apply_step(
                record_step_id,
                record_description,
                Object::ConfigMap(record.config_map(ns)),
                observed,
            ));
        }
    }

    steps.push(super::spec_record_step(params, observed));

    // The data, planned first to know whether the database must stop for it.
    let db_image = live_image(observed, names::DB_DEPLOYMENT).unwrap_or_default();
    let db_upgraded = db_image == images.database
        && crate::resolve::live_db_claim(observed).as_deref() == Some(db_claim_to.as_str());
    let mut data = Vec::new();
    if major {
        let claim = claim_like(observed, ns, &db_claim_to, &db_claim_from);
        data.push(claim_step(
            observed,
            ns,
            &claim,
            format!(
                "volume {db_claim_to} for the database upgraded to PostgreSQL {}",
                decision.pg_to
            ),
        ));
        let job = database::major_upgrade_job(
            params,
            &db_claim_from,
            &db_claim_to,
            decision.pg_from,
            decision.pg_to,
        );
        let step = job_step(observed, job, MAJOR_UPGRADE_WAIT);
        data.push(if db_upgraded {
            settled(
                step,
                format!("not run: Deployment db runs on {db_claim_to} already"),
            )
        } else {
            step
        });
    } else if !backup_claim.is_empty() {
        let claim = claim_like(observed, ns, &backup_claim, &db_claim_from);
        data.push(claim_step(
            observed,
            ns,
            &claim,
            format!("volume {backup_claim} for a copy of the database before the upgrade"),
        ));
        let of = format!(
            "{} and {}",
            from_image(names::SERVER_DEPLOYMENT),
            from_image(names::DB_DEPLOYMENT)
        );
        let job = database::copy_job(
            params,
            crate::scripts::database::Copy::Backup,
            &from_image(names::DB_DEPLOYMENT),
            &db_claim_from,
            &backup_claim,
            &of,
            &upgrade_run,
        );
        let step = job_step(observed, job, COPY_WAIT);
        data.push(if db_image == images.database {
            settled(step, "not run: Deployment db runs the new image already; its data is no longer the one before the upgrade".into())
        } else {
            step
        });
    }
    let pending = data.iter().any(|s| s.action != Action::None);

    // The outage, while an image differs or data steps are pending.
    let db_differs = db_image != images.database || !db_upgraded && major;
    steps.extend(outage_steps(
        observed,
        |name| live_image(observed, name).as_deref() == Some(target_image(params, name)),
        db_differs,
        pending,
    ));
    steps.extend(data);

    // The end state on the new images, as the server's origin plans it.
    steps.extend(end_state_steps(params, observed, db_claim_to)?);
    Ok(Plan {
        namespace: ns.clone(),
        steps,
    })
}

/// Plans `upgrade --rollback`: back to the images the record names as `from`, on the data kept
/// (the backup restored, or the volume before the PostgreSQL major upgrade), the specification
/// as it was recorded then; the record marked as rolled back last. Never an image the record
/// does not name, never a claim deleted.
fn rollback(params: &UpgradeParams, observed: &Observed) -> Result<Plan, PlanError> {
    let ns = &params.namespace;
    let Some(record) = UpgradeRecord::read(observed).filter(|r| !r.from.is_empty()) else {
        return Err(PlanError::NothingToRollBack {
            namespace: ns.clone(),
            why: format!(
                "there is no ConfigMap {} of an upgrade",
                names::UPGRADE_CONFIG_MAP
            ),
        });
    };
    let major = record.db_claim_from != record.db_claim_to;
    if !major && record.backup_claim.is_empty() {
        return Err(PlanError::NothingToRollBack {
            namespace: ns.clone(),
            why: "the upgrade kept no copy of the database (--no-backup), and the old images cannot run on the schema the new server updated".to_owned(),
        });
    }
    // A server `stop` stopped after its upgrade (or after this rollback) is started by the
    // user, not by a rollback: the rollback would start it on the images before, and a server
    // stopped on purpose (a broken new release that must not act on its clients meanwhile)
    // would run again. What the rollback restores keeps nothing the stopped server would
    // write once started, so starting it first loses nothing the rollback keeps. Zeros before
    // the upgrade reached its images are the upgrade's outage, and after the rollback began,
    // the rollback's own.
    let stopped_on_purpose = !record.rolled_back.is_empty()
        || record.rolling_back.is_empty() && record.reached(observed);
    if stopped_on_purpose && let Some(stopped) = stopped_deployment(observed) {
        return Err(PlanError::StoppedBeforeRollback {
            namespace: ns.clone(),
            deployment: stopped.to_owned(),
            start: params.kubectl.uyuni(Some(ns), "start"),
            rollback: params.kubectl.uyuni(Some(ns), "upgrade --rollback"),
        });
    }
    // The parameters of the end state before the upgrade: its images and its specification.
    let mut back = params.clone();
    back.rollback = false;
    {
        let images = &mut back.spec.image;
        for (name, image) in &record.from {
            let slot = match name.as_str() {
                names::SERVER_DEPLOYMENT => &mut images.server,
                names::DB_DEPLOYMENT => &mut images.database,
                names::HUB_DEPLOYMENT => &mut images.hub_xmlrpc,
                names::COCO_DEPLOYMENT => &mut images.coco,
                names::TFTP_DEPLOYMENT => &mut images.tftp,
                _ => continue,
            };
            slot.clone_from(image);
        }
        back.spec_record = record.spec.clone();
    }
    let back = &back;
    let mut steps = super::opening_checks(back, observed, Vec::new())?;
    // First: the record says a rollback began, so that a resumed one tells its own outage
    // from a stop.
    let marked = UpgradeRecord {
        rolling_back: if record.rolling_back.is_empty() {
            params.run_id.clone()
        } else {
            record.rolling_back.clone()
        },
        ..record.clone()
    };
    steps.push(apply_step(
        "rollback-record",
        format!(
            "ConfigMap {}: the rollback marked as begun",
            names::UPGRADE_CONFIG_MAP
        ),
        Object::ConfigMap(marked.config_map(ns)),
        observed,
    ));
    let record = marked;
    steps.push(super::spec_record_step(back, observed));

    let db_image = live_image(observed, names::DB_DEPLOYMENT).unwrap_or_default();
    let from_db = record
        .from
        .get(names::DB_DEPLOYMENT)
        .cloned()
        .unwrap_or_default();
    let mut data = Vec::new();
    if !major {
        let job = database::copy_job(
            back,
            crate::scripts::database::Copy::Restore,
            &from_db,
            &record.db_claim_from,
            &record.backup_claim,
            "",
            &record.run,
        );
        let step = job_step(observed, job, COPY_WAIT);
        data.push(if db_image == from_db {
            settled(step, "not run: Deployment db runs the image before the upgrade again, on the restored data".into())
        } else {
            step
        });
    }
    let pending = data.iter().any(|s| s.action != Action::None);
    let db_differs = db_image != from_db
        || crate::resolve::live_db_claim(observed).as_deref()
            != Some(record.db_claim_from.as_str());
    steps.extend(outage_steps(
        observed,
        |name| live_image(observed, name) == record.from.get(name).cloned(),
        db_differs,
        pending,
    ));
    steps.extend(data);
    steps.extend(end_state_steps(
        back,
        observed,
        record.db_claim_from.clone(),
    )?);
    // Last: the record says the upgrade was undone, so that a later upgrade begins anew.
    let closed = UpgradeRecord {
        rolled_back: if record.rolled_back.is_empty() {
            params.run_id.clone()
        } else {
            record.rolled_back.clone()
        },
        ..record
    };
    steps.push(apply_step(
        "upgrade-record",
        format!(
            "ConfigMap {}: the upgrade marked as rolled back",
            names::UPGRADE_CONFIG_MAP
        ),
        Object::ConfigMap(closed.config_map(ns)),
        observed,
    ));
    Ok(Plan {
        namespace: ns.clone(),
        steps,
    })
}

impl super::Planner for UpgradeParams {
    fn server(&self) -> &crate::params::ServerParams {
        self
    }
    fn observation(&self) -> crate::observed::Observation {
        crate::observed::upgrade_observation(self)
    }
    fn plan(&self, observed: &Observed) -> Result<Plan, PlanError> {
        plan(self, observed)
    }
    fn with_stand_in(&self, _error: &PlanError) -> Option<Self> {
        None
    }
}

/// The server's or the database's Deployment when it is scaled to 0 (by `stop`, or an
/// outage): what an upgrade and a rollback each refuse to take for the user's counts.
fn stopped_deployment(observed: &Observed) -> Option<&'static str> {
    [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT]
        .into_iter()
        .find(|name| {
            observed
                .deployment(name)
                .is_some_and(|d| desired_replicas(d) == 0)
        })
}
