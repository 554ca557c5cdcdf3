//! Where a migration stands, as a fact derived from the observed state alone: which data syncs
//! succeeded (the data-sync Jobs and their mode), and whether the migrated server runs
//! (Deployment `uyuni`). Every command line is checked against it before the planner plans a
//! single write, so that no flag combination copies into volumes a running server owns.

use k8s_openapi::api::batch::v1::Job;
use serde::Serialize;

use crate::builders::{data_sync, server};

use crate::catalogue::names;
use crate::labels;
use crate::observed::{JobState, Observed, deployment_stopped, desired_replicas, job_state};
use crate::params::MigrateParams;
use crate::plan::{PlanError, job_label};

/// Where a migration stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case", tag = "phase")]
pub enum Phase {
    /// No data sync has succeeded (or none is left to say so).
    NotStarted,
    /// A copy made while the source keeps serving succeeded; no final sync has yet.
    Prepared { job: String },
    /// A final sync is running: the source's services are being stopped or are stopped.
    FinalSyncRunning { job: String },
    /// The final sync succeeded: the volumes hold the source's data as it was at its stop.
    FinalSyncDone { job: String },
    /// Deployment `uyuni` runs: the volumes are the migrated server's now.
    ServerRunning {
        replicas: i32,
        /// The final sync it runs on, when there was one.
        final_job: Option<String>,
    },
}

fn name_of(job: &Job) -> String {
    job.metadata.name.clone().unwrap_or_default()
}

fn mode_of(job: &Job) -> Option<String> {
    job_label(job, labels::SYNC_MODE_ANNOTATION)
}

/// The data-sync Jobs of one mode (`prepare` or `final`), oldest first.
pub(crate) fn syncs<'a>(observed: &'a Observed, mode: &str) -> Vec<&'a Job> {
    observed
        .jobs_for_step(data_sync::STEP_ID)
        .into_iter()
        .filter(|j| mode_of(j).as_deref() == Some(mode))
        .collect()
}

/// The newest Job of a mode that succeeded.
pub(crate) fn latest_succeeded<'a>(observed: &'a Observed, mode: &str) -> Option<&'a Job> {
    syncs(observed, mode)
        .into_iter()
        .rev()
        .find(|j| job_state(j) == JobState::Succeeded)
}

/// The replicas of a Deployment that is not stopped (asked for, or pods still there).
fn running_replicas(observed: &Observed, name: &str) -> Option<i32> {
    let d = observed.deployment(name)?;
    if deployment_stopped(d) {
        return None;
    }
    let pods = d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    Some(desired_replicas(d).max(pods))
}

/// Whether Deployment `name` (the database or the server) was made to run on the data of
/// data-sync Job `sync_job`: from then on that data is the server's, and what it wrote since
/// exists nowhere else. Read from the Deployment's [`labels::DATA_SYNC_ANNOTATION`]; a
/// Deployment without it (written before the annotation existed, or by hand) counts as running
/// on this sync's data unless it was created before the sync completed, and when either time
/// is unknown it counts too: a data step wrongly skipped fails loudly at the server's start,
/// one wrongly run loses data silently.
pub fn taken_over(observed: &Observed, name: &str, sync_job: &str) -> bool {
    let Some(d) = observed.deployment(name) else {
        return false;
    };
    if let Some(job) = d
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::DATA_SYNC_ANNOTATION))
    {
        return job == sync_job;
    }
    let completed = observed
        .jobs_for_step(data_sync::STEP_ID)
        .into_iter()
        .find(|j| name_of(j) == sync_job)
        .and_then(|j| j.status.as_ref()?.completion_time.as_ref());
    match (&d.metadata.creation_timestamp, completed) {
        (Some(created), Some(completed)) => created.0 >= completed.0,
        _ => true,
    }
}

/// Whether the server's data is the server's now: Deployment `db` or `uyuni` was made for the
/// data of the latest data sync (see [`taken_over`]). From then on a `migrate` run changes no
/// data and no image; the data-sync Job of that data when it is.
pub fn data_taken_over(observed: &Observed) -> Option<String> {
    let data = observed.extracted().ok().flatten()?;
    [server::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT]
        .into_iter()
        .any(|name| taken_over(observed, name, &data.job))
        .then_some(data.job)
}

/// The image flags: what a run leaves out to keep the images a server runs.
const IMAGE_FLAGS: [&str; 12] = [
    "--image",
    "--tag",
    "--registry-host",
    "--registry",
    "--db-image",
    "--pgsql-image",
    "--pgsql-tag",
    "--db-tag",
    "--hubxmlrpc-image",
    "--coco-image",
    "--tftp-image",
    "--tftp-tag",
];

