//! `kubectl-uyuni`: the kubectl plugin. Parses the command line, wires the core and the effects
//! together, reports progress on stderr and data on stdout. `src/main.rs` only calls [`main`]:
//! the unit tests are modules of the integration tests (`tests/unit/`), which link this library,
//! so the plugin's code is compiled once for the binary and the tests.

pub mod cli;
pub mod clock;
pub mod completion;
pub mod drive;
pub mod dry_run;
pub mod install;
pub mod lifecycle;
pub mod lock;
pub mod logs;
pub mod migrate;
pub mod operation;
pub mod output;
pub mod prompt;
pub mod rbac;
pub mod report;
pub mod schema;
pub mod source_probe;
pub mod status;
pub mod uninstall;
pub mod upgrade;
pub mod version;

use anyhow::{Context, Result};
use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;
use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command, KubeFlags};
use uyuni_core::kubectl::Kubectl;

pub async fn connect(kube: &KubeFlags) -> Result<uyuni_effects::Connection> {
    let opts = uyuni_effects::ClientOptions {
        kubeconfig: kube.kubeconfig.clone(),
        context: kube.context.clone(),
        cluster: kube.cluster.clone(),
        user: kube.user.clone(),
        namespace: kube.namespace.clone(),
        insecure_skip_tls_verify: kube.insecure_skip_tls_verify,
        request_timeout: kube.request_timeout.filter(|t| !t.is_zero()),
        server: kube.server.clone(),
        token: kube.token.as_ref().map(|t| t.expose().to_owned()),
        certificate_authority: kube.certificate_authority.clone(),
        impersonate: kube.as_user.clone(),
        impersonate_groups: kube.as_group.clone(),
    };
    let conn = uyuni_effects::connect(&opts)
        .await
        .context("cannot reach the cluster")?;
    if let Some(context) = &conn.context {
        let _ = cli::RESOLVED_CONTEXT.set(context.clone());
    }
    Ok(conn)
}

/// The log filter without -v: kube-rs logs every failed request at ERROR, its watcher every
/// refused watch at WARN (with a debug dump of the Status), rustls every refused certificate
/// at ERROR; our own error or fallback says what failed and what to do, so their lines are
/// only noise unless asked for with -v.
const DEFAULT_LOG: &str = "warn,kube_client=off,kube_runtime=off,rustls_platform_verifier=off";
/// With -q: only errors, the same crates silenced.
const QUIET_LOG: &str = "error,kube_client=off,kube_runtime=off,rustls_platform_verifier=off";

