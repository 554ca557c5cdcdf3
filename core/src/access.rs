//! Permissions, before the first write: every write the migration will make, as the
//! (verb, group, resource, namespace) an authorizer decides on, and the verdict on what the
//! cluster answered to a `SelfSubjectAccessReview` for each (`effects` asks; the verdict is
//! pure).
//!
//! Kubernetes authorizes each request by its verb and resource attributes
//! (https://kubernetes.io/docs/reference/access-authn-authz/authorization/; the review's
//! `spec.resourceAttributes` are `authorization.k8s.io/v1` `ResourceAttributes`). A server-side
//! apply is a `patch`; an apply that creates the object is authorized as `create` as well
//! (https://kubernetes.io/docs/reference/using-api/api-concepts/#patch-and-apply; the create
//! path of `staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go`), so an absent
//! object needs both.

use serde::Serialize;

use crate::kubectl::Kubectl;
use crate::object::{Kind, Object};
use crate::observed::Observed;
use crate::params::MigrateParams;
use crate::plan::{Action, Step, plan};
use crate::simulate::simulate;

/// One permission: what a `SelfSubjectAccessReview` asks.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Access {
    pub verb: String,
    /// API group, `""` for the core group.
    pub group: String,
    /// The plural resource name (`jobs`).
    pub resource: String,
    /// `None` for cluster-scoped resources.
    pub namespace: Option<String>,
}

impl Access {
    fn new(verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> Access {
        Access {
            verb: verb.to_owned(),
            group: group.to_owned(),
            resource: resource.to_owned(),
            namespace: namespace.map(str::to_owned),
        }
    }

    /// `jobs.batch`, `secrets`: the resource as kubectl names it with its group.
    pub fn resource_name(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// "create jobs.batch in namespace uyuni".
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {} in namespace {ns}", self.verb, self.resource_name()),
            None => format!("{} {} (cluster-wide)", self.verb, self.resource_name()),
        }
    }

    /// The `kubectl auth can-i` command that checks it, with the run's flags.
    pub fn can_i(&self, kubectl: &Kubectl) -> String {
        kubectl.cmd(
            self.namespace.as_deref(),
            &format!("auth can-i {} {}", self.verb, self.resource_name()),
        )
    }
}

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

/// The permissions one step's action needs.
fn step_needs(step: &Step, observed: &Observed, namespace: &str) -> Vec<Access> {
    match &step.action {
        Action::Apply(object) => {
            let kind = object.object_ref().kind;
            let (group, resource) = group_resource(kind);
            let ns = if kind.namespaced() {
                Some(object_namespace(object).unwrap_or_else(|| namespace.to_owned()))
            } else {
                None
            };
            let mut out = vec![Access::new("patch", group, resource, ns.as_deref())];
            if !observed.objects.contains_key(&object.object_ref()) {
                out.push(Access::new("create", group, resource, ns.as_deref()));
            }
            out
        }
        Action::RunJob { .. } => vec![Access::new("create", "batch", "jobs", Some(namespace))],
        Action::Scale { .. } => vec![Access::new("patch", "apps", "deployments", Some(namespace))],
        Action::AwaitJob { .. }
        | Action::WaitReady { .. }
        | Action::WaitDeployment { .. }
        | Action::None => Vec::new(),
    }
}

/// Every distinct permission the writes of this run need, from the state it starts from: the
/// plan carried out in simulation, as far as it can be planned now (a plan that stops on an
/// error, such as a missing CA password, yields the writes before it). Sorted, no duplicates.
pub fn needed(params: &MigrateParams, observed: &Observed) -> Vec<Access> {
    let mut state = observed.clone();
    let mut out = Vec::new();
    for _ in 0..crate::preview::MAX_STEPS {
        let Ok(current) = plan(params, &state) else {
            break;
        };
        let Some(step) = current.next_step().cloned() else {
            break;
        };
        out.extend(step_needs(&step, &state, &params.namespace));
        state = simulate(&state, &params.namespace, &step);
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
pub fn check(needed: &[Access], answers: &[(Access, bool)]) -> Result<(), crate::PlanError> {
    let missing = missing(needed, answers);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(crate::PlanError::AccessDenied { missing })
    }
}

/// The permissions as one input of the dry run's list.
pub fn input(
    needed: &[Access],
    answers: &[(Access, bool)],
    kubectl: &Kubectl,
) -> crate::phase::Input {
    use crate::phase::Need;
    let missing = missing(needed, answers);
    let need = if missing.is_empty() {
        Need::Allowed(format!(
            "{} permission(s) the writes need, checked with SelfSubjectAccessReviews",
            needed.len()
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
    crate::phase::Input {
        name: "Permissions",
        need,
        how: "them from a cluster administrator (a Role or ClusterRole bound to your user)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_denied_permissions_are_missing() {
        let jobs = Access::new("create", "batch", "jobs", Some("uyuni"));
        let secrets = Access::new("patch", "", "secrets", Some("uyuni"));
        let ns = Access::new("create", "", "namespaces", None);
        let answers = vec![(jobs.clone(), false), (secrets.clone(), true)];
        assert_eq!(
            missing(&[jobs.clone(), secrets, ns], &answers),
            vec![jobs.clone()]
        );
        let err = check(&[jobs], &answers).expect_err("refused");
        let k = Kubectl {
            kubeconfig: None,
            context: Some("prod".into()),
            migrate_flags: Vec::new(),
        };
        let text = err.render(&k);
        assert!(
            text.contains("create jobs.batch in namespace uyuni")
                && text.contains("`kubectl --context prod -n uyuni auth can-i create jobs.batch`")
                && text.contains("Nothing was written"),
            "{text}"
        );
    }

    #[test]
    fn cluster_scoped_checks_have_no_namespace() {
        let ns = Access::new("create", "", "namespaces", None);
        assert_eq!(
            ns.can_i(&Kubectl::BARE),
            "kubectl auth can-i create namespaces"
        );
    }
}
