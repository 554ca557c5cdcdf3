//! The server Deployment `uyuni` (reference §7.1 with D09, D10, D35, D36 fixed; images-today
//! §A.4, §A.6, §A.7, §E.3), the hub XML-RPC API and the coco attestation Deployments, and the
//! server-side Services of the port catalogue.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, ExecAction,
    HTTPGetAction, Lifecycle, LifecycleHandler, PodSpec, Probe, SELinuxOptions, SecretVolumeSource,
    SecurityContext, TCPSocketAction, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::builders::database::secret_env;
use crate::builders::job::env;
use crate::builders::{components, config_map_volume, deployment, mount, names, pvc_volume};
use crate::observed::ExtractedData;
use crate::params::MigrateParams;
use crate::ports::{self, Features};
use crate::volumes::VolumeRole;

pub const SERVER_DEPLOYMENT: &str = "uyuni";
pub const HUB_DEPLOYMENT: &str = "uyuni-hub-xmlrpc-api";
pub const COCO_DEPLOYMENT: &str = "uyuni-coco-attestation";

/// The server's pod security, in one place (images-today §E.5 #5, uncertain): the image runs
/// systemd, and its `99-cgroupfs-mount.sh` mounts cgroup2 over the emptyDir at `/sys/fs/cgroup`,
/// which needs mount privileges. The safe side for a server that must start is a privileged
/// container, as the old reference effectively required; tighten it here once the image's
/// needs are verified.
pub const SERVER_PRIVILEGED: bool = true;

/// The first start after a migration reindexes and updates the schema before the server is up
/// (images-today §A.4): the startup probe allows a day, practically unlimited.
pub const STARTUP_SECONDS: i32 = 24 * 3600;

/// Where the server finds the CA (images-today §A.7).
const CA_PATHS: &[&str] = &[
    "/etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT",
    "/usr/share/susemanager/salt/certs/RHN-ORG-TRUSTED-SSL-CERT",
    "/srv/www/htdocs/pub/RHN-ORG-TRUSTED-SSL-CERT",
];
const DB_CA_PATH: &str = "/etc/pki/trust/anchors/DB-RHN-ORG-TRUSTED-SSL-CERT";

