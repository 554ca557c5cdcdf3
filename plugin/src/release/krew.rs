//! The release archive and the krew manifest: building the `.tar.gz`, rendering the manifest
//! from the krew-release-bot template, krew's validation rules, and krew's install layout.
//! Shared by the `uyuni-release` binary and the tests (`#[path]`-included there), so it only
//! uses the standard library and the crates both have.

#![allow(dead_code)] // each includer uses a different part

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

pub const API_VERSION: &str = "krew.googlecontainertools.github.com/v1alpha2";
pub const PLUGIN: &str = "uyuni";
pub const BIN: &str = "kubectl-uyuni";
pub const COMPLETER: &str = "kubectl_complete-uyuni";

/// What every archive holds, in this order.
pub const ARCHIVE_FILES: [&str; 4] = [BIN, COMPLETER, "LICENSE", "README.md"];

/// The os/arch pairs krew runs on; a manifest must not let two platforms match one of them.
const KNOWN_PLATFORMS: [(&str, &str); 9] = [
    ("linux", "amd64"),
    ("linux", "arm64"),
    ("linux", "arm"),
    ("linux", "386"),
    ("linux", "ppc64le"),
    ("linux", "s390x"),
    ("darwin", "amd64"),
    ("darwin", "arm64"),
    ("windows", "amd64"),
];

/// This machine in krew's terms (Go's GOOS/GOARCH).
pub fn this_platform() -> (String, String) {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    (os.to_owned(), arch.to_owned())
}

pub fn archive_name(version: &str, os: &str, arch: &str) -> String {
    format!("{BIN}_{version}_{os}_{arch}.tar.gz")
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A gzip'd tar of `files` (name in the archive → content, executable or not), reproducible:
/// fixed order, owner and modification time.
pub fn build_archive(files: &[(&str, Vec<u8>, bool)], mtime: u64) -> Result<Vec<u8>, String> {
    let gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    for (name, content, executable) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(if *executable { 0o755 } else { 0o644 });
        header.set_mtime(mtime);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, name, content.as_slice())
            .map_err(|e| format!("cannot add {name} to the archive: {e}"))?;
    }
    let gz = tar
        .into_inner()
        .map_err(|e| format!("cannot finish the archive: {e}"))?;
    gz.finish()
        .map_err(|e| format!("cannot compress the archive: {e}"))
}

/// The regular files of a `.tar.gz`: path → (content, mode).
pub fn read_archive(bytes: &[u8]) -> Result<BTreeMap<String, (Vec<u8>, u32)>, String> {
    let mut out = BTreeMap::new();
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(bytes));
    let entries = archive
        .entries()
        .map_err(|e| format!("not a tar.gz archive: {e}"))?;
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("unreadable archive entry: {e}"))?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = entry
            .path()
            .map_err(|e| format!("bad path in the archive: {e}"))?
            .to_string_lossy()
            .trim_start_matches("./")
            .to_owned();
        let mode = entry.header().mode().unwrap_or(0o644);
        let mut content = Vec::new();
        entry
            .read_to_end(&mut content)
            .map_err(|e| format!("cannot read {path} from the archive: {e}"))?;
        out.insert(path, (content, mode));
    }
    Ok(out)
}

/// One platform block of the template, and the archive its `addURIAndSha` names.
struct Block {
    lines: Vec<String>,
    archive: Option<String>,
}

/// The URL inside `{{addURIAndSha "URL" .TagName }}`, with the tag filled in.
fn add_uri_and_sha(line: &str, version: &str) -> Option<String> {
    let t = line.trim();
    let inner = t
        .strip_prefix("{{")?
        .trim_start()
        .strip_prefix("addURIAndSha")?
        .trim_start()
        .strip_prefix('"')?;
    let end = inner.rfind('"')?;
    Some(fill(&inner[..end], version))
}

fn fill(text: &str, version: &str) -> String {
    text.replace("{{ .TagName }}", version)
        .replace("{{.TagName}}", version)
}

