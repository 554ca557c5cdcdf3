//! Golden files, shared by every crate's tests: one directory per scenario under
//! `testdata/golden/`, holding a short step list a reviewer reads first and one file per
//! Kubernetes object, with Job scripts abbreviated to their name, hash and length.
//!
//! `UPDATE_GOLDEN=1` rewrites a scenario's directory: changed files are written, files the test
//! no longer produces are removed. Without it, a changed, missing or stale file fails the test
//! with a unified diff of each difference.
//!
//! Scripts are not stored because they are reviewed in their source files; storing them three
//! times per scenario buried the step list. Their hash still makes any change fail the check.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;
use sha2::{Digest, Sha256};
use similar::TextDiff;

/// `testdata/golden/` of this workspace.
pub fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden")
}

fn updating() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some()
}

/// The golden files of one scenario: `testdata/golden/<scenario>/`. Record every file the
/// scenario produces with [`GoldenDir::file`], then [`GoldenDir::check`] compares the directory
/// with them, all of them: a file on disk that was not recorded is stale.
#[must_use = "nothing is compared until check() is called"]
pub struct GoldenDir {
    scenario: String,
    files: BTreeMap<String, String>,
}

impl GoldenDir {
    pub fn new(scenario: &str) -> GoldenDir {
        GoldenDir {
            scenario: scenario.to_owned(),
            files: BTreeMap::new(),
        }
    }

    /// Records the expected contents of `name` (a plain file name: scenarios are flat).
    /// The same name twice must carry the same contents: two objects that map to one file
    /// would otherwise hide one another.
    pub fn file(&mut self, name: &str, contents: impl Into<String>) -> &mut GoldenDir {
        assert!(
            !name.contains('/') && !name.starts_with('.') && !name.is_empty(),
            "golden file name {name:?}: a plain file name"
        );
        let contents = contents.into();
        if let Some(before) = self.files.get(name) {
            assert_eq!(
                before, &contents,
                "{}/{name} recorded twice with different contents",
                self.scenario
            );
        }
        self.files.insert(name.to_owned(), contents);
        self
    }

    /// Records a Kubernetes object (JSON) as `<kind>-<name>.yaml`, Job scripts abbreviated,
    /// rendered by `to_yaml` (the caller's renderer, so the file reads as its output does).
    pub fn object(&mut self, object: &Value, to_yaml: impl Fn(&Value) -> String) -> &mut GoldenDir {
        let name = object_file_name(object);
        self.file(&name, to_yaml(&abbreviate_scripts(object)))
    }

    /// Compares the scenario's directory with the recorded files; panics with every
    /// difference. With `UPDATE_GOLDEN` set, rewrites the directory instead.
    #[track_caller]
    pub fn check(self) {
        let root = golden_dir();
        let problems: Vec<String> = [
            self.compare(&root.join(&self.scenario), updating()),
            loose_files(&root, updating()),
        ]
        .into_iter()
        .filter_map(Result::err)
        .collect();
        if !problems.is_empty() {
            panic!("{}", problems.join("\n"));
        }
    }

    /// The check of `dir`: rewrites it when `update`, else lists every difference.
    // pub for the unit tests in tests/unit/
    #[doc(hidden)]
    pub fn compare(&self, dir: &std::path::Path, update: bool) -> Result<(), String> {
        let on_disk: Vec<String> = match std::fs::read_dir(dir) {
            Ok(entries) => {
                let mut names: Vec<String> = entries
                    .map(|e| e.expect("golden dir entry").file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .collect();
                names.sort();
                names
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => panic!("{}: {e}", dir.display()),
        };
        let stale: Vec<&String> = on_disk
            .iter()
            .filter(|n| !self.files.contains_key(n.as_str()))
            .collect();
        if update {
            std::fs::create_dir_all(dir).expect("golden dir");
            for name in stale {
                std::fs::remove_file(dir.join(name)).expect("remove stale golden file");
            }
            for (name, contents) in &self.files {
                let path = dir.join(name);
                if std::fs::read_to_string(&path).ok().as_ref() != Some(contents) {
                    std::fs::write(&path, contents).expect("write golden file");
                }
            }
            return Ok(());
        }
        let mut problems = Vec::new();
        for name in stale {
            problems.push(format!(
                "golden/{}/{name} is no longer produced (UPDATE_GOLDEN=1 removes it)\n",
                self.scenario
            ));
        }
        for (name, actual) in &self.files {
            let shown = format!("golden/{}/{name}", self.scenario);
            match std::fs::read_to_string(dir.join(name)) {
                Ok(expected) if &expected == actual => {}
                Ok(expected) => problems.push(format!(
                    "{shown} differs (UPDATE_GOLDEN=1 rewrites it):\n{}",
                    TextDiff::from_lines(&expected, actual)
                        .unified_diff()
                        .header(&shown, "actual")
                )),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => problems.push(format!(
                    "{shown} is missing (UPDATE_GOLDEN=1 creates it); it would hold:\n{}\n",
                    preview_lines(actual)
                )),
                Err(e) => problems.push(format!("{shown}: {e}\n")),
            }
        }
        if problems.is_empty() {
            return Ok(());
        }
        Err(format!(
            "golden/{}: {} file(s) differ from what the test produced:\n\n{}",
            self.scenario,
            problems.len(),
            problems.join("\n")
        ))
    }
}

/// Files directly in `golden/`, outside every scenario's directory: leftovers of the layout of
/// one file per output (a merge can bring them back), which no scenario's stale check sees.
/// `update` removes them.
// pub for the unit tests in tests/unit/
#[doc(hidden)]
pub fn loose_files(root: &std::path::Path, update: bool) -> Result<(), String> {
    let loose: Vec<PathBuf> = std::fs::read_dir(root)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default();
    if loose.is_empty() {
        return Ok(());
    }
    if update {
        for path in &loose {
            // Every test that checks its goldens gets here: another may have removed it first.
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    panic!("{}: {e}", path.display())
                }
                _ => {}
            }
        }
        return Ok(());
    }
    let names: Vec<String> = loose
        .iter()
        .map(|p| format!("  {}\n", p.display()))
        .collect();
    Err(format!(
        "files outside any scenario's directory of golden/, produced by no test \
         (UPDATE_GOLDEN=1 removes them):\n{}",
        names.concat()
    ))
}

