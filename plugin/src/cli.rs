//! The command tree. Raw flags are parsed here once; `migrate.rs` turns them into the core's
//! validated parameters, and nothing else sees them.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const KUBECTL: &str = "Kubectl flags";
const SSH: &str = "SSH to the source server";
const VOLUMES: &str = "Volumes";
const IMAGE: &str = "Image";
const OUTPUT: &str = "Preview and output";
/// What a run may do before it starts and when it meets a question: `--yes`, `--prepare`,
/// `--force-unlock`.
const RUN: &str = "Run";
const LOG_SELECTION: &str = "Which log";
const UPGRADE: &str = "Rollback and backup";
const REMOVAL: &str = "What is removed";
const RBAC_FOR: &str = "Which command";

/// Installs, migrates, upgrades and removes an Uyuni server on Kubernetes.
///
/// Run as `kubectl uyuni COMMAND`. kubectl's own flags (--kubeconfig, --context, -n, ...) go
/// after `uyuni`, not before it: kubectl refuses flags placed before a plugin's name.
#[derive(Debug, Parser)]
#[command(
    name = "kubectl-uyuni",
    bin_name = "kubectl uyuni",
    version,
    propagate_version = true,
    // As kubectl: a flag given twice takes the last value (repeatable ones still collect).
    args_override_self = true
)]
pub struct Cli {
    #[command(flatten)]
    pub kube: KubeFlags,

    /// More output on stderr: -v info, -vv debug, -vvv trace; kubectl's -v=N also works (1-3
    /// info, 4-5 debug, 6 and more trace). RUST_LOG overrides both.
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true, help_heading = OUTPUT)]
    pub verbose: u8,

    /// kubectl's numeric verbosity; `-v=N`, `-vN` and `-v N` are rewritten to this by
    /// [`normalize_args`] before parsing.
    #[arg(long = "v", global = true, hide = true, value_name = "LEVEL")]
    pub kubectl_verbosity: Option<u8>,

    /// Only errors on stderr.
    #[arg(short = 'q', long, global = true, help_heading = OUTPUT)]
    pub quiet: bool,

    /// Output format of the data printed on stdout.
    #[arg(short = 'o', long, value_enum, global = true, default_value = "human", value_name = "FORMAT", help_heading = OUTPUT)]
    pub output: OutputFormat,

    /// Colours: auto (on a terminal, unless NO_COLOR is set), always or never.
    #[arg(long, value_enum, global = true, default_value = "auto", value_name = "WHEN", help_heading = OUTPUT)]
    pub color: ColorChoice,

    /// Progress on stderr: auto (a live step list on a terminal, plain lines otherwise) or
    /// plain (timestamped lines).
    #[arg(long, value_enum, global = true, default_value = "auto", value_name = "MODE", help_heading = OUTPUT)]
    pub progress: ProgressMode,

    /// The kubeconfig user, as kubectl's --user, for every command but `migrate` (whose --user
    /// is the SSH user on the source, as in mgradm); --kube-user works everywhere.
    #[arg(long = "user", value_name = "NAME", help_heading = KUBECTL)]
    pub user_before_command: Option<String>,

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

    /// The kubeconfig user to use (kubectl's --user; see `--user` for why it is renamed).
    #[arg(id = "kube_user", long = "kube-user", global = true, value_name = "NAME", help_heading = KUBECTL)]
    pub user: Option<String>,

    /// Timeout of a single API request, e.g. 30s, 1m or 1h30m; a number alone is seconds (0:
    /// none). Connecting to the API server waits at most this, else 10s.
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_request_timeout, help_heading = KUBECTL)]
    pub request_timeout: Option<std::time::Duration>,

    /// The address and port of the API server, overriding the kubeconfig's cluster.
    #[arg(short = 's', long, global = true, value_name = "URL", value_parser = parse_server, help_heading = KUBECTL)]
    pub server: Option<String>,

    /// Bearer token for authentication to the API server, overriding the kubeconfig's user.
    /// Never printed: commands the tool prints pass --token "$TOKEN" instead.
    #[arg(long, global = true, value_name = "TOKEN", help_heading = KUBECTL)]
    pub token: Option<Token>,

    /// Path to a CA certificate file (PEM) to verify the API server's certificate with.
    #[arg(long, global = true, value_name = "FILE", conflicts_with = "insecure_skip_tls_verify", help_heading = KUBECTL)]
    pub certificate_authority: Option<PathBuf>,

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

/// A `--token` value: a secret, so its `Debug` shows no part of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// The token itself, for the client and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl std::str::FromStr for Token {
    type Err = String;
    fn from_str(s: &str) -> Result<Token, String> {
        if s.is_empty() {
            Err("it is empty; leave the flag out to use the kubeconfig's user".to_owned())
        } else {
            Ok(Token(s.to_owned()))
        }
    }
}

/// kubectl's `--server`: a URL, `https://` assumed when the value is only `HOST[:PORT]` (as
/// client-go does). Refused before anything is sent when it cannot be one.
pub fn parse_server(value: &str) -> Result<String, String> {
    let url = if value.contains("://") {
        value.to_owned()
    } else {
        format!("https://{value}")
    };
    let (scheme, rest) = url.split_once("://").unwrap_or(("", ""));
    let host = rest.split('/').next().unwrap_or_default();
    if !matches!(scheme, "https" | "http") {
        return Err(format!(
            "{value:?} is not an API server URL: the scheme must be https or http"
        ));
    }
    if host.is_empty() || host.starts_with(':') || url.chars().any(char::is_whitespace) {
        return Err(format!(
            "{value:?} is not an API server URL such as https://api.example.com:6443"
        ));
    }
    Ok(url)
}

/// A component's replica count, bounded as the parameters check it (`params::replicas`), so
/// that `-1` or `99` is refused naming the range instead of u32's.
fn replicas() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(0..=10)
}

/// `--since`: Go's duration syntax as kubectl takes it, in hours, minutes and seconds
/// (`30s`, `10m`, `1h30m`); whole seconds.
pub fn parse_since(text: &str) -> anyhow::Result<i64> {
    let bad = || anyhow::anyhow!("{text:?} is not a duration such as 30s, 10m or 1h30m");
    let mut total: i64 = 0;
    let mut number = String::new();
    let mut any = false;
    for c in text.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: i64 = number.parse().map_err(|_| bad())?;
        let unit = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(bad()),
        };
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
        number.clear();
        any = true;
    }
    if !number.is_empty() || !any || total == 0 {
        return Err(bad());
    }
    Ok(total)
}

