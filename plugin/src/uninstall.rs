//! `kubectl uyuni uninstall`: flags → validated parameters → the drive loop (`drive.rs`) with
//! uninstall's planner, the user's consent before the first write (a serving server removed,
//! the data purged), or the pure preview with `--dry-run`; at the end, what was kept and how
//! to reinstall on it or remove it.

use anyhow::{Result, anyhow, bail};
use uyuni_core::catalogue::names;
use uyuni_core::params::UninstallParams;
use uyuni_core::plan::{Plan, Planner, uninstall};
use uyuni_core::render::{self, Line};
use uyuni_core::{Kind, Observed, PlanError};

use crate::cli::{Cli, UninstallCmd};
use crate::output::Reporter;
use crate::prompt::interactive;
use crate::{clock, connect};

/// `kubectl uyuni uninstall FLAGS…` with the run's connection flags: the command that repeats
/// the run (never with --yes: consent is given each time).
fn repeat(params: &UninstallParams) -> String {
    let mut args = String::from("uninstall");
    if params.purge_volumes {
        args.push_str(" --purge-volumes");
    }
    if params.delete_namespace {
        args.push_str(" --delete-namespace");
    }
    params.kubectl.uyuni(Some(&params.namespace), &args)
}

async fn start(
    cmd: &UninstallCmd,
    cli: &Cli,
    reporter: &Reporter,
) -> Result<(uyuni_effects::Connection, UninstallParams)> {
    let conn = connect(&cli.kube).await?;
    reporter.set_kubectl(cli.kube.kubectl_hint());
    let params = UninstallParams::new(
        &conn.namespace,
        conn.namespace_explicit,
        &cli.kube.kubectl_hint(),
        &clock::run_id(),
        env!("CARGO_PKG_VERSION"),
        cmd.uninstall.purge_volumes,
        cmd.uninstall.delete_namespace,
    )
    .map_err(|e| anyhow!("{e}"))?;
    Ok((conn, params))
}

/// The claims a purge deletes, one line each: name, size, what it holds.
fn claim_lines(observed: &Observed) -> Vec<String> {
    uninstall::claims(observed)
        .into_iter()
        .map(|c| {
            format!(
                "    {:<22} {:>8}  {}",
                c.name,
                if c.size.is_empty() { "?" } else { &c.size },
                c.holds
            )
        })
        .collect()
}

/// `--dry-run`: observe, preview, print. Returns whether anything would change.
async fn dry_run(cmd: &UninstallCmd, cli: &Cli, reporter: &Reporter) -> Result<bool> {
    let (conn, params) = start(cmd, cli, reporter).await?;
    let observed = crate::drive::observe(
        &conn,
        &params.observation(),
        |empty| uyuni_core::access::needed(&params, empty),
        reporter,
    )
    .await?;
    uninstall::check(&params, &observed).map_err(|e| anyhow!(e.render(&params.kubectl)))?;
    let preview = uyuni_core::preview::preview(&params, &observed)?;
    let steps = uyuni_core::preview::steps_with_deletions(&preview);
    let access_line =
        crate::dry_run::access_input(&conn, &params, &observed, &preview.executed, reporter).await;
    // `--dry-run=server` sends the writes (the scale to 0 before the deletions); a deletion has
    // no server-side dry run here: the permission review above says whether it may be made.
    let checks = crate::dry_run::server_checks(
        &cmd.preview,
        &conn,
        &params.namespace,
        &observed,
        &steps,
        reporter,
    )
    .await?;
    let document = async || UninstallPreview {
        plan: render::plan_document(&params.namespace, &steps, &observed),
        execution: render::execution(&preview.executed),
        server_dry_run: crate::dry_run::checks_json(checks.as_deref()),
    };
    let human = async |options| {
        let mut lines = vec![
            Line::plain(format!(
                "Dry run: nothing is deleted. Uninstall from namespace {}:",
                params.namespace
            )),
            Line::plain(""),
            Line::plain(render::summary(&steps)),
            Line::plain(""),
        ];
        lines.extend(render::steps_lines(&steps));
        lines.push(Line::plain(""));
        if params.purge_volumes {
            lines.push(Line::plain(
                "--purge-volumes deletes these claims and the data on them:",
            ));
            lines.extend(claim_lines(&observed).into_iter().map(Line::plain));
            lines.push(Line::plain(""));
        }
        if uninstall::serving(&observed) {
            lines.push(Line::plain(format!(
                "The server in Deployment {} serves now: a run asks before removing it (--yes without a terminal).",
                names::SERVER_DEPLOYMENT
            )));
        }
        if let Some(input) = &access_line {
            lines.push(Line::plain(format!(
                "{}: {}",
                input.name,
                crate::install::access_text(&input.need, input.how)
            )));
            lines.push(Line::plain(""));
        }
        if let Some(checks) = &checks {
            lines.extend(render::plain_lines(&crate::dry_run::server_text(checks)));
            lines.push(Line::plain(
                "  (deletions are not sent: the permission review above covers them)",
            ));
        }
        if !cmd.preview.summary {
            lines.extend(render::diffs_lines(&steps, &observed, options));
        }
        lines
    };
    crate::dry_run::print(
        cli,
        &cmd.preview,
        &steps,
        checks.as_deref(),
        document,
        human,
    )
    .await?;
    Ok(!preview.executed.is_empty())
}

