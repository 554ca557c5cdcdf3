//! `stop` and `start`: the server and its components scaled to 0 and back to the replica
//! counts they had. `stop` records each Deployment's count in ConfigMap `uyuni-replicas`
//! before it scales anything, stops the database's consumers first and `db` last; `start`
//! scales `db` first, waits until it accepts connections, then the others to their recorded
//! counts, and waits for the server. Either resumes where an interrupted run stopped: a
//! Deployment at its target count is left as it is, and a count recorded before is never
//! replaced by the 0 of a Deployment that this stop scaled down already.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::{Action, Plan, PlanError, Step, apply_step, keep_step};
use crate::builders::meta;
use crate::catalogue::{components, names};
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::{Observed, deployment_ready, deployment_stopped, desired_replicas};
use crate::params::ServerParams;
use crate::plan::database::DB_READY_WAIT;
use crate::plan::{DeploymentWait, Op, UNSCHEDULABLE_GRACE_SECONDS};

/// The Deployments of a server in the order `stop` scales them: the database's consumers
/// first, `db` last (images-today §D.3's order); `start` goes the other way.
pub const ORDER: [&str; 5] = [
    names::SERVER_DEPLOYMENT,
    names::HUB_DEPLOYMENT,
    names::COCO_DEPLOYMENT,
    names::TFTP_DEPLOYMENT,
    names::DB_DEPLOYMENT,
];

/// Stopping waits for pods to go: their grace periods (the server's is 300 s).
pub(super) const STOP_WAIT: DeploymentWait = DeploymentWait {
    timeout_seconds: Some(900),
    unschedulable_grace_seconds: UNSCHEDULABLE_GRACE_SECONDS,
    log_tail_lines: 0,
};
/// Starting the server runs its start scripts (schema checks among them).
const START_WAIT: DeploymentWait = DeploymentWait {
    timeout_seconds: None,
    unschedulable_grace_seconds: UNSCHEDULABLE_GRACE_SECONDS,
    log_tail_lines: 20,
};

/// What the run does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lifecycle {
    Stop,
    Start,
    /// Every pod of the server and its components replaced, as `kubectl rollout restart`;
    /// the database keeps running.
    Restart,
}

/// Validated parameters of `stop` and `start`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LifecycleParams {
    #[serde(flatten)]
    pub server: ServerParams,
    pub action: Lifecycle,
}

impl std::ops::Deref for LifecycleParams {
    type Target = ServerParams;
    fn deref(&self) -> &ServerParams {
        &self.server
    }
}

/// The counts `stop` recorded, by Deployment.
pub fn recorded(observed: &Observed) -> BTreeMap<String, i32> {
    let Some(Object::ConfigMap(cm)) = observed.get(Kind::ConfigMap, names::REPLICAS_CONFIG_MAP)
    else {
        return BTreeMap::new();
    };
    cm.data
        .iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.parse().ok()?)))
        .collect()
}

/// ConfigMap `uyuni-replicas`: each Deployment's replicas before a stop.
pub fn replicas_config_map(namespace: &str, counts: &BTreeMap<String, i32>) -> ConfigMap {
    ConfigMap {
        metadata: meta(names::REPLICAS_CONFIG_MAP, namespace, components::SERVER),
        data: Some(
            counts
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
        ),
        ..ConfigMap::default()
    }
}

pub(super) fn scale_step(
    name: &str,
    replicas: i32,
    wait: DeploymentWait,
    observed: &Observed,
) -> Step {
    let target = ObjectRef::new(Kind::Deployment, name);
    let description = if replicas == 0 {
        format!("stop Deployment {name}")
    } else {
        format!("start Deployment {name} with {replicas} replica(s)")
    };
    let Some(live) = observed.deployment(name) else {
        return keep_step(
            &format!("scale-{name}"),
            description,
            target,
            "absent".into(),
        );
    };
    let at_target = if replicas == 0 {
        deployment_stopped(live)
    } else {
        desired_replicas(live) == replicas && deployment_ready(live)
    };
    if at_target {
        return keep_step(
            &format!("scale-{name}"),
            description,
            target,
            format!("{replicas} replica(s) already"),
        );
    }
    Step {
        id: format!("scale-{name}"),
        description,
        op: Op::Scale,
        reason: format!("{} replica(s) now", desired_replicas(live)),
        action: Action::Scale {
            name: name.to_owned(),
            replicas,
            wait,
            restarted_at: None,
            hardened: None,
        },
        target,
    }
}

