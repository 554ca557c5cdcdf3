//! What the simulated cluster does on its own: how Jobs and Deployments turn out, how long
//! things take, and which faults the API server injects.
//!
//! # Scenario file format
//!
//! `uyuni-sim serve --scenario FILE` reads a [`Scenario`] as JSON or YAML (by content: a file
//! starting with `{` is JSON). All fields are optional and camelCase; durations are milliseconds.
//!
//! ```yaml
//! jobs:                        # keyed by the Job annotation kubectl-uyuni.io/step
//!   data-sync:
//!     outcome: succeed         # succeed | fail | stuck
//!     durationMs: 3000         # from the pod running to the pod terminating
//!     exitCode: 1              # for fail (default 1)
//!     waitingReason: ImagePullBackOff   # for stuck (or CreateContainerConfigError, …)
//!     waitingMessage: "Back-off pulling image"
//!     log:                     # container log, spread evenly over durationMs; a line
//!                              # "[ANNOTATION=VALUE] text" only for Jobs so annotated;
//!       - "Synchronizing /var/lib/pgsql/data ..."   # $JOB_NAME is replaced by the Job's name
//!     logBytes: 0              # a generated log of this many bytes first (uyuni-sim only)
//!     sideEffects:
//!       - patchSecret:         # merge patch by field manager uyuni-job
//!           name: uyuni-migration-data
//!           stringData: {job: $JOB_NAME, timezone: Europe/Berlin}
//!           atMs: 1500         # optional: when (after the pod runs); default just before the end
//!           createIfMissing: false   # default false: a missing Secret fails the Job, as
//!                                    # `kubectl patch` in the real script would
//!     terminationMessage: "release=$IMAGE_TAG"   # on success; $IMAGE, $IMAGE_TAG replaced (node agent)
//!     laterAttempts: []        # scripts for the 2nd, 3rd… Job of the same step (the last repeats)
//! deployments:                 # keyed by Deployment name
//!   uyuni:
//!     outcome: ready           # ready | stuck
//!     readyAfterMs: 500
//!     waitingReason: CrashLoopBackOff
//! timing:
//!   podCreateMs: 20            # Job/Deployment → Pod exists (Pending)
//!   podStartMs: 30             # Pending → Running
//!   defaultJobMs: 100          # run time of Jobs without a scenario entry
//!   deploymentReadyMs: 100
//!   pvcBindMs: 20
//!   certificateReadyMs: 30
//!   issuerReadyMs: 20
//!   namespaceDeleteMs: 50      # a deleted namespace stays Terminating this long
//! namespaces:                  # what the pods of a namespace play instead (jobs, deployments,
//!   uyuni-failing:             # timing), so that tests sharing one cluster differ
//!     jobs: {db-fixup: {outcome: fail}}
//! faults:                      # see Faults
//!   seed: 42
//!   errors: [{verb: get, resource: jobs, rate: 0.5, status: 503}]
//!   drops: [{verb: patch, rate: 0.2}]
//!   latencyMs: 10
//!   watchCloseAfterEvents: 3
//!   watchCloseAfterMs: 500
//!   failOnce: [{verb: patch, resource: secrets, name: uyuni-migration-data, status: 500}]
//!   includeVersion: false
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The whole scenario. See the module documentation for the file format.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Scenario {
    /// Job behaviour keyed by the Job's `kubectl-uyuni.io/step` annotation.
    pub jobs: BTreeMap<String, JobScript>,
    /// Deployment behaviour keyed by Deployment name.
    pub deployments: BTreeMap<String, DeploymentScript>,
    pub timing: Timing,
    pub faults: Faults,
    /// The scenario of the pods in a namespace, by namespace: its jobs, deployments and timing
    /// replace these (its faults and namespaces are not read). Lets the tests that share one
    /// cluster play different scenarios, each in a namespace of its own.
    pub namespaces: BTreeMap<String, Scenario>,
}

