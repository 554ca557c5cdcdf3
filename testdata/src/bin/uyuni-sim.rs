//! `uyuni-sim serve`: runs the simulated Kubernetes cluster until SIGINT/SIGTERM.
//!
//! The first line on stdout is `KUBECONFIG=<path>`; everything else goes to stderr.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};
use uyuni_testdata::{Flavour, Scenario, SimCluster, SimConfig, scenarios};

#[derive(Parser)]
#[command(
    name = "uyuni-sim",
    about = "A simulated Kubernetes API server for kubectl-uyuni"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the server and write a kubeconfig for it.
    Serve(ServeArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Cluster flavour: k3s, rke2 or plain.
    #[arg(long, default_value = "k3s")]
    flavour: Flavour,
    /// Do not install cert-manager.
    #[arg(long)]
    no_cert_manager: bool,
    /// Do not mark the local-path StorageClass as the default.
    #[arg(long)]
    no_default_storage_class: bool,
    /// Kubernetes minor version to report (the kubectl dispatcher picks its kubectl by it).
    #[arg(long, default_value_t = 33)]
    minor: u32,
    /// Scenario file (JSON or YAML), or builtin:NAME (builtin:migration).
    #[arg(long)]
    scenario: Option<String>,
    /// Directory for the kubeconfig (a fresh temp dir if absent; kept after exit).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Append every request as a JSON line to this file.
    #[arg(long)]
    request_log: Option<PathBuf>,
    /// On exit, write every object clients wrote into this directory (one JSON file each).
    #[arg(long)]
    dump_written: Option<PathBuf>,
    /// The kubeconfig context's namespace.
    #[arg(long)]
    namespace: Option<String>,
    /// Milliseconds added before the answer to every resource request (watches' setup
    /// included): a remote API server. Replaces the scenario's `latencyMs`.
    #[arg(long, value_name = "MS")]
    latency: Option<u64>,
}

fn load_scenario(spec: &str) -> anyhow::Result<Scenario> {
    if let Some(name) = spec.strip_prefix("builtin:") {
        return scenarios::builtin(name).with_context(|| {
            format!(
                "unknown built-in scenario {name:?}; known: {}",
                scenarios::BUILTIN.join(", ")
            )
        });
    }
    let text = std::fs::read_to_string(spec).with_context(|| format!("cannot read {spec}"))?;
    Scenario::parse(&text).map_err(anyhow::Error::msg)
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

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let scenario = match &args.scenario {
        Some(s) => load_scenario(s)?,
        None => Scenario::default(),
    };
    // A temp dir given to the SimCluster would vanish on exit; the user may still want it.
    let dir = match args.dir {
        Some(d) => d,
        None => tempfile::Builder::new()
            .prefix("uyuni-sim-")
            .tempdir()
            .context("cannot create a temp dir")?
            .keep(),
    };
    let request_log = args
        .request_log
        .or_else(|| Some(dir.join("requests.jsonl")));
    let sim = SimCluster::start(SimConfig {
        flavour: args.flavour,
        cert_manager: !args.no_cert_manager,
        default_storage_class: !args.no_default_storage_class,
        server_minor: args.minor,
        scenario,
        namespace: args.namespace,
        dir: Some(dir),
        port: args.port,
        request_log_file: request_log.clone(),
        latency_ms: args.latency,
        ..SimConfig::default()
    })
    .await
    .map_err(anyhow::Error::new)?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "KUBECONFIG={}", sim.kubeconfig_path().display())?;
        out.flush()?;
    }
    eprintln!("uyuni-sim: serving {} (Ctrl-C to stop)", sim.url());
    if let Some(log) = &request_log {
        eprintln!("uyuni-sim: request log in {}", log.display());
    }
    wait_for_signal().await?;
    if let Some(dir) = &args.dump_written {
        let n = sim
            .dump_written(dir)
            .with_context(|| format!("cannot write objects into {}", dir.display()))?;
        eprintln!("uyuni-sim: wrote {n} objects into {}", dir.display());
    }
    sim.shutdown().await;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match cli.command {
        Command::Serve(args) => {
            if args.minor < 20 {
                bail!("--minor {} is too old; use 27 to 37", args.minor);
            }
            runtime.block_on(serve(args))
        }
    }
}
