//! The pods as a real API server and today's images need them: port names, the server's
//! environment and confinement, the db health checks, the chart's names, and certificates
//! mounted so that a renewal reaches the files (issue 10, defects 1, 2, 4, 5, 6, 11).

use crate::common;

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use uyuni_core::builders::{database, server};
use uyuni_core::catalogue::components;
use uyuni_core::params::MigrateArgs;
use uyuni_core::ports::is_iana_svc_name;
use uyuni_core::{ExtractedData, MigrateParams, Object};

fn data() -> ExtractedData {
    let Object::Secret(secret) = common::extracted_secret("uyuni-data-sync-1", "pw", None) else {
        panic!("a Secret");
    };
    ExtractedData::from_secret(&secret)
        .expect("valid")
        .expect("data")
}

fn params_with(edit: impl FnOnce(&mut MigrateArgs)) -> MigrateParams {
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    edit(&mut args);
    MigrateParams::from_args(&args).expect("valid")
}

fn pod(d: &Deployment) -> &PodSpec {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod spec")
}

fn container<'a>(d: &'a Deployment, name: &str) -> &'a Container {
    pod(d)
        .containers
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("container {name}"))
}

fn server_pod(params: &MigrateParams, data: &ExtractedData) -> Deployment {
    let facts = uyuni_core::resolve::Facts {
        fqdn: "uyuni.example.com".into(),
        ..uyuni_core::resolve::resolve(params, &uyuni_core::Observed::default(), data)
    };
    server::server_deployment(
        params,
        &uyuni_core::settings::ServerSettings::migrated(data),
        &facts,
    )
}

/// Defect 1: a real API server rejects a container with two ports of one name, and names that
/// are not IANA service names. The server container serves several Services.
#[test]
fn every_pod_names_its_ports_uniquely_and_validly_with_every_feature() {
    let params = params_with(|a| a.spec.coco_replicas = Some(1));
    for debug in [false, true] {
        for hub in [false, true] {
            let mut data = data();
            data.debug = debug;
            data.has_hubxmlrpc = hub;
            let deployments = [
                server_pod(&params, &data),
                server::hub_deployment(&params.namespace, &params.spec, 1),
                server::coco_deployment(
                    &params,
                    &uyuni_core::settings::ServerSettings::migrated(&data),
                ),
                database::db_deployment(
                    &params,
                    &uyuni_core::settings::ServerSettings::migrated(&data),
                    "var-pgsql",
                ),
            ];
            for d in &deployments {
                for c in &pod(d).containers {
                    let ports = c.ports.clone().unwrap_or_default();
                    let mut names: Vec<&str> =
                        ports.iter().filter_map(|p| p.name.as_deref()).collect();
                    assert!(
                        names.iter().all(|n| is_iana_svc_name(n)),
                        "{} debug={debug} hub={hub}: {names:?}",
                        c.name
                    );
                    let count = names.len();
                    names.sort_unstable();
                    names.dedup();
                    assert_eq!(
                        names.len(),
                        count,
                        "{} debug={debug} hub={hub}: duplicate port names",
                        c.name
                    );
                }
            }
            let server = server_pod(&params, &data);
            let numbers: Vec<i32> = container(&server, "uyuni")
                .ports
                .iter()
                .flatten()
                .map(|p| p.container_port)
                .collect();
            assert!(
                numbers.contains(&5556) && numbers.contains(&5557),
                "{numbers:?}"
            );
            assert_eq!(numbers.contains(&8001), debug, "{numbers:?}");
        }
    }
}

/// Defect 2: systemd needs the cgroup2 mount, which the image makes only with `container=oci`.
#[test]
fn the_server_container_says_it_runs_in_an_oci_container() {
    let d = server_pod(&common::params(), &data());
    let env = container(&d, "uyuni").env.clone().unwrap_or_default();
    let container_env: Vec<_> = env.iter().filter(|e| e.name == "container").collect();
    assert_eq!(container_env.len(), 1, "{env:?}");
    assert_eq!(container_env[0].value.as_deref(), Some("oci"));
}

