//! Property tests of the planner and the simulation.
//!
//! Invariants, numbered as the failures report them:
//! 1. `plan` is deterministic: the same inputs give a byte-identical serialized plan.
//! 2. From any generated cluster state where planning succeeds, iterating `plan`/`simulate`
//!    reaches a plan with nothing to do within `MAX_STEPS` steps.
//! 3. Re-planning that end state plans nothing.
//! 4. Order: the namespace comes before every other write, the image checks come next and
//!    before every other write, every write of the sync phase comes before the data-sync Job,
//!    and at most one data-sync Job is run or awaited. The database
//!    phase comes after the sync, in the order fix-up → upgrade → `db` Deployment → ready →
//!    migration SQL, with the password re-hash after the upgrade and before the `db`
//!    Deployment. Secret `db-cert` (or its Certificate) is written and waited for before the
//!    `db` Deployment.
//! 5. An existing PersistentVolumeClaim is never written (never recreated, never resized).
//! 6. No secret value (SSH private key, database passwords, CA key) appears in any printable
//!    output: the human preview, the manifests stream, the serialized plan.
//! 7. After a final sync, the TFTP Deployment runs iff `--tftp` says so or, without the flag,
//!    the source served TFTP; Service tftp is written iff it runs and not on the host network.
//! 8. No Job that works on the database's data (fix-up, upgrade, re-hash) is started while the
//!    `db` Deployment or the server runs: replaying the executed steps, each such Job starts
//!    with both absent or scaled to 0.
//! 9. No plan contains a data-sync step that runs or waits for a copy (`data-sync`,
//!    `prepare-sync`) while the server Deployment `uyuni` has replicas > 0.
//! 10. No plan stops the source (its next step creates the final data-sync Job) while an input
//!     a later step needs is missing or unknown: the data a copy made while the source served
//!     is in Secret `uyuni-migration-data`, and on it the CA key's password (when its key is
//!     reused and not yet decrypted), the TFTP choice and the PostgreSQL version are settled.
//! 11. The preview's step list numbers exactly the steps carried out, in the order they are
//!     carried out (as the run's progress numbers them); every other step is unnumbered.

use crate::common;

use proptest::prelude::*;
use uyuni_core::builders::{data_sync, database, migration};
use uyuni_core::object::Kind;
use uyuni_core::observed::deployment_stopped;
use uyuni_core::preview::MAX_STEPS;
use uyuni_core::{Action, MigrateParams, Object, Observed, Op, plan, preview, render, simulate};

#[derive(Debug, Clone)]
enum JobFixture {
    None,
    Running,
    Failed,
    Succeeded,
    SucceededOtherSpec,
}

#[derive(Debug, Clone)]
struct State {
    namespace: bool,
    ssh_objects: bool,
    ssh_flags: bool,
    pvcs: Vec<bool>,
    pvc_sizes_differ: bool,
    rbac: [bool; 3],
    data_secret: bool,
    job: JobFixture,
    prepare: bool,
    key_marker: String,
    password: String,
    db: DbState,
    /// Per image check Job (server, database, upgrade): 0 none, 1 running, 2 failed, 3 succeeded.
    image_checks: [u8; 3],
    tftp: TftpState,
}

/// The TFTP choice: the source's `tftp` value (`None`: not recorded), the flag, the host
/// network. Unrecorded data only comes with a flag (planning refuses otherwise, tested in
/// `tftp_plan.rs`).
#[derive(Debug, Clone)]
struct TftpState {
    source: Option<bool>,
    flag: Option<bool>,
    host_network: bool,
}

fn tftp_state() -> impl Strategy<Value = TftpState> {
    (
        proptest::option::of(any::<bool>()),
        proptest::option::of(any::<bool>()),
        any::<bool>(),
    )
        .prop_map(|(source, flag, host_network)| {
            let flag = if source.is_none() {
                Some(flag.unwrap_or(true))
            } else {
                flag
            };
            TftpState {
                source,
                flag,
                // --tftp=false with the host network is refused as contradictory.
                host_network: host_network && flag != Some(false),
            }
        })
}

/// The database phase, when a final sync has succeeded: the synced major, what exists of the
/// `db` Deployment, and how far the database Jobs got.
#[derive(Debug, Clone)]
struct DbState {
    pg_version: &'static str,
    /// 0: absent, 1: running, 2: stopped.
    deployment: u8,
    upgraded_claim: bool,
    /// Per Job (fix-up, upgrade, re-hash, SQL): 0 none, 1 running, 2 failed, 3 succeeded.
    jobs: [u8; 4],
    /// The server Deployment exists (from an earlier complete run) and runs.
    server: bool,
}

