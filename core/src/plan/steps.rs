//! Step constructors shared by every phase: an object applied, kept or deleted, a Job run once
//! per spec.

use super::{Action, DeploymentWait, JobWait, Op, Step};
use k8s_openapi::api::batch::v1::Job;
use serde::Serialize;

use crate::catalogue::names;
use crate::labels;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::{Observed, deployment_ready};

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

/// Is `live` the intended object exactly as written, with at most a status beside it? Then
/// nothing the intended object sets differs (`differs(x, x)` is false, and the intended
/// objects set no status), which spares serializing both to JSON. That is the case after every
/// simulated write (`simulate` inserts the object written, and marks a Deployment ready), so
/// for most of the ~75 plans of a preview and of the plugin's plans between two observations:
/// the JSON comparison was a third of a plan's time (planning benchmark, dev profile). Objects
/// read from a cluster carry server-set metadata and defaults and take the JSON comparison.
fn as_written(intended: &Object, live: &Object) -> bool {
    match (intended, live) {
        (Object::Deployment(i), Object::Deployment(l)) => {
            i.status.is_none() && i.metadata == l.metadata && i.spec == l.spec
        }
        (i, l) => i == l,
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
        Some(live)
            if !as_written(&intended, live) && differs(&intended.to_json(), &live.to_json()) =>
        {
            (
                Op::Update,
                "differs from the intended object".to_owned(),
                Action::Apply(Box::new(intended)),
            )
        }
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

/// The step of a Deployment whose builder gave `base`, under the rollout rule of
/// [`crate::builders::hardening`]: a changed pod template restarts a running server, so a
/// Deployment written by a version without the hardening is kept while it matches `base`
/// ("run it again is safe" holds after the tool's update); the hardened Deployment is written
/// when it is created or its pod template changes for another reason (an upgrade's image, a
/// flag). A change outside the template (replicas) writes `base` to such a Deployment,
/// leaving its pods alone.
pub(crate) fn deployment_step(
    id: &str,
    description: String,
    base: k8s_openapi::api::apps::v1::Deployment,
    observed: &Observed,
) -> Step {
    deployment_step_since(id, description, base, &[], observed, false)
}

/// [`deployment_step`]; `network_policy`: the tool's NetworkPolicy selects the pods
/// (`hardening::deployment_with`).
pub(crate) fn deployment_step_with(
    id: &str,
    description: String,
    base: k8s_openapi::api::apps::v1::Deployment,
    observed: &Observed,
    network_policy: bool,
) -> Step {
    deployment_step_since(id, description, base, &[], observed, network_policy)
}

/// [`deployment_step_with`] with the same rule for what earlier versions of this tool wrote:
/// `earlier` are the builder's results before it learned something that changes the pod
/// template (the CA mounted into the Salt file root for the images that do not copy it there).
/// A live Deployment that is one of them, hardened or not, is kept, its pods running; the next
/// change of its pod template carries what the tool learned. A change outside the template
/// writes that form with the change, leaving its pods alone.
pub(crate) fn deployment_step_since(
    id: &str,
    description: String,
    base: k8s_openapi::api::apps::v1::Deployment,
    earlier: &[k8s_openapi::api::apps::v1::Deployment],
    observed: &Observed,
    network_policy: bool,
) -> Step {
    let hardened = crate::builders::hardening::deployment_with(base.clone(), network_policy);
    let template = |d: &k8s_openapi::api::apps::v1::Deployment| {
        d.spec
            .as_ref()
            .map(|s| serde_json::to_value(&s.template).unwrap_or_default())
            .unwrap_or_default()
    };
    let step = apply_step(
        id,
        description.clone(),
        Object::Deployment(hardened.clone()),
        observed,
    );
    let Some(Object::Deployment(live)) = observed.objects.get(&step.target) else {
        return step;
    };
    if step.op != Op::Update {
        return step;
    }
    let live_object = Object::Deployment(live.clone()).to_json();
    // Every form the tool writes or wrote, the current one first: the plain ones, which a
    // running server keeps (they differ from the current in their pod templates only), and
    // the hardened earlier ones. The current hardened form is the step's own.
    let mut forms: Vec<(k8s_openapi::api::apps::v1::Deployment, &str)> =
        vec![(base, HARDENING_LATER)];
    for form in earlier {
        forms.push((form.clone(), LEARNED_LATER));
        forms.push((
            crate::builders::hardening::deployment_with(form.clone(), network_policy),
            LEARNED_LATER,
        ));
    }
    if let Some((_, why)) = forms
        .iter()
        .find(|(form, _)| !differs(&Object::Deployment(form.clone()).to_json(), &live_object))
    {
        return keep_step(id, description, step.target, format!("as intended; {why}"));
    }
    let live_template = template(live);
    if differs(&template(&hardened), &live_template)
        && let Some((form, _)) = forms
            .into_iter()
            .find(|(form, _)| !differs(&template(form), &live_template))
    {
        return Step {
            reason: "differs from the intended object outside its pod template; the pods are \
                     left running"
                .to_owned(),
            action: Action::Apply(Box::new(Object::Deployment(form))),
            ..step
        };
    }
    step
}

/// Why a Deployment written before the hardening is kept.
const HARDENING_LATER: &str = "its pods get the pod security settings with the next change of \
                               its pod template (an upgrade), not a restart of their own";
/// Why a Deployment written before the tool learned something of its image is kept.
const LEARNED_LATER: &str = "its pods get what this version of the tool adds to their template \
                             (the CA mounted for an image that does not copy it) with the next \
                             change of that template (an upgrade), not a restart of their own";

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
pub(crate) fn job_step(observed: &Observed, job: Job, wait: JobWait) -> Step {
    let annotation = |key: &str| job_label(&job, key).unwrap_or_default();
    let step_id = annotation(labels::STEP_ANNOTATION);
    let hash = annotation(labels::SPEC_HASH_ANNOTATION);
    let description = annotation(labels::DESCRIPTION_ANNOTATION);
    let jobs = observed.attempts(&step_id);
    // Two Jobs of one step must never work on the same volumes at once.
    if let Some(running) = jobs.running() {
        let name = job_name(running);
        let reason = format!("Job {name} is still running; waiting for it");
        return await_job_step(&step_id, description, name, wait, reason);
    }
    if let Some(done) = jobs.first_succeeded_of_spec(&hash) {
        return done_step(&step_id, description, &job_name(done));
    }
    let reason = match jobs.last_of_spec(&hash) {
        Some(failed) => format!("Job {} failed; running a new attempt", job_name(failed)),
        None if jobs.is_empty() => "has not run yet".to_owned(),
        None => "has not run for this data sync and these parameters yet".to_owned(),
    };
    let base = job_name(&job);
    run_job_step(observed, &step_id, description, job, base, wait, reason)
}

/// The step that creates `job` under `base`, or the first `base-N` no earlier Job has (an
/// attempt is never overwritten: its log and status stay), and waits for it to end.
pub(crate) fn run_job_step(
    observed: &Observed,
    id: &str,
    description: String,
    mut job: Job,
    base: String,
    wait: JobWait,
    reason: String,
) -> Step {
    let name = unique_job_name(base, observed);
    job.metadata.name = Some(name.clone());
    Step {
        id: id.to_owned(),
        description,
        op: Op::RunJob,
        target: ObjectRef::new(Kind::Job, name),
        reason,
        action: Action::RunJob {
            job: Box::new(job),
            wait,
        },
    }
}

/// The step that waits for Job `name`, which is running already (a resumed run).
pub(crate) fn await_job_step(
    id: &str,
    description: String,
    name: String,
    wait: JobWait,
    reason: String,
) -> Step {
    Step {
        id: id.to_owned(),
        description,
        op: Op::AwaitJob,
        target: ObjectRef::new(Kind::Job, name.clone()),
        reason,
        action: Action::AwaitJob { name, wait },
    }
}

/// A Job's name (empty when it has none, which an observed Job always has).
pub(crate) fn job_name(job: &Job) -> String {
    job.metadata.name.clone().unwrap_or_default()
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

/// A wait for `target`: kept once it is `ready`, otherwise a step carrying out `action`.
pub(crate) fn wait_step(
    id: &str,
    description: String,
    target: ObjectRef,
    ready: bool,
    action: Action,
) -> Step {
    if ready {
        return keep_step(id, description, target, "ready".into());
    }
    Step {
        id: id.to_owned(),
        description,
        op: Op::Wait,
        target,
        reason: "not ready yet".to_owned(),
        action,
    }
}

/// The wait until Deployment `name` is ready.
pub(crate) fn deployment_wait_step(
    observed: &Observed,
    id: &str,
    name: &str,
    description: String,
    wait: DeploymentWait,
) -> Step {
    wait_step(
        id,
        description,
        ObjectRef::new(Kind::Deployment, name),
        observed.deployment(name).is_some_and(deployment_ready),
        Action::WaitDeployment {
            name: name.to_owned(),
            wait,
        },
    )
}

/// The step of a Job that succeeded: nothing left to do for it.
pub(crate) fn done_step(id: &str, description: String, job_name: &str) -> Step {
    Step {
        id: id.to_owned(),
        description,
        op: Op::Done,
        target: ObjectRef::new(Kind::Job, job_name),
        reason: format!("Job {job_name} succeeded"),
        action: Action::None,
    }
}

/// The Job of step `id` that succeeded last, if any.
pub(crate) fn last_succeeded<'a>(observed: &'a Observed, id: &str) -> Option<&'a Job> {
    observed.attempts(id).last_succeeded()
}

/// How the API server's garbage collector treats what a deleted object owns: the
/// `propagationPolicy` of the DELETE request.
///
/// Upstream: `DeletionPropagation` in k8s.io/apimachinery `pkg/apis/meta/v1/types.go`
/// (Foreground: the owner stays, with the `foregroundDeletion` finalizer, until every dependent
/// whose ownerReference sets `blockOwnerDeletion` is gone; Background: the owner goes at once and
/// the collector removes the dependents after), carried out by kube-controller-manager's
/// `pkg/controller/garbagecollector/garbagecollector.go`. Always sent, never left to the
/// server's default: `batch/v1` Jobs default to orphaning their pods
/// (`DefaultGarbageCollectionPolicy` in kubernetes `pkg/registry/batch/job/strategy.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Propagation {
    Foreground,
    Background,
}