fn sub_path(name: &str, path: &str, key: &str) -> VolumeMount {
    VolumeMount {
        name: name.to_owned(),
        mount_path: path.to_owned(),
        sub_path: Some(key.to_owned()),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

fn exec(command: &[&str]) -> Option<ExecAction> {
    Some(ExecAction {
        command: Some(command.iter().map(|c| (*c).to_owned()).collect()),
    })
}

fn empty_dir(name: &str, memory: Option<&str>) -> Volume {
    Volume {
        name: name.to_owned(),
        empty_dir: Some(EmptyDirVolumeSource {
            medium: memory.map(|_| "Memory".to_owned()),
            size_limit: memory.map(|m| Quantity(m.to_owned())),
        }),
        ..Volume::default()
    }
}

/// The conditional ports and Services of this migration.
pub fn features(params: &MigrateParams, data: &ExtractedData) -> Features {
    Features {
        debug: data.debug,
        hub: hub_replicas(params, data) > 0,
    }
}

/// Hub replicas: the flag, else one when the source ran the hub XML-RPC API (D18 fixed).
pub fn hub_replicas(params: &MigrateParams, data: &ExtractedData) -> i32 {
    params
        .hubxmlrpc_replicas
        .unwrap_or(i32::from(data.has_hubxmlrpc))
}

/// The environment the image reads (images-today §E.3); setup is skipped on migrated data, so
/// the admin and SCC variables are not needed. `container` is never set.
fn server_env(data: &ExtractedData, fqdn: &str) -> Vec<EnvVar> {
    vec![
        env("TZ", &data.timezone),
        env("UYUNI_HOSTNAME", fqdn),
        env("UYUNI_FQDN", fqdn),
        secret_env("MANAGER_USER", names::DB_SECRET, "username"),
        secret_env("MANAGER_PASS", names::DB_SECRET, "password"),
        secret_env("REPORT_DB_USER", names::REPORTDB_SECRET, "username"),
        secret_env("REPORT_DB_PASS", names::REPORTDB_SECRET, "password"),
        env("MANAGER_DB_HOST", names::DB_SERVICE),
        env("MANAGER_DB_PORT", &ports::PGSQL_PORT.to_string()),
        env("MANAGER_DB_NAME", &data.db_name),
        env("REPORT_DB_HOST", names::REPORTDB_SERVICE),
        env("REPORT_DB_PORT", &ports::PGSQL_PORT.to_string()),
        env("REPORT_DB_NAME", "reportdb"),
        env("DEBUG_JAVA", if data.debug { "true" } else { "false" }),
        // TFTP is the `tftp` Deployment's (builders::tftp); the server must not serve it too.
        // `n` is the image's default, said here so that no setup run turns it on.
        env("MANAGER_ENABLE_TFTP", "n"),
        // The database may still be finishing its own start: wait for it, not 5 seconds.
        env("UYUNI_INIT_DB_CONN_RETRIES", "60"),
        env("UYUNI_INIT_DB_CONN_INTERVAL", "5"),
    ]
}

/// Where the server finds a local mirror (images-today §A.6, `MIRROR_PATH`).
pub const MIRROR_PATH: &str = "/mirror";

/// The server Deployment.
pub fn server_deployment(params: &MigrateParams, data: &ExtractedData, fqdn: &str) -> Deployment {
    let features = features(params, data);
    let server_volumes: Vec<_> = params
        .volumes
        .iter()
        .filter(|v| v.role == VolumeRole::Server)
        .collect();
    let mut volumes: Vec<Volume> = server_volumes
        .iter()
        .map(|v| pvc_volume(&v.name, &v.name))
        .collect();
    let mut mounts: Vec<VolumeMount> = server_volumes
        .iter()
        .map(|v| mount(&v.name, v.mount_path.trim_end_matches('/')))
        .collect();
    // Distinct names for the CA ConfigMap volumes (D09).
    volumes.push(config_map_volume("uyuni-ca", names::CA_CONFIG_MAP));
    volumes.push(config_map_volume("db-ca", names::DB_CA_CONFIG_MAP));
    // The server certificate as single files: a Secret volume at /etc/pki would hide the
    // image's trust store (D36).
    volumes.push(Volume {
        name: "tls".to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(names::SERVER_CERT_SECRET.to_owned()),
            default_mode: Some(0o400),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    });
    volumes.push(empty_dir("run", Some("256Mi")));
    volumes.push(empty_dir("cgroup", None));
    for path in CA_PATHS {
        mounts.push(sub_path("uyuni-ca", path, "ca.crt"));
    }
    mounts.push(sub_path("db-ca", DB_CA_PATH, "ca.crt"));
    mounts.push(sub_path(
        "tls",
        "/etc/pki/tls/certs/spacewalk.crt",
        "tls.crt",
    ));
    mounts.push(sub_path(
        "tls",
        "/etc/pki/tls/private/spacewalk.key",
        "tls.key",
    ));
    mounts.push(mount("run", "/run"));
    mounts.push(mount("cgroup", "/sys/fs/cgroup"));
    let mut environment = server_env(data, fqdn);
    // The data sync points `server.susemanager.fromdir` at the mirror's mount path.
    if let Some(claim) = &params.mirror_claim {
        volumes.push(pvc_volume("mirror", claim));
        mounts.push(mount("mirror", MIRROR_PATH));
        environment.push(env("MIRROR_PATH", MIRROR_PATH));
    }

    let container_ports = ports::of_component(components::SERVER, features)
        .into_iter()
        .map(|p| ContainerPort {
            name: Some(p.name.to_owned()),
            container_port: p.port,
            protocol: Some(p.protocol.as_str().to_owned()),
            ..ContainerPort::default()
        })
        .collect();
    let container = Container {
        name: "uyuni".to_owned(),
        image: Some(params.image.server.clone()),
        image_pull_policy: Some(params.image.pull_policy.as_str().to_owned()),
        env: Some(environment),
        ports: Some(container_ports),
        volume_mounts: Some(mounts),
        startup_probe: Some(Probe {
            exec: exec(&["/usr/bin/startup-check.sh"]),
            period_seconds: Some(10),
            timeout_seconds: Some(30),
            failure_threshold: Some(STARTUP_SECONDS / 10),
            ..Probe::default()
        }),
        liveness_probe: Some(Probe {
            exec: exec(&["/usr/bin/liveness-check.sh"]),
            period_seconds: Some(60),
            timeout_seconds: Some(60),
            failure_threshold: Some(5),
            ..Probe::default()
        }),
        readiness_probe: Some(Probe {
            http_get: Some(HTTPGetAction {
                path: Some("/rhn/manager/api/api/getVersion".to_owned()),
                port: IntOrString::Int(ports::HTTP_PORT),
                ..HTTPGetAction::default()
            }),
            period_seconds: Some(30),
            timeout_seconds: Some(20),
            failure_threshold: Some(10),
            ..Probe::default()
        }),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                exec: exec(&["spacewalk-service", "stop"]),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        }),
        security_context: Some(SecurityContext {
            privileged: Some(SERVER_PRIVILEGED),
            capabilities: Some(Capabilities {
                add: Some(vec!["NET_RAW".to_owned()]),
                ..Capabilities::default()
            }),
            se_linux_options: Some(SELinuxOptions {
                level: Some("s0".to_owned()),
                ..SELinuxOptions::default()
            }),
            ..SecurityContext::default()
        }),
        ..Container::default()
    };
    deployment(
        params,
        SERVER_DEPLOYMENT,
        components::SERVER,
        1,
        PodSpec {
            // `spacewalk-service stop` takes its time.
            termination_grace_period_seconds: Some(300),
            containers: vec![container],
            volumes: Some(volumes),
            ..PodSpec::default()
        },
    )
}

