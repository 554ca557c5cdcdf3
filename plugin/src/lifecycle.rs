//! `kubectl uyuni stop` and `start`: the drive loop with the lifecycle planner
//! (`core::plan::lifecycle`); stopping a serving server is asked for first.

use std::io::Write;

use anyhow::Result;
use uyuni_core::Observed;
use uyuni_core::params::{ServerParams, ServerSpecArgs};
use uyuni_core::plan::lifecycle::{self, Lifecycle, LifecycleParams};
use uyuni_core::plan::{Plan, Planner};
use uyuni_core::render;

use crate::cli::{self, Cli, LifecycleCmd, OutputFormat};
use crate::output::Reporter;
use crate::{clock, connect};

fn verb(action: Lifecycle) -> &'static str {
    match action {
        Lifecycle::Stop => "stop",
        Lifecycle::Start => "start",
        Lifecycle::Restart => "restart",
    }
}

/// The connection flags of the run and the flags a repeated run needs.
fn repeat_kubectl(action: Lifecycle, cli: &Cli) -> uyuni_core::kubectl::Kubectl {
    let argv: Vec<String> = cli::normalize_args(std::env::args_os())
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    uyuni_core::kubectl::Kubectl {
        migrate_flags: cli::repeat_flags_of(&argv, verb(action), ""),
        ..cli.kube.kubectl_hint()
    }
}

/// The command that runs `action` again with this run's connection.
pub fn again(action: Lifecycle, cli: &Cli, namespace: Option<&str>) -> String {
    let kubectl = repeat_kubectl(action, cli);
    let mut args = verb(action).to_owned();
    for flag in &kubectl.migrate_flags {
        args.push(' ');
        args.push_str(flag);
    }
    kubectl.uyuni(namespace, &args)
}

/// `--dry-run`: the steps, in order; whether any would run.
async fn dry_run(
    conn: &uyuni_effects::Connection,
    params: &LifecycleParams,
    cli: &Cli,
    reporter: &Reporter,
) -> Result<bool> {
    let action = params.action;
    let observed = crate::drive::observe(
        conn,
        &params.observation(),
        |empty| uyuni_core::access::needed(params, empty),
        reporter,
    )
    .await?;
    let preview = uyuni_core::preview(params, &observed)?;
    let mut out = std::io::stdout().lock();
    match cli.output {
        OutputFormat::Human => {
            writeln!(
                out,
                "Dry run: nothing is written. {} of the server in namespace {}:\n",
                match action {
                    Lifecycle::Stop => "Stop",
                    Lifecycle::Start => "Start",
                    Lifecycle::Restart => "Restart",
                },
                params.namespace
            )?;
            // The plan's line first, as every other command's dry run opens.
            writeln!(out, "{}\n", render::summary(&preview.steps))?;
            out.write_all(render::steps_text(&preview.steps).as_bytes())?;
        }
        _ => {
            let document = render::plan_document(&params.namespace, &preview.steps, &observed);
            crate::output::print_data(cli.output, &document, |_| String::new())?;
        }
    }
    Ok(!preview.executed.is_empty())
}

