//! One permission the migration needs, as a `SelfSubjectAccessReview` asks it. Which ones a plan
//! needs is worked out in [`crate::access`]; the type is down here because a refusal is a
//! [`crate::plan::PlanError`].

use serde::Serialize;

use crate::kubectl::Kubectl;

/// One permission: what a `SelfSubjectAccessReview` asks.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Access {
    pub verb: String,
    /// API group, `""` for the core group.
    pub group: String,
    /// The plural resource name (`jobs`).
    pub resource: String,
    /// `log` for `pods/log`; `None` for the resource itself.
    pub subresource: Option<String>,
    /// `None` for cluster-scoped resources.
    pub namespace: Option<String>,
}

impl Access {
    #[doc(hidden)]
    // pub for the unit tests in tests/unit/
    pub fn new(verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> Access {
        Access {
            verb: verb.to_owned(),
            group: group.to_owned(),
            resource: resource.to_owned(),
            subresource: None,
            namespace: namespace.map(str::to_owned),
        }
    }

    /// `get pods/log`: reading a container's log.
    pub(crate) fn pod_log(namespace: &str) -> Access {
        Access {
            subresource: Some("log".to_owned()),
            ..Access::new("get", "", "pods", Some(namespace))
        }
    }

    /// Whether an authorizer counts it as a write.
    pub fn is_write(&self) -> bool {
        !matches!(self.verb.as_str(), "get" | "list" | "watch")
    }

    /// `jobs.batch`, `secrets`: the resource as kubectl names it with its group.
    pub fn resource_name(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }

    /// "create jobs.batch in namespace uyuni", "get pods/log in namespace uyuni".
    pub fn describe(&self) -> String {
        let resource = match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource_name()),
            None => self.resource_name(),
        };
        match &self.namespace {
            Some(ns) => format!("{} {resource} in namespace {ns}", self.verb),
            None => format!("{} {resource} (cluster-wide)", self.verb),
        }
    }

    /// The `kubectl auth can-i` command that checks it, with the run's flags. A subresource
    /// goes in `--subresource`: `pods/log` would be read as the pod named `log`.
    pub fn can_i(&self, kubectl: &Kubectl) -> String {
        let sub = self
            .subresource
            .as_deref()
            .map(|s| format!(" --subresource={s}"))
            .unwrap_or_default();
        kubectl.cmd(
            self.namespace.as_deref(),
            &format!("auth can-i {} {}{sub}", self.verb, self.resource_name()),
        )
    }
}
