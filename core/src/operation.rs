//! The record of one operation (a run of a writing command): a ConfigMap labelled as ours that
//! says which command ran, with which parameters (a fingerprint, never a secret), when, how it
//! ended, and per step of its plan the phase, times, Job and attempt, exit reason and a short
//! summary; beside it the last part of each Job's log, which outlives the Job's pod. helm keeps
//! a release history the same way (a Secret per revision); CloudNativePG's `report` bundles
//! such records. `status` shows the newest record, `logs` reads a kept log when the pod is gone,
//! and `report` bundles them all.
//!
//! The record is bookkeeping of the loop (`plugin::drive`), not a step of the plan: no planner
//! reads it, so it can change nothing the plan does, and a preview of the same run is unchanged
//! by it. What is decided here is pure (names, which records to prune, the bounded logs, the
//! ConfigMap's content); the plugin passes the clock in and `effects::operation` writes.

use std::collections::{BTreeMap, VecDeque};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::plan::{Action, Step};

/// Every record's name starts so; then the run's start (`YYYYMMDDhhmmss`, UTC) and the command,
/// so that names sort by start.
pub const NAME_PREFIX: &str = "uyuni-operation-";
/// Its `app.kubernetes.io/component` label.
pub const COMPONENT: &str = "operation";
/// The selector of every record.
pub const SELECTOR: &str = "app.kubernetes.io/part-of=uyuni,app.kubernetes.io/managed-by=kubectl-uyuni,app.kubernetes.io/component=operation";
/// How many records are kept in a namespace: a run that writes a new one deletes the oldest
/// beyond it (they are the tool's own bookkeeping; nothing else refers to them).
pub const KEEP: usize = 10;
/// The data key of the record itself (JSON, [`Operation`]).
pub const RECORD_KEY: &str = "operation.json";
/// A kept log's data key is this followed by the Job's name (a DNS label: a valid key).
pub const LOG_KEY_PREFIX: &str = "log.";
/// How much of each Job's log is kept: its last 16 KiB.
pub const LOG_TAIL_BYTES: usize = 16 * 1024;
/// How much log one record keeps in all: "The data stored in a ConfigMap cannot exceed 1 MiB"
/// (<https://kubernetes.io/docs/concepts/configuration/configmap/>; the API server's
/// validation of ConfigMaps refuses a larger one). With the step list (a few tens of KiB) a
/// record stays well under half of that.
pub const LOGS_TOTAL_BYTES: usize = 384 * 1024;
/// The first line of a log of which the start was not kept.
pub const TRUNCATED_MARK: &str =
    "[kubectl-uyuni: earlier lines not kept; the record keeps the last 16 KiB of each Job's log]";
/// The `apiVersion` field of the record's JSON.
pub const API_VERSION: &str = "kubectl-uyuni.io/v1";

/// Where a step stands in the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StepPhase {
    /// Not reached (yet, or ever: the run failed before it).
    Pending,
    Running,
    Done,
    Failed,
    /// Found done by the cluster when its turn came: the run did not carry it out.
    Skipped,
}

/// How the operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// No end recorded: still running, or the run was killed (SIGKILL, a closed laptop).
    Running,
    Succeeded,
    Failed,
    /// Stopped by SIGINT or SIGTERM; the step then running (a Job) may still run in the
    /// cluster, and the same command resumes.
    Interrupted,
}

/// One step of the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepRecord {
    pub id: String,
    pub description: String,
    pub phase: StepPhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// The Job the step ran or waited for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// Its place among every attempt of the step, from 1 (`logs --attempt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<usize>,
    /// Why it ended as it did, for a failed step: the Job's reason, or the error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_reason: Option<String>,
    /// One line: the last line of its Job's log, or the error's first line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// The record of one operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Operation {
    pub api_version: String,
    /// `install`, `migrate`, `upgrade`, `uninstall`, `stop`, `start`, `restart`.
    pub command: String,
    /// The tool's version.
    pub version: String,
    /// The run id (its Jobs' `kubectl-uyuni.io/run`).
    pub run: String,
    /// [`fingerprint`] of the run's parameters: equal for two runs with the same non-secret
    /// parameters.
    pub fingerprint: String,
    pub started: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    pub outcome: Outcome,
    /// For a failed run, the error's first line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub steps: Vec<StepRecord>,
}

