//! The outage a final run caused, as the cluster recorded it: from the moment the final sync
//! began to stop the source's services until the server was ready, split at the milestones in
//! between. Pure: every time comes from the observed objects — the final sync Job's start and
//! completion, the `Available` transitions of Deployments `db` and `uyuni` — and from the
//! sync's own record of when it stopped the services (keys of Secret `uyuni-migration-data`).
//! Times have the API's one-second resolution.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use serde::Serialize;

use crate::builders::data_sync;
use crate::catalogue::data_keys;
use crate::catalogue::names;
use crate::catalogue::names::SERVER_DEPLOYMENT;
use crate::observed::{JobState, Observed, deployment_condition, deployment_ready, job_state};
use crate::plan::phase::latest_succeeded;
use crate::sync_progress::Estimate;

/// One stretch of the outage, ending at a milestone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutagePhase {
    /// Stable name (`stop`, `copy`, `database`, `server-start`).
    pub name: &'static str,
    /// What happened in it, in words.
    pub what: &'static str,
    pub seconds: i64,
}

/// How long the source was down until the server was ready, and where the time went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutageReport {
    /// The final sync Job that stopped the source.
    pub sync_job: String,
    pub seconds: i64,
    /// In order; their seconds add up to `seconds`.
    pub phases: Vec<OutagePhase>,
    /// False when the sync did not record when it stopped the services (data of an older
    /// version): the outage is then counted from the Job's start, a little early.
    pub stop_recorded: bool,
}

/// Whether the source's services are down for the migration: a final sync succeeded and the
/// server does not run ready on its data yet (Deployments `db` and `uyuni`). An interrupted
/// run says so, with the ways on.
pub fn source_down(observed: &Observed) -> bool {
    let ready = |name: &str| observed.deployment(name).is_some_and(deployment_ready);
    latest_succeeded(observed, data_sync::sync_mode(false)).is_some()
        && !(ready(names::DB_DEPLOYMENT) && ready(SERVER_DEPLOYMENT))
}

/// The report, once the final sync succeeded and both Deployments are ready; `None` before
/// (or when the cluster did not record the times).
pub fn report(observed: &Observed) -> Option<OutageReport> {
    let sync = latest_succeeded(observed, data_sync::sync_mode(false))?;
    let sync_name = sync.metadata.name.clone()?;
    let (sync_start, sync_end) = job_times(sync)?;
    let db_ready = available_since(observed.deployment(names::DB_DEPLOYMENT)?)?;
    let server_ready = available_since(observed.deployment(SERVER_DEPLOYMENT)?)?;
    let (started, stopped) = match recorded_stop(observed, &sync_name) {
        Some((started, stopped)) if started <= stopped && stopped <= sync_end => (started, stopped),
        _ => (sync_start, sync_start),
    };
    let stop_recorded = started != sync_start || stopped != sync_start;
    // Each milestone no earlier than the one before: clocks of the Job's node and of the
    // control plane may disagree by a second or so.
    let copy_done = sync_end.max(stopped);
    let db_done = db_ready.max(copy_done);
    let server_done = server_ready.max(db_done);
    let mut phases = Vec::new();
    if stop_recorded {
        phases.push(OutagePhase {
            name: "stop",
            what: "the source's services stopped",
            seconds: stopped - started,
        });
    }
    phases.extend([
        OutagePhase {
            name: "copy",
            what: if stop_recorded {
                "the final copy"
            } else {
                "services stopped and the final copy"
            },
            seconds: copy_done - stopped,
        },
        OutagePhase {
            name: "database",
            what: "database fix-up, upgrade and start",
            seconds: db_done - copy_done,
        },
        OutagePhase {
            name: "server-start",
            what: "TLS, services and the server's start",
            seconds: server_done - db_done,
        },
    ]);
    Some(OutageReport {
        sync_job: sync_name,
        seconds: server_done - started,
        phases,
        stop_recorded,
    })
}

/// `45s`, `3m 12s`, `1h 02m`.
pub fn duration_text(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, (s % 3600) / 60),
    }
}

impl OutageReport {
    /// One line for the run's summary.
    pub fn text(&self) -> String {
        let phases: Vec<String> = self
            .phases
            .iter()
            .map(|p| format!("{} {}", p.what, duration_text(p.seconds)))
            .collect();
        format!(
            "The source was down for {} until the server was ready ({}){}.",
            duration_text(self.seconds),
            phases.join(", "),
            if self.stop_recorded {
                ""
            } else {
                "; counted from the final sync's start"
            }
        )
    }
}

fn job_times(job: &Job) -> Option<(i64, i64)> {
    if job_state(job) != JobState::Succeeded {
        return None;
    }
    let status = job.status.as_ref()?;
    let start = status.start_time.as_ref()?.0.as_second();
    let end = status.completion_time.as_ref()?.0.as_second();
    (end >= start).then_some((start, end))
}

