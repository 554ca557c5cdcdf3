//! The database: its credentials, the `db` Deployment and its Services, and the Jobs that make
//! the synced data fit for today's DB image (images-today §E.1–E.3, reference §7.2).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ExecAction, KeyToPath, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, Secret, SecretKeySelector, SecretVolumeSource, SecurityContext,
    Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::builders::hardening::JobRoot;
use crate::builders::job::{ClaimMount, Identity, ScriptJob, env, script_job};
use crate::builders::meta;
use crate::catalogue::{components, names};
use crate::labels;
use crate::observed::ExtractedData;
use crate::params::{MigrateParams, ServerParams};
use crate::pg;
use crate::ports;
use crate::scripts::database as scripts;
use crate::settings::ServerSettings;
use crate::volumes::{self, VolumeClaim};

pub use crate::catalogue::steps::{
    DB_FIXUP as FIXUP_STEP, DB_MIGRATION_SQL as MIGRATION_SQL_STEP, DB_PASSWORDS as PASSWORDS_STEP,
    DB_UPGRADE as UPGRADE_STEP,
};

/// Environment variable carrying the data-sync Job a step Job works on: part of the spec, so a
/// new sync gets new fix-up, upgrade and SQL Jobs.
pub const SYNC_JOB_ENV: &str = "UYUNI_DATA_SYNC_JOB";

/// The claim the upgraded data goes to, named as the chart names it (`var-pgsql18`), with the
/// size and class of the synced claim.
pub fn upgraded_claim(params: &ServerParams) -> VolumeClaim {
    let synced = params
        .spec
        .volumes
        .iter()
        .find(|v| v.name == volumes::DATABASE_VOLUME);
    VolumeClaim {
        name: volumes::upgraded_database_volume(),
        mount_path: scripts::PGDATA.to_owned(),
        size: synced
            .map(|v| v.size.clone())
            .unwrap_or_else(|| "50Gi".to_owned()),
        storage_class: volumes::upgraded_database_class(&params.spec.volumes).map(str::to_owned),
        role: volumes::VolumeRole::Database,
    }
}

/// A `kubernetes.io/basic-auth` Secret (the chart's credential Secrets, images-today §C.1).
pub fn credentials_secret(namespace: &str, name: &str, username: &str, password: &str) -> Secret {
    Secret {
        metadata: meta(name, namespace, components::DB),
        type_: Some("kubernetes.io/basic-auth".to_owned()),
        data: Some(BTreeMap::from([
            (
                "username".to_owned(),
                ByteString(username.as_bytes().to_vec()),
            ),
            (
                "password".to_owned(),
                ByteString(password.as_bytes().to_vec()),
            ),
        ])),
        ..Secret::default()
    }
}

/// The three credential Secrets with the migrated values: the admin is the migrated `db_user`,
/// as podman's migration does (images-today §D.1 step 6, reference D15).
pub fn credential_secrets(namespace: &str, data: &ExtractedData) -> [Secret; 3] {
    [
        credentials_secret(
            namespace,
            names::DB_ADMIN_SECRET,
            &data.db_user,
            data.db_password.expose(),
        ),
        credentials_secret(
            namespace,
            names::DB_SECRET,
            &data.db_user,
            data.db_password.expose(),
        ),
        credentials_secret(
            namespace,
            names::REPORTDB_SECRET,
            &data.report_db_user,
            data.report_db_password.expose(),
        ),
    ]
}

