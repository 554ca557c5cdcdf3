//! The database phase of the planner: the version decision, the order of its steps, the
//! credentials, re-runs and resumption.

use crate::common;

use k8s_openapi::ByteString;
use uyuni_core::builders::database;
use uyuni_core::object::Kind;
use uyuni_core::observed::deployment_ready;
use uyuni_core::plan::PlanError;
use uyuni_core::scripts::data_keys;
use uyuni_core::{Action, Object, Observed, Op, Step, plan, preview, simulate};

fn with_pg_version(mut o: Observed, version: &str) -> Observed {
    if let Some(Object::Secret(s)) = o.objects.get_mut(&uyuni_core::ObjectRef::new(
        Kind::Secret,
        common::DATA_SECRET,
    )) && let Some(d) = s.data.as_mut()
    {
        d.insert(
            data_keys::PG_VERSION.into(),
            ByteString(version.as_bytes().to_vec()),
        );
    }
    o
}

fn ids(steps: &[Step]) -> Vec<&str> {
    steps.iter().map(|s| s.id.as_str()).collect()
}

/// The claim of the first volume backed by a PersistentVolumeClaim.
fn claim_of(deployment: &k8s_openapi::api::apps::v1::Deployment) -> Option<String> {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.volumes.as_ref())
        .into_iter()
        .flatten()
        .find_map(|v| v.persistent_volume_claim.as_ref())
        .map(|c| c.claim_name.clone())
}

#[test]
fn after_the_sync_the_database_steps_run_in_order() {
    let params = common::params();
    let p = preview(&params, &common::after_sync(&params)).expect("preview");
    let executed = ids(&p.executed);
    const DATABASE: [&str; 12] = [
        "db-fixup",
        "pvc-var-pgsql18",
        "db-upgrade",
        "db-admin-credentials",
        "db-credentials",
        "reportdb-credentials",
        "db-passwords",
        "service-db",
        "service-reportdb",
        "db-deployment",
        "db-ready",
        "db-migration-sql",
    ];
    let database: Vec<&str> = executed
        .iter()
        .copied()
        .filter(|id| DATABASE.contains(id))
        .collect();
    assert_eq!(database, DATABASE);
    // The db pod mounts Secret db-cert: the TLS phase goes between the upgrade and the db
    // Deployment, the server after both.
    let pos = |id: &str| {
        executed
            .iter()
            .position(|i| *i == id)
            .unwrap_or_else(|| panic!("{id}: {executed:?}"))
    };
    assert!(pos("db-upgrade") < pos("ca-secret"), "{executed:?}");
    assert!(pos("db-certificate") < pos("db-deployment"), "{executed:?}");
    assert!(
        pos("db-certificate-ready") < pos("db-deployment"),
        "{executed:?}"
    );
    assert!(
        pos("db-migration-sql") < pos("server-deployment"),
        "{executed:?}"
    );
    let deployment = p.end.deployment("db").expect("db");
    assert!(deployment_ready(deployment));
    assert_eq!(claim_of(deployment).as_deref(), Some("var-pgsql18"));
    let Some(Action::RunJob { job, .. }) = p
        .executed
        .iter()
        .find(|s| s.id == "db-upgrade")
        .map(|s| &s.action)
    else {
        panic!("upgrade Job");
    };
    let pod = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod");
    assert_eq!(
        pod.containers[0].image.as_deref(),
        Some("registry.opensuse.org/uyuni/server-database-migration:latest")
    );
    let claims: Vec<(String, String)> = pod.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .map(|m| (m.name.clone(), m.mount_path.clone()))
        .collect();
    assert!(claims.contains(&("var-pgsql".into(), "/migration/source".into())));
    assert!(claims.contains(&("var-pgsql18".into(), "/migration/target".into())));
    assert_eq!(job.spec.as_ref().and_then(|s| s.backoff_limit), Some(0));
}

