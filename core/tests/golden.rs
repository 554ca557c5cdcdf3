//! Golden plans and previews for fixtures: rewrite with `UPDATE_GOLDEN=1 cargo test`.

use crate::common;

use std::path::PathBuf;

use similar::TextDiff;
use uyuni_core::{plan, preview, render};

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../testdata/golden")
}

/// Compares `actual` with the golden file, showing a unified diff on mismatch.
fn check_golden(name: &str, actual: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_dir()).expect("golden dir");
        std::fs::write(&path, actual).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if expected != actual {
        let diff = TextDiff::from_lines(&expected, actual)
            .unified_diff()
            .header(&format!("golden/{name}"), "actual")
            .to_string();
        panic!("{name} differs from the golden file (UPDATE_GOLDEN=1 rewrites it):\n{diff}");
    }
}

#[test]
fn plan_for_an_empty_cluster() {
    let params = common::params();
    let plan = plan(&params, &common::empty_cluster()).expect("plan");
    let json = serde_json::to_string_pretty(&plan).expect("json");
    check_golden("plan-empty-cluster.json", &format!("{json}\n"));
}

#[test]
fn preview_for_an_empty_cluster() {
    let params = common::params();
    let observed = common::empty_cluster();
    let preview = preview(&params, &observed).expect("preview");
    check_golden(
        "preview-empty-cluster.txt",
        &render::human_preview(&preview.steps, &observed, render::RenderOptions::default()),
    );
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
    check_golden("plan-after-migration.txt", &lines);
}

#[test]
fn manifests_and_json_for_an_empty_cluster() {
    let params = common::params();
    let observed = common::empty_cluster();
    let preview = preview(&params, &observed).expect("preview");
    check_golden(
        "preview-empty-cluster.yaml",
        &render::manifests_yaml(&preview.steps, false),
    );
    let json = render::plan_json(&params.namespace, &preview.steps, &observed);
    check_golden(
        "preview-empty-cluster.json",
        &format!("{}\n", serde_json::to_string_pretty(&json).expect("json")),
    );
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
    check_golden(
        "preview-after-migration.json",
        &format!("{}\n", serde_json::to_string_pretty(&json).expect("json")),
    );
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
    check_golden("preview-known-hosts-update.txt", &human);
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
    check_golden("preview-after-sync-pg16.txt", &text);
}
