//! `kubectl uyuni logs`: the log of a step's Job (which Job an attempt means is the core's
//! `status::step_jobs`), of a component's pod, or the list of the steps that have logs. The
//! log goes to stdout as it arrives; headers between attempts go to stderr.

use std::io::Write;

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::core::v1::Pod;
use uyuni_core::labels::MANAGED_SELECTOR;
use uyuni_core::status::{Attempts, StepLogs, component_deployment, deployment_pods, step_jobs};
use uyuni_core::verdict::{current_pod, main_container};
use uyuni_core::{Kind, ObjectRef};
use uyuni_effects::logs::LogOptions;

use crate::cli::{Cli, LogsCmd};
use crate::output::print_data;

fn options(cmd: &LogsCmd) -> LogOptions {
    LogOptions {
        container: None,
        follow: cmd.follow,
        tail_lines: cmd.tail.map(i64::from),
        since_seconds: cmd.since,
        timestamps: cmd.timestamps,
    }
}

pub async fn run(cmd: &LogsCmd, cli: &Cli) -> Result<()> {
    let options = options(cmd);
    let conn = crate::connect(&cli.kube).await?;
    let client = &conn.client;
    let ns = conn.namespace.as_str();
    let mut observation = uyuni_core::status::jobs_observation(ns);
    if let Some(component) = cmd.component {
        let name = component_deployment(component.name())
            .ok_or_else(|| anyhow!("no Deployment for component {}", component.name()))?;
        observation
            .named
            .push(ObjectRef::new(Kind::Deployment, name));
        let observed = uyuni_effects::observe(client, &observation)
            .await
            .with_context(|| format!("cannot read namespace {ns}"))?;
        let Some(deployment) = observed.deployment(name) else {
            bail!(
                "Deployment {name} does not exist in namespace {ns}: {} is not deployed there (`{}` shows what is)",
                component.name(),
                cli.kube.kubectl_hint().uyuni(Some(ns), "status")
            );
        };
        let pods = uyuni_effects::logs::pods(client, ns, MANAGED_SELECTOR)
            .await
            .with_context(|| format!("cannot read the pods of namespace {ns}"))?;
        let pods = deployment_pods(deployment, &pods);
        // The newest pod that runs, else the newest: `kubectl logs deployment/NAME` picks one
        // pod too.
        let running =
            |p: &&&Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        let Some(pod) = pods.iter().find(running).or(pods.first()) else {
            bail!(
                "Deployment {name} has no pod in namespace {ns} (stopped, or not scheduled yet): no log to read; `{}` says why",
                cli.kube.kubectl_hint().uyuni(Some(ns), "status")
            );
        };
        return print_log(&conn, pod, &options).await;
    }
    let observed = uyuni_effects::observe(client, &observation)
        .await
        .with_context(|| format!("cannot read the Jobs of namespace {ns}"))?;
    let Some(step) = &cmd.step else {
        let steps = uyuni_core::status::steps(&observed);
        let kubectl = cli.kube.kubectl_hint();
        return print_data(cli.output, &steps, |s| human_steps(ns, s, &kubectl));
    };
    let attempts = match (cmd.all_attempts, cmd.attempt) {
        (true, _) => Attempts::All,
        (false, Some(n)) => Attempts::Number(n as usize),
        (false, None) => Attempts::Latest,
    };
    let jobs = step_jobs(ns, &observed, step, attempts)?;
    let count = jobs.len();
    // Read once, when a pod turns out to be gone.
    let mut records: Option<Vec<uyuni_core::operation::Stored>> = None;
    for (i, job) in jobs.iter().enumerate() {
        if count > 1 {
            eprintln!(
                "==> Job {} (attempt {}, {}) <==",
                job.name,
                job.attempt,
                format!("{:?}", job.state).to_lowercase()
            );
        }
        let pods = uyuni_effects::logs::job_pods(client, ns, &job.name)
            .await
            .with_context(|| format!("cannot read the pods of Job {}", job.name))?;
        let Some(pod) = current_pod(&pods) else {
            if records.is_none() {
                // A user who may not list ConfigMaps gets the error below.
                let listed = uyuni_effects::operation::list(client, ns).await;
                records = Some(uyuni_core::operation::newest_first(
                    &listed.unwrap_or_default(),
                ));
            }
            if let Some((record, text)) = records
                .as_deref()
                .and_then(|r| uyuni_core::operation::kept_log(r, &job.name))
            {
                eprintln!(
                    "(the pod of Job {} is gone: its log as kept in the operation record, ConfigMap {record}; the record keeps the last 16 KiB of each Job's log, and --follow, --tail, --since and --timestamps do not apply to it)",
                    job.name
                );
                std::io::stdout()
                    .lock()
                    .write_all(text.as_bytes())
                    .context("cannot write to stdout")?;
                continue;
            }
            let why = format!(
                "the pod of Job {} is gone (deleted, or never scheduled), and its log with it",
                job.name
            );
            if count > 1 {
                eprintln!("{why}");
                continue;
            }
            bail!("{why}");
        };
        let mut options = options.clone();
        // Only the newest attempt may still be written to.
        options.follow = options.follow && i + 1 == count;
        print_log(&conn, pod, &options).await?;
    }
    Ok(())
}

async fn print_log(
    conn: &uyuni_effects::Connection,
    pod: &Pod,
    options: &LogOptions,
) -> Result<()> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let options = LogOptions {
        container: main_container(pod).map(str::to_owned),
        ..options.clone()
    };
    let follow = options.follow;
    let mut out = std::io::stdout().lock();
    uyuni_effects::logs::read_log(&conn.client, &conn.namespace, &name, &options, |line| {
        writeln!(out, "{line}")?;
        if follow {
            out.flush()?;
        }
        Ok(())
    })
    .await
    .with_context(|| format!("cannot read the log of pod {name}"))?;
    out.flush().context("cannot write to stdout")
}

/// The step list `logs` prints without a STEP: its header's command carries the run's identity
/// flags (`--context`, `--as`, …), so that pasted it reads the same namespace as the same user.
#[doc(hidden)]
pub fn human_steps(ns: &str, steps: &[StepLogs], kubectl: &uyuni_core::kubectl::Kubectl) -> String {
    if steps.is_empty() {
        return format!(
            "No step has run in namespace {ns}: install or migrate creates the Jobs whose logs this shows.\n"
        );
    }
    let command = kubectl.uyuni(Some(ns), "logs STEP");
    let mut out = format!("Steps with logs (`{command}`):\n");
    let width = steps.iter().map(|s| s.step.len()).max().unwrap_or(0);
    for s in steps {
        let last = s.jobs.last();
        out.push_str(&format!(
            "  {:width$}  {} attempt(s), latest {} {}{}\n",
            s.step,
            s.jobs.len(),
            last.map(|j| j.name.as_str()).unwrap_or("-"),
            last.map(|j| format!("{:?}", j.state).to_lowercase())
                .unwrap_or_default(),
            s.description
                .as_deref()
                .map(|d| format!(": {d}"))
                .unwrap_or_default(),
        ));
    }
    if command.contains(uyuni_core::kubectl::TOKEN_PLACEHOLDER) {
        out.push_str(&format!("({})\n", uyuni_core::kubectl::TOKEN_NOTE));
    }
    out
}
