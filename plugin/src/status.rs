//! `kubectl uyuni status`: one observation and the pods of our workloads, the core's report of
//! them, printed for people or as data; `--exit-code` turns the verdict into the exit code and
//! `-w` prints the report again whenever a watch sees a change.

use anyhow::{Context, Result};
use uyuni_core::kubectl::Kubectl;
use uyuni_core::labels::MANAGED_SELECTOR;
use uyuni_core::status::{Problem, Reason, Status, WorkloadState, report};
use uyuni_effects::{NoProgress, Observer};

use crate::cli::{Cli, OutputFormat, StatusCmd};
use crate::output::render_data;

/// `--exit-code`'s code when the server is not healthy.
pub const EXIT_UNHEALTHY: u8 = 3;
/// `--exit-code`'s code when nothing of ours is in the namespace.
pub const EXIT_NOT_INSTALLED: u8 = 4;

pub async fn run(cmd: &StatusCmd, cli: &Cli) -> Result<()> {
    let conn = crate::connect(&cli.kube).await?;
    let kubectl = cli.kube.kubectl_hint();
    let ns = conn.namespace.clone();
    let observation = uyuni_core::status::observation(&ns);
    if !cmd.watch {
        let observed = uyuni_effects::observe(&conn.client, &observation)
            .await
            .with_context(|| format!("cannot read namespace {ns}"))?;
        let pods = uyuni_effects::logs::pods(&conn.client, &ns, MANAGED_SELECTOR)
            .await
            .with_context(|| format!("cannot read the pods of namespace {ns}"))?;
        let mut status = report(&ns, &observed, &pods, &kubectl);
        status.recorded = recorded(&conn, &ns).await;
        write(&render_data(cli.output, &status, |s| {
            human_with(s, &kubectl)
        })?)?;
        return verdict(cmd, &status, &kubectl);
    }
    let mut observer = Observer::new(conn.client.clone(), observation);
    let mut last: Option<String> = None;
    // One handler for the whole watch, so that a Ctrl-C between two reports is not lost,
    // registered now (`ctrl_c()` registers at its first poll: a Ctrl-C right after the first
    // report would have ended the process by the signal's default action).
    #[cfg(unix)]
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("cannot handle Ctrl-C")?;
    #[cfg(unix)]
    let interrupted = async move {
        sigint.recv().await;
    };
    #[cfg(not(unix))]
    let interrupted = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    tokio::pin!(interrupted);
    loop {
        let observed = observer
            .observe(&NoProgress)
            .await
            .with_context(|| format!("cannot read namespace {ns}"))?;
        let pods = observer
            .pods(MANAGED_SELECTOR)
            .await
            .with_context(|| format!("cannot read the pods of namespace {ns}"))?;
        let mut status = report(&ns, &observed, &pods, &kubectl);
        status.recorded = recorded(&conn, &ns).await;
        let text = render_data(cli.output, &status, |s| human_with(s, &kubectl))?;
        if last.as_deref() != Some(text.as_str()) {
            if last.is_some() {
                write(separator(cli.output))?;
            }
            write(&text)?;
            last = Some(text);
        }
        tokio::select! {
            () = observer.changed() => {}
            () = &mut interrupted => break,
        }
    }
    // Ctrl-C is how a watch ends: exit 130 as every command stopped by SIGINT does
    // (docs/output.md, "Exit codes"); `--exit-code`'s verdict is for a report that ends by
    // itself.
    Err(crate::Exit {
        code: 130,
        message: "interrupted by SIGINT: the watch ended (status only reads; nothing was written)"
            .to_owned(),
    }
    .into())
}

/// The newest operation record in `ns`; none when there is none, or it cannot be read (a
/// user who may read the server's objects but not ConfigMaps still gets the report).
async fn recorded(
    conn: &uyuni_effects::Connection,
    ns: &str,
) -> Option<uyuni_core::status::Recorded> {
    let listed = uyuni_effects::operation::list(&conn.client, ns).await;
    let records = uyuni_core::operation::newest_first(&listed.ok()?);
    let mut recorded = records.first().map(uyuni_core::status::Recorded::of)?;
    if recorded.outcome == uyuni_core::operation::Outcome::Running {
        // A run that has not ended holds the namespace's Lease while it runs; one killed (or
        // cut off longer than the lease lasts) does not. Unreadable: left unsaid.
        recorded.holds_lease = uyuni_effects::lease::current(&conn.client, ns)
            .await
            .ok()
            .map(|(lease, now)| uyuni_core::lock::held_by_run(lease.as_ref(), &recorded.run, now));
    }
    Some(recorded)
}

/// Between two reports of `-w`: a YAML document separator, nothing between JSON documents
/// (a stream `jq` reads), a blank line for people.
fn separator(format: OutputFormat) -> &'static str {
    match format {
        OutputFormat::Yaml => "---\n",
        OutputFormat::Json => "",
        OutputFormat::Human => "\n",
    }
}

