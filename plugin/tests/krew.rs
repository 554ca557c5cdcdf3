//! The release: `uyuni-release` builds this platform's archive and the krew manifest; the
//! manifest passes krew's validation rules; the archive, installed the way
//! `kubectl krew install --manifest --archive` lays it out, runs through the real kubectl.

// The release binary's module, under its own name inside this test module of the same name.
#[allow(clippy::module_inception)]
#[path = "../src/release/krew.rs"]
mod krew;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

const VERSION: &str = "v0.1.0";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

struct Release {
    dir: tempfile::TempDir,
    manifest: Value,
    archive: Vec<u8>,
}

/// Runs `uyuni-release` into a temp dir. The packaged "binary" is a two-line script that execs
/// the test build of the plugin: gzip of the 60 MB debug build takes half a minute per archive
/// in a debug build of the release tool, and what is checked here (layout, modes, checksums,
/// kubectl finding and running the plugin) does not depend on the file's size.
fn release() -> Release {
    let dir = tempfile::tempdir().expect("tempdir");
    let stand_in = dir.path().join("kubectl-uyuni");
    std::fs::write(
        &stand_in,
        format!(
            "#!/bin/sh\nexec '{}' \"$@\"\n",
            assert_cmd::cargo::cargo_bin("kubectl-uyuni").display()
        ),
    )
    .expect("write the stand-in");
    let out = Command::new(assert_cmd::cargo::cargo_bin("uyuni-release"))
        .args(["--version", VERSION, "--binary"])
        .arg(&stand_in)
        .arg("--dist")
        .arg(dir.path().join("dist"))
        .arg("--manifest")
        .arg(dir.path().join("plugins/uyuni.yaml"))
        .output()
        .expect("uyuni-release runs");
    assert!(
        out.status.success(),
        "uyuni-release failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(dir.path().join("plugins/uyuni.yaml")).expect("manifest");
    let manifest: Value = serde_saphyr::from_str(&text).expect("the manifest is YAML");
    let (os, arch) = krew::this_platform();
    let archive = std::fs::read(
        dir.path()
            .join("dist")
            .join(krew::archive_name(VERSION, &os, &arch)),
    )
    .expect("the archive for this platform");
    Release {
        dir,
        manifest,
        archive,
    }
}

fn this_platform_entry(manifest: &Value) -> Value {
    let (os, arch) = krew::this_platform();
    manifest["spec"]["platforms"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["selector"]["matchLabels"] == json!({"os": os, "arch": arch}))
        .cloned()
        .expect("an entry for this platform")
}

#[test]
fn the_generated_manifest_passes_krews_rules() {
    let r = release();
    assert_eq!(krew::validate(&r.manifest, "uyuni"), Vec::<String>::new());
    let m = &r.manifest;
    assert_eq!(m["apiVersion"], krew::API_VERSION);
    assert_eq!(m["kind"], "Plugin");
    assert_eq!(m["metadata"]["name"], "uyuni");
    assert_eq!(m["spec"]["version"], VERSION);
    let platform = this_platform_entry(m);
    let sha = platform["sha256"].as_str().expect("sha256");
    assert_eq!(sha, krew::sha256_hex(&r.archive));
    assert_eq!(sha.len(), 64);
    assert!(
        sha.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    );
    assert_eq!(platform["bin"], "kubectl-uyuni");
    let (os, arch) = krew::this_platform();
    assert!(
        platform["uri"]
            .as_str()
            .is_some_and(|u| u.ends_with(&format!(
                "/{VERSION}/kubectl-uyuni_{VERSION}_{os}_{arch}.tar.gz"
            ))),
        "{platform}"
    );
    // Only platforms with a built archive are listed: this one.
    assert_eq!(m["spec"]["platforms"].as_array().map(Vec::len), Some(1));
    assert_eq!(
        krew::validate_archive(&platform, &r.archive),
        Vec::<String>::new()
    );

    let files = krew::read_archive(&r.archive).expect("a tar.gz");
    let names: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "LICENSE",
            "README.md",
            "kubectl-uyuni",
            "kubectl_complete-uyuni"
        ]
    );
    assert!(String::from_utf8_lossy(&files["LICENSE"].0).contains("Apache License"));
    assert_eq!(
        files["kubectl-uyuni"].1 & 0o111,
        0o111,
        "the plugin is executable"
    );
    assert_eq!(files["kubectl_complete-uyuni"].1 & 0o111, 0o111);
    for op in platform["files"].as_array().expect("files") {
        let from = op["from"].as_str().expect("from");
        assert!(
            files.contains_key(from),
            "files.from {from} not in the archive"
        );
    }
}

