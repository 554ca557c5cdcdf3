//! Printable output: YAML of objects, unified diffs of live against intended objects, the
//! human plan. Secret values never reach this output: every Secret goes through
//! [`masked_json`] first, as `kubectl diff` masks them.

use serde_json::{Map, Value};
use similar::TextDiff;

use crate::object::{Kind, Object};
use crate::observed::Observed;
use crate::plan::{Action, Op, Step};

/// Metadata fields the server fills in; noise in a diff.
const NOISY_METADATA: &[&str] = &[
    "managedFields",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "selfLink",
];

fn is_secret(value: &Value) -> bool {
    value.get("kind").and_then(Value::as_str) == Some("Secret")
}

/// A copy of `value` with Secret data replaced by `***`. With `other` (the object it is compared
/// with), values that differ are marked `*** (before)` / `*** (after)`; `before` says which side
/// `value` is.
fn mask(value: &Value, other: Option<(&Value, bool)>) -> Value {
    if !is_secret(value) {
        return value.clone();
    }
    let mut out = value.clone();
    for field in ["data", "stringData"] {
        let other_map = other
            .and_then(|(o, _)| o.get(field))
            .and_then(Value::as_object);
        if let Some(map) = out.get_mut(field).and_then(Value::as_object_mut) {
            for (key, v) in map.iter_mut() {
                let marker = match other {
                    Some((_, before)) => {
                        let same = other_map.and_then(|m| m.get(key)) == Some(v);
                        match (same, before) {
                            (true, _) => "***",
                            (false, true) => "*** (before)",
                            (false, false) => "*** (after)",
                        }
                    }
                    None => "***",
                };
                *v = Value::String(marker.to_owned());
            }
        }
    }
    out
}

/// `value` with Secret data masked; `other` marks which values differ from it.
pub fn masked_json(value: &Value, other: Option<&Value>) -> Value {
    mask(value, other.map(|o| (o, false)))
}

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

/// Unified diff of the live object (absent: created) against the intended one, Secret values
/// masked, `context` lines around each change. Empty when they are the same.
pub fn object_diff(live: Option<&Object>, intended: &Object, context: usize) -> String {
    let target = intended.object_ref();
    let intended_json = clean(&intended.to_json());
    let (old, new) = match live {
        Some(live) => {
            let live_json = clean(&live.to_json());
            let after = merged(&live_json, &intended_json);
            (
                to_yaml(&mask(&live_json, Some((&after, true)))),
                to_yaml(&mask(&after, Some((&live_json, false)))),
            )
        }
        None => (String::new(), to_yaml(&mask(&intended_json, None))),
    };
    if old == new {
        return String::new();
    }
    TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(context)
        .header(&format!("live/{target}"), &format!("intended/{target}"))
        .to_string()
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

/// Counts for the summary line.
pub fn summary(steps: &[Step]) -> String {
    let count = |op: Op| steps.iter().filter(|s| s.op == op).count();
    let jobs = count(Op::RunJob) + count(Op::AwaitJob);
    format!(
        "Plan: {} to create, {} to update, 0 to delete, {} unchanged, {} Job{} to run.",
        count(Op::Create),
        count(Op::Update),
        count(Op::Unchanged) + count(Op::Done),
        jobs,
        if jobs == 1 { "" } else { "s" }
    )
}

/// The human preview: ordered steps, the summary, then a diff per object that changes.
pub fn human_preview(steps: &[Step], observed: &Observed, context: usize) -> String {
    let mut out = String::new();
    for (i, step) in steps.iter().enumerate() {
        out.push_str(&format!("{:>3}. {}\n", i + 1, step_line(step)));
    }
    out.push('\n');
    out.push_str(&summary(steps));
    out.push('\n');
    for step in steps {
        let intended: Option<Object> = match &step.action {
            Action::Apply(object) => Some((**object).clone()),
            Action::RunJob { job, .. } => Some(Object::Job((**job).clone())),
            Action::AwaitJob { .. } | Action::None => None,
        };
        if let Some(intended) = intended {
            let live = observed.objects.get(&intended.object_ref());
            let diff = object_diff(live, &intended, context);
            if !diff.is_empty() {
                out.push('\n');
                out.push_str(&diff);
            }
        }
    }
    out
}

/// The intended objects of the steps that write, as one multi-document YAML stream that
/// `kubectl apply -f -` accepts. Secret values masked.
pub fn manifests_yaml(steps: &[Step]) -> String {
    steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::Apply(o) => Some(o.to_json()),
            Action::RunJob { job, .. } => Some(Object::Job((**job).clone()).to_json()),
            _ => None,
        })
        .map(|v| format!("---\n{}", to_yaml(&mask(&v, None))))
        .collect()
}

/// Kinds whose objects may hold secrets.
pub fn holds_secrets(kind: Kind) -> bool {
    kind == Kind::Secret
}
