//! Golden plans and previews for fixtures: rewrite with `UPDATE_GOLDEN=1 cargo test`.
//!
//! One directory per scenario under `testdata/golden/`: `steps.txt` (the step list, what a
//! reviewer reads first), `plan.json` (the structure), one YAML file per object, Job scripts
//! abbreviated to their hash (see `uyuni_testdata::golden`).

use crate::common;

use serde_json::Value;
use uyuni_core::plan::Planner;
use uyuni_core::{Observed, plan, preview, render};
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

/// `value` with each `(from, to)` of `redact` replaced in its strings.
fn redacted(value: &mut Value, redact: &[(&str, &str)]) {
    match value {
        Value::String(s) => {
            for (from, to) in redact {
                *s = s.replace(from, to);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redacted(v, redact)),
        Value::Object(map) => map.values_mut().for_each(|v| redacted(v, redact)),
        _ => {}
    }
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
    check_preview(
        "preview-empty-cluster",
        &common::params(),
        &common::empty_cluster(),
        &[],
    );
}

/// The golden of a whole preview from `observed`: the step list, `-o json`, one file per
/// document of `-o yaml`, each checked against the creation diff the human preview shows of
/// it (Secret values masked there). `redact`: strings that differ from one test run to the next
/// (certificates issued per run), each replaced by a stable name wherever it occurs in a value.
fn check_preview<P: Planner>(
    scenario: &str,
    params: &P,
    observed: &Observed,
    redact: &[(&str, &str)],
) {
    let observed = observed.clone();
    let preview = preview(params, &observed).expect("preview");
    let namespace = &params.server().namespace;
    let mut golden = GoldenDir::new(scenario);
    let steps = render::steps_text(&preview.steps);
    golden.file("steps.txt", steps.clone());
    // `-o json`
    let mut json = render::plan_json(namespace, &preview.steps, &observed);
    redacted(&mut json, redact);
    golden.file("plan.json", pretty(&json));
    // `-o yaml`: one file per document. A document reads back as itself, so its file (the
    // same renderer, scripts abbreviated) is what the stream holds.
    let mut documents = Vec::new();
    let stream = render::manifests_yaml(&preview.steps, false);
    // What the plan deletes closes the stream as a comment (it is not applied): a file of
    // its own, apart from the last document.
    let stream = match stream.split_once("# Deleted, not applied:\n") {
        Some((applied, deleted)) => {
            golden.file("deleted.txt", deleted.to_owned());
            applied.to_owned()
        }
        None => stream,
    };
    // An object written twice (Secret uyuni-migration-data: created empty, emptied of its
    // secret values at the end) has a file per write, the later ones numbered.
    let mut written = std::collections::BTreeMap::<String, usize>::new();
    for (note, yaml) in yaml_documents(&stream) {
        let mut value: Value = serde_saphyr::from_str(&yaml).expect("YAML document");
        assert_eq!(render::to_yaml(&value), yaml, "reads back as itself");
        redacted(&mut value, redact);
        let name = uyuni_testdata::golden::object_file_name(&value);
        let count = written.entry(name.clone()).or_default();
        *count += 1;
        let name = match *count {
            1 => name,
            n => format!("{}-{n}.yaml", name.trim_end_matches(".yaml")),
        };
        let text =
            note.clone() + &render::to_yaml(&uyuni_testdata::golden::abbreviate_scripts(&value));
        golden.file(&name, text);
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
        redacted(&mut shown, redact);
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

/// `install`'s plan from an empty cluster, with the CA generated through cert-manager.
#[test]
fn install_plan_for_an_empty_cluster_with_a_generated_ca() {
    let params = crate::install::install_params();
    let plan = params.plan(&common::empty_cluster()).expect("plan");
    let mut json = serde_json::to_value(&plan).expect("json");
    let objects = extract_objects(&mut json);
    let mut golden = GoldenDir::new("plan-install-generated-ca");
    golden.file("steps.txt", render::steps_text(&plan.steps));
    golden.file("plan.json", pretty(&json));
    for object in &objects {
        golden.object(object, render::to_yaml);
    }
    golden.check();
}

/// `install`'s whole preview with the `--ssl-*` files of [`common::tls_chain`] (issued for
/// [`common::SOURCE`], the name the server answers to here), on a cluster without cert-manager:
/// third-party certificates do not need it.
#[test]
fn install_preview_with_third_party_certificates() {
    let mut args = crate::install::install_args();
    let tls = common::tls_chain();
    let file = |path: &str, content: &str| {
        Some(uyuni_core::params::FileInput {
            path: path.to_owned(),
            content: uyuni_core::secret::SecretString::new(content),
        })
    };
    args.fqdn = common::SOURCE.into();
    args.spec.ssl_server_cert = file("server.crt", &tls.cert);
    args.spec.ssl_server_key = file("server.key", &tls.key);
    args.spec.ssl_ca_root = file("ca.crt", &tls.root);
    let params = uyuni_core::params::InstallParams::from_args(&args).expect("valid");
    // The chain is issued anew by each test run: its PEM texts get stable names.
    check_preview(
        "preview-install-third-party",
        &params,
        &Observed::default(),
        &[
            (tls.root.as_str(), "<common::tls_chain() root CA>\n"),
            (
                tls.cert.as_str(),
                "<common::tls_chain() server certificate>\n",
            ),
        ],
    );
}

/// `uninstall`'s whole preview from what an install leaves: the step list (deletions, then what
/// is kept and why) and the human preview (each deletion as a diff of the live object, Secret
/// values masked), without and with `--purge-volumes`.
#[test]
fn uninstall_previews_with_and_without_purge() {
    let installed = crate::uninstall::installed();
    for (scenario, purge) in [
        ("preview-uninstall", false),
        ("preview-uninstall-purge", true),
    ] {
        let params = crate::uninstall::uninstall_params(purge, purge);
        let preview = preview(&params, &installed).expect("preview");
        let steps = uyuni_core::preview::steps_with_deletions(&preview);
        let mut golden = GoldenDir::new(scenario);
        golden.file("steps.txt", render::steps_text(&steps));
        golden.file(
            "preview.txt",
            render::human_preview(&steps, &installed, render::RenderOptions::default()),
        );
        golden.check();
    }
}