/// Defect 4: the chart's confinement by default; privileged only with the flag.
#[test]
fn the_server_is_confined_as_the_chart_does_and_privileged_only_on_request() {
    let d = server_pod(&common::params(), &data());
    let sc = container(&d, "uyuni")
        .security_context
        .clone()
        .expect("set");
    assert_ne!(sc.privileged, Some(true), "{sc:?}");
    assert_eq!(
        sc.capabilities.and_then(|c| c.add),
        Some(vec!["SYS_ADMIN".to_owned()])
    );
    let selinux = sc.se_linux_options.expect("selinux");
    assert_eq!(selinux.level.as_deref(), Some("s0"));
    assert_eq!(selinux.type_, None);
    assert_eq!(sc.app_armor_profile, None);

    let privileged = params_with(|a| a.spec.server_privileged = Some(true));
    let sc = container(&server_pod(&privileged, &data()), "uyuni")
        .security_context
        .clone()
        .expect("set");
    assert_eq!(sc.privileged, Some(true));

    let superp = params_with(|a| a.spec.server_super_privileged = Some(true));
    let sc = container(&server_pod(&superp, &data()), "uyuni")
        .security_context
        .clone()
        .expect("set");
    assert_ne!(sc.privileged, Some(true));
    assert_eq!(
        sc.se_linux_options.and_then(|s| s.type_).as_deref(),
        Some("spc_t")
    );
    assert_eq!(
        sc.app_armor_profile.map(|a| a.type_).as_deref(),
        Some("Unconfined")
    );

    let profiled = params_with(|a| {
        a.spec.server_selinux_type = Some("uyuni_container_t".into());
        a.spec.server_apparmor_profile = Some("uyuni-server".into());
    });
    let sc = container(&server_pod(&profiled, &data()), "uyuni")
        .security_context
        .clone()
        .expect("set");
    assert_eq!(
        sc.se_linux_options.and_then(|s| s.type_).as_deref(),
        Some("uyuni_container_t")
    );
    let apparmor = sc.app_armor_profile.expect("apparmor");
    assert_eq!(apparmor.type_, "Localhost");
    assert_eq!(apparmor.localhost_profile.as_deref(), Some("uyuni-server"));
}

/// Defect 6: the chart's names and components.
#[test]
fn the_hub_and_coco_deployments_have_the_charts_names() {
    let params = common::params();
    let hub = server::hub_deployment(&params.namespace, &params.spec, 1);
    let coco = server::coco_deployment(
        &params,
        &uyuni_core::settings::ServerSettings::migrated(&data()),
    );
    for (d, name, component) in [
        (&hub, "hub-xmlrpc", "hub-xmlrpc"),
        (&coco, "coco-attestation", "coco-attestation"),
    ] {
        assert_eq!(d.metadata.name.as_deref(), Some(name));
        let component_of = |labels: Option<&std::collections::BTreeMap<String, String>>| {
            labels
                .and_then(|l| l.get("app.kubernetes.io/component"))
                .cloned()
        };
        assert_eq!(
            component_of(d.metadata.labels.as_ref()).as_deref(),
            Some(component)
        );
        let spec = d.spec.as_ref().expect("spec");
        assert_eq!(
            component_of(spec.selector.match_labels.as_ref()).as_deref(),
            Some(component)
        );
        assert_eq!(
            component_of(
                spec.template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.as_ref())
            )
            .as_deref(),
            Some(component)
        );
    }
    assert_eq!(components::COCO, "coco-attestation");
    assert_eq!(pod(&hub).containers[0].name, "hub-xmlrpc");
}

