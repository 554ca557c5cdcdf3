use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use similar::TextDiff;
use uyuni_core::object::{Kind, Object, ObjectRef};
use uyuni_core::observed::Observed;
use uyuni_core::plan::{Action, Op, Step};
use uyuni_core::render::{
    Line, LineKind, RenderOptions, clean, lines_text, object_diff, object_diff_lines, plan_json,
    step_line, steps_lines, steps_text, to_yaml,
};
use uyuni_core::secret::mask;

fn config_map(value: &str) -> Object {
    Object::ConfigMap(ConfigMap {
        metadata: ObjectMeta {
            name: Some("ssh".into()),
            ..Default::default()
        },
        data: Some([("known_hosts".to_owned(), value.to_owned())].into()),
        ..Default::default()
    })
}

#[test]
fn diff_lines_are_typed_by_how_they_were_made() {
    // A value that starts with what a diff marker or a step symbol looks like.
    let live = config_map("- old ▶");
    let intended = config_map("+ new . + create");
    let lines = object_diff_lines(Some(&live), &intended, RenderOptions::default());
    let kinds: Vec<LineKind> = lines.iter().map(|l| l.kind).collect();
    assert_eq!(
        kinds[..3],
        [LineKind::DiffHeader, LineKind::DiffHeader, LineKind::Hunk]
    );
    let changed: Vec<LineKind> = lines
        .iter()
        .filter(|l| l.text.contains("known_hosts"))
        .map(|l| l.kind)
        .collect();
    assert_eq!(changed, [LineKind::Removed, LineKind::Added], "{lines:?}");
    assert!(
        lines
            .iter()
            .filter(|l| l.kind == LineKind::Context)
            .all(|l| l.text.starts_with(' '))
    );
    assert!(object_diff_lines(Some(&live), &live, RenderOptions::default()).is_empty());
}

#[test]
fn the_typed_lines_print_as_the_unified_diff_they_stand_for() {
    let live = config_map("a\nb\nc\n");
    let intended = config_map("a\nB\nc\nd\n");
    let options = RenderOptions::default();
    let show = |o: &Object| to_yaml(&mask(&clean(&o.to_json()), None));
    let target = intended.object_ref();
    let (old, new) = (show(&live), show(&intended));
    let expected = TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(options.context)
        .header(&format!("live/{target}"), &format!("intended/{target}"))
        .to_string();
    assert_eq!(object_diff(Some(&live), &intended, options), expected);
    assert!(object_diff(None, &intended, options).starts_with("--- live/"));
}

#[test]
fn a_waiting_step_shows_its_wait_and_a_write_none() {
    use uyuni_core::plan::{DeploymentWait, UNSCHEDULABLE_GRACE_SECONDS};
    let step = |action: Action| Step {
        id: "wait-db".into(),
        description: "wait until db is ready".into(),
        op: Op::Wait,
        target: ObjectRef::new(Kind::Deployment, "db"),
        reason: "not ready".into(),
        action,
    };
    let wait = DeploymentWait {
        timeout_seconds: None,
        unschedulable_grace_seconds: UNSCHEDULABLE_GRACE_SECONDS,
        log_tail_lines: 20,
    };
    let steps = [
        step(Action::WaitDeployment {
            name: "db".into(),
            wait,
        }),
        step(Action::None),
    ];
    let json = plan_json("uyuni", &steps, &Observed::default());
    assert_eq!(
        json["steps"][0]["wait"],
        serde_json::json!({
            "timeoutSeconds": null,
            "logTailLines": 20,
            "unschedulableGraceSeconds": UNSCHEDULABLE_GRACE_SECONDS,
        })
    );
    assert!(json["steps"][1].get("wait").is_none());
}

#[test]
fn step_lines_carry_their_op_and_the_summary_is_plain() {
    let step = Step {
        id: "ssh-config".into(),
        description: "SSH configuration".into(),
        op: Op::Update,
        target: ObjectRef::new(Kind::ConfigMap, "ssh"),
        reason: "known_hosts changed".into(),
        action: Action::None,
    };
    let lines = steps_lines(std::slice::from_ref(&step));
    assert_eq!(lines[0].kind, LineKind::Step(Op::Update));
    assert_eq!(lines[0].text, format!("  1. {}", step_line(&step)));
    assert_eq!(lines[1], Line::plain(""));
    assert_eq!(lines[2].kind, LineKind::Plain);
    assert_eq!(lines_text(&lines), steps_text(&[step]));
}
