//! The plugin's modules import each other one way only: the graph of their `crate::module`
//! paths has no cycle, so each command's module can be read (and changed) on top of the shared
//! ones (`drive`, `lock`, `output`, `cli`) without them reaching back into it. The crate root
//! (`lib.rs`) is left out: it declares every module and runs the commands, and its few helpers
//! (`crate::connect`) are not a module.
//!
//! Comments and `#[cfg(test)]` code are not counted, as in `core/tests/layers.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The modules `lib.rs` declares.
fn modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("src/lib.rs is readable");
    lib.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("mod "))?;
            Some(rest.strip_suffix(';')?.trim().to_owned())
        })
        .collect()
}

/// A module's source files: `name.rs` and everything under `name/`.
fn files_of(module: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let file = src().join(format!("{module}.rs"));
    if file.is_file() {
        out.push(file);
    }
    let mut dirs = vec![src().join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
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
        let line = line.split(" // ").next().unwrap_or(line);
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The names that follow `crate::`, `crate::{a, b::c}` groups included.
fn used_names(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut used = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let after = &rest[at + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
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
                        used.insert(ident(&group[i..]));
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            used.insert(ident(after));
        }
        rest = after;
    }
    used.retain(|name| !name.is_empty());
    used
}

/// A cycle of `graph`, as the modules along it with the first repeated at the end.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|n| n == node).unwrap_or(0);
                let mut found = path[from..].to_vec();
                found.push(node.to_owned());
                return Some(found);
            }
            None => {}
        }
        marks.insert(node.to_owned(), Mark::Open);
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, marks, path) {
                return Some(found);
            }
        }
        path.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut marks, &mut Vec::new()))
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules();
    modules
        .iter()
        .map(|module| {
            let files = files_of(module);
            assert!(!files.is_empty(), "module {module} has no file under src/");
            let used = files
                .iter()
                .flat_map(|f| used_names(&code(&std::fs::read_to_string(f).expect("readable"))))
                .filter(|name| name != module && modules.contains(name))
                .collect();
            (module.clone(), used)
        })
        .collect()
}

#[test]
fn modules_the_plugins_modules_import_each_other_without_a_cycle() {
    let graph = graph();
    assert!(
        graph.contains_key("drive") && graph.contains_key("migrate"),
        "{graph:?}"
    );
    if let Some(cycle) = cycle(&graph) {
        panic!(
            "the plugin's modules import each other in a cycle: {}; move what both use into a module below them (as `drive` holds the permission check `dry_run` and `migrate` share)",
            cycle.join(" → ")
        );
    }
}

#[test]
fn modules_the_drive_loop_knows_no_command() {
    let graph = graph();
    // Every module the loop reaches, through the modules it uses.
    let mut reached = BTreeSet::new();
    let mut next = vec!["drive".to_owned()];
    while let Some(module) = next.pop() {
        for used in graph.get(&module).into_iter().flatten() {
            if reached.insert(used.clone()) {
                next.push(used.clone());
            }
        }
    }
    for command in ["migrate", "dry_run", "version", "completion"] {
        assert!(
            !reached.contains(command),
            "drive reaches crate::{command}: {reached:?}"
        );
    }
}

#[test]
fn modules_the_scanner_finds_paths_groups_and_cycles_and_skips_comments_and_tests() {
    let text = "use crate::a::X;\n// crate::commented\nlet y = crate::{b, c::{D, E}};\n#[cfg(test)]\nmod tests { use crate::t; }\n";
    assert_eq!(
        used_names(&code(text)),
        BTreeSet::from(["a".to_owned(), "b".to_owned(), "c".to_owned()])
    );
    let edges = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in pairs {
            g.entry((*from).to_owned())
                .or_default()
                .insert((*to).to_owned());
            g.entry((*to).to_owned()).or_default();
        }
        g
    };
    assert_eq!(cycle(&edges(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
    assert_eq!(
        cycle(&edges(&[("a", "b"), ("b", "c"), ("c", "b")])),
        Some(vec!["b".to_owned(), "c".to_owned(), "b".to_owned()])
    );
}
