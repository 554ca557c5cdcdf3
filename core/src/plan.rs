//! The planner: from validated parameters and one observed snapshot, the ordered steps that
//! bring the cluster where the command wants it. Pure and deterministic.
//!
//! Every step is in the plan, the ones with nothing to do included (`Unchanged`, `Done`), so a
//! re-run shows why nothing happens. [`Plan::next_step`] is the first step with an action: the
//! only thing `effects` ever carries out.

use k8s_openapi::api::batch::v1::Job;
use serde::{Serialize, Serializer};

use crate::builders::{data_sync, namespace, spec};

use crate::labels;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::Observed;

mod database;
mod error;
pub mod install;
pub mod lifecycle;
mod migrate;
mod server;
mod setup;
mod steps;
mod tls;
pub mod uninstall;
pub mod upgrade;

pub use error::{CertificateNames, PlanError};
use migrate::IMAGE_CHECK_WAIT;
pub use migrate::{PREPARE_CHECK_STEP, PREPARE_SYNC_STEP, phase, plan};
use setup::pull_secret_step;
pub use steps::differs;
pub(crate) use steps::{
    apply_step, await_job_step, deployment_step, deployment_step_with, deployment_wait_step,
    done_step, job_label, job_name, job_step, keep_step, last_succeeded, run_job_step, wait_step,
};
pub use steps::{delete_step, holds_data, migration_secret_deletion, purge_step};

pub use server::{exposure_notes, reach_notes};
pub use tls::GENERATED_CA_PLACEHOLDER;
pub(crate) use tls::ca_password_need;

/// What a step does, as a verb a reviewer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    Create,
    Update,
    Unchanged,
    /// Create a Job and wait for it.
    RunJob,
    /// Wait for a Job that is already running (a resumed run).
    AwaitJob,
    /// A Job step whose Job already succeeded.
    Done,
    /// Read what an earlier step produced.
    Read,
    /// Wait until a Deployment is ready.
    Wait,
    /// Change a Deployment's replicas.
    Scale,
    /// Roll a Deployment's pods out again, as `kubectl rollout restart`.
    Restart,
    /// Delete an object and wait until it is gone.
    Delete,
}

/// How long to wait for a Job. `None`: no limit, for steps whose time grows with the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct JobWait {
    pub timeout_seconds: Option<u64>,
    /// Lines of the log shown when the Job fails.
    pub log_tail_lines: u32,
}

/// How long to wait for a Deployment to become ready. `None`: no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DeploymentWait {
    pub timeout_seconds: Option<u64>,
    /// How long a pod may stay unschedulable before the wait ends with the reason (an autoscaler
    /// may still add a node within it).
    pub unschedulable_grace_seconds: u64,
    /// Lines of a crash-looping container's previous log shown when the wait fails; 0 for a
    /// wait with no pod log to show (a custom resource, a scale to zero).
    pub log_tail_lines: u32,
}

/// The unschedulable grace of every Deployment wait.
pub const UNSCHEDULABLE_GRACE_SECONDS: u64 = 120;

pub use steps::{DataDeletionRefused, DeleteWait, Propagation, Purge};

/// What `effects` carries out for a step. Serializing masks Secret data (a serialized plan is for
/// people); `effects` sends the [`Object`] itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Server-side apply, field manager `kubectl-uyuni`.
    Apply(#[serde(serialize_with = "masked_object")] Box<Object>),
    /// Create this Job, then wait for it to end, streaming its log.
    RunJob { job: Box<Job>, wait: JobWait },
    /// Wait for the named Job to end, streaming its log.
    AwaitJob { name: String, wait: JobWait },
    /// Wait until the custom resource's `Ready` condition is `True` for its current generation
    /// (D25: the status, not just the condition's presence).
    WaitReady {
        target: ObjectRef,
        wait: DeploymentWait,
    },
    /// Wait until the named Deployment is ready; pods that cannot start end the wait.
    WaitDeployment { name: String, wait: DeploymentWait },
    /// Set the named Deployment's replicas and wait until it has that many pods; with
    /// `restarted_at`, also set its pod template's `kubectl.kubernetes.io/restartedAt` to it
    /// (`kubectl rollout restart`'s way), so that every pod is replaced.
    Scale {
        name: String,
        replicas: i32,
        wait: DeploymentWait,
        #[serde(skip_serializing_if = "Option::is_none")]
        restarted_at: Option<String>,
        /// With `restarted_at`, for a Deployment whose pods lack the pod security settings
        /// (`builders::hardening`): its pod template with them, and the policy scan's skip
        /// annotations, written in the same patch. A restart replaces every pod anyway, so
        /// they arrive without an outage of their own.
        #[serde(skip_serializing_if = "Option::is_none")]
        hardened: Option<Box<k8s_openapi::api::apps::v1::Deployment>>,
    },
    /// Delete the object with this propagation, then wait until it is gone: a step that
    /// follows may rely on its absence (and, in the foreground, on that of its pods).
    Delete {
        target: ObjectRef,
        propagation: Propagation,
        wait: DeleteWait,
    },
    /// Nothing to carry out.
    None,
}

