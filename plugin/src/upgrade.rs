//! `kubectl uyuni upgrade`: the installed server's remembered inputs and the image flags →
//! validated parameters → the drive loop (`drive.rs`) with upgrade's planner and its one
//! question (the outage), or the pure preview with `--dry-run`.

use anyhow::Result;
use uyuni_core::Observed;
use uyuni_core::catalogue::names;
use uyuni_core::params::{GeneratedPasswords, InstallArgs, MigrateArgs, Origin, UpgradeParams};
use uyuni_core::plan::Plan;
use uyuni_core::render::{self, Line};
use uyuni_effects::record::ServerOrigin;

use crate::cli::{self, Cli, UpgradeCmd};
use crate::install::generate_password;
use crate::migrate::spec_args;
use crate::output::Reporter;
use crate::{clock, connect};

/// The connection flags of the run and the `upgrade` flags a repeated run needs.
pub fn repeat_kubectl(cmd: &UpgradeCmd, cli: &Cli) -> uyuni_core::kubectl::Kubectl {
    let _ = cmd;
    let argv: Vec<String> = cli::normalize_args(std::env::args_os())
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    uyuni_core::kubectl::Kubectl {
        migrate_flags: cli::repeat_flags_of(&argv, "upgrade", "")
            .into_iter()
            .filter(|f| f != "--yes" && f != "-y")
            .collect(),
        ..cli.kube.kubectl_hint()
    }
}

/// Connects, reads the recorded specification and the server's name, and validates the flags
/// into parameters.
async fn start(
    cmd: &UpgradeCmd,
    cli: &Cli,
    reporter: &Reporter,
) -> Result<(
    uyuni_effects::Connection,
    UpgradeParams,
    Vec<uyuni_core::record::Setting>,
)> {
    let conn = connect(&cli.kube).await?;
    reporter.set_kubectl(cli.kube.kubectl_hint());
    let origin = uyuni_effects::record::server_origin(
        &conn.client,
        &conn.namespace,
        &uyuni_effects::NoProgress,
    )
    .await?;
    let recorded = uyuni_effects::record::server_spec(
        &conn.client,
        &conn.namespace,
        &uyuni_effects::NoProgress,
    )
    .await?;
    let kubectl = repeat_kubectl(cmd, cli);
    let spec = spec_args(&cmd.spec)?;
    let (origin, settings) = match origin {
        ServerOrigin::Migrated { source } => {
            let args = MigrateArgs {
                namespace_explicit: conn.namespace_explicit,
                kubectl,
                namespace: conn.namespace.clone(),
                source_fqdn: source,
                ssh_user: "root".to_owned(),
                run_id: clock::run_id(),
                tool_version: env!("CARGO_PKG_VERSION").to_owned(),
                spec,
                ..MigrateArgs::default()
            };
            let (params, settings) = uyuni_core::record::params(args, &recorded)?;
            (Origin::Migrated(Box::new(params)), settings)
        }
        other => {
            // Where there is no server, a stand-in name: the planner refuses, naming the
            // namespace.
            let fqdn = match other {
                ServerOrigin::Installed { fqdn } if !fqdn.is_empty() => fqdn,
                _ => "server.invalid".to_owned(),
            };
            let args = InstallArgs {
                namespace_explicit: conn.namespace_explicit,
                kubectl,
                namespace: conn.namespace.clone(),
                run_id: clock::run_id(),
                tool_version: env!("CARGO_PKG_VERSION").to_owned(),
                spec,
                fqdn,
                // Kept in their Secrets since the install: never generated anew, never asked
                // for.
                generated: GeneratedPasswords {
                    db: generate_password()?,
                    db_admin: generate_password()?,
                    report_db: generate_password()?,
                },
                ..InstallArgs::default()
            };
            let (params, settings) = uyuni_core::record::params(args, &recorded)?;
            (Origin::Installed(Box::new(params)), settings)
        }
    };
    Ok((
        conn,
        UpgradeParams {
            origin,
            backup: !cmd.no_backup,
            rollback: cmd.rollback,
        },
        settings,
    ))
}

