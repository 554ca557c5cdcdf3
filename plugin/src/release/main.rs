//! `uyuni-release`: builds the release archive of kubectl-uyuni for this platform and renders
//! the krew manifest `plugins/uyuni.yaml` from the template `.krew.yaml`, checked against
//! krew's rules. `scripts/release.sh` builds the plugin in release mode and runs this.

mod krew;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::Parser;

/// Builds dist/kubectl-uyuni_VERSION_OS_ARCH.tar.gz (kubectl-uyuni, kubectl_complete-uyuni,
/// LICENSE, README.md) and renders the krew manifest with the sha256 of every archive in dist/.
#[derive(Debug, Parser)]
#[command(name = "uyuni-release")]
struct Args {
    /// The release version, `v`-prefixed semver [default: v + the crate's version].
    #[arg(long)]
    version: Option<String>,
    /// The built plugin to package [default: target/release/kubectl-uyuni].
    #[arg(long, value_name = "FILE")]
    binary: Option<PathBuf>,
    /// Where archives are written and looked up (archives of other platforms, built
    /// elsewhere, may be put there first).
    #[arg(long, value_name = "DIR")]
    dist: Option<PathBuf>,
    /// Only render the manifest from the archives already in --dist.
    #[arg(long)]
    no_archive: bool,
    /// The repository checkout (LICENSE, README.md, the template) [default: this source tree].
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Where to write the manifest [default: ROOT/plugins/uyuni.yaml].
    #[arg(long, value_name = "FILE")]
    manifest: Option<PathBuf>,
    /// Modification time of the archive's files (reproducible builds) [default:
    /// $SOURCE_DATE_EPOCH, else 0].
    #[arg(long, value_name = "SECONDS")]
    mtime: Option<u64>,
}

fn read(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

fn run(args: Args) -> Result<()> {
    let root = args
        .root
        .clone()
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
    let version = args
        .version
        .clone()
        .unwrap_or_else(|| format!("v{}", env!("CARGO_PKG_VERSION")));
    let dist = args.dist.clone().unwrap_or_else(|| root.join("dist"));
    std::fs::create_dir_all(&dist).with_context(|| format!("cannot create {}", dist.display()))?;

    if !args.no_archive {
        let binary = args
            .binary
            .clone()
            .unwrap_or_else(|| root.join("target/release/kubectl-uyuni"));
        if !binary.is_file() {
            bail!(
                "{} does not exist: build it first with `cargo build --release -p kubectl-uyuni`, or pass --binary",
                binary.display()
            );
        }
        let mtime = args
            .mtime
            .or_else(|| std::env::var("SOURCE_DATE_EPOCH").ok()?.parse().ok())
            .unwrap_or(0);
        let files = vec![
            (krew::BIN, read(&binary)?, true),
            (
                krew::COMPLETER,
                read(&root.join("plugin").join(krew::COMPLETER))?,
                true,
            ),
            ("LICENSE", read(&root.join("LICENSE"))?, false),
            ("README.md", read(&root.join("README.md"))?, false),
        ];
        let archive = krew::build_archive(&files, mtime).map_err(anyhow::Error::msg)?;
        let (os, arch) = krew::this_platform();
        let path = dist.join(krew::archive_name(&version, &os, &arch));
        std::fs::write(&path, &archive)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!(
            "wrote {} (sha256 {})",
            path.display(),
            krew::sha256_hex(&archive)
        );
    }

    let mut archives = BTreeMap::new();
    let mut contents = BTreeMap::new();
    for entry in
        std::fs::read_dir(&dist).with_context(|| format!("cannot list {}", dist.display()))?
    {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".tar.gz") {
            let bytes = read(&entry.path())?;
            archives.insert(name.clone(), krew::sha256_hex(&bytes));
            contents.insert(name, bytes);
        }
    }
    let template_path = root.join(".krew.yaml");
    let template = std::fs::read_to_string(&template_path)
        .with_context(|| format!("cannot read the template {}", template_path.display()))?;
    let (manifest_text, skipped) =
        krew::render_manifest(&template, &version, &archives).map_err(anyhow::Error::msg)?;
    for file in &skipped {
        eprintln!(
            "note: no {file} in {}: that platform is left out of the manifest",
            dist.display()
        );
    }

    // Check what is about to be published with krew's rules.
    let manifest_path = args
        .manifest
        .clone()
        .unwrap_or_else(|| root.join("plugins").join(format!("{}.yaml", krew::PLUGIN)));
    let stem = manifest_path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parsed: serde_json::Value =
        serde_saphyr::from_str(&manifest_text).context("the rendered manifest is not YAML")?;
    let mut problems = krew::validate(&parsed, &stem);
    for platform in parsed["spec"]["platforms"].as_array().into_iter().flatten() {
        let uri = platform["uri"].as_str().unwrap_or_default();
        let file = uri.rsplit('/').next().unwrap_or_default();
        if let Some(bytes) = contents.get(file) {
            problems.extend(
                krew::validate_archive(platform, bytes)
                    .into_iter()
                    .map(|p| format!("{file}: {p}")),
            );
        }
    }
    if !problems.is_empty() {
        bail!(
            "the manifest breaks krew's rules:\n  {}",
            problems.join("\n  ")
        );
    }
    if let Some(parent) = manifest_path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::write(&manifest_path, manifest_text)
        .with_context(|| format!("cannot write {}", manifest_path.display()))?;
    eprintln!("wrote {}", manifest_path.display());
    Ok(())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
