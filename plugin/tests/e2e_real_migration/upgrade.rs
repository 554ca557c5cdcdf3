//! `kubectl uyuni upgrade` against the real control plane, our node agent playing the pods (the
//! scenario's inspections report the release a tag names, and PostgreSQL 18 unless a
//! namespace's scenario says otherwise): install 2025.10, upgrade to 2026.04 with a backup of
//! the database, a second run that plans nothing, a downgrade refused, the rollback; and an upgrade to a new
//! PostgreSQL major into a new volume, the old one left as it was.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use uyuni_testdata::{Flavour, Scenario, scenarios};

use super::{RealEnv, both, condition, config, real_plane_or_skip};
use crate::support::{SOURCE, ssh_flags, text};

const NS_UPGRADE: &str = "uyuni-upgrade";
const NS_UPGRADE_MAJOR: &str = "uyuni-upgrade-major";
const NS_UPGRADE_MIGRATED: &str = "uyuni-upgrade-migrated";
const NS_UPGRADE_FAILING: &str = "uyuni-upgrade-failing";
const NS_UPGRADE_LOCKED: &str = "uyuni-upgrade-locked";
const NS_UPGRADE_QUOTA: &str = "uyuni-upgrade-quota";
const NS_UPGRADE_SALT_CA: &str = "uyuni-upgrade-salt-ca";
const FQDN: &str = "upgrade.example.com";
const FROM: &str = "2025.10";
const TO: &str = "2026.04";

/// In NS_UPGRADE_MAJOR the database images to upgrade to are PostgreSQL 19.
pub(crate) fn add_scenarios(shared: &mut Scenario) {
    let mut major = scenarios::migration();
    if let Some(script) = major.jobs.get_mut("inspect-db") {
        script.termination_message = Some("pg_major=19\n".to_owned());
    }
    shared.namespaces.insert(NS_UPGRADE_MAJOR.into(), major);
    // In NS_UPGRADE_FAILING the backup fails once, then takes long enough to be interrupted.
    let mut failing = scenarios::migration();
    let mut slow = failing.jobs.get("db-backup").cloned().unwrap_or_default();
    slow.duration_ms = 6_000;
    let mut fail_once =
        uyuni_testdata::JobScript::fail(1, &["ERROR: the target volume has 10 KiB free"]);
    fail_once.later_attempts = vec![slow];
    failing.jobs.insert("db-backup".into(), fail_once);
    shared.namespaces.insert(NS_UPGRADE_FAILING.into(), failing);
    // In NS_UPGRADE_LOCKED the backup takes long enough for another command to meet it.
    let mut locked = scenarios::migration();
    if let Some(backup) = locked.jobs.get_mut("db-backup") {
        backup.duration_ms = 8_000;
    }
    shared.namespaces.insert(NS_UPGRADE_LOCKED.into(), locked);
    // In NS_UPGRADE_SALT_CA the server image installed does not copy the CA into the Salt file
    // root (`ca_copy=none`); the one upgraded to does.
    let mut salt_ca = scenarios::migration_with_server_images_not_copying_the_ca();
    if let Some(script) = salt_ca.jobs.get_mut("inspect-server") {
        script.termination_message =
            Some("product=uyuni\nrelease=$IMAGE_TAG\nca_copy=salt-file-root\n".to_owned());
    }
    shared.namespaces.insert(NS_UPGRADE_SALT_CA.into(), salt_ca);
}

fn install(env: &RealEnv) {
    let out = env
        .command(&["install", FQDN, "--tag", FROM])
        .env("UYUNI_ADMIN_PASSWORD", "upgrade-admin-Pa55")
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
}

