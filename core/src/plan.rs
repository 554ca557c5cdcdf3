//! The planner: from validated parameters and one observed snapshot, the ordered steps that
//! bring the cluster where the command wants it. Pure and deterministic.
//!
//! Every step is in the plan, the ones with nothing to do included (`Unchanged`, `Done`), so a
//! re-run shows why nothing happens. [`Plan::next_step`] is the first step with an action: the
//! only thing `effects` ever carries out.

use k8s_openapi::api::batch::v1::Job;
use serde::{Serialize, Serializer};

use crate::builders::{data_sync, image_check, migration, names, namespace, pvc, registry};
use crate::kubectl::Kubectl;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::{ExtractError, JobState, Observed, job_state};
use crate::params::{MigrateParams, PullSecret};
use crate::render;
use crate::ssh;
use crate::{labels, volumes};

mod database;
mod server;
mod tls;

pub use server::exposure_notes;
pub(crate) use tls::ca_password_need;

/// What a step does, as a verb a reviewer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
    /// Set the named Deployment's replicas and wait until it has that many pods.
    Scale {
        name: String,
        replicas: i32,
        wait: DeploymentWait,
    },
    /// Nothing to carry out.
    None,
}

impl Action {
    /// Whether `simulate` knows the outcome of the action as the cluster will have it: a plain
    /// write (server-side apply) or nothing. A Job's result, a wait's end or a scale's pods are
    /// the cluster's to tell; the run observes again after those.
    pub fn predictable(&self) -> bool {
        match self {
            Action::Apply(_) | Action::None => true,
            Action::RunJob { .. }
            | Action::AwaitJob { .. }
            | Action::WaitReady { .. }
            | Action::WaitDeployment { .. }
            | Action::Scale { .. } => false,
        }
    }

    /// The object this action writes, as it will be sent: for a Job step, the Job.
    pub fn object(&self) -> Option<Object> {
        match self {
            Action::Apply(object) => Some((**object).clone()),
            Action::RunJob { job, .. } => Some(Object::Job((**job).clone())),
            Action::AwaitJob { .. }
            | Action::WaitDeployment { .. }
            | Action::WaitReady { .. }
            | Action::Scale { .. }
            | Action::None => None,
        }
    }
}

