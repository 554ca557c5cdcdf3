//! The loop every writing command runs: observe the cluster, plan from what it holds, carry out
//! the plan's next step, and again until the plan has nothing left. What differs between
//! commands (what to observe, the planner, its prompts and the user's consent) comes through
//! [`Command`]; what every writing command needs (the one-writer lease, the permission check
//! before the first write, progress, the prediction of plain writes) stays here. This module
//! knows no command: `migrate` uses it, and so does `dry_run`'s permission check.

use std::time::Duration;

use anyhow::{Result, bail};
use uyuni_core::access::Access;
use uyuni_core::plan::{Plan, PlanError, Planner};
use uyuni_core::{Observation, Observed, Step};

use crate::lock::{RunLock, Writer};
use crate::output::Reporter;

/// What one command brings to the loop.
// The loop runs in place (`block_on`, `select!`), never spawned: the hooks' futures need not
// be `Send`, so plain `async fn` is enough.
#[allow(async_fn_in_trait)]
pub trait Command {
    /// The core planner's parameters the command runs with.
    type Params: Planner;

    fn params(&self) -> &Self::Params;

    /// The namespace the steps are carried out in.
    fn namespace(&self) -> &str {
        &self.params().server().namespace
    }

    /// What to read of the cluster: the objects the planner looks at.
    fn observation(&self) -> Observation {
        self.params().observation()
    }

    /// Called once, with the run's first observation, before the first plan: choices that
    /// depend on what earlier runs left (the run's id, unused by their Jobs).
    fn first_observation(&mut self, _observed: &Observed) {}

    /// Warnings about the cluster, given until the first write.
    fn warnings(&self, _observed: &Observed) -> Vec<String> {
        Vec::new()
    }

    fn plan(&self, observed: &Observed) -> Result<Plan, PlanError> {
        self.params().plan(observed)
    }

    /// A plan failed: `Ok` when the inputs were completed (a password asked for) and the
    /// plan may be made again; the error to end the run with otherwise.
    fn on_plan_error(&mut self, error: PlanError) -> Result<(), PlanError> {
        Err(error)
    }

    /// The steps of the whole run as far as they can be planned now: the progress total, and
    /// what the permission check covers.
    fn foreseen(&self, observed: &Observed) -> Vec<Step> {
        uyuni_core::preview::foreseen(self.params(), observed)
    }

    /// The requests the run makes to carry out `foreseen` and observe, for the permission
    /// check before the first write.
    fn access_needed(&self, observed: &Observed, foreseen: &[Step]) -> Vec<Access> {
        uyuni_core::access::needed_by(self.params(), observed, foreseen)
    }

    /// What the lease records of this run, and the command that repeats it.
    fn writer(&self) -> Writer<'_>;

    /// What the operation's record says of the command (`crate::operation`).
    fn identity(&self) -> crate::operation::Identity;

    /// Whether a successful run deletes the operation records, its own included, instead of
    /// writing its end into its record: a purge, which leaves nothing of the tool's.
    fn purges_records(&self) -> bool {
        false
    }

    /// Before the lease check of `step`, the next step of `plan`: the user's consent. A hook
    /// that asks takes the lease first ([`Drive::take_lease`]), so that a yes is never asked
    /// for a run that another run's lease then refuses.
    async fn before_step(&mut self, _plan: &Plan, _step: &Step, _drive: &Drive<'_>) -> Result<()> {
        Ok(())
    }
}

/// What the loop works with, whichever the command.
pub struct Drive<'a> {
    pub conn: &'a uyuni_effects::Connection,
    pub reporter: &'a Reporter,
    pub run_lock: &'a RunLock,
    /// How long the observer waits for its watches to show a write (tests shorten it).
    pub barrier_timeout: Option<Duration>,
}

impl<'a> Drive<'a> {
    /// The loop's context for a run with `flags`.
    pub fn new(
        conn: &'a uyuni_effects::Connection,
        reporter: &'a Reporter,
        run_lock: &'a RunLock,
        flags: &crate::cli::RunFlags,
    ) -> Drive<'a> {
        Drive {
            conn,
            reporter,
            run_lock,
            barrier_timeout: flags.watch_barrier_timeout_ms.map(Duration::from_millis),
        }
    }

    /// Takes the namespace's lease before `step` (or checks it is still held).
    pub async fn take_lease(&self, writer: &Writer<'_>, step: &Step) -> Result<()> {
        self.run_lock
            .before_write(self.conn, writer, step, self.reporter)
            .await
    }

    /// The user's consent before `step`, asked on the terminal once the lease is held (a yes
    /// is never asked for a run another run's lease then refuses): `no_terminal` is the error
    /// where there is none to ask on, `declined` the one for an answer other than yes.
    pub async fn consent(
        &self,
        writer: &Writer<'_>,
        step: &Step,
        question: &str,
        no_terminal: String,
        declined: &str,
    ) -> Result<()> {
        if !crate::prompt::interactive() {
            bail!(no_terminal);
        }
        self.take_lease(writer, step).await?;
        self.reporter.finish(true);
        if !crate::prompt::confirm(question) {
            bail!("{declined}");
        }
        Ok(())
    }
}