impl Scenario {
    /// Parses a scenario from JSON or YAML text.
    pub fn parse(text: &str) -> Result<Scenario, String> {
        if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| format!("invalid scenario JSON: {e}"))
        } else {
            serde_saphyr::from_str(text).map_err(|e| format!("invalid scenario YAML: {e}"))
        }
    }

    /// What the pods of `namespace` play: its entry in `namespaces`, else this scenario.
    pub fn in_namespace(&self, namespace: &str) -> &Scenario {
        self.namespaces.get(namespace).unwrap_or(self)
    }

    /// Edits what the Job of `step` writes into Secrets (`PatchSecret` side effects: for the
    /// data sync, the data it extracted from the source); nothing when the scenario has no such
    /// step. For scenarios that differ from another in a few of those values.
    pub fn edit_job_data(
        &mut self,
        step: &str,
        mut edit: impl FnMut(&mut BTreeMap<String, String>),
    ) {
        if let Some(job) = self.jobs.get_mut(step) {
            for effect in &mut job.side_effects {
                let SideEffect::PatchSecret(patch) = effect;
                edit(&mut patch.string_data);
            }
        }
    }

    /// The script for the `attempt`-th (0-based) Job of a step, if the scenario has the step.
    pub fn job_script(&self, step: &str, attempt: usize) -> Option<&JobScript> {
        let script = self.jobs.get(step)?;
        if attempt == 0 || script.later_attempts.is_empty() {
            return Some(script);
        }
        let i = (attempt - 1).min(script.later_attempts.len() - 1);
        script.later_attempts.get(i)
    }
}

/// Delays of the simulated controllers, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Timing {
    pub pod_create_ms: u64,
    pub pod_start_ms: u64,
    pub default_job_ms: u64,
    pub deployment_ready_ms: u64,
    pub pvc_bind_ms: u64,
    pub certificate_ready_ms: u64,
    pub issuer_ready_ms: u64,
    /// A deleted namespace stays Terminating this long before it and its contents go. A
    /// second, as a real cluster takes at least: `kubectl delete -f` deletes a namespace and
    /// then the objects in it, which must still be there under load.
    pub namespace_delete_ms: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            pod_create_ms: 10,
            pod_start_ms: 10,
            default_job_ms: 20,
            deployment_ready_ms: 30,
            pvc_bind_ms: 20,
            certificate_ready_ms: 30,
            issuer_ready_ms: 20,
            namespace_delete_ms: 1000,
        }
    }
}

/// How a Job ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum JobOutcome {
    #[default]
    Succeed,
    /// The pod's container exits with `exit_code`; the Job fails with BackoffLimitExceeded
    /// (the simulation runs one pod per Job, as with `backoffLimit: 0`).
    Fail,
    /// The pod stays Pending with `waiting_reason`; the Job stays active forever.
    Stuck,
}

/// The behaviour of Jobs of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct JobScript {
    pub outcome: JobOutcome,
    /// Time from the pod running to its container terminating.
    pub duration_ms: u64,
    pub exit_code: i32,
    pub waiting_reason: String,
    pub waiting_message: Option<String>,
    /// Container log lines, written evenly over `duration_ms`. `$JOB_NAME` is substituted.
    pub log: Vec<String>,
    /// A generated log of about this many bytes (numbered lines of 100 bytes) before `log`'s
    /// lines, made as fast as a reader takes it and never stored: the container goes on only
    /// once a reader has read all of it, like a process writing to a pipe. For measuring a
    /// log follower's memory on a huge log; `uyuni-sim` only (the node agent ignores it).
    pub log_bytes: u64,
    pub side_effects: Vec<SideEffect>,
    /// The container's termination message when it succeeds (what a script writes to
    /// `/dev/termination-log`): `$IMAGE` is replaced by the container's image, `$IMAGE_TAG` by
    /// its tag (`latest` without one), `$IMAGE_RELEASE` by the release its release file names
    /// ([`image_release`]).
    pub termination_message: Option<String>,
    /// Scripts for the second, third… Job created for the same step; the last one repeats.
    pub later_attempts: Vec<JobScript>,
}

impl Default for JobScript {
    fn default() -> Self {
        JobScript {
            outcome: JobOutcome::Succeed,
            duration_ms: 100,
            exit_code: 1,
            waiting_reason: "ImagePullBackOff".to_string(),
            waiting_message: None,
            log: Vec::new(),
            log_bytes: 0,
            side_effects: Vec::new(),
            termination_message: None,
            later_attempts: Vec::new(),
        }
    }
}

