//! Permissions, before the first write: every request the migration will make, as the
//! (verb, group, resource, subresource, namespace) an authorizer decides on, and the verdict on
//! what the cluster answered to a `SelfSubjectAccessReview` for each (`effects` asks; the
//! verdict is pure). Writes and reads both: a run that may create its Job but not watch its
//! pods or read their log would stop the source and then fail in the middle of the outage.
//!
//! The reads mirror what `effects` requests: a GET of each object the observation names and a
//! LIST of the migration's Jobs (`effects::observe`); a GET before each apply
//! (`effects::apply`); for a Job it runs or waits on, the Job watched by name and its pods by
//! label (a watcher lists, then watches), and `pods/log` to stream and tail the log
//! (`effects::job`); for a Deployment it waits on or scales, a GET, the Deployment and its
//! pods watched, and the failing container's log (`effects::deployment`); for a custom
//! resource it waits on, a watch of its kind (`effects::custom`); for an object it deletes,
//! the DELETE and a watch of it by name until it is gone (`effects::delete`); a LIST of each kind
//! an observation reads every object of (an upgrade's ResourceQuotas and LimitRanges, which the
//! `view` role grants: a run that cannot read them cannot tell whether its claim will be
//! admitted, so it asks rather than guesses). The cluster-wide lists of
//! StorageClasses and IngressClasses are not needed: a refusal there reads as "none".
//!
//! Kubernetes authorizes each request by its verb and resource attributes
//! (<https://kubernetes.io/docs/reference/access-authn-authz/authorization/>; the review's
//! `spec.resourceAttributes` are `authorization.k8s.io/v1` `ResourceAttributes`). A server-side
//! apply is a `patch`; an apply that creates the object is authorized as `create` as well
//! (<https://kubernetes.io/docs/reference/using-api/api-concepts/#patch-and-apply>; the create
//! path of `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`), so an absent
//! object needs both.

use crate::kubectl::Kubectl;
use crate::object::{Kind, Object};
use crate::observed::Observed;
use crate::plan::Planner;
use crate::plan::{Action, Op, Step};

pub use crate::permission::Access;

/// The group and plural resource of a kind.
pub fn group_resource(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::Namespace => ("", "namespaces"),
        Kind::Secret => ("", "secrets"),
        Kind::ConfigMap => ("", "configmaps"),
        Kind::PersistentVolumeClaim => ("", "persistentvolumeclaims"),
        Kind::ServiceAccount => ("", "serviceaccounts"),
        Kind::Role => ("rbac.authorization.k8s.io", "roles"),
        Kind::RoleBinding => ("rbac.authorization.k8s.io", "rolebindings"),
        Kind::Job => ("batch", "jobs"),
        Kind::Deployment => ("apps", "deployments"),
        Kind::Service => ("", "services"),
        Kind::Ingress => ("networking.k8s.io", "ingresses"),
        Kind::NetworkPolicy => ("networking.k8s.io", "networkpolicies"),
        Kind::ResourceQuota => ("", "resourcequotas"),
        Kind::LimitRange => ("", "limitranges"),
        Kind::Custom(c) => (
            c.api_version().split('/').next().unwrap_or_default(),
            c.plural(),
        ),
    }
}

fn object_namespace(object: &Object) -> Option<String> {
    let json = object.to_json();
    json["metadata"]["namespace"].as_str().map(str::to_owned)
}

/// The namespace a kind's object lives in: `None` when cluster-scoped.
fn kind_namespace(kind: Kind, namespace: &str) -> Option<String> {
    match kind {
        Kind::Custom(c) => Some(c.fixed_namespace().unwrap_or(namespace).to_owned()),
        k if k.namespaced() => Some(namespace.to_owned()),
        _ => None,
    }
}

/// What watching a Job (or a Deployment: `group`, `resource`) and its pods needs: the object
/// read and watched, its pods listed and watched, their log read.
fn wait_reads(group: &str, resource: &str, namespace: &str) -> Vec<Access> {
    let ns = Some(namespace);
    vec![
        Access::new("get", group, resource, ns),
        Access::new("list", group, resource, ns),
        Access::new("watch", group, resource, ns),
        Access::new("list", "", "pods", ns),
        Access::new("watch", "", "pods", ns),
        Access::pod_log(namespace),
    ]
}