#[test]
fn data_of_the_target_major_is_not_upgraded() {
    let params = common::params();
    let o = with_pg_version(common::after_sync(&params), "18");
    let p = preview(&params, &o).expect("preview");
    assert!(!ids(&p.executed).contains(&"db-upgrade"));
    assert!(!ids(&p.executed).contains(&"pvc-var-pgsql18"));
    let deployment = p.end.deployment("db").expect("db");
    assert_eq!(claim_of(deployment).as_deref(), Some("var-pgsql"));
}

#[test]
fn a_downgrade_or_an_unsupported_source_is_refused_before_any_write() {
    let params = common::params();
    for (version, words) in [
        ("19", "downgrade"),
        ("17", "14 and 16"),
        ("12", "14 and 16"),
    ] {
        let o = with_pg_version(common::after_sync(&params), version);
        let err = plan(&params, &o).expect_err(version);
        assert!(matches!(err, PlanError::PgVersion { .. }), "{err}");
        let message = err.to_string();
        assert!(message.contains(words), "{message}");
        assert!(message.contains("Nothing was changed"), "{message}");
    }
}

#[test]
fn credentials_are_the_migrated_ones() {
    let params = common::params();
    let p = preview(&params, &common::after_sync(&params)).expect("preview");
    let secret = |name: &str| p.end.secret(name).cloned().expect(name);
    let value = |name: &str, key: &str| {
        String::from_utf8(secret(name).data.expect("data")[key].0.clone()).expect("text")
    };
    assert_eq!(value("db-admin-credentials", "username"), "spacewalk");
    assert_eq!(value("db-admin-credentials", "password"), "s3cret pass#1");
    assert_eq!(value("db-credentials", "username"), "spacewalk");
    assert_eq!(
        value("reportdb-credentials", "username"),
        "pythia_susemanager"
    );
    assert_eq!(
        secret("db-credentials").type_.as_deref(),
        Some("kubernetes.io/basic-auth")
    );
}

#[test]
fn prepare_stops_after_the_sync() {
    let mut args = common::args_with_ssh(&common::private_key("k"));
    args.prepare = true;
    let params = uyuni_core::MigrateParams::from_args(&args).expect("valid");
    let p = preview(&params, &common::empty_cluster()).expect("preview");
    assert!(
        !p.steps.iter().any(|s| s.id.starts_with("db-")),
        "{:?}",
        ids(&p.steps)
    );
}

#[test]
fn a_running_database_is_stopped_before_a_new_sync_is_worked_on() {
    let params = common::params();
    let mut o = common::after_migration(&params);
    // A later final sync (another run) brought new data.
    let mut sync = uyuni_core::builders::data_sync::data_sync_job(&params);
    sync.metadata.name = Some("uyuni-data-sync-20261201000000".into());
    sync.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::from_second(4_000_000_000).expect("time"),
    ));
    o.insert(Object::Job(common::finished(sync, true)));
    o.insert(common::extracted_secret(
        "uyuni-data-sync-20261201000000",
        "s3cret pass#1",
        Some("-----BEGIN ENCRYPTED PRIVATE KEY-----\nK\n-----END ENCRYPTED PRIVATE KEY-----\n"),
    ));
    let plan = plan(&params, &o).expect("plan");
    let next = plan.next_step().expect("work to do");
    assert_eq!((next.id.as_str(), next.op), ("server-stop", Op::Scale));
    let o = simulate(&o, &params.namespace, next);
    let plan = uyuni_core::plan(&params, &o).expect("plan");
    let next = plan.next_step().expect("work to do");
    assert_eq!(next.id, "db-stop");
    assert_eq!(next.op, Op::Scale);
    let after = simulate(&o, &params.namespace, next);
    let plan = uyuni_core::plan(&params, &after).expect("plan");
    assert_eq!(plan.next_step().map(|s| s.id.as_str()), Some("db-fixup"));
}