/// The first lines of a new file, so a missing one is not a wall of text.
fn preview_lines(text: &str) -> String {
    const SHOWN: usize = 20;
    let mut out: String = text
        .lines()
        .take(SHOWN)
        .map(|l| format!("  {l}\n"))
        .collect();
    let total = text.lines().count();
    if total > SHOWN {
        out.push_str(&format!("  … ({} more lines)\n", total - SHOWN));
    }
    out
}

/// A scenario with a single golden file.
#[track_caller]
pub fn check_golden(scenario: &str, name: &str, actual: &str) {
    let mut golden = GoldenDir::new(scenario);
    golden.file(name, actual);
    golden.check();
}

/// `<kind>-<name>.yaml`, lower-case kind: the file of one object in its scenario's directory.
pub fn object_file_name(object: &Value) -> String {
    let kind = object["kind"]
        .as_str()
        .unwrap_or("unknown")
        .to_ascii_lowercase();
    let name = object["metadata"]["name"].as_str().unwrap_or("unnamed");
    format!("{kind}-{name}.yaml")
}

/// What stands for a script in golden files: the container that runs it, its hash and length.
pub fn script_marker(container: &str, script: &str) -> String {
    let hash = Sha256::digest(script.as_bytes());
    let hex: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!(
        "<script {container}, sha256:{hex}, {} lines>",
        script.lines().count()
    )
}

/// `object` with every multi-line shell script (the argument after `-c` of a container's
/// `command` and `args`, wherever pod specs nest) replaced by [`script_marker`]. One-line
/// commands stay as they are: they read as well as a marker would.
pub fn abbreviate_scripts(object: &Value) -> Value {
    let mut out = object.clone();
    abbreviate_in(&mut out);
    out
}

fn abbreviate_in(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for key in ["containers", "initContainers"] {
                if let Some(Value::Array(containers)) = map.get_mut(key) {
                    containers.iter_mut().for_each(abbreviate_container);
                }
            }
            map.values_mut().for_each(abbreviate_in);
        }
        Value::Array(items) => items.iter_mut().for_each(abbreviate_in),
        _ => {}
    }
}

fn abbreviate_container(container: &mut Value) {
    let name = container["name"].as_str().unwrap_or("unnamed").to_owned();
    // `bash -c SCRIPT` may be split across `command` and `args`: the flag in one, the script
    // first in the other.
    let mut after_flag = false;
    for field in ["command", "args"] {
        let Some(Value::Array(words)) = container.get_mut(field) else {
            continue;
        };
        for word in words.iter_mut() {
            if after_flag
                && let Value::String(script) = word
                && script.contains('\n')
            {
                *word = Value::String(script_marker(&name, script));
            }
            after_flag = word.as_str() == Some("-c");
        }
    }
}

/// Replaces every Kubernetes object nested in `value` (anything with `apiVersion`, `kind` and
/// `metadata.name`) by the name of its file, and returns them in order: a plan's structure in
/// one short file, its objects in their own.
pub fn extract_objects(value: &mut Value) -> Vec<Value> {
    let mut out = Vec::new();
    extract_in(value, &mut out);
    out
}

fn extract_in(value: &mut Value, out: &mut Vec<Value>) {
    let is_object = value.get("apiVersion").is_some_and(Value::is_string)
        && value.get("kind").is_some_and(Value::is_string)
        && value["metadata"]["name"].is_string();
    if is_object {
        let file = object_file_name(value);
        out.push(std::mem::replace(
            value,
            Value::String(format!("file {file}")),
        ));
        return;
    }
    match value {
        Value::Object(map) => map.values_mut().for_each(|v| extract_in(v, out)),
        Value::Array(items) => items.iter_mut().for_each(|v| extract_in(v, out)),
        _ => {}
    }
}
