//! `--dry-run`: the whole operation previewed from what the cluster holds now, printed as steps,
//! the data-plane section and diffs (human), the intended manifests (YAML) or the plan as data
//! (JSON). Nothing is written; with `--dry-run=server` every write is also sent with
//! `dryRun=All`.

use std::io::{IsTerminal, Write};

use anyhow::{Result, bail};
use serde::Serialize;
use uyuni_core::access::Access;
use uyuni_core::dataplane::{self, DataPlane};
use uyuni_core::params::ServerParams;
use uyuni_core::plan::phase::Input;
use uyuni_core::plan::{Op, Planner};
use uyuni_core::preview::Preview;
use uyuni_core::record::Setting;
use uyuni_core::render::{self, Line, LineKind, RenderOptions};
use uyuni_core::{MigrateParams, Observed, Step};
use uyuni_effects::dry_run::{ServerDryRun, server_dry_run};

use crate::cli::{Cli, ColorChoice, DryRun, MigrateCmd, OutputFormat, PreviewFlags};
use crate::output::Reporter;
use crate::source_probe;

/// A writing command's `--dry-run`, when asked: `preview` prints it and says whether anything
/// would change. With `--exit-code` the process ends with `kubectl diff`'s codes (0 nothing to
/// do, 1 changes planned, 2 errors; only the dry run ran, so nothing is left behind). `None`:
/// no dry run was asked, the command runs.
pub async fn when_asked<F>(
    flags: &crate::cli::PreviewFlags,
    cli: &Cli,
    preview: impl FnOnce() -> F,
) -> Option<Result<()>>
where
    F: std::future::Future<Output = Result<bool>>,
{
    flags.dry_run?;
    let result = preview().await;
    if !flags.exit_code {
        return Some(result.map(|_| ()));
    }
    let code = match result {
        Ok(false) => 0,
        Ok(true) => 1,
        Err(e) => {
            eprintln!(
                "error: {}",
                crate::output::error_chain_with(&e, &cli.kube.kubectl_hint())
            );
            2
        }
    };
    std::process::exit(code);
}

/// Whether stdout gets colours.
pub fn colours(choice: ColorChoice) -> bool {
    crate::output::use_color(
        choice,
        std::io::stdout().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    )
}

/// The preview's lines as text, with ANSI colours when `colour`: by what each line is (core
/// says so as it renders them), not by how its text starts.
pub fn paint(lines: &[Line], colour: bool) -> String {
    let mut out = String::new();
    for line in lines {
        let code = match line.kind {
            _ if !colour => None,
            LineKind::DiffHeader => Some("1"),
            LineKind::Added | LineKind::Step(Op::Create) => Some("32"),
            LineKind::Removed | LineKind::Step(Op::Delete) => Some("31"),
            LineKind::Hunk => Some("36"),
            LineKind::Step(Op::Update | Op::RunJob | Op::AwaitJob) => Some("33"),
            LineKind::Plain | LineKind::Context | LineKind::Step(_) => None,
        };
        match code {
            Some(code) => out.push_str(&format!("\x1b[{code}m{}\x1b[0m\n", line.text)),
            None => {
                out.push_str(&line.text);
                out.push('\n');
            }
        }
    }
    out
}

pub(crate) struct ServerCheck {
    target: String,
    result: ServerDryRun,
}

/// What `--dry-run -o json` prints: the plan document with the preview's sections beside its
/// fields (docs/dry-run.md; field names are stable, `apiVersion` says which set).
#[derive(Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct DryRunDocument<'a> {
    #[serde(flatten)]
    plan: render::PlanDocument,
    data_plane: DataPlane,
    safety: &'a uyuni_core::preview::Safety,
    /// The remembered flags in effect, and what a flag changed (`core::record`).
    remembered: &'a [Setting],
    execution: Vec<render::ExecutedStep>,
    /// Only with `--dry-run=server`.
    #[serde(skip_serializing_if = "Option::is_none")]
    server_dry_run: Option<Vec<ServerCheckJson<'a>>>,
}

/// One write as the API server judged it with `dryRun=All`.
#[derive(Serialize, schemars::JsonSchema)]
pub(crate) struct ServerCheckJson<'a> {
    target: &'a str,
    /// `accepted`, `rejected` or `client-side-only`.
    result: &'static str,
    /// Why, when not accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}

impl<'a> From<&'a ServerCheck> for ServerCheckJson<'a> {
    fn from(check: &'a ServerCheck) -> Self {
        let (result, message) = match &check.result {
            ServerDryRun::Accepted => ("accepted", None),
            ServerDryRun::Rejected(m) => ("rejected", Some(m.as_str())),
            ServerDryRun::ClientSideOnly(m) => ("client-side-only", Some(m.as_str())),
        };
        ServerCheckJson {
            target: &check.target,
            result,
            message,
        }
    }
}

/// The `serverDryRun` field of a preview's JSON: the verdicts, when `--dry-run=server` ran.
pub(crate) fn checks_json(checks: Option<&[ServerCheck]>) -> Option<Vec<ServerCheckJson<'_>>> {
    checks.map(|checks| checks.iter().map(ServerCheckJson::from).collect())
}