/// What `uninstall --dry-run -o json` prints.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UninstallPreview<'a> {
    #[serde(flatten)]
    plan: render::PlanDocument,
    execution: Vec<render::ExecutedStep>,
    /// With `--dry-run=server`: the API server's verdict on each write (deletions are not sent).
    #[serde(skip_serializing_if = "Option::is_none")]
    server_dry_run: Option<Vec<crate::dry_run::ServerCheckJson<'a>>>,
}

pub async fn run(
    cmd: &UninstallCmd,
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
    let (conn, params) = start(cmd, cli, reporter).await?;
    let mut command = UninstallCommand {
        cmd,
        cli,
        params,
        refused: None,
        serving: false,
        fqdn: None,
        claims: Vec::new(),
        confirmed: cmd.uninstall.yes,
    };
    let drive = crate::drive::Drive::new(&conn, reporter, run_lock, &cmd.run);
    let observed = crate::drive::run(&mut command, &drive).await?;
    let params = &command.params;
    let ns = &params.namespace;
    let kept: Vec<String> = uninstall::data(&observed)
        .iter()
        .map(|t| format!("{} {}", t.kind.name(), t.name))
        .collect();
    let left: Vec<String> = params
        .plan(&observed)
        .map(|plan| {
            plan.steps
                .iter()
                .filter(|s| s.reason == uninstall::NOT_OURS)
                .map(|s| format!("{} {}", s.target.kind.name(), s.target.name))
                .collect()
        })
        .unwrap_or_default();
    let fqdn = command.fqdn.clone();
    let reinstall = params.kubectl.uyuni(
        Some(ns),
        &format!(
            "install {} --reuse-volumes",
            fqdn.as_deref().unwrap_or("FQDN")
        ),
    );
    let remove = params.kubectl.uyuni(Some(ns), "uninstall --purge-volumes");
    let result = UninstallResult {
        api_version: uyuni_core::render::API_VERSION,
        kind: "UninstallResult",
        namespace: ns.clone(),
        namespace_deleted: !observed.contains(Kind::Namespace, ns),
        kept: kept.clone(),
        left_not_ours: left,
        reinstall: (!kept.is_empty()).then_some(reinstall),
        remove: (!kept.is_empty()).then_some(remove),
        records_deleted: params.purge_volumes,
    };
    crate::output::print_data(cli.output, &result, |r| {
        let mut text = format!("Uyuni server uninstalled from namespace {}.\n", r.namespace);
        if r.namespace_deleted {
            text.push_str(&format!("Namespace {} was deleted.\n", r.namespace));
        }
        if r.kept.is_empty() && r.records_deleted {
            text.push_str(
                "Nothing of kubectl-uyuni's is left: its operation records were deleted too, this run's included (this output is its result).\n",
            );
        } else if r.kept.is_empty() {
            text.push_str("Nothing of kubectl-uyuni's is left but its operation records.\n");
        } else {
            text.push_str("Kept (the server's data and the credentials it was set up with):\n");
            for k in &r.kept {
                text.push_str(&format!("  {k}\n"));
            }
            if let Some(again) = &r.reinstall {
                text.push_str(&format!("Reinstall on them: `{again}`\n"));
            }
            if let Some(remove) = &r.remove {
                text.push_str(&format!(
                    "Or remove them (their data cannot be recovered): `{remove}`\n"
                ));
            }
        }
        if !r.records_deleted {
            text.push_str(&format!(
                "Kept too: the operation records (ConfigMaps labelled {}), this run's included, which `kubectl uyuni report` bundles; a purge (--purge-volumes) deletes them.\n",
                OPERATION_LABEL
            ));
        }
        if !r.left_not_ours.is_empty() {
            text.push_str(&format!(
                "Left as they were (not created by kubectl-uyuni): {}\n",
                r.left_not_ours.join(", ")
            ));
        }
        text
    })
}