#[test]
fn a_failed_database_job_is_retried_under_a_new_name_and_the_failed_one_kept() {
    let params = common::params();
    let mut o = common::after_sync(&params);
    let data = o.extracted().expect("data").expect("data");
    let failed = common::finished(
        database::fixup_job(&params, &data, uyuni_core::pg::Upgrade::Needed { from: 16 }),
        false,
    );
    let failed_name = failed.metadata.name.clone().expect("name");
    o.insert(Object::Job(failed));
    let plan = plan(&params, &o).expect("plan");
    let next = plan.next_step().expect("next");
    assert_eq!(next.id, "db-fixup");
    assert_eq!(next.op, Op::RunJob);
    assert!(next.reason.contains(&failed_name), "{}", next.reason);
    assert_ne!(next.target.name, failed_name);
}

#[test]
fn a_running_database_job_is_awaited() {
    let params = common::params();
    let mut o = common::after_sync(&params);
    let data = o.extracted().expect("data").expect("data");
    o.insert(Object::Job(database::upgrade_job(&params, &data, Some(16))));
    o.insert(Object::PersistentVolumeClaim(
        uyuni_core::builders::pvc::pvc(common::NAMESPACE, &database::upgraded_claim(&params)),
    ));
    let fixup = common::finished(
        database::fixup_job(&params, &data, uyuni_core::pg::Upgrade::Needed { from: 16 }),
        true,
    );
    o.insert(Object::Job(fixup));
    let plan = plan(&params, &o).expect("plan");
    let next = plan.next_step().expect("next");
    assert_eq!((next.id.as_str(), next.op), ("db-upgrade", Op::AwaitJob));
}

/// The pod of the `db` Deployment at the end of a preview.
fn db_pod(p: &uyuni_core::preview::Preview) -> &k8s_openapi::api::core::v1::PodSpec {
    p.end
        .deployment("db")
        .and_then(|d| d.spec.as_ref())
        .and_then(|s| s.template.spec.as_ref())
        .expect("the db pod")
}

#[test]
fn the_db_pod_mounts_db_cert_as_the_chart_does() {
    let params = common::params();
    let p = preview(&params, &common::after_sync(&params)).expect("preview");
    let pod = db_pod(&p);
    let secret = pod
        .volumes
        .iter()
        .flatten()
        .find_map(|v| v.secret.as_ref().map(|s| (v.name.clone(), s)))
        .expect("a Secret volume");
    assert_eq!(secret.1.secret_name.as_deref(), Some("db-cert"));
    let items: Vec<(&str, &str, Option<i32>)> = secret
        .1
        .items
        .iter()
        .flatten()
        .map(|i| (i.key.as_str(), i.path.as_str(), i.mode))
        .collect();
    assert_eq!(
        items,
        [
            ("tls.crt", "tls/certs/spacewalk.crt", None),
            ("tls.key", "tls/private/pg-spacewalk.key", Some(0o440)),
            (
                "ca.crt",
                "trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT",
                None
            ),
        ]
    );
    // The key is readable through the group, which is postgres's: fsGroup.
    assert_eq!(
        pod.security_context.as_ref().and_then(|c| c.fs_group),
        Some(999)
    );
    let mount = pod.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == secret.0)
        .expect("mounted");
    assert_eq!(mount.mount_path, "/etc/pki");
    assert_eq!(mount.read_only, Some(true));
}

#[test]
fn the_data_directory_is_made_owner_only_before_postgresql_starts() {
    let params = common::params();
    let p = preview(&params, &common::after_sync(&params)).expect("preview");
    let pod = db_pod(&p);
    let init = pod.init_containers.as_ref().expect("init containers");
    assert_eq!(init.len(), 1);
    let c = &init[0];
    assert_eq!(
        c.command.as_deref(),
        Some(
            &[
                "chmod".to_owned(),
                "0700".to_owned(),
                "/var/lib/pgsql/data".to_owned()
            ][..]
        )
    );
    assert_eq!(
        c.image, pod.containers[0].image,
        "the DB image: no other image to pull"
    );
    let ctx = c.security_context.as_ref().expect("security context");
    assert_eq!((ctx.run_as_user, ctx.run_as_group), (Some(999), Some(999)));
    assert!(
        c.volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path == "/var/lib/pgsql/data"),
        "the data volume"
    );
}

