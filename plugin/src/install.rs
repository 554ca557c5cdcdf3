//! `kubectl uyuni install`: flags → validated parameters → the drive loop (`drive.rs`) with
//! install's planner and its one question (the administrator's password), or the pure preview
//! with `--dry-run`.

use anyhow::{Result, anyhow};
use uyuni_core::catalogue::names;
use uyuni_core::params::{CaSubjectArgs, GeneratedPasswords, InstallArgs, InstallParams};
use uyuni_core::render::{self, Line};
use uyuni_core::secret::SecretString;
use uyuni_core::{Observed, PlanError};

use crate::cli::{self, Cli, InstallCmd};
use crate::clock;
use crate::migrate::spec_args;
use crate::output::Reporter;
use crate::prompt::{password, prompt_secret};

/// The environment variables that may hold install's passwords (mgradm's names: viper binds
/// `--admin-password` to `UYUNI_ADMIN_PASSWORD`, `shared/utils/config.go`).
pub const ADMIN_PASSWORD_ENV: &str = "UYUNI_ADMIN_PASSWORD";
pub const DB_PASSWORD_ENV: &str = "UYUNI_DB_PASSWORD";
pub const DB_ADMIN_PASSWORD_ENV: &str = "UYUNI_DB_ADMIN_PASSWORD";
pub const REPORTDB_PASSWORD_ENV: &str = "UYUNI_REPORTDB_PASSWORD";
pub const SCC_PASSWORD_ENV: &str = "UYUNI_SCC_PASSWORD";

/// A strong random password: 32 letters and digits (about 190 bits), which every place the
/// images put a password (SQL between quotes, `rhn.conf`, a URL) takes as it is.
pub fn generate_password() -> Result<SecretString> {
    use ring::rand::SecureRandom;
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let rng = ring::rand::SystemRandom::new();
    let mut out = String::with_capacity(32);
    let mut buf = [0u8; 64];
    while out.len() < 32 {
        rng.fill(&mut buf).map_err(|_| {
            anyhow!("the system's random generator failed: cannot generate a password")
        })?;
        // Rejection sampling: 248 is the largest multiple of 62 below 256, so every character
        // is equally likely.
        for b in buf.iter().filter(|b| **b < 248) {
            if out.len() == 32 {
                break;
            }
            out.push(char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]));
        }
    }
    Ok(SecretString::new(out))
}

/// The connection flags of the run and the `install` flags a repeated run needs.
pub fn repeat_kubectl(cmd: &InstallCmd, cli: &Cli) -> uyuni_core::kubectl::Kubectl {
    let argv: Vec<String> = cli::normalize_args(std::env::args_os())
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    uyuni_core::kubectl::Kubectl {
        migrate_flags: cli::repeat_flags_of(&argv, "install", &cmd.install.fqdn),
        ..cli.kube.kubectl_hint()
    }
}

