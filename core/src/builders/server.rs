//! The server Deployment `uyuni` (reference §7.1 with D09, D10, D35, D36 fixed; images-today
//! §A.4, §A.6, §A.7, §E.3), the hub XML-RPC API and the coco attestation Deployments, and the
//! server-side Services of the port catalogue.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    AppArmorProfile, Capabilities, ConfigMapProjection, ConfigMapVolumeSource, Container,
    EmptyDirVolumeSource, EnvVar, ExecAction, HTTPGetAction, KeyToPath, Lifecycle,
    LifecycleHandler, PodSpec, Probe, ProjectedVolumeSource, SELinuxOptions, SecretVolumeSource,
    SecurityContext, TCPSocketAction, Volume, VolumeMount, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::builders::database::secret_env;
use crate::builders::job::env;
use crate::builders::{deployment, mount, pvc_volume};
use crate::catalogue::{components, names};
use crate::params::{ServerParams, ServerSecurity, ServerSpec};
use crate::ports::{self, Features};
use crate::resolve::Facts;
use crate::scripts::image_check::SALT_CA_FILE;
use crate::settings::ServerSettings;
use crate::volumes::VolumeRole;

pub use crate::catalogue::names::COCO_DEPLOYMENT;
/// The chart's names (`containers/server-helm/templates/hub.yaml`, `coco.yaml`).
pub use crate::catalogue::names::HUB_DEPLOYMENT;
pub use crate::catalogue::names::SERVER_DEPLOYMENT;

/// The server container's security context, as the official chart writes it
/// (`containers/server-helm/templates/server.yaml`, `tests/security_test.yaml`): capability
/// `SYS_ADMIN`, which the image's `99-cgroupfs-mount.sh` needs to mount cgroup2 over the
/// emptyDir at `/sys/fs/cgroup` for systemd, and SELinux level `s0`; `superPrivileged` adds
/// type `spc_t` and AppArmor `Unconfined`, else the chosen SELinux type and `Localhost`
/// AppArmor profile. Privileged only when asked for ([`ServerSecurity`] says why).
pub fn server_security_context(security: &ServerSecurity) -> SecurityContext {
    let selinux_type = if security.super_privileged {
        Some("spc_t".to_owned())
    } else {
        security.selinux_type.clone()
    };
    let apparmor = if security.super_privileged {
        Some(AppArmorProfile {
            type_: "Unconfined".to_owned(),
            ..AppArmorProfile::default()
        })
    } else {
        security
            .apparmor_profile
            .as_ref()
            .map(|profile| AppArmorProfile {
                type_: "Localhost".to_owned(),
                localhost_profile: Some(profile.clone()),
            })
    };
    SecurityContext {
        privileged: security.privileged.then_some(true),
        capabilities: Some(Capabilities {
            add: Some(vec!["SYS_ADMIN".to_owned()]),
            ..Capabilities::default()
        }),
        se_linux_options: Some(SELinuxOptions {
            level: Some("s0".to_owned()),
            type_: selinux_type,
            ..SELinuxOptions::default()
        }),
        app_armor_profile: apparmor,
        ..SecurityContext::default()
    }
}

/// The first start after a migration reindexes and updates the schema before the server is up
/// (images-today §A.4): the startup probe allows a day, practically unlimited.
pub const STARTUP_SECONDS: i32 = 24 * 3600;