fn db_state() -> impl Strategy<Value = DbState> {
    (
        prop_oneof![Just("14"), Just("16"), Just("18")],
        0u8..3,
        any::<bool>(),
        [0u8..4, 0u8..4, 0u8..4, 0u8..4],
        any::<bool>(),
    )
        .prop_map(
            |(pg_version, deployment, upgraded_claim, jobs, server)| DbState {
                pg_version,
                deployment,
                upgraded_claim,
                jobs,
                server,
            },
        )
}

fn state() -> impl Strategy<Value = State> {
    let catalogue = uyuni_core::volumes::CATALOGUE.len();
    (
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        proptest::collection::vec(any::<bool>(), catalogue),
        any::<[bool; 3]>(),
        any::<bool>(),
        prop_oneof![
            Just(JobFixture::None),
            Just(JobFixture::Running),
            Just(JobFixture::Failed),
            Just(JobFixture::Succeeded),
            Just(JobFixture::SucceededOtherSpec),
        ],
        any::<bool>(),
        "[A-Za-z0-9]{12,24}",
        "[ -~]{8,24}",
        (db_state(), [0u8..4, 0u8..4, 0u8..4]),
        tftp_state(),
    )
        .prop_map(
            |(
                (namespace, ssh_objects, ssh_flags, pvc_sizes_differ),
                pvcs,
                rbac,
                data_secret,
                job,
                prepare,
                key_marker,
                password,
                (db, image_checks),
                tftp,
            )| State {
                namespace,
                // Without flags, the objects must exist (else planning refuses, tested elsewhere).
                ssh_objects: ssh_objects || !ssh_flags,
                ssh_flags,
                pvcs,
                pvc_sizes_differ,
                rbac,
                data_secret,
                job,
                prepare,
                key_marker: format!("KEY{key_marker}"),
                db,
                image_checks,
                password: format!("PW{password}"),
                tftp,
            },
        )
}

fn build(state: &State) -> (MigrateParams, Observed) {
    let key = common::private_key(&state.key_marker);
    let mut args = common::args_with_ssh(&key);
    args.prepare = state.prepare;
    args.spec.tftp = state.tftp.flag;
    args.spec.tftp_host_network = Some(state.tftp.host_network);
    args.ssl_password = Some(uyuni_core::secret::SecretString::new(format!(
        "CAPW{}",
        state.password
    )));
    let with_flags = MigrateParams::from_args(&args).expect("valid");
    if !state.ssh_flags {
        args.ssh_key_private = None;
        args.ssh_key_public = None;
        args.ssh_known_hosts = None;
    }
    let params = MigrateParams::from_args(&args).expect("valid");

    let mut o = common::empty_cluster();
    if state.namespace {
        o.insert(common::namespace());
    }
    if state.ssh_objects {
        o.insert(Object::Secret(migration::ssh_key_secret(
            common::NAMESPACE,
            with_flags.ssh_key.as_ref().expect("key"),
        )));
        o.insert(Object::ConfigMap(migration::ssh_config_map(
            common::NAMESPACE,
            with_flags.ssh_config.as_ref().expect("ssh"),
        )));
    }
    for (claim, exists) in params.spec.volumes.iter().zip(&state.pvcs) {
        if *exists {
            let mut pvc = common::pvc_of(&params, &claim.name);
            let requests = pvc
                .spec
                .as_mut()
                .and_then(|s| s.resources.as_mut())
                .and_then(|r| r.requests.as_mut());
            if let Some(r) = requests.filter(|_| state.pvc_sizes_differ) {
                r.insert(
                    "storage".into(),
                    k8s_openapi::apimachinery::pkg::api::resource::Quantity("3Mi".into()),
                );
            }
            o.insert(Object::PersistentVolumeClaim(pvc));
        }
    }
    for (job, check) in uyuni_core::builders::image_check::jobs(&params)
        .into_iter()
        .zip(state.image_checks)
    {
        match check {
            1 => o.insert(Object::Job(job)),
            2 => o.insert(Object::Job(common::finished(job, false))),
            3 => o.insert(Object::Job(common::finished(job, true))),
            _ => {}
        }
    }
    if state.rbac[0] {
        o.insert(Object::ServiceAccount(migration::service_account(
            common::NAMESPACE,
        )));
    }
    if state.rbac[1] {
        o.insert(Object::Role(migration::role(common::NAMESPACE)));
    }
    if state.rbac[2] {
        o.insert(Object::RoleBinding(migration::role_binding(
            common::NAMESPACE,
        )));
    }
    let mut job = data_sync::data_sync_job(&params);
    job.metadata.name = Some("uyuni-data-sync-20261128090000".into());
    job.metadata.creation_timestamp = None;
    let job_name = job.metadata.name.clone().expect("name");
    match state.job {
        JobFixture::None => {}
        JobFixture::Running => o.insert(Object::Job(job)),
        JobFixture::Failed => o.insert(Object::Job(common::finished(job, false))),
        JobFixture::Succeeded | JobFixture::SucceededOtherSpec => {
            if matches!(state.job, JobFixture::SucceededOtherSpec) {
                job.metadata
                    .annotations
                    .as_mut()
                    .expect("annotations")
                    .insert(
                        uyuni_core::labels::SPEC_HASH_ANNOTATION.into(),
                        "0000".into(),
                    );
            }
            o.insert(Object::Job(common::finished(job, true)));
            // A succeeded sync always left its data (the planner refuses otherwise).
            let mut data = common::extracted_secret(
                &job_name,
                &state.password,
                Some(&format!("CAKEY{}", state.key_marker)),
            );
            if let Object::Secret(secret) = &mut data
                && let Some(d) = secret.data.as_mut()
            {
                d.insert(
                    uyuni_core::scripts::data_keys::PG_VERSION.into(),
                    k8s_openapi::ByteString(state.db.pg_version.as_bytes().to_vec()),
                );
                match state.tftp.source {
                    Some(v) => d.insert(
                        uyuni_core::scripts::data_keys::TFTP.into(),
                        k8s_openapi::ByteString(v.to_string().into_bytes()),
                    ),
                    None => d.remove(uyuni_core::scripts::data_keys::TFTP),
                };
            }
            o.insert(data);
            if !state.prepare {
                insert_db_state(&params, &mut o, &state.db);
            }
        }
    }
    if state.data_secret && !o.contains(Kind::Secret, common::DATA_SECRET) {
        o.insert(common::extracted_secret(
            "uyuni-data-sync-20261101000000",
            &state.password,
            None,
        ));
    }
    (params, o)
}

