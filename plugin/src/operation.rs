//! The loop's record of the operation (`uyuni_core::operation`), kept by `drive::run` for every
//! writing command: created with the run's first write (the lease held), changed at the step
//! boundaries that matter — before a step whose end the cluster decides (a Job, a wait, a
//! scale, a deletion), carrying the ends of the steps before it, and at the end of the run —
//! never per poll; plain writes in between are batched into the next change. A run killed
//! between a step's end and the next change leaves that step `running` in its record: the
//! Jobs' own status says the rest. A Job's log lines reach it through the
//! progress events the Job's wait already gives ([`Capturing`]): keeping them costs no request.
//!
//! **A record that cannot be written never fails the run.** The record is bookkeeping: no plan
//! reads it, the namespace's lease already serialises the runs, and the Jobs keep their own
//! annotations. Each write is retried as every request of the run is; a write that still fails
//! is reported once as a warning, and the run goes on without its record (a later write could
//! only leave a partial one). Failing the run would turn a bookkeeping hiccup into an
//! interrupted migration, with the source stopped.

use std::sync::Mutex;

use uyuni_core::operation::{self, Failure, Logs, Operation};
use uyuni_core::{Observed, Step};
use uyuni_effects::{Progress, ProgressEvent};

use crate::output::Reporter;

/// What a command tells the record about itself.
pub struct Identity {
    /// The command's name: `install`, `migrate`, …
    pub command: &'static str,
    /// `operation::fingerprint` of its parameters.
    pub fingerprint: String,
}

/// The record of the running operation.
pub struct Recorder {
    namespace: String,
    /// Once created: its name and content.
    record: Option<(String, Operation)>,
    logs: Mutex<Logs>,
    /// A write failed: the run goes on without its record.
    disabled: bool,
    /// Steps carried out before the record could be written (the namespace's creation): each
    /// with its start and end.
    early: Vec<(Step, String, Option<String>)>,
}

/// Now, as the record writes times (RFC 3339, UTC, whole seconds).
fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    k8s_openapi::jiff::Timestamp::from_second(i64::try_from(secs).unwrap_or(0))
        .map(|t| t.to_string())
        .unwrap_or_default()
}

impl Recorder {
    pub fn new(namespace: &str) -> Recorder {
        Recorder {
            namespace: namespace.to_owned(),
            record: None,
            logs: Mutex::new(Logs::default()),
            disabled: false,
            early: Vec::new(),
        }
    }

    fn lock_logs(&self) -> std::sync::MutexGuard<'_, Logs> {
        self.logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn give_up(&mut self, reporter: &Reporter, error: &uyuni_effects::EffectsError) {
        self.disabled = true;
        reporter.warn(&format!(
            "the record of this operation could not be written ({error}); the run goes on without it: `status` and `report` will not show this run, its Jobs and their annotations stay as they are"
        ));
    }

    /// Before the run's first write (its lease held; after the namespace's creation, which
    /// comes before the lease too): creates the record, every foreseen step pending but those
    /// carried out already, and deletes the oldest records beyond the kept number.
    pub async fn begin(
        &mut self,
        conn: &uyuni_effects::Connection,
        identity: &Identity,
        run_id: &str,
        foreseen: &[Step],
        reporter: &Reporter,
    ) {
        if self.record.is_some() || self.disabled {
            return;
        }
        let client = &conn.client;
        let existing: Vec<String> =
            match uyuni_effects::operation::list(client, &self.namespace).await {
                Ok(list) => list.into_iter().filter_map(|c| c.metadata.name).collect(),
                Err(e) => return self.give_up(reporter, &e),
            };
        let name = operation::name(run_id, identity.command, |n| {
            existing.iter().any(|e| e == n)
        });
        let started = self
            .early
            .first()
            .map_or_else(now, |(_, started, _)| started.clone());
        let mut record = Operation::new(
            identity.command,
            env!("CARGO_PKG_VERSION"),
            run_id,
            identity.fingerprint.clone(),
            &started,
            foreseen,
        );
        for (step, started, ended) in self.early.drain(..) {
            record.start_step(&step, &started, None);
            record.step_done(ended.as_deref().unwrap_or(&started), None);
        }
        let config_map = operation::config_map(&self.namespace, &name, &record, Default::default());
        if let Err(e) = uyuni_effects::operation::apply(client, &self.namespace, &config_map).await
        {
            return self.give_up(reporter, &e);
        }
        self.record = Some((name.clone(), record));
        for old in operation::to_prune(&existing, &name) {
            if let Err(e) = uyuni_effects::operation::delete(client, &self.namespace, &old).await {
                // The new record is written; an old one left is only one too many.
                reporter.warn(&format!(
                    "an old operation record could not be deleted ({e}); it stays until a later run deletes it"
                ));
                break;
            }
        }
    }

    /// Foreseen steps found done when their turn came.
    pub fn skipped(&mut self, steps: &[(usize, Step)]) {
        if let Some((_, record)) = self.record.as_mut() {
            for (_, step) in steps {
                record.step_skipped(&step.id);
            }
        }
    }

    /// `step` starts; with `observed`, the state it was planned from (its Job's attempt).
    pub fn start(&mut self, step: &Step, observed: &Observed) {
        if let Some((_, record)) = self.record.as_mut() {
            let job = operation::step_job(step).map(|job| {
                let attempts = observed.attempts(&step.id).all();
                let attempt = attempts
                    .iter()
                    .position(|j| j.metadata.name.as_deref() == Some(job))
                    .unwrap_or(attempts.len())
                    + 1;
                (job.to_owned(), attempt)
            });
            record.start_step(step, &now(), job);
        } else if !self.disabled {
            self.early.push((step.clone(), now(), None));
        }
    }

