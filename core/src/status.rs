//! `kubectl uyuni status`: where the server stands, as one value computed from one snapshot and
//! the pods of its workloads. Pure: the caller observes ([`observation`]) and lists the pods;
//! this says what they mean. Whether it is healthy, and if not why, is decided here once, so
//! the human screen, `-o json|yaml` and `--exit-code` cannot disagree.
//!
//! Also the pure half of `kubectl uyuni logs`: which steps have Jobs, and which Job an attempt
//! number means.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use serde::Serialize;

use crate::catalogue::names;
use crate::labels;
use crate::object::{CustomKind, Kind, Object};
use crate::observed::{JobState, Observation, Observed, desired_replicas, job_state};
use crate::plan::phase::Phase;
use crate::verdict::{CRASH_LOOP, FATAL_WAITING_REASONS};

/// The Deployments the report shows, in its order: (Deployment, what `--component` calls it).
pub const WORKLOADS: [(&str, &str); 5] = [
    (names::SERVER_DEPLOYMENT, "server"),
    (names::DB_DEPLOYMENT, "db"),
    (names::HUB_DEPLOYMENT, "hub-xmlrpc"),
    (names::COCO_DEPLOYMENT, "coco"),
    (names::TFTP_DEPLOYMENT, "tftp"),
];

/// The Deployment of a `--component` name.
pub fn component_deployment(component: &str) -> Option<&'static str> {
    WORKLOADS
        .iter()
        .find(|(_, c)| *c == component)
        .map(|(d, _)| *d)
}

/// What `status` reads: the objects of the server's end state and of a migration or install
/// opening, without Secrets, ServiceAccounts and RBAC (a read-only user may not read Secrets,
/// and none of them says anything about health) and without the ingress controller's
/// HelmChartConfig (in `kube-system`, which a namespace's user may not read), every claim of
/// the volume catalogue, and every Job of ours.
pub fn observation(namespace: &str) -> Observation {
    let mut observation = crate::observed::every_object(namespace);
    observation.named.retain(|t| {
        !matches!(
            t.kind,
            Kind::Secret
                | Kind::ServiceAccount
                | Kind::Role
                | Kind::RoleBinding
                | Kind::Namespace
                | Kind::ConfigMap
                | Kind::Custom(CustomKind::HelmChartConfig | CustomKind::Middleware)
        )
    });
    // The record of the last upgrade.
    observation.named.push(crate::object::ObjectRef::new(
        Kind::ConfigMap,
        names::UPGRADE_CONFIG_MAP,
    ));
    observation
}

/// An observation of our Jobs only: what `logs` reads.
pub fn jobs_observation(namespace: &str) -> Observation {
    Observation {
        namespace: namespace.to_owned(),
        named: Vec::new(),
        job_selector: labels::MANAGED_SELECTOR.to_owned(),
        api_groups: Vec::new(),
        every: Vec::new(),
    }
}

/// The whole report. Field names are stable (see docs/output.md).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub api_version: &'static str,
    /// `Status`.
    pub kind: &'static str,
    pub namespace: String,
    /// Anything of ours is in the namespace (a Deployment, a claim, a Job…).
    pub installed: bool,
    pub healthy: bool,
    /// Why it is not healthy; empty when it is.
    pub problems: Vec<Problem>,
    /// The server, the database and each component whose Deployment exists, in that order.
    pub workloads: Vec<Workload>,
    pub claims: Vec<Claim>,
    pub certificates: Vec<Certificate>,
    pub access: Access,
    /// Where an unfinished migration stands; `None` when none is under way (none started, or
    /// the migrated server runs).
    pub migration: Option<Phase>,
    /// The steps of the newest run that created Jobs.
    pub last_operation: Option<Operation>,
    /// The last upgrade, as ConfigMap `uyuni-upgrade` records it; `None` when there was none.
    pub upgrade: Option<Upgrade>,
    /// The newest operation record (`operation`): the last run of a writing command, how it
    /// ended, and where it failed. `None` when there is none (or it could not be read).
    pub recorded: Option<Recorded>,
}