/// Asks the cluster whether the user may make every request in `needed`; `None` (with a
/// warning) when it could not be asked.
pub async fn review_access(
    conn: &uyuni_effects::Connection,
    needed: Vec<Access>,
    reporter: &Reporter,
) -> Option<(Vec<Access>, Vec<(Access, bool)>)> {
    match uyuni_effects::access::review(&conn.client, &needed).await {
        Ok(answers) => Some((needed, answers)),
        Err(e) => {
            reporter.warn(&format!(
                "permissions could not be checked before the first write (a SelfSubjectAccessReview failed: {}); going on: a write you may not make fails with its own error",
                uyuni_effects::error::api_reason(&e)
            ));
            None
        }
    }
}

/// Observes `observation`; a read the API server refuses (403) is followed by the check the run
/// makes before its first write, of every request it would make from an empty namespace
/// (`needed`), so that the error lists every permission missing, each with its `kubectl auth
/// can-i`, rather than only the read that happened to come first. When the reviews find
/// nothing missing (an admission policy, a review that cannot see the rule), the refused read
/// is the error.
pub async fn observe(
    conn: &uyuni_effects::Connection,
    observation: &uyuni_core::Observation,
    needed: impl FnOnce(&Observed) -> Vec<Access>,
    reporter: &Reporter,
) -> Result<Observed> {
    match uyuni_effects::observe(&conn.client, observation).await {
        Ok(observed) => Ok(observed),
        Err(error) => Err(explain_refusal(error, conn, needed, reporter).await),
    }
}

/// `error`, or, for a refused read, the list of every permission missing (see [`observe`]).
pub(crate) async fn explain_refusal(
    error: uyuni_effects::EffectsError,
    conn: &uyuni_effects::Connection,
    needed: impl FnOnce(&Observed) -> Vec<Access>,
    reporter: &Reporter,
) -> anyhow::Error {
    let Some((verb, target)) = error.forbidden() else {
        return error.into();
    };
    let refused = format!("the API server refused to {verb} {target} (403 Forbidden)");
    let needed = needed(&Observed::default());
    if let Some((needed, answers)) = review_access(conn, needed, reporter).await
        && let Err(denied) = uyuni_core::access::check(&needed, &answers)
    {
        return anyhow::Error::new(denied).context(refused);
    }
    error.into()
}

/// Runs `command` until its plan has nothing left to do; returns what the cluster holds then.
/// From its first write on, the run keeps the record of the operation (`crate::operation`),
/// its end included, whether it succeeded or failed.
pub async fn run<C: Command>(command: &mut C, drive: &Drive<'_>) -> Result<Observed> {
    let mut recorder = crate::operation::Recorder::new(command.namespace());
    let result = run_recorded(command, drive, &mut recorder).await;
    recorder.finish(result.as_ref().err());
    if result.is_ok() && command.purges_records() {
        recorder.purge(drive.conn, drive.reporter).await;
    } else {
        recorder.flush(drive.conn, drive.reporter).await;
    }
    drive.run_lock.note_record(None);
    result
}

