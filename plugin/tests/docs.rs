//! The README, `docs/` and CONTRIBUTING.md against what the code does: the README stays short
//! with its two commands on the first screen, every sample output marked as a golden file's is
//! that file's text, every `kubectl uyuni …` line uses flags the binary has, and every page
//! linked exists.
//!
//! A sample output is a fenced block whose line before is `<!-- golden: PATH -->` (the whole
//! file, PATH from the repository's root), `<!-- golden: PATH lines A-B, C-D -->` (those
//! lines, 1-based and inclusive; in the block, a line `...` stands between two ranges) or
//! `<!-- golden: PATH from TEXT -->` (from the first line that starts with TEXT to the end,
//! which survives lines added above it). The
//! golden files are rewritten by their own tests (`UPDATE_GOLDEN=1`); a doc that shows one
//! fails here until it is copied again.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// The README's ceiling: the rest belongs in docs/ or CONTRIBUTING.md.
const README_MAX_LINES: usize = 300;

/// The README's first screen, which holds the two set-up commands.
const FIRST_SCREEN_LINES: usize = 40;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// README.md, CONTRIBUTING.md and every page under docs/, as (path from the root, text).
fn documents() -> Vec<(String, String)> {
    let root = root();
    let mut docs = vec![
        ("README.md".to_owned(), read(&root.join("README.md"))),
        (
            "CONTRIBUTING.md".to_owned(),
            read(&root.join("CONTRIBUTING.md")),
        ),
    ];
    let mut pages: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    for page in pages {
        let name = format!(
            "docs/{}",
            page.file_name().expect("file name").to_string_lossy()
        );
        docs.push((name, read(&page)));
    }
    docs
}

/// A fenced block: the line its opening fence is on (1-based), the fence's info string, its
/// lines, and the line before the fence.
struct Block<'a> {
    line: usize,
    info: &'a str,
    body: Vec<&'a str>,
    before: &'a str,
}

fn blocks(text: &str) -> Vec<Block<'_>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if let Some(info) = lines[i].trim_start().strip_prefix("```") {
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                body.push(lines[i]);
                i += 1;
            }
            out.push(Block {
                line: start + 1,
                info: info.trim(),
                body,
                before: if start > 0 { lines[start - 1] } else { "" },
            });
        }
        i += 1;
    }
    out
}

/// The part of a golden file a marker names.
#[derive(Debug, PartialEq)]
enum Part {
    /// All of it.
    Whole,
    /// These line ranges, 1-based and inclusive.
    Lines(Vec<(usize, usize)>),
    /// From the first line that starts with this text to the end.
    From(String),
}

/// What a `<!-- golden: … -->` line asks for: the file and the part of it.
fn golden_marker(line: &str) -> Option<(String, Part)> {
    let inner = line
        .trim()
        .strip_prefix("<!-- golden:")?
        .strip_suffix("-->")?
        .trim();
    if let Some((path, text)) = inner.split_once(" from ") {
        return Some((path.trim().to_owned(), Part::From(text.trim().to_owned())));
    }
    let Some((path, ranges)) = inner.split_once(" lines ") else {
        return Some((inner.to_owned(), Part::Whole));
    };
    let ranges = ranges
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let n = |s: &str| {
                s.trim()
                    .parse::<usize>()
                    .unwrap_or_else(|_| panic!("bad line range {r:?} in {line:?}"))
            };
            (n(a), n(b))
        })
        .collect();
    Some((path.trim().to_owned(), Part::Lines(ranges)))
}

/// The text a golden marker names, as the block must hold it.
fn golden_text(path: &str, part: &Part) -> Result<String, String> {
    let text = fs::read_to_string(root().join(path)).map_err(|e| format!("{path}: {e}"))?;
    let lines: Vec<&str> = text.lines().collect();
    let ranges = match part {
        Part::Whole => return Ok(lines.join("\n")),
        Part::From(start) => {
            let at = lines
                .iter()
                .position(|l| l.starts_with(start.as_str()))
                .ok_or_else(|| format!("{path} has no line starting with {start:?}"))?;
            return Ok(lines[at..].join("\n"));
        }
        Part::Lines(ranges) => ranges,
    };
    let mut parts = Vec::new();
    for &(a, b) in ranges {
        if a == 0 || a > b || b > lines.len() {
            return Err(format!(
                "{path} has {} lines; range {a}-{b} is outside it",
                lines.len()
            ));
        }
        parts.push(lines[a - 1..b].join("\n"));
    }
    Ok(parts.join("\n...\n"))
}