fn args(
    cmd: &InstallCmd,
    cli: &Cli,
    namespace: String,
    namespace_explicit: bool,
) -> Result<InstallArgs> {
    let i = &cmd.install;
    let scc_password = if i.scc_user.is_some() || i.scc_password_file.is_some() {
        password(
            "--scc-password-file",
            i.scc_password_file.as_deref(),
            SCC_PASSWORD_ENV,
        )?
    } else {
        None
    };
    Ok(InstallArgs {
        namespace_explicit,
        kubectl: repeat_kubectl(cmd, cli),
        namespace,
        run_id: clock::run_id(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
        spec: spec_args(&cmd.spec)?,
        fqdn: i.fqdn.clone(),
        admin_login: i.admin_login.clone(),
        admin_password: password(
            "--admin-password-file",
            i.admin_password_file.as_deref(),
            ADMIN_PASSWORD_ENV,
        )?,
        admin_first_name: i.admin_first_name.clone(),
        admin_last_name: i.admin_last_name.clone(),
        organization: i.organization.clone(),
        email: i.email.clone(),
        mail_from: i.email_from.clone(),
        timezone: i.tz.clone(),
        debug_java: i.debug_java,
        scc_user: i.scc_user.clone(),
        scc_password,
        db_user: i.db_user.clone(),
        db_password: password(
            "--db-password-file",
            i.db_password_file.as_deref(),
            DB_PASSWORD_ENV,
        )?,
        db_admin_user: i.db_admin_user.clone(),
        db_admin_password: password(
            "--db-admin-password-file",
            i.db_admin_password_file.as_deref(),
            DB_ADMIN_PASSWORD_ENV,
        )?,
        reportdb_user: i.reportdb_user.clone(),
        reportdb_password: password(
            "--reportdb-password-file",
            i.reportdb_password_file.as_deref(),
            REPORTDB_PASSWORD_ENV,
        )?,
        generated: GeneratedPasswords {
            db: generate_password()?,
            db_admin: generate_password()?,
            report_db: generate_password()?,
        },
        ssl_subject: CaSubjectArgs {
            country: i.ssl_country.clone(),
            state: i.ssl_state.clone(),
            city: i.ssl_city.clone(),
            org: i.ssl_org.clone(),
            ou: i.ssl_ou.clone(),
        },
        reuse_volumes: i.reuse_volumes,
    })
}

/// Connects, reads the recorded specification, and validates the flags into parameters.
async fn start(
    cmd: &InstallCmd,
    cli: &Cli,
    reporter: &Reporter,
) -> Result<(
    uyuni_effects::Connection,
    InstallParams,
    Vec<uyuni_core::record::Setting>,
)> {
    crate::migrate::start_recorded(cli, reporter, |namespace, explicit| {
        args(cmd, cli, namespace, explicit)
    })
    .await
}

/// `--dry-run`: observe, preview, print. Returns whether anything would change.
async fn dry_run(cmd: &InstallCmd, cli: &Cli, reporter: &Reporter) -> Result<bool> {
    let (conn, mut params, remembered) = start(cmd, cli, reporter).await?;
    let (observed, preview) =
        crate::dry_run::observe_and_preview(&conn, &mut params, reporter).await?;
    let (params, observed) = (&params, &observed);
    let access_line =
        crate::dry_run::access_input(&conn, params, observed, &preview.executed, reporter).await;
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
    let document = async || InstallPreview {
        plan: render::plan_document(&params.namespace, &preview.steps, observed),
        remembered: &remembered,
        execution: render::execution(&preview.executed),
        server_dry_run: crate::dry_run::checks_json(checks.as_deref()),
    };
    let human = async |options| {
        let mut lines = vec![
            Line::plain(format!(
                "Dry run: nothing is written. Install of {} into namespace {}:",
                params.fqdn, params.namespace
            )),
            Line::plain(""),
            Line::plain(render::summary(&preview.steps)),
            Line::plain(""),
        ];
        lines.extend(render::steps_lines(&preview.steps));
        lines.push(Line::plain(""));
        lines.push(Line::plain("Inputs:"));
        lines.push(Line::plain(format!(
            "    {:<20} {}",
            "Admin password",
            admin_password_line(params, observed)
        )));
        if let Some(input) = &access_line {
            lines.push(Line::plain(format!(
                "    {:<20} {}",
                input.name,
                access_text(&input.need, input.how)
            )));
        }
        lines.push(Line::plain(""));
        lines.extend(crate::dry_run::closing_lines(
            &cmd.preview,
            &remembered,
            checks.as_deref(),
            &preview.steps,
            observed,
            options,
        ));
        lines.push(Line::plain(""));
        lines.push(Line::plain(format!(
            "Values only a step can know are shown as \"{}\".",
            uyuni_core::plan::GENERATED_CA_PLACEHOLDER
        )));
        lines
    };
    let steps = &preview.steps;
    crate::dry_run::print(cli, &cmd.preview, steps, checks.as_deref(), document, human).await?;
    Ok(!preview.executed.is_empty())
}

pub(crate) fn access_text(need: &uyuni_core::plan::phase::Need, how: &str) -> String {
    use uyuni_core::plan::phase::Need;
    match need {
        Need::Allowed(what) => format!("allowed ({what})"),
        Need::Denied(what) => format!("MISSING: {what}; ask for {how}"),
        Need::Given => "given".to_owned(),
        Need::Stored(where_) => format!("stored ({where_})"),
        Need::NotNeeded(why) => format!("not needed: {why}"),
        Need::Unknown => "unknown".to_owned(),
        Need::Missing => format!("MISSING: give {how}"),
    }
}

fn admin_password_line(params: &InstallParams, observed: &Observed) -> String {
    if observed.contains(uyuni_core::Kind::Secret, names::ADMIN_SECRET) {
        format!("stored (Secret {})", names::ADMIN_SECRET)
    } else if params.admin_password.is_some() {
        "given".to_owned()
    } else if crate::prompt::interactive() {
        "asked on this terminal before the first write".to_owned()
    } else {
        format!(
            "MISSING: give --admin-password-file FILE or set {ADMIN_PASSWORD_ENV} (no terminal to ask on)"
        )
    }
}

/// What `install --dry-run -o json` prints.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InstallPreview<'a> {
    #[serde(flatten)]
    plan: render::PlanDocument,
    remembered: &'a [uyuni_core::record::Setting],
    execution: Vec<render::ExecutedStep>,
    /// With `--dry-run=server`: the API server's verdict on each write.
    #[serde(skip_serializing_if = "Option::is_none")]
    server_dry_run: Option<Vec<crate::dry_run::ServerCheckJson<'a>>>,
}

