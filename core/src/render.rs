//! Printable output: YAML of objects, unified diffs of live against intended objects, the
//! human plan. Secret values never reach this output: every Secret goes through
//! [`crate::secret::masked_json`] first, as `kubectl diff` masks them.

use serde_json::{Map, Value};
use similar::{ChangeTag, TextDiff};

use crate::object::{Kind, Object};
use crate::observed::Observed;
use crate::plan::{Action, Op, Step};
pub use crate::secret::masked_json;
use crate::secret::{is_secret, mask};

/// Metadata fields the server fills in; noise in a diff.
const NOISY_METADATA: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
];

/// Removes what the server adds and nobody wrote: noise in a diff.
pub fn clean(value: &Value) -> Value {
    let mut out = value.clone();
    if let Some(obj) = out.as_object_mut() {
        obj.remove("status");
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            for field in NOISY_METADATA {
                meta.remove(*field);
            }
            if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
                if annotations.is_empty() {
                    meta.remove("annotations");
                }
            }
        }
    }
    out
}

/// What the live object looks like after the intended one is applied on top of it: fields the
/// intended object sets win, everything else stays.
pub fn merged(live: &Value, intended: &Value) -> Value {
    match (live, intended) {
        (Value::Object(l), Value::Object(i)) => {
            let mut out: Map<String, Value> = l.clone();
            for (k, v) in i {
                let merged_value = match l.get(k) {
                    Some(lv) => merged(lv, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), merged_value);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(i)) if l.len() == i.len() => {
            Value::Array(l.iter().zip(i).map(|(a, b)| merged(a, b)).collect())
        }
        (_, i) => i.clone(),
    }
}

/// YAML of a JSON value. Serializing a JSON value cannot fail; should it, the JSON is shown.
pub fn to_yaml(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// How to render a preview.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenderOptions {
    /// Lines of context around each change in diffs.
    pub context: usize,
    /// Show Secret values (`--show-secrets`) instead of masking them.
    pub show_secrets: bool,
}

impl Default for RenderOptions {
    fn default() -> Self {
        RenderOptions {
            context: 3,
            show_secrets: false,
        }
    }
}

/// Secret data decoded to text, for `--show-secrets`.
fn reveal(value: &Value) -> Value {
    use base64::Engine;
    let mut out = value.clone();
    if is_secret(value)
        && let Some(map) = out.get_mut("data").and_then(Value::as_object_mut)
    {
        for v in map.values_mut() {
            if let Some(decoded) = v
                .as_str()
                .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
                .and_then(|b| String::from_utf8(b).ok())
            {
                *v = Value::String(decoded);
            }
        }
    }
    out
}

/// What a line of the human preview is. A terminal colours it by this, so the colour follows
/// from how the line was made, never from what its text happens to start with (a data-plane
/// line beginning with `-`, a description containing `▶`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    Plain,
    /// One step of the plan, with its op.
    Step(Op),
    /// `--- live/…` or `+++ intended/…`.
    DiffHeader,
    /// `@@ -a,b +c,d @@`.
    Hunk,
    /// An unchanged line around a change.
    Context,
    Added,
    Removed,
}

/// One line of human output, without its newline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub kind: LineKind,
    pub text: String,
}

impl Line {
    pub fn plain(text: impl Into<String>) -> Line {
        Line {
            kind: LineKind::Plain,
            text: text.into(),
        }
    }
}

/// Each line of `text` as a plain line (an empty text gives none).
pub fn plain_lines(text: &str) -> Vec<Line> {
    text.lines().map(Line::plain).collect()
}

/// The lines as text, each ended by a newline.
pub fn lines_text(lines: &[Line]) -> String {
    let mut out = String::new();
    for line in lines {
        out.push_str(&line.text);
        out.push('\n');
    }
    out
}

/// Unified diff of the live object (absent: created) against the intended one, Secret values
/// masked unless `options.show_secrets`. Empty when they are the same.
pub fn object_diff(live: Option<&Object>, intended: &Object, options: RenderOptions) -> String {
    lines_text(&object_diff_lines(live, intended, options))
}