/// Defect 11: no subPath for what cert-manager renews; the files come from whole Secret
/// volumes, which the kubelet updates.
#[test]
fn renewable_certificates_are_mounted_as_directories() {
    let d = server_pod(&common::params(), &data());
    let pod = pod(&d);
    let volumes = pod.volumes.clone().unwrap_or_default();
    let mounts = container(&d, "uyuni")
        .volume_mounts
        .clone()
        .unwrap_or_default();
    let renewable: Vec<&str> = volumes
        .iter()
        .filter(|v| v.secret.as_ref().and_then(|s| s.secret_name.as_deref()) == Some("uyuni-cert"))
        .map(|v| v.name.as_str())
        .collect();
    assert_eq!(renewable.len(), 2, "{volumes:?}");
    for m in mounts
        .iter()
        .filter(|m| renewable.contains(&m.name.as_str()))
    {
        assert_eq!(m.sub_path, None, "{m:?}");
        assert_eq!(m.read_only, Some(true), "{m:?}");
    }
    let at = |path: &str| {
        let m = mounts
            .iter()
            .find(|m| m.mount_path == path)
            .unwrap_or_else(|| panic!("a mount at {path}"));
        let v = volumes.iter().find(|v| v.name == m.name).expect("volume");
        (m.clone(), v.clone())
    };
    for (dir, key, file) in [
        ("/etc/pki/tls/certs", "tls.crt", "spacewalk.crt"),
        ("/etc/pki/tls/private", "tls.key", "spacewalk.key"),
    ] {
        let (m, v) = at(dir);
        assert_eq!(m.sub_path, None);
        let items = v.secret.and_then(|s| s.items).expect("items");
        assert_eq!(items.len(), 1);
        assert_eq!((items[0].key.as_str(), items[0].path.as_str()), (key, file));
    }
    let (_, key) = at("/etc/pki/tls/private");
    assert_eq!(
        key.secret.and_then(|s| s.items).expect("items")[0].mode,
        Some(0o400)
    );
    // The trust anchors follow the CA ConfigMaps as the chart's projected volume does.
    let (m, anchors) = at("/etc/pki/trust/anchors");
    assert_eq!(m.sub_path, None);
    let sources = anchors
        .projected
        .and_then(|p| p.sources)
        .expect("projected");
    let files: Vec<String> = sources
        .iter()
        .filter_map(|s| s.config_map.as_ref())
        .flat_map(|c| c.items.clone().unwrap_or_default())
        .map(|i| i.path)
        .collect();
    assert_eq!(
        files,
        [
            "LOCAL-RHN-ORG-TRUSTED-SSL-CERT",
            "DB-RHN-ORG-TRUSTED-SSL-CERT"
        ]
    );
    // No subPath at all: the image copies the CA to the salt file root at every start
    // (15-setup-trust-store.sh), which a read-only file mounted there would make fail.
    assert!(mounts.iter().all(|m| m.sub_path.is_none()), "{mounts:?}");
    // Nor a volume over any directory above it: the file stays in the image's writable layer,
    // for an image whose kind is not known (no check has reported it here; the test below
    // has both kinds).
    let salt_ca = uyuni_core::scripts::image_check::SALT_CA_FILE;
    assert!(
        !mounts
            .iter()
            .any(|m| salt_ca.starts_with(&format!("{}/", m.mount_path.trim_end_matches('/')))),
        "{mounts:?}"
    );
    for path in [
        "/usr/share/susemanager/salt/certs/RHN-ORG-TRUSTED-SSL-CERT",
        "/srv/www/htdocs/pub/RHN-ORG-TRUSTED-SSL-CERT",
    ] {
        assert!(
            !mounts.iter().any(|m| m.mount_path == path),
            "{path} is mounted over"
        );
    }

    // The db pod: db-cert as a directory, and a container that reloads PostgreSQL.
    let db = database::db_deployment(
        &common::params(),
        &uyuni_core::settings::ServerSettings::migrated(&data()),
        "var-pgsql",
    );
    let db_pod = self::pod(&db);
    assert_eq!(db_pod.share_process_namespace, Some(true));
    let reload = container(&db, database::CERT_RELOAD_CONTAINER);
    let postgres = container(&db, "db");
    let cert_mount = |c: &Container| {
        c.volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == database::DB_CERT_VOLUME)
            .cloned()
            .expect("db-cert mount")
    };
    assert_eq!(cert_mount(reload), cert_mount(postgres));
    assert_eq!(cert_mount(postgres).sub_path, None);
    assert_eq!(
        reload.command.as_deref().map(|c| c[..2].to_vec()),
        Some(vec!["bash".to_owned(), "-c".to_owned()])
    );
    let data_mount = reload
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == "/var/lib/pgsql/data")
        .expect("data mount");
    assert_eq!(data_mount.read_only, Some(true));
    assert_eq!(
        reload.security_context.as_ref().and_then(|s| s.run_as_user),
        Some(999)
    );
}