/// The log lines on stderr, coloured only where the run's other output on stderr is (`--color`,
/// a terminal, `NO_COLOR`): a redirected `-v` log holds no escape sequences.
fn init_tracing(verbose: u8, quiet: bool, color: bool) {
    let default = match (quiet, verbose) {
        (true, _) => QUIET_LOG,
        (false, 0) => DEFAULT_LOG,
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(color)
        .with_target(false)
        .try_init();
}

async fn run(cli: Cli) -> Result<()> {
    let color = output::use_color(
        cli.color,
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let reporter = output::Reporter::new(output::ReporterOptions {
        quiet: cli.quiet,
        progress: cli.progress,
        color,
        verbose: cli.verbosity() > 0,
    });
    reporter.set_kubectl(cli.kube.kubectl_hint());
    let result = run_command(&cli, &reporter).await;
    reporter.finish(result.is_ok());
    result
}

async fn run_command(cli: &Cli, reporter: &output::Reporter) -> Result<()> {
    match &cli.command {
        Command::Version(_) => version::run(&cli.kube, cli.output).await,
        Command::Status(cmd) => status::run(cmd, cli).await,
        Command::Logs(cmd) => logs::run(cmd, cli).await,
        Command::Rbac(cmd) => rbac::run(cmd, cli).await,
        Command::Report(cmd) => report::run(cmd, cli).await,
        Command::Completion(cmd) => {
            completion::print_script(cmd.shell);
            Ok(())
        }
        Command::Migrate(cmd) => {
            let run_lock = lock::RunLock::default();
            // The same run again (same source, --prepare or not, same flags; never --yes: the
            // outage stays the user's decision).
            let kubectl = migrate::repeat_kubectl(cmd, cli);
            let resume = |kubectl: &Kubectl, ns: Option<&str>| {
                kubectl.migrate(ns, &cmd.migrate.source, cmd.migrate.prepare)
            };
            let work = migrate::run(cmd, cli, reporter, &run_lock);
            interruptible(work, &run_lock, reporter, &kubectl, resume, cli).await
        }
        Command::Stop(cmd) | Command::Start(cmd) | Command::Restart(cmd) => {
            use uyuni_core::plan::lifecycle::Lifecycle;
            let action = match &cli.command {
                Command::Stop(_) => Lifecycle::Stop,
                Command::Restart(_) => Lifecycle::Restart,
                _ => Lifecycle::Start,
            };
            let run_lock = lock::RunLock::default();
            let kubectl = cli.kube.kubectl_hint();
            let resume = |_: &Kubectl, ns: Option<&str>| lifecycle::again(action, cli, ns);
            let work = lifecycle::run(action, cmd, cli, reporter, &run_lock);
            interruptible(work, &run_lock, reporter, &kubectl, resume, cli).await
        }
        Command::Install(cmd) => {
            let run_lock = lock::RunLock::default();
            let kubectl = install::repeat_kubectl(cmd, cli);
            let resume =
                |kubectl: &Kubectl, ns: Option<&str>| kubectl.install(ns, &cmd.install.fqdn);
            let work = install::run(cmd, cli, reporter, &run_lock);
            interruptible(work, &run_lock, reporter, &kubectl, resume, cli).await
        }
        Command::Upgrade(cmd) => {
            let run_lock = lock::RunLock::default();
            let kubectl = upgrade::repeat_kubectl(cmd, cli);
            let resume = |kubectl: &Kubectl, ns: Option<&str>| kubectl.upgrade(ns);
            let work = upgrade::run(cmd, cli, reporter, &run_lock);
            interruptible(work, &run_lock, reporter, &kubectl, resume, cli).await
        }
        Command::Uninstall(cmd) => {
            let run_lock = lock::RunLock::default();
            let kubectl = cli.kube.kubectl_hint();
            let mut args = String::from("uninstall");
            if cmd.uninstall.purge_volumes {
                args.push_str(" --purge-volumes");
            }
            if cmd.uninstall.delete_namespace {
                args.push_str(" --delete-namespace");
            }
            let resume = |kubectl: &Kubectl, ns: Option<&str>| kubectl.uyuni(ns, &args);
            let work = uninstall::run(cmd, cli, reporter, &run_lock);
            interruptible(work, &run_lock, reporter, &kubectl, resume, cli).await
        }
    }
}

/// Runs a command that writes until it ends or a signal stops it; releases the namespace's
/// lease either way. Dropping `work` stops it at its next await point: an object being applied
/// was sent whole or not at all (server-side apply), and a Job keeps running. `kubectl`: the
/// run's connection flags; `resume`: the command line that resumes the run in a namespace.
async fn interruptible(
    work: impl std::future::Future<Output = Result<()>>,
    run_lock: &lock::RunLock,
    reporter: &output::Reporter,
    kubectl: &Kubectl,
    resume: impl Fn(&Kubectl, Option<&str>) -> String,
    cli: &Cli,
) -> Result<()> {
    let outcome = tokio::select! {
        result = work => Ok(result),
        signal = interrupt() => Err(signal),
    };
    // Stopped by a signal: the operation record says so while this run still holds the lease.
    if let Err(signal) = &outcome {
        run_lock
            .record_interrupted(&format!("interrupted by {}", signal.name()), reporter)
            .await;
    }
    // However the run ended (done, failed, or interrupted), its namespace's lease is released
    // for the next run.
    run_lock.release(reporter).await;
    match outcome {
        Ok(result) => result,
        Err(signal) => Err(Interrupted::new(signal, kubectl, &resume, cli, reporter).into()),
    }
}

/// A signal that ends a run, with the exit code shells give it (128 + its number), as kubectl
/// and helm exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signal {
    Int,
    Term,
}

impl Signal {
    fn name(self) -> &'static str {
        match self {
            Signal::Int => "SIGINT",
            Signal::Term => "SIGTERM",
        }
    }

    fn exit_code(self) -> u8 {
        match self {
            Signal::Int => 130,
            Signal::Term => 143,
        }
    }
}

