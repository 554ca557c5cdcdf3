//! `kubectl uyuni migrate`: flags → validated parameters → the drive loop (`drive.rs`) with
//! migrate's planner, prompts and consent (or the pure preview with `--dry-run`).

use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use uyuni_core::params::{FileInput, ServerSpecArgs};
use uyuni_core::plan::Plan;
use uyuni_core::resolve::Facts;
use uyuni_core::secret::SecretString;
use uyuni_core::{ExtractedData, MigrateArgs, MigrateParams, Observed};

use crate::cli::{self, Cli, MigrateCmd};
use crate::output::Reporter;
use crate::prompt::{confirm, interactive, password, prompt_secret};
use crate::{clock, connect};

fn read_file(flag: &str, path: Option<&Path>) -> Result<Option<FileInput>> {
    let Some(path) = path else { return Ok(None) };
    let content = std::fs::read_to_string(path).with_context(|| {
        format!(
            "cannot read {flag} {}: check the path and that it is a readable text file",
            path.display()
        )
    })?;
    Ok(Some(FileInput {
        path: path.display().to_string(),
        content: SecretString::new(content),
    }))
}

fn read_files(flag: &str, paths: &[std::path::PathBuf]) -> Result<Vec<FileInput>> {
    paths
        .iter()
        .filter_map(|p| read_file(flag, Some(p)).transpose())
        .collect()
}

/// The environment variable that may hold the source CA's password.
pub const SSL_PASSWORD_ENV: &str = "UYUNI_SSL_PASSWORD";

/// The CA password; `None`: ask on a terminal if the migration needs it.
fn ssl_password(cmd: &MigrateCmd) -> Result<Option<SecretString>> {
    password(
        "--ssl-password-file",
        cmd.migrate.ssl_password_file.as_deref(),
        SSL_PASSWORD_ENV,
    )
}

/// Asks for the CA password on the terminal, without echo; `None` when there is no terminal.
fn prompt_ssl_password() -> Option<SecretString> {
    prompt_secret("Password of the source server's CA key: ")
}

/// The environment variable that may hold the registry password.
pub const REGISTRY_PASSWORD_ENV: &str = "UYUNI_REGISTRY_PASSWORD";

/// The registry password, when a registry user is given: from its file, the environment, or a
/// prompt on a terminal.
fn registry_password(spec: &cli::ServerSpecFlags) -> Result<Option<SecretString>> {
    if spec.registry_user.is_none() {
        return Ok(None);
    }
    Ok(password(
        "--registry-password-file",
        spec.registry_password_file.as_deref(),
        REGISTRY_PASSWORD_ENV,
    )?
    .or_else(|| prompt_secret("Password of the registry user: ")))
}

/// The connection flags of the run and the `migrate` flags a repeated run needs, from this
/// process's command line: what every `kubectl uyuni migrate …` the tool prints is built from.
pub fn repeat_kubectl(cmd: &MigrateCmd, cli: &Cli) -> uyuni_core::kubectl::Kubectl {
    let argv: Vec<String> = cli::normalize_args(std::env::args_os())
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    uyuni_core::kubectl::Kubectl {
        migrate_flags: cli::repeat_flags(&argv, &cmd.migrate.source),
        ..cli.kube.kubectl_hint()
    }
}