impl Action {
    /// Whether `simulate` knows the outcome of the action as the cluster will have it: a plain
    /// write (server-side apply) or nothing. A Job's result, a wait's end or a scale's pods are
    /// the cluster's to tell; the run observes again after those. So is a delete's: `simulate`
    /// removes the object, but finalizers (the foreground deletion's own among them) may keep
    /// it terminating past the step's wait, and the garbage collector removes what it owned on
    /// its own time; the loop must observe what the cluster did before it plans on the absence.
    pub fn predictable(&self) -> bool {
        match self {
            Action::Apply(_) | Action::None => true,
            Action::RunJob { .. }
            | Action::AwaitJob { .. }
            | Action::WaitReady { .. }
            | Action::WaitDeployment { .. }
            | Action::Scale { .. }
            | Action::Delete { .. } => false,
        }
    }

    /// The object this action writes, as it will be sent: for a Job step, the Job. A delete
    /// sends none (its target is the live object, which the preview shows going).
    pub fn object(&self) -> Option<Object> {
        match self {
            Action::Apply(object) => Some((**object).clone()),
            Action::RunJob { job, .. } => Some(Object::Job((**job).clone())),
            Action::AwaitJob { .. }
            | Action::WaitDeployment { .. }
            | Action::WaitReady { .. }
            | Action::Scale { .. }
            | Action::Delete { .. }
            | Action::None => None,
        }
    }
}

fn masked_object<S: Serializer>(object: &Object, serializer: S) -> Result<S::Ok, S::Error> {
    crate::secret::masked_json(&object.to_json(), None).serialize(serializer)
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// Stable id, e.g. `namespace`, `pvc-var-pgsql`, `data-sync`.
    pub id: String,
    /// One line saying what the step is for.
    pub description: String,
    pub op: Op,
    pub target: ObjectRef,
    /// Why the step has this op.
    pub reason: String,
    pub action: Action,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub namespace: String,
    pub steps: Vec<Step>,
}

impl Plan {
    /// The step to carry out now: the first one with an action.
    pub fn next_step(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.action != Action::None)
    }

    pub fn is_done(&self) -> bool {
        self.next_step().is_none()
    }

    /// The step of this plan that stops the source's services (the final data sync), if the
    /// plan still has to carry it out. The plugin asks before it, or refuses without `--yes`.
    pub fn outage_step(&self) -> Option<&Step> {
        self.steps.iter().find(|s| s.stops_source())
    }
}

impl Step {
    /// Whether carrying out this step stops the source's services: it creates a final-mode
    /// data-sync Job.
    pub fn stops_source(&self) -> bool {
        match &self.action {
            Action::RunJob { job, .. } => {
                job_label(job, labels::STEP_ANNOTATION).as_deref() == Some(data_sync::STEP_ID)
                    && job_label(job, labels::SYNC_MODE_ANNOTATION).as_deref()
                        == Some(data_sync::sync_mode(false))
            }
            _ => false,
        }
    }
}

/// The server's end state, whichever command brings it there: the database's data made fit
/// for the image (the command's data steps), TLS, the database's service part, then the
/// server, its routes and its components. The `db` pod mounts Secret `db-cert`, so TLS comes
/// before it; the data steps do not need TLS and come first.
fn end_state(
    params: &crate::params::ServerParams,
    observed: &Observed,
    settings: &crate::settings::ServerSettings,
    facts: &crate::resolve::Facts,
    tftp: crate::resolve::TftpDecision,
    database: database::DatabaseSteps,
    tls: Vec<Step>,
) -> Vec<Step> {
    let mut steps = database.data;
    steps.extend(tls);
    steps.extend(database.service);
    steps.extend(server::steps(params, observed, settings, facts, tftp));
    steps
}