/// [`object_diff`], line by line.
pub fn object_diff_lines(
    live: Option<&Object>,
    intended: &Object,
    options: RenderOptions,
) -> Vec<Line> {
    let target = intended.object_ref();
    let intended_json = clean(&intended.to_json());
    let show = |v: &Value, other: Option<(&Value, bool)>| {
        if options.show_secrets {
            to_yaml(&reveal(v))
        } else {
            to_yaml(&mask(v, other))
        }
    };
    let (old, new) = match live {
        Some(live) => {
            let live_json = clean(&live.to_json());
            let after = merged(&live_json, &intended_json);
            (
                show(&live_json, Some((&after, true))),
                show(&after, Some((&live_json, false))),
            )
        }
        None => (String::new(), show(&intended_json, None)),
    };
    if old == new {
        return Vec::new();
    }
    let diff = TextDiff::from_lines(&old, &new);
    let mut unified = diff.unified_diff();
    unified.context_radius(options.context);
    let mut lines = Vec::new();
    for hunk in unified.iter_hunks() {
        if lines.is_empty() {
            lines.push(Line {
                kind: LineKind::DiffHeader,
                text: format!("--- live/{target}"),
            });
            lines.push(Line {
                kind: LineKind::DiffHeader,
                text: format!("+++ intended/{target}"),
            });
        }
        lines.push(Line {
            kind: LineKind::Hunk,
            text: hunk.header().to_string(),
        });
        for change in hunk.iter_changes() {
            let kind = match change.tag() {
                ChangeTag::Equal => LineKind::Context,
                ChangeTag::Delete => LineKind::Removed,
                ChangeTag::Insert => LineKind::Added,
            };
            let value = change.to_string_lossy();
            lines.push(Line {
                kind,
                text: format!("{}{}", change.tag(), value.trim_end_matches('\n')),
            });
            // The YAML always ends with a newline; should one side not, say so as diff does.
            if diff.newline_terminated() && change.missing_newline() {
                lines.push(Line::plain("\\ No newline at end of file"));
            }
        }
    }
    lines
}

fn op_symbol(op: Op) -> &'static str {
    match op {
        Op::Create => "+ create   ",
        Op::Update => "~ update   ",
        Op::Unchanged => "= unchanged",
        Op::RunJob => "▶ run Job  ",
        Op::AwaitJob => "▶ await Job",
        Op::Done => "= done     ",
        Op::Read => "← read     ",
        Op::Wait => "… wait     ",
        Op::Scale => "↕ scale    ",
        Op::Restart => "⟳ restart  ",
        Op::Delete => "- delete   ",
    }
}

/// One line per step.
pub fn step_line(step: &Step) -> String {
    format!(
        "{} {:<48} {} ({})",
        op_symbol(step.op),
        step.target.to_string(),
        step.description,
        step.reason
    )
}

/// A step the run found done when its turn came (see [`crate::preview::Numbering`]): nothing was
/// carried out for it.
pub fn done_step_line(step: &Step) -> String {
    format!(
        "{} {:<48} {} (done already when its turn came)",
        op_symbol(Op::Done),
        step.target.to_string(),
        step.description
    )
}

/// Counts for the summary line; a plan that writes also says that the run keeps its record
/// (`operation`): bookkeeping of the loop, not a step, but a write the user should expect.
pub fn summary(steps: &[Step]) -> String {
    let count = |op: Op| steps.iter().filter(|s| s.op == op).count();
    let jobs = count(Op::RunJob) + count(Op::AwaitJob);
    let record = if steps.iter().any(|s| s.action != crate::plan::Action::None) {
        format!(
            " The run records itself in ConfigMap {}<start>-<command>.",
            crate::operation::NAME_PREFIX
        )
    } else {
        String::new()
    };
    format!(
        "Plan: {} to create, {} to update, {} to delete, {} unchanged, {} Job{} to run.{record}",
        count(Op::Create),
        count(Op::Update),
        count(Op::Delete),
        count(Op::Unchanged) + count(Op::Done),
        jobs,
        if jobs == 1 { "" } else { "s" }
    )
}

/// The ordered steps and the summary line.
pub fn steps_text(steps: &[Step]) -> String {
    lines_text(&steps_lines(steps))
}