pub async fn run(
    cmd: &InstallCmd,
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
    let mut command = InstallCommand { cmd, cli, params };
    let drive = crate::drive::Drive::new(&conn, reporter, run_lock, &cmd.run);
    let observed = crate::drive::run(&mut command, &drive).await?;
    let params = command.params;
    let facts = uyuni_core::resolve::install(&params, &observed);
    let notes = uyuni_core::plan::reach_notes(&params, &observed, &facts);
    let ns = &params.namespace;
    let secret_cmd = |name: &str| {
        params.kubectl.cmd(
            Some(ns),
            &format!("get secret {name} -o jsonpath='{{.data.password}}' | base64 -d"),
        )
    };
    let result = InstallResult {
        api_version: uyuni_core::render::API_VERSION,
        kind: "InstallResult",
        namespace: ns.clone(),
        fqdn: params.fqdn.clone(),
        url: format!("https://{}/", params.fqdn),
        admin_login: params.admin_login.clone(),
        admin_password: secret_cmd(names::ADMIN_SECRET),
        database_password: secret_cmd(names::DB_SECRET),
        report_database_password: secret_cmd(names::REPORTDB_SECRET),
        tls: match facts.tls {
            Ok(uyuni_core::resolve::TlsMode::GeneratedCa) => {
                format!(
                    "a CA generated by cert-manager (Secret {}; clients trust ConfigMap {})",
                    names::CA_SECRET,
                    names::CA_CONFIG_MAP
                )
            }
            _ => "certificates from the --ssl-* files".to_owned(),
        },
        database_volume: facts.db_claim.clone(),
        notes,
    };
    crate::output::print_data(cli.output, &result, |r| {
        let mut text = format!(
            "Uyuni server {} installed in namespace {}.\n  Log in at:        {} as {}\n  Its password:     `{}`\n  Database:         PostgreSQL {} in Deployment db on volume {}\n  TLS:              {}\n  Generated database passwords are only in their Secrets: `{}`, `{}`.\n",
            r.fqdn,
            r.namespace,
            r.url,
            r.admin_login,
            r.admin_password,
            uyuni_core::pg::TARGET_MAJOR,
            r.database_volume,
            r.tls,
            r.database_password,
            r.report_database_password,
        );
        for note in &r.notes {
            text.push_str(&format!("\n{note}\n"));
        }
        text
    })
}

/// What `install` prints on stdout at its end: how to reach and log in, and where each secret
/// is; never a secret value.
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct InstallResult {
    api_version: &'static str,
    kind: &'static str,
    namespace: String,
    fqdn: String,
    url: String,
    admin_login: String,
    /// The command that prints the administrator's password.
    admin_password: String,
    database_password: String,
    report_database_password: String,
    tls: String,
    database_volume: String,
    notes: Vec<String>,
}

/// `install` in the drive loop: its planner, and the administrator's password asked for when
/// the planner needs it.
struct InstallCommand<'a> {
    cmd: &'a InstallCmd,
    cli: &'a Cli,
    params: InstallParams,
}

impl crate::drive::Command for InstallCommand<'_> {
    type Params = InstallParams;

    fn params(&self) -> &InstallParams {
        &self.params
    }

    fn first_observation(&mut self, observed: &Observed) {
        self.params.run_id = clock::run_id_unused_in(observed);
    }

    fn warnings(&self, observed: &Observed) -> Vec<String> {
        uyuni_core::storage::unchecked_warning(observed)
            .into_iter()
            .chain(uyuni_core::pod_security::install_warnings(
                &self.params,
                observed,
            ))
            .collect()
    }

    fn on_plan_error(&mut self, error: PlanError) -> Result<(), PlanError> {
        match error {
            PlanError::AdminPasswordNeeded if self.params.admin_password.is_none() => {
                let password = prompt_secret(&format!(
                    "Password of the first administrator {}: ",
                    self.params.admin_login
                ))
                .ok_or(error)?;
                // Checked as a password given in a file is.
                if let Err(e) = uyuni_core::params::check_admin_password(&password) {
                    return Err(PlanError::AdminPasswordRefused(e.to_string()));
                }
                let repeated = prompt_secret("The same password again: ")
                    .ok_or(PlanError::AdminPasswordNeeded)?;
                if repeated != password {
                    return Err(PlanError::AdminPasswordRefused(
                        "the two passwords typed differ. Nothing was written".to_owned(),
                    ));
                }
                self.params.admin_password = Some(password);
                Ok(())
            }
            other => Err(other),
        }
    }

    fn identity(&self) -> crate::operation::Identity {
        crate::operation::Identity {
            command: "install",
            fingerprint: uyuni_core::operation::fingerprint(&self.params),
        }
    }

    fn writer(&self) -> crate::lock::Writer<'_> {
        let params = &self.params;
        let repeat = params
            .kubectl
            .install(Some(&params.namespace), &params.fqdn);
        crate::lock::Writer::of(params, repeat, self.cli, &self.cmd.run)
    }
}