/// kubectl's `--request-timeout`: a Go duration (`30s`, `1m`, `1h30m`, `500ms`) or a whole
/// number of seconds; zero means no timeout (`None` later). A value that is neither is a usage
/// error, refused before anything is sent.
pub fn parse_request_timeout(value: &str) -> Result<std::time::Duration, String> {
    use std::time::Duration;
    let bad = || format!("{value:?} is not a duration such as 0, 30, 30s, 1m or 2h");
    let v = value.trim();
    if v.is_empty() {
        return Err(bad());
    }
    if v.bytes().all(|b| b.is_ascii_digit()) {
        return v.parse::<u64>().map(Duration::from_secs).map_err(|_| bad());
    }
    // Go's time.ParseDuration: a sequence of decimal numbers, each with a unit.
    let mut total = Duration::ZERO;
    let mut rest = v;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (number, tail) = rest.split_at(digits);
        let number: f64 = number.parse().map_err(|_| bad())?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let seconds = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += Duration::try_from_secs_f64(number * seconds).map_err(|_| bad())?;
        rest = tail;
    }
    Ok(total)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// For people.
    Human,
    /// JSON, stable field names (see docs/output.md).
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
    ///
    /// Flags marked [remembered] are recorded in ConfigMap uyuni-server-spec by the first run
    /// that writes; every later run starts from them, and a flag given replaces its recorded
    /// value (a repeatable flag its whole list). A switch takes =false to turn a remembered
    /// one off, e.g. --tftp-host-network=false.
    #[command(after_help = MIGRATE_EXAMPLES)]
    Migrate(Box<MigrateCmd>),
    /// Install a new Uyuni server in the cluster.
    ///
    /// Writes what the official Helm chart deploys, with what its documentation has you create
    /// by hand first: the credential Secrets (the database passwords generated unless given),
    /// ConfigMap uyuni-config, a CA generated through cert-manager (or the --ssl-* files), the
    /// database on var-pgsql18 and the server, which sets itself up at its first start. Run it
    /// again after an interruption: it resumes where it stopped; a finished install plans
    /// nothing.
    ///
    /// Passwords are never taken from the command line: each comes from its --*-password-file,
    /// from the environment (UYUNI_ADMIN_PASSWORD, UYUNI_DB_PASSWORD, UYUNI_DB_ADMIN_PASSWORD,
    /// UYUNI_REPORTDB_PASSWORD, UYUNI_SCC_PASSWORD, UYUNI_REGISTRY_PASSWORD), or, for the
    /// administrator's, from a prompt on a terminal. The database passwords not given are
    /// generated and stored only in their Secrets.
    ///
    /// Flags marked [remembered] are recorded in ConfigMap uyuni-server-spec, as for migrate.
    #[command(after_help = INSTALL_EXAMPLES)]
    Install(Box<InstallCmd>),
    /// Upgrade a server this tool installed or migrated to new images, keeping a way back.
    ///
    /// Inspects the images the server runs and the ones given in short Jobs (release, product,
    /// PostgreSQL version) and refuses, before changing anything of the server, a downgrade, a
    /// switch between Uyuni and SUSE Multi-Linux Manager, a skipped release or an older
    /// PostgreSQL. Then records the images and replica counts before the upgrade in ConfigMap
    /// uyuni-upgrade, stops the server and its components and the database (an outage, asked
    /// for on a terminal; --yes without one), keeps the database: a copy into volume
    /// <database volume>-backup (unless --no-backup), or with a new PostgreSQL major a
    /// pg_upgrade into a new volume var-pgsql<major> with the old one left as it was; then rolls
    /// the database, the server and its components to the new images and waits until they
    /// are ready. Only the image flags given change; the rest of the specification is the
    /// remembered one. Run it again after an interruption: it goes on where it stopped.
    ///
    /// --rollback returns to the images before the upgrade on the data kept then. A migration
    /// must have finished first; none of its data steps runs again.
    #[command(after_help = UPGRADE_EXAMPLES)]
    Upgrade(Box<UpgradeCmd>),
    /// Remove the Uyuni server this tool installed or migrated, keeping its data.
    ///
    /// Deletes, in dependency order and waiting until each is gone, every object of the
    /// namespace that carries the label app.kubernetes.io/managed-by=kubectl-uyuni: the
    /// Deployments (the server first, db last), Services, Ingresses and routes, cert-manager
    /// objects, Jobs, ConfigMaps, RBAC objects and the Secrets that hold no data. Objects it
    /// did not create are never touched.
    ///
    /// Keeps every PersistentVolumeClaim and the credential Secrets, and ends by listing them
    /// with how to reinstall on them (install --reuse-volumes) or remove them. Removing a
    /// serving server is asked for on a terminal (--yes without one). Run it again after an
    /// interruption: it resumes where it stopped.
    #[command(after_help = UNINSTALL_EXAMPLES)]
    Uninstall(Box<UninstallCmd>),
    /// Stop the server: scale it and its components to 0, the database last.
    ///
    /// Each Deployment's replica count is recorded first in ConfigMap uyuni-replicas, which
    /// `start` scales back to. The data and every object stay. Stopping a serving server is
    /// asked for on a terminal; --yes confirms it without one.
    #[command(after_help = STOP_EXAMPLES)]
    Stop(LifecycleCmd),
    /// Start a stopped server: the database first, then the server and its components, each
    /// back to the replica count it had before `stop`.
    #[command(after_help = START_EXAMPLES)]
    Start(LifecycleCmd),
    /// Restart the server and its components: every pod replaced, as `kubectl rollout
    /// restart`, each waited for until ready; the database keeps running.
    ///
    /// Restarting a serving server is asked for on a terminal; --yes confirms it without one.
    #[command(after_help = RESTART_EXAMPLES)]
    Restart(LifecycleCmd),
    /// Tell whether the server in the namespace is healthy, on one screen.
    ///
    /// The server, the database and each component (ready replicas, image and release,
    /// restarts, why a container waits), the claims (bound, capacity, the backup a PostgreSQL
    /// upgrade keeps), the certificates (ready, not after, issuer), how the server is reached
    /// (Ingress hosts, Traefik routes, the TFTP LoadBalancer's address), where an unfinished
    /// migration stands, and the last operation's steps with their Jobs. -o json|yaml prints
    /// the same, typed. Reads only.
    ///
    /// Exit codes with --exit-code: 0 healthy; 3 not healthy (the reasons on stderr); 4
    /// nothing of kubectl-uyuni's in the namespace; 1 the cluster could not be read; 2 bad
    /// usage. Without --exit-code, 0 whenever the report was printed.
    #[command(after_help = STATUS_EXAMPLES)]
    Status(StatusCmd),
    /// Print the log of a step's Job, or of a component's pod.
    ///
    /// STEP is a step id as `status` and the progress of install and migrate show it
    /// (image-check-server, data-sync, db-upgrade…): its latest attempt's log, or another
    /// attempt's with --attempt N (from 1, oldest first), or every attempt's with
    /// --all-attempts. Without STEP and --component: the steps that have logs. Reads only.
    #[command(after_help = LOGS_EXAMPLES)]
    Logs(LogsCmd),
    /// Print the client version and, when a server runs in the namespace, its images.
    ///
    /// Never fails because the cluster cannot be reached: the client version is printed and a
    /// note says why the server's is missing.
    #[command(after_help = VERSION_EXAMPLES)]
    Version(VersionCmd),
    /// Print the least-privilege RBAC a command needs, as YAML for `kubectl apply -f -`.
    ///
    /// A Role in the namespace (-n, else the context's), a Role in kube-system for the k3s/RKE2
    /// ingress controller's HelmChartConfig, and a ClusterRole for the cluster-scoped reads
    /// (the namespace itself, StorageClasses, IngressClasses, the custom resources' discovery)
    /// and the preflight's access reviews: the permissions the command's preflight checks
    /// before any write, by what the command can do. With --serviceaccount, --bind-user or
    /// --group, the RoleBindings and the ClusterRoleBinding to them too. Sends nothing to the
    /// cluster; -o json prints a List.
    ///
    /// Not granted: creating the namespace (create it first) and deleting it (uninstall
    /// --delete-namespace).
    #[command(after_help = RBAC_EXAMPLES)]
    Rbac(RbacCmd),
    /// Write a support bundle (tar.gz) of the namespace's server, with every secret value
    /// redacted.
    ///
    /// The operation records (each run of install, migrate, upgrade, uninstall, stop, start
    /// and restart: its steps, Jobs and how it ended) with the Job logs they keep, the specs of
    /// kubectl-uyuni's objects in the namespace (Secrets by name, type and keys only), their
    /// pods, the namespace's events, and the versions of the tool and of the API server.
    /// Reads only; what it may not read is named in the bundle's report.json and on stdout.
    #[command(after_help = REPORT_EXAMPLES)]
    Report(ReportCmd),
    /// Print a shell completion script (bash, zsh or fish).
    #[command(long_about = COMPLETION_HELP, after_help = COMPLETION_EXAMPLES)]
    Completion(CompletionCmd),
}

