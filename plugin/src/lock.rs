//! One writer at a time: the run's hold on its namespace's Lease (`uyuni_core::lock` decides,
//! `uyuni_effects::lease` reads and writes it), taken before the run's first write and released
//! by the caller of the command's run (`lib.rs`) however the run ends — at its end, on an error, and on
//! SIGINT/SIGTERM, when the run's future is dropped. A run killed outright (SIGKILL, a lost
//! host) leaves it behind; it runs out after its duration.
//!
//! A namespace that does not exist yet cannot hold a lease. The rule: the step that writes the
//! namespace (the first of a run into a new namespace) runs before the lease is taken, and the
//! lease is taken right after it. Two runs racing there both apply the same Namespace by
//! server-side apply, which is idempotent (the second apply of the same fields by the same
//! field manager changes nothing), and then only one of them gets the lease.

use anyhow::{Result, anyhow, bail};
use tokio::sync::Mutex;
use uyuni_core::kubectl::Kubectl;
use uyuni_core::lock::Taker;
use uyuni_core::{Action, Kind, Step};
use uyuni_effects::lease::{self, Acquired, Held};

use crate::cli;
use crate::output::Reporter;

/// The lease this run holds, if it took it.
#[derive(Debug, Default)]
pub struct RunLock {
    held: Mutex<Option<Held>>,
    /// The run's operation record as last written while the run goes on.
    record: std::sync::Mutex<Option<crate::operation::Unfinished>>,
}

/// `kubectl uyuni ARGS…` as this process was started, `--token`'s value replaced: passwords and
/// keys are accepted only from files and the environment, and kubectl's token is the one
/// secret argv may hold.
fn command_line() -> String {
    let argv: Vec<String> = cli::normalize_args(std::env::args_os())
        .into_iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let words: Vec<String> = cli::redact_secrets(argv)
        .iter()
        .map(|a| {
            if a == "$TOKEN" || a == "--token=$TOKEN" {
                // Quoted for the shell, as the hints write it.
                a.replace("$TOKEN", "\"$TOKEN\"")
            } else {
                word(a)
            }
        })
        .collect();
    format!("kubectl uyuni {}", words.join(" "))
}

fn word(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@=+,%".contains(c));
    if plain {
        value.to_owned()
    } else {
        uyuni_core::shell::quote(value)
    }
}

/// The local user's name from the process's real uid (`/proc/self/status`) and
/// `/etc/passwd`, for a process without `USER` in its environment (cron, a service); the uid
/// itself when it has no entry there.
fn uid_name() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .to_owned();
    let name = std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|passwd| {
            passwd.lines().find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                (fields.get(2) == Some(&uid.as_str())).then(|| fields[0].to_owned())
            })
        });
    Some(name.unwrap_or(format!("uid {uid}")))
}

/// The local user, and the cluster user impersonated if any.
fn user(cmd_as: Option<&str>) -> String {
    let local = ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .or_else(uid_name)
        .unwrap_or_else(|| "unknown".to_owned());
    match cmd_as {
        Some(other) => format!("{local} (as {other})"),
        None => local,
    }
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Who writes and how the user runs the same command again: what the lease records of a run
/// and what its messages name, whichever command the run is.
#[derive(Debug)]
pub struct Writer<'a> {
    pub namespace: &'a str,
    pub kubectl: &'a Kubectl,
    /// The command line that repeats the run, for the messages that tell to run it again.
    pub repeat: String,
    pub run_id: &'a str,
    /// The cluster user impersonated (`--as`), if any.
    pub as_user: Option<&'a str>,
    /// `--lease-duration-seconds`; `None`: the default.
    pub lease_duration_seconds: Option<i32>,
    /// `--force-unlock`.
    pub force_unlock: bool,
}