fn tcp_probe(port: i32, period: i32, failures: i32) -> Probe {
    Probe {
        tcp_socket: Some(TCPSocketAction {
            port: IntOrString::Int(port),
            ..TCPSocketAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}

/// The hub XML-RPC API (reference §7.3, with the replicas asked for, D48).
pub fn hub_deployment(params: &MigrateParams, replicas: i32) -> Deployment {
    let container = Container {
        name: "hub-xmlrpc-api".to_owned(),
        image: Some(params.image.hub_xmlrpc.clone()),
        image_pull_policy: Some(params.image.pull_policy.as_str().to_owned()),
        env: Some(vec![
            env("HUB_API_URL", "http://web/rpc/api"),
            env("HUB_CONNECT_TIMEOUT", "10"),
            env("HUB_REQUEST_TIMEOUT", "10"),
            env("HUB_CONNECT_USING_SSL", "false"),
        ]),
        ports: Some(
            ports::of_component(
                components::HUB_XMLRPC,
                Features {
                    debug: false,
                    hub: true,
                },
            )
            .into_iter()
            .map(|p| ContainerPort {
                name: Some(p.name.to_owned()),
                container_port: p.port,
                protocol: Some(p.protocol.as_str().to_owned()),
                ..ContainerPort::default()
            })
            .collect(),
        ),
        readiness_probe: Some(tcp_probe(ports::HUB_XMLRPC_PORT, 10, 3)),
        liveness_probe: Some(tcp_probe(ports::HUB_XMLRPC_PORT, 30, 5)),
        ..Container::default()
    };
    deployment(
        params,
        HUB_DEPLOYMENT,
        components::HUB_XMLRPC,
        replicas,
        PodSpec {
            containers: vec![container],
            ..PodSpec::default()
        },
    )
}

/// The confidential computing attestation (reference §7.4).
pub fn coco_deployment(params: &MigrateParams, data: &ExtractedData) -> Deployment {
    let container = Container {
        name: "coco".to_owned(),
        image: Some(params.image.coco.clone()),
        image_pull_policy: Some(params.image.pull_policy.as_str().to_owned()),
        env: Some(vec![
            env(
                "database_connection",
                &format!(
                    "jdbc:postgresql://{}:{}/{}",
                    names::DB_SERVICE,
                    ports::PGSQL_PORT,
                    data.db_name
                ),
            ),
            secret_env("database_user", names::DB_SECRET, "username"),
            secret_env("database_password", names::DB_SECRET, "password"),
        ]),
        ..Container::default()
    };
    deployment(
        params,
        COCO_DEPLOYMENT,
        components::COCO,
        params.coco_replicas,
        PodSpec {
            containers: vec![container],
            ..PodSpec::default()
        },
    )
}