/// Waits for SIGINT (Ctrl-C) or SIGTERM.
async fn interrupt() -> Signal {
    #[cfg(unix)]
    let term = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            // Without a handler SIGTERM keeps its default (the process ends at once).
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => Signal::Int,
        () = term => Signal::Term,
    }
}

/// A run stopped by a signal: what is left running, and how to follow and resume it.
#[derive(Debug)]
struct Interrupted {
    signal: Signal,
    message: String,
}

impl Interrupted {
    fn new(
        signal: Signal,
        kubectl: &Kubectl,
        resume: &dyn Fn(&Kubectl, Option<&str>) -> String,
        cli: &Cli,
        reporter: &output::Reporter,
    ) -> Interrupted {
        // The connection flags were taken before the connection was made: with the context it
        // resolved (the kubeconfig's current one) when none was given, so that the commands
        // below reach the same cluster, as every other hint does (`Cli::kubectl_hint`).
        let mut kubectl = kubectl.clone();
        if kubectl.context.is_none() {
            kubectl.context = cli::RESOLVED_CONTEXT.get().cloned();
        }
        let kubectl = &kubectl;
        let (namespace, job) = reporter.interrupted_context();
        let namespace = namespace.or_else(|| cli.kube.namespace.clone());
        let ns = namespace.as_deref();
        let jobs = kubectl.cmd(
            ns,
            &format!("get jobs -l {}", uyuni_core::labels::MANAGED_SELECTOR),
        );
        // The same run again, with the namespace the run resolved.
        let resume = format!("run `{}` to resume where it stopped", resume(kubectl, ns));
        // A final copy stopped the source's services, and they stay stopped until the server
        // is ready: say so, with both ways on, whether it was interrupted during the copy or
        // after it (this run's copy, or an earlier run's).
        let final_copy = |job: &str| {
            job.starts_with(uyuni_core::catalogue::names::DATA_SYNC_JOB_PREFIX)
                && !job.contains("-prepare-")
        };
        let outage = match &cli.command {
            Command::Migrate(cmd)
                if !cmd.migrate.prepare
                    && (reporter.source_down()
                        || job.as_deref().is_some_and(final_copy)
                        || reporter.jobs().iter().any(|j| final_copy(j))) =>
            {
                format!(
                    ". The services of {source} are stopped: the final copy stopped them, and they stay stopped until the migrated server is ready; resuming finishes the migration, or, to serve from {source} again instead, run `spacewalk-service start` on it (a later migration then copies again what changed)",
                    source = cmd.migrate.source
                )
            }
            _ => String::new(),
        };
        let message = match job {
            Some(job) => format!(
                "interrupted by {}: Job {job} was already started and keeps running in the cluster; follow it with `{}` (all Jobs of the run: `{jobs}`); nothing was left half-written; {resume}, it waits for that Job",
                signal.name(),
                kubectl.cmd(ns, &format!("logs -f job/{job}")),
            ),
            None => format!(
                "interrupted by {}: nothing was left half-written (each object is written whole or not at all); Jobs started earlier keep running in the cluster: `{jobs}` lists them; {resume}",
                signal.name()
            ),
        };
        let message = format!("{message}{outage}");
        Interrupted { signal, message }
    }
}

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Interrupted {}