#[test]
fn the_archive_is_reproducible() {
    let a = release();
    let b = release();
    assert_eq!(a.archive, b.archive);
}

#[test]
fn the_template_covers_four_platforms_without_overlap() {
    let template = std::fs::read_to_string(root().join(".krew.yaml")).expect("template");
    let archives: BTreeMap<String, String> = [
        ("linux", "amd64"),
        ("linux", "arm64"),
        ("darwin", "amd64"),
        ("darwin", "arm64"),
    ]
    .iter()
    .map(|(os, arch)| (krew::archive_name("v1.2.3", os, arch), "a".repeat(64)))
    .collect();
    let (text, skipped) = krew::render_manifest(&template, "v1.2.3", &archives).expect("renders");
    assert!(skipped.is_empty(), "{skipped:?}");
    let manifest: Value = serde_saphyr::from_str(&text).expect("YAML");
    assert_eq!(krew::validate(&manifest, "uyuni"), Vec::<String>::new());
    assert_eq!(
        manifest["spec"]["platforms"].as_array().map(Vec::len),
        Some(4)
    );
    assert!(!text.contains("{{"), "unrendered template syntax:\n{text}");
}

#[test]
fn the_committed_manifest_passes_krews_rules() {
    let path = root().join("plugins/uyuni.yaml");
    let text =
        std::fs::read_to_string(&path).expect("plugins/uyuni.yaml (scripts/release.sh writes it)");
    let manifest: Value = serde_saphyr::from_str(&text).expect("YAML");
    let stem = path.file_stem().and_then(|s| s.to_str()).expect("stem");
    assert_eq!(krew::validate(&manifest, stem), Vec::<String>::new());
}

/// The validator itself: each rule catches what it is for.
#[test]
fn the_validator_catches_each_broken_rule() {
    let r = release();
    let good = r.manifest.clone();
    let broken = |f: &dyn Fn(&mut Value)| {
        let mut m = good.clone();
        f(&mut m);
        krew::validate(&m, "uyuni").join("; ")
    };
    assert!(
        krew::validate(&good, "kubectl-uyuni")
            .join(";")
            .contains("file name")
    );
    assert!(
        broken(&|m| m["apiVersion"] = json!("krew.googlecontainertools.github.com/v1alpha1"))
            .contains("apiVersion")
    );
    assert!(broken(&|m| m["spec"]["version"] = json!("0.1.0")).contains("spec.version"));
    assert!(broken(&|m| m["spec"]["version"] = json!("v0.1")).contains("spec.version"));
    assert!(broken(&|m| m["spec"]["version"] = json!("v01.2.3")).contains("spec.version"));
    assert!(broken(&|m| m["spec"]["version"] = json!("v1.2.3-rc.1+build.5")).is_empty());
    assert!(
        broken(&|m| m["spec"]["platforms"][0]["sha256"] = json!("A".repeat(64))).contains("sha256")
    );
    assert!(
        broken(&|m| m["spec"]["platforms"][0]["sha256"] = json!("a".repeat(63))).contains("sha256")
    );
    assert!(
        broken(&|m| m["spec"]["platforms"][0]["selector"]["matchLabels"]["distro"] = json!("sles"))
            .contains("\"distro\"")
    );
    assert!(broken(&|m| m["spec"]["platforms"][0]["selector"] = json!({})).contains("selector"));
    assert!(broken(&|m| m["spec"]["platforms"][0]["files"] = json!([])).contains("files"));
    assert!(broken(&|m| m["spec"]["shortDescription"] = json!("")).contains("shortDescription"));
    // Two entries for one platform, or one matching everything on top of another, overlap.
    assert!(
        broken(&|m| {
            let p = m["spec"]["platforms"][0].clone();
            m["spec"]["platforms"].as_array_mut().expect("list").push(p);
        })
        .contains("overlap")
    );
    assert!(broken(&|m| {
        let mut p = m["spec"]["platforms"][0].clone();
        p["selector"] = json!({"matchExpressions": [{"key": "os", "operator": "In", "values": ["linux", "darwin"]}]});
        m["spec"]["platforms"].as_array_mut().expect("list").push(p);
    })
    .contains("overlap"));

    let platform = this_platform_entry(&good);
    let no_license = krew::build_archive(&[("kubectl-uyuni", b"#!/bin/sh\n".to_vec(), true)], 0)
        .expect("archive");
    let mut p = platform.clone();
    p["sha256"] = json!(krew::sha256_hex(&no_license));
    let problems = krew::validate_archive(&p, &no_license).join("; ");
    assert!(problems.contains("no LICENSE"), "{problems}");
    assert!(problems.contains("files.from \"README.md\""), "{problems}");
    assert!(
        krew::validate_archive(&platform, &no_license)
            .join(";")
            .contains("does not match")
    );
}

