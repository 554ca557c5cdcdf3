//! The shape every step Job shares with the data-sync Job: named `uyuni-<step>-<run id>`, step
//! label and annotation, description, spec hash and run annotations, `backoffLimit: 0` (a retry
//! is a new, visible Job), no TTL (the log stays readable), `restartPolicy: Never`.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, PodSecurityContext, PodSpec, PodTemplateSpec, Volume,
    VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::builders::{data_sync, hardening, meta, mount};
use crate::labels;
use crate::params::ServerParams;
use crate::scripts::JobScript;

/// The name of the Job of `step` created by run `run_id`.
pub fn job_name(step: &str, run_id: &str) -> String {
    format!("uyuni-{step}-{run_id}")
}

/// A volume mount of a claim: (volume and claim name, mount path).
pub struct ClaimMount<'a> {
    pub claim: &'a str,
    pub path: &'a str,
}

/// What varies between script Jobs.
pub struct ScriptJob<'a> {
    pub step: &'a str,
    pub description: String,
    pub component: &'a str,
    pub image: &'a str,
    /// The script and its parameters; they go first in the container's environment.
    pub script: JobScript,
    pub claims: Vec<ClaimMount<'a>>,
    /// A memory-backed `/tmp`, for tools that want a fast scratch space.
    pub tmpfs_tmp: bool,
    /// Further environment: `secretKeyRef` and field references.
    pub env: Vec<EnvVar>,
    /// Other volumes (Secrets, emptyDirs) with their mounts.
    pub extra_volumes: Vec<(Volume, VolumeMount)>,
    pub service_account: Option<&'a str>,
    /// The pod's security context; `None`: the image's user.
    pub security_context: Option<PodSecurityContext>,
    /// What the Job writes besides its status (`catalogue::products`), if anything.
    pub produces: Option<&'static str>,
    /// What the Job's spec-hash annotation identifies, and so when the step runs again.
    pub identity: Identity,
    /// Whether the script allows a read-only root filesystem (`hardening::JobRoot`).
    pub root: hardening::JobRoot,
}

/// What makes two Jobs of a step the same work, so that one that succeeded is not run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// The whole spec: any change (an image, a pull policy) is new work.
    Spec,
    /// What the Job does to the data: its script, environment and volumes. The image, its pull
    /// policy and the pull Secrets only say where the same tools come from, so the database
    /// steps, which run once per data sync, do not run again when a re-run names another tag
    /// or registry: a second fix-up or upgrade would rebuild the database from the copy made
    /// at the migration and lose what the server wrote since.
    Data,
}

/// A plain value environment variable.
pub fn env(name: &str, value: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    }
}

/// The labels of a step Job's pod. Its component is the step, never a Deployment's component:
/// the Services select pods by component, and a Job pod labelled `db` would receive the `db`
/// Service's traffic while it runs — the migration SQL Job's own connections included.
pub fn pod_labels(step: &str) -> BTreeMap<String, String> {
    let mut labels = labels::labels(step);
    labels.insert(labels::STEP_LABEL.to_owned(), step.to_owned());
    labels
}