/// `name` from key `key` of Secret `secret`.
pub fn secret_env(name: &str, secret: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                ..SecretKeySelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// The environment of the `db` container (images-today §E.3): both spellings of the manager and
/// report variables, until it is known which ones today's init scripts read (§E.5 #3).
fn db_env(timezone: &str) -> Vec<EnvVar> {
    vec![
        env("TZ", timezone),
        secret_env("POSTGRES_USER", names::DB_ADMIN_SECRET, "username"),
        secret_env("POSTGRES_PASSWORD", names::DB_ADMIN_SECRET, "password"),
        secret_env("MANAGER_USER", names::DB_SECRET, "username"),
        secret_env("MANAGER_PASS", names::DB_SECRET, "password"),
        secret_env("MANAGER_PASSWORD", names::DB_SECRET, "password"),
        secret_env("REPORT_DB_USER", names::REPORTDB_SECRET, "username"),
        secret_env("REPORT_DB_PASS", names::REPORTDB_SECRET, "password"),
        secret_env("REPORTDB_USER", names::REPORTDB_SECRET, "username"),
        secret_env("REPORTDB_PASSWORD", names::REPORTDB_SECRET, "password"),
    ]
}

/// The DB image's own health check (`containers/server-postgresql-image/root/usr/bin/
/// healthcheck.sh`): it fails while `/run/postgresql/upgrade_in_progress` marks the image's
/// start-up and upgrade hooks, when the data volume is fuller than `DISKTHRESHOLD` (95%), and
/// when `pg_isready` fails. Older images do not ship it.
pub const DB_HEALTHCHECK: &str = "/usr/bin/healthcheck.sh";

/// `pg_isready` against TCP on localhost: false while older images' upgrade hooks run with the
/// server on the Unix socket only (images-today §B.3), true once clients can connect.
pub const PG_ISREADY: &str = "pg_isready -h localhost -p 5432";

/// The readiness and startup check: the image's health check where the image has one, so
/// `db` is not ready (and the migration-SQL Job does not start) while its hooks still run;
/// `pg_isready` on images without it.
pub fn db_health_script() -> String {
    format!("if [ -x {DB_HEALTHCHECK} ]; then exec {DB_HEALTHCHECK}; else exec {PG_ISREADY}; fi")
}

fn probe(command: Vec<String>, period: i32, failures: i32) -> Probe {
    Probe {
        exec: Some(ExecAction {
            command: Some(command),
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(5),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}

fn db_health(period: i32, failures: i32) -> Probe {
    probe(
        vec!["bash".to_owned(), "-c".to_owned(), db_health_script()],
        period,
        failures,
    )
}

/// Liveness stays `pg_isready`: the image's check also fails on a full disk, and a restart
/// loop frees no space; PostgreSQL answering is what liveness means.
fn pg_isready(period: i32, failures: i32) -> Probe {
    probe(
        PG_ISREADY.split(' ').map(str::to_owned).collect(),
        period,
        failures,
    )
}

/// The `cert-reload` container's loop (see the script's own comment).
pub const CERT_RELOAD_SCRIPT: &str = include_str!("../../scripts/db-cert-reload.sh");
pub const CERT_RELOAD_CONTAINER: &str = "cert-reload";

/// A small container beside PostgreSQL that reloads it when the kubelet updates the files of
/// Secret `db-cert` (cert-manager renews it, by default every 60 of its 90 days): PostgreSQL
/// reads its certificate only at start and on SIGHUP. It runs the DB image (its `pg_ctl`) as
/// postgres with the data directory read-only, for `postmaster.pid`; the pod shares one process
/// namespace so that the PID there is the server's. Nothing here needs a password.
fn cert_reload(params: &ServerParams, cert_mount: &VolumeMount) -> Container {
    let watched = [
        scripts::DB_TLS_CERT_FILE,
        scripts::DB_TLS_KEY_FILE,
        scripts::DB_TLS_CA_FILE,
    ]
    .join(" ");
    let id = i64::from(scripts::POSTGRES_UID);
    Container {
        name: CERT_RELOAD_CONTAINER.to_owned(),
        image: Some(params.spec.image.database.clone()),
        image_pull_policy: Some(params.spec.image.pull_policy.as_str().to_owned()),
        command: Some(vec![
            "bash".to_owned(),
            "-c".to_owned(),
            CERT_RELOAD_SCRIPT.to_owned(),
        ]),
        env: Some(vec![
            env("UYUNI_CERT_FILES", &watched),
            env("PGDATA", scripts::PGDATA),
            env("UYUNI_CERT_POLL_SECONDS", "60"),
        ]),
        security_context: Some(SecurityContext {
            run_as_user: Some(id),
            run_as_group: Some(id),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(vec![
            VolumeMount {
                read_only: Some(true),
                ..super::mount(volumes::DATABASE_VOLUME, scripts::PGDATA)
            },
            cert_mount.clone(),
        ]),
        ..Container::default()
    }
}

/// Seconds the DB may take to accept connections on its first start: the image's
/// compatibility bootstrap (collation refresh, `evr_t`) runs on the migrated data first.
pub const DB_STARTUP_SECONDS: i32 = 3600;

pub fn selector(component: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (labels::PART_OF.to_owned(), labels::PART_OF_VALUE.to_owned()),
        (labels::COMPONENT.to_owned(), component.to_owned()),
    ])
}

/// The name of the `db` pod's volume of Secret `db-cert`.
pub const DB_CERT_VOLUME: &str = "db-cert";

/// Mode of the key file in the `db` pod. Secret volume files belong to root, group fsGroup (999,
/// postgres), and the image runs PostgreSQL as postgres: 0440 lets it read the key through its
/// group, and nobody else; PostgreSQL accepts a root-owned key up to 0640. 0400 by itself would
/// leave the key to root. The chart asks 0400 (podman's secret belonged to uid 999), which ends
/// as 0440 too only because the kubelet adds group read to Secret files when a pod has an
/// fsGroup; written out, the spec says what PostgreSQL needs instead of relying on that.
pub const DB_KEY_MODE: i32 = 0o440;

/// `path` relative to the `db-cert` mount point, for a Secret volume item.
fn pki_item(key: &str, path: &str, mode: Option<i32>) -> KeyToPath {
    KeyToPath {
        key: key.to_owned(),
        path: path
            .strip_prefix(scripts::DB_PKI_DIR)
            .unwrap_or(path)
            .trim_start_matches('/')
            .to_owned(),
        mode,
    }
}

/// Secret `db-cert` as the chart mounts it at `/etc/pki` (images-today §C.2): the certificate
/// and key where the fixed-up `postgresql.conf` points, the CA in the trust anchors. The mount
/// hides the image's own `/etc/pki`; PostgreSQL makes no outgoing TLS connection that would need
/// its trust store, and the same layout keeps the pod interchangeable with the chart's.
fn db_cert_volume() -> (Volume, VolumeMount) {
    let volume = Volume {
        name: DB_CERT_VOLUME.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(names::DB_CERT_SECRET.to_owned()),
            items: Some(vec![
                pki_item("tls.crt", scripts::DB_TLS_CERT_FILE, None),
                pki_item("tls.key", scripts::DB_TLS_KEY_FILE, Some(DB_KEY_MODE)),
                pki_item("ca.crt", scripts::DB_TLS_CA_FILE, None),
            ]),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    };
    let mount = VolumeMount {
        name: DB_CERT_VOLUME.to_owned(),
        mount_path: scripts::DB_PKI_DIR.to_owned(),
        read_only: Some(true),
        ..VolumeMount::default()
    };
    (volume, mount)
}

/// PostgreSQL refuses a data directory others than its owner may write, and the kubelet makes
/// a volume's root group-writable (2770) for the pod's fsGroup on volume types that support
/// ownership management. The DB image's own entrypoint does not restore 0700 on existing data,
/// so this container does, as the data's owner, before PostgreSQL starts.
fn data_permissions(params: &ServerParams) -> Container {
    Container {
        name: "data-permissions".to_owned(),
        image: Some(params.spec.image.database.clone()),
        image_pull_policy: Some(params.spec.image.pull_policy.as_str().to_owned()),
        command: Some(vec![
            "chmod".to_owned(),
            "0700".to_owned(),
            scripts::PGDATA.to_owned(),
        ]),
        security_context: Some(SecurityContext {
            run_as_user: Some(i64::from(scripts::POSTGRES_UID)),
            run_as_group: Some(i64::from(scripts::POSTGRES_UID)),
            ..SecurityContext::default()
        }),
        volume_mounts: Some(vec![super::mount(
            volumes::DATABASE_VOLUME,
            scripts::PGDATA,
        )]),
        ..Container::default()
    }
}

/// The `db` Deployment (chart `db.yaml`, reference §7.2 with its R fixes: created on migration,
/// probes, container port, the migrated credentials).
pub fn db_deployment(params: &ServerParams, settings: &ServerSettings, claim: &str) -> Deployment {
    let ports = ports::container_ports(components::DB, ports::Features::default());
    let (cert_volume, cert_mount) = db_cert_volume();
    let reload = cert_reload(params, &cert_mount);
    let container = Container {
        name: "db".to_owned(),
        image: Some(params.spec.image.database.clone()),
        image_pull_policy: Some(params.spec.image.pull_policy.as_str().to_owned()),
        env: Some(db_env(&settings.timezone)),
        ports: Some(ports),
        startup_probe: Some(db_health(10, DB_STARTUP_SECONDS / 10)),
        readiness_probe: Some(db_health(10, 3)),
        liveness_probe: Some(pg_isready(30, 5)),
        volume_mounts: Some(vec![
            super::mount(volumes::DATABASE_VOLUME, scripts::PGDATA),
            cert_mount,
        ]),
        resources: super::hardening::given(
            &params.spec.resources.db_requests,
            &params.spec.resources.db_limits,
        ),
        ..Container::default()
    };
    Deployment {
        metadata: ObjectMeta {
            annotations: Some(super::origin_annotation(settings)),
            ..meta(names::DB_DEPLOYMENT, &params.namespace, components::DB)
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            // Two PostgreSQL servers must never share the data.
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".to_owned()),
                ..DeploymentStrategy::default()
            }),
            selector: LabelSelector {
                match_labels: Some(selector(components::DB)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels::labels(components::DB)),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    image_pull_secrets: super::registry::pod_pull_secrets(&params.spec),
                    security_context: Some(PodSecurityContext {
                        fs_group: Some(i64::from(scripts::POSTGRES_UID)),
                        ..PodSecurityContext::default()
                    }),
                    // A clean shutdown spares the next start a crash recovery.
                    termination_grace_period_seconds: Some(120),
                    init_containers: Some(vec![data_permissions(params)]),
                    // For the cert-reload container's `pg_ctl reload`.
                    share_process_namespace: Some(true),
                    containers: vec![container, reload],
                    volumes: Some(vec![
                        super::pvc_volume(volumes::DATABASE_VOLUME, claim),
                        cert_volume,
                    ]),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// A Service of the port catalogue: its ports, selecting the pods of their component.
pub fn service(namespace: &str, name: &str, features: ports::Features) -> Service {
    let ports = ports::of_service(name, features);
    let component = ports
        .first()
        .map(|p| p.component)
        .unwrap_or(components::SERVER);
    Service {
        metadata: meta(name, namespace, component),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            selector: Some(selector(component)),
            ports: Some(
                ports
                    .iter()
                    .map(|p| ServicePort {
                        name: Some(p.name.to_owned()),
                        port: p.port,
                        target_port: Some(IntOrString::Int(p.port)),
                        protocol: Some(p.protocol.as_str().to_owned()),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

pub fn fixup_description() -> String {
    "fix up the synced data: database layout and owner, postgresql.conf, rhn.conf, setup marker"
        .to_owned()
}

/// The fix-up Job of the synced data (images-today §E.1 #3), in the server image.
pub fn fixup_job(params: &MigrateParams, data: &ExtractedData, upgrade: pg::Upgrade) -> Job {
    let expected = match upgrade {
        pg::Upgrade::NotNeeded => Some(pg::TARGET_MAJOR),
        pg::Upgrade::Needed { from } => Some(from),
        pg::Upgrade::Unknown => None,
    };
    script_job(
        params,
        &ScriptJob {
            step: FIXUP_STEP,
            description: fixup_description(),
            component: components::DB,
            image: &params.spec.image.server,
            script: scripts::render_fixup(expected, ""),
            claims: vec![
                ClaimMount {
                    claim: volumes::DATABASE_VOLUME,
                    path: scripts::PGDATA,
                },
                ClaimMount {
                    claim: "etc-rhn",
                    path: "/etc/rhn",
                },
                ClaimMount {
                    claim: "var-spacewalk",
                    path: "/var/spacewalk",
                },
                ClaimMount {
                    claim: "root",
                    path: "/root",
                },
            ],
            tmpfs_tmp: false,
            env: vec![env(SYNC_JOB_ENV, &data.job)],
            extra_volumes: Vec::new(),
            service_account: None,
            security_context: None,
            produces: None,
            identity: Identity::Data,
            root: JobRoot::Writable,
        },
    )
}

pub fn upgrade_description(from: Option<u32>) -> String {
    match from {
        Some(from) => format!(
            "upgrade the database from PostgreSQL {from} to {} into {}; {} stays as the backup",
            pg::TARGET_MAJOR,
            volumes::upgraded_database_volume(),
            volumes::DATABASE_VOLUME
        ),
        None => format!(
            "upgrade the database to PostgreSQL {} into {} when the synced data is older (its version is known after data-sync)",
            pg::TARGET_MAJOR,
            volumes::upgraded_database_volume()
        ),
    }
}

/// The major upgrade Job (images-today §E.1 #4): the synced claim as the source, the new claim
/// as the target. With the version unknown (dry run before the sync), the most recent supported
/// source stands in.
pub fn upgrade_job(params: &MigrateParams, data: &ExtractedData, from: Option<u32>) -> Job {
    let shown_from = from.unwrap_or_else(|| {
        pg::SUPPORTED_SOURCE_MAJORS
            .last()
            .copied()
            .unwrap_or(pg::TARGET_MAJOR)
    });
    let target = volumes::upgraded_database_volume();
    script_job(
        params,
        &ScriptJob {
            step: UPGRADE_STEP,
            description: upgrade_description(from),
            component: components::DB,
            image: &params.spec.image.database_upgrade,
            script: scripts::render_upgrade(shown_from, ""),
            claims: vec![
                ClaimMount {
                    claim: volumes::DATABASE_VOLUME,
                    path: scripts::UPGRADE_SOURCE,
                },
                ClaimMount {
                    claim: &target,
                    path: scripts::UPGRADE_TARGET,
                },
                ClaimMount {
                    claim: "etc-sysconfig",
                    path: "/etc/sysconfig",
                },
            ],
            tmpfs_tmp: true,
            env: vec![env(SYNC_JOB_ENV, &data.job)],
            extra_volumes: Vec::new(),
            service_account: None,
            security_context: None,
            produces: None,
            identity: Identity::Data,
            root: JobRoot::Writable,
        },
    )
}

/// PostgreSQL's user and group in the DB image (images-today §B.1), for pods that run its tools
/// directly instead of through the image's entrypoint.
fn postgres_security_context() -> PodSecurityContext {
    let id = i64::from(scripts::POSTGRES_UID);
    PodSecurityContext {
        run_as_user: Some(id),
        run_as_group: Some(id),
        fs_group: Some(id),
        ..PodSecurityContext::default()
    }
}

pub fn passwords_description(claim: &str) -> String {
    format!(
        "re-hash md5 passwords of the migrated database roles to scram-sha-256 on volume {claim}, which today's pg_hba requires"
    )
}

/// The Job that re-hashes md5 passwords (see [`scripts::render_passwords`]), in the DB image
/// on the claim the `db` Deployment runs on, as postgres. The passwords come from the
/// credential Secrets, the ones the `db` Deployment and the server use.
pub fn passwords_job(params: &MigrateParams, data: &ExtractedData, upgrade: pg::Upgrade) -> Job {
    let claim = crate::resolve::data_claim(upgrade);
    let mut env_vars = vec![env(SYNC_JOB_ENV, &data.job)];
    for (user_var, password_var, secret) in scripts::REHASHED_ROLES {
        env_vars.push(secret_env(user_var, secret, "username"));
        env_vars.push(secret_env(password_var, secret, "password"));
    }
    script_job(
        params,
        &ScriptJob {
            step: PASSWORDS_STEP,
            description: passwords_description(&claim),
            component: components::DB,
            image: &params.spec.image.database,
            script: scripts::render_passwords(""),
            claims: vec![ClaimMount {
                claim: &claim,
                path: scripts::PGDATA,
            }],
            // The temporary server's socket, hba file and log: private to the pod.
            tmpfs_tmp: true,
            env: env_vars,
            extra_volumes: Vec::new(),
            service_account: None,
            security_context: Some(postgres_security_context()),
            produces: None,
            identity: Identity::Data,
            root: JobRoot::Writable,
        },
    )
}

pub fn migration_sql_description() -> String {
    "repoint auto-installable distributions and queue a system overview update in the database"
        .to_owned()
}

/// The migration-only SQL Job (images-today §E.1 #6), in the server image, once `db` is up.
pub fn migration_sql_job(params: &MigrateParams, data: &ExtractedData) -> Job {
    script_job(
        params,
        &ScriptJob {
            step: MIGRATION_SQL_STEP,
            description: migration_sql_description(),
            component: components::DB,
            image: &params.spec.image.server,
            script: scripts::render_migration_sql(""),
            claims: vec![ClaimMount {
                claim: "etc-rhn",
                path: "/etc/rhn",
            }],
            tmpfs_tmp: false,
            env: vec![env(SYNC_JOB_ENV, &data.job)],
            extra_volumes: Vec::new(),
            service_account: None,
            security_context: None,
            produces: None,
            identity: Identity::Data,
            root: JobRoot::Writable,
        },
    )
}

/// The run that began the upgrade a copy Job belongs to: part of its identity.
pub const UPGRADE_RUN_ENV: &str = "UYUNI_UPGRADE_RUN";

/// The copy Job of an upgrade's backup or a rollback's restore (see [`scripts::render_copy`]):
/// in the database image the server ran before the upgrade, as postgres, with the stopped
/// database's volume and the backup volume. Its identity is what it copies (its script,
/// environment and volumes): `of` names the images before the upgrade, so another upgrade
/// takes a new backup, and a re-run of the same one does not copy again.
pub fn copy_job(
    params: &ServerParams,
    mode: scripts::Copy,
    image: &str,
    db_claim: &str,
    backup_claim: &str,
    of: &str,
    upgrade_run: &str,
) -> Job {
    let (step, source, target, description) = match mode {
        scripts::Copy::Backup => (
            crate::catalogue::steps::DB_BACKUP,
            db_claim,
            backup_claim,
            format!(
                "copy the stopped database on volume {db_claim} into volume {backup_claim}, the way back if the upgrade fails"
            ),
        ),
        scripts::Copy::Restore => (
            crate::catalogue::steps::DB_RESTORE,
            backup_claim,
            db_claim,
            format!("copy the backup on volume {backup_claim} back into volume {db_claim}"),
        ),
    };
    script_job(
        params,
        &ScriptJob {
            step,
            description,
            component: components::UPGRADE,
            image,
            script: scripts::render_copy(mode, of, ""),
            claims: vec![
                ClaimMount {
                    claim: source,
                    path: scripts::UPGRADE_SOURCE,
                },
                ClaimMount {
                    claim: target,
                    path: scripts::UPGRADE_TARGET,
                },
            ],
            tmpfs_tmp: false,
            env: vec![env(UPGRADE_RUN_ENV, upgrade_run)],
            extra_volumes: Vec::new(),
            service_account: None,
            security_context: Some(postgres_security_context()),
            produces: None,
            identity: Identity::Data,
            root: JobRoot::ReadOnly,
        },
    )
}

/// The PostgreSQL major upgrade of an upgrade: the stopped database's volume as the source
/// (its data files are not written, but pg_upgrade starts the old server on it, which rewrites
/// its control file, WAL and statistics: it stays a cleanly shut down cluster of the old major
/// and the way back, docs/upgrade.md), a new volume named for the new major as the target,
/// in the `server-database-migration` image (images-today §D.3 step 4, on two claims as §E.1
/// #4 has it).
pub fn major_upgrade_job(
    params: &ServerParams,
    source_claim: &str,
    target_claim: &str,
    from: u32,
    to: u32,
) -> Job {
    let mut claims = vec![
        ClaimMount {
            claim: source_claim,
            path: scripts::UPGRADE_SOURCE,
        },
        ClaimMount {
            claim: target_claim,
            path: scripts::UPGRADE_TARGET,
        },
    ];
    if params
        .spec
        .volumes
        .iter()
        .any(|v| v.name == "etc-sysconfig")
    {
        claims.push(ClaimMount {
            claim: "etc-sysconfig",
            path: "/etc/sysconfig",
        });
    }
    script_job(
        params,
        &ScriptJob {
            step: UPGRADE_STEP,
            description: format!(
                "upgrade the database from PostgreSQL {from} to {to} into {target_claim}; {source_claim} stays as the way back"
            ),
            component: components::DB,
            image: &params.spec.image.database_upgrade,
            script: scripts::render_upgrade_between(from, to, ""),
            claims,
            tmpfs_tmp: true,
            env: Vec::new(),
            extra_volumes: Vec::new(),
            service_account: None,
            security_context: None,
            produces: None,
            identity: Identity::Data,
            root: JobRoot::Writable,
        },
    )
}