impl JobScript {
    /// The script as the Job with these annotations plays it: a log line that starts with
    /// `[KEY=VALUE] ` is kept, without that prefix, only when the Job's annotation KEY is VALUE
    /// (the data sync's `kubectl-uyuni.io/sync-mode`: a prepare copy stops nothing).
    pub fn for_job(mut self, annotations: &BTreeMap<String, String>) -> JobScript {
        self.log = self
            .log
            .into_iter()
            .filter_map(|line| {
                let Some(rest) = line.strip_prefix('[') else {
                    return Some(line);
                };
                let Some((condition, text)) = rest.split_once("] ") else {
                    return Some(line);
                };
                let Some((key, value)) = condition.split_once('=') else {
                    return Some(line);
                };
                (annotations.get(key).map(String::as_str) == Some(value)).then(|| text.to_owned())
            })
            .collect();
        self
    }
}

/// The tag of an image reference: what follows the last `:` after the last `/`; `latest`
/// without one (a digest reference has none either).
/// The release the simulated `latest` images are: the newest the scenarios and tests use.
pub const LATEST_RELEASE: &str = "2026.04";

/// The release an image's release file names, as an inspection reads it: its tag when the tag
/// is a release, [`LATEST_RELEASE`] for `latest`. The real server image's `/etc/uyuni-release`
/// is written when its package is built, "Uyuni release " and the package's
/// `web.version.uyuni` (uyuni-project/uyuni `web/spacewalk-web.spec`, `%install`), and the
/// image tagged `latest` is one of those builds (`containers/server-image/Dockerfile.uyuni`:
/// `#!BuildTag: uyuni/server:latest`): an installed `latest` reports its release, never the
/// word `latest`.
pub fn image_release(image: &str) -> &str {
    match image_tag(image) {
        "latest" => LATEST_RELEASE,
        tag => tag,
    }
}

pub fn image_tag(image: &str) -> &str {
    let name = image.rsplit('/').next().unwrap_or(image);
    let name = name.split('@').next().unwrap_or(name);
    match name.rsplit_once(':') {
        Some((_, tag)) if !tag.is_empty() => tag,
        _ => "latest",
    }
}

impl JobScript {
    pub fn succeed(duration_ms: u64, log: &[&str]) -> JobScript {
        JobScript {
            duration_ms,
            log: log.iter().map(|s| s.to_string()).collect(),
            ..JobScript::default()
        }
    }

    pub fn fail(exit_code: i32, log: &[&str]) -> JobScript {
        JobScript {
            outcome: JobOutcome::Fail,
            exit_code,
            log: log.iter().map(|s| s.to_string()).collect(),
            ..JobScript::default()
        }
    }

    pub fn stuck(waiting_reason: &str) -> JobScript {
        JobScript {
            outcome: JobOutcome::Stuck,
            waiting_reason: waiting_reason.to_string(),
            ..JobScript::default()
        }
    }

    /// Adds a "patch these keys into Secret `name`" side effect, just before the end.
    pub fn patching_secret(mut self, name: &str, data: &[(&str, &str)]) -> JobScript {
        self.side_effects.push(SideEffect::PatchSecret(PatchSecret {
            name: name.to_string(),
            string_data: data
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            at_ms: None,
            create_if_missing: false,
        }));
        self
    }
}

/// Something a Job does to the cluster while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SideEffect {
    PatchSecret(PatchSecret),
}

/// Merge string keys into a Secret of the Job's namespace (field manager `uyuni-job`). A value
/// equal to `$JOB_NAME` becomes the Job's name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PatchSecret {
    pub name: String,
    #[serde(default)]
    pub string_data: BTreeMap<String, String>,
    /// When, in ms after the pod started running; `None` is just before the container ends
    /// (and then only if the Job succeeds).
    #[serde(default)]
    pub at_ms: Option<u64>,
    #[serde(default)]
    pub create_if_missing: bool,
}