    /// The running step ended well.
    pub fn done(&mut self, step: &Step) {
        let summary = operation::step_job(step).and_then(|job| self.lock_logs().last_line(job));
        if let Some((_, record)) = self.record.as_mut() {
            record.step_done(&now(), summary);
        } else if let Some((_, _, ended)) = self.early.last_mut() {
            *ended = Some(now());
        }
    }

    /// The run ended: `error` when it failed.
    pub fn finish(&mut self, error: Option<&anyhow::Error>) {
        let failure = error.map(|error| {
            let job = error
                .chain()
                .find_map(|e| e.downcast_ref::<uyuni_effects::EffectsError>())
                .and_then(|e| match e {
                    uyuni_effects::EffectsError::JobFailed {
                        reason, log_tail, ..
                    } => Some((reason.clone(), log_tail.last().cloned())),
                    _ => None,
                });
            Failure {
                error: format!("{error:#}"),
                reason: job.as_ref().map(|(reason, _)| reason.clone()),
                summary: job.and_then(|(_, last)| last),
            }
        });
        if let Some((_, record)) = self.record.as_mut() {
            record.finish(&now(), failure);
        }
    }

    /// Writes what changed since the last write: the record, and the logs that grew.
    pub async fn flush(&mut self, conn: &uyuni_effects::Connection, reporter: &Reporter) {
        if self.disabled {
            return;
        }
        let Some((name, record)) = self.record.as_ref() else {
            return;
        };
        let mut data = self.lock_logs().take_changed();
        data.insert(
            operation::RECORD_KEY.to_owned(),
            operation::record_json(record),
        );
        let name = name.clone();
        if let Err(e) =
            uyuni_effects::operation::update(&conn.client, &self.namespace, &name, &data).await
        {
            self.give_up(reporter, &e);
        }
    }

    /// The run deletes its namespace: the record goes with it, and is written no more.
    pub fn namespace_going(&mut self) {
        self.disabled = true;
    }

    /// A purge succeeded: instead of its last write, every record of the namespace is deleted,
    /// this run's included (its result is the command's output). After `--delete-namespace`
    /// the namespace took them with it, and there is nothing left to write to: no warning.
    /// Returns whether no record is left.
    pub async fn purge(&mut self, conn: &uyuni_effects::Connection, reporter: &Reporter) -> bool {
        self.disabled = true;
        let client = &conn.client;
        let names: Vec<String> = match uyuni_effects::operation::list(client, &self.namespace).await
        {
            Ok(list) => list.into_iter().filter_map(|c| c.metadata.name).collect(),
            Err(e) => {
                reporter.warn(&self.records_left(&e));
                return false;
            }
        };
        for name in names {
            if let Err(e) = uyuni_effects::operation::delete(client, &self.namespace, &name).await {
                reporter.warn(&self.records_left(&e));
                return false;
            }
        }
        true
    }

    fn records_left(&self, error: &uyuni_effects::EffectsError) -> String {
        format!(
            "the purge is done, but the operation records could not be deleted ({error}): delete them with `kubectl delete configmap -n {} -l {}`",
            self.namespace,
            operation::SELECTOR
        )
    }

    /// The record as last written, for the run's end by a signal ([`Unfinished`]).
    pub fn unfinished(&self, conn: &uyuni_effects::Connection) -> Option<Unfinished> {
        if self.disabled {
            return None;
        }
        let (name, operation) = self.record.as_ref()?;
        Some(Unfinished {
            conn: conn.clone(),
            namespace: self.namespace.clone(),
            name: name.clone(),
            operation: operation.clone(),
        })
    }

    /// A progress sink that keeps the Jobs' log lines and passes every event on to `inner`.
    pub fn capturing<'a>(&'a self, inner: &'a Reporter) -> Capturing<'a> {
        Capturing {
            inner,
            logs: (self.record.is_some() && !self.disabled).then_some(&self.logs),
        }
    }
}

/// A record as last written by a run still going: what a signal that stops the run (the loop's
/// future dropped, `crate::interruptible`) marks interrupted, through the lease's holder
/// ([`crate::lock::RunLock::note_record`]).
pub struct Unfinished {
    conn: uyuni_effects::Connection,
    namespace: String,
    name: String,
    operation: Operation,
}

impl std::fmt::Debug for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Unfinished({}/{})", self.namespace, self.name)
    }
}

impl Unfinished {
    /// Writes the record as interrupted by `why` (`interrupted by SIGINT`); a failure is only
    /// a warning, as every write of the record.
    pub async fn interrupted(mut self, why: &str, reporter: &Reporter) {
        self.operation.interrupt(&now(), why);
        let data = std::collections::BTreeMap::from([(
            operation::RECORD_KEY.to_owned(),
            operation::record_json(&self.operation),
        )]);
        if let Err(e) =
            uyuni_effects::operation::update(&self.conn.client, &self.namespace, &self.name, &data)
                .await
        {
            reporter.warn(&format!(
                "the record of this operation could not be marked interrupted ({e}); it says the run is still running"
            ));
        }
    }
}

/// [`Recorder::capturing`].
pub struct Capturing<'a> {
    inner: &'a Reporter,
    logs: Option<&'a Mutex<Logs>>,
}

impl Progress for Capturing<'_> {
    fn event(&self, event: ProgressEvent<'_>) {
        if let (Some(logs), ProgressEvent::JobLog { job, line, .. }) = (self.logs, &event) {
            logs.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(job, line);
        }
        self.inner.event(event);
    }
}