/// The server Deployment of `params` on a cluster where the server image check of `checked`
/// reported `report` (none: no check ran).
fn server_pod_after_check(
    checked: &MigrateParams,
    params: &MigrateParams,
    report: Option<&str>,
) -> Deployment {
    let mut observed = uyuni_core::Observed::default();
    if let Some(report) = report {
        let mut job = uyuni_core::builders::image_check::jobs(checked)
            .into_iter()
            .next()
            .expect("the server check");
        job.metadata.annotations.get_or_insert_default().insert(
            uyuni_core::labels::INSPECTION_ANNOTATION.to_owned(),
            report.to_owned(),
        );
        observed.insert(Object::Job(job));
    }
    let data = data();
    let facts = uyuni_core::resolve::resolve(params, &observed, &data);
    server::server_deployment(
        params,
        &uyuni_core::settings::ServerSettings::migrated(&data),
        &facts,
    )
}

/// The CA in the Salt file root by the kind of server image the check reported: a read-only
/// subPath file of `uyuni-ca` for an image that does not copy it there at start, as the chart
/// mounts it; nothing there for one that copies it (a read-only file would stop its start),
/// nor for one whose kind is not known.
#[test]
fn the_salt_file_roots_ca_is_mounted_only_for_images_that_do_not_copy_it() {
    let salt_ca = uyuni_core::scripts::image_check::SALT_CA_FILE;
    let params = common::params();
    let mounted = server_pod_after_check(&params, &params, Some("ca_copy=none\n"));
    let mount = container(&mounted, "uyuni")
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == salt_ca)
        .cloned()
        .expect("a mount at the Salt file root's CA");
    assert_eq!(mount.read_only, Some(true));
    assert_eq!(mount.sub_path.as_deref(), Some("ca.crt"));
    let volume = pod(&mounted)
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == mount.name)
        .cloned()
        .expect("its volume");
    assert_eq!(
        volume.config_map.map(|c| c.name),
        Some("uyuni-ca".to_owned()),
        "the CA ConfigMap, as the chart's ca-cert volume"
    );
    // Another image than the one checked: its kind is not known.
    let other = params_with(|a| a.spec.tag = Some("2099.01".into()));
    assert_ne!(other.spec.image.server, params.spec.image.server);
    for (deployed, report) in [
        (&params, Some("ca_copy=salt-file-root\n")),
        (&params, None),
        (&params, Some("placeholder=true\n")),
        (&params, Some("ca_copy=sometimes\n")),
        (&other, Some("ca_copy=none\n")),
    ] {
        let d = server_pod_after_check(&params, deployed, report);
        let mounts = container(&d, "uyuni")
            .volume_mounts
            .clone()
            .unwrap_or_default();
        assert!(
            !mounts
                .iter()
                .any(|m| m.mount_path == salt_ca || m.name == mount.name),
            "{report:?}: {mounts:?}"
        );
        assert!(
            !pod(&d)
                .volumes
                .iter()
                .flatten()
                .any(|v| v.name == mount.name),
            "{report:?}"
        );
    }
}