/// Renders the krew-release-bot template for `version`: `{{ .TagName }}` becomes the version,
/// each `{{addURIAndSha "URL" .TagName }}` becomes `uri:` and `sha256:` of the archive named by
/// the URL's last segment, looked up in `archives` (file name → sha256). Platforms without an
/// archive are left out and returned as the second value.
pub fn render_manifest(
    template: &str,
    version: &str,
    archives: &BTreeMap<String, String>,
) -> Result<(String, Vec<String>), String> {
    let lines: Vec<&str> = template.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim_end() == "  platforms:")
        .ok_or("the template has no `  platforms:` list")?;
    let mut out: Vec<String> = lines[..=start].iter().map(|l| fill(l, version)).collect();
    let mut blocks: Vec<Block> = Vec::new();
    let mut rest_from = lines.len();
    for (i, line) in lines.iter().enumerate().skip(start + 1) {
        let indent = line.len() - line.trim_start().len();
        if line.starts_with("  - ") {
            blocks.push(Block {
                lines: Vec::new(),
                archive: None,
            });
        } else if !line.trim().is_empty() && indent <= 2 {
            rest_from = i;
            break;
        }
        let Some(block) = blocks.last_mut() else {
            return Err(format!("line {}: expected `  - selector:`", i + 1));
        };
        match add_uri_and_sha(line, version) {
            Some(url) => {
                let file = url.rsplit('/').next().unwrap_or_default().to_owned();
                let pad = " ".repeat(indent);
                block.lines.push(format!("{pad}uri: {url}"));
                block.lines.push(format!("{pad}sha256: {{sha256:{file}}}"));
                block.archive = Some(file);
            }
            None => block.lines.push(fill(line, version)),
        }
    }
    let mut skipped = Vec::new();
    let mut kept = 0;
    for block in blocks {
        let Some(file) = &block.archive else {
            return Err("a platform of the template has no addURIAndSha line".to_owned());
        };
        let Some(sha) = archives.get(file) else {
            skipped.push(file.clone());
            continue;
        };
        kept += 1;
        for line in block.lines {
            out.push(line.replace(&format!("{{sha256:{file}}}"), sha));
        }
    }
    if kept == 0 {
        return Err(format!(
            "no archive for any platform of the template (looked for {})",
            skipped.join(", ")
        ));
    }
    out.extend(lines[rest_from..].iter().map(|l| fill(l, version)));
    // Drop the template's leading comment: it describes the template, not the manifest.
    let body: Vec<String> = out.into_iter().skip_while(|l| l.starts_with('#')).collect();
    Ok((body.join("\n") + "\n", skipped))
}

// --- krew's validation rules -----------------------------------------------------------------

fn is_semver_v(version: &str) -> bool {
    let Some(rest) = version.strip_prefix('v') else {
        return false;
    };
    let core = rest.split(['-', '+']).next().unwrap_or_default();
    let (pre, build) = {
        let after = &rest[core.len()..];
        match after.split_once('+') {
            Some((p, b)) => (p, Some(b)),
            None => (after, None),
        }
    };
    let ident_ok = |s: &str| {
        !s.is_empty()
            && s.split('.')
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && (p.len() == 1 || !p.starts_with('0'))
        })
        && (pre.is_empty() || pre.strip_prefix('-').is_some_and(ident_ok))
        && build.is_none_or(ident_ok)
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn selector_matches(selector: &Value, os: &str, arch: &str) -> bool {
    let labels = [("os", os), ("arch", arch)];
    let value_of = |key: &str| labels.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let labels_ok = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| value_of(k) == v.as_str()));
    let exprs_ok = selector["matchExpressions"].as_array().is_none_or(|exprs| {
        exprs.iter().all(|e| {
            let actual = e["key"].as_str().and_then(value_of);
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|v| v.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e["operator"].as_str() {
                Some("In") => actual.is_some_and(|a| values.contains(&a)),
                Some("NotIn") => actual.is_none_or(|a| !values.contains(&a)),
                Some("Exists") => actual.is_some(),
                Some("DoesNotExist") => actual.is_none(),
                _ => false,
            }
        })
    });
    labels_ok && exprs_ok
}