/// The CA outside the trust anchors, in the Salt file root, by the kind of server image the
/// image check or inspection reports (`ca_copy`, `core/scripts/image-check-server.sh`;
/// decided once in `crate::resolve::salt_ca_mount`, [`Facts::salt_ca_mount`]). Upstream
/// (uyuni-project/uyuni, `containers/server-image/root/docker-entrypoint-init.d/
/// 15-setup-trust-store.sh`): once the server is set up, the script copies the anchors'
/// `LOCAL-RHN-ORG-TRUSTED-SSL-CERT` to `/usr/share/susemanager/salt/certs/RHN-ORG-TRUSTED-SSL-CERT`
/// at every start — `@4d6fcfde95d9` also to `/srv/www/htdocs/pub/`, without `set -e`; the
/// newest, `@2ca715b57878` (PR #12133 "Replace ca-certs PVC with a projected volume of CAs",
/// open), only to the Salt file root, under `set -eo pipefail`, saying the file "must stay a
/// real file (not a symlink): saltfs cannot serve symlinks (bsc#1219577), and the certs/
/// directory also holds .sls states, so it cannot be volume-mounted". The chart mounts
/// ConfigMap `uyuni-ca`'s `ca.crt` read-only with subPath over that file
/// (`containers/server-helm/templates/server.yaml` `@0ad23f802ecf`, volume `ca-cert`):
/// - an image that copies it (`ca_copy=salt-file-root`) gets nothing there — no file, no
///   directory: its `cp` onto a read-only file fails, and with `set -e` the start stops there,
///   before `update-ca-certificates`; unmounted, the copy lands in the image's writable layer;
/// - an image that does not (`ca_copy=none`, the images before that script copied it) has only
///   its package's link there (`susemanager-utils/susemanager-sls/susemanager-sls.spec`
///   `@d1bbc1fd3168`, `%post`: `ln -sf /srv/www/htdocs/pub/RHN-ORG-TRUSTED-SSL-CERT` onto it,
///   "Create broken link when it will be replaces with the real file"), which Salt cannot
///   serve, so the clients would get no CA: it gets the chart's mount, [`SALT_CA_VOLUME`].
///
/// A subPath mount keeps the file the pod started with: a CA renewed in `uyuni-ca` reaches it
/// at the server's next start (the trust anchors directory below gets it at once).
/// `/srv/www/htdocs/pub/RHN-ORG-TRUSTED-SSL-CERT` is a symlink to the anchor in the `srv-www`
/// volume, made by the data sync as on a classic server (the PR's later versions no longer copy
/// to `pub`; one says it "is served via Apache Alias").
///
/// The trust anchors directory: a projected volume of the two CA ConfigMaps and the optional
/// `custom-cas`, as the chart's `trust-anchors` volume, so a changed CA reaches the files.
/// Read-only, as every projected volume: one writer into it is known upstream and not yet
/// resolved in what is stored — `spacewalk/admin/salt-secrets-config.py` (`@4eb0d03a`), which
/// `15-setup-trust-store.sh` runs first, copies a new `salt-api.crt` there whenever the file is
/// missing from it; that write fails here and in the chart's projected volume alike, and under
/// `@2ca715b5`'s `set -e` it would stop the start (raised in PR #12133's review, 2026-06-24).
pub const TRUST_ANCHORS_DIR: &str = "/etc/pki/trust/anchors";
pub const LOCAL_CA_FILE: &str = "LOCAL-RHN-ORG-TRUSTED-SSL-CERT";
/// The chart's volume of the CA mounted into the Salt file root (above), for images that do not
/// copy it there.
pub const SALT_CA_VOLUME: &str = "ca-cert";
pub const DB_CA_FILE: &str = "DB-RHN-ORG-TRUSTED-SSL-CERT";
/// The chart's optional ConfigMap of more CAs to trust.
pub const CUSTOM_CAS_CONFIG_MAP: &str = "custom-cas";

/// The server certificate and key, where the image and the services inside it read them
/// (`/etc/pki/tls/certs/spacewalk.crt`, `/etc/pki/tls/private/spacewalk.key`, the chart's
/// `tls` volume items). Each directory is a volume of Secret `uyuni-cert` of its own, never a
/// subPath: the kubelet swaps a whole Secret volume when cert-manager renews the Secret, while
/// a subPath mount keeps the first file for the life of the pod. The chart mounts the Secret
/// over all of `/etc/pki`, so the image needs nothing else in these two directories; one
/// volume per directory hides less of `/etc/pki` than that.
pub const TLS_CERT_DIR: &str = "/etc/pki/tls/certs";
pub const TLS_KEY_DIR: &str = "/etc/pki/tls/private";
pub const TLS_CERT_FILE: &str = "spacewalk.crt";
pub const TLS_KEY_FILE: &str = "spacewalk.key";