/// The opening every command shares: the namespace, the pull Secret, the user's mirror claim,
/// the image checks, and the record of the server's specification (the first write after the
/// checks).
fn opening(
    params: &crate::params::ServerParams,
    observed: &Observed,
    image_checks: Vec<Job>,
) -> Result<Vec<Step>, PlanError> {
    // Before anything else is written: an image the command cannot use is refused (for a
    // migration, while the source still serves).
    let checks = image_checks
        .into_iter()
        .map(|job| job_step(observed, job, IMAGE_CHECK_WAIT))
        .collect();
    let mut steps = opening_checks(params, observed, checks)?;
    steps.push(spec_record_step(params, observed));
    Ok(steps)
}

/// The first write after the checks, so that every run that writes records the flags it ran
/// with, even one that changes nothing else; and an image the checks refuse is not
/// remembered.
fn spec_record_step(params: &crate::params::ServerParams, observed: &Observed) -> Step {
    apply_step(
        "server-spec",
        "the server's specification; later runs start from it".into(),
        Object::ConfigMap(spec::server_spec(params)),
        observed,
    )
}

/// The opening up to the record of the specification: the namespace, the pull Secret, the
/// user's mirror claim, then the command's `checks` (Job steps).
fn opening_checks(
    params: &crate::params::ServerParams,
    observed: &Observed,
    checks: Vec<Step>,
) -> Result<Vec<Step>, PlanError> {
    let ns = &params.namespace;
    let mut steps = Vec::new();

    let ns_target = ObjectRef::new(Kind::Namespace, ns.clone());
    let ns_description = format!("namespace {ns} of the installation");
    match observed.objects.get(&ns_target) {
        Some(Object::Namespace(live)) => {
            let terminating = live
                .status
                .as_ref()
                .and_then(|s| s.phase.as_deref())
                .is_some_and(|p| p == "Terminating");
            if terminating {
                return Err(PlanError::NamespaceTerminating(ns.clone()));
            }
            steps.push(keep_step(
                "namespace",
                ns_description,
                ns_target,
                "exists; left as it is".into(),
            ));
        }
        _ => steps.push(apply_step(
            "namespace",
            ns_description,
            Object::Namespace(namespace::namespace(ns)),
            observed,
        )),
    }
    steps.extend(pull_secret_step(params, observed)?);
    if let Some(claim) = &params.spec.mirror_claim {
        let target = ObjectRef::new(Kind::PersistentVolumeClaim, claim.clone());
        if !observed.objects.contains_key(&target) {
            return Err(PlanError::MirrorClaimMissing {
                claim: claim.clone(),
                namespace: ns.clone(),
            });
        }
        steps.push(keep_step(
            "mirror-claim",
            format!(
                "your mirror, mounted at {} in the server",
                crate::builders::server::MIRROR_PATH
            ),
            target,
            "exists; never written (--mirror-claim)".to_owned(),
        ));
    }
    steps.extend(checks);
    Ok(steps)
}

/// What every command's parameters offer the loop, the dry run's preview and the permission
/// check: one planner interface, whichever the command.
pub trait Planner: Clone {
    /// The shared parameters: namespace, run, specification.
    fn server(&self) -> &crate::params::ServerParams;
    /// What to read of the cluster.
    fn observation(&self) -> crate::observed::Observation;
    /// The plan from what was observed.
    fn plan(&self, observed: &Observed) -> Result<Plan, PlanError>;
    /// Whether `error` is an input a run asks for on a terminal when the plan needs it; the
    /// parameters with a stand-in for it, so that the steps after it can be planned (which
    /// steps follow does not depend on its value).
    fn with_stand_in(&self, error: &PlanError) -> Option<Self>;
}

impl Planner for crate::params::InstallParams {
    fn server(&self) -> &crate::params::ServerParams {
        self
    }
    fn observation(&self) -> crate::observed::Observation {
        crate::observed::install_observation(self)
    }
    fn plan(&self, observed: &Observed) -> Result<Plan, PlanError> {
        install::plan(self, observed)
    }
    fn with_stand_in(&self, error: &PlanError) -> Option<Self> {
        (*error == PlanError::AdminPasswordNeeded && self.admin_password.is_none()).then(|| {
            let mut with = self.clone();
            with.admin_password = Some(crate::secret::SecretString::new(
                crate::observed::PLACEHOLDER,
            ));
            with
        })
    }
}

impl Planner for crate::params::UninstallParams {
    fn server(&self) -> &crate::params::ServerParams {
        self
    }
    fn observation(&self) -> crate::observed::Observation {
        crate::observed::uninstall_observation(self)
    }
    fn plan(&self, observed: &Observed) -> Result<Plan, PlanError> {
        uninstall::plan(self, observed)
    }
    fn with_stand_in(&self, _error: &PlanError) -> Option<Self> {
        None
    }
}
