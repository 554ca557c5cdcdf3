//! Property tests of the planner and the simulation.
//!
//! Invariants, numbered as the failures report them:
//! 1. `plan` is deterministic: the same inputs give a byte-identical serialized plan.
//! 2. From any generated cluster state where planning succeeds, iterating `plan`/`simulate`
//!    reaches a plan with nothing to do within `MAX_STEPS` steps.
//! 3. Re-planning that end state plans nothing.
//! 4. Order: the namespace comes before every other write, every write comes before the
//!    data-sync Job, and at most one data-sync Job is run or awaited.
//! 5. An existing PersistentVolumeClaim is never written (never recreated, never resized).
//! 6. No secret value (SSH private key, database passwords, CA key) appears in any printable
//!    output: the human preview, the manifests stream, the serialized plan.

mod common;

use proptest::prelude::*;
use uyuni_core::builders::{data_sync, migration};
use uyuni_core::object::Kind;
use uyuni_core::preview::MAX_STEPS;
use uyuni_core::{Action, MigrateParams, Object, Observed, Op, plan, preview, render};

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
                password: format!("PW{password}"),
            },
        )
}

fn build(state: &State) -> (MigrateParams, Observed) {
    let key = common::private_key(&state.key_marker);
    let mut args = common::args_with_ssh(&key);
    args.prepare = state.prepare;
    let with_flags = MigrateParams::from_args(&args).expect("valid");
    if !state.ssh_flags {
        args.ssh_key_private = None;
        args.ssh_key_public = None;
        args.ssh_known_hosts = None;
    }
    let params = MigrateParams::from_args(&args).expect("valid");

    let mut o = Observed::default();
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
    for (claim, exists) in params.volumes.iter().zip(&state.pvcs) {
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
            o.insert(common::extracted_secret(
                &job_name,
                &state.password,
                Some(&format!("CAKEY{}", state.key_marker)),
            ));
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
    fn invariants_2_to_5_converge_in_order(s in state()) {
        let (params, observed) = build(&s);
        let preview = preview(&params, &observed).expect("plannable state");
        // 2
        prop_assert!(preview.executed.len() <= MAX_STEPS);
        prop_assert!(preview.final_plan.is_done(), "did not converge: {:?}", preview.final_plan.next_step());
        // 3
        let again = plan(&params, &preview.end).expect("end state plans");
        prop_assert!(again.is_done());
        prop_assert_eq!(serde_json::to_vec(&again).expect("json"), serde_json::to_vec(&preview.final_plan).expect("json"));
        // 4
        let ids: Vec<&str> = preview.executed.iter().map(|s| s.id.as_str()).collect();
        if let Some(pos) = ids.iter().position(|i| *i == "namespace") {
            prop_assert_eq!(pos, 0);
        }
        let jobs = preview.executed.iter().filter(|s| matches!(s.op, Op::RunJob | Op::AwaitJob)).count();
        let first_job = preview.executed.iter().position(|s| matches!(s.op, Op::RunJob | Op::AwaitJob));
        if let Some(first) = first_job {
            // A Job still running from before is awaited first; a new one comes after every write.
            if preview.executed[first].op == Op::RunJob {
                prop_assert!(preview.executed[first..].iter().all(|s| s.op != Op::Create && s.op != Op::Update));
            }
        }
        prop_assert!(jobs <= 2, "jobs: {jobs}");
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
            render::human_preview(&preview.steps, &observed, 3),
            render::manifests_yaml(&preview.steps),
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
        }
    }
}
