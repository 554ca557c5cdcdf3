//! The dry-run preview: plan, simulate the next step, plan again, until nothing is left to do.
//! Pure: the same mechanism for every command that writes.

use serde::Serialize;

use crate::observed::Observed;
use crate::params::MigrateParams;
use crate::plan::{Plan, PlanError, Planner, Step};
use crate::simulate::simulate_in_place;

/// The whole operation as a dry run would show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preview {
    /// Every step, in order: the ones that would be carried out as planned when their turn
    /// comes, the others as no-ops.
    pub steps: Vec<Step>,
    /// The steps that would be carried out, in execution order.
    pub executed: Vec<Step>,
    /// The state at the end, as simulated.
    pub end: Observed,
    /// The plan of the end state (nothing left to do).
    pub final_plan: Plan,
}

/// Upper bound of steps in one operation; a plan that does not converge within it is a bug.
pub const MAX_STEPS: usize = 500;

/// Plans, simulates and plans again until nothing is left. Pure.
pub fn preview<P: Planner>(params: &P, observed: &Observed) -> Result<Preview, PlanError> {
    let mut state = observed.clone();
    let mut executed = Vec::new();
    let ns = params.server().namespace.clone();
    loop {
        let current = params.plan(&state)?;
        let Some(step) = current.next_step().cloned() else {
            let steps = listing(&executed, &current.steps);
            return Ok(Preview {
                steps,
                executed,
                end: state,
                final_plan: current,
            });
        };
        simulate_in_place(&mut state, &ns, &step);
        executed.push(step);
        if executed.len() > MAX_STEPS {
            // Unreachable for a correct planner (a property test checks it); stop rather than spin.
            let steps = executed.clone();
            return Ok(Preview {
                steps,
                executed,
                end: state,
                final_plan: current,
            });
        }
    }
}

/// Every step carried out, in the order carried out, with the final plan's steps that were not
/// (left as they are) between them where the plan has them. A step carried out that the final
/// plan no longer holds (an upgrade's stop of a Deployment, which the started Deployment
/// replaces; a deletion) keeps its place: the list numbers exactly the steps a run carries
/// out, in its order ([`crate::render::step_numbers`], [`Numbering`]).
fn listing(executed: &[Step], end: &[Step]) -> Vec<Step> {
    let mut out = Vec::with_capacity(executed.len() + end.len());
    let mut next = 0;
    for step in end {
        match executed.iter().rposition(|e| e.id == step.id) {
            Some(last) if last >= next => {
                out.extend_from_slice(&executed[next..=last]);
                next = last + 1;
            }
            Some(_) => {}
            None => out.push(step.clone()),
        }
    }
    out.extend_from_slice(&executed[next..]);
    out
}

/// The preview's steps with the deletions in front: a deleted object is absent from the final
/// plan, which [`Preview::steps`] follows, so a command that deletes (`uninstall`) shows its
/// executed steps, then what its final plan keeps.
pub fn steps_with_deletions(preview: &Preview) -> Vec<Step> {
    let mut steps = preview.executed.clone();
    steps.extend(
        preview
            .steps
            .iter()
            .filter(|s| !preview.executed.iter().any(|e| e.id == s.id))
            .cloned(),
    );
    steps
}

/// The steps a run from `observed` would carry out, as far as they can be planned now: what
/// the migrate loop shows as its step count and reviews the permissions of
/// ([`crate::access::needed_by`]), from one planning pass. A missing CA password does not stop
/// it: the run asks for it when the plan needs it, and which steps follow does not depend on
/// its value, so the rest is planned with a stand-in (as the dry run's preview is). Another
/// planning error ends the list with the steps before it.
pub fn foreseen<P: Planner>(params: &P, observed: &Observed) -> Vec<Step> {
    let mut state = observed.clone();
    let mut out = Vec::new();
    let mut stand_in: Option<P> = None;
    let ns = params.server().namespace.clone();
    while out.len() < MAX_STEPS {
        let current = match stand_in.as_ref().unwrap_or(params).plan(&state) {
            Ok(current) => current,
            Err(e) if stand_in.is_none() => match params.with_stand_in(&e) {
                Some(with) => {
                    stand_in = Some(with);
                    continue;
                }
                None => break,
            },
            Err(_) => break,
        };
        let Some(step) = current.next_step().cloned() else {
            break;
        };
        simulate_in_place(&mut state, &ns, &step);
        out.push(step);
    }
    out
}

