//! Golden plans and previews for fixtures: rewrite with `UPDATE_GOLDEN=1 cargo test`.
//!
//! One directory per scenario under `testdata/golden/`: `steps.txt` (the step list, what a
//! reviewer reads first), `plan.json` (the structure), one YAML file per object, Job scripts
//! abbreviated to their hash (see `uyuni_testdata::golden`).

use crate::common;

use serde_json::Value;
use uyuni_core::{plan, preview, render};
use uyuni_testdata::golden::{GoldenDir, check_golden, extract_objects};

fn pretty(json: &Value) -> String {
    format!("{}\n", serde_json::to_string_pretty(json).expect("json"))
}

#[test]
fn plan_for_an_empty_cluster() {
    let params = common::params();
    let plan = plan(&params, &common::empty_cluster()).expect("plan");
    let mut json = serde_json::to_value(&plan).expect("json");
    let objects = extract_objects(&mut json);
    let mut golden = GoldenDir::new("plan-empty-cluster");
    golden.file("steps.txt", render::steps_text(&plan.steps));
    golden.file("plan.json", pretty(&json));
    for object in &objects {
        golden.object(object, render::to_yaml);
    }
    golden.check();
}

/// The documents of a `-o yaml` stream, each with the comment lines before it.
fn yaml_documents(stream: &str) -> Vec<(String, String)> {
    let body = stream
        .strip_prefix("---\n")
        .expect("the stream starts with a document");
    body.split("\n---\n")
        .map(|doc| {
            let mut doc = doc.to_owned();
            if !doc.ends_with('\n') {
                doc.push('\n');
            }
            let comment_end = doc
                .match_indices('\n')
                .map(|(i, _)| i + 1)
                .find(|&i| !doc[i..].starts_with('#'))
                .filter(|_| doc.starts_with('#'))
                .unwrap_or(0);
            let (note, yaml) = doc.split_at(comment_end);
            (note.to_owned(), yaml.to_owned())
        })
        .collect()
}

/// The objects a human preview shows as created, with the target its diff header names.
fn created_in_human_preview(diffs: &str) -> Vec<(String, Value)> {
    diffs
        .split("\n--- live/")
        .skip(1)
        .map(|hunk| {
            let (target, rest) = hunk.split_once('\n').expect("diff header");
            let mut lines = rest.lines();
            assert_eq!(
                lines.next(),
                Some(format!("+++ intended/{target}").as_str())
            );
            assert!(
                lines.next().is_some_and(|l| l.starts_with("@@ -0,0 +1,")),
                "{target} is created"
            );
            let yaml: String = lines
                .map(|l| l.strip_prefix('+').expect("only added lines").to_owned() + "\n")
                .collect();
            (
                target.to_owned(),
                serde_saphyr::from_str(&yaml).expect("YAML object"),
            )
        })
        .collect()
}

#[test]
fn preview_for_an_empty_cluster() {
    let params = common::params();
    let observed = common::empty_cluster();
    let preview = preview(&params, &observed).expect("preview");
    let mut golden = GoldenDir::new("preview-empty-cluster");
    let steps = render::steps_text(&preview.steps);
    golden.file("steps.txt", steps.clone());
    // `-o json`
    let json = render::plan_json(&params.namespace, &preview.steps, &observed);
    golden.file("plan.json", pretty(&json));
    // `-o yaml`: one file per document. A document reads back as itself, so its file (the
    // same renderer, scripts abbreviated) is what the stream holds.
    let mut documents = Vec::new();
    for (note, yaml) in yaml_documents(&render::manifests_yaml(&preview.steps, false)) {
        let value: Value = serde_saphyr::from_str(&yaml).expect("YAML document");
        assert_eq!(render::to_yaml(&value), yaml, "reads back as itself");
        golden.object(&value, |v| note.clone() + &render::to_yaml(v));
        documents.push((note, value));
    }
    // The human preview: the step list, then a creation diff of each of those objects, Secret
    // values masked where `-o yaml` leaves them out.
    let human = render::human_preview(&preview.steps, &observed, render::RenderOptions::default());
    let diffs = human
        .strip_prefix(&steps)
        .expect("the step list comes first");
    let created = created_in_human_preview(diffs);
    assert_eq!(created.len(), documents.len());
    for ((target, mut shown), (note, document)) in created.into_iter().zip(documents) {
        let kind = document["kind"]
            .as_str()
            .expect("kind")
            .to_ascii_lowercase();
        assert_eq!(
            target,
            format!(
                "{kind}/{}",
                document["metadata"]["name"].as_str().expect("name")
            )
        );
        if kind == "secret" {
            let data = shown
                .as_object_mut()
                .and_then(|o| o.remove("data"))
                .unwrap_or_default();
            let data = data.as_object().cloned().unwrap_or_default();
            assert!(data.values().all(|v| v == "***"), "{target}: {data:?}");
            let keys: Vec<&str> = data.keys().map(String::as_str).collect();
            assert!(
                note.contains(&format!("(keys: {})", keys.join(", "))) || keys.is_empty(),
                "{target}: {note}"
            );
        }
        assert_eq!(shown, document, "{target}");
    }
    golden.check();
}

