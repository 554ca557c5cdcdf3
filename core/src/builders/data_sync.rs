//! The data-sync Job (reference §3.4, with its R fixes).

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use k8s_openapi::api::core::v1::{
    Container, EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath, ObjectFieldSelector, PodSpec,
    PodTemplateSpec, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use crate::builders::{config_map_volume, meta, pvc_volume};

use crate::catalogue::{components, names};
use crate::labels;
use crate::params::MigrateParams;
use crate::scripts::{self, data_sync};
use crate::volumes::VolumeRole;

pub use crate::catalogue::steps::DATA_SYNC as STEP_ID;
pub const CONTAINER: &str = "data-sync";
const INIT_CONTAINER: &str = "init-volumes";

/// `prepare` or `final`, as recorded on the Job.
pub fn sync_mode(prepare: bool) -> &'static str {
    if prepare { "prepare" } else { "final" }
}

pub fn description(params: &MigrateParams) -> String {
    if params.prepare {
        format!(
            "copy the data of {} into the volumes while it keeps serving (--prepare)",
            params.source_fqdn
        )
    } else {
        format!(
            "stop the services of {} and copy its data, database included, into the volumes",
            params.source_fqdn
        )
    }
}

/// The name of a data-sync Job created by run `run_id`.
pub fn job_name(run_id: &str) -> String {
    format!("{}-{run_id}", names::DATA_SYNC_JOB_PREFIX)
}

/// The name of the copy made while the source serves that a final run `run_id` starts with
/// when no `--prepare` run made one.
pub fn prepare_job_name(run_id: &str) -> String {
    format!("{}-prepare-{run_id}", names::DATA_SYNC_JOB_PREFIX)
}

fn env_from_field(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_owned(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        read_only: read_only.then_some(true),
        ..super::mount(name, path)
    }
}

/// The init container's script (`core/scripts/seed-volumes.sh`): seeds every empty server
/// volume from the image before the rsync.
pub const SEED_SCRIPT: &str = include_str!("../../scripts/seed-volumes.sh");

/// `SEED_VOLUMES` of the seed script: each server volume's name and its path in the image.
pub fn seed_volumes(params: &MigrateParams) -> String {
    let rows: Vec<[&str; 2]> = params
        .spec
        .volumes
        .iter()
        .filter(|v| v.role == VolumeRole::Server)
        .map(|v| [v.name.as_str(), v.mount_path.trim_end_matches('/')])
        .collect();
    crate::scripts::records(rows.iter().map(|r| &r[..]))
}

fn spec(params: &MigrateParams) -> JobSpec {
    let image = Some(params.spec.image.server.clone());
    let pull_policy = Some(params.spec.image.pull_policy.as_str().to_owned());
    let script = data_sync::DataSyncScript {
        source_fqdn: params.source_fqdn.clone(),
        ssh_user: params.ssh_user.clone(),
        prepare: params.prepare,
        compress: params.compress,
        volumes: params
            .spec
            .volumes
            .iter()
            .filter(|v| v.role != VolumeRole::Migration)
            .map(|v| data_sync::SyncVolume {
                name: v.name.clone(),
                path: v.mount_path.trim_end_matches('/').to_owned(),
                database: v.role == VolumeRole::Database,
                bulk: crate::volumes::find(&v.name).is_none_or(|d| d.holds_bulk_data()),
            })
            .collect(),
        data_secret: names::MIGRATION_DATA_SECRET.to_owned(),
        db_host: "db".to_owned(),
        report_db_host: "reportdb".to_owned(),
        paths: data_sync::ScriptPaths::production(),
    };
    let mut env: Vec<EnvVar> = script
        .env()
        .iter()
        .map(|(name, value)| super::job::env(name, value))
        .collect();
    env.push(env_from_field("NAMESPACE", "metadata.namespace"));
    env.push(env_from_field("JOB_NAME", "metadata.labels['job-name']"));

    let mut volumes: Vec<Volume> = params
        .spec
        .volumes
        .iter()
        .map(|v| pvc_volume(&v.name, &v.name))
        .collect();
    volumes.push(Volume {
        name: "ssh-key".to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(names::SSH_KEY_SECRET.to_owned()),
            default_mode: Some(0o400),
            items: Some(vec![
                KeyToPath {
                    key: "key".to_owned(),
                    path: "id".to_owned(),
                    mode: Some(0o400),
                },
                KeyToPath {
                    key: "key.pub".to_owned(),
                    path: "id.pub".to_owned(),
                    mode: None,
                },
            ]),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    });
    volumes.push(config_map_volume("ssh-conf", names::SSH_CONFIG_MAP));
    volumes.push(Volume {
        name: "scratch".to_owned(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: Some("Memory".to_owned()),
            ..EmptyDirVolumeSource::default()
        }),
        ..Volume::default()
    });

    let mut mounts: Vec<VolumeMount> = params
        .spec
        .volumes
        .iter()
        .map(|v| mount(&v.name, &v.mount_path, false))
        .collect();
    mounts.push(mount("ssh-key", scripts::SSH_KEY_DIR, true));
    mounts.push(mount("ssh-conf", scripts::SSH_CONF_DIR, true));
    mounts.push(mount("scratch", scripts::SECRET_SCRATCH_DIR, false));

    let init_mounts = params
        .spec
        .volumes
        .iter()
        .filter(|v| v.role == VolumeRole::Server)
        .map(|v| mount(&v.name, &format!("/mnt/{}", v.name), false))
        .collect();

    JobSpec {
        backoff_limit: Some(0),
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(labels::labels(components::MIGRATION)),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                image_pull_secrets: super::registry::pod_pull_secrets(&params.spec),
                restart_policy: Some("Never".to_owned()),
                service_account_name: Some(names::MIGRATION_SERVICE_ACCOUNT.to_owned()),
                init_containers: Some(vec![Container {
                    name: INIT_CONTAINER.to_owned(),
                    image: image.clone(),
                    image_pull_policy: pull_policy.clone(),
                    command: Some(vec![
                        "bash".to_owned(),
                        "-c".to_owned(),
                        SEED_SCRIPT.to_owned(),
                    ]),
                    env: Some(vec![super::job::env("SEED_VOLUMES", &seed_volumes(params))]),
                    volume_mounts: Some(init_mounts),
                    ..Container::default()
                }]),
                containers: vec![Container {
                    name: CONTAINER.to_owned(),
                    image,
                    image_pull_policy: pull_policy,
                    command: Some(vec!["bash".to_owned(), "-c".to_owned(), data_sync::text()]),
                    env: Some(env),
                    volume_mounts: Some(mounts),
                    ..Container::default()
                }],
                volumes: Some(volumes),
                ..PodSpec::default()
            }),
        },
        ..JobSpec::default()
    }
}