/// A fingerprint of a run's parameters: the SHA-256 of their serialised form, which never holds
/// a secret (`secret::SecretString` serialises as `***`), without the run id (each run's own).
/// Two runs with the same parameters have the same fingerprint; a changed flag changes it.
pub fn fingerprint<P: Serialize>(params: &P) -> String {
    let mut value = serde_json::to_value(params).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.remove("run_id");
        map.remove("runId");
    }
    // serde_json's maps are sorted (no preserve_order feature): the text is canonical.
    let digest = Sha256::digest(value.to_string().as_bytes());
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The name of a new record for `command` started at `run_id` (`YYYYMMDDhhmmss`): the first of
/// `…-COMMAND`, `…-COMMAND-02`, … that `taken` does not hold (two runs within one second;
/// the number padded so that names still sort by start).
pub fn name(run_id: &str, command: &str, taken: impl Fn(&str) -> bool) -> String {
    let base = format!("{NAME_PREFIX}{run_id}-{command}");
    std::iter::once(base.clone())
        .chain((2..).map(|n| format!("{base}-{n:02}")))
        .find(|n| !taken(n))
        .unwrap_or(base)
}

/// The records to delete once `new` is written beside `existing`: the oldest beyond [`KEEP`]
/// (by name, which sorts by start), never `new` itself.
pub fn to_prune(existing: &[String], new: &str) -> Vec<String> {
    let mut all: Vec<&str> = existing
        .iter()
        .map(String::as_str)
        .filter(|n| *n != new)
        .collect();
    all.sort_unstable();
    let keep_old = KEEP.saturating_sub(1);
    let excess = all.len().saturating_sub(keep_old);
    all[..excess].iter().map(|n| (*n).to_owned()).collect()
}

/// The Job a step runs or waits for.
pub fn step_job(step: &Step) -> Option<&str> {
    match &step.action {
        Action::RunJob { job, .. } => job.metadata.name.as_deref(),
        Action::AwaitJob { name, .. } => Some(name),
        _ => None,
    }
}

impl StepRecord {
    /// A step not started yet.
    fn pending(id: &str, description: &str) -> StepRecord {
        StepRecord {
            id: id.to_owned(),
            description: description.to_owned(),
            phase: StepPhase::Pending,
            started: None,
            ended: None,
            job: None,
            attempt: None,
            exit_reason: None,
            summary: None,
        }
    }

    /// The step was found done when its turn came (or at the run's end).
    fn skip(&mut self) {
        self.phase = StepPhase::Skipped;
        self.summary = Some("done already".to_owned());
    }
}

impl Operation {
    /// A new record, every step of `steps` (the run's foreseen steps) pending.
    pub fn new(
        command: &str,
        version: &str,
        run: &str,
        fingerprint: String,
        started: &str,
        steps: &[Step],
    ) -> Operation {
        Operation {
            api_version: API_VERSION.to_owned(),
            command: command.to_owned(),
            version: version.to_owned(),
            run: run.to_owned(),
            fingerprint,
            started: started.to_owned(),
            ended: None,
            outcome: Outcome::Running,
            error: None,
            steps: steps
                .iter()
                .map(|s| StepRecord::pending(&s.id, &s.description))
                .collect(),
        }
    }

    /// The first pending step with `id`, or a new one at the end (a step the run's start did
    /// not foresee, or the same step again: a retried Job).
    fn pending(&mut self, id: &str, description: &str) -> &mut StepRecord {
        let at = match self
            .steps
            .iter()
            .position(|s| s.id == id && s.phase == StepPhase::Pending)
        {
            Some(i) => i,
            None => {
                self.steps.push(StepRecord::pending(id, description));
                self.steps.len() - 1
            }
        };
        &mut self.steps[at]
    }

    /// The step now running.
    fn running(&mut self) -> Option<&mut StepRecord> {
        self.steps
            .iter_mut()
            .rev()
            .find(|s| s.phase == StepPhase::Running)
    }

    /// `step` starts at `at`; `job` and `attempt` for a Job's step.
    pub fn start_step(&mut self, step: &Step, at: &str, job: Option<(String, usize)>) {
        let record = self.pending(&step.id, &step.description);
        record.description.clone_from(&step.description);
        record.phase = StepPhase::Running;
        record.started = Some(at.to_owned());
        if let Some((job, attempt)) = job {
            record.job = Some(job);
            record.attempt = Some(attempt);
        }
    }

