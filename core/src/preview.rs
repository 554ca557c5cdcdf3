//! The dry-run preview: plan, simulate the next step, plan again, until nothing is left to do.
//! Pure: the same mechanism for every command that writes.

use serde::Serialize;

use crate::observed::Observed;
use crate::params::MigrateParams;
use crate::plan::{Plan, PlanError, Step, plan};
use crate::simulate::simulate;

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
pub fn preview(params: &MigrateParams, observed: &Observed) -> Result<Preview, PlanError> {
    let mut state = observed.clone();
    let mut executed = Vec::new();
    loop {
        let current = plan(params, &state)?;
        let Some(step) = current.next_step().cloned() else {
            let steps = current
                .steps
                .iter()
                .map(|s| {
                    executed
                        .iter()
                        .find(|e: &&Step| e.id == s.id)
                        .cloned()
                        .unwrap_or_else(|| s.clone())
                })
                .collect();
            return Ok(Preview {
                steps,
                executed,
                end: state,
                final_plan: current,
            });
        };
        state = simulate(&state, &params.namespace, &step);
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

/// What a dry run previews on a state a real run would refuse to start from, assuming the
/// missing prerequisite is there: the refusal, and the state with the assumption made.
#[derive(Debug, Clone, PartialEq)]
pub struct Assumption {
    /// Why a real run would stop before writing anything.
    pub refused: PlanError,
    /// The observed state as the preview assumed it.
    pub observed: Observed,
}

/// The preview a dry run shows. Without cert-manager (and without certificate files) a real run
/// stops before any write; the preview then shows the whole operation as it would run once
/// cert-manager is installed, so that it can be reviewed first, and says so.
pub fn dry_run_preview(
    params: &MigrateParams,
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
                    observed: assumed,
                }),
            ))
        }
        other => other.map(|p| (p, None)),
    }
}