const VERSION_EXAMPLES: &str = "Examples:
  # The client's version, and the images the server in namespace uyuni runs
  kubectl uyuni -n uyuni version

  # The same as JSON, for a script
  kubectl uyuni -n uyuni version -o json";

const COMPLETION_EXAMPLES: &str = "Examples:
  # Completion of `kubectl-uyuni` in the running bash
  source <(kubectl-uyuni completion bash)

  # For zsh, once
  kubectl-uyuni completion zsh > \"${fpath[1]}/_kubectl-uyuni\"";

const RBAC_EXAMPLES: &str = "Examples:
  # As a cluster administrator: what a migration needs, for ServiceAccount deployer of ops
  kubectl create namespace uyuni
  kubectl uyuni -n uyuni rbac --for migrate --serviceaccount ops:deployer | kubectl apply -f -

  # Then, as that account
  kubectl uyuni -n uyuni --token \"$(kubectl -n ops create token deployer)\" migrate uyuni.example.com

  # Read-only access for a user: status (--for logs adds the pods' logs)
  kubectl uyuni -n uyuni rbac --for status --bind-user alice | kubectl apply -f -";

const REPORT_EXAMPLES: &str = "Examples:
  # A bundle of namespace uyuni's server, to attach to a support request
  kubectl uyuni -n uyuni report

  # Into a file of your choice
  kubectl uyuni -n uyuni report --file /tmp/uyuni-report.tar.gz

  # What it holds
  tar tzf /tmp/uyuni-report.tar.gz";

const MIGRATE_EXAMPLES: &str = "Examples:
  # Review everything the migration would write, with the SSH material to the source
  kubectl uyuni -n uyuni migrate uyuni.example.com --ssh-key-private ~/.ssh/id_migration \\
      --ssh-key-public ~/.ssh/id_migration.pub --ssh-knownhosts ~/.ssh/known_hosts --dry-run

  # Copy while the source keeps serving (repeat to catch up); the SSH material is kept
  kubectl uyuni -n uyuni migrate uyuni.example.com --prepare

  # The final copy: asks before it stops the source's services (--yes in a script)
  kubectl uyuni -n uyuni migrate uyuni.example.com

  # Where it stands, and a step's log
  kubectl uyuni -n uyuni status
  kubectl uyuni -n uyuni logs data-sync";

const INSTALL_EXAMPLES: &str = "Examples:
  # Preview everything the install would write, then install (asks for the admin password)
  kubectl uyuni -n uyuni install uyuni.example.com --email admin@example.com --dry-run
  kubectl uyuni -n uyuni install uyuni.example.com --email admin@example.com

  # Without a terminal: the password from a file, certificates from your own CA
  kubectl uyuni -n uyuni install uyuni.example.com --admin-password-file admin.pass \\
      --ssl-ca-root ca.pem --ssl-server-cert server.pem --ssl-server-key server.key

  # Read a generated database password afterwards
  kubectl -n uyuni get secret db-credentials -o jsonpath='{.data.password}' | base64 -d";

const UPGRADE_EXAMPLES: &str = "Examples:
  # Preview: the inspections, the outage, the backup and every object that changes
  kubectl uyuni -n uyuni upgrade --tag 2026.04 --dry-run

  # Upgrade (asks before stopping the server; --yes in a script)
  kubectl uyuni -n uyuni upgrade --tag 2026.04

  # Afterwards: the new images, and the record of what the upgrade began from
  kubectl uyuni -n uyuni status
  kubectl -n uyuni get configmap uyuni-upgrade -o yaml";

const STOP_EXAMPLES: &str = "Examples:
  kubectl uyuni -n uyuni stop --dry-run   # what would be scaled down, in which order
  kubectl uyuni -n uyuni stop             # asks, then stops; --yes in a script";

const RESTART_EXAMPLES: &str = "Examples:
  kubectl uyuni -n uyuni restart --yes    # the server's pods replaced, the database untouched";

const START_EXAMPLES: &str = "Examples:
  kubectl uyuni -n uyuni start            # the database first, then the server";

const UNINSTALL_EXAMPLES: &str = "Examples:
  # Preview every deletion, then remove the server and keep its data
  kubectl uyuni -n uyuni uninstall --dry-run
  kubectl uyuni -n uyuni uninstall

  # Reinstall on the kept data
  kubectl uyuni -n uyuni install uyuni.example.com --reuse-volumes

  # Remove everything, the data and the namespace too, without a terminal
  kubectl uyuni -n uyuni uninstall --purge-volumes --delete-namespace --yes";

const STATUS_EXAMPLES: &str = "Examples:
  # Is the server in namespace uyuni healthy?
  kubectl uyuni -n uyuni status

  # In a script or a probe: exit 3 when it is not healthy
  kubectl uyuni -n uyuni status --exit-code >/dev/null || echo 'not healthy'

  # Follow it while a migration runs (Ctrl-C to stop); the same as JSON
  kubectl uyuni -n uyuni status -w
  kubectl uyuni -n uyuni status -o json | jq '.problems'";

const LOGS_EXAMPLES: &str = "Examples:
  # The steps that have logs, then one step's latest log
  kubectl uyuni -n uyuni logs
  kubectl uyuni -n uyuni logs data-sync

  # Every attempt of a retried step, or the first one only
  kubectl uyuni -n uyuni logs db-fixup --all-attempts
  kubectl uyuni -n uyuni logs db-fixup --attempt 1

  # Follow the server's log, from the last 100 lines or the last 10 minutes
  kubectl uyuni -n uyuni logs --component server -f --tail 100
  kubectl uyuni -n uyuni logs --component db --since 10m --timestamps";

const COMPLETION_HELP: &str = "Print a shell completion script (bash, zsh or fish).