/// Before any write: once the server's data is its own ([`data_taken_over`]), a run that would
/// set another image on one of its Deployments is an upgrade and is refused. Only Deployments
/// that exist are compared: a component this run adds starts on the image given.
pub fn check_images(params: &MigrateParams, observed: &Observed) -> Result<(), PlanError> {
    let Some(job) = data_taken_over(observed) else {
        return Ok(());
    };
    let changes = image_changes(params, observed);
    if changes.is_empty() {
        return Ok(());
    }
    let running = [server::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT]
        .into_iter()
        .filter(|name| taken_over(observed, name, &job))
        .map(|name| format!("Deployment {name}"))
        .collect::<Vec<_>>()
        .join(" and ");
    let ns = &params.namespace;
    Err(PlanError::ImageChangeOnRunningServer {
        namespace: ns.clone(),
        running: format!("{running}, on the data of Job {job}"),
        changes: changes.join("; "),
        same: params.kubectl.without_flags(&IMAGE_FLAGS).migrate(
            Some(ns),
            &params.source_fqdn,
            false,
        ),
    })
}

/// Before any write: once an installed server ran (Deployment `db` or `uyuni` with the install
/// origin, not stopped), its database was set up by its images; another image is an upgrade
/// and is refused, as for a migrated server.
pub fn check_installed_images(
    params: &crate::params::InstallParams,
    observed: &Observed,
) -> Result<(), PlanError> {
    let running: Vec<String> = [server::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT]
        .into_iter()
        .filter(|name| running_replicas(observed, name).is_some())
        .map(|name| format!("Deployment {name}"))
        .collect();
    if running.is_empty() {
        return Ok(());
    }
    let changes = image_changes(params, observed);
    if changes.is_empty() {
        return Ok(());
    }
    let ns = &params.namespace;
    Err(PlanError::ImageChangeOnRunningServer {
        namespace: ns.clone(),
        running: format!("{}, installed by this tool", running.join(" and ")),
        changes: changes.join("; "),
        same: params
            .kubectl
            .without_flags(&IMAGE_FLAGS)
            .install(Some(ns), &params.fqdn),
    })
}

/// The Deployments that exist and run another image than the parameters ask for.
fn image_changes(params: &crate::params::ServerParams, observed: &Observed) -> Vec<String> {
    let image = &params.spec.image;
    [
        (server::SERVER_DEPLOYMENT, &image.server),
        (names::DB_DEPLOYMENT, &image.database),
        (server::HUB_DEPLOYMENT, &image.hub_xmlrpc),
        (server::COCO_DEPLOYMENT, &image.coco),
        (names::TFTP_DEPLOYMENT, &image.tftp),
    ]
    .into_iter()
    .filter_map(|(name, wanted)| {
        let live = observed
            .deployment(name)?
            .spec
            .as_ref()?
            .template
            .spec
            .as_ref()?
            .containers
            .first()?
            .image
            .clone()?;
        (live != *wanted)
            .then(|| format!("Deployment {name} runs {live}, this run asks for {wanted}"))
    })
    .collect()
}

/// Where the migration in this namespace stands. Pure; the later phases win.
pub fn phase(observed: &Observed) -> Phase {
    let final_done = latest_succeeded(observed, data_sync::sync_mode(false)).map(name_of);
    if let Some(replicas) = running_replicas(observed, server::SERVER_DEPLOYMENT) {
        return Phase::ServerRunning {
            replicas,
            final_job: final_done,
        };
    }
    if let Some(job) = final_done {
        return Phase::FinalSyncDone { job };
    }
    let final_running = syncs(observed, data_sync::sync_mode(false))
        .into_iter()
        .find(|j| job_state(j) == JobState::Running);
    if let Some(job) = final_running {
        return Phase::FinalSyncRunning { job: name_of(job) };
    }
    match latest_succeeded(observed, data_sync::sync_mode(true)) {
        Some(job) => Phase::Prepared { job: name_of(job) },
        None => Phase::NotStarted,
    }
}

/// The newest data-sync Job that records its source, with that source: whatever state it is
/// in, it has copied (or copies) into the volumes.
pub fn copied_source(observed: &Observed) -> Option<(String, String)> {
    observed
        .jobs_for_step(data_sync::STEP_ID)
        .into_iter()
        .rev()
        .find_map(|j| job_label(j, labels::SOURCE_ANNOTATION).map(|s| (name_of(j), s)))
}