/// How a Deployment's pods turn out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DeploymentOutcome {
    #[default]
    Ready,
    /// Pods stay not ready with `waiting_reason` (ImagePullBackOff, CrashLoopBackOff, …).
    Stuck,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct DeploymentScript {
    pub outcome: DeploymentOutcome,
    /// Overrides `timing.deploymentReadyMs` for this Deployment.
    pub ready_after_ms: Option<u64>,
    pub waiting_reason: String,
    pub waiting_message: Option<String>,
}

impl Default for DeploymentScript {
    fn default() -> Self {
        DeploymentScript {
            outcome: DeploymentOutcome::Ready,
            ready_after_ms: None,
            waiting_reason: "ImagePullBackOff".to_string(),
            waiting_message: None,
        }
    }
}

impl DeploymentScript {
    pub fn stuck(waiting_reason: &str) -> DeploymentScript {
        DeploymentScript {
            outcome: DeploymentOutcome::Stuck,
            waiting_reason: waiting_reason.to_string(),
            ..DeploymentScript::default()
        }
    }
}

/// A Kubernetes API verb, as faults select requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    Deletecollection,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::Deletecollection => "deletecollection",
        }
    }

    pub fn is_write(self) -> bool {
        matches!(
            self,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::Deletecollection
        )
    }
}

/// Faults the API server injects into resource requests (not discovery, OpenAPI or `/version`,
/// unless `include_version`/`include_discovery`). Random choices come from a generator seeded
/// with `seed`, so a single-threaded client sees the same faults on every run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Faults {
    pub seed: u64,
    /// Answer with an error status at a rate.
    pub errors: Vec<ErrorFault>,
    /// Close the connection without answering, at a rate.
    pub drops: Vec<DropFault>,
    /// Added before every answer.
    pub latency_ms: u64,
    /// End every watch after this many events (clients must re-watch).
    pub watch_close_after_events: Option<u32>,
    /// End every watch after this many events with a 410 Expired ERROR event (clients must
    /// list again).
    pub watch_expire_after_events: Option<u32>,
    /// End every watch after this long.
    pub watch_close_after_ms: Option<u64>,
    /// Hold back every watch event after the initial ones this long (a proxy that buffers):
    /// a client's watch falls behind its writes.
    pub watch_event_delay_ms: Option<u64>,
    /// Each fails exactly once, the first time a matching request arrives.
    pub fail_once: Vec<FailOnce>,
    /// Let faults hit `GET /version` too (the kubectl dispatcher's call).
    pub include_version: bool,
    /// Let faults hit discovery and OpenAPI requests too.
    pub include_discovery: bool,
    /// The N-th committed write of the server's objects (1-based; Leases, access reviews and
    /// the operation records, ConfigMaps `uyuni-operation-*`, are not counted) is carried out and never answered: the client hangs right after a
    /// step boundary, where a test kills it ([`crate::SimCluster::holding`]).
    pub hold_after_write: Option<u32>,
}

/// Which requests a fault applies to; `None` fields match everything.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct FaultTarget {
    pub verb: Option<Verb>,
    /// The plural resource name, e.g. `jobs`, or `pods/log`.
    pub resource: Option<String>,
    pub name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorFault {
    #[serde(flatten)]
    pub target: FaultTarget,
    /// Probability in 0..=1.
    pub rate: f64,
    /// 500, 503 or 429 (429 carries `Retry-After`).
    pub status: u16,
    #[serde(default = "default_retry_after")]
    pub retry_after_seconds: u32,
}

fn default_retry_after() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DropFault {
    #[serde(flatten)]
    pub target: FaultTarget,
    pub rate: f64,
}

/// "This write fails once with status X" (status 0 drops the connection instead).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailOnce {
    #[serde(flatten)]
    pub target: FaultTarget,
    pub status: u16,
    #[serde(default = "default_retry_after")]
    pub retry_after_seconds: u32,
}

impl FaultTarget {
    pub fn new(verb: Option<Verb>, resource: Option<&str>, name: Option<&str>) -> FaultTarget {
        FaultTarget {
            verb,
            resource: resource.map(str::to_string),
            name: name.map(str::to_string),
        }
    }

    pub fn matches(&self, verb: Verb, resource: &str, name: Option<&str>) -> bool {
        self.verb.is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
            && self.name.as_deref().is_none_or(|n| Some(n) == name)
    }
}