/// Checks a manifest (parsed from YAML) against krew's rules, as `validate-krew-manifest` does
/// without downloading: every problem found, empty when valid. `file_stem` is the manifest's
/// file name without `.yaml`.
pub fn validate(manifest: &Value, file_stem: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut problem = |p: String| problems.push(p);
    if manifest["apiVersion"] != API_VERSION {
        problem(format!("apiVersion must be {API_VERSION}"));
    }
    if manifest["kind"] != "Plugin" {
        problem("kind must be Plugin".to_owned());
    }
    let name = manifest["metadata"]["name"].as_str().unwrap_or_default();
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    {
        problem(format!("metadata.name {name:?} is not a valid plugin name"));
    }
    if name != file_stem {
        problem(format!(
            "metadata.name {name:?} differs from the file name {file_stem:?}.yaml"
        ));
    }
    let spec = &manifest["spec"];
    let version = spec["version"].as_str().unwrap_or_default();
    if !is_semver_v(version) {
        problem(format!(
            "spec.version {version:?} is not a v-prefixed semantic version"
        ));
    }
    if spec["shortDescription"]
        .as_str()
        .is_none_or(|s| s.trim().is_empty())
    {
        problem("spec.shortDescription is empty".to_owned());
    }
    if spec["homepage"].as_str().is_none_or(str::is_empty) {
        problem("spec.homepage is empty".to_owned());
    }
    let platforms = spec["platforms"].as_array().cloned().unwrap_or_default();
    if platforms.is_empty() {
        problem("spec.platforms is empty".to_owned());
    }
    for (i, p) in platforms.iter().enumerate() {
        let at = format!("spec.platforms[{i}]");
        if p["uri"].as_str().is_none_or(str::is_empty) {
            problem(format!("{at}.uri has to be set"));
        }
        let sha = p["sha256"].as_str().unwrap_or_default();
        if !is_sha256(sha) {
            problem(format!(
                "{at}.sha256 {sha:?} is not 64 lowercase hexadecimal digits"
            ));
        }
        if p["bin"].as_str().is_none_or(str::is_empty) {
            problem(format!("{at}.bin has to be set"));
        }
        match p.get("files") {
            None => {}
            Some(Value::Array(files)) if !files.is_empty() => {
                for (j, f) in files.iter().enumerate() {
                    if f["from"].as_str().is_none_or(str::is_empty)
                        || f["to"].as_str().is_none_or(str::is_empty)
                    {
                        problem(format!("{at}.files[{j}] needs `from` and `to`"));
                    }
                }
            }
            Some(_) => problem(format!("{at}.files has to be unspecified or non-empty")),
        }
        let selector = &p["selector"];
        let labels = selector["matchLabels"].as_object();
        let exprs = selector["matchExpressions"].as_array();
        if labels.is_none_or(|l| l.is_empty()) && exprs.is_none_or(|e| e.is_empty()) {
            problem(format!("{at}.selector is missing or empty"));
        }
        let keys = labels.into_iter().flat_map(|l| l.keys().cloned()).chain(
            exprs
                .into_iter()
                .flatten()
                .filter_map(|e| e["key"].as_str().map(str::to_owned)),
        );
        for key in keys {
            if key != "os" && key != "arch" {
                problem(format!(
                    "{at}.selector uses key {key:?}; only os and arch are supported"
                ));
            }
        }
    }
    for (os, arch) in KNOWN_PLATFORMS {
        let matching: Vec<usize> = platforms
            .iter()
            .enumerate()
            .filter(|(_, p)| selector_matches(&p["selector"], os, arch))
            .map(|(i, _)| i)
            .collect();
        if matching.len() > 1 {
            problem(format!(
                "platforms {matching:?} overlap: all of them match {os}/{arch}"
            ));
        }
    }
    problems
}