impl Propagation {
    /// Foreground for the kinds that own pods (a Deployment through its ReplicaSets, a Job
    /// directly), so that once the object is gone its pods are too and nothing still mounts a
    /// volume or reads a Secret a later step removes; Background for the rest, which own
    /// nothing of ours.
    pub fn for_kind(kind: Kind) -> Propagation {
        match kind {
            Kind::Deployment | Kind::Job => Propagation::Foreground,
            Kind::Namespace
            | Kind::Secret
            | Kind::ConfigMap
            | Kind::PersistentVolumeClaim
            | Kind::ServiceAccount
            | Kind::Role
            | Kind::RoleBinding
            | Kind::Service
            | Kind::Ingress
            | Kind::NetworkPolicy
            | Kind::ResourceQuota
            | Kind::LimitRange
            | Kind::Custom(_) => Propagation::Background,
        }
    }

    /// As the DELETE request's `propagationPolicy` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Propagation::Foreground => "Foreground",
            Propagation::Background => "Background",
        }
    }
}

/// How long to wait for a deleted object to be gone. `None`: no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DeleteWait {
    pub timeout_seconds: Option<u64>,
}

impl DeleteWait {
    /// Pods get their termination grace (30 s unless the pod says otherwise) and the collector
    /// goes through ReplicaSets first: minutes, not seconds; so does a namespace, whose
    /// controller empties it before it goes. An object owning nothing is gone as soon as its
    /// finalizers (none of ours) are.
    pub fn for_kind(kind: Kind) -> DeleteWait {
        let seconds = match (kind, Propagation::for_kind(kind)) {
            (Kind::Namespace, _) | (_, Propagation::Foreground) => 300,
            (_, Propagation::Background) => 60,
        };
        DeleteWait {
            timeout_seconds: Some(seconds),
        }
    }
}