impl<'a> Writer<'a> {
    /// The writer of a run with `params`, its connection flags `cli` and its `run` flags;
    /// `repeat`: the command line that repeats it.
    pub fn of(
        params: &'a uyuni_core::params::ServerParams,
        repeat: String,
        cli: &'a cli::Cli,
        run: &cli::RunFlags,
    ) -> Writer<'a> {
        Writer {
            namespace: &params.namespace,
            kubectl: &params.kubectl,
            repeat,
            run_id: &params.run_id,
            as_user: cli.kube.as_user.as_deref(),
            lease_duration_seconds: run.lease_duration_seconds,
            force_unlock: run.force_unlock,
        }
    }
}

fn taker(writer: &Writer<'_>) -> Taker {
    let taker = Taker::new(
        &command_line(),
        &user(writer.as_user),
        &host(),
        std::process::id(),
        writer.run_id,
    );
    match writer.lease_duration_seconds {
        Some(seconds) => taker.with_duration(seconds),
        None => taker,
    }
}

/// Whether `step` creates the run's namespace.
pub(crate) fn creates_namespace(step: &Step) -> bool {
    matches!(&step.action, Action::Apply(object) if object.object_ref().kind == Kind::Namespace)
}

impl RunLock {
    /// Called before each write of the run: takes the lease the first time, refuses when
    /// another run holds it, and stops a run that lost it.
    pub async fn before_write(
        &self,
        conn: &uyuni_effects::Connection,
        writer: &Writer<'_>,
        step: &Step,
        reporter: &Reporter,
    ) -> Result<()> {
        let ns = writer.namespace;
        let repeat = writer.repeat.as_str();
        let kubectl = writer.kubectl;
        let mut slot = self.held.lock().await;
        if let Some(held) = slot.as_ref() {
            return held
                .check()
                .map_err(|why| anyhow!(uyuni_core::lock::lost(ns, &why, kubectl, repeat)));
        }
        if creates_namespace(step) {
            // Before the lease: a namespace that does not exist cannot hold it.
            return Ok(());
        }
        match lease::acquire(&conn.client, ns, &taker(writer), writer.force_unlock).await? {
            Acquired::Held { held, from, now } => {
                if let Some(from) = &from {
                    reporter.warn(&uyuni_core::lock::take_over_warning(from, ns, now));
                }
                *slot = Some(held);
                Ok(())
            }
            Acquired::Refused { holder, now } => {
                bail!(uyuni_core::lock::refusal(&holder, ns, now, kubectl, repeat))
            }
            Acquired::NamespaceMissing => bail!(
                "namespace {ns} does not exist, so Lease {} (which keeps two runs from writing there at once) cannot be taken; this run stopped before its next write. Create it (`{}`) or run `{repeat}` again, which creates it",
                uyuni_core::lock::LEASE_NAME,
                kubectl.cmd(None, &format!("create namespace {ns}")),
            ),
        }
    }

    /// Releases the lease if this run holds it; a lease that cannot be released runs out by
    /// itself. Bounded in time: an interrupted run against an API server that stopped
    /// answering must still end.
    /// The run's operation record as last written (`None` once the run ended it itself).
    pub fn note_record(&self, record: Option<crate::operation::Unfinished>) {
        *self
            .record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = record;
    }

    /// A signal stopped the run: its record says so (before the lease goes, while this run
    /// is still the one writer).
    pub async fn record_interrupted(&self, why: &str, reporter: &Reporter) {
        let record = self
            .record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(record) = record {
            record.interrupted(why, reporter).await;
        }
    }

    pub async fn release(&self, reporter: &Reporter) {
        let Some(held) = self.held.lock().await.take() else {
            return;
        };
        let problem = match tokio::time::timeout(RELEASE_TIMEOUT, held.release()).await {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!(
                "Lease {} was not released within {} s",
                uyuni_core::lock::LEASE_NAME,
                RELEASE_TIMEOUT.as_secs()
            ),
        };
        reporter.warn(&format!(
            "{problem}; it runs out by itself after its duration, and until then another run in this namespace is refused"
        ));
    }
}

/// How long the release at the end of a run may take.
const RELEASE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