/// A read-only volume of one key of Secret `uyuni-cert`, as `file`.
fn tls_volume(name: &str, key: &str, file: &str, mode: i32) -> Volume {
    Volume {
        name: name.to_owned(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(names::SERVER_CERT_SECRET.to_owned()),
            items: Some(vec![KeyToPath {
                key: key.to_owned(),
                path: file.to_owned(),
                mode: Some(mode),
            }]),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

fn read_only(name: &str, path: &str) -> VolumeMount {
    VolumeMount {
        read_only: Some(true),
        ..mount(name, path)
    }
}

fn trust_anchors_volume() -> Volume {
    let config_map = |name: &str, file: Option<&str>, optional: Option<bool>| VolumeProjection {
        config_map: Some(ConfigMapProjection {
            name: name.to_owned(),
            items: file.map(|f| {
                vec![KeyToPath {
                    key: "ca.crt".to_owned(),
                    path: f.to_owned(),
                    mode: None,
                }]
            }),
            optional,
        }),
        ..VolumeProjection::default()
    };
    Volume {
        name: "trust-anchors".to_owned(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(0o644),
            sources: Some(vec![
                config_map(names::CA_CONFIG_MAP, Some(LOCAL_CA_FILE), None),
                config_map(names::DB_CA_CONFIG_MAP, Some(DB_CA_FILE), None),
                config_map(CUSTOM_CAS_CONFIG_MAP, None, Some(true)),
            ]),
        }),
        ..Volume::default()
    }
}

/// ConfigMap `uyuni-ca`, as the chart's `ca-cert` volume.
fn salt_ca_volume() -> Volume {
    Volume {
        name: SALT_CA_VOLUME.to_owned(),
        config_map: Some(ConfigMapVolumeSource {
            name: names::CA_CONFIG_MAP.to_owned(),
            default_mode: Some(0o644),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
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

/// The environment the image reads (images-today §E.3). `container=oci` as the chart sets it
/// (`containers/server-helm/templates/server.yaml`): the image's
/// `docker-entrypoint-init.d/99-cgroupfs-mount.sh` mounts cgroup2 over `/sys/fs/cgroup` only
/// when it is set, and systemd does not start without that mount; `00-mgrSetup.sh` also runs
/// `spacewalk-setup-httpd --no-ssl` with it, TLS ending at the ingress.
///
/// Setup is skipped on migrated data, so a migrated server gets no admin or SCC variables. A
/// fresh server gets those of its first-start setup under the names the image reads
/// (`containers/server-image/root/docker-entrypoint-init.d/00-mgrSetup.sh`, uyuni-project/uyuni
/// @059a0c20: `ADMIN_USER`, `ADMIN_PASS`, `ORG_NAME`, `ADMIN_FIRST_NAME`, `ADMIN_LAST_NAME`,
/// `MANAGER_ADMIN_EMAIL`, `MANAGER_MAIL_FROM`, `SCC_USER`, `SCC_PASS`; mgradm's env file spells
/// several differently, and the image does not read those spellings). Every secret one comes
/// from its Secret through `secretKeyRef`, never as a literal.
fn server_env(settings: &ServerSettings, fqdn: &str) -> Vec<EnvVar> {
    let mut vars = vec![
        env("container", "oci"),
        env("TZ", &settings.timezone),
        env("UYUNI_HOSTNAME", fqdn),
        env("UYUNI_FQDN", fqdn),
        secret_env("MANAGER_USER", names::DB_SECRET, "username"),
        secret_env("MANAGER_PASS", names::DB_SECRET, "password"),
        secret_env("REPORT_DB_USER", names::REPORTDB_SECRET, "username"),
        secret_env("REPORT_DB_PASS", names::REPORTDB_SECRET, "password"),
        env("MANAGER_DB_HOST", names::DB_SERVICE),
        env("MANAGER_DB_PORT", &ports::PGSQL_PORT.to_string()),
        env("MANAGER_DB_NAME", &settings.db_name),
        env("REPORT_DB_HOST", names::REPORTDB_SERVICE),
        env("REPORT_DB_PORT", &ports::PGSQL_PORT.to_string()),
        env("REPORT_DB_NAME", "reportdb"),
        env("DEBUG_JAVA", if settings.debug { "true" } else { "false" }),
        // TFTP is the `tftp` Deployment's (builders::tftp); the server must not serve it too.
        // `n` is the image's default, said here so that no setup run turns it on.
        env("MANAGER_ENABLE_TFTP", "n"),
        // The database may still be finishing its own start: wait for it, not 5 seconds.
        env("UYUNI_INIT_DB_CONN_RETRIES", "60"),
        env("UYUNI_INIT_DB_CONN_INTERVAL", "5"),
    ];
    if let Some(setup) = &settings.first_start {
        vars.extend([
            secret_env("ADMIN_USER", names::ADMIN_SECRET, "username"),
            secret_env("ADMIN_PASS", names::ADMIN_SECRET, "password"),
            env("ORG_NAME", &setup.organization),
            env("ADMIN_FIRST_NAME", &setup.admin_first_name),
            env("ADMIN_LAST_NAME", &setup.admin_last_name),
            env("MANAGER_ADMIN_EMAIL", &setup.email),
            env("MANAGER_MAIL_FROM", &setup.mail_from),
        ]);
        if setup.scc {
            vars.extend([
                secret_env("SCC_USER", names::SCC_SECRET, "username"),
                secret_env("SCC_PASS", names::SCC_SECRET, "password"),
            ]);
        }
    }
    vars
}

/// Where the server finds a local mirror (images-today §A.6, `MIRROR_PATH`).
pub const MIRROR_PATH: &str = "/mirror";

/// The server Deployment.
pub fn server_deployment(
    params: &ServerParams,
    settings: &ServerSettings,
    facts: &Facts,
) -> Deployment {
    let fqdn = facts.fqdn.as_str();
    let features = facts.features;
    let server_volumes: Vec<_> = params
        .spec
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
    volumes.push(trust_anchors_volume());
    // Not a Secret volume over all of /etc/pki (D36): one per directory that holds renewable
    // material, so the rest of the image's /etc/pki stays.
    volumes.push(tls_volume("tls-cert", "tls.crt", TLS_CERT_FILE, 0o444));
    volumes.push(tls_volume("tls-key", "tls.key", TLS_KEY_FILE, 0o400));
    volumes.push(empty_dir("run", Some("256Mi")));
    volumes.push(empty_dir("cgroup", None));
    mounts.push(read_only("trust-anchors", TRUST_ANCHORS_DIR));
    mounts.push(read_only("tls-cert", TLS_CERT_DIR));
    mounts.push(read_only("tls-key", TLS_KEY_DIR));
    mounts.push(mount("run", "/run"));
    mounts.push(mount("cgroup", "/sys/fs/cgroup"));
    if facts.salt_ca_mount {
        volumes.push(salt_ca_volume());
        mounts.push(VolumeMount {
            read_only: Some(true),
            sub_path: Some("ca.crt".to_owned()),
            ..mount(SALT_CA_VOLUME, SALT_CA_FILE)
        });
    }
    let mut environment = server_env(settings, fqdn);
    // The data sync points `server.susemanager.fromdir` at the mirror's mount path.
    if let Some(claim) = &params.spec.mirror_claim {
        volumes.push(pvc_volume("mirror", claim));
        mounts.push(mount("mirror", MIRROR_PATH));
        environment.push(env("MIRROR_PATH", MIRROR_PATH));
    }

    let container_ports = ports::container_ports(components::SERVER, features);
    let container = Container {
        name: "uyuni".to_owned(),
        image: Some(params.spec.image.server.clone()),
        image_pull_policy: Some(params.spec.image.pull_policy.as_str().to_owned()),
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
        security_context: Some(server_security_context(&params.spec.server_security)),
        resources: super::hardening::given(
            &params.spec.resources.server_requests,
            &params.spec.resources.server_limits,
        ),
        ..Container::default()
    };
    let mut deployment = deployment(
        &params.namespace,
        &params.spec,
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
    );
    deployment.metadata.annotations = Some(super::origin_annotation(settings));
    deployment
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
pub fn hub_deployment(namespace: &str, spec: &ServerSpec, replicas: i32) -> Deployment {
    let container = Container {
        name: "hub-xmlrpc".to_owned(),
        image: Some(spec.image.hub_xmlrpc.clone()),
        image_pull_policy: Some(spec.image.pull_policy.as_str().to_owned()),
        env: Some(vec![
            env("HUB_API_URL", "http://web/rpc/api"),
            env("HUB_CONNECT_TIMEOUT", "10"),
            env("HUB_REQUEST_TIMEOUT", "10"),
            env("HUB_CONNECT_USING_SSL", "false"),
        ]),
        ports: Some(ports::container_ports(
            components::HUB_XMLRPC,
            Features {
                debug: false,
                hub: true,
            },
        )),
        readiness_probe: Some(tcp_probe(ports::HUB_XMLRPC_PORT, 10, 3)),
        liveness_probe: Some(tcp_probe(ports::HUB_XMLRPC_PORT, 30, 5)),
        ..Container::default()
    };
    deployment(
        namespace,
        spec,
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
pub fn coco_deployment(params: &ServerParams, settings: &ServerSettings) -> Deployment {
    let container = Container {
        // The chart names this container `hub-xmlrpc`, a copy of hub.yaml's; ours says what
        // it runs.
        name: "coco-attestation".to_owned(),
        image: Some(params.spec.image.coco.clone()),
        image_pull_policy: Some(params.spec.image.pull_policy.as_str().to_owned()),
        env: Some(vec![
            env(
                "database_connection",
                &format!(
                    "jdbc:postgresql://{}:{}/{}",
                    names::DB_SERVICE,
                    ports::PGSQL_PORT,
                    settings.db_name
                ),
            ),
            secret_env("database_user", names::DB_SECRET, "username"),
            secret_env("database_password", names::DB_SECRET, "password"),
        ]),
        ..Container::default()
    };
    deployment(
        &params.namespace,
        &params.spec,
        COCO_DEPLOYMENT,
        components::COCO,
        params.spec.coco_replicas,
        PodSpec {
            containers: vec![container],
            ..PodSpec::default()
        },
    )
}