    /// The running step ended well at `at`; `summary` (a Job's last log line).
    pub fn step_done(&mut self, at: &str, summary: Option<String>) {
        if let Some(record) = self.running() {
            record.phase = StepPhase::Done;
            record.ended = Some(at.to_owned());
            record.summary = summary.map(|s| one_line(&s));
        }
    }

    /// The foreseen step `id` was found done when its turn came.
    pub fn step_skipped(&mut self, id: &str) {
        if let Some(record) = self
            .steps
            .iter_mut()
            .find(|s| s.id == id && s.phase == StepPhase::Pending)
        {
            record.skip();
        }
    }

    /// The run ended at `at`: succeeded, or failed with `error` (`reason`: why the failed
    /// step's Job ended, when a Job failed; `summary`: its last log line).
    pub fn finish(&mut self, at: &str, failure: Option<Failure>) {
        self.ended = Some(at.to_owned());
        match failure {
            None => {
                self.outcome = Outcome::Succeeded;
                for s in &mut self.steps {
                    if s.phase == StepPhase::Pending {
                        s.skip();
                    }
                }
            }
            Some(failure) => {
                self.outcome = Outcome::Failed;
                self.error = Some(one_line(&failure.error));
                if let Some(record) = self.running() {
                    record.phase = StepPhase::Failed;
                    record.ended = Some(at.to_owned());
                    record.exit_reason = Some(one_line(
                        failure.reason.as_deref().unwrap_or(&failure.error),
                    ));
                    record.summary = failure.summary.map(|s| one_line(&s));
                }
            }
        }
    }

    /// The run was stopped by a signal at `at`: the step running stays so (its Job goes on).
    pub fn interrupt(&mut self, at: &str, why: &str) {
        self.ended = Some(at.to_owned());
        self.outcome = Outcome::Interrupted;
        self.error = Some(one_line(why));
    }

    /// The failed step, if any.
    pub fn failed_step(&self) -> Option<&StepRecord> {
        self.steps.iter().find(|s| s.phase == StepPhase::Failed)
    }
}

/// How a run failed, for [`Operation::finish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The error, as the user read it (its first line is kept).
    pub error: String,
    /// Why the failed step's Job ended, when that was the failure.
    pub reason: Option<String>,
    /// The last line of its log.
    pub summary: Option<String>,
}

/// The first line of `text`, at most 300 characters.
fn one_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(300) {
        Some((i, _)) => format!("{}…", &line[..i]),
        None => line.to_owned(),
    }
}

/// The kept logs of a run's Jobs: the last [`LOG_TAIL_BYTES`] of each, at most
/// [`LOGS_TOTAL_BYTES`] in all (the oldest Job's log is dropped first, its key then says so).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Logs {
    /// Per Job, in the order they started.
    jobs: Vec<(String, JobLog)>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct JobLog {
    lines: VecDeque<String>,
    bytes: usize,
    truncated: bool,
    dropped: bool,
    /// Changed since the last [`Logs::take_changed`].
    changed: bool,
}

