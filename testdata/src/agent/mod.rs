//! `uyuni-node-agent`: the real control plane's stand-in for a kubelet. It registers a Node,
//! renews its Lease, plays the pods the scheduler binds to it with a [`Scenario`] exactly as
//! `uyuni-sim` does (no container runs; states, exit codes, logs and side effects come from
//! the scenario, and so does readiness: no probe is run), and serves their logs on the
//! kubelet's `/containerLogs` endpoint, where `kubectl logs` reaches through the apiserver.
//! A pod annotated `uyuni.test/execute: "true"` is not played but run: its containers'
//! commands run on the host as child processes in a scratch directory (`--sandbox-dir`), with
//! no isolation beyond that directory, since there is no container runtime (see `exec`).
//!
//! Two credentials: the node's own (`--kubeconfig`, user `system:node:NAME` in `system:nodes`,
//! held to its Node, Lease and pods by the Node authorizer and NodeRestriction, as a kubelet
//! is), and a director (`--director-kubeconfig`) for what no kubelet does: reading the owner
//! Jobs and ReplicaSets to pick a script, and acting as a pod's ServiceAccount (impersonation)
//! for the scenario's side effects, so that RBAC decides them as it would a real script.

pub mod exec;
pub mod logs;
pub mod node;
pub mod pods;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::scenario::Scenario;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub kubeconfig: PathBuf,
    /// Defaults to `kubeconfig`.
    pub director_kubeconfig: Option<PathBuf>,
    pub node_name: String,
    pub scenario: Scenario,
    pub listen: SocketAddr,
    pub tls_cert: PathBuf,
    pub tls_key: PathBuf,
    pub client_ca: PathBuf,
    /// Where executed pods run (`exec`); `None`: a new directory under the system's temp dir.
    pub sandbox_dir: Option<PathBuf>,
}

async fn kube_config(path: &PathBuf) -> anyhow::Result<kube::Config> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("the kubeconfig {} is not usable", path.display()))
}

fn read(path: &PathBuf, what: &str) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {what} {}", path.display()))
}

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(config: AgentConfig) -> anyhow::Result<()> {
    let node_config = kube_config(&config.kubeconfig).await?;
    let node_client =
        Client::try_from(node_config).context("cannot build the node's API client")?;
    let director_config = kube_config(
        config
            .director_kubeconfig
            .as_ref()
            .unwrap_or(&config.kubeconfig),
    )
    .await?;
    let director = Client::try_from(director_config.clone())
        .context("cannot build the director's API client")?;

    let tls = logs::tls_config(
        &read(&config.tls_cert, "the serving certificate (--tls-cert)")?,
        &read(&config.tls_key, "the serving key (--tls-key)")?,
        &read(&config.client_ca, "the client CA (--client-ca)")?,
    )?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (--listen): is the port in use?",
                config.listen
            )
        })?;
    let port = listener
        .local_addr()
        .context("the log server's address")?
        .port();
    let sandbox_dir = match &config.sandbox_dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join(format!("uyuni-node-agent-{}", std::process::id())),
    };
    std::fs::create_dir_all(&sandbox_dir).with_context(|| {
        format!(
            "cannot create the sandbox directory {} (--sandbox-dir)",
            sandbox_dir.display()
        )
    })?;
    let store = Arc::new(logs::LogStore::default());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(logs::serve(listener, tls, store.clone(), stopped));

    let nodes: Api<Node> = Api::all(node_client.clone());
    let node = node::register(&nodes, &config.node_name, port).await?;
    tracing::info!(
        "Node {} registered, logs served on port {port}",
        config.node_name
    );
    let leases: Api<Lease> = Api::namespaced(node_client.clone(), "kube-node-lease");
    let lease_node = node.clone();
    let heartbeat_nodes = nodes.clone();
    let node_name = config.node_name.clone();
    let lease_task = tokio::spawn(async move {
        for round in 1u64.. {
            if let Err(e) = node::renew_lease(&leases, &lease_node).await {
                tracing::warn!("{e:#} (trying again in {} s)", node::LEASE_RENEW_SECONDS);
            }
            // Every ~5 min, as kubelet's nodeStatusReportFrequency.
            if round.is_multiple_of(30)
                && let Err(e) = node::heartbeat(&heartbeat_nodes, &node_name).await
            {
                tracing::warn!("{e:#}");
            }
            tokio::time::sleep(std::time::Duration::from_secs(node::LEASE_RENEW_SECONDS)).await;
        }
    });
    let player = Arc::new(pods::Player::new(
        config.node_name.clone(),
        node_client,
        director,
        director_config,
        config.scenario,
        store,
        sandbox_dir.clone(),
    ));
    let pods_task = tokio::spawn(player.clone().run());

    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: stopping"),
        _ = int.recv() => tracing::info!("SIGINT: stopping"),
    }
    let _ = stop.send(true);
    lease_task.abort();
    pods_task.abort();
    player.stop_all(5).await;
    // The default sandbox is the agent's own: it goes with it (a given --sandbox-dir stays).
    if config.sandbox_dir.is_none()
        && let Err(e) = std::fs::remove_dir_all(&sandbox_dir)
    {
        tracing::warn!("cannot remove the sandbox {}: {e}", sandbox_dir.display());
    }
    let _ = server.await;
    Ok(())
}