/// `--dry-run`: observe, preview, print. Returns whether anything would change.
async fn dry_run(cmd: &UpgradeCmd, cli: &Cli, reporter: &Reporter) -> Result<bool> {
    let (conn, mut params, remembered) = start(cmd, cli, reporter).await?;
    let (observed, preview) =
        crate::dry_run::observe_and_preview(&conn, &mut params, reporter).await?;
    let (params, observed) = (&params, &observed);
    if let Some((needed, answers)) =
        crate::dry_run::review_access(&conn, params, observed, &preview.executed, reporter).await
        && let Err(e) = uyuni_core::access::check(&needed, &answers)
    {
        reporter.warn(&e.to_string());
    }
    crate::dry_run::warn_secrets_shown(&cmd.preview, reporter);
    let checks = crate::dry_run::server_checks(
        &cmd.preview,
        &conn,
        &params.namespace,
        observed,
        &preview.steps,
        reporter,
    )
    .await?;
    let document = async || UpgradePreview {
        plan: render::plan_document(&params.namespace, &preview.steps, observed),
        remembered: &remembered,
        execution: render::execution(&preview.executed),
        server_dry_run: crate::dry_run::checks_json(checks.as_deref()),
    };
    let human = async |options| {
        let record = uyuni_core::plan::upgrade::UpgradeRecord::read(observed);
        let heading = if params.rollback {
            // A rollback returns to the images the upgrade's record names, on the data kept.
            let back_to = record
                .as_ref()
                .and_then(|r| r.from.get(names::SERVER_DEPLOYMENT))
                .map_or("the images before the upgrade", String::as_str);
            format!(
                "Dry run: nothing is written. Rollback of the server in namespace {} to {back_to}:",
                params.namespace
            )
        } else {
            format!(
                "Dry run: nothing is written. Upgrade of the server in namespace {} to {}:",
                params.namespace, params.spec.image.server
            )
        };
        let mut lines = vec![Line::plain(heading), Line::plain("")];
        lines.push(Line::plain(render::summary(&preview.steps)));
        lines.push(Line::plain(outage_line(&preview.executed)));
        lines.push(Line::plain(if params.rollback {
            format!(
                "A rollback runs no inspection: it returns to the images ConfigMap {} recorded, on the data kept when the upgrade began.",
                names::UPGRADE_CONFIG_MAP
            )
        } else {
            "The releases and PostgreSQL versions are known once the inspection Jobs have run; this preview assumes an upgrade without a PostgreSQL major change.".to_owned()
        }));
        lines.push(Line::plain(""));
        lines.extend(render::steps_lines(&preview.steps));
        lines.push(Line::plain(""));
        lines.extend(crate::dry_run::closing_lines(
            &cmd.preview,
            &remembered,
            checks.as_deref(),
            &preview.steps,
            observed,
            options,
        ));
        lines
    };
    let steps = &preview.steps;
    crate::dry_run::print(cli, &cmd.preview, steps, checks.as_deref(), document, human).await?;
    Ok(!preview.executed.is_empty())
}

/// The outage the steps carry out: from the first scale to 0 until the server is ready again.
fn outage_line(executed: &[uyuni_core::Step]) -> String {
    let first = executed
        .iter()
        .position(|s| matches!(s.action, uyuni_core::Action::Scale { replicas: 0, .. }));
    let ready = executed.iter().rposition(|s| s.id == "server-ready");
    match (first, ready) {
        (Some(first), Some(ready)) => format!(
            "Outage: the server is down from step {} ({}) until step {} ({}).",
            first + 1,
            executed[first].description,
            ready + 1,
            executed[ready].description
        ),
        (Some(first), None) => format!(
            "Outage: the server is down from step {} ({}).",
            first + 1,
            executed[first].description
        ),
        _ => "Outage: none (no Deployment is stopped).".to_owned(),
    }
}