impl JobLog {
    fn text(&self) -> String {
        if self.dropped {
            return "[kubectl-uyuni: this log was dropped to keep the record under its size limit]\n".to_owned();
        }
        let mut out = String::with_capacity(self.bytes + TRUNCATED_MARK.len() + 1);
        if self.truncated {
            out.push_str(TRUNCATED_MARK);
            out.push('\n');
        }
        for line in &self.lines {
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

impl Logs {
    /// A line of `job`'s log.
    pub fn push(&mut self, job: &str, line: &str) {
        let at = match self.jobs.iter().position(|(j, _)| j == job) {
            Some(i) => i,
            None => {
                self.jobs.push((job.to_owned(), JobLog::default()));
                self.jobs.len() - 1
            }
        };
        let log = &mut self.jobs[at].1;
        if log.dropped {
            return;
        }
        // A single line longer than the whole tail keeps its end.
        let line = match line.len().checked_sub(LOG_TAIL_BYTES - 1) {
            Some(cut) if cut > 0 => {
                let mut cut = cut;
                while !line.is_char_boundary(cut) {
                    cut += 1;
                }
                log.truncated = true;
                &line[cut..]
            }
            _ => line,
        };
        log.lines.push_back(line.to_owned());
        log.bytes += line.len() + 1;
        while log.bytes > LOG_TAIL_BYTES {
            let Some(first) = log.lines.pop_front() else {
                break;
            };
            log.bytes -= first.len() + 1;
            log.truncated = true;
        }
        log.changed = true;
        self.bound_total(at);
    }

    fn total(&self) -> usize {
        self.jobs.iter().map(|(_, l)| l.bytes).sum()
    }

    /// Drops the oldest logs but `current`'s until the total fits.
    fn bound_total(&mut self, current: usize) {
        let mut i = 0;
        while self.total() > LOGS_TOTAL_BYTES && i < self.jobs.len() {
            if i != current && !self.jobs[i].1.dropped {
                let log = &mut self.jobs[i].1;
                log.dropped = true;
                log.lines.clear();
                log.bytes = 0;
                log.changed = true;
            }
            i += 1;
        }
    }

    /// The last line of `job`'s log.
    pub fn last_line(&self, job: &str) -> Option<String> {
        self.jobs
            .iter()
            .find(|(j, _)| j == job)
            .and_then(|(_, l)| l.lines.back().cloned())
    }

    /// The data keys of the logs changed since the last call, with their text.
    pub fn take_changed(&mut self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        for (job, log) in &mut self.jobs {
            if log.changed {
                log.changed = false;
                out.insert(format!("{LOG_KEY_PREFIX}{job}"), log.text());
            }
        }
        out
    }

    /// Every kept log's key and text.
    pub fn all(&self) -> BTreeMap<String, String> {
        self.jobs
            .iter()
            .map(|(job, log)| (format!("{LOG_KEY_PREFIX}{job}"), log.text()))
            .collect()
    }
}

/// The record's ConfigMap: its labels, the record, and `logs` (data keys and texts).
pub fn config_map(
    namespace: &str,
    name: &str,
    operation: &Operation,
    logs: BTreeMap<String, String>,
) -> ConfigMap {
    let mut data = logs;
    data.insert(RECORD_KEY.to_owned(), record_json(operation));
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(crate::labels::labels(COMPONENT)),
            annotations: Some(BTreeMap::from([(
                crate::labels::DESCRIPTION_ANNOTATION.to_owned(),
                format!(
                    "the record of a `kubectl uyuni {}` run: its steps and its Jobs' logs",
                    operation.command
                ),
            )])),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    }
}

/// The record as stored under [`RECORD_KEY`]: indented JSON, readable with `kubectl get -o yaml`.
pub fn record_json(operation: &Operation) -> String {
    serde_json::to_string_pretty(operation).unwrap_or_default()
}

/// A record read back from its ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub name: String,
    pub operation: Operation,
    /// Job name → kept log text.
    pub logs: BTreeMap<String, String>,
}

/// The record `config_map` holds; `None` for a ConfigMap that is none (or was edited beyond
/// reading).
pub fn read(config_map: &ConfigMap) -> Option<Stored> {
    let name = config_map.metadata.name.clone()?;
    if !name.starts_with(NAME_PREFIX) {
        return None;
    }
    let data = config_map.data.as_ref()?;
    let operation: Operation = serde_json::from_str(data.get(RECORD_KEY)?).ok()?;
    let logs = data
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(LOG_KEY_PREFIX)?.to_owned(), v.clone())))
        .collect();
    Some(Stored {
        name,
        operation,
        logs,
    })
}

/// The records among `config_maps`, newest first.
pub fn newest_first(config_maps: &[ConfigMap]) -> Vec<Stored> {
    let mut out: Vec<Stored> = config_maps.iter().filter_map(read).collect();
    out.sort_by(|a, b| b.name.cmp(&a.name));
    out
}

/// The newest kept log of `job` among `records`, with the name of the record that keeps it.
pub fn kept_log<'a>(records: &'a [Stored], job: &str) -> Option<(&'a str, &'a str)> {
    records
        .iter()
        .find_map(|r| Some((r.name.as_str(), r.logs.get(job)?.as_str())))
}

/// The permissions keeping the record needs in `namespace`: it is written by server-side apply
/// (a patch that creates), updated by merge patches, and the oldest records beyond [`KEEP`]
/// are listed and deleted.
pub fn needs(namespace: &str) -> Vec<crate::permission::Access> {
    use crate::permission::Access;
    ["create", "patch", "list", "delete"]
        .into_iter()
        .map(|verb| Access::new(verb, "", "configmaps", Some(namespace)))
        .collect()
}