`kubectl uyuni <TAB>`: kubectl 1.26 and later complete a plugin's arguments by running an
executable named kubectl_complete-uyuni found on PATH. The release archive ships it (krew keeps
it in ~/.krew/store/uyuni/VERSION/); put it on PATH, for example:

    ln -s ~/.krew/store/uyuni/*/kubectl_complete-uyuni ~/.krew/bin/

or create it:

    printf '#!/bin/sh\nexec kubectl-uyuni __complete \"$@\"\n' > ~/.local/bin/kubectl_complete-uyuni
    chmod +x ~/.local/bin/kubectl_complete-uyuni

kubectl's own completion must be loaded (`source <(kubectl completion bash)`).

`kubectl-uyuni <TAB>` (the binary called directly):

    bash:  source <(kubectl-uyuni completion bash)
    zsh:   kubectl-uyuni completion zsh > \"${fpath[1]}/_kubectl-uyuni\"
    fish:  kubectl-uyuni completion fish > ~/.config/fish/completions/kubectl-uyuni.fish";

#[derive(Debug, Args)]
pub struct VersionCmd {
    /// The kubeconfig user (kubectl's --user; the same as --kube-user).
    #[arg(id = "version_user", long = "user", value_name = "NAME", help_heading = KUBECTL)]
    pub user: Option<String>,
}

#[derive(Debug, Args)]
pub struct StatusCmd {
    /// Exit non-zero when the server is not healthy: 3 not healthy, 4 nothing installed.
    #[arg(long, help_heading = OUTPUT)]
    pub exit_code: bool,

    /// Print the report again whenever it changes, until Ctrl-C (from watches: no polling).
    #[arg(short = 'w', long, help_heading = OUTPUT)]
    pub watch: bool,

    /// The kubeconfig user (kubectl's --user; the same as --kube-user).
    #[arg(id = "status_user", long = "user", value_name = "NAME", help_heading = KUBECTL)]
    pub user: Option<String>,
}

/// A component whose pod `logs --component` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogComponent {
    /// Deployment uyuni.
    Server,
    /// Deployment db.
    Db,
    /// Deployment tftp.
    Tftp,
    /// Deployment hub-xmlrpc.
    HubXmlrpc,
    /// Deployment coco-attestation.
    Coco,
}

impl LogComponent {
    /// The name `status` and the core give it.
    pub fn name(self) -> &'static str {
        match self {
            LogComponent::Server => "server",
            LogComponent::Db => "db",
            LogComponent::Tftp => "tftp",
            LogComponent::HubXmlrpc => "hub-xmlrpc",
            LogComponent::Coco => "coco",
        }
    }
}

#[derive(Debug, Args)]
pub struct LogsCmd {
    /// The step whose Job's log to print; none: list the steps that have logs.
    #[arg(value_name = "STEP", conflicts_with = "component")]
    pub step: Option<String>,

    /// Which attempt of the step, from 1 (oldest first); default: the latest.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), conflicts_with = "all_attempts", requires = "step", help_heading = LOG_SELECTION)]
    pub attempt: Option<u32>,

    /// Every attempt of the step, oldest first, each after a header line on stderr.
    #[arg(long, requires = "step", help_heading = LOG_SELECTION)]
    pub all_attempts: bool,

    /// The log of a component's pod instead of a step's.
    #[arg(long, value_enum, value_name = "COMPONENT", help_heading = LOG_SELECTION)]
    pub component: Option<LogComponent>,

    /// Keep printing the log as it is written, until the container ends or Ctrl-C.
    #[arg(short = 'f', long, help_heading = OUTPUT)]
    pub follow: bool,

    /// Only the last N lines.
    #[arg(long, value_name = "N", help_heading = OUTPUT)]
    pub tail: Option<u32>,

    /// Only lines newer than this: 30s, 10m, 2h, 1h30m.
    // Parsed by clap, so that a bad duration is a usage error (exit 2) like any other value.
    #[arg(long, value_name = "DURATION", value_parser = parse_since, help_heading = OUTPUT)]
    pub since: Option<i64>,

    /// Prefix each line with its time (RFC 3339).
    #[arg(long, help_heading = OUTPUT)]
    pub timestamps: bool,

    /// The kubeconfig user (kubectl's --user; the same as --kube-user).
    #[arg(id = "logs_user", long = "user", value_name = "NAME", help_heading = KUBECTL)]
    pub user: Option<String>,
}

/// The commands `rbac --for` prints the rules of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RbacFor {
    Install,
    Migrate,
    Upgrade,
    Uninstall,
    Status,
    Stop,
    Start,
    Restart,
    Logs,
    Report,
}

impl RbacFor {
    pub fn command(self) -> uyuni_core::rbac::Command {
        use uyuni_core::rbac::Command;
        match self {
            RbacFor::Install => Command::Install,
            RbacFor::Migrate => Command::Migrate,
            RbacFor::Upgrade => Command::Upgrade,
            RbacFor::Uninstall => Command::Uninstall,
            RbacFor::Status => Command::Status,
            RbacFor::Stop => Command::Stop,
            RbacFor::Start => Command::Start,
            RbacFor::Restart => Command::Restart,
            RbacFor::Logs => Command::Logs,
            RbacFor::Report => Command::Report,
        }
    }
}

const BINDING: &str = "Bind to (as kubectl create rolebinding)";

#[derive(Debug, Args)]
pub struct RbacCmd {
    /// The command whose permissions to print.
    #[arg(long = "for", value_enum, value_name = "COMMAND", help_heading = RBAC_FOR)]
    pub command: RbacFor,

    /// Bind the rules to this ServiceAccount, NAMESPACE:NAME (repeatable).
    #[arg(long, value_name = "NAMESPACE:NAME", value_parser = parse_service_account, help_heading = BINDING)]
    pub serviceaccount: Vec<(String, String)>,

    /// Bind the rules to this user (repeatable; `kubectl create rolebinding --user`: here
    /// --user is the kubeconfig user, as after every other command).
    #[arg(long, value_name = "NAME", help_heading = BINDING)]
    pub bind_user: Vec<String>,

    /// Bind the rules to this group (repeatable).
    #[arg(long, value_name = "NAME", help_heading = BINDING)]
    pub group: Vec<String>,

    /// The kubeconfig user (kubectl's --user; the same as --kube-user).
    #[arg(id = "rbac_user", long = "user", value_name = "NAME", help_heading = KUBECTL)]
    pub user: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReportCmd {
    /// Where to write the bundle; default: uyuni-report-NAMESPACE-TIME.tar.gz here.
    #[arg(short = 'f', long, value_name = "FILE", help_heading = OUTPUT)]
    pub file: Option<String>,

    /// The kubeconfig user (kubectl's --user; the same as --kube-user).
    #[arg(id = "report_user", long = "user", value_name = "NAME", help_heading = KUBECTL)]
    pub user: Option<String>,
}

/// `kubectl create rolebinding --serviceaccount`'s form, NAMESPACE:NAME.
pub fn parse_service_account(value: &str) -> Result<(String, String), String> {
    match value.split_once(':') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains(':') => {
            Ok((ns.to_owned(), name.to_owned()))
        }
        _ => Err(format!(
            "{value:?} is not NAMESPACE:NAME, e.g. --serviceaccount uyuni:deployer"
        )),
    }
}

#[derive(Debug, Args)]
pub struct CompletionCmd {
    /// The shell to print the script for.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// A live step list on a terminal, plain lines otherwise.
    Auto,
    /// Timestamped lines, one per event.
    Plain,
}

impl KubeFlags {
    /// The prefix of every `kubectl` command the tool prints: the --kubeconfig and --context
    /// this run was given (the namespace is added per command).
    /// The connection flags for the commands the tool prints. The context is the one given,
    /// or else the one the connection resolved (the kubeconfig's current context): a pasted
    /// hint reaches the same cluster even after `kubectl config use-context`.
    pub fn kubectl_hint(&self) -> uyuni_core::kubectl::Kubectl {
        uyuni_core::kubectl::Kubectl {
            kubeconfig: self.kubeconfig.as_ref().map(|p| p.display().to_string()),
            context: self
                .context
                .clone()
                .or_else(|| RESOLVED_CONTEXT.get().cloned()),
            as_user: self.as_user.clone(),
            as_groups: self.as_group.clone(),
            user: self.user.clone(),
            cluster: self.cluster.clone(),
            server: self.server.clone(),
            certificate_authority: self
                .certificate_authority
                .as_ref()
                .map(|p| p.display().to_string()),
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
            token: self.token.is_some(),
            migrate_flags: Vec::new(),
        }
    }
}

/// The kubeconfig context the connection resolved, set once it is made.
pub static RESOLVED_CONTEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// kubectl's flags (and this tool's output flags) that take a value: not part of the migrate
/// flags a repeated run needs, the hint names them itself.
const NOT_REPEATED_WITH_VALUE: [&str; 18] = [
    "--kubeconfig",
    "--context",
    "--cluster",
    "-s",
    "--server",
    "--token",
    "--certificate-authority",
    "-n",
    "--namespace",
    "--kube-user",
    "--request-timeout",
    "--as",
    "--as-group",
    "-o",
    "--output",
    "--color",
    "--progress",
    "--v",
];

/// Flags without value that a repeated run does not need (or must not inherit: `--yes` is the
/// user's decision each time, `--prepare` is chosen by the hint).
// --force-unlock is about the holder of one moment: a hint to run again must not take the
// lease from whoever holds it then.
const NOT_REPEATED: [&str; 13] = [
    "--force-unlock",
    "--insecure-skip-tls-verify",
    "-q",
    "--quiet",
    "-v",
    "--verbose",
    "--yes",
    "-y",
    "--prepare",
    "--dry-run",
    "--exit-code",
    "--show-secrets",
    "--help",
];

/// `words` with the value of every `--token` replaced by [`uyuni_core::kubectl::TOKEN_PLACEHOLDER`]:
/// the command line as it may be recorded or shown. Words after `--` are not flags.
pub fn redact_secrets(words: Vec<String>) -> Vec<String> {
    let placeholder = uyuni_core::kubectl::TOKEN_PLACEHOLDER.trim_matches('"');
    let mut out = Vec::with_capacity(words.len());
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        if word == "--" {
            out.push(word);
            out.extend(words);
            break;
        }
        if word == "--token" {
            out.push(word);
            if words.next().is_some() {
                out.push(placeholder.to_owned());
            }
        } else if word.starts_with("--token=") {
            out.push(format!("--token={placeholder}"));
        } else {
            out.push(word);
        }
    }
    out
}

/// The `migrate` flags of a command line (after `normalize_args`) that a repeated run needs:
/// the words after `migrate`, without the source and the flags the hint gives itself.
pub fn repeat_flags(argv: &[String], source: &str) -> Vec<String> {
    repeat_flags_of(argv, "migrate", source)
}

/// The flags of `command` on a command line that a repeated run needs: the words after the
/// command's name, without its positional argument and the flags the hint gives itself.
pub fn repeat_flags_of(argv: &[String], command: &str, source: &str) -> Vec<String> {
    let Some(start) = argv.iter().position(|a| a == command) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut source_seen = false;
    let mut words = argv[start + 1..].iter();
    while let Some(word) = words.next() {
        let name = word.split('=').next().unwrap_or(word);
        // `--user` is kubectl's everywhere but after `migrate`, where it is the SSH user.
        if NOT_REPEATED_WITH_VALUE.contains(&name) || (name == "--user" && command != "migrate") {
            if !word.contains('=') {
                words.next();
            }
            continue;
        }
        if NOT_REPEATED.contains(&name)
            || (word.starts_with("-v") && word.trim_start_matches('-').chars().all(|c| c == 'v'))
            || ((word.starts_with("-n") || word.starts_with("-s"))
                && word.len() > 2
                && !word.starts_with("--"))
        {
            continue;
        }
        if !source_seen && word == source {
            source_seen = true;
            continue;
        }
        out.push(word.clone());
    }
    out
}
impl Cli {
    /// The tracing verbosity: -v counts and kubectl's -v=N, whichever asks for more.
    pub fn verbosity(&self) -> u8 {
        let from_level = match self.kubectl_verbosity.unwrap_or(0) {
            0 => 0,
            1..=3 => 1,
            4..=5 => 2,
            _ => 3,
        };
        self.verbose.max(from_level)
    }

    /// The kubeconfig user from --kube-user or, outside `migrate`, --user. Two different ones
    /// are an error, and so is `--user` before `migrate`, whose --user means the SSH user.
    pub fn kube_user(&self) -> Result<Option<String>, String> {
        let after = match &self.command {
            Command::Version(v) => v.user.clone(),
            Command::Status(v) => v.user.clone(),
            Command::Logs(v) => v.user.clone(),
            Command::Install(v) => v.user.clone(),
            Command::Upgrade(v) => v.user.clone(),
            Command::Uninstall(v) => v.user.clone(),
            Command::Stop(v) | Command::Start(v) | Command::Restart(v) => v.user.clone(),
            Command::Rbac(v) => v.user.clone(),
            Command::Report(v) => v.user.clone(),
            Command::Migrate(_) | Command::Completion(_) => None,
        };
        if matches!(self.command, Command::Migrate(_)) && self.user_before_command.is_some() {
            return Err("--user before `migrate` is ambiguous: `migrate --user` is the SSH user on the source; pass the kubeconfig user as --kube-user NAME".to_owned());
        }
        let mut chosen: Option<String> = None;
        for candidate in [&self.kube.user, &self.user_before_command, &after]
            .into_iter()
            .flatten()
        {
            match &chosen {
                Some(c) if c != candidate => {
                    return Err(format!(
                        "two kubeconfig users given ({c:?} and {candidate:?}): pass only one of --user and --kube-user"
                    ));
                }
                _ => chosen = Some(candidate.clone()),
            }
        }
        Ok(chosen)
    }
}

/// Rewrites kubectl's numeric verbosity (`-v=N`, `-vN`, `-v N`, `--v N`) to `--v=N`, which
/// clap parses next to the counting `-v`/`-vv`. Arguments after `--` are left alone.
pub fn normalize_args<I: IntoIterator<Item = std::ffi::OsString>>(
    args: I,
) -> Vec<std::ffi::OsString> {
    let is_level = |s: &str| !s.is_empty() && s.len() <= 3 && s.bytes().all(|b| b.is_ascii_digit());
    let mut out = Vec::new();
    let mut iter = args.into_iter().peekable();
    let mut rest = false;
    while let Some(arg) = iter.next() {
        let Some(text) = arg.to_str().filter(|_| !rest) else {
            out.push(arg);
            continue;
        };
        if text == "--" {
            rest = true;
            out.push(arg);
            continue;
        }
        let level = if let Some(v) = text
            .strip_prefix("-v=")
            .or_else(|| text.strip_prefix("--v="))
        {
            Some(v.to_owned())
        } else if let Some(v) = text.strip_prefix("-v").filter(|v| is_level(v)) {
            Some(v.to_owned())
        } else if text == "-v" || text == "--v" {
            match iter.peek().and_then(|n| n.to_str()).filter(|n| is_level(n)) {
                Some(n) => {
                    let n = n.to_owned();
                    iter.next();
                    Some(n)
                }
                None => None,
            }
        } else {
            None
        };
        match level {
            Some(n) => out.push(format!("--v={n}").into()),
            None => out.push(arg),
        }
    }
    out
}

/// `migrate`: its own inputs, the server's specification, how the run goes and what it shows.
/// The groups are flattened in this order so that `--help` lists the flags as before the split
/// (clap orders them as declared, within each help heading).
#[derive(Debug, Args)]
pub struct MigrateCmd {
    #[command(flatten)]
    pub migrate: MigrateFlags,

    #[command(flatten)]
    pub run: RunFlags,

    #[command(flatten)]
    pub spec: ServerSpecFlags,

    #[command(flatten)]
    pub preview: PreviewFlags,
}

/// `stop` and `start`.
#[derive(Debug, Args)]
pub struct LifecycleCmd {
    /// Confirm that stopping a serving server may start without asking (needed without a
    /// terminal).
    #[arg(long, short = 'y', help_heading = RUN)]
    pub yes: bool,

    #[command(flatten)]
    pub run: RunFlags,

    #[command(flatten)]
    pub preview: PreviewFlags,

    /// The kubeconfig user (kubectl's --user; the same as --kube-user).
    #[arg(id = "lifecycle_user", long = "user", value_name = "NAME", help_heading = KUBECTL)]
    pub user: Option<String>,
}

/// `install`: its own inputs, then the groups every command that deploys a server shares.
#[derive(Debug, Args)]
pub struct InstallCmd {
    #[command(flatten)]
    pub install: InstallFlags,

    #[command(flatten)]
    pub run: RunFlags,

    #[command(flatten)]
    pub spec: ServerSpecFlags,

    #[command(flatten)]
    pub preview: PreviewFlags,

    /// The kubeconfig user (kubectl's --user; the same as --kube-user).
    #[arg(id = "install_user", long = "user", value_name = "NAME", help_heading = KUBECTL)]
    pub user: Option<String>,
}

/// `upgrade`: its own inputs, then the groups of the server's specification (the image flags
/// are what an upgrade changes).
#[derive(Debug, Args)]
pub struct UpgradeCmd {
    /// Return to the images ConfigMap uyuni-upgrade recorded before the last upgrade, on the
    /// data kept then: the backup copied back into the database's volume, or the database's
    /// volume before a PostgreSQL major upgrade. Everything written since the upgrade began is
    /// lost; asked for on a terminal (--yes without one). The image flags are not read.
    #[arg(long, help_heading = UPGRADE)]
    pub rollback: bool,

    /// Do not copy the database before the images change. Without a PostgreSQL major change
    /// that copy is the only way back to the images before the upgrade: the new server image
    /// updates the database's schema at its start, which the old one cannot run on.
    #[arg(long, help_heading = UPGRADE)]
    pub no_backup: bool,

    /// Confirm without asking that the server may be stopped for the upgrade (needed without a
    /// terminal).
    #[arg(long, short = 'y', help_heading = RUN)]
    pub yes: bool,

    #[command(flatten)]
    pub run: RunFlags,

    #[command(flatten)]
    pub spec: ServerSpecFlags,

    #[command(flatten)]
    pub preview: PreviewFlags,

    /// The kubeconfig user (kubectl's --user; the same as --kube-user).
    #[arg(id = "upgrade_user", long = "user", value_name = "NAME", help_heading = KUBECTL)]
    pub user: Option<String>,
}

/// `uninstall`: its own inputs, how the run goes and what it shows.
#[derive(Debug, Args)]
pub struct UninstallCmd {
    #[command(flatten)]
    pub uninstall: UninstallFlags,

    #[command(flatten)]
    pub run: RunFlags,

    #[command(flatten)]
    pub preview: PreviewFlags,

    /// The kubeconfig user (kubectl's --user; the same as --kube-user).
    #[arg(id = "uninstall_user", long = "user", value_name = "NAME", help_heading = KUBECTL)]
    pub user: Option<String>,
}

/// What only `uninstall` asks.
#[derive(Debug, Args)]
pub struct UninstallFlags {
    /// Also delete the PersistentVolumeClaims (the server's data, its database included) and
    /// the credential Secrets. Lists each claim first and asks on a terminal; needs --yes
    /// without one. The data cannot be recovered afterwards unless the volumes' reclaim policy
    /// keeps them.
    #[arg(long, help_heading = REMOVAL)]
    pub purge_volumes: bool,

    /// Delete the namespace too, last, when this tool created it (it carries its labels) and
    /// nothing else is left in it. Needs --purge-volumes: deleting the namespace deletes the
    /// claims in it.
    #[arg(long, requires = "purge_volumes", help_heading = REMOVAL)]
    pub delete_namespace: bool,

    /// Confirm without asking that a serving server may be removed and, with
    /// --purge-volumes, that its data may be deleted; needed where there is no terminal to ask
    /// on, as in scripts.
    #[arg(long, short = 'y', help_heading = RUN)]
    pub yes: bool,
}

const ADMIN: &str = "Administrator and organisation";
const DATABASE: &str = "Database accounts";
const CA: &str = "Generated CA (without --ssl-* files)";

/// What only a fresh server needs (mgradm install's flags and defaults,
/// `mgradm/cmd/install/flags.go`, `shared/ssl/flags.go`).
#[derive(Debug, Args)]
pub struct InstallFlags {
    /// Fully qualified domain name the server answers to (lower case).
    #[arg(value_name = "FQDN")]
    pub fqdn: String,

    /// Run on claims that exist already and that this tool did not create (after an
    /// uninstall, say): the image keeps their data and skips its first-start setup.
    #[arg(long, help_heading = VOLUMES)]
    pub reuse_volumes: bool,

    /// Login of the first administrator [default: admin]. [remembered]
    #[arg(long, value_name = "LOGIN", help_heading = ADMIN)]
    pub admin_login: Option<String>,

    /// File holding the first administrator's password (first line); else
    /// UYUNI_ADMIN_PASSWORD, else asked on a terminal.
    #[arg(long, value_name = "FILE", help_heading = ADMIN)]
    pub admin_password_file: Option<PathBuf>,

    /// The administrator's first name [default: Administrator]. [remembered]
    #[arg(long, value_name = "NAME", help_heading = ADMIN)]
    pub admin_first_name: Option<String>,

    /// The administrator's last name [default: McAdmin]. [remembered]
    #[arg(long, value_name = "NAME", help_heading = ADMIN)]
    pub admin_last_name: Option<String>,

    /// The first organisation's name [default: Organization]. [remembered]
    #[arg(long, value_name = "NAME", help_heading = ADMIN)]
    pub organization: Option<String>,

    /// The administrator's e-mail address [default: admin@example.com]. [remembered]
    #[arg(long, value_name = "ADDRESS", help_heading = ADMIN)]
    pub email: Option<String>,

    /// The address the server's e-mails come from [default: --email]. [remembered]
    #[arg(long = "emailfrom", value_name = "ADDRESS", help_heading = ADMIN)]
    pub email_from: Option<String>,

    /// The server's time zone [default: Etc/UTC]. [remembered]
    #[arg(long, value_name = "ZONE", help_heading = ADMIN)]
    pub tz: Option<String>,

    /// Expose the Java debugging ports. [remembered]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", help_heading = ADMIN)]
    pub debug_java: Option<bool>,

    /// SCC organisation user, for mirroring SUSE products. [remembered]
    #[arg(long, value_name = "USER", help_heading = ADMIN)]
    pub scc_user: Option<String>,

    /// File holding the SCC password (first line); else UYUNI_SCC_PASSWORD.
    #[arg(long, value_name = "FILE", help_heading = ADMIN)]
    pub scc_password_file: Option<PathBuf>,

    /// The server's database user [default: spacewalk]. [remembered]
    #[arg(long, value_name = "USER", help_heading = DATABASE)]
    pub db_user: Option<String>,

    /// File holding its password; else UYUNI_DB_PASSWORD; else generated.
    #[arg(long, value_name = "FILE", help_heading = DATABASE)]
    pub db_password_file: Option<PathBuf>,

    /// The PostgreSQL superuser [default: postgres]. [remembered]
    #[arg(long, value_name = "USER", help_heading = DATABASE)]
    pub db_admin_user: Option<String>,

    /// File holding its password; else UYUNI_DB_ADMIN_PASSWORD; else generated.
    #[arg(long, value_name = "FILE", help_heading = DATABASE)]
    pub db_admin_password_file: Option<PathBuf>,

    /// The report database's user [default: pythia_susemanager]. [remembered]
    #[arg(long, value_name = "USER", help_heading = DATABASE)]
    pub reportdb_user: Option<String>,

    /// File holding its password; else UYUNI_REPORTDB_PASSWORD; else generated.
    #[arg(long, value_name = "FILE", help_heading = DATABASE)]
    pub reportdb_password_file: Option<PathBuf>,

    /// Two-letter country code of the generated CA [default: DE]. [remembered]
    #[arg(long, value_name = "CC", help_heading = CA)]
    pub ssl_country: Option<String>,

    /// State or province of the generated CA [default: Bayern]. [remembered]
    #[arg(long, value_name = "STATE", help_heading = CA)]
    pub ssl_state: Option<String>,

    /// City of the generated CA [default: Nuernberg]. [remembered]
    #[arg(long, value_name = "CITY", help_heading = CA)]
    pub ssl_city: Option<String>,

    /// Organisation of the generated CA [default: SUSE]. [remembered]
    #[arg(long, value_name = "ORG", help_heading = CA)]
    pub ssl_org: Option<String>,

    /// Organisational unit of the generated CA [default: SUSE]. [remembered]
    #[arg(long, value_name = "OU", help_heading = CA)]
    pub ssl_ou: Option<String>,
}

/// What only a migration needs: the source, how to reach it, and the copy.
#[derive(Debug, Args)]
pub struct MigrateFlags {
    /// Fully qualified domain name of the source server.
    #[arg(value_name = "SOURCE_FQDN")]
    pub source: String,

    /// Copy the data while the source keeps serving; repeat it to catch up, then run without
    /// --prepare for the final copy (which stops the source's services).
    #[arg(long, help_heading = RUN)]
    pub prepare: bool,

    /// Confirm that this run may stop the source's services (the final copy) without asking;
    /// needed where there is no terminal to ask on, as in scripts. --prepare never stops them.
    #[arg(long, short = 'y', help_heading = RUN)]
    pub yes: bool,

    /// Compress the copy on the wire (rsync -z), for a slow link between the cluster and the
    /// source; without it the data travels as it is, which is faster on a LAN.
    #[arg(long, help_heading = SSH)]
    pub compress: bool,

    /// Keep Secrets uyuni-migration-key (the SSH key to the source) and uyuni-ca-password, and
    /// the secret values of uyuni-migration-data, once the migration has finished. Without it
    /// the two are deleted then and the values emptied (the server's Secrets hold them): no
    /// later run needs them.
    #[arg(long, help_heading = SSH)]
    pub keep_migration_data: bool,

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

    /// File holding the password of the source's CA key (its first line). Also read from the
    /// environment variable UYUNI_SSL_PASSWORD; asked for on a terminal when neither is given.
    /// Never accepted as a command-line value.
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub ssl_password_file: Option<PathBuf>,
}

/// How a run that writes goes: the namespace's lease, and knobs for tests.
#[derive(Debug, Args)]
pub struct RunFlags {
    /// How long an observation waits for the watches to catch up with what the run wrote
    /// before it reads the cluster directly, in milliseconds (10 s unless given). For tests and
    /// for diagnosing a proxy that holds watch events back; hidden.
    #[arg(long, hide = true, value_name = "MILLISECONDS")]
    pub watch_barrier_timeout_ms: Option<u64>,

    /// Divide every wait between two tries of a failed request by N (the same attempts,
    /// sooner). For tests that go through the whole retry schedule; hidden.
    #[arg(long, hide = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub retry_delay_divisor: Option<u32>,

    /// Take over the namespace's Lease kubectl-uyuni from another run that holds it. Only for
    /// a run that died (killed, or its host gone) without releasing it: if that run is still
    /// going, both write the same objects and volumes. A lease left by a dead run also runs
    /// out by itself, 60 s after its last renewal, and a run takes it over then without this
    /// flag. The run says whose lease it takes.
    #[arg(long, help_heading = RUN)]
    pub force_unlock: bool,

    /// How long the run's Lease counts as held after each renewal, in seconds (60 unless
    /// given; renewed every third of it). For tests of a holder that died; hidden.
    #[arg(long, hide = true, value_name = "SECONDS", value_parser = clap::value_parser!(i32).range(1..))]
    pub lease_duration_seconds: Option<i32>,
}

/// The server's specification: every flag ConfigMap uyuni-server-spec remembers
/// (`uyuni_core::record::FLAGS`), and the third-party certificates and registry password that
/// belong to it but are secrets, so stay in their Secrets instead of the record. Any command
/// that deploys a server flattens this group.
#[derive(Debug, Args)]
pub struct ServerSpecFlags {
    /// Another DNS name of the server, added to its certificate (repeatable). [remembered]
    #[arg(long = "ssl-cname", value_name = "NAME", help_heading = "TLS")]
    pub ssl_cname: Vec<String>,

    /// Third-party certificates: the root CA (PEM). With --ssl-server-cert and
    /// --ssl-server-key, no cert-manager is needed.
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub ssl_ca_root: Option<PathBuf>,

    /// An intermediate CA of the server certificate (repeatable, in chain order).
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub ssl_ca_intermediate: Vec<PathBuf>,

    /// The server certificate (PEM).
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub ssl_server_cert: Option<PathBuf>,

    /// The server certificate's key (PEM, without passphrase).
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub ssl_server_key: Option<PathBuf>,

    /// The database certificate's root CA [default: --ssl-ca-root].
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub ssl_db_ca_root: Option<PathBuf>,

    /// An intermediate CA of the database certificate (repeatable).
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub ssl_db_ca_intermediate: Vec<PathBuf>,

    /// The database certificate (PEM) [default: the server certificate].
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub ssl_db_cert: Option<PathBuf>,

    /// The database certificate's key (PEM, without passphrase).
    #[arg(long, value_name = "FILE", help_heading = "TLS")]
    pub ssl_db_key: Option<PathBuf>,

    /// StorageClass of every volume (default: the cluster's default class). [remembered]
    #[arg(long, value_name = "CLASS", help_heading = VOLUMES)]
    pub volumes_class: Option<String>,

    /// StorageClass of one volume, NAME=CLASS (repeatable). [remembered]
    #[arg(long, value_name = "NAME=CLASS", help_heading = VOLUMES)]
    pub volume_class: Vec<String>,

    /// Size of the database volume (var-pgsql; a new server's var-pgsql18) [default: 50Gi].
    /// [remembered]
    #[arg(long, value_name = "SIZE", help_heading = VOLUMES)]
    pub volumes_database_size: Option<String>,

    /// Size of the packages volume (var-spacewalk) [default: 100Gi]. [remembered]
    #[arg(long, value_name = "SIZE", help_heading = VOLUMES)]
    pub volumes_packages_size: Option<String>,

    /// Size of the web volume (srv-www) [default: 100Gi]. [remembered]
    #[arg(long, value_name = "SIZE", help_heading = VOLUMES)]
    pub volumes_www_size: Option<String>,

    /// Size of the cache volume (var-cache) [default: 10Gi]. [remembered]
    #[arg(long, value_name = "SIZE", help_heading = VOLUMES)]
    pub volumes_cache_size: Option<String>,

    /// Size of any volume, NAME=SIZE (repeatable), e.g. --volume-size root=1Gi. [remembered]
    #[arg(long, value_name = "NAME=SIZE", help_heading = VOLUMES)]
    pub volume_size: Vec<String>,

    /// Your PersistentVolumeClaim holding a local mirror: mounted at /mirror in the server
    /// (MIRROR_PATH; where a migrated configuration points); never written. [remembered]
    #[arg(long, value_name = "CLAIM", help_heading = VOLUMES)]
    pub mirror_claim: Option<String>,

    /// Server image [default: uyuni/server]. [remembered]
    #[arg(long, value_name = "IMAGE", help_heading = IMAGE)]
    pub image: Option<String>,

    /// Tag of the server image [default: latest]. [remembered]
    #[arg(long, value_name = "TAG", help_heading = IMAGE)]
    pub tag: Option<String>,

    /// Registry prepended to image names without a host [default: registry.opensuse.org].
    /// [remembered]
    #[arg(long, alias = "registry", value_name = "HOST", help_heading = IMAGE)]
    pub registry_host: Option<String>,

    /// Image pull policy: Always, IfNotPresent or Never [default: Always]. [remembered]
    #[arg(long, alias = "pullPolicy", value_name = "POLICY", help_heading = IMAGE)]
    pub pull_policy: Option<String>,

    /// User of the registry: the tool writes pull Secret `registry-credentials` for the server
    /// image's registry; the password comes from --registry-password-file or
    /// UYUNI_REGISTRY_PASSWORD (asked for on a terminal when neither is given). [remembered]
    #[arg(long, value_name = "USER", conflicts_with = "image_pull_secret", help_heading = IMAGE)]
    pub registry_user: Option<String>,

    /// File whose first line is the registry password (never accepted on the command line).
    #[arg(long, value_name = "FILE", requires = "registry_user", help_heading = IMAGE)]
    pub registry_password_file: Option<PathBuf>,

    /// Your own pull Secret in the namespace, referenced by every pod and never written.
    /// [remembered]
    #[arg(long, value_name = "NAME", help_heading = IMAGE)]
    pub image_pull_secret: Option<String>,

    /// PostgreSQL image of the `db` Deployment [default: uyuni/server-postgresql]. [remembered]
    #[arg(long = "db-image", alias = "pgsql-image", value_name = "IMAGE", help_heading = IMAGE)]
    pub db_image: Option<String>,

    /// Tag of the PostgreSQL image [default: the server's tag]. [remembered]
    #[arg(long = "pgsql-tag", alias = "db-tag", value_name = "TAG", help_heading = IMAGE)]
    pub db_tag: Option<String>,

    /// Image that upgrades a migrated database to the PostgreSQL major of the database image
    /// (migrate only) [default: uyuni/server-database-migration]. [remembered]
    #[arg(long, value_name = "IMAGE", help_heading = IMAGE)]
    pub dbupgrade_image: Option<String>,

    /// Tag of the database upgrade image [default: the server's tag]. [remembered]
    #[arg(long, value_name = "TAG", help_heading = IMAGE)]
    pub dbupgrade_tag: Option<String>,

    /// Hub XML-RPC API image [default: uyuni/server-hub-xmlrpc-api, the server's tag]. [remembered]
    #[arg(long, value_name = "IMAGE", help_heading = IMAGE)]
    pub hubxmlrpc_image: Option<String>,

    /// Replicas of the hub XML-RPC API [default: migrate: 1 if the source ran it, else 0;
    /// install: 0]. [remembered]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = replicas(), help_heading = IMAGE)]
    pub hubxmlrpc_replicas: Option<u32>,

    /// Confidential computing attestation image [default: uyuni/server-attestation]. [remembered]
    #[arg(long, value_name = "IMAGE", help_heading = IMAGE)]
    pub coco_image: Option<String>,

    /// Replicas of the confidential computing attestation [default: 0]. [remembered]
    #[arg(long, value_name = "N", allow_negative_numbers = true, value_parser = replicas(), help_heading = IMAGE)]
    pub coco_replicas: Option<u32>,

    /// Deploy the TFTP server (Deployment and LoadBalancer Service tftp): --tftp or
    /// --tftp=true deploys it, --tftp=false does not [default: migrate: as the source, whose
    /// tftp.socket is checked by the data sync; install: deployed, as in the official chart].
    /// [remembered]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", help_heading = "TFTP")]
    pub tftp: Option<bool>,

    /// TFTP server image [default: uyuni/proxy-tftpd, the server's registry]. [remembered]
    #[arg(long, value_name = "IMAGE", help_heading = "TFTP")]
    pub tftp_image: Option<String>,

    /// Tag of the TFTP server image [default: the server's tag]. [remembered]
    #[arg(long, value_name = "TAG", help_heading = "TFTP")]
    pub tftp_tag: Option<String>,

    /// Run the TFTP server on its node's network instead of behind a LoadBalancer Service,
    /// for clusters without a LoadBalancer implementation (PXE clients then use that node's
    /// address). [remembered]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", help_heading = "TFTP")]
    pub tftp_host_network: Option<bool>,

    /// Run the server container privileged instead of with capability SYS_ADMIN only (the
    /// official chart's default). Only for clusters whose runtime or policy refuses the
    /// image's cgroup2 mount otherwise: a privileged container gets no private cgroup
    /// namespace on containerd, so the server then sees the host's whole cgroup tree. [remembered]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", help_heading = "Server security")]
    pub server_privileged: Option<bool>,

    /// SELinux type spc_t and AppArmor Unconfined for the server container (the chart's
    /// server.superPrivileged), for hosts whose SELinux or AppArmor policy blocks systemd in
    /// a container. [remembered]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", help_heading = "Server security")]
    pub server_super_privileged: Option<bool>,

    /// SELinux type of the server container (the chart's server.selinuxType), for example a
    /// policy module's uyuni_container_t. [remembered]
    #[arg(long, value_name = "TYPE", help_heading = "Server security")]
    pub server_selinux_type: Option<String>,

    /// AppArmor profile loaded on the nodes for the server container (the chart's
    /// server.apparmorProfile, type Localhost). [remembered]
    #[arg(long, value_name = "PROFILE", help_heading = "Server security")]
    pub server_apparmor_profile: Option<String>,

    /// CPU and memory requests of the server's container, as `kubectl set resources` takes
    /// them: cpu=1,memory=4Gi by default (the official chart sets none). [remembered]
    #[arg(long, value_name = "cpu=N,memory=N", help_heading = "Resources")]
    pub server_requests: Option<String>,

    /// CPU and memory limits of the server's container (none by default: a memory limit
    /// reached stops the server, a CPU limit slows it under load). [remembered]
    #[arg(long, value_name = "cpu=N,memory=N", help_heading = "Resources")]
    pub server_limits: Option<String>,

    /// CPU and memory requests of the database's container: cpu=500m,memory=1Gi by default.
    /// [remembered]
    #[arg(long, value_name = "cpu=N,memory=N", help_heading = "Resources")]
    pub db_requests: Option<String>,

    /// CPU and memory limits of the database's container (none by default: the image sizes
    /// its shared buffers from the node's memory, so give room beyond a quarter of it).
    /// [remembered]
    #[arg(long, value_name = "cpu=N,memory=N", help_heading = "Resources")]
    pub db_limits: Option<String>,

    /// Ingress controller to expose the server through: auto (the cluster's default
    /// IngressClass), traefik, nginx or none. [remembered]
    #[arg(long, value_name = "CONTROLLER", help_heading = "Networking")]
    pub ingress: Option<String>,

    /// IngressClass of the Ingresses [default: the detected controller's class]. [remembered]
    #[arg(long, value_name = "NAME", help_heading = "Networking")]
    pub ingress_class: Option<String>,

    /// Also configure the ingress controller's TCP/UDP ports (a HelmChartConfig in kube-system,
    /// k3s and RKE2); without it the needed configuration is printed. [remembered]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", help_heading = "Networking")]
    pub configure_ingress_controller: Option<bool>,

    /// Write a NetworkPolicy that lets only the database's consumers (the server, the
    /// attestation, the migration's SQL Job, and the ingress controller that routes the report
    /// database's port) reach the database; --network-policy=false removes it. It takes
    /// effect where the cluster's network plugin enforces NetworkPolicies. [remembered]
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", help_heading = "Networking")]
    pub network_policy: Option<bool>,
}

/// `--dry-run` and how its preview is shown.
#[derive(Debug, Args)]
pub struct PreviewFlags {
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

    /// With --dry-run: the summary, the outage and the steps only, without the diffs of the
    /// objects.
    #[arg(long, requires = "dry_run", help_heading = OUTPUT)]
    pub summary: bool,

    /// Lines of context around each change in --dry-run diffs.
    #[arg(short = 'C', long = "diff-context", default_value_t = 3, value_name = "N", help_heading = OUTPUT)]
    pub diff_context: usize,
}