/// The number each step of a list shows: the steps a run carries out (an action other than
/// none) count from 1 to their total, in order, as the run's progress numbers them
/// (`step 3/40:`, [`crate::preview::Numbering`]); the steps left as they are have none. One
/// rule for every command's dry run and run, so that "step 39" means the same step in both.
pub fn step_numbers(steps: &[Step]) -> Vec<Option<usize>> {
    let mut count = 0;
    steps
        .iter()
        .map(|step| {
            (step.action != Action::None).then(|| {
                count += 1;
                count
            })
        })
        .collect()
}

/// [`steps_text`], line by line: `k/N` before each step carried out, blank before the others.
pub fn steps_lines(steps: &[Step]) -> Vec<Line> {
    let numbers = step_numbers(steps);
    let total = numbers.iter().flatten().count();
    let width = format!("{total}/{total}").len();
    let mut lines: Vec<Line> = steps
        .iter()
        .zip(&numbers)
        .map(|(step, number)| {
            let number = number.map(|k| format!("{k}/{total}")).unwrap_or_default();
            Line {
                kind: LineKind::Step(step.op),
                text: format!("  {number:>width$} {}", step_line(step)),
            }
        })
        .collect();
    lines.push(Line::plain(""));
    lines.push(Line::plain(summary(steps)));
    lines
}

/// A diff per object that changes, each after an empty line.
pub fn diffs_text(steps: &[Step], observed: &Observed, options: RenderOptions) -> String {
    lines_text(&diffs_lines(steps, observed, options))
}

/// [`diffs_text`], line by line.
pub fn diffs_lines(steps: &[Step], observed: &Observed, options: RenderOptions) -> Vec<Line> {
    let mut lines = Vec::new();
    for step in steps {
        let diff = match (&step.action, step.action.object()) {
            (Action::Delete { target, .. }, _) => observed
                .objects
                .get(target)
                .map(|live| deletion_diff_lines(live, options))
                .unwrap_or_default(),
            (_, Some(intended)) => {
                let live = observed.objects.get(&intended.object_ref());
                object_diff_lines(live, &intended, options)
            }
            (_, None) => Vec::new(),
        };
        if !diff.is_empty() {
            lines.push(Line::plain(""));
            lines.extend(diff);
        }
    }
    lines
}

/// The diff of a deletion: every line of the live object removed, Secret values masked unless
/// `options.show_secrets` (as `kubectl diff` shows a deleted object: against `/dev/null`).
pub fn deletion_diff_lines(live: &Object, options: RenderOptions) -> Vec<Line> {
    let target = live.object_ref();
    let live_json = clean(&live.to_json());
    let old = if options.show_secrets {
        to_yaml(&reveal(&live_json))
    } else {
        to_yaml(&mask(&live_json, None))
    };
    let count = old.lines().count();
    let mut lines = vec![
        Line {
            kind: LineKind::DiffHeader,
            text: format!("--- live/{target}"),
        },
        Line {
            kind: LineKind::DiffHeader,
            text: "+++ /dev/null".to_owned(),
        },
        Line {
            kind: LineKind::Hunk,
            text: format!("@@ -1,{count} +0,0 @@"),
        },
    ];
    lines.extend(old.lines().map(|l| Line {
        kind: LineKind::Removed,
        text: format!("-{l}"),
    }));
    lines
}

/// The human preview: ordered steps, the summary, then a diff per object that changes.
pub fn human_preview(steps: &[Step], observed: &Observed, options: RenderOptions) -> String {
    steps_text(steps) + &diffs_text(steps, observed, options)
}

/// The intended objects of the steps that write, as one multi-document YAML stream that
/// `kubectl apply -f -` accepts, the objects deleted listed in a closing comment. Secret data is left out (a masked value would not be valid
/// base64, and applying it would overwrite the real one) unless `show_secrets`.
pub fn manifests_yaml(steps: &[Step], show_secrets: bool) -> String {
    steps
        .iter()
        .filter_map(|s| s.action.object())
        .map(|object| {
            let mut v = clean(&object.to_json());
            let mut note = String::new();
            if is_secret(&v) && !show_secrets {
                let keys: Vec<String> = ["data", "stringData"]
                    .iter()
                    .filter_map(|f| v.get(*f).and_then(Value::as_object))
                    .flat_map(|m| m.keys().cloned())
                    .collect();
                if let Some(obj) = v.as_object_mut() {
                    obj.remove("data");
                    obj.remove("stringData");
                }
                if !keys.is_empty() {
                    note = format!(
                        "# Secret data left out (keys: {}); --show-secrets includes it\n",
                        keys.join(", ")
                    );
                }
            }
            format!("---\n{note}{}", to_yaml(&v))
        })
        .chain(deletions_comment(steps))
        .collect()
}