/// What applying an object of `kind` in `ns` (`None`: cluster-scoped) needs: the apply reads
/// the object's metadata first (what changed), then patches it; an apply that creates the
/// object is authorized as `create` too.
pub(crate) fn apply_needs(kind: Kind, ns: Option<&str>, creates: bool) -> Vec<Access> {
    let (group, resource) = group_resource(kind);
    let mut out = vec![
        Access::new("get", group, resource, ns),
        Access::new("patch", group, resource, ns),
    ];
    if creates {
        out.push(Access::new("create", group, resource, ns));
    }
    out
}

/// What running a Job needs: it is written by server-side apply, as every object (a patch
/// that creates), then waited on.
pub(crate) fn run_job_needs(namespace: &str) -> Vec<Access> {
    let mut out = wait_reads("batch", "jobs", namespace);
    out.push(Access::new("patch", "batch", "jobs", Some(namespace)));
    out.push(Access::new("create", "batch", "jobs", Some(namespace)));
    out
}

/// What waiting on a Job needs; `reports`: an inspection's report is copied onto its Job once
/// it ended (`effects::execute`), a patch.
pub(crate) fn await_job_needs(namespace: &str, reports: bool) -> Vec<Access> {
    let mut out = wait_reads("batch", "jobs", namespace);
    if reports {
        out.push(Access::new("patch", "batch", "jobs", Some(namespace)));
    }
    out
}

/// What scaling a Deployment and waiting for it needs.
pub(crate) fn scale_needs(namespace: &str) -> Vec<Access> {
    let mut out = wait_reads("apps", "deployments", namespace);
    out.push(Access::new("patch", "apps", "deployments", Some(namespace)));
    out
}

/// What waiting for a Deployment needs.
pub(crate) fn wait_deployment_needs(namespace: &str) -> Vec<Access> {
    wait_reads("apps", "deployments", namespace)
}

/// What waiting until an object of `kind` is ready needs: a watch of its kind.
pub(crate) fn wait_ready_needs(kind: Kind, namespace: &str) -> Vec<Access> {
    let (group, resource) = group_resource(kind);
    let ns = kind_namespace(kind, namespace);
    vec![
        Access::new("list", group, resource, ns.as_deref()),
        Access::new("watch", group, resource, ns.as_deref()),
    ]
}

/// What deleting an object of `kind` needs: the wait until it is gone is a watch by name (its
/// initial list, then the watch); nothing is read before the DELETE, whose 404 says "gone
/// already".
pub(crate) fn delete_needs(kind: Kind, namespace: &str) -> Vec<Access> {
    let (group, resource) = group_resource(kind);
    let ns = kind_namespace(kind, namespace);
    vec![
        Access::new("delete", group, resource, ns.as_deref()),
        Access::new("list", group, resource, ns.as_deref()),
        Access::new("watch", group, resource, ns.as_deref()),
    ]
}

/// The permissions one step's action needs, reads and writes.
fn step_needs(step: &Step, namespace: &str) -> Vec<Access> {
    match &step.action {
        Action::Apply(object) => {
            let kind = object.object_ref().kind;
            let ns = if kind.namespaced() {
                Some(object_namespace(object).unwrap_or_else(|| namespace.to_owned()))
            } else {
                None
            };
            // An apply step creates what its state did not hold (`plan::steps::apply_step`).
            apply_needs(kind, ns.as_deref(), step.op == Op::Create)
        }
        Action::RunJob { .. } => run_job_needs(namespace),
        Action::AwaitJob { .. } => await_job_needs(namespace, step.id.starts_with("inspect-")),
        Action::Scale { .. } => scale_needs(namespace),
        Action::WaitDeployment { .. } => wait_deployment_needs(namespace),
        Action::WaitReady { target, .. } => wait_ready_needs(target.kind, namespace),
        Action::Delete { target, .. } => delete_needs(target.kind, namespace),
        Action::None => Vec::new(),
    }
}

/// What each observation reads: a LIST of each kind it lists, a GET of every other object it
/// names (custom kinds only where the cluster serves them, as `effects::observe` skips the
/// others) and a LIST of the Jobs. The migrate loop watches each kind instead where the server
/// allows it, and falls back to these reads for a kind whose watch it refuses: these are what
/// a run cannot do without.
fn observation_needs<P: Planner>(params: &P, observed: &Observed) -> Vec<Access> {
    observation_reads(&params.observation(), |c| observed.serves(c))
}