async fn run_recorded<C: Command>(
    command: &mut C,
    drive: &Drive<'_>,
    recorder: &mut crate::operation::Recorder,
) -> Result<Observed> {
    let conn = drive.conn;
    let reporter = drive.reporter;
    let mut observer = uyuni_effects::Observer::new(conn.client.clone(), command.observation());
    if let Some(timeout) = drive.barrier_timeout {
        observer = observer.with_barrier_timeout(timeout);
    }
    let mut first = true;
    let mut executed = 0usize;
    // The steps' numbers, from the preview of the whole operation at the run's start (a plan
    // may only reach past a step once that step has run: migrate's data sync): the dry run's.
    let mut numbering: Option<uyuni_core::preview::Numbering> = None;
    // The state `simulate` predicts after a plain write: the next step is planned from it, as
    // the preview plans it, without reading the cluster again. A step whose outcome the
    // cluster decides (a Job, a wait, a scale) or a plan that looks finished is followed by a
    // real observation.
    let mut predicted: Option<Observed> = None;
    let observed: Observed = loop {
        let (observed, was_predicted) = match predicted.take() {
            Some(p) => (p, true),
            None => match observer.observe(&uyuni_effects::NoProgress).await {
                Ok(observed) => (observed, false),
                Err(error) if first => {
                    let needed = |empty: &Observed| {
                        let foreseen = command.foreseen(empty);
                        command.access_needed(empty, &foreseen)
                    };
                    return Err(explain_refusal(error, conn, needed, reporter).await);
                }
                Err(error) => return Err(error.into()),
            },
        };
        if first {
            first = false;
            command.first_observation(&observed);
        }
        if executed == 0 {
            for warning in command.warnings(&observed) {
                reporter.warn(&warning);
            }
        }
        let plan = match command.plan(&observed) {
            Ok(plan) => plan,
            Err(error) => {
                command.on_plan_error(error)?;
                continue;
            }
        };
        let Some(step) = plan.next_step() else {
            if was_predicted {
                // Done only when the cluster says so.
                continue;
            }
            break observed;
        };
        // Once, before the first write: the steps of the whole run as far as they can be
        // planned now, for their count (the progress total) and to check every write of the
        // run against what the user may do.
        let numbers = match numbering.as_mut() {
            Some(numbers) => numbers,
            None => {
                let foreseen = command.foreseen(&observed);
                let needed = command.access_needed(&observed, &foreseen);
                if let Some((needed, answers)) = review_access(conn, needed, reporter).await {
                    uyuni_core::access::check(&needed, &answers)?;
                }
                numbering.insert(uyuni_core::preview::Numbering::new(foreseen))
            }
        };
        command.before_step(&plan, step, drive).await?;
        // One writer at a time: the namespace's lease, taken before the first write (dry runs
        // never get here), checked before every later one.
        drive.take_lease(&command.writer(), step).await?;
        // The record, from the first write on (the lease held: one writer of records too),
        // but for the write of the namespace, which must exist to hold it.
        if !crate::lock::creates_namespace(step) {
            let run_id = command.writer().run_id.to_owned();
            recorder
                .begin(
                    conn,
                    &command.identity(),
                    &run_id,
                    &numbers.foreseen(),
                    reporter,
                )
                .await;
            drive.run_lock.note_record(recorder.unfinished(conn));
        }
        executed += 1;
        if executed > uyuni_core::preview::MAX_STEPS {
            bail!(
                "the plan did not converge after {executed} steps; this is a bug in kubectl-uyuni, please report it with the output of --dry-run"
            );
        }
        // A real run may take steps the preview could not foresee (a retried Job, a wait for
        // something that stopped being ready); the total then grows with the current plan.
        let remaining = plan
            .steps
            .iter()
            .filter(|s| s.action != uyuni_core::Action::None)
            .count();
        let numbered = numbers.step(step, remaining);
        for (position, done) in &numbered.done_before {
            reporter.done_step(*position, numbered.total, done);
        }
        recorder.skipped(&numbered.done_before);
        reporter.step(numbered.position, numbered.total, step);
        // The record is written before a step whose end the cluster decides (it may take
        // hours: `status` shows it running), with what ended since the last write; plain
        // writes are batched into it.
        let boundary = !step.action.predictable();
        // The namespace goes, and the record with it (only a purge deletes it, and a purge
        // deletes the records at its end): no write of the record from here on, so that a
        // later turn of the loop (the namespace still terminating) does not warn that it
        // could not be written.
        if step.target.kind == uyuni_core::Kind::Namespace && step.op == uyuni_core::Op::Delete {
            recorder.namespace_going();
        }
        recorder.start(step, &observed);
        if boundary {
            recorder.flush(conn, reporter).await;
            drive.run_lock.note_record(recorder.unfinished(conn));
        }
        let namespace = command.namespace();
        reporter.set_job_context(namespace);
        // What the snapshot says of the object written spares a read before the write; what
        // the step saw last is what the next observation must include.
        let prior = uyuni_effects::Prior::for_step(observer.observation(), &observed, step);
        // The waits read the observer's watches (the Job, the Deployment, the run's pods).
        let done = uyuni_effects::execute_step(
            &conn.client,
            namespace,
            step,
            &prior,
            Some(&observer),
            &recorder.capturing(reporter),
        )
        .await?;
        // Its end reaches the cluster with the next write of the record: the start of the next
        // step whose end the cluster decides, or the run's end.
        recorder.done(step);
        observer.expect(&done);
        if step.action.predictable() {
            predicted = Some(uyuni_core::simulate(&observed, namespace, step));
        }
    };
    if executed == 0 {
        reporter.info("Nothing to do: every step is done already.");
    }
    if let Some(numbers) = numbering.as_mut() {
        let (left, total) = numbers.finish();
        for (position, done) in &left {
            reporter.done_step(*position, total, done);
        }
        recorder.skipped(&left);
    }
    // The live progress view must be gone before data goes to stdout.
    reporter.finish(true);
    Ok(observed)
}