/// The deletions among `steps` as YAML comments after the manifests: a stream for
/// `kubectl apply -f -` cannot carry a deletion, and a reader must still see it.
fn deletions_comment(steps: &[Step]) -> Option<String> {
    let lines: String = steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::Delete {
                target,
                propagation,
                ..
            } => Some(format!(
                "#   {target} (propagationPolicy {})\n",
                propagation.as_str()
            )),
            _ => None,
        })
        .collect();
    (!lines.is_empty()).then(|| format!("# Deleted, not applied:\n{lines}"))
}

/// One change between two JSON documents, as a JSON pointer. Values are never included, so
/// Secret data cannot leak through it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Change {
    pub op: &'static str,
    pub path: String,
}

fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The paths where `new` differs from `old` (`add`, `remove`, `replace`).
pub fn json_changes(old: &Value, new: &Value) -> Vec<Change> {
    fn walk(old: Option<&Value>, new: Option<&Value>, path: &str, out: &mut Vec<Change>) {
        match (old, new) {
            (Some(Value::Object(o)), Some(Value::Object(n))) => {
                let keys: std::collections::BTreeSet<&String> = o.keys().chain(n.keys()).collect();
                for k in keys {
                    let p = format!("{path}/{}", pointer_escape(k));
                    walk(o.get(k), n.get(k), &p, out);
                }
            }
            (Some(Value::Array(o)), Some(Value::Array(n))) if o.len() == n.len() => {
                for (i, (a, b)) in o.iter().zip(n).enumerate() {
                    walk(Some(a), Some(b), &format!("{path}/{i}"), out);
                }
            }
            (Some(a), Some(b)) if a == b => {}
            (Some(_), Some(_)) => out.push(Change {
                op: "replace",
                path: path.to_owned(),
            }),
            (None, Some(_)) => out.push(Change {
                op: "add",
                path: path.to_owned(),
            }),
            (Some(_), None) => out.push(Change {
                op: "remove",
                path: path.to_owned(),
            }),
            (None, None) => {}
        }
    }
    let mut out = Vec::new();
    walk(Some(old), Some(new), "", &mut out);
    out
}

/// The `apiVersion` of every document the tool prints with `-o json|yaml`: consumers check it,
/// and a change of a documented field's meaning gets a new one.
pub const API_VERSION: &str = "kubectl-uyuni.io/v1alpha1";

/// The plan as structured data (`-o json`): steps with their op, target, reason and the JSON
/// pointers each write changes. Field names are stable (docs/dry-run.md).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanDocument {
    pub api_version: &'static str,
    /// `Plan`.
    pub kind: &'static str,
    pub namespace: String,
    pub summary: PlanSummary,
    pub steps: Vec<PlanStep>,
}

/// The counts of the human summary line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct PlanSummary {
    pub create: usize,
    pub update: usize,
    /// Objects deleted (none in a migration).
    pub delete: usize,
    pub unchanged: usize,
    pub jobs: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct PlanStep {
    pub id: String,
    pub description: String,
    pub op: Op,
    pub target: PlanTarget,
    pub reason: String,
    /// Its number among the steps a run carries out, as the step list and the run's progress
    /// show it ([`step_numbers`]); absent for a step left as it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<usize>,
    /// Paths only, never values (Secret data cannot leak through them).
    pub changes: Vec<Change>,
    /// For a step that waits (a Job, a Deployment, a custom resource): how long, and what it
    /// shows when it fails. Absent for a plain write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<StepWait>,
}