fn write(text: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}

/// The exit `--exit-code` asks for.
fn verdict(cmd: &StatusCmd, status: &Status, kubectl: &Kubectl) -> Result<()> {
    if !cmd.exit_code || status.healthy {
        return Ok(());
    }
    let (code, message) = if status.installed {
        (
            EXIT_UNHEALTHY,
            format!(
                "the server in namespace {} is not healthy: {}",
                status.namespace,
                status
                    .problems
                    .iter()
                    .map(problem_line)
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
    } else {
        (
            EXIT_NOT_INSTALLED,
            not_installed(&status.namespace, kubectl),
        )
    };
    Err(crate::Exit { code, message }.into())
}

fn not_installed(ns: &str, kubectl: &Kubectl) -> String {
    format!(
        "nothing of kubectl-uyuni's is in namespace {ns}: install a server with `{}`, or migrate one with `{}` (-n names another namespace)",
        kubectl.uyuni(Some(ns), "install FQDN"),
        kubectl.uyuni(Some(ns), "migrate SOURCE_FQDN"),
    )
}

fn reason_word(reason: Reason) -> &'static str {
    match reason {
        Reason::NotInstalled => "not installed",
        Reason::Missing => "missing",
        Reason::Stopped => "stopped",
        Reason::NotReady => "not ready",
        Reason::CrashLooping => "crash looping",
        Reason::CannotStart => "cannot start",
        Reason::ClaimNotBound => "not bound",
        Reason::CertificateNotReady => "not ready",
        Reason::StepFailed => "failed",
        Reason::MigrationUnfinished => "migration unfinished",
        Reason::UpgradeUnfinished => "upgrade unfinished",
        Reason::RollbackUnfinished => "rollback unfinished",
    }
}

fn problem_line(p: &Problem) -> String {
    format!("{} {}: {}", p.object, reason_word(p.reason), p.message)
}

/// Columns padded to their widest cell, two spaces apart, indented.
fn table(rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            let w = cell.chars().count();
            match widths.get_mut(i) {
                Some(max) => *max = (*max).max(w),
                None => widths.push(w),
            }
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::from("  ");
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths[i] - cell.chars().count() + 2;
                line.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| (*c).to_owned()).collect()
}

fn state_word(state: WorkloadState) -> &'static str {
    match state {
        WorkloadState::Ready => "ready",
        WorkloadState::Stopped => "stopped",
        WorkloadState::NotReady => "not ready",
        WorkloadState::CrashLooping => "crash looping",
        WorkloadState::CannotStart => "cannot start",
    }
}

/// The report for people: the verdict and its reasons first, then each section that has
/// something to show.
pub fn human(s: &Status) -> String {
    human_with(s, &Kubectl::BARE)
}