/// When the Deployment last became Available, if it is ready now.
fn available_since(deployment: &Deployment) -> Option<i64> {
    if !deployment_ready(deployment) {
        return None;
    }
    deployment_condition(deployment, "Available", "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0.as_second())
}

/// A value of Secret `uyuni-migration-data`, trimmed, when the data in it is Job `sync_job`'s.
fn recorded(observed: &Observed, sync_job: &str, key: &str) -> Option<String> {
    let data = observed
        .secret(names::MIGRATION_DATA_SECRET)?
        .data
        .as_ref()?;
    let text = |key: &str| {
        data.get(key)
            .and_then(|v| String::from_utf8(v.0.clone()).ok())
            .map(|s| s.trim().to_owned())
    };
    if text(data_keys::JOB)? != sync_job {
        return None;
    }
    text(key)
}

/// The sync's record of the stop, when the data in the Secret is that Job's.
fn recorded_stop(observed: &Observed, sync_job: &str) -> Option<(i64, i64)> {
    let number = |key: &str| recorded(observed, sync_job, key)?.parse::<i64>().ok();
    Some((
        number(data_keys::OUTAGE_STARTED_AT)?,
        number(data_keys::SERVICES_STOPPED_AT)?,
    ))
}

/// What the last `--prepare` run expects of the final run's window, from what it measured
/// ([`Estimate`]): the final copy (a scan of every volume, then the delta left at this run's
/// copy rate) and the script's steps after the copy, which it ran itself. The services' stop,
/// the database steps and the server's start come from an earlier final run's report when the
/// cluster holds one, and are unknown otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExpectedWindow {
    /// The prepare Job that measured.
    pub sync_job: String,
    /// What a final copy would still move after this run's copy.
    pub delta_bytes: u64,
    /// The copy rate of the run (`null`: it copied nothing to measure a rate on).
    pub copy_bytes_per_second: Option<u64>,
    /// The scan of every volume in the final copy's compare modes.
    pub scan_seconds: i64,
    /// The final copy: the scan, then the delta at the copy rate (`null`: a delta and no rate).
    pub copy_seconds: Option<i64>,
    /// The data sync's steps after the copy.
    pub after_copy_seconds: i64,
    /// The services' stop, the database steps and the server's start, from the last final
    /// run's report (`null`: unknown, no final run recorded them).
    pub stop_and_start_seconds: Option<i64>,
    /// The whole window, when every part is known.
    pub seconds: Option<i64>,
}

/// Milliseconds as whole seconds, rounded up: an estimate rather long than short.
fn ceil_seconds(ms: u64) -> i64 {
    i64::try_from(ms.div_ceil(1000)).unwrap_or(i64::MAX)
}

/// The expected window after the last `--prepare`; `None` when no prepare run succeeded or it
/// recorded no measure (data of an older version).
pub fn expected(observed: &Observed) -> Option<ExpectedWindow> {
    let sync = latest_succeeded(observed, data_sync::sync_mode(true))?;
    let sync_job = sync.metadata.name.clone()?;
    let number = |key: &str| recorded(observed, &sync_job, key)?.parse::<u64>().ok();
    let estimate = Estimate {
        delta_bytes: number(data_keys::DELTA_BYTES)?,
        scan_ms: number(data_keys::SCAN_MS)?,
        copied_bytes: number(data_keys::COPIED_BYTES)?,
        copy_ms: number(data_keys::COPY_MS)?,
        rest_ms: number(data_keys::REST_MS)?,
    };
    let copy_seconds = estimate.final_copy_ms().map(ceil_seconds);
    let after_copy_seconds = ceil_seconds(estimate.rest_ms);
    let stop_and_start_seconds = report(observed).map(|r| {
        r.phases
            .iter()
            .filter(|p| p.name != "copy")
            .map(|p| p.seconds)
            .sum()
    });
    Some(ExpectedWindow {
        sync_job,
        delta_bytes: estimate.delta_bytes,
        copy_bytes_per_second: estimate.bytes_per_second(),
        scan_seconds: ceil_seconds(estimate.scan_ms),
        copy_seconds,
        after_copy_seconds,
        stop_and_start_seconds,
        seconds: copy_seconds
            .zip(stop_and_start_seconds)
            .map(|(c, s)| c + after_copy_seconds + s),
    })
}

impl ExpectedWindow {
    /// One paragraph for the run's summary.
    pub fn text(&self) -> String {
        let rate = match self.copy_bytes_per_second {
            Some(r) => format!("{}/s", crate::dataplane::human_bytes(r)),
            None => "unknown (nothing was copied)".to_owned(),
        };
        let copy = match self.copy_seconds {
            Some(s) => format!("about {}", duration_text(s)),
            None => "unknown".to_owned(),
        };
        let rest = match self.stop_and_start_seconds {
            Some(s) => format!(
                "the services' stop, the database steps and the server's start took {} in the last final run",
                duration_text(s)
            ),
            None => "the services' stop, the database steps and the server's start: unknown (no final run recorded them yet)".to_owned(),
        };
        let total = match (self.seconds, self.copy_seconds) {
            (Some(s), _) => format!("about {}", duration_text(s)),
            (None, Some(c)) => format!(
                "about {} plus the services' stop and the server's start",
                duration_text(c + self.after_copy_seconds)
            ),
            (None, None) => "unknown".to_owned(),
        };
        format!(
            "Expected window of the final run: {total}. The final copy: {copy} ({} left after this copy at this run's {rate}, after a scan of every volume of {}); the data sync's steps after it: {}; {rest}.",
            crate::dataplane::human_bytes(self.delta_bytes),
            duration_text(self.scan_seconds),
            duration_text(self.after_copy_seconds),
        )
    }
}