/// Defect 5: `db` is ready only when the image's own health check says so, where it has one.
#[test]
fn db_readiness_uses_the_images_health_check_and_falls_back_to_pg_isready() {
    let db = database::db_deployment(
        &common::params(),
        &uyuni_core::settings::ServerSettings::migrated(&data()),
        "var-pgsql",
    );
    let postgres = container(&db, "db");
    let command = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
        p.as_ref()
            .and_then(|p| p.exec.as_ref())
            .and_then(|e| e.command.clone())
            .expect("exec probe")
    };
    let expected = vec![
        "bash".to_owned(),
        "-c".to_owned(),
        database::db_health_script(),
    ];
    assert_eq!(command(&postgres.readiness_probe), expected);
    assert_eq!(command(&postgres.startup_probe), expected);
    assert_eq!(command(&postgres.liveness_probe)[0], "pg_isready");
    common::shellcheck("db health", &database::db_health_script());

    // Run it under bash, with a stand-in for the image's script and for pg_isready.
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("bin");
    let log = dir.path().join("log");
    let stub = |name: &str, code: i32| {
        let path = bin.join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/bash\necho \"{name} $*\" >>{}\nexit {code}\n",
                log.display()
            ),
        )
        .expect("stub");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        path
    };
    let run = |script: &str| {
        let _ = std::fs::remove_file(&log);
        let status = Command::new("bash")
            .args(["-c", script])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .status()
            .expect("bash runs");
        (
            status.code(),
            std::fs::read_to_string(&log).unwrap_or_default(),
        )
    };
    stub("pg_isready", 0);
    let healthcheck = stub("healthcheck.sh", 1);
    // The image has its health check, which fails while the hooks run: not ready, and
    // pg_isready (which would say yes) is not asked.
    let with_image = database::db_health_script()
        .replace(database::DB_HEALTHCHECK, &healthcheck.display().to_string());
    assert_eq!(run(&with_image), (Some(1), "healthcheck.sh \n".to_owned()));
    // An image without it: pg_isready on TCP.
    let without = database::db_health_script().replace(
        database::DB_HEALTHCHECK,
        &dir.path().join("absent.sh").display().to_string(),
    );
    assert_eq!(
        run(&without),
        (Some(0), "pg_isready -h localhost -p 5432\n".to_owned())
    );
    stub("pg_isready", 2);
    assert_eq!(run(&without).0, Some(2));
}

/// Defect 11, PostgreSQL: the reload loop under bash, with a stand-in `pg_ctl`.
#[test]
fn the_cert_reload_loop_reloads_postgresql_when_the_files_change() {
    common::shellcheck("cert-reload", database::CERT_RELOAD_SCRIPT);
    let dir = tempfile::tempdir().expect("tempdir");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).expect("bin");
    let log = dir.path().join("reloads");
    let fail_flag = dir.path().join("fail");
    let pg_ctl = bin.join("pg_ctl");
    std::fs::write(
        &pg_ctl,
        format!(
            "#!/bin/bash\necho \"$*\" >>{log}\n[ ! -e {fail} ]\n",
            log = log.display(),
            fail = fail_flag.display()
        ),
    )
    .expect("stub");
    std::fs::set_permissions(&pg_ctl, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let cert = dir.path().join("tls.crt");
    let key = dir.path().join("tls.key");
    std::fs::write(&cert, "old cert").expect("cert");
    std::fs::write(&key, "old key").expect("key");

    let mut child = Command::new("bash")
        .args(["-c", database::CERT_RELOAD_SCRIPT])
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env(
            "UYUNI_CERT_FILES",
            format!("{} {}", cert.display(), key.display()),
        )
        .env("PGDATA", "/var/lib/pgsql/data")
        .env("UYUNI_CERT_POLL_SECONDS", "0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("bash runs");
    let reloads = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let wait_for = |n: usize| {
        let start = Instant::now();
        while reloads() < n && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        reloads()
    };

    // Unchanged files: no reload.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(reloads(), 0);
    // A renewal (the kubelet swaps the files): one reload, with the data directory.
    std::fs::write(&cert, "new cert").expect("cert");
    assert_eq!(wait_for(1), 1);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(reloads(), 1, "one reload per change");
    assert_eq!(
        std::fs::read_to_string(&log).expect("log"),
        "reload -D /var/lib/pgsql/data\n"
    );
    // A failed reload (PostgreSQL not up) is tried again until it succeeds.
    std::fs::File::create(&fail_flag)
        .and_then(|mut f| f.write_all(b"x"))
        .expect("flag");
    std::fs::write(&key, "new key").expect("key");
    assert!(wait_for(3) >= 3, "retried");
    std::fs::remove_file(&fail_flag).expect("flag");
    let after = wait_for(reloads() + 1);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(reloads(), after, "no more reloads once one succeeded");

    // TERM ends it at once.
    let pid = child.id().to_string();
    Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "still running");
        std::thread::sleep(Duration::from_millis(20));
    }
}