/// What a restart of `live` writes besides its mark: its pod template with the pod security
/// settings (`builders::hardening`), and their skip annotations, when it lacks them. This is
/// the rollout rule of `plan::steps::deployment_step` applied to a restart: a running
/// Deployment is not restarted for the hardening alone, but a restart replaces every pod
/// anyway, so it carries the hardening at no extra outage. The template is the live one, so a
/// restart changes nothing else; `None`: nothing to add.
pub fn hardened(
    live: &k8s_openapi::api::apps::v1::Deployment,
) -> Option<k8s_openapi::api::apps::v1::Deployment> {
    let mut base = live.clone();
    base.status = None;
    let want = crate::builders::hardening::deployment(base);
    let template =
        |d: &k8s_openapi::api::apps::v1::Deployment| d.spec.as_ref().map(|s| s.template.clone());
    if template(&want) == template(live) {
        return None;
    }
    let skips: BTreeMap<String, String> = want
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| k.starts_with(crate::builders::hardening::SKIP_ANNOTATION_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(k8s_openapi::api::apps::v1::Deployment {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            annotations: (!skips.is_empty()).then_some(skips),
            ..Default::default()
        },
        spec: Some(k8s_openapi::api::apps::v1::DeploymentSpec {
            template: template(&want)?,
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// A rollout of Deployment `name` marked with `at` (the run's id): done once its pod template
/// carries the mark and every replica is ready on it.
fn restart_step(name: &str, at: &str, observed: &Observed) -> Option<Step> {
    let live = observed.deployment(name)?;
    let target = ObjectRef::new(Kind::Deployment, name);
    let id = format!("restart-{name}");
    let description = format!("restart Deployment {name} (every pod replaced)");
    let replicas = desired_replicas(live);
    if replicas == 0 {
        return Some(keep_step(
            &id,
            description,
            target,
            "stopped; `start` starts it".into(),
        ));
    }
    let marked = live
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(crate::labels::RESTARTED_AT_ANNOTATION))
        .is_some_and(|v| v == at);
    if marked && deployment_ready(live) {
        return Some(keep_step(&id, description, target, "restarted".into()));
    }
    let hardening = hardened(live);
    Some(Step {
        id,
        description,
        op: Op::Restart,
        reason: match &hardening {
            Some(_) => {
                format!("{replicas} replica(s) running; the new pods get the pod security settings")
            }
            None => format!("{replicas} replica(s) running"),
        },
        action: Action::Scale {
            name: name.to_owned(),
            replicas,
            wait: START_WAIT,
            restarted_at: Some(at.to_owned()),
            hardened: hardening.map(Box::new),
        },
        target,
    })
}

/// Plans `stop`, `start` or `restart` from what was observed.
pub fn plan(params: &LifecycleParams, observed: &Observed) -> Result<Plan, PlanError> {
    let ns = &params.namespace;
    let present: Vec<&str> = ORDER
        .into_iter()
        .filter(|name| observed.deployment(name).is_some())
        .collect();
    if !present.contains(&names::SERVER_DEPLOYMENT) && !present.contains(&names::DB_DEPLOYMENT) {
        return Err(PlanError::NoServer {
            namespace: ns.clone(),
        });
    }
    let before = recorded(observed);
    let mut steps = Vec::new();
    match params.action {
        Lifecycle::Stop => {
            // A Deployment running now gives its count; one at 0 keeps what an earlier stop
            // recorded (this stop, interrupted, may have scaled it down).
            let mut counts = before.clone();
            for name in &present {
                let Some(live) = observed.deployment(name) else {
                    continue;
                };
                let now = desired_replicas(live);
                if now > 0 {
                    counts.insert((*name).to_owned(), now);
                } else {
                    counts.entry((*name).to_owned()).or_insert(0);
                }
            }
            steps.push(apply_step(
                "replicas",
                format!(
                    "ConfigMap {}: the replica counts to start again with",
                    names::REPLICAS_CONFIG_MAP
                ),
                Object::ConfigMap(replicas_config_map(ns, &counts)),
                observed,
            ));
            for name in &present {
                steps.push(scale_step(name, 0, STOP_WAIT, observed));
            }
        }
        Lifecycle::Restart => {
            // A restart replaces running pods; on a server `stop` stopped there are none, and
            // starting it is `start`'s (which brings back the recorded counts, `db` first).
            if let Some(stopped) = [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT]
                .into_iter()
                .find(|n| {
                    observed
                        .deployment(n)
                        .is_some_and(|d| desired_replicas(d) == 0)
                })
            {
                return Err(PlanError::RestartStopped {
                    namespace: ns.clone(),
                    deployment: stopped.to_owned(),
                    start: params.kubectl.uyuni(Some(ns), "start"),
                });
            }
            steps.extend(
                ORDER
                    .into_iter()
                    .filter(|n| *n != names::DB_DEPLOYMENT)
                    .filter_map(|n| restart_step(n, &params.run_id, observed)),
            );
        }
        Lifecycle::Start => {
            let count = |name: &str| {
                before.get(name).copied().unwrap_or_else(|| {
                    // Not stopped by this tool: its count now, or one.
                    observed
                        .deployment(name)
                        .map(desired_replicas)
                        .filter(|n| *n > 0)
                        .unwrap_or(1)
                })
            };
            for name in present.iter().rev() {
                let wait = if *name == names::DB_DEPLOYMENT {
                    DB_READY_WAIT
                } else {
                    START_WAIT
                };
                steps.push(scale_step(name, count(name), wait, observed));
            }
        }
    }
    Ok(Plan {
        namespace: ns.clone(),
        steps,
    })
}

/// What `stop` and `start` read of the cluster: the server's Deployments, the recorded counts,
/// the namespace.
pub fn observation(params: &LifecycleParams) -> crate::observed::Observation {
    let mut named = vec![
        ObjectRef::new(Kind::Namespace, params.namespace.clone()),
        ObjectRef::new(Kind::ConfigMap, names::REPLICAS_CONFIG_MAP),
    ];
    named.extend(ORDER.iter().map(|n| ObjectRef::new(Kind::Deployment, *n)));
    crate::observed::Observation {
        namespace: params.namespace.clone(),
        named,
        job_selector: crate::labels::MANAGED_SELECTOR.to_owned(),
        api_groups: Vec::new(),
        every: Vec::new(),
    }
}

impl super::Planner for LifecycleParams {
    fn server(&self) -> &ServerParams {
        &self.server
    }
    fn observation(&self) -> crate::observed::Observation {
        observation(self)
    }
    fn plan(&self, observed: &Observed) -> Result<Plan, PlanError> {
        plan(self, observed)
    }
    fn with_stand_in(&self, _error: &PlanError) -> Option<Self> {
        None
    }
}

/// Whether the server serves now: Deployment `uyuni` has a ready replica.
pub fn serving(observed: &Observed) -> bool {
    observed
        .deployment(names::SERVER_DEPLOYMENT)
        .and_then(|d| d.status.as_ref())
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
        > 0
}