/// What `upgrade --dry-run -o json` prints.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UpgradePreview<'a> {
    #[serde(flatten)]
    plan: render::PlanDocument,
    remembered: &'a [uyuni_core::record::Setting],
    execution: Vec<render::ExecutedStep>,
    /// With `--dry-run=server`: the API server's verdict on each write.
    #[serde(skip_serializing_if = "Option::is_none")]
    server_dry_run: Option<Vec<crate::dry_run::ServerCheckJson<'a>>>,
}

pub async fn run(
    cmd: &UpgradeCmd,
    cli: &Cli,
    reporter: &Reporter,
    run_lock: &crate::lock::RunLock,
) -> Result<()> {
    if let Some(divisor) = cmd.run.retry_delay_divisor {
        uyuni_effects::retry::shorten_delays(divisor);
    }
    if let Some(done) =
        crate::dry_run::when_asked(&cmd.preview, cli, || dry_run(cmd, cli, reporter)).await
    {
        return done;
    }
    let (conn, params, _) = start(cmd, cli, reporter).await?;
    let mut command = UpgradeCommand {
        cmd,
        cli,
        params,
        confirmed: cmd.yes,
        stopped: false,
    };
    let drive = crate::drive::Drive::new(&conn, reporter, run_lock, &cmd.run);
    let observed = match crate::drive::run(&mut command, &drive).await {
        Ok(observed) => observed,
        Err(error) => {
            if command.stopped {
                let params = &command.params;
                let ns = Some(params.namespace.as_str());
                let again = params.kubectl.upgrade(ns);
                let back = if params.rollback {
                    String::new()
                } else {
                    format!(
                        ", or `{}` to start it again on the images it ran before (the backup is restored only if the database ran the new image)",
                        params.kubectl.uyuni(ns, "upgrade --rollback")
                    )
                };
                reporter.warn(&format!(
                    "the server in namespace {} is stopped for the upgrade. Run `{again}` again once the cause is fixed: it goes on where it stopped{back}",
                    params.namespace
                ));
            }
            return Err(error);
        }
    };
    let params = command.params;
    let record = uyuni_core::plan::upgrade::UpgradeRecord::read(&observed);
    // A rollback went from the upgrade's release back to the one before, and leaves no way
    // back of its own: the copy and the old volume were the upgrade's.
    let rolled_back = params.rollback;
    let releases = record.as_ref().map(|r| r.releases(rolled_back));
    let (release_from, release_to) = (
        releases.map(|(from, _)| from.to_owned()),
        releases.map(|(_, to)| to.to_owned()),
    );
    let record = record.filter(|_| !rolled_back);
    let result = UpgradeResult {
        api_version: uyuni_core::render::API_VERSION,
        kind: "UpgradeResult",
        rolled_back,
        namespace: params.namespace.clone(),
        images: uyuni_core::plan::upgrade::DEPLOYMENTS
            .iter()
            .filter_map(|name| {
                Some((
                    (*name).to_owned(),
                    uyuni_core::plan::upgrade::live_image(&observed, name)?,
                ))
            })
            .collect(),
        release_from,
        release_to,
        database_volume: uyuni_core::resolve::live_db_claim(&observed).unwrap_or_default(),
        backup_volume: record
            .as_ref()
            .map(|r| r.backup_claim.clone())
            .filter(|c| !c.is_empty()),
        previous_volume: record
            .as_ref()
            .filter(|r| r.db_claim_from != r.db_claim_to)
            .map(|r| r.db_claim_from.clone()),
    };
    crate::output::print_data(cli.output, &result, |r| {
        let mut text = format!(
            "Uyuni server in namespace {} {} {}.\n",
            r.namespace,
            if r.rolled_back {
                "was rolled back and runs"
            } else {
                "runs"
            },
            r.images
                .get(names::SERVER_DEPLOYMENT)
                .map_or("", String::as_str)
        );
        if let (Some(from), Some(to)) = (&r.release_from, &r.release_to) {
            let label = if r.rolled_back {
                "Rolled back:"
            } else {
                "Release:"
            };
            text.push_str(&format!("  {label:<17} {from} → {to}\n"));
        }
        text.push_str(&format!("  Database volume:  {}\n", r.database_volume));
        if let Some(backup) = &r.backup_volume {
            text.push_str(&format!(
                "  Way back:         volume {backup}, a copy of the database before the upgrade (ConfigMap {} records the images before it)\n",
                names::UPGRADE_CONFIG_MAP
            ));
        }
        if let Some(previous) = &r.previous_volume {
            text.push_str(&format!(
                "  Way back:         volume {previous}, the database before the PostgreSQL upgrade, left as it was\n"
            ));
        }
        text
    })
}

