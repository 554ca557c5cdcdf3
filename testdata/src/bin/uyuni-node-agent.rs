//! `uyuni-node-agent`: the kubelet stand-in of the real control plane (see `agent`).
//! `scripts/cluster.sh up` starts it; it runs until SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use uyuni_testdata::agent::{self, AgentConfig};
use uyuni_testdata::{Scenario, scenarios};

#[derive(Debug, Parser)]
#[command(
    name = "uyuni-node-agent",
    about = "A node of the real control plane: registers a Node, plays the pods bound to it with a scenario, serves their logs"
)]
struct Args {
    /// The node's kubeconfig (user system:node:NAME, group system:nodes).
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The kubeconfig that reads owner Jobs/ReplicaSets and impersonates pods' ServiceAccounts
    /// for side effects; defaults to --kubeconfig.
    #[arg(long)]
    director_kubeconfig: Option<PathBuf>,
    #[arg(long, default_value = "node0")]
    node_name: String,
    /// A scenario (JSON or YAML, see the `scenario` module); default: the demo's migration.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Where the kubelet endpoint (logs) listens; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The serving certificate (PEM), signed by the CA the apiserver's
    /// --kubelet-certificate-authority names.
    #[arg(long)]
    tls_cert: PathBuf,
    #[arg(long)]
    tls_key: PathBuf,
    /// Clients (the apiserver) must present a certificate chained to this CA.
    #[arg(long)]
    client_ca: PathBuf,
    /// Where pods annotated `uyuni.test/execute: "true"` run their commands (a working
    /// directory per container, a directory per emptyDir); default: a new directory under the
    /// system's temp dir. Not an isolation: the commands run as this agent's user.
    #[arg(long)]
    sandbox_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        // cluster.sh sends stderr to a log file: colours only on a terminal.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let scenario = match &args.scenario {
        None => scenarios::migration(),
        Some(path) => match std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the scenario {}: {e}", path.display()))
            .and_then(|text| Scenario::parse(&text).map_err(|e| format!("{}: {e}", path.display())))
        {
            Ok(s) => s,
            Err(e) => {
                eprintln!("uyuni-node-agent: {e}");
                return ExitCode::from(2);
            }
        },
    };
    let config = AgentConfig {
        kubeconfig: args.kubeconfig,
        director_kubeconfig: args.director_kubeconfig,
        node_name: args.node_name,
        scenario,
        listen: args.listen,
        tls_cert: args.tls_cert,
        tls_key: args.tls_key,
        client_ca: args.client_ca,
        sandbox_dir: args.sandbox_dir,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("uyuni-node-agent: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(agent::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("uyuni-node-agent: {e:#}");
            ExitCode::FAILURE
        }
    }
}