/// A run naming another source than the one whose copy is in the volumes would mix two
/// servers' data (an rsync onto another server's tree, the other's database): refused before
/// any write. Jobs of a kubectl-uyuni that did not record the source are not judged.
fn check_source(params: &MigrateParams, observed: &Observed) -> Result<(), PlanError> {
    let Some((job, found)) = copied_source(observed) else {
        return Ok(());
    };
    if found.eq_ignore_ascii_case(&params.source_fqdn) {
        return Ok(());
    }
    let ns = &params.namespace;
    Err(PlanError::OtherSource {
        job,
        found: found.clone(),
        fqdn: params.source_fqdn.clone(),
        namespace: ns.clone(),
        same: params.kubectl.migrate(Some(ns), &found, params.prepare),
    })
}

/// The command line against the phase, before any write: `--prepare` copies while the source
/// serves, which is only harmless before the final sync; and the source must be the one whose
/// copy the volumes hold.
pub fn check(params: &MigrateParams, observed: &Observed) -> Result<(), PlanError> {
    check_source(params, observed)?;
    if !params.prepare {
        return Ok(());
    }
    let found = match phase(observed) {
        Phase::NotStarted | Phase::Prepared { .. } => return Ok(()),
        Phase::FinalSyncRunning { job } => {
            return Err(PlanError::PrepareWhileFinalSyncRuns {
                job,
                fqdn: params.source_fqdn.clone(),
                finish: params
                    .kubectl
                    .migrate(Some(&params.namespace), &params.source_fqdn, false),
            });
        }
        Phase::FinalSyncDone { job } => (
            format!("the final data sync ran (Job {job} succeeded)"),
            Some(job),
            None,
        ),
        Phase::ServerRunning {
            replicas,
            final_job,
        } => (
            match &final_job {
                Some(job) => format!(
                    "the final data sync ran (Job {job} succeeded) and Deployment {} runs ({replicas} replica(s))",
                    server::SERVER_DEPLOYMENT
                ),
                None => format!(
                    "Deployment {} runs ({replicas} replica(s))",
                    server::SERVER_DEPLOYMENT
                ),
            },
            final_job,
            Some(replicas),
        ),
    };
    let (found, job, _) = found;
    let ns = &params.namespace;
    let mut again = stop_advice(params, observed);
    if let Some(job) = &job {
        again.push_str(&format!(
            "delete Job {job} (`{}`), ",
            params.kubectl.cmd(Some(ns), &format!("delete job {job}"))
        ));
    }
    Err(PlanError::PrepareAfterFinalSync {
        found,
        fqdn: params.source_fqdn.clone(),
        again,
        finish: params.kubectl.migrate(Some(ns), &params.source_fqdn, false),
    })
}

/// The Deployments that run on the synced volumes (the server, the database), with replicas.
fn running_on_volumes(observed: &Observed) -> Vec<(String, i32)> {
    [server::SERVER_DEPLOYMENT, names::DB_DEPLOYMENT]
        .into_iter()
        .filter_map(|name| running_replicas(observed, name).map(|r| (name.to_owned(), r)))
        .collect()
}

/// "stop …, " naming every Deployment that runs on the volumes, or nothing when none does:
/// the first part of the advice to sync again.
pub(crate) fn stop_advice(params: &MigrateParams, observed: &Observed) -> String {
    let running = running_on_volumes(observed);
    if running.is_empty() {
        return String::new();
    }
    let names = running
        .iter()
        .map(|(name, _)| name.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "stop what runs on the volumes (`{}`), ",
        params.kubectl.cmd(
            Some(&params.namespace),
            &format!("scale deployment {names} --replicas=0")
        )
    )
}