/// The facts with the server answering to the source's name, as the states here were written.
fn source_facts(facts: &uyuni_core::resolve::Facts) -> uyuni_core::resolve::Facts {
    uyuni_core::resolve::Facts {
        fqdn: common::SOURCE.into(),
        ..facts.clone()
    }
}

/// Objects of the database phase as an interrupted or earlier run left them.
fn insert_db_state(params: &MigrateParams, o: &mut Observed, db: &DbState) {
    let Ok(Some(data)) = o.extracted() else {
        return;
    };
    // The version this state's database has, which the data may not say yet.
    let at_version = uyuni_core::ExtractedData {
        pg_version: db.pg_version.into(),
        ..data.clone()
    };
    let facts = uyuni_core::resolve::resolve(params, o, &at_version);
    let Ok(upgrade) = facts.pg.clone() else {
        return;
    };
    if db.deployment > 0 {
        let mut d = database::db_deployment(
            params,
            &uyuni_core::settings::ServerSettings::migrated(&data),
            &facts.db_claim,
        );
        if db.deployment == 2
            && let Some(spec) = d.spec.as_mut()
        {
            spec.replicas = Some(0);
        }
        o.insert(Object::Deployment(d));
    }
    if db.server {
        o.insert(Object::Deployment(
            uyuni_core::builders::server::server_deployment(
                params,
                &uyuni_core::settings::ServerSettings::migrated(&data),
                &source_facts(&facts),
            ),
        ));
    }
    if db.upgraded_claim {
        o.insert(Object::PersistentVolumeClaim(
            uyuni_core::builders::pvc::pvc(common::NAMESPACE, &database::upgraded_claim(params)),
        ));
    }
    let from = match upgrade {
        uyuni_core::pg::Upgrade::Needed { from } => Some(from),
        _ => None,
    };
    let jobs = [
        Some(database::fixup_job(params, &data, upgrade)),
        from.map(|f| database::upgrade_job(params, &data, Some(f))),
        Some(database::passwords_job(params, &data, upgrade)),
        Some(database::migration_sql_job(params, &data)),
    ];
    for (job, state) in jobs.into_iter().zip(db.jobs) {
        let Some(mut job) = job else { continue };
        job.metadata.name = job
            .metadata
            .name
            .map(|n| n.replace(common::RUN_ID, "20261128090000"));
        match state {
            1 => o.insert(Object::Job(job)),
            2 => o.insert(Object::Job(common::finished(job, false))),
            3 => o.insert(Object::Job(common::finished(job, true))),
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn invariant_1_plan_is_deterministic(s in state()) {
        let (params, observed) = build(&s);
        let a = plan(&params, &observed).map(|p| serde_json::to_vec(&p).expect("json"));
        let b = plan(&params, &observed.clone()).map(|p| serde_json::to_vec(&p).expect("json"));
        prop_assert_eq!(a, b);
    }

    #[test]
    fn invariants_2_to_5_7_and_11_converge_in_order(s in state()) {
        let (params, observed) = build(&s);
        let preview = preview(&params, &observed).expect("plannable state");
        // 2
        prop_assert!(preview.executed.len() <= MAX_STEPS);
        prop_assert!(preview.final_plan.is_done(), "did not converge: {:?}", preview.final_plan.next_step());
        // 11
        let numbered: Vec<&str> = preview
            .steps
            .iter()
            .zip(render::step_numbers(&preview.steps))
            .filter_map(|(s, n)| n.map(|_| s.id.as_str()))
            .collect();
        let carried_out: Vec<&str> = preview.executed.iter().map(|s| s.id.as_str()).collect();
        prop_assert_eq!(numbered, carried_out, "11. the listing's numbers");
        // 3
        let again = plan(&params, &preview.end).expect("end state plans");
        prop_assert!(again.is_done());
        prop_assert_eq!(serde_json::to_vec(&again).expect("json"), serde_json::to_vec(&preview.final_plan).expect("json"));
        // 4
        let ids: Vec<&str> = preview.executed.iter().map(|s| s.id.as_str()).collect();
        if let Some(pos) = ids.iter().position(|i| *i == "namespace") {
            prop_assert_eq!(pos, 0);
        }
        let is_check = |id: &str| id.starts_with("image-check-");
        if let Some(last_check) = ids.iter().rposition(|i| is_check(i)) {
            prop_assert!(
                ids[..last_check].iter().all(|i| is_check(i) || *i == "namespace"),
                "a write before the image checks: {ids:?}"
            );
        }
        let sync_end = ids.iter().rposition(|i| *i == "data-sync").map_or(0, |p| p + 1);
        let sync_phase: Vec<&uyuni_core::Step> = preview.executed[..sync_end]
            .iter()
            .filter(|s| !is_check(&s.id))
            .collect();
        let jobs = sync_phase.iter().filter(|s| matches!(s.op, Op::RunJob | Op::AwaitJob)).count();
        let first_job = sync_phase.iter().position(|s| matches!(s.op, Op::RunJob | Op::AwaitJob));
        if let Some(first) = first_job {
            // A Job still running from before is awaited first; a new one comes after every write.
            if sync_phase[first].op == Op::RunJob {
                prop_assert!(sync_phase[first..].iter().all(|s| s.op != Op::Create && s.op != Op::Update));
            }
        }
        prop_assert!(jobs <= 2, "jobs: {jobs}");
        let db_order = ["server-stop", "db-stop", "db-fixup", "db-upgrade", "db-passwords", "db-deployment", "db-ready", "db-migration-sql"];
        let positions: Vec<usize> = db_order
            .iter()
            .filter_map(|id| ids.iter().rposition(|i| i == id))
            .collect();
        prop_assert!(positions.windows(2).all(|w| w[0] < w[1]), "database order: {ids:?}");
        // The db pod mounts Secret db-cert: whatever writes or waits for it comes first.
        if let Some(deployment) = ids.iter().rposition(|i| *i == "db-deployment") {
            for tls in ["db-cert", "db-certificate", "db-certificate-ready"] {
                if let Some(p) = ids.iter().rposition(|i| *i == tls) {
                    prop_assert!(p < deployment, "{tls} after db-deployment: {ids:?}");
                }
            }
        }
        if let Some(first_db) = ids.iter().position(|i| i.starts_with("db-")) {
            prop_assert!(first_db >= sync_end, "database step before the sync ended: {ids:?}");
        }
        if params.prepare {
            prop_assert!(!ids.iter().any(|i| i.starts_with("db-")), "--prepare went past the sync");
        }
        // 7
        let synced_final = !params.prepare
            && matches!(s.job, JobFixture::Succeeded | JobFixture::SucceededOtherSpec);
        if synced_final {
            let wanted = s.tftp.flag.or(s.tftp.source).unwrap_or(false);
            let running = preview
                .end
                .deployment(uyuni_core::builders::tftp::DEPLOYMENT)
                .and_then(|d| d.spec.as_ref())
                .and_then(|spec| spec.replicas)
                .unwrap_or(0)
                > 0;
            prop_assert_eq!(running, wanted, "TFTP Deployment: {:?}", s.tftp);
            let service_written = preview.executed.iter().any(|step| step.id == "service-tftp");
            prop_assert_eq!(
                service_written,
                wanted && !s.tftp.host_network,
                "Service tftp: {:?}",
                s.tftp
            );
        }
        // 8
        let mut state = observed.clone();
        for step in &preview.executed {
            if step.op == Op::RunJob && ["db-fixup", "db-upgrade", "db-passwords"].contains(&step.id.as_str()) {
                for name in ["db", "uyuni"] {
                    let running = state.deployment(name).is_some_and(|d| !deployment_stopped(d));
                    prop_assert!(!running, "{} started while {name} runs: {ids:?}", step.id);
                }
            }
            state = simulate(&state, &params.namespace, step);
        }
        // 5
        for step in &preview.executed {
            if let Action::Apply(object) = &step.action
                && object.kind() == Kind::PersistentVolumeClaim
            {
                prop_assert!(
                    !observed.contains(Kind::PersistentVolumeClaim, object.name()),
                    "rewrote {}",
                    object.name()
                );
            }
        }
    }

    #[test]
    fn invariant_6_no_secret_in_printable_output(s in state()) {
        let (params, observed) = build(&s);
        let Ok(preview) = preview(&params, &observed) else { return Ok(()) };
        let outputs = [
            render::human_preview(&preview.steps, &observed, render::RenderOptions::default()),
            render::plan_json(&params.namespace, &preview.steps, &observed).to_string(),
            render::manifests_yaml(&preview.steps, false),
            serde_json::to_string(&preview.steps).expect("json"),
            serde_json::to_string(&plan(&params, &observed).expect("plan")).expect("json"),
            format!("{:?}", params),
        ];
        let key = common::private_key(&s.key_marker);
        let key_body = key.lines().nth(1).expect("body").to_owned();
        for out in &outputs {
            prop_assert!(!out.contains(&key_body), "private key leaked");
            prop_assert!(!out.contains(&s.key_marker), "key marker leaked");
            prop_assert!(!out.contains(&s.password), "password leaked");
            prop_assert!(!out.contains(&format!("CAPW{}", s.password)), "CA password leaked");
        }
    }
}

/// A state of [`state`], with what issue 18 is about laid over it: a server that runs, a copy
/// made while the source served with its data, and the CA password given or not.
#[derive(Debug, Clone)]
struct SafetyState {
    base: State,
    server_replicas: i32,
    /// The prepare copy's data: none, or with the CA key and/or the TFTP value.
    prepared: Option<(bool, bool)>,
    ca_password: bool,
    ca_password_secret: bool,
}

fn safety_state() -> impl Strategy<Value = SafetyState> {
    (
        state(),
        0i32..3,
        proptest::option::of((any::<bool>(), any::<bool>())),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(mut base, server_replicas, prepared, ca_password, ca_password_secret, focus)| {
                // Half the states with a prepare copy are final runs right before their sync,
                // where invariant 10 has something to check.
                if prepared.is_some() && focus {
                    base.prepare = false;
                    base.job = JobFixture::None;
                }
                SafetyState {
                    base,
                    server_replicas,
                    prepared,
                    ca_password,
                    ca_password_secret,
                }
            },
        )
}

fn build_safety(s: &SafetyState) -> (MigrateParams, Observed) {
    let (mut params, mut o) = build(&s.base);
    if !s.ca_password {
        params.ca_password = None;
    }
    if let Some((ca_key, tftp)) = s.prepared {
        let prepare = MigrateParams {
            prepare: true,
            ..params.clone()
        };
        let mut job = data_sync::data_sync_job(&prepare);
        job.metadata.name = Some("uyuni-data-sync-20261128080000".into());
        o.insert(Object::Job(common::finished(job, true)));
        let mut data = common::extracted_secret(
            "uyuni-data-sync-20261128080000",
            &s.base.password,
            ca_key.then_some("CAKEY"),
        );
        if let Object::Secret(secret) = &mut data
            && let Some(d) = secret.data.as_mut()
            && !tftp
        {
            d.remove(uyuni_core::scripts::data_keys::TFTP);
        }
        o.insert(data);
    }
    if s.ca_password_secret {
        o.insert(Object::Secret(
            uyuni_core::builders::tls::ca_password_secret(common::NAMESPACE, "stored"),
        ));
    }
    if s.server_replicas > 0
        && let Ok(Some(data)) = o.extracted()
    {
        let facts = uyuni_core::resolve::resolve(&params, &o, &data);
        let mut d = uyuni_core::builders::server::server_deployment(
            &params,
            &uyuni_core::settings::ServerSettings::migrated(&data),
            &source_facts(&facts),
        );
        if let Some(spec) = d.spec.as_mut() {
            spec.replicas = Some(s.server_replicas);
        }
        o.insert(Object::Deployment(d));
    }
    (params, o)
}

fn server_runs(o: &Observed) -> bool {
    o.deployment(uyuni_core::builders::server::SERVER_DEPLOYMENT)
        .is_some_and(|d| !deployment_stopped(d))
}

/// Invariant 10's inputs, judged on the state alone (not with the planner's own checks).
fn inputs_missing(params: &MigrateParams, o: &Observed) -> Option<String> {
    let Ok(Some(data)) = o.extracted() else {
        return Some("no extracted data".into());
    };
    let prepared = o.jobs_for_step(data_sync::STEP_ID).into_iter().any(|j| {
        j.metadata.name.as_deref() == Some(data.job.as_str())
            && j.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(uyuni_core::labels::SYNC_MODE_ANNOTATION))
                .map(String::as_str)
                == Some("prepare")
            && uyuni_core::observed::job_state(j) == uyuni_core::observed::JobState::Succeeded
    });
    if !prepared || data.placeholder {
        return Some(format!(
            "data of {} is not a finished prepare copy's",
            data.job
        ));
    }
    let password = params.ca_password.is_some()
        || o.contains(
            Kind::Secret,
            uyuni_core::catalogue::names::CA_PASSWORD_SECRET,
        );
    let key_in_place = o
        .secret(uyuni_core::catalogue::names::CA_SECRET)
        .is_some_and(|s| {
            uyuni_core::builders::tls::ca_secret_complete(
                s,
                &uyuni_core::builders::tls::ca_cert(&data),
            )
        });
    if data.ca_key.is_some() && params.spec.tls.third_party.is_none() && !password && !key_in_place
    {
        return Some("the CA key's password".into());
    }
    if data.tftp.is_none() && params.spec.tftp.enabled.is_none() {
        return Some("the TFTP choice".into());
    }
    if uyuni_core::pg::decide(Some(&data.pg_version)).is_err() {
        return Some("a supported PostgreSQL version".into());
    }
    None
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn invariants_9_and_10_no_copy_into_a_running_server_no_outage_with_an_input_missing(s in safety_state()) {
        let (params, observed) = build_safety(&s);
        let Ok(plan) = plan(&params, &observed) else { return Ok(()) };
        // 9
        if server_runs(&observed) {
            for step in &plan.steps {
                prop_assert!(
                    !(["data-sync", "prepare-sync"].contains(&step.id.as_str()) && step.action != Action::None),
                    "{} {:?} while the server runs", step.id, step.op
                );
            }
        }
        // 10
        if let Some(step) = plan.next_step().filter(|s| s.stops_source()) {
            let missing = inputs_missing(&params, &observed);
            prop_assert!(missing.is_none(), "{} stops the source without {:?}", step.id, missing);
        }
        // 9 along the whole simulated run, too.
        let mut stops_with_real_data = 0;
        if let Ok(preview) = preview(&params, &observed) {
            let mut state = observed.clone();
            for step in &preview.executed {
                if ["data-sync", "prepare-sync"].contains(&step.id.as_str()) {
                    prop_assert!(!server_runs(&state), "{} while the server runs", step.id);
                }
                // 10 along the run: where the copy's data is real (not the simulation's
                // placeholders, which a real run replaces by what the source said).
                let real = matches!(state.extracted(), Ok(Some(d)) if !d.placeholder);
                if step.stops_source() && real {
                    stops_with_real_data += 1;
                    let missing = inputs_missing(&params, &state);
                    prop_assert!(missing.is_none(), "{} stops the source without {:?}", step.id, missing);
                }
                state = simulate(&state, &params.namespace, step);
            }
        }
        // Counted so that a reader can check the case is reached (about 1 in 20 states).
        let _ = stops_with_real_data;
    }
}