/// Checks one platform's archive against its entry: the sha256, a LICENSE file, every
/// `files.from` and the `bin` present after the file operations.
pub fn validate_archive(platform: &Value, archive: &[u8]) -> Vec<String> {
    let mut problems = Vec::new();
    let sha = sha256_hex(archive);
    if platform["sha256"].as_str() != Some(sha.as_str()) {
        problems.push(format!(
            "sha256 {} does not match the archive's {sha}",
            platform["sha256"]
        ));
    }
    let files = match read_archive(archive) {
        Ok(f) => f,
        Err(e) => return vec![e],
    };
    if !files.keys().any(|p| {
        let base = p.rsplit('/').next().unwrap_or(p);
        base == "LICENSE" || base.starts_with("LICENSE.") || base == "LICENCE"
    }) {
        problems.push("the archive has no LICENSE file".to_owned());
    }
    for op in platform["files"].as_array().into_iter().flatten() {
        let from = op["from"].as_str().unwrap_or_default();
        if !files.keys().any(|p| glob_match(from, p)) {
            problems.push(format!(
                "files.from {from:?} matches nothing in the archive"
            ));
        }
    }
    let bin = platform["bin"].as_str().unwrap_or_default();
    match files.get(bin) {
        Some((_, mode)) if mode & 0o111 != 0 => {}
        Some(_) => problems.push(format!("bin {bin} is not executable in the archive")),
        None => problems.push(format!("bin {bin} is not in the archive")),
    }
    problems
}

/// krew's `files.from` patterns: a path, or a glob with `*` in its last segment.
fn glob_match(pattern: &str, path: &str) -> bool {
    let pattern = pattern.trim_start_matches("./");
    if !pattern.contains('*') {
        return pattern == path || path.starts_with(&format!("{}/", pattern.trim_end_matches('/')));
    }
    let (prefix, suffix) = pattern.split_once('*').unwrap_or((pattern, ""));
    path.starts_with(prefix) && path.ends_with(suffix) && path.len() >= prefix.len() + suffix.len()
}

/// Installs `archive` the way `kubectl krew install --manifest M --archive A` lays it out under
/// `krew_root`: the file operations into `store/<name>/<version>/`, and `bin/kubectl-<name>`
/// a symlink to the platform's `bin` there. Returns the symlink.
pub fn install(
    krew_root: &Path,
    manifest: &Value,
    platform: &Value,
    archive: &[u8],
) -> Result<PathBuf, String> {
    let name = manifest["metadata"]["name"]
        .as_str()
        .ok_or("no metadata.name")?;
    let version = manifest["spec"]["version"]
        .as_str()
        .ok_or("no spec.version")?;
    let store = krew_root.join("store").join(name).join(version);
    std::fs::create_dir_all(&store)
        .map_err(|e| format!("cannot create {}: {e}", store.display()))?;
    let files = read_archive(archive)?;
    for op in platform["files"].as_array().into_iter().flatten() {
        let from = op["from"].as_str().unwrap_or_default();
        let to = op["to"].as_str().unwrap_or(".");
        for (path, (content, mode)) in files.iter().filter(|(p, _)| glob_match(from, p)) {
            let base = path.rsplit('/').next().unwrap_or(path);
            let dest = if to == "." {
                store.join(base)
            } else {
                store.join(to).join(base)
            };
            if let Some(parent) = dest.parent() {
                std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            std::fs::write(&dest, content)
                .map_err(|e| format!("cannot write {}: {e}", dest.display()))?;
            set_mode(&dest, *mode)?;
        }
    }
    let bin = platform["bin"].as_str().ok_or("no bin")?;
    let target = store.join(bin);
    if !target.exists() {
        return Err(format!(
            "bin {bin} was not installed into {}",
            store.display()
        ));
    }
    let bin_dir = krew_root.join("bin");
    std::fs::create_dir_all(&bin_dir).map_err(|e| e.to_string())?;
    let link = bin_dir.join(format!("kubectl-{name}"));
    symlink(&target, &link)?;
    Ok(link)
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o777))
        .map_err(|e| format!("cannot set the mode of {}: {e}", path.display()))
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) -> Result<(), String> {
    Ok(())
}

#[cfg(unix)]
pub fn symlink(target: &Path, link: &Path) -> Result<(), String> {
    std::os::unix::fs::symlink(target, link).map_err(|e| {
        format!(
            "cannot link {} to {}: {e}",
            link.display(),
            target.display()
        )
    })
}

#[cfg(not(unix))]
pub fn symlink(target: &Path, link: &Path) -> Result<(), String> {
    std::fs::copy(target, link).map(|_| ()).map_err(|e| {
        format!(
            "cannot copy {} to {}: {e}",
            target.display(),
            link.display()
        )
    })
}