#[test]
fn plan_after_a_finished_migration_does_nothing() {
    let params = common::params();
    let observed = common::after_migration(&params);
    let plan = plan(&params, &observed).expect("plan");
    assert!(plan.is_done(), "{:#?}", plan.next_step());
    let lines: String = plan
        .steps
        .iter()
        .map(|s| render::step_line(s) + "\n")
        .collect();
    check_golden("plan-after-migration", "steps.txt", &lines);
}

#[test]
fn json_after_a_finished_migration_lists_no_changes() {
    let params = common::params();
    let observed = common::after_migration(&params);
    let preview = preview(&params, &observed).expect("preview");
    assert!(preview.executed.is_empty());
    let json = render::plan_json(&params.namespace, &preview.steps, &observed);
    assert_eq!(json["summary"]["create"], 0);
    assert_eq!(json["summary"]["jobs"], 0);
    let mut golden = GoldenDir::new("preview-after-migration");
    golden.file("steps.txt", render::steps_text(&preview.steps));
    golden.file("plan.json", pretty(&json));
    golden.check();
}

#[test]
fn an_update_is_shown_as_a_diff_and_as_json_pointers() {
    let params = common::params();
    let mut observed = common::after_migration(&params);
    // The known_hosts in the cluster is outdated; the flags bring a new one.
    if let Some(uyuni_core::Object::ConfigMap(cm)) = observed.objects.get_mut(
        &uyuni_core::ObjectRef::new(uyuni_core::Kind::ConfigMap, "uyuni-migration-ssh"),
    ) {
        cm.data.get_or_insert_default().insert(
            "known_hosts".into(),
            "uyuni.example.com ssh-rsa AAAAold\n".into(),
        );
    }
    let preview = preview(&params, &observed).expect("preview");
    let human = render::human_preview(&preview.steps, &observed, render::RenderOptions::default());
    check_golden("preview-known-hosts-update", "preview.txt", &human);
    let json = render::plan_json(&params.namespace, &preview.steps, &observed);
    let step = json["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["id"] == "ssh-config")
        .expect("ssh-config step");
    assert_eq!(step["op"], "update");
    assert_eq!(
        step["changes"],
        serde_json::json!([{"op": "replace", "path": "/data/known_hosts"}])
    );
}

#[test]
fn a_changed_secret_is_marked_before_and_after_without_values() {
    let params = common::params();
    let mut observed = common::after_migration(&params);
    let other = uyuni_core::builders::migration::ssh_key_secret(
        common::NAMESPACE,
        &uyuni_core::params::SshKeyPair {
            private: uyuni_core::secret::SecretString::new(common::private_key("OLDKEYMARKER")),
            public: common::PUBLIC_KEY.into(),
        },
    );
    observed.insert(uyuni_core::Object::Secret(other));
    let preview = preview(&params, &observed).expect("preview");
    let human = render::human_preview(&preview.steps, &observed, render::RenderOptions::default());
    assert!(human.contains("-  key: \"*** (before)\""), "{human}");
    assert!(human.contains("+  key: \"*** (after)\""), "{human}");
    assert!(human.contains("   key.pub: \"***\""), "{human}");
    assert!(!human.contains("fixture-private-key") && !human.contains("OLDKEYMARKER"));
}

#[test]
fn preview_after_the_sync_of_a_postgresql_16_server() {
    let params = common::params();
    let observed = common::after_sync(&params);
    let preview = preview(&params, &observed).expect("preview");
    let plane = uyuni_core::dataplane::data_plane(&params, &observed, Err("not measured"));
    assert!(
        plane.database.contains("PostgreSQL 16") && plane.database.contains("upgraded to 18"),
        "{}",
        plane.database
    );
    assert!(
        preview.executed.iter().any(|s| s.id.contains("upgrade")),
        "the upgrade Job is planned"
    );
    let text = render::steps_text(&preview.steps) + "\n" + &plane.render();
    check_golden("preview-after-sync-pg16", "preview.txt", &text);
}