/// A command that ends with an exit code of its own (`status --exit-code`), and the line that
/// says why on stderr.
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// The name `rbac --for` takes for the command, if it prints its rules
/// ([`uyuni_core::rbac::Command::name`]).
fn rbac_name(command: &Command) -> Option<&'static str> {
    use uyuni_core::rbac::Command as Rbac;
    Some(
        match command {
            Command::Migrate(_) => Rbac::Migrate,
            Command::Install(_) => Rbac::Install,
            Command::Upgrade(_) => Rbac::Upgrade,
            Command::Uninstall(_) => Rbac::Uninstall,
            Command::Stop(_) => Rbac::Stop,
            Command::Start(_) => Rbac::Start,
            Command::Restart(_) => Rbac::Restart,
            Command::Status(_) => Rbac::Status,
            Command::Logs(_) => Rbac::Logs,
            Command::Report(_) => Rbac::Report,
            Command::Version(_) | Command::Rbac(_) | Command::Completion(_) => return None,
        }
        .name(),
    )
}

/// The plugin's `main`.
pub fn main() -> ExitCode {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // kubectl_complete-uyuni runs `kubectl-uyuni __complete WORDS…` for `kubectl uyuni <TAB>`:
    // answered before parsing, as the words are an incomplete command line.
    match args.get(1).and_then(|a| a.to_str()) {
        Some("__complete") => return completion::run(&args[2..], true),
        Some("__completeNoDesc") => return completion::run(&args[2..], false),
        _ => {}
    }
    args = cli::normalize_args(args);
    let mut cli = Cli::parse_from(args);
    match cli.kube_user() {
        Ok(user) => cli.kube.user = user,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    init_tracing(
        cli.verbosity(),
        cli.quiet,
        output::use_color(
            cli.color,
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ),
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let cli_color = cli.color;
    let kube = cli.kube.clone();
    let rbac_for = rbac_name(&cli.command);
    let result = runtime.block_on(run(cli));
    // After the run: the context the connection resolved is known now.
    let kubectl = kube.kubectl_hint();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of stdout went away (`… | head`): stop quietly, as kubectl does.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            ExitCode::SUCCESS
        }
        Err(e) => {
            let color = output::use_color(
                cli_color,
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR").as_deref(),
            );
            let message = output::error_chain_with(&e, &kubectl);
            eprintln!("{} {message}", output::paint("error:", "31", color));
            if message.contains(uyuni_core::kubectl::TOKEN_PLACEHOLDER) {
                eprintln!("note: {}", uyuni_core::kubectl::TOKEN_NOTE);
            }
            // Permissions missing: the Role that grants exactly what the command needs.
            if let Some(command) = rbac_for
                && e.chain().any(|c| {
                    matches!(
                        c.downcast_ref::<uyuni_core::PlanError>(),
                        Some(uyuni_core::PlanError::AccessDenied { .. })
                    )
                })
            {
                eprintln!(
                    "note: `{}` prints a Role that grants exactly what `{command}` needs, for a cluster administrator to apply (`| kubectl apply -f -`) and bind to your user (--bind-user) or ServiceAccount (docs/rbac.md)",
                    kubectl.uyuni(kube.namespace.as_deref(), &format!("rbac --for {command}"))
                );
            }
            if let Some(exit) = e.downcast_ref::<Exit>() {
                return ExitCode::from(exit.code);
            }
            match e.downcast_ref::<Interrupted>() {
                Some(interrupted) => ExitCode::from(interrupted.signal.exit_code()),
                // A value given on the command line that cannot be used: a usage error, as
                // clap's own (docs/output.md, "Exit codes").
                None if e
                    .downcast_ref::<uyuni_core::record::RecordError>()
                    .is_some()
                    || e.downcast_ref::<uyuni_core::ParamsError>().is_some()
                    || matches!(
                        e.downcast_ref::<uyuni_effects::EffectsError>(),
                        Some(uyuni_effects::EffectsError::InvalidOption { .. })
                    ) =>
                {
                    ExitCode::from(2)
                }
                None => ExitCode::FAILURE,
            }
        }
    }
}