/// The step numbers a run shows, the same as its dry run's: the preview of the run at its start
/// ([`foreseen`], the steps the dry run's list numbers from 1 to N) fixes them, and each step
/// carried out takes its number there. A foreseen step the run finds done when its turn comes
/// (a Deployment that became ready while the run waited for another) is reported under its
/// number as done, and so are those left at the end, so that a finished run counts to N/N as
/// its dry run did. A step the preview could not foresee (a plan that changed with what the
/// run found) takes the next number, and the total grows by one.
#[derive(Debug, Clone, PartialEq)]
pub struct Numbering {
    foreseen: Vec<Step>,
    /// Index in `foreseen` of the next step to come.
    next: usize,
    /// Steps carried out that `foreseen` did not hold.
    extra: usize,
}

/// The number of a step about to be carried out, out of the run's total, and the foreseen
/// steps before it that the run found done (each with its number).
#[derive(Debug, Clone, PartialEq)]
pub struct Numbered {
    pub position: usize,
    pub total: usize,
    pub done_before: Vec<(usize, Step)>,
}

impl Numbering {
    pub fn new(foreseen: Vec<Step>) -> Numbering {
        Numbering {
            foreseen,
            next: 0,
            extra: 0,
        }
    }

    /// The steps foreseen at the run's start.
    pub fn foreseen(&self) -> Vec<Step> {
        self.foreseen.clone()
    }

    /// `step`, about to be carried out; `remaining`: the steps of its plan still to carry out,
    /// itself included (the total never says fewer than the plan has left).
    pub fn step(&mut self, step: &Step, remaining: usize) -> Numbered {
        let found = self.foreseen[self.next..]
            .iter()
            .position(|f| f.id == step.id);
        let mut done_before = Vec::new();
        match found {
            Some(offset) => {
                for i in self.next..self.next + offset {
                    done_before.push((i + 1 + self.extra, self.foreseen[i].clone()));
                }
                self.next += offset + 1;
            }
            None => self.extra += 1,
        }
        let position = self.next + self.extra;
        let total = (self.foreseen.len() + self.extra).max(position + remaining.max(1) - 1);
        Numbered {
            position,
            total,
            done_before,
        }
    }

    /// At the end of a finished run: the foreseen steps it never had to carry out, each with its
    /// number, and the total.
    pub fn finish(&mut self) -> (Vec<(usize, Step)>, usize) {
        let left = (self.next..self.foreseen.len())
            .map(|i| (i + 1 + self.extra, self.foreseen[i].clone()))
            .collect();
        self.next = self.foreseen.len();
        (left, self.foreseen.len() + self.extra)
    }
}

/// What a dry run previews on a state a real run would refuse to start from, assuming the
/// missing prerequisite is there: the refusal, and the state with the assumption made.
#[derive(Debug, Clone, PartialEq)]
pub struct Assumption {
    /// Why a real run would stop.
    pub refused: PlanError,
    /// What the preview below assumes instead, in words.
    pub assumed: &'static str,
    /// The observed state as the preview assumed it.
    pub observed: Observed,
}

/// The preview a dry run shows. Without cert-manager (and without certificate files) a real run
/// stops before any write; the preview then shows the whole operation as it would run once
/// cert-manager is installed, so that it can be reviewed first, and says so. Likewise without
/// the CA key's password where the source's key is known to need it: a real run asks or
/// refuses before the source is stopped; the preview assumes it given.
pub fn dry_run_preview<P: Planner>(
    params: &P,
    observed: &Observed,
) -> Result<(Preview, Option<Assumption>), PlanError> {
    match preview(params, observed) {
        Err(refused @ PlanError::CertManagerMissing) => {
            let mut assumed = observed.clone();
            assumed.serve(crate::object::CustomKind::Issuer);
            assumed.serve(crate::object::CustomKind::Certificate);
            let shown = preview(params, &assumed)?;
            Ok((
                shown,
                Some(Assumption {
                    refused,
                    assumed: "The preview below assumes cert-manager is installed; a real run now would stop before writing anything.",
                    observed: assumed,
                }),
            ))
        }
        Err(refused) if params.with_stand_in(&refused).is_some() => {
            let Some(with) = params.with_stand_in(&refused) else {
                return Err(refused);
            };
            let shown = preview(&with, observed)?;
            let assumed = if refused == PlanError::CaPasswordNeeded {
                "The preview below assumes the password is given; a real run asks for it on a terminal, or refuses without one, before the source's services are stopped."
            } else {
                "The preview below assumes the password is given; a real run asks for it on a terminal, or refuses without one, before writing anything."
            };
            Ok((
                shown,
                Some(Assumption {
                    refused,
                    assumed,
                    observed: observed.clone(),
                }),
            ))
        }
        other => other.map(|p| (p, None)),
    }
}