/// What `uninstall` prints on stdout at its end.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UninstallResult {
    api_version: &'static str,
    kind: &'static str,
    namespace: String,
    namespace_deleted: bool,
    /// The claims and credential Secrets kept, as `Kind name`.
    kept: Vec<String>,
    /// Objects of the names the tool writes that it did not create, left untouched.
    left_not_ours: Vec<String>,
    /// The command that installs a server on what was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    reinstall: Option<String>,
    /// The command that deletes what was kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    remove: Option<String>,
    /// Whether the operation records were deleted (a purge deletes them, this run's included;
    /// a plain uninstall keeps them).
    records_deleted: bool,
}

/// The label of the operation records, as `kubectl get -l` takes it.
const OPERATION_LABEL: &str = "app.kubernetes.io/component=operation";

/// `uninstall` in the drive loop.
struct UninstallCommand<'a> {
    cmd: &'a UninstallCmd,
    cli: &'a Cli,
    params: UninstallParams,
    /// Set by the first observation when the namespace holds nothing of the tool's: every
    /// plan is then refused, before any write.
    refused: Option<PlanError>,
    /// The server served when the run started.
    serving: bool,
    /// The server's name, from ConfigMap uyuni-config as the run found it.
    fqdn: Option<String>,
    /// The claims a purge deletes, as the run found them.
    claims: Vec<String>,
    /// `--yes`, or the user said yes on the terminal.
    confirmed: bool,
}

impl UninstallCommand<'_> {
    /// What this run asks consent for, in words; empty when nothing.
    fn consent_needed(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.serving {
            out.push(format!(
                "remove the serving server (Deployment {} is ready)",
                names::SERVER_DEPLOYMENT
            ));
        }
        if self.params.purge_volumes && !self.claims.is_empty() {
            out.push("delete the claims and credential Secrets (--purge-volumes)".to_owned());
        }
        out
    }
}

impl crate::drive::Command for UninstallCommand<'_> {
    type Params = UninstallParams;

    fn params(&self) -> &UninstallParams {
        &self.params
    }

    fn first_observation(&mut self, observed: &Observed) {
        self.params.run_id = clock::run_id_unused_in(observed);
        self.refused = uninstall::check(&self.params, observed).err();
        self.serving = uninstall::serving(observed);
        self.fqdn = observed
            .config_map(names::CONFIG_MAP)
            .and_then(|c| c.data.as_ref())
            .and_then(|d| d.get("fqdn"))
            .cloned();
        self.claims = claim_lines(observed);
    }

    fn plan(&self, observed: &Observed) -> Result<Plan, PlanError> {
        if let Some(refused) = &self.refused {
            return Err(refused.clone());
        }
        self.params.plan(observed)
    }

    fn purges_records(&self) -> bool {
        self.params.purge_volumes
    }

    fn identity(&self) -> crate::operation::Identity {
        crate::operation::Identity {
            command: "uninstall",
            fingerprint: uyuni_core::operation::fingerprint(&self.params),
        }
    }

    fn writer(&self) -> crate::lock::Writer<'_> {
        let params = &self.params;
        let repeat = repeat(params);
        crate::lock::Writer::of(params, repeat, self.cli, &self.cmd.run)
    }

    async fn before_step(
        &mut self,
        _plan: &Plan,
        step: &uyuni_core::Step,
        drive: &crate::drive::Drive<'_>,
    ) -> Result<()> {
        // Consent before the first write: refused where nobody can be asked, asked for once
        // on a terminal otherwise.
        if self.confirmed {
            return Ok(());
        }
        let needed = self.consent_needed();
        if needed.is_empty() {
            self.confirmed = true;
            return Ok(());
        }
        let what = needed.join(" and ");
        if !interactive() {
            let mut message = format!(
                "this uninstall would {what} in namespace {}, and there is no terminal to ask whether it may: pass --yes to confirm. Nothing was written",
                self.params.namespace
            );
            if self.params.purge_volumes && !self.claims.is_empty() {
                message.push_str(&format!(
                    ". The claims --purge-volumes deletes:\n{}",
                    self.claims.join("\n")
                ));
            }
            bail!(message);
        }
        // The lease first: a yes must not be asked for a run that another one's lease then
        // refuses.
        drive.take_lease(&self.writer(), step).await?;
        drive.reporter.finish(true);
        if self.params.purge_volumes && !self.claims.is_empty() {
            eprintln!(
                "--purge-volumes deletes these claims and the data on them, and the credential Secrets:\n{}",
                self.claims.join("\n")
            );
        }
        if !crate::prompt::confirm(&format!(
            "{} in namespace {} now? [y/N] ",
            capitalised(&what),
            self.params.namespace
        )) {
            bail!(
                "not confirmed: nothing was deleted. Run `{}` again when it may (--yes skips the question)",
                repeat(&self.params)
            );
        }
        self.confirmed = true;
        Ok(())
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().collect::<String>() + chars.as_str(),
        None => String::new(),
    }
}