/// The newest operation record, in short.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    /// The record's ConfigMap.
    pub record: String,
    pub command: String,
    pub outcome: crate::operation::Outcome,
    pub started: String,
    pub ended: Option<String>,
    /// The step that failed, its exit reason, and the run's error.
    pub failed_step: Option<String>,
    pub exit_reason: Option<String>,
    pub error: Option<String>,
    /// The run's id (its Jobs' `kubectl-uyuni.io/run`).
    pub run: String,
    /// For a record not ended: whether its run still holds the namespace's Lease, that is
    /// still runs (`false`: it is gone, killed or cut off); `None` when not read.
    pub holds_lease: Option<bool>,
}

impl Recorded {
    pub fn of(stored: &crate::operation::Stored) -> Recorded {
        let op = &stored.operation;
        let failed = op.failed_step();
        Recorded {
            record: stored.name.clone(),
            command: op.command.clone(),
            outcome: op.outcome,
            started: op.started.clone(),
            ended: op.ended.clone(),
            failed_step: failed.map(|s| s.id.clone()),
            exit_reason: failed.and_then(|s| s.exit_reason.clone()),
            error: op.error.clone(),
            run: op.run.clone(),
            holds_lease: None,
        }
    }
}

/// The last upgrade: from which release to which, where it stands, and its way back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Upgrade {
    pub release_from: String,
    pub release_to: String,
    /// `complete` (every Deployment runs the images it went to), `unfinished`,
    /// `rolling-back` (a rollback began and has not ended), or `rolled-back`.
    pub state: &'static str,
    /// The copy of the database taken before it, if any.
    pub backup_claim: Option<String>,
    /// The database's volume before a PostgreSQL major upgrade, left as it was.
    pub previous_claim: Option<String>,
}

fn upgrade(observed: &Observed) -> Option<Upgrade> {
    let record = crate::plan::upgrade::UpgradeRecord::read(observed)?;
    let reached = record.reached(observed);
    Some(Upgrade {
        state: if !record.rolled_back.is_empty() {
            "rolled-back"
        } else if !record.rolling_back.is_empty() {
            // The rollback's first write marks the record; its last, `rolled-back`.
            "rolling-back"
        } else if reached {
            "complete"
        } else {
            "unfinished"
        },
        backup_claim: Some(record.backup_claim.clone()).filter(|c| !c.is_empty()),
        previous_claim: Some(record.db_claim_from.clone())
            .filter(|c| !c.is_empty() && *c != record.db_claim_to),
        release_from: record.release_from,
        release_to: record.release_to,
    })
}