fn masked_object<S: Serializer>(object: &Object, serializer: S) -> Result<S::Ok, S::Error> {
    render::masked_json(&object.to_json(), None).serialize(serializer)
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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{}", self.render(&Kubectl::BARE))]
    NamespaceTerminating(String),
    #[error("Secret {secret} was not found in namespace {namespace} and no SSH key was given: pass --ssh-key-private and --ssh-key-public (a key pair without passphrase that can log in to the source), or create the Secret with keys `key` and `key.pub`", secret = names::SSH_KEY_SECRET)]
    SshKeyMissing { namespace: String },
    #[error("ConfigMap {cm} was not found in namespace {namespace} and no known_hosts file was given: pass --ssh-knownhosts (and optionally --ssh-config), or create the ConfigMap with keys `known_hosts` and `config`", cm = names::SSH_CONFIG_MAP)]
    SshConfigMissing { namespace: String },
    #[error(
        "{object} in namespace {namespace}: key `{key}` {problem}; fix the object or pass the SSH flags to replace it"
    )]
    SshObjectInvalid {
        object: ObjectRef,
        namespace: String,
        key: &'static str,
        problem: String,
    },
    /// `remedy` is what clears it: a new `--prepare` run copies anew; a final sync that
    /// succeeded is never repeated by itself, so its Job has to go first.
    #[error("{}", self.render(&Kubectl::BARE))]
    NoExtractedData {
        job: String,
        namespace: String,
        detail: String,
        remedy: String,
    },
    /// `finish`: the `kubectl uyuni migrate` command without `--prepare`, with the run's flags.
    #[error(
        "--prepare refused: {found}, so a copy now would overwrite the volumes of the migrated server. To finish the migration, run `{finish}` (without --prepare): it goes on from where it stands and copies nothing again. To copy from the source anew instead, losing what the migrated server wrote since: {again}then run `{finish}`. Nothing was written"
    )]
    PrepareAfterFinalSync {
        found: String,
        fqdn: String,
        again: String,
        finish: String,
    },
    #[error(
        "--prepare refused: the final data sync runs (Job {job}) and the source's services are stopped for it. Let it finish with `{finish}`: it waits for the Job and goes on. Nothing was written"
    )]
    PrepareWhileFinalSyncRuns {
        job: String,
        fqdn: String,
        finish: String,
    },
    /// The volumes hold (or receive) a copy of another source than the run names. `same`:
    /// the command that goes on with that source.
    #[error("{}", self.render(&Kubectl::BARE))]
    OtherSource {
        job: String,
        found: String,
        fqdn: String,
        namespace: String,
        same: String,
    },
    #[error(
        "a data sync would copy into the volumes {deployments} runs on: refused, nothing was written; {remedy}"
    )]
    SyncIntoRunningServer { deployments: String, remedy: String },
    #[error("{}", self.render(&Kubectl::BARE))]
    ExtractedData {
        job: String,
        namespace: String,
        source: ExtractError,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    CertManagerMissing,
    #[error(
        "the source's CA key is encrypted: give its password with --ssl-password-file FILE or the environment variable UYUNI_SSL_PASSWORD (it is never accepted on the command line), then run again; the steps done so far are kept"
    )]
    CaPasswordNeeded,
    #[error("{0}")]
    Tls(#[from] crate::builders::tls::TlsError),
    #[error("{}", self.render(&Kubectl::BARE))]
    PullSecretMissing { name: String, namespace: String },
    #[error(
        "PersistentVolumeClaim {claim} (--mirror-claim) was not found in namespace {namespace}: create it first (bound to the volume holding your mirror), or leave the flag out"
    )]
    MirrorClaimMissing { claim: String, namespace: String },
    #[error(
        "Secret {name} (--image-pull-secret) in namespace {namespace} has type {kind:?}, not kubernetes.io/dockerconfigjson: pods cannot pull with it; give a registry pull Secret"
    )]
    PullSecretType {
        name: String,
        namespace: String,
        kind: String,
    },
    #[error(
        "Secret {secret} (written by Job {job}) does not say whether the source served TFTP: an older kubectl-uyuni synced it. Pass --tftp=true or --tftp=false (`systemctl is-enabled tftp.socket` on the source tells), then run again. Nothing was changed after the data sync",
        secret = names::MIGRATION_DATA_SECRET
    )]
    TftpNotRecorded { job: String },
    /// Known at the first plan after the sync, before anything else is written.
    #[error(
        "{source}. Nothing was changed after the data sync (Job {job}); the synced volumes stay in namespace {namespace}"
    )]
    PgVersion {
        job: String,
        namespace: String,
        source: crate::pg::VersionError,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    Storage(#[from] crate::storage::StorageError),
    /// The namespace's `pod-security.kubernetes.io/enforce` level rejects the migration's pods.
    #[error("{}", self.render(&Kubectl::BARE))]
    PodSecurity {
        namespace: String,
        enforced: String,
        needed: &'static str,
        reasons: Vec<String>,
    },
    /// The user may not make some of the requests (writes, or reads it waits with) the
    /// migration makes.
    #[error("{}", self.render(&Kubectl::BARE))]
    AccessDenied { missing: Vec<crate::access::Access> },
}

impl PlanError {
    /// The message, with the `kubectl` commands it advises carrying the run's flags (`kubectl`).
    /// `Display` renders it without them.
    pub fn render(&self, kubectl: &Kubectl) -> String {
        let data = names::MIGRATION_DATA_SECRET;
        match self {
            PlanError::NamespaceTerminating(ns) => format!(
                "namespace {ns} is being deleted: wait until it is gone (`{}`), then run again",
                kubectl.cmd(None, &format!("get namespace {ns}"))
            ),
            PlanError::NoExtractedData {
                job,
                namespace,
                detail,
                remedy,
            } => format!(
                "Job {job} succeeded but Secret {data} holds no data from it ({detail}); read `{}`, then {remedy}",
                kubectl.cmd(Some(namespace), &format!("logs job/{job}"))
            ),
            PlanError::ExtractedData {
                job,
                namespace,
                source,
            } => format!(
                "Job {job} wrote unusable data into Secret {data}: {source}; read `{}`",
                kubectl.cmd(Some(namespace), &format!("logs job/{job}"))
            ),
            PlanError::CertManagerMissing => format!(
                "cert-manager is not installed in this cluster (its CRDs issuers.cert-manager.io and certificates.cert-manager.io are not served), and the migration reuses the source's CA through it. Install it first, for example `{}` (or with its Helm chart), wait until its pods are ready, then run again; or give third-party certificates with --ssl-server-cert, --ssl-server-key and --ssl-ca-root, which need no cert-manager. Nothing was written",
                kubectl.cmd(
                    None,
                    "apply -f https://github.com/cert-manager/cert-manager/releases/latest/download/cert-manager.yaml"
                )
            ),
            PlanError::PullSecretMissing { name, namespace } => format!(
                "Secret {name} (--image-pull-secret) was not found in namespace {namespace}: create it first, for example `{}` (create the namespace too if needed), or give --registry-user to let this tool write one",
                kubectl.cmd(
                    Some(namespace),
                    &format!("create secret generic {name} --type=kubernetes.io/dockerconfigjson --from-file=.dockerconfigjson=$HOME/.docker/config.json")
                )
            ),
            PlanError::Storage(e) => e.render(kubectl),
            PlanError::OtherSource {
                job,
                found,
                fqdn,
                namespace,
                same,
            } => format!(
                "the volumes in namespace {namespace} hold a copy of {found} (data-sync Job {job}, annotation {}), and this run names {fqdn}: refused, copying {fqdn} over it would mix two servers' data. Nothing was written. To go on with {found}: `{same}`. To migrate {fqdn} instead, use another namespace (-n), or remove the copy of {found} first (`{}`), then run again",
                labels::SOURCE_ANNOTATION,
                kubectl.cmd(
                    Some(namespace),
                    &format!(
                        "delete jobs,persistentvolumeclaims -l {}",
                        labels::MANAGED_SELECTOR
                    )
                ),
            ),
            PlanError::PodSecurity {
                namespace,
                enforced,
                needed,
                reasons,
            } => format!(
                "namespace {namespace} enforces PodSecurity level {enforced} (label {label}={enforced}), which would reject the migration's pods: they need level {needed} ({}). Allow it with `{}`, then run again; or migrate into another namespace with -n. Nothing was written",
                reasons.join("; "),
                kubectl.cmd(
                    None,
                    &format!(
                        "label namespace {namespace} {}={needed} --overwrite",
                        crate::pod_security::ENFORCE_LABEL
                    )
                ),
                label = crate::pod_security::ENFORCE_LABEL,
            ),
            PlanError::AccessDenied { missing } => format!(
                "you may not make every request this migration makes; missing: {}. Ask a cluster administrator to grant them (a Role or ClusterRole bound to your user), then run again. Nothing was written",
                missing
                    .iter()
                    .map(|a| format!("{} (`{}`)", a.describe(), a.can_i(kubectl)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            // Their messages advise no kubectl command. (A variant whose `#[error]` calls
            // `render` must have its own arm above.)
            other => other.to_string(),
        }
    }
}

/// Is anything the intended object sets different in the live one? Fields the server or other
/// managers add are ignored, as server-side apply would leave them.
pub fn differs(intended: &serde_json::Value, live: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (intended, live) {
        (Value::Object(i), Value::Object(l)) => i
            .iter()
            .any(|(k, v)| !v.is_null() && l.get(k).is_none_or(|lv| differs(v, lv))),
        (Value::Array(i), Value::Array(l)) => {
            i.len() != l.len() || i.iter().zip(l).any(|(a, b)| differs(a, b))
        }
        (i, l) => i != l,
    }
}

pub(crate) fn apply_step(
    id: &str,
    description: String,
    intended: Object,
    observed: &Observed,
) -> Step {
    let target = intended.object_ref();
    let live = observed.objects.get(&target);
    let (op, reason, action) = match live {
        None => (
            Op::Create,
            "absent".to_owned(),
            Action::Apply(Box::new(intended)),
        ),
        Some(live) if differs(&intended.to_json(), &live.to_json()) => (
            Op::Update,
            "differs from the intended object".to_owned(),
            Action::Apply(Box::new(intended)),
        ),
        Some(_) => (Op::Unchanged, "as intended".to_owned(), Action::None),
    };
    Step {
        id: id.to_owned(),
        description,
        op,
        target,
        reason,
        action,
    }
}

pub(crate) fn keep_step(id: &str, description: String, target: ObjectRef, reason: String) -> Step {
    Step {
        id: id.to_owned(),
        description,
        op: Op::Unchanged,
        target,
        reason,
        action: Action::None,
    }
}

fn invalid(
    object: ObjectRef,
    namespace: &str,
    key: &'static str,
    problem: impl ToString,
) -> PlanError {
    PlanError::SshObjectInvalid {
        object,
        namespace: namespace.to_owned(),
        key,
        problem: problem.to_string(),
    }
}

fn ssh_key_step(params: &MigrateParams, observed: &Observed) -> Result<Step, PlanError> {
    let ns = &params.namespace;
    let description = format!(
        "SSH key the data-sync Job logs in to {} with",
        params.source_fqdn
    );
    if let Some(key) = &params.ssh_key {
        let intended = Object::Secret(migration::ssh_key_secret(ns, key));
        return Ok(apply_step("ssh-key", description, intended, observed));
    }
    let target = ObjectRef::new(Kind::Secret, names::SSH_KEY_SECRET);
    let secret =
        observed
            .secret(names::SSH_KEY_SECRET)
            .ok_or_else(|| PlanError::SshKeyMissing {
                namespace: ns.clone(),
            })?;
    let value = |key: &'static str| -> Result<String, PlanError> {
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone())
            .unwrap_or_default();
        let text = String::from_utf8(bytes)
            .map_err(|_| invalid(target.clone(), ns, key, "is not text"))?;
        if text.trim().is_empty() {
            return Err(invalid(target.clone(), ns, key, "is missing or empty"));
        }
        Ok(text)
    };
    ssh::check_private_key(&value("key")?).map_err(|p| invalid(target.clone(), ns, "key", p))?;
    let public = value("key.pub")?;
    ssh::check_public_key(&public).map_err(|p| invalid(target.clone(), ns, "key.pub", p))?;
    ssh::check_key_pair(&value("key")?, &public).map_err(|p| {
        let key = if p == ssh::SshProblem::NotAPrivateKey {
            "key"
        } else {
            "key.pub"
        };
        invalid(target.clone(), ns, key, p)
    })?;
    Ok(keep_step(
        "ssh-key",
        description,
        target,
        "exists; reused (no SSH key flags given)".into(),
    ))
}

fn ssh_config_step(params: &MigrateParams, observed: &Observed) -> Result<Step, PlanError> {
    let ns = &params.namespace;
    let description = "SSH known_hosts and config of the data-sync Job".to_owned();
    if let Some(ssh) = &params.ssh_config {
        let intended = Object::ConfigMap(migration::ssh_config_map(ns, ssh));
        return Ok(apply_step("ssh-config", description, intended, observed));
    }
    let target = ObjectRef::new(Kind::ConfigMap, names::SSH_CONFIG_MAP);
    let cm =
        observed
            .config_map(names::SSH_CONFIG_MAP)
            .ok_or_else(|| PlanError::SshConfigMissing {
                namespace: ns.clone(),
            })?;
    let data = cm.data.clone().unwrap_or_default();
    if !data.contains_key("config") {
        return Err(invalid(
            target,
            ns,
            "config",
            "is missing (it may be empty, but must exist)",
        ));
    }
    let known_hosts = data.get("known_hosts").cloned().unwrap_or_default();
    ssh::check_known_hosts(&known_hosts, &params.source_fqdn)
        .map_err(|p| invalid(target.clone(), ns, "known_hosts", p))?;
    Ok(keep_step(
        "ssh-config",
        description,
        target,
        "exists; reused (no SSH flags given)".into(),
    ))
}

fn pvc_steps(params: &MigrateParams, observed: &Observed) -> Vec<Step> {
    params
        .volumes
        .iter()
        .map(|claim| {
            let id = format!("pvc-{}", claim.name);
            let description = match claim.role {
                volumes::VolumeRole::Server => format!("volume {} for {}", claim.name, claim.mount_path),
                volumes::VolumeRole::Database => format!("volume {} for the database data", claim.name),
                volumes::VolumeRole::Migration => {
                    format!("volume {} for the migration's working files", claim.name)
                }
            };
            let target = ObjectRef::new(Kind::PersistentVolumeClaim, claim.name.clone());
            match observed.objects.get(&target) {
                None => apply_step(&id, description, Object::PersistentVolumeClaim(pvc::pvc(&params.namespace, claim)), observed),
                Some(Object::PersistentVolumeClaim(live)) => {
                    let live_size = live
                        .spec
                        .as_ref()
                        .and_then(|s| s.resources.as_ref())
                        .and_then(|r| r.requests.as_ref())
                        .and_then(|r| r.get("storage"))
                        .map(|q| q.0.clone())
                        .unwrap_or_default();
                    let reason = if live_size == claim.size {
                        "exists; existing claims are never recreated".to_owned()
                    } else {
                        format!("exists with {live_size} (asked {}); existing claims are never recreated or resized", claim.size)
                    };
                    keep_step(&id, description, target, reason)
                }
                Some(_) => keep_step(&id, description, target, "exists".into()),
            }
        })
        .collect()
}

pub(crate) fn job_label(job: &Job, key: &str) -> Option<String> {
    job.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .cloned()
}

/// The step of a Job that must have succeeded with exactly this spec: done when it did, awaited
/// while a Job of the step runs, otherwise (never run, failed, or a different spec) run anew
/// under a name no earlier attempt has.
pub(crate) fn job_step(observed: &Observed, mut job: Job, wait: JobWait) -> Step {
    let annotation = |key: &str| job_label(&job, key).unwrap_or_default();
    let step_id = annotation(labels::STEP_ANNOTATION);
    let hash = annotation(labels::SPEC_HASH_ANNOTATION);
    let description = annotation(labels::DESCRIPTION_ANNOTATION);
    let jobs = observed.jobs_for_step(&step_id);
    let name_of = |j: &Job| j.metadata.name.clone().unwrap_or_default();
    let step = |op, name: &str, reason: String, action| Step {
        id: step_id.clone(),
        description: description.clone(),
        op,
        target: ObjectRef::new(Kind::Job, name),
        reason,
        action,
    };
    // Two Jobs of one step must never work on the same volumes at once.
    if let Some(running) = jobs.iter().find(|j| job_state(j) == JobState::Running) {
        let name = name_of(running);
        return step(
            Op::AwaitJob,
            &name,
            format!("Job {name} is still running; waiting for it"),
            Action::AwaitJob {
                name: name.clone(),
                wait,
            },
        );
    }
    let same: Vec<&&Job> = jobs
        .iter()
        .filter(|j| job_label(j, labels::SPEC_HASH_ANNOTATION).as_deref() == Some(hash.as_str()))
        .collect();
    if let Some(done) = same.iter().find(|j| job_state(j) == JobState::Succeeded) {
        let name = name_of(done);
        return step(
            Op::Done,
            &name,
            format!("Job {name} succeeded"),
            Action::None,
        );
    }
    let base = job.metadata.name.clone().unwrap_or_default();
    let name = unique_job_name(base, observed);
    job.metadata.name = Some(name.clone());
    let reason = match same.last() {
        Some(failed) => format!("Job {} failed; running a new attempt", name_of(failed)),
        None if jobs.is_empty() => "has not run yet".to_owned(),
        None => "has not run for this data sync and these parameters yet".to_owned(),
    };
    step(
        Op::RunJob,
        &name,
        reason,
        Action::RunJob {
            job: Box::new(job),
            wait,
        },
    )
}

pub(crate) fn unique_job_name(base: String, observed: &Observed) -> String {
    if !observed.contains(Kind::Job, &base) {
        return base;
    }
    (2..)
        .map(|n| format!("{base}-{n}"))
        .find(|name| !observed.contains(Kind::Job, name))
        .unwrap_or(base)
}

/// The pull Secret comes first: every pod, the image checks' included, needs it.
fn pull_secret_step(
    params: &MigrateParams,
    observed: &Observed,
) -> Result<Option<Step>, PlanError> {
    let ns = &params.namespace;
    Ok(match &params.pull_secret {
        PullSecret::None => None,
        PullSecret::Credentials {
            registry,
            user,
            password,
        } => Some(apply_step(
            "registry-credentials",
            format!("pull Secret for {registry}, referenced by every pod"),
            Object::Secret(registry::pull_secret(ns, registry, user, password.expose())),
            observed,
        )),
        PullSecret::Reused => Some(keep_step(
            "registry-credentials",
            "pull Secret referenced by every pod".to_owned(),
            ObjectRef::new(Kind::Secret, names::REGISTRY_SECRET),
            "exists; reused (no registry flags given)".to_owned(),
        )),
        PullSecret::Existing(name) => {
            let secret = observed
                .secret(name)
                .ok_or_else(|| PlanError::PullSecretMissing {
                    name: name.clone(),
                    namespace: ns.clone(),
                })?;
            let kind = secret.type_.clone().unwrap_or_default();
            if !matches!(
                kind.as_str(),
                "kubernetes.io/dockerconfigjson" | "kubernetes.io/dockercfg"
            ) {
                return Err(PlanError::PullSecretType {
                    name: name.clone(),
                    namespace: ns.clone(),
                    kind,
                });
            }
            Some(keep_step(
                "registry-credentials",
                "your pull Secret, referenced by every pod".to_owned(),
                ObjectRef::new(Kind::Secret, name.clone()),
                "exists; never written (--image-pull-secret)".to_owned(),
            ))
        }
    })
}

/// An image check takes seconds; the limit allows for pulling a large image over a slow link.
/// Pods that cannot pull or start end the wait earlier, with the reason.
const IMAGE_CHECK_WAIT: JobWait = JobWait {
    timeout_seconds: Some(1800),
    log_tail_lines: 10,
};

const SYNC_WAIT: JobWait = JobWait {
    timeout_seconds: None,
    log_tail_lines: 20,
};

/// Step id of the copy a final run makes first while the source keeps serving.
pub const PREPARE_SYNC_STEP: &str = "prepare-sync";
/// Step id of the check of every input, on that copy's data, before the source is stopped.
pub const PREPARE_CHECK_STEP: &str = "prepare-check";

/// The read-back of what a data-sync Job extracted, as a step with nothing to carry out.
fn read_step(id: &str, reason: String) -> Step {
    Step {
        id: id.to_owned(),
        description: "read what the data-sync found on the source".to_owned(),
        op: Op::Read,
        target: ObjectRef::new(Kind::Secret, names::MIGRATION_DATA_SECRET),
        reason,
        action: Action::None,
    }
}

fn job_name_of(job: &Job) -> String {
    job.metadata.name.clone().unwrap_or_default()
}

/// The data extracted by a prepare-mode sync that succeeded, if that is what the Secret holds.
fn prepared_data(observed: &Observed) -> Option<crate::observed::ExtractedData> {
    let data = observed.extracted().ok().flatten()?;
    let prepared = crate::phase::syncs(observed, data_sync::sync_mode(true))
        .into_iter()
        .any(|j| job_name_of(j) == data.job && job_state(j) == JobState::Succeeded);
    prepared.then_some(data)
}

/// The steps of the data sync of a `--prepare` run: one copy per run, while the source serves.
fn prepare_sync_steps(params: &MigrateParams, observed: &Observed) -> Result<Vec<Step>, PlanError> {
    let ns = &params.namespace;
    let description = data_sync::description(params);
    // Each --prepare run copies again: that is what repeating it is for.
    let this_run: Vec<&Job> = crate::phase::syncs(observed, data_sync::sync_mode(true))
        .into_iter()
        .filter(|j| job_label(j, labels::RUN_ANNOTATION).as_deref() == Some(params.run_id.as_str()))
        .collect();
    let step = |op, name: &str, reason: String, action| Step {
        id: data_sync::STEP_ID.to_owned(),
        description: description.clone(),
        op,
        target: ObjectRef::new(Kind::Job, name),
        reason,
        action,
    };
    match this_run.last().map(|j| (job_name_of(j), job_state(j))) {
        Some((name, JobState::Succeeded)) => {
            let read = extracted_read(observed, &name, ns, || {
                format!(
                    "run `{}` again: a new run copies anew",
                    params.kubectl.migrate(Some(ns), &params.source_fqdn, true)
                )
            })?;
            Ok(vec![
                step(
                    Op::Done,
                    &name,
                    format!("Job {name} succeeded"),
                    Action::None,
                ),
                read,
            ])
        }
        state => {
            crate::phase::guard_sync(params, observed, None)?;
            let name = unique_job_name(data_sync::job_name(&params.run_id), observed);
            let mut job = data_sync::data_sync_job(params);
            job.metadata.name = Some(name.clone());
            let reason = match state {
                Some((failed, _)) => format!("Job {failed} failed; running a new attempt"),
                None => "a --prepare run copies the data again".to_owned(),
            };
            Ok(vec![
                step(
                    Op::RunJob,
                    &name,
                    reason,
                    Action::RunJob {
                        job: Box::new(job),
                        wait: SYNC_WAIT,
                    },
                ),
                read_step("extract", "after data-sync".to_owned()),
            ])
        }
    }
}

/// The read of the data Job `name` wrote, or the error saying why it is not there and what
/// clears it.
fn extracted_read(
    observed: &Observed,
    name: &str,
    ns: &str,
    remedy: impl Fn() -> String,
) -> Result<Step, PlanError> {
    match observed.extracted() {
        Ok(Some(data)) if data.job == name => {
            Ok(read_step("extract", format!("written by Job {name}")))
        }
        Ok(Some(data)) => Err(PlanError::NoExtractedData {
            job: name.to_owned(),
            namespace: ns.to_owned(),
            detail: format!(
                "it holds data of Job {}, a later sync into the same volumes",
                data.job
            ),
            remedy: remedy(),
        }),
        Ok(None) => Err(PlanError::NoExtractedData {
            job: name.to_owned(),
            namespace: ns.to_owned(),
            detail: "it is empty or absent".into(),
            remedy: remedy(),
        }),
        Err(source) => Err(PlanError::ExtractedData {
            job: name.to_owned(),
            namespace: ns.to_owned(),
            source,
        }),
    }
}

/// The data-sync steps of a final run.
///
/// Why a final run copies first while the source keeps serving when no `--prepare` copy is
/// there: only the source says what the later steps will need (is its CA key encrypted, which
/// PostgreSQL, did it serve TFTP), and everything the outage needs must be known before the
/// outage starts. The prepare-mode copy learns it without stopping anything; every input is
/// then checked on its data, and only then does the final sync stop the source. It also
/// shortens the outage: the final copy moves only what changed since (issue 15).
fn final_sync_steps(params: &MigrateParams, observed: &Observed) -> Result<Vec<Step>, PlanError> {
    let ns = &params.namespace;
    let description = data_sync::description(params);
    let prepare_params = MigrateParams {
        prepare: true,
        ..params.clone()
    };
    let prepare_description = format!(
        "{}, before the final copy: every input is checked on what it finds",
        data_sync::description(&prepare_params)
    );
    let job_step = |id: &str, description: &str, op, name: &str, reason: String, action| Step {
        id: id.to_owned(),
        description: description.to_owned(),
        op,
        target: ObjectRef::new(Kind::Job, name),
        reason,
        action,
    };
    let prepared_step = |job: &Job| {
        let name = job_name_of(job);
        job_step(
            PREPARE_SYNC_STEP,
            &prepare_description,
            Op::Done,
            &name,
            format!("Job {name} succeeded"),
            Action::None,
        )
    };
    let check_step = |reason: String| Step {
        id: PREPARE_CHECK_STEP.to_owned(),
        description: "check every input the migration needs, before the source is stopped".into(),
        op: Op::Read,
        target: ObjectRef::new(Kind::Secret, names::MIGRATION_DATA_SECRET),
        reason,
        action: Action::None,
    };
    let finals = crate::phase::syncs(observed, data_sync::sync_mode(false));
    let mut steps = Vec::new();
    let latest_final = finals.last().map(|j| (job_name_of(j), job_state(j)));
    if let Some((name, JobState::Succeeded)) = &latest_final {
        // A final sync that succeeded is never repeated, whatever changed since (an image tag,
        // say): copying again would stop the source's services and overwrite data the migrated
        // server has written since. Deleting the Job is the explicit way to sync again.
        if let Some(p) = crate::phase::latest_succeeded(observed, data_sync::sync_mode(true)) {
            steps.push(prepared_step(p));
        }
        let read = extracted_read(observed, name, ns, || {
            let stop = crate::phase::stop_advice(params, observed);
            format!(
                "to sync again ({stop}delete Job {name} with `{}`) run `{}` again: the final sync runs anew, and stops the source's services",
                params.kubectl.cmd(Some(ns), &format!("delete job {name}")),
                params.kubectl.migrate(Some(ns), &params.source_fqdn, false)
            )
        })?;
        steps.push(job_step(
            data_sync::STEP_ID,
            &description,
            Op::Done,
            name,
            format!("Job {name} succeeded"),
            Action::None,
        ));
        steps.push(read);
        return Ok(steps);
    }
    crate::phase::guard_sync(params, observed, None)?;
    let final_job = |observed: &Observed| {
        let name = unique_job_name(data_sync::job_name(&params.run_id), observed);
        let mut job = data_sync::data_sync_job(params);
        job.metadata.name = Some(name.clone());
        (name, job)
    };
    let final_reason = match &latest_final {
        Some((failed, _)) => format!("Job {failed} failed; running a new attempt"),
        None => "no final data sync has run yet".to_owned(),
    };
    match prepared_data(observed) {
        Some(data) => {
            // Every input a later step needs, checked by the very planning of those steps on
            // the prepare copy's data: a missing one is refused now, while the source serves.
            after_sync(params, observed, &data)?;
            if let Some(p) = observed
                .jobs_for_step(data_sync::STEP_ID)
                .into_iter()
                .find(|j| job_name_of(j) == data.job)
            {
                steps.push(prepared_step(p));
            }
            steps.push(check_step(if data.placeholder {
                "on the copy's data: what only the source can say is known after the copy".into()
            } else {
                format!("every input is there (data of Job {})", data.job)
            }));
            let (name, job) = final_job(observed);
            steps.push(job_step(
                data_sync::STEP_ID,
                &description,
                Op::RunJob,
                &name,
                final_reason,
                Action::RunJob {
                    job: Box::new(job),
                    wait: SYNC_WAIT,
                },
            ));
        }
        None => {
            let this_run = crate::phase::syncs(observed, data_sync::sync_mode(true))
                .into_iter()
                .rev()
                .find(|j| {
                    job_label(j, labels::RUN_ANNOTATION).as_deref() == Some(params.run_id.as_str())
                        && job_state(j) == JobState::Succeeded
                });
            if let Some(p) = this_run {
                // Its data is gone (a sync of another run since): a new run copies anew.
                let name = job_name_of(p);
                extracted_read(observed, &name, ns, || {
                    format!(
                        "run `{}` again: a new run copies anew",
                        params.kubectl.migrate(Some(ns), &params.source_fqdn, false)
                    )
                })?;
            }
            let name = unique_job_name(data_sync::prepare_job_name(&params.run_id), observed);
            let mut job = data_sync::data_sync_job(&prepare_params);
            job.metadata.name = Some(name.clone());
            steps.push(job_step(
                PREPARE_SYNC_STEP,
                &prepare_description,
                Op::RunJob,
                &name,
                "no copy of this source has been made while it serves".into(),
                Action::RunJob {
                    job: Box::new(job),
                    wait: SYNC_WAIT,
                },
            ));
            steps.push(check_step("after prepare-sync".into()));
            // Listed now so that the plan shows where the source goes down; it is planned
            // anew, checks made, once the copy has run.
            let (final_name, job) = final_job(observed);
            steps.push(job_step(
                data_sync::STEP_ID,
                &description,
                Op::RunJob,
                &final_name,
                final_reason,
                Action::RunJob {
                    job: Box::new(job),
                    wait: SYNC_WAIT,
                },
            ));
        }
    }
    steps.push(read_step("extract", "after data-sync".to_owned()));
    Ok(steps)
}

/// The data-sync step and the read-back of what it extracted.
fn sync_steps(params: &MigrateParams, observed: &Observed) -> Result<Vec<Step>, PlanError> {
    // Two syncs must never write into the same volumes at once: a running one is waited for,
    // whatever it was started with.
    let jobs = observed.jobs_for_step(data_sync::STEP_ID);
    if let Some(running) = jobs.iter().find(|j| job_state(j) == JobState::Running) {
        let name = job_name_of(running);
        crate::phase::guard_sync(params, observed, Some(&name))?;
        let prepare_in_final = !params.prepare
            && job_label(running, labels::SYNC_MODE_ANNOTATION).as_deref()
                == Some(data_sync::sync_mode(true));
        return Ok(vec![Step {
            id: if prepare_in_final {
                PREPARE_SYNC_STEP
            } else {
                data_sync::STEP_ID
            }
            .to_owned(),
            description: data_sync::description(params),
            op: Op::AwaitJob,
            target: ObjectRef::new(Kind::Job, name.clone()),
            reason: "a data-sync Job is still running; waiting for it".into(),
            action: Action::AwaitJob {
                name,
                wait: SYNC_WAIT,
            },
        }]);
    }
    if params.prepare {
        prepare_sync_steps(params, observed)
    } else {
        final_sync_steps(params, observed)
    }
}

/// Every step after a complete final sync, planned from its data. Also run on the data of the
/// prepare copy before the final sync, for its errors: a refusal then comes while the source
/// still serves.
fn after_sync(
    params: &MigrateParams,
    observed: &Observed,
    data: &crate::observed::ExtractedData,
) -> Result<Vec<Step>, PlanError> {
    // Decided before the first write after the sync, so that a run that cannot decide
    // changes nothing.
    let tftp =
        crate::builders::tftp::decide(params, data).map_err(|_| PlanError::TftpNotRecorded {
            job: data.job.clone(),
        })?;
    // The `db` pod mounts Secret `db-cert`: the TLS phase goes between the database's data
    // and its service. Planned in this order so that a refused PostgreSQL version is the
    // error reported, before a missing CA password.
    let database = database::steps(params, observed, data)?;
    let tls = tls::steps(params, observed, data)?;
    let mut steps = database.data;
    steps.extend(tls);
    steps.extend(database.service);
    steps.extend(server::steps(params, observed, data, tftp));
    Ok(steps)
}

/// Plans `migrate` from what was observed.
pub fn plan(params: &MigrateParams, observed: &Observed) -> Result<Plan, PlanError> {
    // A pull Secret written by an earlier run stays in use when no registry flag is given:
    // the pods that run already reference it.
    let reused;
    let params = if params.pull_secret == PullSecret::None
        && observed.contains(Kind::Secret, names::REGISTRY_SECRET)
    {
        reused = MigrateParams {
            pull_secret: PullSecret::Reused,
            ..params.clone()
        };
        &reused
    } else {
        params
    };
    let ns = &params.namespace;
    crate::phase::check(params, observed)?;
    tls::preflight(params, observed)?;
    crate::storage::check(params, observed)?;
    crate::pod_security::check(params, observed)?;
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
    if let Some(claim) = &params.mirror_claim {
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
    // Before anything else is written: an image the migration cannot use is refused while the
    // source still serves.
    steps.extend(
        image_check::jobs(params)
            .into_iter()
            .map(|job| job_step(observed, job, IMAGE_CHECK_WAIT)),
    );
    steps.push(ssh_key_step(params, observed)?);
    steps.push(ssh_config_step(params, observed)?);
    steps.extend(pvc_steps(params, observed));
    steps.push(apply_step(
        "sync-service-account",
        "ServiceAccount the data-sync Job runs as".into(),
        Object::ServiceAccount(migration::service_account(ns)),
        observed,
    ));
    steps.push(apply_step(
        "sync-role",
        format!(
            "permission to get and patch Secret {} only",
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
        steps.extend(after_sync(params, observed, &data)?);
    }
    Ok(Plan {
        namespace: ns.clone(),
        steps,
    })
}
