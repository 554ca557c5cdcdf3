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
    // Left as it is (no action): no number, the column kept.
    assert_eq!(lines[0].text, format!("      {}", step_line(&step)));
    assert_eq!(lines[1], Line::plain(""));
    assert_eq!(lines[2].kind, LineKind::Plain);
    assert_eq!(lines_text(&lines), steps_text(&[step]));
}

/// A Secret the tool may delete (a certificate's), with data that must not be printed.
fn deleted_secret_state() -> (Observed, Step) {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;
    let mut observed = Observed::default();
    observed.insert(Object::Secret(Secret {
        metadata: ObjectMeta {
            name: Some("uyuni-cert".into()),
            ..Default::default()
        },
        data: Some([("tls.key".to_owned(), ByteString(b"private-key".to_vec()))].into()),
        ..Default::default()
    }));
    let step = uyuni_core::plan::delete_step(
        &observed,
        ObjectRef::new(Kind::Secret, "uyuni-cert"),
        "the server's certificate".into(),
    )
    .expect("allowed");
    (observed, step)
}

#[test]
fn a_deletion_shows_as_the_live_object_removed_with_secrets_masked() {
    use uyuni_core::render::{diffs_lines, human_preview};
    let (observed, step) = deleted_secret_state();
    let steps = [step];
    let text = human_preview(&steps, &observed, RenderOptions::default());
    assert!(text.contains("- delete    secret/uyuni-cert"), "{text}");
    assert!(
        text.contains("Plan: 0 to create, 0 to update, 1 to delete"),
        "{text}"
    );
    assert!(
        text.contains("--- live/secret/uyuni-cert\n+++ /dev/null\n"),
        "{text}"
    );
    assert!(text.contains("-  tls.key: \"***\"\n"), "{text}");
    assert!(!text.contains("cHJpdmF0ZS1rZXk"), "{text}");
    assert!(!text.contains("private-key"), "{text}");
    let lines = diffs_lines(&steps, &observed, RenderOptions::default());
    assert!(lines.iter().any(|l| l.text == "-kind: Secret"), "{lines:?}");
    assert!(
        lines
            .iter()
            .filter(|l| l.text.starts_with('-') && !l.text.starts_with("---"))
            .all(|l| l.kind == LineKind::Removed)
    );
    // Gone already: nothing to show.
    assert!(diffs_lines(&steps, &Observed::default(), RenderOptions::default()).is_empty());
    // --show-secrets shows the value it removes.
    let shown = RenderOptions {
        show_secrets: true,
        ..RenderOptions::default()
    };
    assert!(human_preview(&steps, &observed, shown).contains("private-key"));
}

#[test]
fn a_deletion_in_the_plan_document_and_the_manifests() {
    use uyuni_core::render::manifests_yaml;
    let (observed, step) = deleted_secret_state();
    let steps = [step];
    let json = plan_json("uyuni", &steps, &observed);
    assert_eq!(json["summary"]["delete"], 1);
    assert_eq!(json["steps"][0]["op"], "delete");
    assert_eq!(
        json["steps"][0]["changes"],
        serde_json::json!([{"op": "remove", "path": ""}])
    );
    assert_eq!(json["steps"][0]["wait"]["timeoutSeconds"], 60);
    assert!(!json.to_string().contains("cHJpdmF0ZS1rZXk"));
    let yaml = manifests_yaml(&steps, false);
    assert_eq!(
        yaml,
        "# Deleted, not applied:\n#   secret/uyuni-cert (propagationPolicy Background)\n"
    );
}