/// Why the server is not healthy, one per object at fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Problem {
    pub reason: Reason,
    /// `Deployment uyuni`, `PersistentVolumeClaim var-pgsql18`, `Job uyuni-db-fixup-1`…
    pub object: String,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// Nothing of ours in the namespace.
    NotInstalled,
    /// The server's or the database's Deployment is missing while the rest is there.
    Missing,
    /// Scaled to 0 replicas.
    Stopped,
    /// Fewer replicas ready than asked for.
    NotReady,
    /// A container keeps exiting.
    CrashLooping,
    /// A container cannot start (image pull, missing Secret key…).
    CannotStart,
    /// A claim is not bound to a volume.
    ClaimNotBound,
    CertificateNotReady,
    /// The newest attempt of a step of the last operation failed.
    StepFailed,
    /// A migration was started and is not finished.
    MigrationUnfinished,
    /// An upgrade was started and its images are not all running.
    UpgradeUnfinished,
    /// A rollback of an upgrade was started and has not ended.
    RollbackUnfinished,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Workload {
    /// `server`, `db`, `hub-xmlrpc`, `coco`, `tftp`: the `--component` of `logs`.
    pub component: String,
    pub deployment: String,
    pub state: WorkloadState,
    pub desired_replicas: i32,
    pub ready_replicas: i32,
    pub image: Option<String>,
    /// The image's tag: the release it runs.
    pub release: Option<String>,
    /// Container restarts, summed over its pods.
    pub restarts: i32,
    pub pods: Vec<PodStatus>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadState {
    Ready,
    Stopped,
    /// Pods are starting (or some are not ready) without a reason that will not heal.
    NotReady,
    CrashLooping,
    CannotStart,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    pub name: String,
    pub phase: Option<String>,
    pub ready: bool,
    pub restarts: i32,
    /// Containers waiting, with the kubelet's reason.
    pub waiting: Vec<Waiting>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    pub container: String,
    pub reason: String,
    pub message: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Claim {
    pub name: String,
    pub bound: bool,
    /// `Bound`, `Pending`, `Lost`.
    pub phase: Option<String>,
    /// The volume's capacity once bound (`10Gi`), else what was requested.
    pub capacity: Option<String>,
    pub storage_class: Option<String>,
    /// `var-pgsql` kept as the backup of a PostgreSQL major upgrade (the database runs on
    /// the upgraded claim).
    pub upgrade_backup: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Certificate {
    pub name: String,
    pub ready: bool,
    /// RFC 3339, as cert-manager writes it.
    pub not_after: Option<String>,
    /// `Issuer uyuni-ca-issuer`.
    pub issuer: Option<String>,
    pub secret_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Access {
    /// Host names of the server's Ingresses.
    pub ingress_hosts: Vec<String>,
    /// Traefik routes of the non-HTTP ports.
    pub routes: Vec<Route>,
    pub tftp: Option<TftpAccess>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    pub name: String,
    /// `IngressRouteTCP` or `IngressRouteUDP`.
    pub kind: String,
    pub entry_points: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TftpAccess {
    /// The Service's type (`LoadBalancer`, `ClusterIP`…).
    pub service_type: Option<String>,
    /// The LoadBalancer's addresses (IPs or host names); empty while it has none.
    pub addresses: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    /// The run id of its Jobs (`kubectl-uyuni.io/run`), when they carry one.
    pub run: Option<String>,
    pub steps: Vec<StepStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepStatus {
    pub step: String,
    /// Its newest Job's description.
    pub description: Option<String>,
    /// Its Jobs in that operation, oldest first.
    pub jobs: Vec<JobStatus>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    pub name: String,
    /// Its place among every attempt of the step, from 1 (the `--attempt` of `logs`).
    pub attempt: usize,
    pub state: JobState,
    /// Its own `kubectl-uyuni.io/description` (a step's attempts may differ: a data sync's
    /// copy while the source serves, then its final copy).
    pub description: Option<String>,
    pub started: Option<String>,
    pub completed: Option<String>,
}

fn name_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn annotation(job: &Job, key: &str) -> Option<String> {
    job.metadata.annotations.as_ref()?.get(key).cloned()
}

/// Whether the pod belongs to the Deployment: selected by its selector, and not a step's Job
/// pod (those carry the step label).
fn selected(deployment: &Deployment, pod: &Pod) -> bool {
    let Some(wanted) = deployment
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.as_ref())
    else {
        return false;
    };
    let labels = pod.metadata.labels.as_ref();
    !wanted.is_empty()
        && labels.is_none_or(|l| !l.contains_key(labels::STEP_LABEL))
        && wanted
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// The pods of a Deployment among `pods`, newest first.
pub fn deployment_pods<'a>(deployment: &Deployment, pods: &'a [Pod]) -> Vec<&'a Pod> {
    let mut out: Vec<&Pod> = pods.iter().filter(|p| selected(deployment, p)).collect();
    out.sort_by(|a, b| {
        let key = |p: &Pod| {
            (
                p.metadata.creation_timestamp.as_ref().map(|t| t.0),
                p.metadata.name.clone(),
            )
        };
        key(b).cmp(&key(a))
    });
    out
}

fn pod_status(pod: &Pod) -> PodStatus {
    let status = pod.status.as_ref();
    let containers: Vec<_> = status
        .into_iter()
        .flat_map(|s| {
            s.init_container_statuses
                .iter()
                .flatten()
                .chain(s.container_statuses.iter().flatten())
        })
        .collect();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    PodStatus {
        name: name_of(&pod.metadata),
        phase: status.and_then(|s| s.phase.clone()),
        ready,
        restarts: containers.iter().map(|c| c.restart_count).sum(),
        waiting: containers
            .iter()
            .filter_map(|c| {
                let waiting = c.state.as_ref()?.waiting.as_ref()?;
                Some(Waiting {
                    container: c.name.clone(),
                    reason: waiting.reason.clone()?,
                    message: waiting.message.clone().filter(|m| !m.is_empty()),
                })
            })
            .collect(),
    }
}

fn workload(component: &str, deployment: &Deployment, pods: &[Pod]) -> Workload {
    let desired = desired_replicas(deployment);
    let ready = deployment
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    let image = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone());
    let pods: Vec<PodStatus> = deployment_pods(deployment, pods)
        .into_iter()
        .map(pod_status)
        .collect();
    let waiting = || pods.iter().flat_map(|p| p.waiting.iter());
    let state = if desired == 0 {
        WorkloadState::Stopped
    } else if waiting().any(|w| FATAL_WAITING_REASONS.contains(&w.reason.as_str())) {
        WorkloadState::CannotStart
    } else if waiting().any(|w| w.reason == CRASH_LOOP) {
        WorkloadState::CrashLooping
    } else if crate::observed::deployment_ready(deployment) {
        WorkloadState::Ready
    } else {
        WorkloadState::NotReady
    };
    Workload {
        component: component.to_owned(),
        deployment: name_of(&deployment.metadata),
        state,
        desired_replicas: desired,
        ready_replicas: ready,
        release: image.as_deref().and_then(crate::image::tag),
        image,
        restarts: pods.iter().map(|p| p.restarts).sum(),
        pods,
    }
}

fn workload_problem(w: &Workload) -> Option<Problem> {
    let object = format!("Deployment {}", w.deployment);
    let reasons = || {
        let mut seen: Vec<String> = Vec::new();
        for p in &w.pods {
            for wait in &p.waiting {
                let text = match &wait.message {
                    Some(m) => format!("{} in container {} ({m})", wait.reason, wait.container),
                    None => format!("{} in container {}", wait.reason, wait.container),
                };
                if !seen.contains(&text) {
                    seen.push(text);
                }
            }
        }
        seen.join("; ")
    };
    let (reason, message) = match w.state {
        WorkloadState::Ready => return None,
        // A component may be left at 0 on purpose; the server and the database may not.
        WorkloadState::Stopped if !matches!(w.component.as_str(), "server" | "db") => {
            return None;
        }
        WorkloadState::Stopped => (
            Reason::Stopped,
            "scaled to 0 replicas: the server does not serve".to_owned(),
        ),
        WorkloadState::NotReady => (
            Reason::NotReady,
            format!(
                "{} of {} replica(s) ready",
                w.ready_replicas, w.desired_replicas
            ),
        ),
        WorkloadState::CrashLooping => (Reason::CrashLooping, reasons()),
        WorkloadState::CannotStart => (Reason::CannotStart, reasons()),
    };
    Some(Problem {
        reason,
        object,
        message,
    })
}

/// The claim the database runs on, from Deployment `db`'s volumes.
fn database_claim(observed: &Observed) -> Option<String> {
    let db = observed.deployment(names::DB_DEPLOYMENT)?;
    db.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .volumes
        .as_ref()?
        .iter()
        .filter_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
        .find(|c| c.starts_with(crate::volumes::DATABASE_VOLUME))
}

fn claim(pvc: &PersistentVolumeClaim, database: Option<&str>) -> Claim {
    let name = name_of(&pvc.metadata);
    let status = pvc.status.as_ref();
    let phase = status.and_then(|s| s.phase.clone());
    let capacity = status
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .or_else(|| {
            pvc.spec
                .as_ref()?
                .resources
                .as_ref()?
                .requests
                .as_ref()?
                .get("storage")
        })
        .map(|q| q.0.clone());
    Claim {
        upgrade_backup: name == crate::volumes::DATABASE_VOLUME
            && database.is_some_and(|d| d != name),
        bound: phase.as_deref() == Some("Bound"),
        phase,
        capacity,
        storage_class: pvc.spec.as_ref().and_then(|s| s.storage_class_name.clone()),
        name,
    }
}

fn certificate(object: &crate::object::CustomObject) -> Certificate {
    let issuer = &object.spec["issuerRef"];
    Certificate {
        name: name_of(&object.metadata),
        ready: crate::observed::custom_ready(object),
        not_after: object
            .status
            .as_ref()
            .and_then(|s| s["notAfter"].as_str())
            .map(str::to_owned),
        issuer: issuer["name"]
            .as_str()
            .map(|name| format!("{} {name}", issuer["kind"].as_str().unwrap_or("Issuer"))),
        secret_name: object.spec["secretName"].as_str().map(str::to_owned),
    }
}

fn tftp(service: &Service) -> TftpAccess {
    let addresses = service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone().or_else(|| i.hostname.clone()))
        .collect();
    TftpAccess {
        service_type: service.spec.as_ref().and_then(|s| s.type_.clone()),
        addresses,
    }
}

fn access(observed: &Observed) -> Access {
    let mut out = Access::default();
    for object in observed.objects.values() {
        match object {
            Object::Ingress(ingress) => {
                let spec = ingress.spec.as_ref();
                let hosts = spec
                    .and_then(|s| s.rules.as_ref())
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r.host.clone());
                for host in hosts {
                    if !out.ingress_hosts.contains(&host) {
                        out.ingress_hosts.push(host);
                    }
                }
            }
            Object::Custom(custom)
                if matches!(
                    custom.kind,
                    CustomKind::IngressRouteTcp | CustomKind::IngressRouteUdp
                ) =>
            {
                out.routes.push(Route {
                    name: name_of(&custom.metadata),
                    kind: custom.kind.kind().to_owned(),
                    entry_points: custom.spec["entryPoints"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|e| e.as_str().map(str::to_owned))
                        .collect(),
                });
            }
            _ => {}
        }
    }
    if let Some(Object::Service(service)) = observed.get(Kind::Service, names::TFTP_SERVICE) {
        out.tftp = Some(tftp(service));
    }
    out
}

/// Every Job of ours, oldest first (by creation time, then name).
fn jobs(observed: &Observed) -> Vec<&Job> {
    let mut jobs: Vec<&Job> = observed
        .objects
        .values()
        .filter_map(|o| match o {
            Object::Job(job) => Some(job),
            _ => None,
        })
        .filter(|j| annotation(j, labels::STEP_ANNOTATION).is_some())
        .collect();
    jobs.sort_by(|a, b| {
        let key = |j: &Job| {
            (
                j.metadata.creation_timestamp.as_ref().map(|t| t.0),
                j.metadata.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    jobs
}

fn job_status(observed: &Observed, job: &Job) -> JobStatus {
    let name = name_of(&job.metadata);
    let step = annotation(job, labels::STEP_ANNOTATION).unwrap_or_default();
    let attempt = observed
        .attempts(&step)
        .all()
        .iter()
        .position(|j| j.metadata.name.as_deref() == Some(name.as_str()))
        .map_or(1, |i| i + 1);
    let status = job.status.as_ref();
    let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map(|t| t.0.to_string())
    };
    JobStatus {
        description: annotation(job, labels::DESCRIPTION_ANNOTATION),
        attempt,
        state: job_state(job),
        started: time(status.and_then(|s| s.start_time.as_ref())),
        completed: time(status.and_then(|s| s.completion_time.as_ref())),
        name,
    }
}

/// The steps of the newest run that created Jobs (every Job when they carry no run id).
fn last_operation(observed: &Observed) -> Option<Operation> {
    let jobs = jobs(observed);
    let newest = jobs.last()?;
    let run = annotation(newest, labels::RUN_ANNOTATION);
    let mut steps: Vec<StepStatus> = Vec::new();
    for job in jobs
        .iter()
        .filter(|j| annotation(j, labels::RUN_ANNOTATION) == run)
    {
        let step = annotation(job, labels::STEP_ANNOTATION).unwrap_or_default();
        let status = job_status(observed, job);
        match steps.iter_mut().find(|s| s.step == step) {
            Some(s) => {
                s.description.clone_from(&status.description);
                s.jobs.push(status);
            }
            None => steps.push(StepStatus {
                description: annotation(job, labels::DESCRIPTION_ANNOTATION),
                step,
                jobs: vec![status],
            }),
        }
    }
    Some(Operation { run, steps })
}

/// Whether anything of ours is in the snapshot: an object carrying our labels, or a Job.
fn installed(observed: &Observed) -> bool {
    observed.objects.iter().any(|(key, object)| {
        let ours = labels::selects(labels::MANAGED_SELECTOR, object.metadata().labels.as_ref());
        let in_namespace = match key.kind {
            Kind::Namespace => false,
            Kind::Custom(kind) => kind.fixed_namespace().is_none(),
            _ => true,
        };
        in_namespace && ours
    })
}

/// The report of the snapshot and the pods of the namespace (those of our Deployments are
/// picked by their selectors; the others are ignored).
/// `kubectl`: the run's connection flags, which the commands in the problems carry.
pub fn report(
    namespace: &str,
    observed: &Observed,
    pods: &[Pod],
    kubectl: &crate::kubectl::Kubectl,
) -> Status {
    let workloads: Vec<Workload> = WORKLOADS
        .iter()
        .filter_map(|(name, component)| {
            observed
                .deployment(name)
                .map(|d| workload(component, d, pods))
        })
        .collect();
    let database = database_claim(observed);
    let claims: Vec<Claim> = observed
        .objects
        .values()
        .filter_map(|o| match o {
            Object::PersistentVolumeClaim(pvc) => Some(claim(pvc, database.as_deref())),
            _ => None,
        })
        .collect();
    let certificates: Vec<Certificate> = observed
        .objects
        .values()
        .filter_map(|o| match o {
            Object::Custom(c) if c.kind == CustomKind::Certificate => Some(certificate(c)),
            _ => None,
        })
        .collect();
    // Once Deployment `uyuni` exists the migration wrote its last object: a server stopped
    // since (its phase falls back to the final sync's) is a stopped server, not a migration
    // under way.
    let migration = match crate::plan::phase::phase(observed) {
        Phase::NotStarted | Phase::ServerRunning { .. } => None,
        _ if observed.deployment(names::SERVER_DEPLOYMENT).is_some() => None,
        unfinished => Some(unfinished),
    };
    let last_operation = last_operation(observed);
    let installed = installed(observed);

    let mut problems = Vec::new();
    if !installed {
        problems.push(Problem {
            reason: Reason::NotInstalled,
            object: format!("Namespace {namespace}"),
            message: "nothing of kubectl-uyuni's is in the namespace".to_owned(),
        });
    }
    if let Some(phase) = &migration {
        let (object, message) = match phase {
            Phase::Prepared { job } => (
                format!("Job {job}"),
                "a copy was prepared; the final migration has not run".to_owned(),
            ),
            Phase::FinalSyncRunning { job } => (
                format!("Job {job}"),
                "the final data sync is running".to_owned(),
            ),
            Phase::FinalSyncDone { job } => (
                format!("Job {job}"),
                "the final data sync succeeded; the server has not started yet".to_owned(),
            ),
            Phase::NotStarted | Phase::ServerRunning { .. } => (String::new(), String::new()),
        };
        problems.push(Problem {
            reason: Reason::MigrationUnfinished,
            object,
            message,
        });
    } else if installed {
        for name in [names::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT] {
            if observed.deployment(name).is_none() {
                problems.push(Problem {
                    reason: Reason::Missing,
                    object: format!("Deployment {name}"),
                    message: "it does not exist".to_owned(),
                });
            }
        }
    }
    problems.extend(workloads.iter().filter_map(workload_problem));
    for c in claims.iter().filter(|c| !c.bound) {
        problems.push(Problem {
            reason: Reason::ClaimNotBound,
            object: format!("PersistentVolumeClaim {}", c.name),
            message: format!(
                "{}: not bound to a volume",
                c.phase.as_deref().unwrap_or("no phase yet")
            ),
        });
    }
    for c in certificates.iter().filter(|c| !c.ready) {
        problems.push(Problem {
            reason: Reason::CertificateNotReady,
            object: format!("Certificate {}", c.name),
            message: "cert-manager has not issued it (or it expired)".to_owned(),
        });
    }
    let upgrade = upgrade(observed);
    if let Some(u) = upgrade.as_ref().filter(|u| u.state == "unfinished") {
        problems.push(Problem {
            reason: Reason::UpgradeUnfinished,
            object: format!("ConfigMap {}", names::UPGRADE_CONFIG_MAP),
            message: format!(
                "the upgrade from {} to {} has not finished: run `{}` with the same image flags to go on, or `{}`",
                u.release_from,
                u.release_to,
                kubectl.uyuni(Some(namespace), "upgrade"),
                kubectl.uyuni(Some(namespace), "upgrade --rollback")
            ),
        });
    }
    if let Some(u) = upgrade.as_ref().filter(|u| u.state == "rolling-back") {
        problems.push(Problem {
            reason: Reason::RollbackUnfinished,
            object: format!("ConfigMap {}", names::UPGRADE_CONFIG_MAP),
            message: format!(
                "the rollback of the upgrade from {} to {} has not finished: run `{}` again to go on",
                u.release_from,
                u.release_to,
                kubectl.uyuni(Some(namespace), "upgrade --rollback")
            ),
        });
    }
    if let Some(op) = &last_operation {
        for step in &op.steps {
            if let Some(last) = observed.attempts(&step.step).all().last()
                && job_state(last) == JobState::Failed
            {
                problems.push(Problem {
                    reason: Reason::StepFailed,
                    object: format!("Job {}", name_of(&last.metadata)),
                    message: format!(
                        "step {} failed: `{}` shows its log",
                        step.step,
                        kubectl.uyuni(Some(namespace), &format!("logs {}", step.step))
                    ),
                });
            }
        }
    }
    Status {
        api_version: crate::render::API_VERSION,
        kind: "Status",
        namespace: namespace.to_owned(),
        installed,
        healthy: problems.is_empty(),
        problems,
        workloads,
        claims,
        certificates,
        access: access(observed),
        migration,
        last_operation,
        upgrade,
        recorded: None,
    }
}

/// A step that has Jobs, for `logs` without an argument.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepLogs {
    pub step: String,
    pub description: Option<String>,
    /// Every attempt, oldest first.
    pub jobs: Vec<JobStatus>,
}

/// Every step that has Jobs, in the order of their first Job.
pub fn steps(observed: &Observed) -> Vec<StepLogs> {
    let mut out: Vec<StepLogs> = Vec::new();
    for job in jobs(observed) {
        let step = annotation(job, labels::STEP_ANNOTATION).unwrap_or_default();
        let status = job_status(observed, job);
        match out.iter_mut().find(|s| s.step == step) {
            Some(s) => {
                s.description = annotation(job, labels::DESCRIPTION_ANNOTATION);
                s.jobs.push(status);
            }
            None => out.push(StepLogs {
                description: annotation(job, labels::DESCRIPTION_ANNOTATION),
                step,
                jobs: vec![status],
            }),
        }
    }
    out
}

/// Which attempts of a step `logs` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempts {
    Latest,
    /// From 1, oldest first.
    Number(usize),
    All,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogsError {
    #[error("no step {step:?} has Jobs in namespace {namespace}; {known}")]
    UnknownStep {
        step: String,
        namespace: String,
        known: String,
    },
    #[error(
        "step {step} has {count} attempt(s); --attempt {asked} does not exist (attempts count from 1, oldest first)"
    )]
    NoAttempt {
        step: String,
        count: usize,
        asked: usize,
    },
}

/// The Jobs whose logs `logs STEP` shows, oldest first.
pub fn step_jobs(
    namespace: &str,
    observed: &Observed,
    step: &str,
    attempts: Attempts,
) -> Result<Vec<JobStatus>, LogsError> {
    let all = steps(observed);
    let Some(found) = all.iter().find(|s| s.step == step) else {
        let known = if all.is_empty() {
            "no step has run here yet".to_owned()
        } else {
            format!(
                "the steps with logs are: {}",
                all.iter()
                    .map(|s| s.step.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return Err(LogsError::UnknownStep {
            step: step.to_owned(),
            namespace: namespace.to_owned(),
            known,
        });
    };
    let mut jobs = found.jobs.clone();
    jobs.sort_by_key(|j| j.attempt);
    match attempts {
        Attempts::All => Ok(jobs),
        Attempts::Latest => Ok(jobs.pop().into_iter().collect()),
        Attempts::Number(n) => match jobs.into_iter().find(|j| j.attempt == n) {
            Some(job) => Ok(vec![job]),
            None => Err(LogsError::NoAttempt {
                step: step.to_owned(),
                count: found.jobs.len(),
                asked: n,
            }),
        },
    }
}
