//! `kubectl uyuni migrate`: flags → validated parameters → the observe/plan/execute loop (or
//! the pure preview with `--dry-run`).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use uyuni_core::params::FileInput;
use uyuni_core::plan::Plan;
use uyuni_core::secret::SecretString;
use uyuni_core::{ExtractedData, MigrateArgs, MigrateParams, Observed, render};

use crate::cli::MigrateCmd;
use crate::output::Reporter;
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

fn args(cmd: &MigrateCmd, namespace: String) -> Result<MigrateArgs> {
    let named_sizes = [
        ("volumes-database-size", &cmd.volumes_database_size),
        ("volumes-packages-size", &cmd.volumes_packages_size),
        ("volumes-www-size", &cmd.volumes_www_size),
        ("volumes-cache-size", &cmd.volumes_cache_size),
    ]
    .into_iter()
    .filter_map(|(flag, v)| v.clone().map(|v| (flag.to_owned(), v)))
    .collect();
    Ok(MigrateArgs {
        namespace,
        source_fqdn: cmd.source.clone(),
        ssh_user: cmd.user.clone(),
        prepare: cmd.prepare,
        run_id: clock::run_id(),
        image: cmd.image.clone(),
        tag: cmd.tag.clone(),
        registry_host: cmd.registry_host.clone(),
        pull_policy: cmd.pull_policy.clone(),
        ssh_key_private: read_file("--ssh-key-private", cmd.ssh_key_private.as_deref())?,
        ssh_key_public: read_file("--ssh-key-public", cmd.ssh_key_public.as_deref())?,
        ssh_known_hosts: read_file("--ssh-knownhosts", cmd.ssh_known_hosts.as_deref())?,
        ssh_config: read_file("--ssh-config", cmd.ssh_config.as_deref())?,
        volumes_class: cmd.volumes_class.clone(),
        volume_classes: cmd.volume_class.clone(),
        named_sizes,
        volume_sizes: cmd.volume_size.clone(),
        tool_version: env!("CARGO_PKG_VERSION").to_owned(),
    })
}

/// The steps of a migration that later versions add; said at the end so nobody mistakes the
/// data sync for a finished migration.
const NOT_BUILT: &str = "Not built yet: the database fix-up and PostgreSQL upgrade, TLS, networking and the server and database Deployments. The migration stops after the data sync for now; the synced volumes and the extracted data stay in the namespace.";

fn summary(params: &MigrateParams, data: &ExtractedData) -> String {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    let mut out = String::new();
    out.push_str(&format!(
        "Data sync complete (Job {}), {} mode.\n",
        data.job,
        if params.prepare { "prepare" } else { "final" }
    ));
    out.push_str(&format!("  Source:           {}\n", params.source_fqdn));
    if let Some(fqdn) = data.fqdn.as_deref().filter(|f| *f != params.source_fqdn) {
        out.push_str(&format!(
            "  Server hostname:  {fqdn} (java.hostname of the source)\n"
        ));
    }
    out.push_str(&format!("  Timezone:         {}\n", data.timezone));
    out.push_str(&format!("  PostgreSQL:       {}\n", data.pg_version));
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
    out.push_str(&format!("  TLS material:     {}\n", data.ssl_summary()));
    if params.prepare {
        out.push_str(&format!(
            "\nThe source keeps serving. Repeat with --prepare to catch up, then run `kubectl uyuni migrate {}` without --prepare for the final copy (it stops the source's services).\n",
            params.source_fqdn
        ));
    }
    out.push_str(&format!("\n{NOT_BUILT}\n"));
    out
}

pub async fn run(
    cmd: &MigrateCmd,
    kube: &crate::cli::KubeFlags,
    reporter: &Reporter,
) -> Result<()> {
    let conn = connect(kube).await?;
    let args = args(cmd, conn.namespace.clone())?;
    let params = MigrateParams::from_args(&args).map_err(|e| anyhow!("{e}"))?;
    let observation = uyuni_core::observed::observation(&params);

    if cmd.dry_run.is_some() {
        let observed = uyuni_effects::observe(&conn.client, &observation).await?;
        let preview = uyuni_core::preview(&params, &observed)?;
        let text = render::human_preview(&preview.steps, &observed, cmd.diff_context);
        let mut stdout = std::io::stdout().lock();
        writeln!(
            stdout,
            "Dry run: nothing is written. Migration of {} into namespace {}:\n",
            params.source_fqdn, params.namespace
        )?;
        stdout.write_all(text.as_bytes())?;
        writeln!(
            stdout,
            "\nValues only the data sync can know are shown as \"{}\".",
            uyuni_core::observed::PLACEHOLDER
        )?;
        return Ok(());
    }

    let mut executed = 0usize;
    let observed: Observed = loop {
        let observed = uyuni_effects::observe(&conn.client, &observation).await?;
        let plan: Plan = uyuni_core::plan(&params, &observed)?;
        let Some(step) = plan.next_step() else {
            break observed;
        };
        executed += 1;
        if executed > uyuni_core::preview::MAX_STEPS {
            bail!(
                "the plan did not converge after {executed} steps; this is a bug in kubectl-uyuni, please report it with the output of --dry-run"
            );
        }
        let position = plan.steps.iter().position(|s| s.id == step.id).unwrap_or(0) + 1;
        reporter.step(position, plan.steps.len(), step);
        reporter.set_job_context(&params.namespace);
        uyuni_effects::execute(&conn.client, &params.namespace, step, reporter).await?;
    };
    if executed == 0 {
        reporter.info("Nothing to do: every step is done already.");
    }
    let data = observed.extracted()?.ok_or_else(|| {
        anyhow!("the data sync finished but Secret uyuni-migration-data is empty")
    })?;
    print!("{}", summary(&params, &data));
    Ok(())
}
