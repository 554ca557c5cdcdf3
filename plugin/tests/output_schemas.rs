//! The JSON Schemas under `docs/schema/` are the ones the plugin's types give
//! (`kubectl_uyuni::schema`; `UPDATE_GOLDEN=1` rewrites them), and what each command prints
//! with `-o json` validates against its schema: a migration, an install, its status and logs,
//! stop and start, an upgrade's dry run, an uninstall's dry run and run, on the simulated
//! cluster; an upgrade's run and rollback on the real control plane (`e2e_real_migration::upgrade`).
//! The validator is Python's `jsonschema` (Draft 2020-12), from the venv `scripts/test.sh`
//! installs.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use support::{Env, NS, stderr, stdout};
use uyuni_testdata::{SimConfig, scenarios};

fn schema_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/schema")
}

#[test]
fn the_committed_schemas_are_the_generated_ones() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let documents = kubectl_uyuni::schema::documents();
    let dir = schema_dir();
    let mut stale = Vec::new();
    for document in &documents {
        let text = serde_json::to_string_pretty(&document.schema).expect("json") + "\n";
        let path = dir.join(document.file);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            if update {
                std::fs::create_dir_all(&dir).expect("docs/schema");
                std::fs::write(&path, &text).expect("write schema");
            } else {
                stale.push(document.file);
            }
        }
    }
    assert!(
        stale.is_empty(),
        "docs/schema/ {stale:?} differ from the types: run UPDATE_GOLDEN=1 cargo test -p kubectl-uyuni --test integration -- output_schemas"
    );
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("docs/schema")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut expected: Vec<String> = documents.iter().map(|d| d.file.to_owned()).collect();
    expected.sort();
    assert_eq!(files, expected, "a file under docs/schema/ no document has");
    let output_md =
        std::fs::read_to_string(dir.join("../output.md")).expect("docs/output.md readable");
    for file in &expected {
        assert!(
            output_md.contains(&format!("(schema/{file})")),
            "docs/output.md does not link schema/{file}"
        );
    }
}

/// The venv's Python with `jsonschema`: next to `kubernetes-validate` where test.sh says, else
/// `python3` on PATH. `None` (outside CI) when neither has it.
pub(crate) fn python() -> Option<PathBuf> {
    let beside = std::env::var("UYUNI_KUBERNETES_VALIDATE")
        .ok()
        .and_then(|tool| Path::new(&tool).parent().map(|d| d.join("python")));
    let candidates = beside.into_iter().chain([PathBuf::from("python3")]);
    for python in candidates {
        let ok = std::process::Command::new(&python)
            .args(["-c", "import jsonschema"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(python);
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI needs Python's jsonschema (scripts/test.sh installs it in the venv)"
    );
    eprintln!("note: Python's jsonschema not available; outputs not checked against docs/schema");
    None
}

const VALIDATE: &str = r#"
import json, sys, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
errors = sorted(validator.iter_errors(json.load(open(sys.argv[2]))), key=lambda e: list(e.path))
for e in errors[:10]:
    print("/".join(str(p) for p in e.path) or "(root)", ":", e.message[:300])
sys.exit(1 if errors else 0)
"#;

/// The document `out` printed, checked against `docs/schema/FILE`.
pub(crate) fn validates(python: &Path, file: &str, out: &Output) -> Value {
    assert!(out.status.success(), "{file}: {}", stderr(out));
    let doc: Value = serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("{file}: not one JSON document ({e}):\n{}", stdout(out)));
    let dir = tempfile::tempdir().expect("tempdir");
    let instance = dir.path().join("instance.json");
    std::fs::write(&instance, stdout(out)).expect("write");
    let check = std::process::Command::new(python)
        .args(["-c", VALIDATE])
        .arg(schema_dir().join(file))
        .arg(&instance)
        .output()
        .expect("python runs");
    assert!(
        check.status.success(),
        "the output does not validate against docs/schema/{file}:\n{}{}\n{doc:#}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    doc
}

fn quick_env() -> Env {
    let mut scenario = scenarios::migration();
    for job in scenario.jobs.values_mut() {
        job.duration_ms = 0;
    }
    Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    })
}

#[test]
fn every_commands_json_validates_against_its_schema() {
    let Some(python) = python() else {
        return;
    };
    let env = quick_env();
    let uyuni = |args: &[&str]| {
        env.kubectl()
            .env("UYUNI_ADMIN_PASSWORD", "install-admin-Pa55")
            .arg("uyuni")
            .arg("--kubeconfig")
            .arg(env.kubeconfig())
            .args(["-n", NS])
            .args(args)
            .args(["-o", "json"])
            .output()
            .expect("kubectl runs")
    };
    let install = ["install", "server.example.com", "--tag", "2025.10"];
    validates(&python, "version.json", &uyuni(&["version"]));
    let plan = validates(
        &python,
        "install-dry-run.json",
        &uyuni(&[&install[..], &["--dry-run"]].concat()),
    );
    assert!(plan["steps"][0]["number"] == 1, "{plan}");
    validates(&python, "install.json", &uyuni(&install));
    validates(&python, "status.json", &uyuni(&["status"]));
    validates(&python, "logs.json", &uyuni(&["logs"]));
    validates(
        &python,
        "lifecycle-dry-run.json",
        &uyuni(&["stop", "--dry-run"]),
    );
    validates(&python, "lifecycle.json", &uyuni(&["stop", "--yes"]));
    validates(&python, "lifecycle.json", &uyuni(&["start"]));
    let upgrade = ["upgrade", "--tag", "2026.04"];
    validates(
        &python,
        "upgrade-dry-run.json",
        &uyuni(&[&upgrade[..], &["--dry-run"]].concat()),
    );
    // The upgrade's run is not here: the simulated cluster gives no termination messages, so
    // its inspections report nothing (the real control plane's upgrade test runs it).
    validates(
        &python,
        "uninstall-dry-run.json",
        &uyuni(&["uninstall", "--dry-run"]),
    );
    validates(&python, "uninstall.json", &uyuni(&["uninstall", "--yes"]));
}

#[test]
fn a_migrations_json_validates_against_its_schema() {
    let Some(python) = python() else {
        return;
    };
    let env = quick_env().with_ssh_stub("4096\\t/var/lib/cobbler\\n");
    let flags = support::ssh_flags();
    let migrate = |extra: &[&str]| {
        let mut args = vec!["migrate", support::SOURCE, "--yes", "-o", "json"];
        args.extend_from_slice(extra);
        args.extend(flags.iter().map(String::as_str));
        env.uyuni(&args)
    };
    let plan = validates(
        &python,
        "migrate-dry-run.json",
        &migrate(&["--dry-run=server"]),
    );
    assert!(plan["serverDryRun"].is_array(), "{plan}");
    let result = validates(&python, "migrate.json", &migrate(&[]));
    assert_eq!(result["kind"], "MigrationResult", "{result}");
    validates(
        &python,
        "status.json",
        &env.uyuni(&["status", "-o", "json"]),
    );
    validates(&python, "logs.json", &env.uyuni(&["logs", "-o", "json"]));
}