/// Hash of a Job spec: first 16 hex digits of the SHA-256 of its JSON.
pub fn spec_hash(spec: &JobSpec) -> String {
    // Every plan builds every Job of the operation again, and the preview plans once per step:
    // the same few specs (each with its script) were serialized and hashed ~75 times per
    // preview, most of its time. Comparing a spec with the ones hashed last is much cheaper, and
    // the answer is the same: the hash is a function of the spec. The spec is looked up as given,
    // so that a hit costs no copy of it (a tenth of a plan's time, planning benchmark).
    RECENT_SPEC_HASHES.with_borrow_mut(|recent| {
        if let Some((_, hash)) = recent.iter().find(|(seen, _)| seen == spec) {
            return hash.clone();
        }
        // How the image is pulled does not change what a Job does: a new pull Secret must not
        // run the database Jobs again.
        let mut hashed = spec.clone();
        if let Some(pod) = hashed.template.spec.as_mut() {
            pod.image_pull_secrets = None;
        }
        let bytes = serde_json::to_vec(&hashed).unwrap_or_default();
        let digest = Sha256::digest(bytes);
        let hash: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        if recent.len() == RECENT_SPECS {
            recent.pop_front();
        }
        recent.push_back((spec.clone(), hash.clone()));
        hash
    })
}

/// More than the Jobs of one operation, few enough that a miss costs little.
const RECENT_SPECS: usize = 32;

thread_local! {
    static RECENT_SPEC_HASHES: std::cell::RefCell<std::collections::VecDeque<(JobSpec, String)>> =
        const { std::cell::RefCell::new(std::collections::VecDeque::new()) };
}

/// The data-sync Job, named for this run. Kept after it ends (no TTL) so its log stays readable;
/// `backoffLimit: 0` because a retry is a new, visible Job.
pub fn data_sync_job(params: &MigrateParams) -> Job {
    let mut spec = spec(params);
    // Hardened as every Job (`hardening::job_pod`); it calls the API as its own ServiceAccount
    // (it patches its own Job with the extracted data). Its identity is the spec without the
    // hardening, as an earlier version built it: the hardening must not sync the data again.
    let mut identity = spec.clone();
    if let Some(pod) = identity.template.spec.as_mut() {
        super::hardening::strip_job_pod(pod);
    }
    let skips = spec
        .template
        .spec
        .as_mut()
        // rsync and ssh write under the home directory (`hardening::JOB_READ_ONLY_ROOT`).
        .map(|pod| super::hardening::job_pod(pod, true, super::hardening::JobRoot::Writable))
        .unwrap_or_default();
    let mut metadata = meta(
        &job_name(&params.run_id),
        &params.namespace,
        components::MIGRATION,
    );
    if let Some(l) = metadata.labels.as_mut() {
        l.insert(labels::STEP_LABEL.to_owned(), STEP_ID.to_owned());
    }
    metadata.annotations = Some(BTreeMap::from([
        (labels::STEP_ANNOTATION.to_owned(), STEP_ID.to_owned()),
        (
            labels::DESCRIPTION_ANNOTATION.to_owned(),
            description(params),
        ),
        (
            labels::SPEC_HASH_ANNOTATION.to_owned(),
            spec_hash(&identity),
        ),
        (
            labels::SYNC_MODE_ANNOTATION.to_owned(),
            sync_mode(params.prepare).to_owned(),
        ),
        (labels::RUN_ANNOTATION.to_owned(), params.run_id.clone()),
        (
            labels::PRODUCES_ANNOTATION.to_owned(),
            crate::catalogue::products::MIGRATION_DATA.to_owned(),
        ),
        (
            labels::SOURCE_ANNOTATION.to_owned(),
            params.source_fqdn.clone(),
        ),
    ]));
    if let Some(a) = metadata.annotations.as_mut() {
        a.extend(skips);
    }
    Job {
        metadata,
        spec: Some(spec),
        ..Job::default()
    }
}