/// Before a data-sync Job is created or waited for: no Deployment may run on the volumes it
/// copies into. The server and the database are only started after the final sync, so this
/// only refuses states someone made by hand (a deleted sync Job, a server of another origin).
pub(crate) fn guard_sync(
    params: &MigrateParams,
    observed: &Observed,
    running_job: Option<&str>,
) -> Result<(), PlanError> {
    let running = running_on_volumes(observed);
    if running.is_empty() {
        return Ok(());
    }
    let ns = &params.namespace;
    let deployments = running
        .iter()
        .map(|(name, replicas)| format!("Deployment {name} ({replicas} replica(s))"))
        .collect::<Vec<_>>()
        .join(" and ");
    let names = running
        .iter()
        .map(|(name, _)| name.as_str())
        .collect::<Vec<_>>()
        .join(" ");
    let scale = params
        .kubectl
        .cmd(Some(ns), &format!("scale deployment {names} --replicas=0"));
    let remedy = match running_job {
        Some(job) => format!(
            "Job {job} copies into them now: delete it (`{}`) or stop {deployments} (`{scale}`), then run again",
            params.kubectl.cmd(Some(ns), &format!("delete job {job}"))
        ),
        None => format!(
            "to migrate again from the source, overwriting what the server wrote since, stop them first (`{scale}`), then run again"
        ),
    };
    Err(PlanError::SyncIntoRunningServer {
        deployments,
        remedy,
    })
}

/// How long a succeeded Job ran, in seconds, from its observed status.
pub fn job_seconds(job: &Job) -> Option<i64> {
    let status = job.status.as_ref()?;
    let start = status.start_time.as_ref()?.0.as_second();
    let end = status.completion_time.as_ref()?.0.as_second();
    (end >= start).then_some(end - start)
}

/// The expected outage after a `--prepare`: how long the last copy took (the final copy moves
/// at most what changed since, plus the database with the services stopped). `None` without
/// a succeeded prepare-mode sync with start and completion times.
pub fn expected_window(observed: &Observed) -> Option<(String, i64)> {
    let job = latest_succeeded(observed, data_sync::sync_mode(true))?;
    job_seconds(job).map(|s| (name_of(job), s))
}

/// Whether an input is needed, and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case", tag = "status", content = "detail")]
pub enum Need {
    /// Given on this command line (a flag, the environment, or the prompt).
    Given,
    /// Stored in the cluster by an earlier run; reused.
    Stored(String),
    NotNeeded(String),
    /// Only the source can say: known from the copy made while it serves, before its stop.
    Unknown,
    /// Needed and not there: the run refuses, before the source is stopped.
    Missing,
    /// Permissions: every one checked is allowed (how many).
    Allowed(String),
    /// Permissions: these are refused; the run refuses before its first write.
    Denied(String),
}

/// One input a run needs, for the dry run's list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Input {
    pub name: &'static str,
    pub need: Need,
    /// How to give it.
    pub how: &'static str,
}

/// The data the inputs are judged on: the last sync's, when a sync that succeeded wrote it.
fn known_data(observed: &Observed) -> Option<crate::observed::ExtractedData> {
    let data = observed.extracted().ok().flatten()?;
    let written = observed
        .jobs_for_step(data_sync::STEP_ID)
        .into_iter()
        .any(|j| name_of(j) == data.job && job_state(j) == JobState::Succeeded);
    written.then_some(data)
}

/// Every input the real run will ask for or needs, and which are missing, from the state a run
/// starts from. The checks themselves are the planner's; this says them in advance.
pub fn inputs(params: &MigrateParams, observed: &Observed) -> Vec<Input> {
    let stored = |kind, name: &str| -> Need {
        if observed.contains(kind, name) {
            Need::Stored(format!("{kind:?} {name}"))
        } else {
            Need::Missing
        }
    };
    let mut out = vec![
        Input {
            name: "SSH key pair",
            need: if params.ssh_key.is_some() {
                Need::Given
            } else {
                stored(crate::object::Kind::Secret, names::SSH_KEY_SECRET)
            },
            how: "--ssh-key-private FILE --ssh-key-public FILE",
        },
        Input {
            name: "SSH known_hosts",
            need: if params.ssh_config.is_some() {
                Need::Given
            } else {
                stored(crate::object::Kind::ConfigMap, names::SSH_CONFIG_MAP)
            },
            how: "--ssh-knownhosts FILE",
        },
    ];
    if params.prepare {
        return out;
    }
    let data = known_data(observed);
    out.push(Input {
        name: "CA key password",
        need: crate::plan::ca_password_need(params, observed, data.as_ref()),
        how: "--ssl-password-file FILE, UYUNI_SSL_PASSWORD, or the prompt on a terminal",
    });
    out.push(Input {
        name: "TFTP of the source",
        need: match (&data, params.spec.tftp.enabled) {
            (_, Some(_)) => Need::Given,
            (None, None) => Need::Unknown,
            (Some(d), None) if d.tftp.is_some() => {
                Need::Stored(format!("recorded by Job {}", d.job))
            }
            (Some(_), None) => Need::Missing,
        },
        how: "--tftp=true or --tftp=false",
    });
    out
}
