//! `uyuni-cluster-addons`: the add-ons of the real control plane (`scripts/cluster.sh`): the
//! distribution's objects (CRDs, IngressClasses, cert-manager's namespace and Deployments, the
//! default StorageClass `local-path`), a volume provisioner and a cert-manager stand-in, all
//! through the API with the given kubeconfig. See `uyuni_testdata::addons`.
//!
//! Prints `addons ready` on stdout once the objects are in place (a launcher waits for that
//! line), then runs until SIGINT/SIGTERM. Logs go to stderr.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::Parser;
use uyuni_testdata::Flavour;
use uyuni_testdata::addons::{self, AddonsConfig, BindingMode};

#[derive(Parser)]
#[command(
    name = "uyuni-cluster-addons",
    about = "Distribution objects, a volume provisioner and a cert-manager stand-in for the real control plane"
)]
struct Cli {
    /// The cluster admin's kubeconfig (scripts/cluster.sh writes DIR/kubeconfig).
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Cluster flavour whose objects to create: k3s, rke2 or plain.
    #[arg(long, default_value = "k3s")]
    flavour: Flavour,
    /// Install cert-manager (CRDs, namespace, Deployments) and run its stand-in.
    #[arg(long)]
    cert_manager: bool,
    /// Where volumes' directories are created (created if missing).
    #[arg(long)]
    volumes_dir: PathBuf,
    /// The upstream CRD files (default: as uyuni-sim finds them, UYUNI_SIM_CRDS_DIR or
    /// ../shared/schemas/crds next to the checkout).
    #[arg(long)]
    crds_dir: Option<PathBuf>,
    /// volumeBindingMode of the default StorageClass: WaitForFirstConsumer (as k3s) or Immediate.
    #[arg(long, default_value = "WaitForFirstConsumer")]
    binding_mode: BindingMode,
    /// Milliseconds between two reconcile passes without an event (the retry interval).
    #[arg(long, default_value_t = addons::DEFAULT_RESYNC.as_millis() as u64)]
    resync_ms: u64,
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot listen for SIGTERM")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("cannot listen for SIGINT")?,
        _ = term.recv() => {}
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    std::fs::create_dir_all(&cli.volumes_dir).with_context(|| {
        format!(
            "cannot create the volumes directory {}: choose a writable --volumes-dir",
            cli.volumes_dir.display()
        )
    })?;
    // Absolute, so that PVs' hostPaths are, and the provisioner recognises its directories.
    let volumes_dir = std::fs::canonicalize(&cli.volumes_dir)
        .with_context(|| format!("cannot resolve {}", cli.volumes_dir.display()))?;
    let config = AddonsConfig {
        flavour: cli.flavour,
        cert_manager: cli.cert_manager,
        volumes_dir,
        crds_dir: cli
            .crds_dir
            .unwrap_or_else(uyuni_testdata::cluster::default_crds_dir),
        binding_mode: cli.binding_mode,
        resync: std::time::Duration::from_millis(cli.resync_ms),
    };
    let client = addons::client(&cli.kubeconfig).await?;
    let ready = || {
        let mut out = std::io::stdout();
        // The launcher reads this line; if stdout is gone there is nobody to tell.
        let _ = writeln!(out, "addons ready");
        let _ = out.flush();
    };
    tokio::select! {
        r = addons::run(client, config, ready) => r.context("uyuni-cluster-addons stopped"),
        r = wait_for_signal() => r,
    }
}