/// What `upgrade` prints on stdout at its end.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UpgradeResult {
    api_version: &'static str,
    kind: &'static str,
    namespace: String,
    /// `upgrade --rollback`: the run returned to the images before the upgrade (the releases
    /// then read from the upgraded one back to the one before, and no way back is offered).
    rolled_back: bool,
    /// Image by Deployment, as they run now.
    images: std::collections::BTreeMap<String, String>,
    /// The release this run went from, and to.
    release_from: Option<String>,
    release_to: Option<String>,
    database_volume: String,
    backup_volume: Option<String>,
    previous_volume: Option<String>,
}

/// `upgrade` in the drive loop: its planner, and the outage asked for before the first
/// Deployment is stopped.
struct UpgradeCommand<'a> {
    cmd: &'a UpgradeCmd,
    cli: &'a Cli,
    params: UpgradeParams,
    confirmed: bool,
    /// A Deployment was stopped by this run: a failure after it leaves the server down.
    stopped: bool,
}

impl crate::drive::Command for UpgradeCommand<'_> {
    type Params = UpgradeParams;

    fn params(&self) -> &UpgradeParams {
        &self.params
    }

    fn first_observation(&mut self, observed: &Observed) {
        self.params.run_id = clock::run_id_unused_in(observed);
    }

    fn warnings(&self, observed: &Observed) -> Vec<String> {
        uyuni_core::storage::unchecked_warning(observed)
            .into_iter()
            .collect()
    }

    fn identity(&self) -> crate::operation::Identity {
        crate::operation::Identity {
            command: "upgrade",
            fingerprint: uyuni_core::operation::fingerprint(&self.params),
        }
    }

    fn writer(&self) -> crate::lock::Writer<'_> {
        let params = &self.params;
        let repeat = params.kubectl.upgrade(Some(&params.namespace));
        crate::lock::Writer::of(params, repeat, self.cli, &self.cmd.run)
    }

    async fn before_step(
        &mut self,
        _plan: &Plan,
        step: &uyuni_core::Step,
        drive: &crate::drive::Drive<'_>,
    ) -> Result<()> {
        let stops = matches!(step.action, uyuni_core::Action::Scale { replicas: 0, .. });
        self.stopped |= stops;
        if self.confirmed || !stops {
            return Ok(());
        }
        let ns = &self.params.namespace;
        let (question, no_terminal) = if self.params.rollback {
            (
                format!(
                    "Roll the server in namespace {ns} back to the images before the upgrade? It stops, and everything written since the upgrade began is lost. [y/N] "
                ),
                format!(
                    "the rollback stops the server in namespace {ns} and returns it to the data kept when the upgrade began: everything written since is lost. There is no terminal to ask whether it may: pass --yes to confirm it. Nothing was changed"
                ),
            )
        } else {
            (
                format!(
                    "Stop the server in namespace {ns} for the upgrade to {} now? It is down until the new images are ready. [y/N] ",
                    self.params.spec.image.server
                ),
                format!(
                    "the upgrade stops the server in namespace {ns} (an outage until the new images are ready), and there is no terminal to ask whether it may: pass --yes to confirm it. The inspections ran; nothing of the server was changed"
                ),
            )
        };
        drive
            .consent(
                &self.writer(),
                step,
                &question,
                no_terminal,
                "not confirmed: the server keeps running on its images; nothing of it was changed",
            )
            .await?;
        self.confirmed = true;
        Ok(())
    }
}