/// The user's explicit choice to delete what holds data: the claims and the credential
/// Secrets. No `Default`, `Clone` or `Deserialize`, and one constructor, so that holding one
/// means a command was asked for it (`uninstall --purge-volumes`, confirmed); the planner
/// threads it from there to [`purge_step`], and no other path reaches a claim.
#[derive(Debug, PartialEq, Eq)]
pub struct Purge(());

impl Purge {
    /// Only for a command's explicit, confirmed purge option.
    pub fn chosen_by_user() -> Purge {
        Purge(())
    }
}

/// A deletion of data asked for without a [`Purge`]: a bug in the caller's planner, refused
/// before anything is written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refusing to delete {target}: it holds the server's data or credentials, which only an explicit purge deletes (uninstall --purge-volumes); nothing was deleted. This is a bug in kubectl-uyuni's planner: please report it"
)]
pub struct DataDeletionRefused {
    pub target: ObjectRef,
}

/// The credential Secrets: losing one locks the server out of its own database (or the
/// administrator out of the server), so they are data as much as the claims.
const CREDENTIAL_SECRETS: &[&str] = &[
    names::DB_SECRET,
    names::DB_ADMIN_SECRET,
    names::REPORTDB_SECRET,
    // The install command's administrator account.
    names::ADMIN_SECRET,
    names::SCC_SECRET,
    names::SSH_KEY_SECRET,
    names::REGISTRY_SECRET,
    names::CA_SECRET,
    names::CA_PASSWORD_SECRET,
];