fn args(
    cmd: &MigrateCmd,
    cli: &Cli,
    namespace: String,
    namespace_explicit: bool,
) -> Result<MigrateArgs> {
    let kubectl = repeat_kubectl(cmd, cli);
    let m = &cmd.migrate;
    Ok(MigrateArgs {
        namespace,
        kubectl,
        namespace_explicit,
        source_fqdn: m.source.clone(),
        ssh_user: m.user.clone(),
        prepare: m.prepare,
        compress: m.compress,
        keep_migration_data: m.keep_migration_data,
        run_id: clock::run_id(),
        ssh_key_private: read_file("--ssh-key-private", m.ssh_key_private.as_deref())?,
        ssh_key_public: read_file("--ssh-key-public", m.ssh_key_public.as_deref())?,
        ssh_known_hosts: read_file("--ssh-knownhosts", m.ssh_known_hosts.as_deref())?,
        ssh_config: read_file("--ssh-config", m.ssh_config.as_deref())?,
        ssl_password: ssl_password(cmd)?,
        spec: spec_args(&cmd.spec)?,
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}

/// The server's specification flags as the core takes them: the files read, the registry
/// password fetched. Every command that deploys a server maps its flags through here.
pub fn spec_args(spec: &cli::ServerSpecFlags) -> Result<ServerSpecArgs> {
    let named_sizes = [
        ("volumes-database-size", &spec.volumes_database_size),
        ("volumes-packages-size", &spec.volumes_packages_size),
        ("volumes-www-size", &spec.volumes_www_size),
        ("volumes-cache-size", &spec.volumes_cache_size),
    ]
    .into_iter()
    .filter_map(|(flag, v)| v.clone().map(|v| (flag.to_owned(), v)))
    .collect();
    Ok(ServerSpecArgs {
        image: spec.image.clone(),
        tag: spec.tag.clone(),
        registry_host: spec.registry_host.clone(),
        pull_policy: spec.pull_policy.clone(),
        db_image: spec.db_image.clone(),
        db_tag: spec.db_tag.clone(),
        dbupgrade_image: spec.dbupgrade_image.clone(),
        dbupgrade_tag: spec.dbupgrade_tag.clone(),
        hubxmlrpc_image: spec.hubxmlrpc_image.clone(),
        coco_image: spec.coco_image.clone(),
        hubxmlrpc_replicas: spec.hubxmlrpc_replicas,
        coco_replicas: spec.coco_replicas,
        tftp: spec.tftp,
        tftp_image: spec.tftp_image.clone(),
        tftp_tag: spec.tftp_tag.clone(),
        tftp_host_network: spec.tftp_host_network,
        server_privileged: spec.server_privileged,
        server_super_privileged: spec.server_super_privileged,
        server_selinux_type: spec.server_selinux_type.clone(),
        server_apparmor_profile: spec.server_apparmor_profile.clone(),
        server_requests: spec.server_requests.clone(),
        server_limits: spec.server_limits.clone(),
        db_requests: spec.db_requests.clone(),
        db_limits: spec.db_limits.clone(),
        ingress: spec.ingress.clone(),
        ingress_class: spec.ingress_class.clone(),
        configure_ingress_controller: spec.configure_ingress_controller,
        network_policy: spec.network_policy,
        registry_user: spec.registry_user.clone(),
        registry_password: registry_password(spec)?,
        image_pull_secret: spec.image_pull_secret.clone(),
        mirror_claim: spec.mirror_claim.clone(),
        ssl_cnames: spec.ssl_cname.clone(),
        ssl_ca_root: read_file("--ssl-ca-root", spec.ssl_ca_root.as_deref())?,
        ssl_ca_intermediate: read_files("--ssl-ca-intermediate", &spec.ssl_ca_intermediate)?,
        ssl_server_cert: read_file("--ssl-server-cert", spec.ssl_server_cert.as_deref())?,
        ssl_server_key: read_file("--ssl-server-key", spec.ssl_server_key.as_deref())?,
        ssl_db_ca_root: read_file("--ssl-db-ca-root", spec.ssl_db_ca_root.as_deref())?,
        ssl_db_ca_intermediate: read_files(
            "--ssl-db-ca-intermediate",
            &spec.ssl_db_ca_intermediate,
        )?,
        ssl_db_cert: read_file("--ssl-db-cert", spec.ssl_db_cert.as_deref())?,
        ssl_db_key: read_file("--ssl-db-key", spec.ssl_db_key.as_deref())?,
        volumes_class: spec.volumes_class.clone(),
        volume_classes: spec.volume_class.clone(),
        named_sizes,
        volume_sizes: spec.volume_size.clone(),
    })
}

/// The steps of a migration that later versions add; said at the end so nobody mistakes the
/// data sync for a finished migration.
const NOT_BUILT: &str = "Not built yet: Gateway API routes, saline, and LoadBalancer/NodePort Services for the server's ports as an alternative to the ingress controller.";

/// Connects, reads the flags earlier runs recorded, and validates them with the flags given
/// into parameters: everything before the first request that depends on them. Also returns
/// where each remembered value comes from, for the dry run.
async fn start(
    cmd: &MigrateCmd,
    cli: &Cli,
    reporter: &Reporter,
) -> Result<(
    uyuni_effects::Connection,
    MigrateParams,
    Vec<uyuni_core::record::Setting>,
)> {
    start_recorded(cli, reporter, |namespace, explicit| {
        args(cmd, cli, namespace, explicit)
    })
    .await
}

/// Connects, then validates the arguments `args` makes for the connection's namespace (and
/// whether it was given) with the flags earlier runs recorded there: migrate's and install's
/// start. Also returns where each remembered value comes from, for the dry run.
pub(crate) async fn start_recorded<A>(
    cli: &Cli,
    reporter: &Reporter,
    args: impl FnOnce(String, bool) -> Result<A>,
) -> Result<(
    uyuni_effects::Connection,
    A::Params,
    Vec<uyuni_core::record::Setting>,
)>
where
    A: uyuni_core::record::WithSpec,
    A::Params: uyuni_core::plan::Planner,
{
    let conn = connect(&cli.kube).await?;
    // The hints from now on name the context the connection resolved.
    reporter.set_kubectl(cli.kube.kubectl_hint());
    let args = args(conn.namespace.clone(), conn.namespace_explicit)?;
    let recorded = match uyuni_effects::record::server_spec(
        &conn.client,
        &conn.namespace,
        &uyuni_effects::NoProgress,
    )
    .await
    {
        Ok(recorded) => recorded,
        // The run's first read: refused, it is explained as the loop's first observation is,
        // by every permission the run needs that is missing (the flags as given, no record).
        Err(error) => {
            let params = args.validate()?;
            let needed = |empty: &uyuni_core::Observed| uyuni_core::access::needed(&params, empty);
            return Err(crate::drive::explain_refusal(error, &conn, needed, reporter).await);
        }
    };
    let (params, settings) = uyuni_core::record::params(args, &recorded)?;
    Ok((conn, params, settings))
}

/// `--dry-run`: observe, preview, print. Returns whether anything would change.
async fn dry_run(cmd: &MigrateCmd, cli: &Cli, reporter: &Reporter) -> Result<bool> {
    let (conn, mut params, settings) = start(cmd, cli, reporter).await?;
    crate::dry_run::run(cmd, cli, &conn, &mut params, &settings, reporter).await
}

/// The human form of the result; `db_volume`: the claim the database runs on now (final runs).
fn summary(
    params: &MigrateParams,
    data: &ExtractedData,
    facts: &Facts,
    db_volume: Option<&str>,
) -> String {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut out = String::new();
    if params.prepare {
        out.push_str(&format!(
            "Data copied while the source keeps serving (Job {}).\n",
            data.job
        ));
    } else {
        out.push_str(&format!(
            "Migration of {} complete (data synced by Job {}).\n",
            params.source_fqdn, data.job
        ));
    }
    out.push_str(&format!("  Source:           {}\n", params.source_fqdn));
    if let Some(fqdn) = data.fqdn.as_deref().filter(|f| *f != params.source_fqdn) {
        out.push_str(&format!(
            "  Server hostname:  {fqdn} (java.hostname of the source)\n"
        ));
    }
    out.push_str(&format!("  Timezone:         {}\n", data.timezone));
    out.push_str(&format!("  PostgreSQL:       {}\n", data.pg_version));
    if let Some(volume) = db_volume {
        let backup = if volume == uyuni_core::volumes::DATABASE_VOLUME {
            String::new()
        } else {
            format!(
                "; {} is kept unchanged as the backup",
                uyuni_core::volumes::DATABASE_VOLUME
            )
        };
        out.push_str(&format!(
            "  Database now:     PostgreSQL {} in Deployment db on volume {volume}{backup}\n",
            uyuni_core::pg::TARGET_MAJOR
        ));
    }
    out.push_str(&format!(
        "  Database:         {} (port {}, user {})\n",
        data.db_name, data.db_port, data.db_user
    ));
    out.push_str(&format!(
        "  Report database:  user {}\n",
        data.report_db_user
    ));
    out.push_str(&format!(
        "  Hub XML-RPC API:  {}\n",
        yes_no(data.has_hubxmlrpc)
    ));
    out.push_str(&format!("  Java debugging:   {}\n", yes_no(data.debug)));
    out.push_str(&format!(
        "  TFTP:             {}\n",
        tftp_line(params, data, facts)
    ));
    out.push_str(&format!("  TLS material:     {}\n", data.ssl_summary()));
    if params.prepare {
        out.push_str(&format!(
            "\nThe source keeps serving. Repeat with --prepare to catch up, then run `{}` for the final copy (it asks before it stops the source's services; --yes in a script).\n",
            params
                .kubectl
                .migrate(Some(&params.namespace), &params.source_fqdn, false)
        ));
    }
    out.push_str(&format!("\n{NOT_BUILT}\n"));
    out
}

/// What the source did about TFTP and, after a final run, what was deployed.
fn tftp_result(params: &MigrateParams, data: &ExtractedData, facts: &Facts) -> TftpResult {
    TftpResult {
        source: data.tftp,
        deployed: (!params.prepare)
            .then(|| facts.tftp.ok())
            .flatten()
            .map(|d| d == uyuni_core::resolve::TftpDecision::On),
        host_network: params.spec.tftp.host_network,
    }
}

fn tftp_line(params: &MigrateParams, data: &ExtractedData, facts: &Facts) -> String {
    let r = tftp_result(params, data, facts);
    let source = match r.source {
        Some(true) => "tftp.socket enabled on the source",
        Some(false) => "tftp.socket not enabled on the source",
        None => "the source's tftp.socket was not recorded",
    };
    let deployed = match (r.deployed, r.host_network) {
        (Some(true), true) => "; Deployment tftp on its node's network",
        (Some(true), false) => "; Deployment tftp behind LoadBalancer Service tftp",
        (Some(false), _) => "; not deployed",
        (None, _) => "",
    };
    format!("{source}{deployed}")
}

pub async fn run(
    cmd: &MigrateCmd,
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
    let mut command = MigrateCommand {
        cmd,
        cli,
        params,
        confirmed: cmd.migrate.yes,
        source_down: false,
    };
    let drive = crate::drive::Drive::new(&conn, reporter, run_lock, &cmd.run);
    let observed = crate::drive::run(&mut command, &drive).await?;
    let params = command.params;
    let data = observed.extracted()?.ok_or_else(|| {
        anyhow!("the data sync finished but Secret uyuni-migration-data is empty")
    })?;
    let facts = uyuni_core::resolve::resolve(&params, &observed, &data);
    let notes = if params.prepare {
        Vec::new()
    } else {
        uyuni_core::plan::exposure_notes(&params, &observed)
    };
    let result = MigrationResult {
        api_version: uyuni_core::render::API_VERSION,
        kind: "MigrationResult",
        source: params.source_fqdn.clone(),
        namespace: params.namespace.clone(),
        mode: if params.prepare { "prepare" } else { "final" },
        sync_job: data.job.clone(),
        server_hostname: data.fqdn.clone(),
        timezone: data.timezone.clone(),
        source_postgresql: data.pg_version.clone(),
        database: DatabaseResult {
            name: data.db_name.clone(),
            port: data.db_port.clone(),
            user: data.db_user.clone(),
            report_user: data.report_db_user.clone(),
            volume: (!params.prepare).then(|| facts.db_claim.clone()),
        },
        hub_xmlrpc: data.has_hubxmlrpc,
        java_debug: data.debug,
        tftp: tftp_result(&params, &data, &facts),
        tls: data.ssl_summary(),
        notes,
        // Decided in core from what the cluster recorded (`core::outage`, `phase`).
        outage: (!params.prepare)
            .then(|| uyuni_core::outage::report(&observed))
            .flatten(),
        expected_outage_seconds: params
            .prepare
            .then(|| uyuni_core::plan::phase::expected_window(&observed).map(|(_, s)| s))
            .flatten(),
        expected_window: params
            .prepare
            .then(|| uyuni_core::outage::expected(&observed))
            .flatten(),
        not_built: NOT_BUILT,
    };
    crate::output::print_data(cli.output, &result, |r| {
        let mut text = summary(&params, &data, &facts, r.database.volume.as_deref());
        if let Some(outage) = &r.outage {
            text.push_str(&format!("\n{}\n", outage.text()));
        }
        if let Some(seconds) = r.expected_outage_seconds {
            text.push_str(&format!(
                "\nThis copy took {}: the final run copies at most what changed since, with the source's services stopped; the database's fix-up and the server's start come on top.\n",
                uyuni_core::outage::duration_text(seconds)
            ));
        }
        if let Some(window) = &r.expected_window {
            text.push_str(&format!("{}\n", window.text()));
        }
        for note in &r.notes {
            text.push_str(&format!("\n{note}\n"));
        }
        text
    })
}

/// `migrate` in the drive loop: its planner, the CA password asked for when the planner needs
/// it, and the consent to the outage.
struct MigrateCommand<'a> {
    cmd: &'a MigrateCmd,
    cli: &'a Cli,
    params: MigrateParams,
    /// Whether the outage may start without asking (`--yes`, or answered already).
    confirmed: bool,
    /// An earlier run's final copy stopped the source, and the server is not ready yet.
    source_down: bool,
}

impl crate::drive::Command for MigrateCommand<'_> {
    type Params = MigrateParams;

    fn params(&self) -> &MigrateParams {
        &self.params
    }

    fn first_observation(&mut self, observed: &Observed) {
        // Chosen once, against the Jobs of earlier runs: this run's own Jobs carry it.
        self.params.run_id = clock::run_id_unused_in(observed);
        self.source_down = !self.params.prepare && uyuni_core::outage::source_down(observed);
    }

    fn warnings(&self, observed: &Observed) -> Vec<String> {
        uyuni_core::storage::unchecked_warning(observed)
            .into_iter()
            .chain(uyuni_core::pod_security::warnings(&self.params, observed))
            .collect()
    }

    fn on_plan_error(&mut self, error: uyuni_core::PlanError) -> Result<(), uyuni_core::PlanError> {
        match error {
            // The planner says when the CA password is needed; only then is it asked for.
            uyuni_core::PlanError::CaPasswordNeeded if self.params.ca_password.is_none() => {
                let password = prompt_ssl_password().ok_or(error)?;
                self.params.ca_password = Some(password);
                Ok(())
            }
            other => Err(other),
        }
    }

    fn identity(&self) -> crate::operation::Identity {
        crate::operation::Identity {
            command: "migrate",
            fingerprint: uyuni_core::operation::fingerprint(&self.params),
        }
    }

    fn writer(&self) -> crate::lock::Writer<'_> {
        let params = &self.params;
        let repeat =
            params
                .kubectl
                .migrate(Some(&params.namespace), &params.source_fqdn, params.prepare);
        crate::lock::Writer::of(params, repeat, self.cli, &self.cmd.run)
    }

    async fn before_step(
        &mut self,
        plan: &Plan,
        step: &uyuni_core::Step,
        drive: &crate::drive::Drive<'_>,
    ) -> Result<()> {
        if self.source_down {
            drive.reporter.set_source_down();
        }
        // The outage is the user's decision: refused before any write where nobody can be
        // asked, asked for just before the step that stops the source otherwise.
        if self.confirmed {
            return Ok(());
        }
        let Some(outage) = plan.outage_step() else {
            return Ok(());
        };
        let params = &self.params;
        if !interactive() {
            bail!(
                "this run stops the services of {source} at step {id} ({what}), and there is no terminal to ask whether it may: pass --yes to confirm the outage, or run with --prepare to copy while {source} keeps serving. Nothing that stops it was started",
                source = params.source_fqdn,
                id = outage.id,
                what = outage.description,
            );
        }
        if std::ptr::eq(outage, step) {
            // The lease first: a yes must not be asked for a run that another one's lease
            // then refuses.
            drive.take_lease(&self.writer(), step).await?;
            drive.reporter.finish(true);
            if !confirm(&format!(
                "Stop the services of {} now? [y/N] ",
                params.source_fqdn
            )) {
                bail!(
                    "not confirmed: the services of {source} keep running and nothing was stopped. Run `{again}` again when the outage may start (--yes skips the question), or `{prepare}` to catch up meanwhile",
                    source = params.source_fqdn,
                    again =
                        params
                            .kubectl
                            .migrate(Some(&params.namespace), &params.source_fqdn, false),
                    prepare =
                        params
                            .kubectl
                            .migrate(Some(&params.namespace), &params.source_fqdn, true),
                );
            }
            self.confirmed = true;
        }
        Ok(())
    }
}