/// Where the source goes down, how long for, and what the run needs: decided here so that the
/// dry run only prints it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Safety {
    /// The step that stops the source's services, and its position among the steps carried
    /// out (from 1). `None`: this run does not stop them.
    pub outage_step: Option<String>,
    pub outage_position: Option<usize>,
    pub steps: usize,
    /// How long the last copy made while the source served took, and its Job: the expected
    /// length of the final copy (at most that much changed since).
    pub expected_window_seconds: Option<i64>,
    pub window_job: Option<String>,
    /// What the last `--prepare` measured of the final copy ([`crate::outage::expected`]), when
    /// it did: preferred to the last copy's length.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected_window: Option<crate::outage::ExpectedWindow>,
    pub prepare: bool,
    pub inputs: Vec<crate::plan::phase::Input>,
}

pub fn safety(params: &MigrateParams, observed: &Observed, preview: &Preview) -> Safety {
    let outage = preview
        .executed
        .iter()
        .position(|s| s.stops_source())
        .map(|i| (i + 1, preview.executed[i].id.clone()));
    let window = crate::plan::phase::expected_window(observed);
    Safety {
        outage_step: outage.as_ref().map(|(_, id)| id.clone()),
        outage_position: outage.map(|(i, _)| i),
        steps: preview.executed.len(),
        expected_window_seconds: window.as_ref().map(|(_, s)| *s),
        window_job: window.map(|(job, _)| job),
        expected_window: crate::outage::expected(observed),
        prepare: params.prepare,
        inputs: crate::plan::phase::inputs(params, observed),
    }
}

impl Safety {
    /// The dry run's "Outage and inputs" section.
    pub fn render(&self, source: &str) -> String {
        use crate::plan::phase::Need;
        let mut out = String::from("Outage and inputs:\n");
        match (&self.outage_step, self.outage_position) {
            (Some(id), Some(at)) => {
                out.push_str(&format!(
                    "  The services of {source} stop at step {at} of {} ({id}, the final copy). A real run asks first on a terminal; without one it needs --yes.\n",
                    self.steps
                ));
                let measured = self
                    .expected_window
                    .as_ref()
                    .and_then(|w| w.copy_seconds.map(|c| (w, c)));
                if let Some((w, copy)) = measured {
                    out.push_str(&format!(
                        "  Expected outage: the final copy and the data sync's last steps, about {} ({} left after the copy Job {} made while {source} served, a scan of every volume included), then the database steps and the server's start.\n",
                        crate::outage::duration_text(copy + w.after_copy_seconds),
                        crate::dataplane::human_bytes(w.delta_bytes),
                        w.sync_job,
                    ));
                } else {
                    match (self.expected_window_seconds, &self.window_job) {
                        (Some(s), Some(job)) => out.push_str(&format!(
                            "  Expected outage: the final copy, about {} or less (the last copy while {source} served, Job {job}, took that long), then the database steps and the server's start.\n",
                            crate::outage::duration_text(s)
                        )),
                        _ => out.push_str(&format!(
                            "  Expected outage: unknown until a copy has run while {source} serves (`--prepare`, or the one this run makes first); the final copy then moves only what changed since.\n"
                        )),
                    }
                }
            }
            _ if self.prepare => out.push_str(&format!(
                "  The services of {source} keep running: --prepare never stops them.\n"
            )),
            _ => out.push_str(&format!(
                "  The services of {source} are not stopped by this run.\n"
            )),
        }
        out.push_str("  Inputs:\n");
        let mut missing = Vec::new();
        for input in &self.inputs {
            let status = match &input.need {
                Need::Given => "given".to_owned(),
                Need::Stored(where_) => format!("stored ({where_})"),
                Need::NotNeeded(why) => format!("not needed: {why}"),
                Need::Unknown => format!(
                    "known from the copy made while {source} serves; checked, and asked for if needed, before its services stop ({})",
                    input.how
                ),
                Need::Missing => {
                    missing.push(input.name);
                    format!("MISSING: give {}", input.how)
                }
                Need::Allowed(what) => format!("allowed ({what})"),
                Need::Denied(what) => {
                    missing.push(input.name);
                    format!("MISSING: {what}; ask for {}", input.how)
                }
            };
            out.push_str(&format!("    {:<20} {status}\n", input.name));
        }
        if !missing.is_empty() {
            out.push_str(&format!(
                "  A real run refuses before stopping anything until these are given: {}.\n",
                missing.join(", ")
            ));
        }
        out
    }
}