fn spec(params: &ServerParams, job: &ScriptJob<'_>) -> (JobSpec, BTreeMap<String, String>) {
    let mut volumes: Vec<Volume> = job
        .claims
        .iter()
        .map(|c| super::pvc_volume(c.claim, c.claim))
        .collect();
    let mut mounts: Vec<VolumeMount> = job.claims.iter().map(|c| mount(c.claim, c.path)).collect();
    for (volume, mount) in &job.extra_volumes {
        volumes.push(volume.clone());
        mounts.push(mount.clone());
    }
    let env: Vec<EnvVar> = job
        .script
        .env
        .iter()
        .map(|(name, value)| self::env(name, value))
        .chain(job.env.iter().cloned())
        .collect();
    if job.tmpfs_tmp {
        volumes.push(Volume {
            name: "tmp".to_owned(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".to_owned()),
                ..EmptyDirVolumeSource::default()
            }),
            ..Volume::default()
        });
        mounts.push(mount("tmp", "/tmp"));
    }
    let mut spec = JobSpec {
        backoff_limit: Some(0),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(pod_labels(job.step)),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                image_pull_secrets: super::registry::pod_pull_secrets(&params.spec),
                restart_policy: Some("Never".to_owned()),
                service_account_name: job.service_account.map(str::to_owned),
                security_context: job.security_context.clone(),
                containers: vec![Container {
                    name: job.step.to_owned(),
                    image: Some(job.image.to_owned()),
                    image_pull_policy: Some(params.spec.image.pull_policy.as_str().to_owned()),
                    command: Some(vec![
                        "bash".to_owned(),
                        "-c".to_owned(),
                        job.script.text.clone(),
                    ]),
                    env: (!env.is_empty()).then_some(env),
                    volume_mounts: Some(mounts),
                    ..Container::default()
                }],
                volumes: Some(volumes),
                ..PodSpec::default()
            }),
        },
        ..JobSpec::default()
    };
    // A Job whose script never calls the API gets no token (the namespace's default
    // ServiceAccount's would be mounted otherwise); the ones that do (data-sync, ca-key) run as
    // their own ServiceAccount. The runtime's default seccomp profile (no Job script makes a
    // call it refuses), no privilege escalation (no script gains privileges through a setuid
    // binary: those that run as root start as root; the others never switch user), NET_RAW
    // dropped, requests: `hardening::job_pod`.
    let skips = spec
        .template
        .spec
        .as_mut()
        .map(|pod| hardening::job_pod(pod, job.service_account.is_some(), job.root))
        .unwrap_or_default();
    (spec, skips)
}

/// The spec without what only says where the tools come from (see [`Identity::Data`]).
fn data_identity(spec: &JobSpec) -> JobSpec {
    let mut spec = spec.clone();
    if let Some(pod) = spec.template.spec.as_mut() {
        pod.image_pull_secrets = None;
        // Whether a token is mounted, the seccomp profile, privilege escalation, capabilities
        // dropped and resources change nothing of what the Job does to the data: a Job of a
        // version without them is the same work.
        hardening::strip_job_pod(pod);
        for c in pod
            .containers
            .iter_mut()
            .chain(pod.init_containers.iter_mut().flatten())
        {
            c.image = None;
            c.image_pull_policy = None;
        }
    }
    spec
}

/// The Job of a step for this run.
pub fn script_job(params: &ServerParams, job: &ScriptJob<'_>) -> Job {
    let (spec, skips) = spec(params, job);
    let hash = match job.identity {
        Identity::Spec => data_sync::spec_hash(&spec),
        Identity::Data => data_sync::spec_hash(&data_identity(&spec)),
    };
    let mut metadata = meta(
        &job_name(job.step, &params.run_id),
        &params.namespace,
        job.component,
    );
    if let Some(l) = metadata.labels.as_mut() {
        l.insert(labels::STEP_LABEL.to_owned(), job.step.to_owned());
    }
    metadata.annotations = Some(BTreeMap::from([
        (labels::STEP_ANNOTATION.to_owned(), job.step.to_owned()),
        (
            labels::DESCRIPTION_ANNOTATION.to_owned(),
            job.description.clone(),
        ),
        (labels::SPEC_HASH_ANNOTATION.to_owned(), hash),
        (labels::RUN_ANNOTATION.to_owned(), params.run_id.clone()),
    ]));
    if let Some(a) = metadata.annotations.as_mut() {
        a.extend(skips);
    }
    if let (Some(product), Some(a)) = (job.produces, metadata.annotations.as_mut()) {
        a.insert(labels::PRODUCES_ANNOTATION.to_owned(), product.to_owned());
    }
    Job {
        metadata,
        spec: Some(spec),
        ..Job::default()
    }
}