/// The start of a writing command's dry run: what `params` reads of the cluster (a refused read
/// explained as the real run explains it), the run's id as the real run chooses it (unused by
/// earlier runs' Jobs: the names its Jobs get), and the preview of the whole operation. Where a
/// real run would stop before writing (cert-manager missing) the preview assumes what is
/// missing, with a warning; the state returned is the one the preview planned from.
pub(crate) async fn observe_and_preview<P>(
    conn: &uyuni_effects::Connection,
    params: &mut P,
    reporter: &Reporter,
) -> Result<(Observed, Preview)>
where
    P: Planner + std::ops::DerefMut<Target = ServerParams>,
{
    let observed = crate::drive::observe(
        conn,
        &params.observation(),
        |empty| uyuni_core::access::needed(&*params, empty),
        reporter,
    )
    .await?;
    params.run_id = crate::clock::run_id_unused_in(&observed);
    let (preview, assumption) = uyuni_core::preview::dry_run_preview(&*params, &observed)?;
    Ok(match assumption {
        Some(a) => {
            reporter.warn(&format!("{}.\n{}", a.refused, a.assumed));
            (a.observed, preview)
        }
        None => (observed, preview),
    })
}

/// The permission check the real run makes before its first write, of the steps `executed`;
/// `None` when it could not be asked (with a warning).
pub(crate) async fn review_access<P: Planner>(
    conn: &uyuni_effects::Connection,
    params: &P,
    observed: &Observed,
    executed: &[Step],
    reporter: &Reporter,
) -> Option<(Vec<Access>, Vec<(Access, bool)>)> {
    let needed = uyuni_core::access::needed_by(params, observed, executed);
    crate::drive::review_access(conn, needed, reporter).await
}

/// [`review_access`] as the preview's line of inputs: whether the user may make every request.
pub(crate) async fn access_input<P: Planner>(
    conn: &uyuni_effects::Connection,
    params: &P,
    observed: &Observed,
    executed: &[Step],
    reporter: &Reporter,
) -> Option<Input> {
    let (needed, answers) = review_access(conn, params, observed, executed, reporter).await?;
    Some(uyuni_core::access::input(
        &needed,
        &answers,
        &params.server().kubectl,
    ))
}

/// With `--show-secrets`: where the values printed stay.
pub(crate) fn warn_secrets_shown(flags: &PreviewFlags, reporter: &Reporter) {
    if flags.show_secrets {
        reporter.warn("--show-secrets: Secret values are printed below; they stay in your terminal's scrollback");
    }
}