/// Whether `target` holds data that only a purge deletes.
pub fn holds_data(target: &ObjectRef) -> bool {
    match target.kind {
        Kind::PersistentVolumeClaim => true,
        Kind::Secret => CREDENTIAL_SECRETS.contains(&target.name.as_str()),
        _ => false,
    }
}

/// The step that deletes `target` and waits until it is gone, or keeps it (`Unchanged`) when
/// it is absent already. Refuses a claim or a credential Secret: those go through
/// [`purge_step`].
pub fn delete_step(
    observed: &Observed,
    target: ObjectRef,
    description: String,
) -> Result<Step, DataDeletionRefused> {
    if holds_data(&target) {
        return Err(DataDeletionRefused { target });
    }
    Ok(deletion(observed, target, description))
}

/// The Secrets only a migration uses: the SSH key to its source and its CA key's password.
/// `migrate` deletes them once the migration has finished, unless `--keep-migration-data`
/// (`plan::migrate::ssh::cleanup_steps`); every other path treats them as credentials.
pub const MIGRATION_ONLY_SECRETS: &[&str] = &[names::SSH_KEY_SECRET, names::CA_PASSWORD_SECRET];

/// [`delete_step`] for one of [`MIGRATION_ONLY_SECRETS`]; any other target is refused.
pub fn migration_secret_deletion(
    observed: &Observed,
    target: ObjectRef,
    description: String,
) -> Result<Step, DataDeletionRefused> {
    if target.kind != Kind::Secret || !MIGRATION_ONLY_SECRETS.contains(&target.name.as_str()) {
        return Err(DataDeletionRefused { target });
    }
    Ok(deletion(observed, target, description))
}

/// [`delete_step`] for what holds data, on the user's explicit choice.
pub fn purge_step(
    observed: &Observed,
    target: ObjectRef,
    description: String,
    _purge: &Purge,
) -> Step {
    deletion(observed, target, description)
}

fn deletion(observed: &Observed, target: ObjectRef, description: String) -> Step {
    let id = format!("delete-{}-{}", target.kind.resource(), target.name);
    if !observed.objects.contains_key(&target) {
        return keep_step(&id, description, target, "absent; nothing to delete".into());
    }
    Step {
        id,
        description,
        op: Op::Delete,
        reason: "present".to_owned(),
        action: Action::Delete {
            propagation: Propagation::for_kind(target.kind),
            wait: DeleteWait::for_kind(target.kind),
            target: target.clone(),
        },
        target,
    }
}
