//! The command tree. Raw flags are parsed here once; `migrate.rs` turns them into the core's
//! validated parameters, and nothing else sees them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const KUBECTL: &str = "Kubectl flags";
const SSH: &str = "SSH to the source server";
const VOLUMES: &str = "Volumes";
const IMAGE: &str = "Image";
const OUTPUT: &str = "Preview and output";

/// Installs, migrates, upgrades and removes an Uyuni server on Kubernetes.
///
/// Run as `kubectl uyuni COMMAND`. kubectl's own flags (--kubeconfig, --context, -n, ...) go
/// after `uyuni`, not before it: kubectl refuses flags placed before a plugin's name.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-uyuni",
    bin_name = "kubectl uyuni",
    version,
    propagate_version = true
)]
pub struct Cli {
    #[command(flatten)]
    pub kube: KubeFlags,

    /// More output on stderr: -v info, -vv debug, -vvv trace (RUST_LOG also works).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true, help_heading = OUTPUT)]
    pub verbose: u8,

    /// Only errors on stderr.
    #[arg(short = 'q', long, global = true, help_heading = OUTPUT)]
    pub quiet: bool,

    /// Output format of the data printed on stdout.
    #[arg(short = 'o', long, value_enum, global = true, default_value = "human", value_name = "FORMAT", help_heading = OUTPUT)]
    pub output: OutputFormat,

    /// Colours: auto (on a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, value_enum, global = true, default_value = "auto", value_name = "WHEN", help_heading = OUTPUT)]
    pub color: ColorChoice,

    #[command(subcommand)]
    pub command: Command,
}

/// kubectl's global flags, with kubectl's meaning.
#[derive(Debug, Clone, Args)]
pub struct KubeFlags {
    /// Path to the kubeconfig file (default: $KUBECONFIG, which may list several files, else
    /// ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE", help_heading = KUBECTL)]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use.
    #[arg(long, global = true, value_name = "NAME", help_heading = KUBECTL)]
    pub context: Option<String>,

    /// The kubeconfig cluster to use.
    #[arg(long, global = true, value_name = "NAME", help_heading = KUBECTL)]
    pub cluster: Option<String>,

    /// Namespace of the Uyuni installation (default: the context's namespace, else `default`).
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE", help_heading = KUBECTL)]
    pub namespace: Option<String>,

    /// Timeout of a single API request, e.g. 30s or 1m (0: none).
    #[arg(long, global = true, value_name = "DURATION", help_heading = KUBECTL)]
    pub request_timeout: Option<String>,

    /// Do not verify the API server's certificate (insecure).
    #[arg(long, global = true, help_heading = KUBECTL)]
    pub insecure_skip_tls_verify: bool,

    /// User to impersonate.
    #[arg(long = "as", global = true, value_name = "USER", help_heading = KUBECTL)]
    pub as_user: Option<String>,

    /// Group to impersonate (repeatable).
    #[arg(long = "as-group", global = true, value_name = "GROUP", help_heading = KUBECTL)]
    pub as_group: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// For people.
    Human,
    /// JSON, stable field names (see the README).
    Json,
    /// YAML; for --dry-run, the intended manifests as a stream `kubectl apply -f -` accepts.
    Yaml,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DryRun {
    /// Computed locally from what the cluster holds now.
    Client,
    /// Also sent to the API server with dryRun=All.
    Server,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Migrate a classic (RPM-installed) Uyuni or SUSE Manager server into the cluster.
    ///
    /// Copies the source's data, database included, over SSH in a Job, and reads back what the
    /// Job found (timezone, PostgreSQL version, database settings, TLS material). Run it again
    /// after an interruption: it resumes where it stopped.
    Migrate(MigrateCmd),
    /// Print the client version.
    Version,
}

#[derive(Debug, Args)]
pub struct MigrateCmd {
    /// Fully qualified domain name of the source server.
    #[arg(value_name = "SOURCE_FQDN")]
    pub source: String,

    /// Copy the data while the source keeps serving; repeat it to catch up, then run without
    /// --prepare for the final copy (which stops the source's services).
    #[arg(long)]
    pub prepare: bool,