fn kubectl(path_dir: &Path, home: &Path) -> Command {
    let mut cmd = Command::new("kubectl");
    cmd.env(
        "PATH",
        format!(
            "{}:{}",
            path_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    )
    .env("HOME", home)
    .env("KUBECACHEDIR", home.join("cache"))
    .env_remove("KUBECONFIG")
    .env_remove("RUST_LOG");
    cmd
}

#[test]
fn installed_as_krew_does_it_runs_through_kubectl() {
    let r = release();
    let krew_root = r.dir.path().join("krew");
    let platform = this_platform_entry(&r.manifest);
    let link = krew::install(&krew_root, &r.manifest, &platform, &r.archive).expect("installs");
    let store = krew_root.join("store/uyuni").join(VERSION);
    assert_eq!(link, krew_root.join("bin/kubectl-uyuni"));
    assert_eq!(
        std::fs::read_link(&link).expect("a symlink"),
        store.join("kubectl-uyuni")
    );
    for f in krew::ARCHIVE_FILES {
        assert!(store.join(f).is_file(), "{f} not installed");
    }
    // The caveat's step for completion: link the completer next to the plugin.
    krew::symlink(
        &store.join("kubectl_complete-uyuni"),
        &krew_root.join("bin/kubectl_complete-uyuni"),
    )
    .expect("link the completer");

    let bin = krew_root.join("bin");
    let home = r.dir.path().join("home");
    std::fs::create_dir_all(&home).expect("home");

    let out = kubectl(&bin, &home)
        .args(["uyuni", "version"])
        .output()
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("kubectl-uyuni {}", env!("CARGO_PKG_VERSION"))),
        "{stdout}"
    );

    let out = kubectl(&bin, &home)
        .args(["plugin", "list"])
        .output()
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&link.display().to_string()),
        "kubectl plugin list does not show {}:\n{stdout}{}",
        link.display(),
        String::from_utf8_lossy(&out.stderr)
    );

    let out = kubectl(&bin, &home)
        .args(["__complete", "uyuni", ""])
        .output()
        .expect("kubectl runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.lines().any(|l| l.starts_with("migrate")), "{stdout}");
}

/// Where `scripts/cluster.sh build` puts `kubectl-krew` (krew v0.4.3 from its Go module).
fn real_krew() -> PathBuf {
    let cache = std::env::var_os("UYUNI_CONTROLPLANE_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").expect("HOME"))
                .join(".cache/kubectl-uyuni/controlplane")
        });
    cache.join("bin/kubectl-krew")
}

/// `kubectl ARGS…` with krew as `kubectl krew` and `$KREW_ROOT/bin` on PATH, offline.
fn with_krew(tools: &Path, krew_root: &Path, home: &Path) -> Command {
    let path = format!("{}:{}", krew_root.join("bin").display(), tools.display());
    let mut cmd = kubectl(Path::new(&path), home);
    // No look-up of krew's latest release on GitHub (cmd/krew/cmd/root.go at v0.4.3).
    cmd.env("KREW_ROOT", krew_root)
        .env("KREW_NO_UPGRADE_CHECK", "1")
        .stdin(std::process::Stdio::null());
    cmd
}