pub async fn run(
    action: Lifecycle,
    cmd: &LifecycleCmd,
    cli: &Cli,
    reporter: &Reporter,
    run_lock: &crate::lock::RunLock,
) -> Result<()> {
    let conn = connect(&cli.kube).await?;
    reporter.set_kubectl(cli.kube.kubectl_hint());
    let server = ServerParams::from_args(
        &conn.namespace,
        true,
        &repeat_kubectl(action, cli),
        &clock::run_id(),
        env!("CARGO_PKG_VERSION"),
        &ServerSpecArgs::default(),
    )?;
    let params = LifecycleParams { server, action };
    if let Some(done) =
        crate::dry_run::when_asked(&cmd.preview, cli, || dry_run(&conn, &params, cli, reporter))
            .await
    {
        return done;
    }
    let mut command = LifecycleCommand {
        cmd,
        cli,
        params,
        confirmed: cmd.yes,
    };
    let drive = crate::drive::Drive {
        conn: &conn,
        reporter,
        run_lock,
        barrier_timeout: None,
    };
    let observed = crate::drive::run(&mut command, &drive).await?;
    let counts: Vec<(String, i32)> = lifecycle::ORDER
        .iter()
        .filter_map(|n| {
            Some((
                (*n).to_owned(),
                uyuni_core::observed::desired_replicas(observed.deployment(n)?),
            ))
        })
        .collect();
    let result = LifecycleResult {
        api_version: render::API_VERSION,
        kind: "LifecycleResult",
        namespace: command.params.namespace.clone(),
        action: verb(action),
        replicas: counts.iter().cloned().collect(),
    };
    crate::output::print_data(cli.output, &result, |r| {
        let list = counts
            .iter()
            .map(|(n, c)| format!("{n} {c}"))
            .collect::<Vec<_>>()
            .join(", ");
        match action {
            Lifecycle::Stop => format!(
                "The server in namespace {} is stopped (replicas: {list}); its data and the counts to start with are kept. Start it with `{}`.\n",
                r.namespace,
                again(Lifecycle::Start, cli, Some(&r.namespace))
            ),
            Lifecycle::Start => format!(
                "The server in namespace {} runs (replicas: {list}).\n",
                r.namespace
            ),
            Lifecycle::Restart => format!(
                "The server in namespace {} was restarted (replicas: {list}).\n",
                r.namespace
            ),
        }
    })
}

/// What `stop` and `start` print on stdout at their end.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LifecycleResult {
    api_version: &'static str,
    kind: &'static str,
    namespace: String,
    action: &'static str,
    replicas: std::collections::BTreeMap<String, i32>,
}

struct LifecycleCommand<'a> {
    cmd: &'a LifecycleCmd,
    cli: &'a Cli,
    params: LifecycleParams,
    /// Whether stopping a serving server may go on without asking.
    confirmed: bool,
}

impl crate::drive::Command for LifecycleCommand<'_> {
    type Params = LifecycleParams;

    fn params(&self) -> &LifecycleParams {
        &self.params
    }

    fn first_observation(&mut self, observed: &Observed) {
        // A server that does not serve is no outage to ask about.
        if !lifecycle::serving(observed) {
            self.confirmed = true;
        }
    }

    fn identity(&self) -> crate::operation::Identity {
        crate::operation::Identity {
            command: verb(self.params.action),
            fingerprint: uyuni_core::operation::fingerprint(&self.params),
        }
    }

    fn writer(&self) -> crate::lock::Writer<'_> {
        let params = &self.params;
        let repeat = again(params.action, self.cli, Some(&params.namespace));
        crate::lock::Writer::of(params, repeat, self.cli, &self.cmd.run)
    }

    async fn before_step(
        &mut self,
        _plan: &Plan,
        step: &uyuni_core::Step,
        drive: &crate::drive::Drive<'_>,
    ) -> Result<()> {
        if self.confirmed || self.params.action == Lifecycle::Start {
            return Ok(());
        }
        let what = if self.params.action == Lifecycle::Stop {
            "Stop"
        } else {
            "Restart"
        };
        // Only the first write asks: the run observed a serving server before it.
        let ns = &self.params.namespace;
        drive
            .consent(
                &self.writer(),
                step,
                &format!("{what} the server in namespace {ns} now? [y/N] "),
                format!(
                    "{} the server in namespace {ns} is an outage, and there is no terminal to ask whether it may start: pass --yes to confirm it. Nothing was stopped",
                    if what == "Stop" {
                        "stopping"
                    } else {
                        "restarting"
                    }
                ),
                "not confirmed: the server keeps running and nothing was stopped",
            )
            .await?;
        self.confirmed = true;
        Ok(())
    }
}