/// What `migrate` prints on stdout at its end (`-o json|yaml` field names are stable; no secret
/// value is part of it).
#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MigrationResult {
    /// [`uyuni_core::render::API_VERSION`], so consumers can tell which field set they read.
    api_version: &'static str,
    /// `MigrationResult`.
    kind: &'static str,
    source: String,
    namespace: String,
    /// `prepare` or `final`.
    mode: &'static str,
    sync_job: String,
    server_hostname: Option<String>,
    timezone: String,
    source_postgresql: String,
    database: DatabaseResult,
    hub_xmlrpc: bool,
    java_debug: bool,
    tftp: TftpResult,
    tls: String,
    notes: Vec<String>,
    /// After a final run: how long the source was down until the server was ready, by phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    outage: Option<uyuni_core::outage::OutageReport>,
    /// After a `--prepare` run: how long its copy took, the bound of the final run's copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_outage_seconds: Option<i64>,
    /// After a `--prepare` run: the final run's window as this run's measure predicts it.
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_window: Option<uyuni_core::outage::ExpectedWindow>,
    not_built: &'static str,
}

#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct TftpResult {
    /// Whether tftp.socket was enabled on the source (`null`: not recorded).
    source: Option<bool>,
    /// Whether the TFTP server was deployed (`null` after a --prepare run).
    deployed: Option<bool>,
    host_network: bool,
}

#[derive(Debug, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DatabaseResult {
    name: String,
    port: String,
    user: String,
    report_user: String,
    /// The claim the database runs on now (absent after a --prepare run).
    volume: Option<String>,
}