/// [`human`], its commands with the run's connection flags.
pub fn human_with(s: &Status, kubectl: &Kubectl) -> String {
    if !s.installed {
        return format!("{}.\n", capitalise(&not_installed(&s.namespace, kubectl)));
    }
    let mut out = if s.healthy {
        format!("Namespace {}: healthy\n", s.namespace)
    } else {
        let mut text = format!("Namespace {}: NOT HEALTHY\n", s.namespace);
        for p in &s.problems {
            text.push_str(&format!("  - {}\n", problem_line(p)));
        }
        text
    };
    if !s.workloads.is_empty() {
        out.push_str("\nWorkloads:\n");
        let mut rows = vec![row(&[
            "COMPONENT",
            "DEPLOYMENT",
            "STATE",
            "READY",
            "RESTARTS",
            "IMAGE",
        ])];
        for w in &s.workloads {
            rows.push(vec![
                w.component.clone(),
                w.deployment.clone(),
                state_word(w.state).to_owned(),
                format!("{}/{}", w.ready_replicas, w.desired_replicas),
                w.restarts.to_string(),
                w.image.clone().unwrap_or_else(|| "-".to_owned()),
            ]);
        }
        out.push_str(&table(&rows));
        for w in &s.workloads {
            for p in &w.pods {
                for wait in &p.waiting {
                    out.push_str(&format!(
                        "  pod {}: container {} waits: {}{}\n",
                        p.name,
                        wait.container,
                        wait.reason,
                        wait.message
                            .as_deref()
                            .map(|m| format!(" ({m})"))
                            .unwrap_or_default()
                    ));
                }
            }
        }
    }
    if !s.claims.is_empty() {
        out.push_str("\nClaims:\n");
        let mut rows = vec![row(&["NAME", "STATUS", "CAPACITY", "CLASS", "NOTE"])];
        for c in &s.claims {
            rows.push(vec![
                c.name.clone(),
                c.phase.clone().unwrap_or_else(|| "-".to_owned()),
                c.capacity.clone().unwrap_or_else(|| "-".to_owned()),
                c.storage_class.clone().unwrap_or_else(|| "-".to_owned()),
                if c.upgrade_backup {
                    "backup of the PostgreSQL upgrade".to_owned()
                } else {
                    String::new()
                },
            ]);
        }
        out.push_str(&table(&rows));
    }
    if !s.certificates.is_empty() {
        out.push_str("\nCertificates:\n");
        let mut rows = vec![row(&["NAME", "READY", "NOT AFTER", "ISSUER"])];
        for c in &s.certificates {
            rows.push(vec![
                c.name.clone(),
                if c.ready { "yes" } else { "no" }.to_owned(),
                c.not_after.clone().unwrap_or_else(|| "-".to_owned()),
                c.issuer.clone().unwrap_or_else(|| "-".to_owned()),
            ]);
        }
        out.push_str(&table(&rows));
    }
    let a = &s.access;
    if !a.ingress_hosts.is_empty() || !a.routes.is_empty() || a.tftp.is_some() {
        out.push_str("\nAccess:\n");
        if !a.ingress_hosts.is_empty() {
            out.push_str(&format!(
                "  Ingress hosts: {}\n",
                a.ingress_hosts.join(", ")
            ));
        }
        for r in &a.routes {
            out.push_str(&format!(
                "  {} {}: entry points {}\n",
                r.kind,
                r.name,
                r.entry_points.join(", ")
            ));
        }
        if let Some(t) = &a.tftp {
            let ty = t.service_type.as_deref().unwrap_or("ClusterIP");
            let addr = if t.addresses.is_empty() {
                match ty {
                    "LoadBalancer" => "no address yet".to_owned(),
                    _ => "no external address".to_owned(),
                }
            } else {
                t.addresses.join(", ")
            };
            out.push_str(&format!("  TFTP: Service tftp ({ty}), {addr}\n"));
        }
    }
    if let Some(phase) = &s.migration {
        let text = serde_json::to_value(phase)
            .ok()
            .and_then(|v| v["phase"].as_str().map(str::to_owned))
            .unwrap_or_default();
        out.push_str(&format!("\nMigration: {text}\n"));
    }
    if let Some(u) = &s.upgrade {
        out.push_str(&format!(
            "\nUpgrade: {} → {} ({})",
            u.release_from, u.release_to, u.state
        ));
        if let Some(backup) = &u.backup_claim {
            out.push_str(&format!("; backup on {backup}"));
        }
        if let Some(previous) = &u.previous_claim {
            out.push_str(&format!("; the database before it on {previous}"));
        }
        out.push('\n');
    }
    if let Some(r) = &s.recorded {
        out.push_str(&recorded_line(r, &s.namespace, kubectl));
    }
    if let Some(op) = &s.last_operation {
        // Not "Last operation": that heading is the record's line above (command, outcome).
        match &op.run {
            Some(run) => out.push_str(&format!("\nJobs of the last run ({run}):\n")),
            None => out.push_str("\nJobs of the last run:\n"),
        }
        let mut rows = vec![row(&["STEP", "JOB", "ATTEMPT", "STATE", "DESCRIPTION"])];
        for step in &op.steps {
            for job in &step.jobs {
                rows.push(vec![
                    step.step.clone(),
                    job.name.clone(),
                    job.attempt.to_string(),
                    format!("{:?}", job.state).to_lowercase(),
                    job.description.clone().unwrap_or_default(),
                ]);
            }
        }
        out.push_str(&table(&rows));
    }
    out
}

/// The newest record in a line or two: command, outcome, when, and for a failure the step and
/// its exit reason.
fn recorded_line(r: &uyuni_core::status::Recorded, ns: &str, kubectl: &Kubectl) -> String {
    use uyuni_core::operation::Outcome;
    let when = match &r.ended {
        Some(ended) => format!("started {}, ended {ended}", r.started),
        None => format!("started {}", r.started),
    };
    let outcome = match r.outcome {
        Outcome::Succeeded => "succeeded",
        Outcome::Failed => "failed",
        Outcome::Running => match r.holds_lease {
            Some(true) => "running (it holds the namespace's lease)",
            Some(false) => {
                "not ended, and its run is gone (killed, or cut off): run the same command again to go on"
            }
            None => "not ended (still running, or killed)",
        },
        Outcome::Interrupted => "interrupted",
    };
    let mut out = format!(
        "\nLast operation: {}, {outcome} ({when}; record ConfigMap {})\n",
        r.command, r.record
    );
    if let Some(step) = &r.failed_step {
        out.push_str(&format!(
            "  failed at step {step}: {}\n  `{}` shows its log\n",
            r.exit_reason
                .as_deref()
                .or(r.error.as_deref())
                .unwrap_or("no reason recorded"),
            kubectl.uyuni(Some(ns), &format!("logs {step}"))
        ));
    } else if let Some(error) = &r.error {
        out.push_str(&format!("  {error}\n"));
    }
    out
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