/// A step's wait as the plan fixes it, so a reviewer sees limits before the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepWait {
    /// `null`: no limit (the step's time grows with the data).
    pub timeout_seconds: Option<u64>,
    /// Lines of the failing container's log shown with the error.
    pub log_tail_lines: u32,
    /// How long a pod may stay unschedulable (Deployments and custom resources).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unschedulable_grace_seconds: Option<u64>,
}

fn step_wait(action: &Action) -> Option<StepWait> {
    match action {
        Action::RunJob { wait, .. } | Action::AwaitJob { wait, .. } => Some(StepWait {
            timeout_seconds: wait.timeout_seconds,
            log_tail_lines: wait.log_tail_lines,
            unschedulable_grace_seconds: None,
        }),
        Action::WaitReady { wait, .. }
        | Action::WaitDeployment { wait, .. }
        | Action::Scale { wait, .. } => Some(StepWait {
            timeout_seconds: wait.timeout_seconds,
            log_tail_lines: wait.log_tail_lines,
            unschedulable_grace_seconds: Some(wait.unschedulable_grace_seconds),
        }),
        Action::Delete { wait, .. } => Some(StepWait {
            timeout_seconds: wait.timeout_seconds,
            log_tail_lines: 0,
            unschedulable_grace_seconds: None,
        }),
        Action::Apply(_) | Action::None => None,
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct PlanTarget {
    pub kind: &'static str,
    pub name: String,
}

/// One step as a run would carry it out, in order (a step that acts twice, apply then wait, is
/// there twice).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct ExecutedStep {
    pub id: String,
    pub op: Op,
    /// `kind/name`, as in progress lines.
    pub target: String,
}

/// The plan as a typed document; see [`PlanDocument`].
pub fn plan_document(namespace: &str, steps: &[Step], observed: &Observed) -> PlanDocument {
    let count = |ops: &[Op]| steps.iter().filter(|s| ops.contains(&s.op)).count();
    let numbers = step_numbers(steps);
    let steps = steps
        .iter()
        .zip(numbers)
        .map(|(step, number)| {
            let deleted = matches!(&step.action, Action::Delete { .. }).then(|| {
                vec![Change {
                    op: "remove",
                    path: String::new(),
                }]
            });
            let changes = deleted.or_else(|| {
                step.action.object().map(|intended| {
                    let intended_json = clean(&intended.to_json());
                    let live = observed
                        .objects
                        .get(&intended.object_ref())
                        .map(|l| clean(&l.to_json()));
                    match live {
                        Some(live) => json_changes(&live, &merged(&live, &intended_json)),
                        None => vec![Change {
                            op: "add",
                            path: String::new(),
                        }],
                    }
                })
            });
            PlanStep {
                id: step.id.clone(),
                description: step.description.clone(),
                op: step.op,
                target: PlanTarget {
                    kind: step.target.kind.name(),
                    name: step.target.name.clone(),
                },
                reason: step.reason.clone(),
                number,
                changes: changes.unwrap_or_default(),
                wait: step_wait(&step.action),
            }
        })
        .collect();
    PlanDocument {
        api_version: API_VERSION,
        kind: "Plan",
        namespace: namespace.to_owned(),
        summary: PlanSummary {
            create: count(&[Op::Create]),
            update: count(&[Op::Update]),
            delete: count(&[Op::Delete]),
            unchanged: count(&[Op::Unchanged, Op::Done]),
            jobs: count(&[Op::RunJob, Op::AwaitJob]),
        },
        steps,
    }
}

/// The order a run carries the steps out in; see [`ExecutedStep`].
pub fn execution(executed: &[Step]) -> Vec<ExecutedStep> {
    executed
        .iter()
        .map(|s| ExecutedStep {
            id: s.id.clone(),
            op: s.op,
            target: s.target.to_string(),
        })
        .collect()
}

/// [`plan_document`] as a JSON value.
pub fn plan_json(namespace: &str, steps: &[Step], observed: &Observed) -> Value {
    // Strings, numbers and enums only: serializing cannot fail.
    serde_json::to_value(plan_document(namespace, steps, observed)).unwrap_or(Value::Null)
}

/// Kinds whose objects may hold secrets.
pub fn holds_secrets(kind: Kind) -> bool {
    kind == Kind::Secret
}