fn both(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The release installed by the real krew, offline, as a user would from a downloaded manifest
/// and archive; run through krew's link as `kubectl uyuni`; then uninstalled. The real krew also
/// checks the archive against the manifest's sha256 and refuses a mismatch.
#[test]
fn the_real_krew_installs_the_release_offline_runs_it_and_uninstalls_it() {
    if let Err(why) = uyuni_testdata::real::available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the real krew is needed in CI: {why}"
        );
        println!("install through the real krew NOT tested: {why}");
        return;
    }
    let krew_bin = real_krew();
    assert!(
        krew_bin.is_file(),
        "{} is missing: run `scripts/cluster.sh build`",
        krew_bin.display()
    );
    let r = release();
    let tools = r.dir.path().join("tools");
    let home = r.dir.path().join("home");
    let krew_root = r.dir.path().join("krew-root");
    std::fs::create_dir_all(&tools).expect("tools");
    std::fs::create_dir_all(&home).expect("home");
    std::os::unix::fs::symlink(&krew_bin, tools.join("kubectl-krew")).expect("link krew");
    let manifest = r.dir.path().join("plugins/uyuni.yaml");
    let (os, arch) = krew::this_platform();
    let archive = r
        .dir
        .path()
        .join("dist")
        .join(krew::archive_name(VERSION, &os, &arch));
    let krew_cmd = || with_krew(&tools, &krew_root, &home);

    // A manifest whose checksum does not match the archive: refused, nothing installed.
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    let sha = this_platform_entry(&r.manifest)["sha256"]
        .as_str()
        .expect("sha256")
        .to_owned();
    let wrong = r.dir.path().join("wrong.yaml");
    std::fs::write(&wrong, text.replace(&sha, &"f".repeat(64))).expect("write");
    let out = krew_cmd()
        .args(["krew", "install", "--manifest"])
        .arg(&wrong)
        .arg("--archive")
        .arg(&archive)
        .output()
        .expect("kubectl krew runs");
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        both(&out).contains("checksum does not match"),
        "{}",
        both(&out)
    );
    assert!(!krew_root.join("bin/kubectl-uyuni").exists());

    let out = krew_cmd()
        .args(["krew", "install", "--manifest"])
        .arg(&manifest)
        .arg("--archive")
        .arg(&archive)
        .output()
        .expect("kubectl krew runs");
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        both(&out).contains("Installed plugin: uyuni"),
        "{}",
        both(&out)
    );
    assert!(krew_root.join("receipts/uyuni.yaml").is_file());

    let out = krew_cmd()
        .args(["uyuni", "version"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("kubectl-uyuni {}", env!("CARGO_PKG_VERSION"))),
        "{}",
        both(&out)
    );
    // krew v0.4.3's uninstall (like list) refuses to run without a cloned plugin index
    // (`checkIndex` in cmd/krew/cmd/root.go: a directory under $KREW_ROOT/index with a .git);
    // a krew user has the default one from `kubectl krew update`. Offline, an empty git
    // repository stands in for it.
    let index = krew_root.join("index/default");
    std::fs::create_dir_all(&index).expect("index dir");
    let git = Command::new("git")
        .args(["init", "-q"])
        .arg(&index)
        .status()
        .expect("git runs");
    assert!(git.success());
    let out = krew_cmd()
        .args(["krew", "uninstall", "uyuni"])
        .output()
        .expect("runs");
    assert!(out.status.success(), "{}", both(&out));
    assert!(!krew_root.join("bin/kubectl-uyuni").exists());
    assert!(!krew_root.join("receipts/uyuni.yaml").exists());
    let out = krew_cmd()
        .args(["uyuni", "version"])
        .output()
        .expect("runs");
    assert!(
        !out.status.success(),
        "still runs after uninstall: {}",
        both(&out)
    );
}
