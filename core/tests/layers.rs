//! The core's modules depend on each other one way only: each may use the modules listed before
//! it in [`LAYERS`] and none after it, so there is no import cycle and a newcomer can read the
//! crate from the bottom (names, objects, parameters, observation) to the top (planner, preview,
//! output). A module missing from the list, or a `crate::` path reaching up, fails this test.
//!
//! Test code (`#[cfg(test)]` modules at the end of a file) and comments are not counted: a test
//! may build its inputs with anything.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Bottom first. Keep in step with the map in `src/lib.rs`.
const LAYERS: &[&str] = &[
    // Names and plain values that depend on nothing.
    "catalogue",
    "labels",
    "object",
    "secret",
    "shell",
    "image",
    "pg",
    // Release versions of the images and the order of upgrades.
    "release",
    // What an image inspection reported.
    "inspect",
    "kubectl",
    "permission",
    // The one-writer Lease: names, its builder and the decisions on it.
    "lock",
    "volumes",
    "ports",
    "ssh",
    "certs",
    "timezone",
    // What the user asked for, validated once.
    "params",
    "record",
    "probe",
    // What the cluster holds.
    "observed",
    "verdict",
    // Whether the claims can be provisioned: a check before any write, which `resolve` runs.
    "storage",
    // The server's settings, whichever command they come from.
    "settings",
    // Every fact decided once, from the two above.
    "resolve",
    // The objects and the Job scripts.
    "scripts",
    "sync_progress",
    "builders",
    // What the data plane holds and what the data sync will do, for the dry run.
    "dataplane",
    // Whether a new claim is admitted (ResourceQuotas, LimitRanges): an upgrade's check
    // before any write.
    "quota",
    // The Pod Security check before any write (it builds the pods), then the planner and its
    // phases.
    "pod_security",
    "plan",
    // The record of each operation: its steps as the loop carries them out.
    "operation",
    // The pure model of each step, and what is printed from plans.
    "simulate",
    "outage",
    "preview",
    "access",
    "render",
    // What `status` makes of a snapshot (it reads the migration's phase from the planner).
    "status",
    // What `rbac` prints: the preflight's table, per command.
    "rbac",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("core/src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file belongs to (`plan/tls.rs` → `plan`); `None` for `lib.rs`.
fn module_of(file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src()).expect("under src");
    let first = rel.components().next()?.as_os_str().to_str()?.to_owned();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_owned();
    (name != "lib").then_some(name)
}

/// The code of a file without comments and without its test module.
fn code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        // A trailing comment may name a module in words.
        let line = line.split(" // ").next().unwrap_or(line);
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The top-level modules named by `crate::…` paths, `crate::{a, b::c}` groups included.
fn used_modules(code: &str) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // Top-level items of the group, up to its closing brace.
            let mut depth = 0usize;
            let mut item_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if c.is_whitespace() => {}
                    _ if item_start && depth == 0 => {
                        let name = ident(&group[i..]);
                        if !name.is_empty() {
                            used.insert(name);
                        }
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name = ident(after);
            if !name.is_empty() {
                used.insert(name);
            }
        }
        rest = after;
    }
    used
}

#[test]
fn every_module_uses_only_the_layers_below_it() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut violations = Vec::new();
    let mut modules = BTreeSet::new();
    for file in &files {
        let Some(module) = module_of(file) else {
            continue;
        };
        modules.insert(module.clone());
        let Some(own) = rank(&module) else {
            violations.push(format!(
                "{}: module `{module}` is not in LAYERS (core/tests/layers.rs): add it where it belongs",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("a source file");
        for used in used_modules(&code(&text)) {
            if used == module {
                continue;
            }
            match rank(&used) {
                Some(r) if r < own => {}
                Some(_) => violations.push(format!(
                    "{}: `{module}` uses `crate::{used}`, which is above it in LAYERS",
                    file.display()
                )),
                None if used.starts_with(|c: char| c.is_ascii_uppercase()) => {
                    violations.push(format!(
                        "{}: `{module}` uses `crate::{used}`, a re-export for the crate's users: name the module it comes from",
                        file.display()
                    ))
                }
                None => violations.push(format!(
                    "{}: `{module}` uses `crate::{used}`, which is not in LAYERS",
                    file.display()
                )),
            }
        }
    }
    let listed: BTreeSet<String> = LAYERS.iter().map(|s| (*s).to_owned()).collect();
    for gone in listed.difference(&modules) {
        violations.push(format!("LAYERS names `{gone}`, which is no module of core"));
    }
    assert!(
        violations.is_empty(),
        "the core's layering is broken:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_scanner_finds_paths_and_groups_and_skips_comments_and_tests() {
    let text = "use crate::a::b;\n// crate::commented\nuse crate::{c, d::{e, f}, g};\nfn x() { crate::h::i(); } // crate::trailing\n#[cfg(test)]\nmod tests { use crate::j; }\n";
    let used = used_modules(&code(text));
    let expected: BTreeSet<String> = ["a", "c", "d", "g", "h"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    assert_eq!(used, expected);
}
