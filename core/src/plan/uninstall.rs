//! `uninstall`'s plan: every object of the namespace that carries the tool's labels deleted in
//! dependency order, each deletion waiting until the object (and, for a Deployment or a Job,
//! its pods) is gone, so that nothing still mounts a claim or reads a Secret when a later step
//! deletes it:
//!
//! 1. the Deployments, the server and its components first and `db` last (the server writes
//!    to the database until its pods are gone);
//! 2. what routes to them: Services, the database's NetworkPolicy, Ingresses, Traefik's routes
//!    and middleware;
//! 3. cert-manager's Certificates, then the Issuers that sign them;
//! 4. the Jobs (their logs go with them: the last thing the user may want to read);
//! 5. ConfigMaps, RoleBindings, Roles, ServiceAccounts and the Secrets that hold no data;
//! 6. the claims and credential Secrets, only on an explicit, confirmed purge
//!    ([`Purge::chosen_by_user`]); kept otherwise;
//! 7. the ingress controller's HelmChartConfig in `kube-system`, when this tool wrote it;
//! 8. the namespace, with `--delete-namespace`, when this tool created it and nothing kept
//!    is left in it.
//!
//! An object without the tool's labels is never touched: it stays in the plan as
//! `Unchanged`, so the preview says what is left and why. Only present objects are in the
//! plan: a finished uninstall plans no action again.

use super::steps::holds_data;
use super::{Plan, PlanError, Purge, delete_step, keep_step, purge_step};
use crate::catalogue::names;
use crate::labels;
use crate::object::{CustomKind, Kind, Object, ObjectRef};
use crate::observed::{Observed, deployment_ready};
use crate::params::UninstallParams;

/// Why an object without the tool's labels stays.
pub const NOT_OURS: &str = "not created by kubectl-uyuni; left";

/// The Deployments in the order they go: the server and its components, then the database
/// they write to.
const DEPLOYMENTS: [&str; 5] = [
    names::SERVER_DEPLOYMENT,
    names::HUB_DEPLOYMENT,
    names::COCO_DEPLOYMENT,
    names::TFTP_DEPLOYMENT,
    names::DB_DEPLOYMENT,
];

/// Whether the object carries the tool's labels (`labels::MANAGED_SELECTOR`).
pub fn ours(object: &Object) -> bool {
    labels::selects(labels::MANAGED_SELECTOR, object.metadata().labels.as_ref())
}

/// Where a target goes in the order of the module's list; `None` for what uninstall never
/// deletes (the namespace comes last, on its own).
fn rank(target: &ObjectRef) -> Option<(u8, usize)> {
    let rank = |r: u8| Some((r, 0));
    match target.kind {
        Kind::Deployment => Some((
            0,
            DEPLOYMENTS
                .iter()
                .position(|d| *d == target.name)
                // A Deployment of ours that is none of these: before `db`, after the rest.
                .unwrap_or(DEPLOYMENTS.len() - 1),
        )),
        // The database's NetworkPolicy goes with the Services, once no pod it guards is left.
        Kind::Service | Kind::NetworkPolicy => rank(1),
        Kind::Ingress => rank(2),
        Kind::Custom(CustomKind::IngressRouteTcp | CustomKind::IngressRouteUdp) => rank(3),
        Kind::Custom(CustomKind::Middleware) => rank(4),
        Kind::Custom(CustomKind::Certificate) => rank(5),
        Kind::Custom(CustomKind::Issuer) => rank(6),
        Kind::Job => rank(7),
        Kind::ConfigMap => rank(8),
        Kind::RoleBinding => rank(9),
        Kind::Role => rank(10),
        Kind::ServiceAccount => rank(11),
        Kind::Secret if !holds_data(target) => rank(12),
        Kind::PersistentVolumeClaim | Kind::Secret => rank(13),
        Kind::Custom(CustomKind::HelmChartConfig) => rank(14),
        // The user's, only read: never deleted.
        Kind::Namespace | Kind::ResourceQuota | Kind::LimitRange => None,
    }
}

/// Before any write: the namespace holds something of the tool's, or is the tool's and
/// `--delete-namespace` asks for it (what a purge without it leaves). Checked once, at the
/// start of a run (a finished purge leaves nothing, and the plan of what is left is then
/// empty, not an error).
pub fn check(params: &UninstallParams, observed: &Observed) -> Result<(), PlanError> {
    let any = observed.objects.iter().any(|(target, object)| {
        (target.kind != Kind::Namespace || params.delete_namespace)
            && ours(object)
            && !for_another_namespace(target, object, &params.namespace)
    });
    if any {
        Ok(())
    } else {
        Err(PlanError::NothingToUninstall {
            namespace: params.namespace.clone(),
        })
    }
}

/// The ingress controller's HelmChartConfig in `kube-system`, written for another namespace's
/// server (its annotation names that namespace): neither deleted nor a reason to uninstall here.
fn for_another_namespace(target: &ObjectRef, object: &Object, ns: &str) -> bool {
    target.kind == Kind::Custom(CustomKind::HelmChartConfig)
        && object
            .metadata()
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::labels::FOR_NAMESPACE_ANNOTATION))
            .map(String::as_str)
            != Some(ns)
}

/// Whether the server serves: Deployment `uyuni` of the tool's is ready. Removing it is an
/// outage the user agrees to.
pub fn serving(observed: &Observed) -> bool {
    observed
        .get(Kind::Deployment, names::SERVER_DEPLOYMENT)
        .is_some_and(|o| ours(o) && matches!(o, Object::Deployment(d) if deployment_ready(d)))
}