/// [`observation_needs`] of an observation, `serves` saying which custom kinds the cluster
/// serves.
pub(crate) fn observation_reads(
    observation: &crate::observed::Observation,
    serves: impl Fn(crate::object::CustomKind) -> bool,
) -> Vec<Access> {
    let ns = observation.namespace.as_str();
    let listed = observation.listed_kinds();
    let mut out: Vec<Access> = observation
        .named
        .iter()
        .filter(|target| match target.kind {
            Kind::Custom(c) => serves(c),
            _ => true,
        })
        .map(|target| {
            let (group, resource) = group_resource(target.kind);
            Access::new(
                if listed.contains(&target.kind) {
                    "list"
                } else {
                    "get"
                },
                group,
                resource,
                kind_namespace(target.kind, ns).as_deref(),
            )
        })
        .collect();
    // Every object of these kinds, by a LIST (`effects::observe`).
    for kind in &observation.every {
        let (group, resource) = group_resource(*kind);
        out.push(Access::new("list", group, resource, Some(ns)));
    }
    out.push(Access::new("list", "batch", "jobs", Some(ns)));
    // The record of the server's specification, read by name before the parameters are made
    // (`effects::record`), whether or not the observation lists ConfigMaps.
    out.push(Access::new("get", "", "configmaps", Some(ns)));
    out
}

/// Every distinct permission this run needs, from the state it starts from: the reads of each
/// observation, and the reads and writes of the steps [`crate::preview::foreseen`] plans (a
/// missing CA password stood in for, the steps before another planning error). Sorted, no
/// duplicates.
pub fn needed<P: Planner>(params: &P, observed: &Observed) -> Vec<Access> {
    needed_by(
        params,
        observed,
        &crate::preview::foreseen(params, observed),
    )
}

/// [`needed`] of the steps `foreseen` from `observed` (the migrate loop plans them once, for
/// its step count too).
pub fn needed_by<P: Planner>(params: &P, observed: &Observed, foreseen: &[Step]) -> Vec<Access> {
    let mut out = observation_needs(params, observed);
    let params = params.server();
    for step in foreseen {
        out.extend(step_needs(step, &params.namespace));
    }
    // A run that writes holds the namespace's Lease from its first write to its end,
    // and writes the record of the operation (`operation`), pruning the oldest.
    if foreseen.iter().any(|s| s.action != Action::None) {
        out.extend(crate::lock::needs(&params.namespace));
        out.extend(crate::operation::needs(&params.namespace));
    }
    out.sort();
    out.dedup();
    out
}

/// The permissions of `needed` the cluster said no to; one that was not asked about counts as
/// allowed (nothing is refused on a guess).
pub fn missing(needed: &[Access], answers: &[(Access, bool)]) -> Vec<Access> {
    needed
        .iter()
        .filter(|a| answers.iter().any(|(b, allowed)| b == *a && !allowed))
        .cloned()
        .collect()
}

/// Refuses, before any write, a run whose user may not make some of its writes. `answers`
/// from the reviews `effects` made for [`needed`].
pub fn check(needed: &[Access], answers: &[(Access, bool)]) -> Result<(), crate::plan::PlanError> {
    let missing = missing(needed, answers);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(crate::plan::PlanError::AccessDenied { missing })
    }
}

/// The permissions as one input of the dry run's list.
pub fn input(
    needed: &[Access],
    answers: &[(Access, bool)],
    kubectl: &Kubectl,
) -> crate::plan::phase::Input {
    use crate::plan::phase::Need;
    let missing = missing(needed, answers);
    let need = if missing.is_empty() {
        let writes = needed.iter().filter(|a| a.is_write()).count();
        Need::Allowed(format!(
            "{} permission(s) the run needs ({writes} to write, {} to read: the objects it observes and waits on, and pods/log for the Jobs' logs), checked with SelfSubjectAccessReviews",
            needed.len(),
            needed.len() - writes
        ))
    } else {
        Need::Denied(
            missing
                .iter()
                .map(|a| format!("{} (`{}`)", a.describe(), a.can_i(kubectl)))
                .collect::<Vec<_>>()
                .join(", "),
        )
    };
    crate::plan::phase::Input {
        name: "Permissions",
        need,
        how: "them from a cluster administrator (a Role or ClusterRole bound to your user)",
    }
}