/// The re-hash Job's pod.
fn passwords_pod(p: &uyuni_core::preview::Preview) -> k8s_openapi::api::core::v1::PodSpec {
    let Some(Action::RunJob { job, .. }) = p
        .executed
        .iter()
        .find(|s| s.id == "db-passwords")
        .map(|s| &s.action)
    else {
        panic!("db-passwords Job: {:?}", ids(&p.executed));
    };
    job.spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .expect("pod")
}

#[test]
fn md5_passwords_are_rehashed_as_postgres_on_the_db_claim_with_the_secrets_values() {
    let params = common::params();
    for (version, claim) in [("16", "var-pgsql18"), ("18", "var-pgsql")] {
        let o = with_pg_version(common::after_sync(&params), version);
        let p = preview(&params, &o).expect("preview");
        let pod = passwords_pod(&p);
        let c = &pod.containers[0];
        assert_eq!(
            c.image.as_deref(),
            Some(params.spec.image.database.as_str()),
            "the DB image has pg_ctl and psql 18"
        );
        let sc = pod.security_context.as_ref().expect("security context");
        assert_eq!(
            (sc.run_as_user, sc.run_as_group, sc.fs_group),
            (Some(999), Some(999), Some(999))
        );
        let mounts: Vec<(String, String)> = c
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| (m.name.clone(), m.mount_path.clone()))
            .collect();
        assert!(
            mounts.contains(&(claim.to_owned(), "/var/lib/pgsql/data".to_owned())),
            "{version}: {mounts:?}"
        );
        assert_eq!(
            claim_of(p.end.deployment("db").expect("db")).as_deref(),
            Some(claim),
            "the claim the db Deployment runs on"
        );
        // The passwords come from the credential Secrets, never as values.
        let from_secret = |name: &str| {
            c.env
                .iter()
                .flatten()
                .find(|e| e.name == name)
                .and_then(|e| e.value_from.as_ref())
                .and_then(|v| v.secret_key_ref.as_ref())
                .map(|r| (r.name.clone(), r.key.clone()))
        };
        assert_eq!(
            from_secret("MANAGER_PASS"),
            Some(("db-credentials".into(), "password".into()))
        );
        assert_eq!(
            from_secret("REPORT_DB_PASS"),
            Some(("reportdb-credentials".into(), "password".into()))
        );
        let job_text = serde_json::to_string(&pod).expect("json");
        assert!(!job_text.contains("s3cret pass#1"), "a password in the Job");
    }
}

#[test]
fn a_database_step_missing_after_the_server_ran_is_never_run_on_its_data() {
    // A migration done before a database step existed (the re-hash, say), or whose Job was
    // deleted: the server has written to the database since, and a Job on the data now would
    // stop it and change what it wrote. The step is shown, not run.
    let params = common::params();
    let mut o = common::after_migration(&params);
    let rehash: Vec<String> = o
        .jobs_for_step("db-passwords")
        .iter()
        .filter_map(|j| j.metadata.name.clone())
        .collect();
    assert_eq!(rehash.len(), 1);
    o.objects
        .remove(&uyuni_core::ObjectRef::new(Kind::Job, rehash[0].clone()));
    let p = preview(&params, &o).expect("preview");
    assert!(p.executed.is_empty(), "{:?}", ids(&p.executed));
    let step = p
        .steps
        .iter()
        .find(|s| s.id == "db-passwords")
        .expect("the step is shown");
    assert_eq!(step.op, Op::Unchanged);
    assert!(
        step.reason
            .contains("not run: Deployment uyuni runs on the data of Job"),
        "{}",
        step.reason
    );
    assert!(deployment_ready(p.end.deployment("db").expect("db")));
}