/// The claims and credential Secrets of the tool's in the namespace: what an uninstall keeps
/// unless purged, and what a purge deletes.
pub fn data(observed: &Observed) -> Vec<ObjectRef> {
    observed
        .objects
        .iter()
        .filter(|(target, object)| holds_data(target) && ours(object))
        .map(|(target, _)| target.clone())
        .collect()
}

/// A claim as the purge's question lists it: its name, its size and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClaimSummary {
    pub name: String,
    /// The capacity it was given, or else the size it asks for; empty when neither is known.
    pub size: String,
    pub holds: String,
}

/// The tool's claims in the namespace, for the purge's question.
pub fn claims(observed: &Observed) -> Vec<ClaimSummary> {
    observed
        .objects
        .iter()
        .filter_map(|(target, object)| match object {
            Object::PersistentVolumeClaim(claim) if ours(object) => {
                let quantity = |q: Option<
                    &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
                >| { q.map(|q| q.0.clone()) };
                let size = quantity(
                    claim
                        .status
                        .as_ref()
                        .and_then(|s| s.capacity.as_ref())
                        .and_then(|c| c.get("storage")),
                )
                .or_else(|| {
                    quantity(
                        claim
                            .spec
                            .as_ref()
                            .and_then(|s| s.resources.as_ref())
                            .and_then(|r| r.requests.as_ref())
                            .and_then(|r| r.get("storage")),
                    )
                })
                .unwrap_or_default();
                Some(ClaimSummary {
                    name: target.name.clone(),
                    size,
                    holds: holds(&target.name),
                })
            }
            _ => None,
        })
        .collect()
}

/// What a claim of the catalogue holds, in words.
fn holds(name: &str) -> String {
    use crate::volumes::VolumeRole;
    // `var-pgsql18`, and the volume of another PostgreSQL major (`var-pgsql19`).
    if name
        .strip_prefix(crate::volumes::DATABASE_VOLUME)
        .is_some_and(|major| !major.is_empty() && major.bytes().all(|b| b.is_ascii_digit()))
    {
        return "the PostgreSQL database".to_owned();
    }
    match crate::volumes::find(name) {
        Some(def) => match def.role {
            VolumeRole::Database => "the PostgreSQL database (before a major upgrade)".to_owned(),
            VolumeRole::Migration => "the migration Jobs' working files".to_owned(),
            VolumeRole::Server => format!("the server's {}", def.mount_path),
        },
        None => "data of the server".to_owned(),
    }
}

fn describe(target: &ObjectRef) -> String {
    format!("{} {}", target.kind.name(), target.name)
}

/// Plans `uninstall` from what was observed.
pub fn plan(params: &UninstallParams, observed: &Observed) -> Result<Plan, PlanError> {
    let ns = &params.namespace;
    let purge = params.purge_volumes.then(Purge::chosen_by_user);
    let mut present: Vec<(&ObjectRef, &Object, (u8, usize))> = observed
        .objects
        .iter()
        .filter_map(|(target, object)| rank(target).map(|r| (target, object, r)))
        .collect();
    // Stable: within a rank, by kind then name (the map's order).
    present.sort_by_key(|(_, _, r)| *r);
    let mut steps = Vec::new();
    let mut kept_inside = false;
    for (target, object, _) in present {
        let description = describe(target);
        let id = format!("delete-{}-{}", target.kind.resource(), target.name);
        if !ours(object) {
            kept_inside |= in_namespace(target.kind);
            steps.push(keep_step(&id, description, target.clone(), NOT_OURS.into()));
            continue;
        }
        if for_another_namespace(target, object, ns) {
            steps.push(keep_step(
                &id,
                description,
                target.clone(),
                format!(
                    "written for another namespace's server (annotation {}), which may route through it; left",
                    crate::labels::FOR_NAMESPACE_ANNOTATION
                ),
            ));
            continue;
        }
        let step = if holds_data(target) {
            match &purge {
                Some(purge) => purge_step(observed, target.clone(), description, purge),
                None => {
                    kept_inside = true;
                    keep_step(&id, description, target.clone(), kept_reason(target).into())
                }
            }
        } else {
            delete_step(observed, target.clone(), description)
                .map_err(PlanError::DataDeletionRefused)?
        };
        steps.push(step);
    }
    let ns_target = ObjectRef::new(Kind::Namespace, ns.clone());
    if let Some(namespace) = observed.objects.get(&ns_target) {
        let id = "delete-namespace";
        let description = format!("namespace {ns}");
        let step = if !ours(namespace) {
            keep_step(id, description, ns_target, NOT_OURS.into())
        } else if !params.delete_namespace {
            keep_step(
                id,
                description,
                ns_target,
                "kept (--delete-namespace deletes it)".into(),
            )
        } else if kept_inside {
            keep_step(
                id,
                description,
                ns_target,
                "kept: it still holds what uninstall keeps or did not create, which deleting it would delete too".into(),
            )
        } else {
            delete_step(observed, ns_target, description).map_err(PlanError::DataDeletionRefused)?
        };
        steps.push(step);
    }
    Ok(Plan {
        namespace: ns.clone(),
        steps,
    })
}

/// Whether deleting the namespace deletes an object of this kind (the HelmChartConfigs live in
/// `kube-system`).
fn in_namespace(kind: Kind) -> bool {
    match kind {
        Kind::Custom(c) => c.fixed_namespace().is_none(),
        k => k.namespaced(),
    }
}

fn kept_reason(target: &ObjectRef) -> &'static str {
    match target.kind {
        Kind::PersistentVolumeClaim => "kept: holds the server's data (--purge-volumes deletes it)",
        _ => "kept: credentials the server's data was set up with (--purge-volumes deletes it)",
    }
}