#[test]
fn readme_stays_under_300_lines() {
    let text = read(&root().join("README.md"));
    let n = text.lines().count();
    assert!(
        n < README_MAX_LINES,
        "README.md has {n} lines; keep it under {README_MAX_LINES}: move the detail to docs/ \
         (users) or CONTRIBUTING.md (contributors)"
    );
}

/// The project's contract: a fresh clone's reader sees how to run the demo and the tests
/// before anything else.
#[test]
fn readme_shows_the_two_commands_on_its_first_screen() {
    let text = read(&root().join("README.md"));
    let first: Vec<&str> = text.lines().take(FIRST_SCREEN_LINES).collect();
    for command in ["scripts/demo.sh", "scripts/test.sh"] {
        assert!(
            first.iter().any(|l| l.trim_start().starts_with(command)),
            "README.md's first {FIRST_SCREEN_LINES} lines must show `{command}` in its code block"
        );
    }
}

#[test]
fn sample_outputs_are_their_golden_files() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for (doc, text) in documents() {
        for block in blocks(&text) {
            let Some((path, part)) = golden_marker(block.before) else {
                continue;
            };
            checked += 1;
            match golden_text(&path, &part) {
                Err(e) => problems.push(format!("{doc}:{}: {e}", block.line)),
                Ok(want) => {
                    let got = block.body.join("\n");
                    if got != want {
                        let diff = similar::TextDiff::from_lines(&want, &got)
                            .unified_diff()
                            .header(&path, &format!("{doc}:{}", block.line))
                            .to_string();
                        problems.push(format!(
                            "{doc}:{}: the block is not {path}'s text; copy it again:\n{diff}",
                            block.line
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked > 0, "no `<!-- golden: … -->` block found");
}

#[test]
fn golden_markers_parse() {
    assert_eq!(
        golden_marker("<!-- golden: testdata/golden/x/steps.txt -->"),
        Some(("testdata/golden/x/steps.txt".to_owned(), Part::Whole))
    );
    assert_eq!(
        golden_marker("<!-- golden: a.txt lines 1-3, 7-7 -->"),
        Some(("a.txt".to_owned(), Part::Lines(vec![(1, 3), (7, 7)])))
    );
    assert_eq!(
        golden_marker("<!-- golden: a.txt from Examples: -->"),
        Some(("a.txt".to_owned(), Part::From("Examples:".to_owned())))
    );
    assert_eq!(golden_marker("<!-- a comment -->"), None);
}

/// The anchor GitHub gives a heading: lower case, punctuation but `-` and `_` dropped, spaces
/// as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a document's headings (outside fenced blocks).
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            !fenced
        })
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor(l.trim_start_matches('#')))
        .collect()
}

/// Every relative `.md` page a document links to exists, and so does the heading its `#anchor`
/// names.
#[test]
fn linked_pages_exist() {
    let root = root();
    let mut missing = Vec::new();
    for (doc, text) in documents() {
        let base = Path::new(&doc).parent().unwrap_or(Path::new(""));
        for (i, line) in text.lines().enumerate() {
            // Markdown links: ](target) with a relative target.
            for part in line.split("](").skip(1) {
                let target = part.split(')').next().unwrap_or("");
                if target.contains("://") {
                    continue;
                }
                let (file, fragment) = target.split_once('#').unwrap_or((target, ""));
                let page = if file.is_empty() {
                    text.clone()
                } else if file.ends_with(".md") {
                    match fs::read_to_string(root.join(base).join(file)) {
                        Ok(page) => page,
                        Err(_) => {
                            missing.push(format!("{doc}:{}: {target}", i + 1));
                            continue;
                        }
                    }
                } else {
                    if !root.join(base).join(file).exists() {
                        missing.push(format!("{doc}:{}: {target}", i + 1));
                    }
                    continue;
                };
                if !fragment.is_empty() && !anchors(&page).iter().any(|a| a == fragment) {
                    missing.push(format!("{doc}:{}: {target} (no such heading)", i + 1));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "links to missing pages or headings:\n{}",
        missing.join("\n")
    );
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(
        anchor(" A re-run starts from the record"),
        "a-re-run-starts-from-the-record"
    );
    assert_eq!(anchor(" The outage, measured"), "the-outage-measured");
    assert_eq!(anchor(" Formats (`-o json|yaml`)"), "formats--o-jsonyaml");
}

/// The words of a `kubectl uyuni …` command line: up to a comment, a pipe or the next command.
fn command_words(line: &str) -> Option<Vec<&str>> {
    // A comment may name a command (`# runs kubectl uyuni migrate`): only the code counts.
    let line = line.split(" #").next().unwrap_or(line);
    let at = line.find("kubectl uyuni ")?;
    let rest = &line[at + "kubectl uyuni ".len()..];
    let words = rest
        .split_whitespace()
        .take_while(|w| {
            !["#", "|", "||", "&&", ";", ">", "2>&1"].contains(w) && !w.starts_with('>')
        })
        .collect();
    Some(words)
}

/// The binary's `--help` for a command (`""`: the top level), once each.
fn help<'a>(cache: &'a mut BTreeMap<String, String>, command: &str) -> &'a str {
    cache.entry(command.to_owned()).or_insert_with(|| {
        let mut cmd = Command::cargo_bin("kubectl-uyuni").expect("binary built");
        if !command.is_empty() {
            cmd.arg(command);
        }
        let out = cmd.arg("--help").output().expect("runs");
        assert!(out.status.success(), "{command} --help failed");
        String::from_utf8_lossy(&out.stdout).into_owned()
    })
}

/// Whether `help` declares the long flag `flag` (`--name`), as a whole word.
fn declares(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let after = help[at + flag.len()..].chars().next();
        let before = help[..at].chars().last();
        !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
            && !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

/// Every `kubectl uyuni …` line of a shell block in the README and docs uses a command and long
/// flags the binary has: the examples cannot promise what does not exist.
#[test]
fn command_lines_use_flags_that_exist() {
    let top = {
        let mut cache = BTreeMap::new();
        help(&mut cache, "").to_owned()
    };
    // The command names, from the top-level help's "Commands:" list.
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    assert!(
        commands.iter().any(|c| c == "migrate"),
        "commands: {commands:?}"
    );
    let mut cache = BTreeMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    for (doc, text) in documents() {
        for block in blocks(&text) {
            if !matches!(block.info, "sh" | "bash" | "console") {
                continue;
            }
            // Continuation lines joined, so a flag on the next line counts.
            let joined = block.body.join("\n").replace("\\\n", " ");
            for line in joined.lines() {
                let Some(words) = command_words(line) else {
                    continue;
                };
                let command = words
                    .iter()
                    .find(|w| commands.iter().any(|c| c == *w))
                    .copied();
                let Some(command) = command else {
                    problems.push(format!(
                        "{doc}:{}: no known command in `{line}`",
                        block.line
                    ));
                    continue;
                };
                checked += 1;
                let mut after = false;
                for word in &words {
                    if *word == command {
                        after = true;
                        continue;
                    }
                    let Some(flag) = word.strip_prefix("--").map(|f| {
                        let name = f.split(['=', '[']).next().unwrap_or(f);
                        format!("--{name}")
                    }) else {
                        continue;
                    };
                    let text = if after {
                        help(&mut cache, command)
                    } else {
                        help(&mut cache, "")
                    };
                    if !declares(text, &flag) {
                        let place = if after { command } else { "kubectl uyuni" };
                        problems.push(format!(
                            "{doc}:{}: {flag} is not a flag of {place}: `{line}`",
                            block.line
                        ));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked > 0, "no `kubectl uyuni` command line found");
}