/// Prints the preview in the format asked for: the intended manifests of `steps` (YAML),
/// `document` (JSON) or `human`'s lines (painted), which get the diffs' options; only the one
/// asked for is made. After a server-side dry run, the error naming the objects the API server
/// would refuse.
pub(crate) async fn print<D: Serialize>(
    cli: &Cli,
    flags: &PreviewFlags,
    steps: &[Step],
    checks: Option<&[ServerCheck]>,
    document: impl AsyncFnOnce() -> D,
    human: impl AsyncFnOnce(RenderOptions) -> Vec<Line>,
) -> Result<()> {
    let text = match cli.output {
        OutputFormat::Yaml => render::manifests_yaml(steps, flags.show_secrets),
        OutputFormat::Json => serde_json::to_string_pretty(&document().await)? + "\n",
        OutputFormat::Human => {
            let options = RenderOptions {
                context: flags.diff_context,
                show_secrets: flags.show_secrets,
            };
            paint(&human(options).await, colours(cli.color))
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    refuse_rejected(checks)
}

/// The human preview's last sections: the remembered flags in effect, the server-side dry run's
/// verdicts when it ran, and the diffs of `steps` from `observed` (none with `--summary`).
pub(crate) fn closing_lines(
    flags: &PreviewFlags,
    remembered: &[Setting],
    checks: Option<&[ServerCheck]>,
    steps: &[Step],
    observed: &Observed,
    options: RenderOptions,
) -> Vec<Line> {
    let mut lines = render::plain_lines(&uyuni_core::record::render(remembered));
    if let Some(checks) = checks {
        lines.extend(render::plain_lines(&server_text(checks)));
    }
    if !flags.summary {
        lines.extend(render::diffs_lines(steps, observed, options));
    }
    lines
}

/// With `--dry-run=server`: every write of `steps` sent to the API server with `dryRun=All`,
/// and how it judged each.
pub(crate) async fn server_checks(
    flags: &PreviewFlags,
    conn: &uyuni_effects::Connection,
    namespace: &str,
    observed: &Observed,
    steps: &[Step],
    reporter: &Reporter,
) -> Result<Option<Vec<ServerCheck>>> {
    if flags.dry_run != Some(DryRun::Server) {
        return Ok(None);
    }
    let namespace_exists = observed.contains(uyuni_core::Kind::Namespace, namespace);
    let mut checks = Vec::new();
    for object in steps.iter().filter_map(|s| s.action.object()) {
        let result =
            server_dry_run(&conn.client, namespace, namespace_exists, &object, reporter).await?;
        checks.push(ServerCheck {
            target: object.object_ref().to_string(),
            result,
        });
    }
    Ok(Some(checks))
}

pub(crate) fn server_text(checks: &[ServerCheck]) -> String {
    let mut out = String::from("\nServer-side dry run (dryRun=All):\n");
    for c in checks {
        let verdict = match &c.result {
            ServerDryRun::Accepted => "accepted".to_owned(),
            ServerDryRun::Rejected(why) => format!("REJECTED: {why}"),
            ServerDryRun::ClientSideOnly(why) => format!("checked client-side only: {why}"),
        };
        out.push_str(&format!("  {:<48} {verdict}\n", c.target));
    }
    out
}

/// How the real run would settle the outage question, from this command line.
fn confirmation(cmd: &MigrateCmd, safety: &uyuni_core::preview::Safety) -> String {
    if safety.outage_step.is_none() {
        return String::new();
    }
    let how = if cmd.migrate.yes {
        "confirmed with --yes".to_owned()
    } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        "asked on this terminal just before the step".to_owned()
    } else {
        "MISSING: no terminal to ask on; pass --yes".to_owned()
    };
    format!("    {:<20} {how}\n", "Outage confirmation")
}

/// Migrate's dry run: observes, previews and prints. Returns whether anything would change.
pub async fn run(
    cmd: &MigrateCmd,
    cli: &Cli,
    conn: &uyuni_effects::Connection,
    params: &mut MigrateParams,
    remembered: &[Setting],
    reporter: &Reporter,
) -> Result<bool> {
    let (observed, preview) = observe_and_preview(conn, params, reporter).await?;
    let (params, observed) = (&*params, &observed);
    let mut safety = uyuni_core::preview::safety(params, observed, &preview);
    // The preview's steps are the ones a run would take (`preview::foreseen`, which plans
    // past a missing password the same way): no second planning pass.
    if let Some(input) = access_input(conn, params, observed, &preview.executed, reporter).await {
        safety.inputs.push(input);
    }
    warn_secrets_shown(&cmd.preview, reporter);
    let checks = server_checks(
        &cmd.preview,
        conn,
        &params.namespace,
        observed,
        &preview.steps,
        reporter,
    )
    .await?;
    let plane = async || {
        let measured = source_probe::measure(cmd, params).await;
        dataplane::data_plane(params, observed, measured.as_ref().map_err(String::as_str))
    };
    let document = async || DryRunDocument {
        plan: render::plan_document(&params.namespace, &preview.steps, observed),
        data_plane: plane().await,
        safety: &safety,
        remembered,
        execution: render::execution(&preview.executed),
        server_dry_run: checks_json(checks.as_deref()),
    };
    let human = async |options| {
        let plane = plane().await;
        for warning in plane.warnings() {
            reporter.warn(&warning);
        }
        let mut lines = vec![
            Line::plain(format!(
                "Dry run: nothing is written. Migration of {} into namespace {}:",
                params.source_fqdn, params.namespace
            )),
            Line::plain(""),
        ];
        // What a reader needs first: the summary and the outage; then the steps, the data
        // plane and the rest; the diffs last (none with --summary).
        lines.push(Line::plain(render::summary(&preview.steps)));
        lines.push(Line::plain(""));
        lines.extend(render::plain_lines(&safety.render(&params.source_fqdn)));
        lines.extend(render::plain_lines(&confirmation(cmd, &safety)));
        lines.push(Line::plain(""));
        lines.extend(render::steps_lines(&preview.steps));
        lines.push(Line::plain(""));
        lines.extend(render::plain_lines(&plane.render()));
        lines.push(Line::plain(""));
        lines.extend(closing_lines(
            &cmd.preview,
            remembered,
            checks.as_deref(),
            &preview.steps,
            observed,
            options,
        ));
        lines.push(Line::plain(""));
        lines.push(Line::plain(format!(
            "Values only a step can know are shown as \"{}\".",
            uyuni_core::observed::PLACEHOLDER
        )));
        lines
    };
    print(
        cli,
        &cmd.preview,
        &preview.steps,
        checks.as_deref(),
        document,
        human,
    )
    .await?;
    Ok(!preview.executed.is_empty())
}

/// After a server-side dry run: an error naming the objects the API server would refuse.
pub(crate) fn refuse_rejected(checks: Option<&[ServerCheck]>) -> Result<()> {
    let Some(checks) = checks else {
        return Ok(());
    };
    let rejected: Vec<&ServerCheck> = checks
        .iter()
        .filter(|c| matches!(c.result, ServerDryRun::Rejected(_)))
        .collect();
    if !rejected.is_empty() {
        bail!(
            "the API server would refuse {} object(s): {}; see the server-side dry run above",
            rejected.len(),
            rejected
                .iter()
                .map(|c| c.target.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}