fn image(env: &RealEnv, deployment: &str) -> String {
    let d = env.get(&["deployment", deployment, "-n", env.ns]);
    d["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn jobs_of(env: &RealEnv, step: &str) -> Vec<Value> {
    env.items(&[
        "jobs",
        "-n",
        env.ns,
        "-l",
        &format!("kubectl-uyuni.io/step={step}"),
    ])
}

fn claims(env: &RealEnv) -> Vec<String> {
    env.items(&["persistentvolumeclaims", "-n", env.ns])
        .iter()
        .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
        .collect()
}

fn upgrade(env: &RealEnv, extra: &[&str]) -> Output {
    let mut args = vec!["upgrade"];
    args.extend_from_slice(extra);
    env.uyuni(&args)
}

/// The README's upgrade: a dry run writes nothing; without a terminal and without --yes the
/// run refuses before the outage (the inspections ran, nothing of the server changed); with
/// --yes the server and the database run 2026.04, the database was copied into
/// var-pgsql18-backup first, ConfigMap uyuni-upgrade records what it began from; a second run
/// plans nothing; a downgrade is refused naming both releases.
#[test]
fn an_installed_server_upgrades_with_a_backup_and_a_second_run_plans_nothing() {
    if !real_plane_or_skip("upgrade on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_UPGRADE);
    install(&env);
    assert!(image(&env, "uyuni").ends_with(FROM));

    let dry = upgrade(&env, &["--tag", TO, "--dry-run"]);
    assert!(dry.status.success(), "{}", both(&dry));
    let (stdout, _) = text(&dry);
    assert!(
        stdout.contains("Outage: the server is down from step"),
        "{stdout}"
    );
    assert!(stdout.contains("db-backup"), "{stdout}");
    assert!(
        jobs_of(&env, "inspect-server").is_empty(),
        "the dry run created a Job"
    );

    let refused = upgrade(&env, &["--tag", TO]);
    assert!(!refused.status.success(), "{}", both(&refused));
    let (_, stderr) = text(&refused);
    assert!(stderr.contains("pass --yes"), "{stderr}");
    assert!(
        image(&env, "uyuni").ends_with(FROM),
        "the refused run changed the server"
    );

    let out = upgrade(&env, &["--tag", TO, "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    let (stdout, _) = text(&out);
    assert!(stdout.contains(&format!("{FROM} → {TO}")), "{stdout}");
    for deployment in ["uyuni", "db"] {
        assert!(image(&env, deployment).ends_with(TO), "{deployment}");
        let d = env.get(&["deployment", deployment, "-n", env.ns]);
        assert_eq!(condition(&d, "Available").as_deref(), Some("True"), "{d:#}");
        assert_eq!(d["spec"]["replicas"], 1);
    }
    let inspected = jobs_of(&env, "inspect-server");
    assert_eq!(inspected.len(), 1);
    let report = inspected[0]["metadata"]["annotations"]["kubectl-uyuni.io/inspection"]
        .as_str()
        .unwrap_or_default();
    assert!(report.contains(&format!("release={TO}")), "{report}");
    let backup = jobs_of(&env, "db-backup");
    assert_eq!(backup.len(), 1);
    assert_eq!(condition(&backup[0], "Complete").as_deref(), Some("True"));
    assert!(claims(&env).contains(&"var-pgsql18-backup".to_owned()));
    let record = env.get(&["configmap", "uyuni-upgrade", "-n", env.ns]);
    assert!(
        record["data"]["from.uyuni"]
            .as_str()
            .is_some_and(|i| i.ends_with(FROM)),
        "{record:#}"
    );
    assert_eq!(record["data"]["backup-claim"], "var-pgsql18-backup");

    // Its result as data, as docs/schema/upgrade.json describes it.
    let python = crate::output_schemas::python();
    let again = upgrade(&env, &["--tag", TO, "--yes", "-o", "json"]);
    assert!(again.status.success(), "{}", both(&again));
    let (_, stderr) = text(&again);
    assert!(stderr.contains("Nothing to do"), "{stderr}");
    if let Some(python) = &python {
        crate::output_schemas::validates(python, "upgrade.json", &again);
    }
    assert_eq!(jobs_of(&env, "db-backup").len(), 1, "the backup ran again");

    let down = upgrade(&env, &["--tag", FROM, "--yes"]);
    assert!(!down.status.success(), "{}", both(&down));
    let (_, stderr) = text(&down);
    assert!(
        stderr.contains("downgrade") && stderr.contains(FROM) && stderr.contains(TO),
        "{stderr}"
    );
    assert!(
        image(&env, "uyuni").ends_with(TO),
        "the refused downgrade changed the server"
    );

    // The way back: the backup restored, the images before the upgrade, the record closed.
    let back = upgrade(&env, &["--rollback", "--yes", "-o", "json"]);
    assert!(back.status.success(), "{}", both(&back));
    if let Some(python) = &python {
        crate::output_schemas::validates(python, "upgrade.json", &back);
    }
    for deployment in ["uyuni", "db"] {
        assert!(image(&env, deployment).ends_with(FROM), "{deployment}");
        let d = env.get(&["deployment", deployment, "-n", env.ns]);
        assert_eq!(condition(&d, "Available").as_deref(), Some("True"), "{d:#}");
    }
    let restore = jobs_of(&env, "db-restore");
    assert_eq!(restore.len(), 1);
    assert_eq!(condition(&restore[0], "Complete").as_deref(), Some("True"));
    let record = env.get(&["configmap", "uyuni-upgrade", "-n", env.ns]);
    assert!(record["data"]["rolled-back"].is_string(), "{record:#}");
    assert!(
        claims(&env).contains(&"var-pgsql18-backup".to_owned()),
        "the backup was deleted"
    );
    let spec = env.get(&["configmap", "uyuni-server-spec", "-n", env.ns]);
    assert_eq!(spec["data"]["tag"], FROM, "{spec:#}");

    // Uninstall removes the record and keeps the backup with the other volumes, naming it.
    let gone = env.uyuni(&["uninstall", "--yes"]);
    assert!(gone.status.success(), "{}", both(&gone));
    let (stdout, _) = text(&gone);
    assert!(stdout.contains("var-pgsql18-backup"), "{stdout}");
    let configmaps = env.items(&["configmaps", "-n", env.ns]);
    assert!(
        !configmaps
            .iter()
            .any(|c| c["metadata"]["name"] == "uyuni-upgrade"),
        "the upgrade's record stayed"
    );
    assert!(claims(&env).contains(&"var-pgsql18-backup".to_owned()));
}

/// A new PostgreSQL major: pg_upgrade into var-pgsql19, `db` on it, var-pgsql18 kept; no
/// backup copy (the old volume is the way back); a second run plans nothing.
#[test]
fn an_upgrade_to_a_new_postgresql_major_moves_the_database_to_a_new_volume() {
    if !real_plane_or_skip("upgrade with a PostgreSQL major change on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_UPGRADE_MAJOR);
    install(&env);
    let out = upgrade(&env, &["--tag", TO, "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    let upgraded = jobs_of(&env, "db-upgrade");
    assert_eq!(upgraded.len(), 1);
    assert_eq!(condition(&upgraded[0], "Complete").as_deref(), Some("True"));
    assert!(jobs_of(&env, "db-backup").is_empty());
    let db = env.get(&["deployment", "db", "-n", env.ns]);
    let volumes = db["spec"]["template"]["spec"]["volumes"].to_string();
    assert!(volumes.contains("var-pgsql19"), "{volumes}");
    let names = claims(&env);
    assert!(
        names.contains(&"var-pgsql18".to_owned()) && names.contains(&"var-pgsql19".to_owned()),
        "{names:?}"
    );
    let again = upgrade(&env, &["--tag", TO, "--yes"]);
    assert!(again.status.success(), "{}", both(&again));
    let (_, stderr) = text(&again);
    assert!(stderr.contains("Nothing to do"), "{stderr}");
}

/// A migrated server upgrades on migrate's end state: no data step of the migration runs again,
/// the database is copied first, and a second run plans nothing.
#[test]
fn a_migrated_server_upgrades_and_no_migration_step_runs_again() {
    if !real_plane_or_skip("upgrade of a migrated server on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_UPGRADE_MIGRATED);
    // Before the migration has run: refused, naming the command that finishes it.
    let early = upgrade(&env, &["--tag", TO, "--yes"]);
    assert!(!early.status.success(), "{}", both(&early));
    let mut args = vec!["migrate", SOURCE, "--yes", "--tag", FROM];
    let ssh = ssh_flags();
    args.extend(ssh.iter().map(String::as_str));
    let out = env.uyuni(&args);
    assert!(out.status.success(), "{}", both(&out));
    let fixups = jobs_of(&env, "db-fixup").len();
    let syncs = jobs_of(&env, "data-sync").len();

    let out = upgrade(&env, &["--tag", TO, "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    for deployment in ["uyuni", "db"] {
        assert!(image(&env, deployment).ends_with(TO), "{deployment}");
    }
    assert_eq!(
        jobs_of(&env, "db-fixup").len(),
        fixups,
        "the fix-up ran again"
    );
    assert_eq!(
        jobs_of(&env, "data-sync").len(),
        syncs,
        "a data sync ran again"
    );
    assert_eq!(jobs_of(&env, "db-backup").len(), 1);
    let status = env.uyuni(&["status", "-o", "json"]);
    let report: Value = serde_json::from_slice(&status.stdout).expect("JSON");
    assert_eq!(report["upgrade"]["state"], "complete", "{report:#}");
    assert_eq!(report["upgrade"]["releaseTo"], TO, "{report:#}");
    let server = report["workloads"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["component"] == "server"))
        .cloned()
        .unwrap_or_default();
    assert!(
        server.to_string().contains(&format!("server:{TO}")),
        "{server:#}"
    );
    let again = upgrade(&env, &["--tag", TO, "--yes"]);
    assert!(again.status.success(), "{}", both(&again));
    let (_, stderr) = text(&again);
    assert!(stderr.contains("Nothing to do"), "{stderr}");
}

/// A failed backup ends the run with the step, the Job and its log, the server stopped and its
/// images unchanged; the next run retries it as a new Job, is interrupted during it (SIGINT:
/// how to resume is said), and the one after completes with exactly one successful backup.
#[test]
fn a_failed_then_interrupted_upgrade_completes_when_run_again() {
    if !real_plane_or_skip("a failed and interrupted upgrade on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_UPGRADE_FAILING);
    install(&env);
    let failed = upgrade(&env, &["--tag", TO, "--yes"]);
    assert!(!failed.status.success(), "{}", both(&failed));
    let (_, stderr) = text(&failed);
    assert!(
        stderr.contains("db-backup")
            && stderr.contains("10 KiB free")
            && stderr.contains("is stopped for the upgrade")
            && stderr.contains("upgrade --rollback"),
        "{stderr}"
    );
    assert!(
        image(&env, "uyuni").ends_with(FROM),
        "the images changed after a failed backup"
    );
    assert!(image(&env, "db").ends_with(FROM));

    let child = env
        .command(&["upgrade", "--tag", TO, "--yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while jobs_of(&env, "db-backup").len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no second backup Job"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(130), "{}", both(&out));
    assert!(stderr.contains("upgrade --tag"), "{stderr}");

    let done = upgrade(&env, &["--tag", TO, "--yes"]);
    assert!(done.status.success(), "{}", both(&done));
    assert!(image(&env, "uyuni").ends_with(TO));
    let backups = jobs_of(&env, "db-backup");
    let complete = backups
        .iter()
        .filter(|j| condition(j, "Complete").as_deref() == Some("True"))
        .count();
    assert_eq!((backups.len(), complete), (2, 1), "{backups:#?}");
}

/// Two commands at once: while an upgrade copies the database, `stop` and `uninstall` are
/// refused before any write, naming the upgrade that holds the namespace's lease; the upgrade
/// then completes.
#[test]
fn another_command_during_an_upgrade_is_refused_naming_the_upgrade() {
    if !real_plane_or_skip("two commands at once on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_UPGRADE_LOCKED);
    install(&env);
    let child = env
        .command(&["upgrade", "--tag", TO, "--yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let start = Instant::now();
    while jobs_of(&env, "db-backup").is_empty() {
        assert!(start.elapsed() < Duration::from_secs(120), "no backup Job");
        std::thread::sleep(Duration::from_millis(100));
    }
    for command in [&["stop", "--yes"][..], &["uninstall", "--yes"][..]] {
        let out = env.uyuni(command);
        assert!(!out.status.success(), "{command:?}: {}", both(&out));
        let (_, stderr) = text(&out);
        assert!(
            stderr.contains("another run is writing to namespace") && stderr.contains("upgrade"),
            "{command:?}: {stderr}"
        );
    }
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", both(&out));
    assert!(image(&env, "uyuni").ends_with(TO));
    let d = env.get(&["deployment", "uyuni", "-n", env.ns]);
    assert_eq!(
        d["spec"]["replicas"], 1,
        "the refused stop changed the server"
    );
}

/// Applies ResourceQuota `storage` with `requests.storage` of `hard` bytes and waits until the
/// quota controller has made it the status admission reads (`status.hard`, `status.used`);
/// returns the bytes used.
fn storage_quota(env: &RealEnv, hard: u128) -> u128 {
    let quota = serde_json::json!({
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "storage", "namespace": env.ns},
        "spec": {"hard": {"requests.storage": hard.to_string()}},
    });
    let out = env
        .cluster
        .kubectl(
            &["apply", "--server-side", "--validate=false", "-f", "-"],
            &quota.to_string(),
        )
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    let start = Instant::now();
    loop {
        let q = env.get(&["resourcequota", "storage", "-n", env.ns]);
        let read = |field: &str| {
            q["status"][field]["requests.storage"]
                .as_str()
                .and_then(uyuni_core::quota::value)
        };
        if let (Some(h), Some(used)) = (read("hard"), read("used"))
            && h == hard
        {
            return used;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the quota controller did not compute {q:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Refused before any write: a server `stop` stopped (start it first), then a ResourceQuota
/// with too little room for the backup's claim: the dry run and the run are refused after the
/// inspection Jobs only, naming the quota, the room left, the size and `--no-backup`; with the
/// quota raised the upgrade completes, the replica counts recorded the server's.
#[test]
fn an_upgrade_of_a_stopped_server_or_without_room_for_its_backup_is_refused_before_any_write() {
    if !real_plane_or_skip("an upgrade refused by a ResourceQuota on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_UPGRADE_QUOTA);
    install(&env);
    let stop = env.uyuni(&["stop", "--yes"]);
    assert!(stop.status.success(), "{}", both(&stop));
    let stopped = upgrade(&env, &["--tag", TO, "--yes"]);
    assert_eq!(stopped.status.code(), Some(1), "{}", both(&stopped));
    let (_, stderr) = text(&stopped);
    assert!(
        stderr.contains("is stopped") && stderr.contains(&format!("-n {NS_UPGRADE_QUOTA} start`")),
        "{stderr}"
    );
    assert!(
        jobs_of(&env, "inspect-server").is_empty(),
        "the refused run wrote"
    );
    let start = env.uyuni(&["start", "--yes"]);
    assert!(start.status.success(), "{}", both(&start));

    let installed: Vec<Value> = env
        .items(&["jobs", "-n", env.ns])
        .iter()
        .map(|j| j["metadata"]["name"].clone())
        .collect();
    let used = storage_quota(&env, 1 << 50);
    // 10 GiB of room, and the backup takes the database volume's size (more).
    storage_quota(&env, used + (10 << 30));

    let expect_refusal = |out: &Output| {
        assert_eq!(out.status.code(), Some(1), "{}", both(out));
        let (_, stderr) = text(out);
        for part in [
            "ResourceQuota storage has room for 10.0 GiB",
            "volume var-pgsql18-backup needs",
            "describe resourcequota storage",
            "--no-backup",
            "Nothing of the server was changed",
        ] {
            assert!(stderr.contains(part), "{part:?} missing: {stderr}");
        }
    };
    let dry = upgrade(&env, &["--tag", TO, "--dry-run"]);
    expect_refusal(&dry);
    let refused = upgrade(&env, &["--tag", TO, "--yes"]);
    expect_refusal(&refused);
    // Written: the inspection Jobs, nothing of the server's.
    let steps: Vec<String> = env
        .items(&["jobs", "-n", env.ns])
        .iter()
        .filter(|j| !installed.contains(&j["metadata"]["name"]))
        .filter_map(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/step"].as_str())
        .map(str::to_owned)
        .collect();
    assert!(
        steps.iter().all(|s| s.starts_with("inspect-")),
        "written besides the inspections: {steps:?}"
    );
    assert!(!claims(&env).contains(&"var-pgsql18-backup".to_owned()));
    assert!(
        !env.items(&["configmaps", "-n", env.ns])
            .iter()
            .any(|c| c["metadata"]["name"] == "uyuni-upgrade"),
        "the refused run wrote its record"
    );
    for deployment in ["uyuni", "db"] {
        assert!(image(&env, deployment).ends_with(FROM), "{deployment}");
        let d = env.get(&["deployment", deployment, "-n", env.ns]);
        assert_eq!(d["spec"]["replicas"], 1, "{deployment} was stopped");
    }

    storage_quota(&env, used + (1 << 40));
    let out = upgrade(&env, &["--tag", TO, "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    let record = env.get(&["configmap", "uyuni-upgrade", "-n", env.ns]);
    assert_eq!(record["data"]["replicas.uyuni"], "1", "{record:#}");
    for deployment in ["uyuni", "db"] {
        assert!(image(&env, deployment).ends_with(TO), "{deployment}");
    }
    assert!(claims(&env).contains(&"var-pgsql18-backup".to_owned()));
}

/// The server Deployment's mount at the Salt file root's CA, as (index of the mount, index of
/// its volume, the volume's ConfigMap, subPath, readOnly).
fn salt_ca_mount(env: &RealEnv) -> Option<(usize, usize, String, String, bool)> {
    let d = env.get(&["deployment", "uyuni", "-n", env.ns]);
    let pod = &d["spec"]["template"]["spec"];
    let mounts = pod["containers"][0]["volumeMounts"].as_array()?;
    let at = mounts.iter().position(|m| {
        m["mountPath"] == "/usr/share/susemanager/salt/certs/RHN-ORG-TRUSTED-SSL-CERT"
    })?;
    let mount = &mounts[at];
    let volumes = pod["volumes"].as_array()?;
    let volume = volumes.iter().position(|v| v["name"] == mount["name"])?;
    Some((
        at,
        volume,
        volumes[volume]["configMap"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        mount["subPath"].as_str().unwrap_or_default().to_owned(),
        mount["readOnly"].as_bool().unwrap_or_default(),
    ))
}

/// The CA in the Salt file root by the kind of server image: installed on an image that does
/// not copy it there at start, the server gets `uyuni-ca`'s CA there as a read-only subPath
/// file; a server written without that mount (as an earlier version of this tool wrote it) is
/// not restarted for it by a plain re-run; the upgrade to an image that copies it drops it,
/// and the server starts.
#[test]
fn the_salt_file_roots_ca_follows_the_kind_of_server_image_through_an_upgrade() {
    if !real_plane_or_skip("the CA in the Salt file root on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_UPGRADE_SALT_CA);
    install(&env);
    let (mount, volume, config_map, sub_path, read_only) =
        salt_ca_mount(&env).expect("the CA mounted for an image that does not copy it");
    assert_eq!(
        (config_map.as_str(), sub_path.as_str(), read_only),
        ("uyuni-ca", "ca.crt", true)
    );

    // The Deployment as a version of this tool before the mount wrote it.
    let patch = format!(
        r#"[{{"op":"remove","path":"/spec/template/spec/containers/0/volumeMounts/{mount}"}},{{"op":"remove","path":"/spec/template/spec/volumes/{volume}"}}]"#
    );
    let out = env
        .cluster
        .kubectl(
            &[
                "-n",
                env.ns,
                "patch",
                "deployment",
                "uyuni",
                "--type=json",
                "-p",
                &patch,
            ],
            "",
        )
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(salt_ca_mount(&env), None);
    // The edit rolls the server out: the re-run below must find it ready, as a server an
    // earlier version wrote would be, or it plans a wait for it.
    let out = env
        .cluster
        .kubectl(
            &[
                "-n",
                env.ns,
                "rollout",
                "status",
                "deployment/uyuni",
                "--timeout=300s",
            ],
            "",
        )
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    let generation = |env: &RealEnv| {
        env.get(&["deployment", "uyuni", "-n", env.ns])["metadata"]["generation"].clone()
    };
    let before = generation(&env);
    let again = env
        .command(&["install", FQDN, "--tag", FROM])
        .env("UYUNI_ADMIN_PASSWORD", "upgrade-admin-Pa55")
        .output()
        .expect("kubectl runs");
    assert!(again.status.success(), "{}", both(&again));
    let (_, stderr) = text(&again);
    assert!(stderr.contains("Nothing to do"), "{stderr}");
    assert_eq!(
        generation(&env),
        before,
        "the running server was rolled out"
    );

    let out = upgrade(&env, &["--tag", TO, "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(image(&env, "uyuni").ends_with(TO));
    assert_eq!(
        salt_ca_mount(&env),
        None,
        "a read-only file where the image copies the CA"
    );
    let d = env.get(&["deployment", "uyuni", "-n", env.ns]);
    assert_eq!(condition(&d, "Available").as_deref(), Some("True"), "{d:#}");
    let report = jobs_of(&env, "inspect-server")[0]["metadata"]["annotations"]
        ["kubectl-uyuni.io/inspection"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(report.contains("ca_copy=salt-file-root"), "{report}");
}