    /// SSH user on the source (needs passwordless sudo when not root).
    #[arg(long, default_value = "root", value_name = "USER", help_heading = SSH)]
    pub user: String,

    /// Private key without passphrase to log in to the source; stored in Secret
    /// uyuni-migration-key (reused when omitted).
    #[arg(long, value_name = "FILE", help_heading = SSH)]
    pub ssh_key_private: Option<PathBuf>,

    /// The matching public key.
    #[arg(long, value_name = "FILE", help_heading = SSH)]
    pub ssh_key_public: Option<PathBuf>,

    /// known_hosts file with the source's host key; stored in ConfigMap uyuni-migration-ssh
    /// (reused when omitted).
    #[arg(long = "ssh-knownhosts", value_name = "FILE", help_heading = SSH)]
    pub ssh_known_hosts: Option<PathBuf>,

    /// ssh_config file for the connection (optional).
    #[arg(long, value_name = "FILE", help_heading = SSH)]
    pub ssh_config: Option<PathBuf>,

    /// StorageClass of every volume (default: the cluster's default class).
    #[arg(long, value_name = "CLASS", help_heading = VOLUMES)]
    pub volumes_class: Option<String>,

    /// StorageClass of one volume, NAME=CLASS (repeatable).
    #[arg(long, value_name = "NAME=CLASS", help_heading = VOLUMES)]
    pub volume_class: Vec<String>,

    /// Size of the database volume (var-pgsql) [default: 50Gi].
    #[arg(long, value_name = "SIZE", help_heading = VOLUMES)]
    pub volumes_database_size: Option<String>,

    /// Size of the packages volume (var-spacewalk) [default: 100Gi].
    #[arg(long, value_name = "SIZE", help_heading = VOLUMES)]
    pub volumes_packages_size: Option<String>,

    /// Size of the web volume (srv-www) [default: 100Gi].
    #[arg(long, value_name = "SIZE", help_heading = VOLUMES)]
    pub volumes_www_size: Option<String>,

    /// Size of the cache volume (var-cache) [default: 10Gi].
    #[arg(long, value_name = "SIZE", help_heading = VOLUMES)]
    pub volumes_cache_size: Option<String>,

    /// Size of any volume, NAME=SIZE (repeatable), e.g. --volume-size root=1Gi.
    #[arg(long, value_name = "NAME=SIZE", help_heading = VOLUMES)]
    pub volume_size: Vec<String>,

    /// Server image [default: uyuni/server].
    #[arg(long, value_name = "IMAGE", help_heading = IMAGE)]
    pub image: Option<String>,

    /// Tag of the server image [default: latest].
    #[arg(long, value_name = "TAG", help_heading = IMAGE)]
    pub tag: Option<String>,

    /// Registry prepended to image names without a host [default: registry.opensuse.org].
    #[arg(long, alias = "registry", value_name = "HOST", help_heading = IMAGE)]
    pub registry_host: Option<String>,

    /// Image pull policy: Always, IfNotPresent or Never [default: Always].
    #[arg(long, alias = "pullPolicy", value_name = "POLICY", help_heading = IMAGE)]
    pub pull_policy: Option<String>,

    /// Show every step and a diff of every object that would change; write nothing. `server`
    /// also sends each write to the API server as a dry run, so admission and validation
    /// errors show now.
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "client", value_name = "MODE", help_heading = OUTPUT)]
    pub dry_run: Option<DryRun>,

    /// With --dry-run: exit 0 when nothing would change, 1 when changes are planned, 2 or more
    /// on errors (as `kubectl diff`).
    #[arg(long, requires = "dry_run", help_heading = OUTPUT)]
    pub exit_code: bool,

    /// With --dry-run: show Secret values instead of masking them. They end up in your
    /// terminal and its scrollback.
    #[arg(long, requires = "dry_run", help_heading = OUTPUT)]
    pub show_secrets: bool,

    /// Lines of context around each change in --dry-run diffs.
    #[arg(short = 'C', long = "diff-context", default_value_t = 3, value_name = "N", help_heading = OUTPUT)]
    pub diff_context: usize,
}
