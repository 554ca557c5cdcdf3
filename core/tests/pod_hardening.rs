//! The pod security settings of the Deployments (`builders::hardening`) and their rollout: a
//! server written by a version without them keeps its pods on a plain re-run of `install` or
//! `migrate` (no restart for the tool's update), and gets them when its pod template changes
//! for another reason, such as `upgrade`'s images; a change outside the template (replicas)
//! leaves an old template as it is.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::PodSpec;
use uyuni_core::builders::hardening::SKIP_ANNOTATION_PREFIX;
use uyuni_core::params::InstallParams;
use uyuni_core::plan::Planner;
use uyuni_core::{Action, Object, Observed, Op, preview};

use crate::{common, upgrade};

fn pod(d: &Deployment) -> &PodSpec {
    d.spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod")
}

fn hardened(d: &Deployment) -> bool {
    let pod = pod(d);
    pod.security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
        .is_some_and(|p| p.type_ == "RuntimeDefault")
        && pod.automount_service_account_token == Some(false)
        && pod.containers.iter().all(|c| c.resources.is_some())
}

/// A Deployment as the version before the hardening wrote it.
fn as_before(mut d: Deployment) -> Deployment {
    if let Some(a) = d.metadata.annotations.as_mut() {
        a.retain(|k, _| !k.starts_with(SKIP_ANNOTATION_PREFIX));
    }
    if let Some(pod) = d.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
        pod.automount_service_account_token = None;
        if let Some(sc) = pod.security_context.as_mut() {
            sc.seccomp_profile = None;
        }
        if pod.security_context == Some(Default::default()) {
            pod.security_context = None;
        }
        for c in pod
            .containers
            .iter_mut()
            .chain(pod.init_containers.iter_mut().flatten())
        {
            c.resources = None;
            if let Some(sc) = c.security_context.as_mut() {
                sc.allow_privilege_escalation = None;
                if let Some(caps) = sc.capabilities.as_mut() {
                    caps.drop = None;
                }
                if sc.capabilities == Some(Default::default()) {
                    sc.capabilities = None;
                }
            }
            if c.security_context == Some(Default::default()) {
                c.security_context = None;
            }
        }
    }
    d
}

/// `o` with every Deployment as the version before the hardening wrote it.
fn written_before(o: &Observed) -> Observed {
    let mut o = o.clone();
    let deployments: Vec<Deployment> = o
        .objects
        .values()
        .filter_map(|obj| match obj {
            Object::Deployment(d) => Some(d.clone()),
            _ => None,
        })
        .collect();
    assert!(
        deployments.len() >= 3,
        "the server's Deployments: {deployments:?}"
    );
    for d in deployments {
        assert!(
            hardened(&d),
            "written now without the hardening: {:?}",
            d.metadata.name
        );
        o.insert(Object::Deployment(as_before(d)));
    }
    o
}

fn deployments(o: &Observed) -> Vec<&Deployment> {
    o.objects
        .values()
        .filter_map(|obj| match obj {
            Object::Deployment(d) => Some(d),
            _ => None,
        })
        .collect()
}

fn install_params(hub: u32) -> InstallParams {
    let mut args = crate::install::install_args();
    args.spec.hubxmlrpc_replicas = Some(hub);
    args.spec.tftp_host_network = Some(true);
    InstallParams::from_args(&args).expect("valid")
}

#[test]
fn pod_hardening_an_installed_server_written_before_is_kept_on_a_plain_rerun() {
    let params = install_params(1);
    let end = preview(&params, &common::empty_cluster())
        .expect("plans")
        .end;
    let before = written_before(&end);
    let plan = params.plan(&before).expect("plans");
    for step in plan.steps.iter().filter(|s| s.id.ends_with("-deployment")) {
        assert_eq!(step.op, Op::Unchanged, "{}: {}", step.id, step.reason);
    }
    assert!(plan.is_done(), "{:#?}", plan.steps);
}

#[test]
fn pod_hardening_a_migrated_server_written_before_is_kept_on_a_plain_rerun() {
    let (params, end) = crate::rerun_safety::finished();
    let before = written_before(&end);
    let plan = uyuni_core::plan::plan(&params, &before).expect("plans");
    assert!(plan.is_done(), "{:#?}", plan.steps);
}

#[test]
fn pod_hardening_arrives_with_an_upgrades_new_images() {
    let start = written_before(&upgrade::installed());
    let (_, end) = upgrade::run(
        &upgrade::upgrade_to("2026.04"),
        &start,
        &upgrade::same_major,
    )
    .expect("runs");
    let all = deployments(&end);
    assert!(!all.is_empty());
    for d in all {
        assert!(
            hardened(d),
            "{:?} not hardened by the upgrade",
            d.metadata.name
        );
        assert!(
            d.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.keys().any(|k| k.starts_with(SKIP_ANNOTATION_PREFIX))),
            "{:?} has no skip annotation",
            d.metadata.name
        );
    }
}

#[test]
fn pod_hardening_a_replica_change_leaves_an_old_template_alone() {
    let end = preview(&install_params(1), &common::empty_cluster())
        .expect("plans")
        .end;
    let before = written_before(&end);
    let live = before
        .deployment(uyuni_core::builders::server::HUB_DEPLOYMENT)
        .expect("hub")
        .clone();
    let plan = install_params(2).plan(&before).expect("plans");
    let step = plan
        .steps
        .iter()
        .find(|s| s.id == "hub-xmlrpc-deployment")
        .expect("the hub's step");
    let Action::Apply(object) = &step.action else {
        panic!("the new replica count is not written: {step:?}");
    };
    let Object::Deployment(written) = &**object else {
        panic!("not a Deployment")
    };
    let spec = written.spec.as_ref().expect("spec");
    assert_eq!(spec.replicas, Some(2));
    assert_eq!(
        spec.template,
        live.spec.as_ref().expect("spec").template,
        "the pods would restart"
    );
}

/// The data-sync Job is hardened as every Job, and identified as the version before built it:
/// the tool's update does not sync the data again.
#[test]
fn pod_hardening_leaves_the_data_syncs_identity_as_it_was() {
    let params = crate::rerun_safety::finished().0;
    let job = uyuni_core::builders::data_sync::data_sync_job(&params);
    let mut spec = job.spec.clone().expect("spec");
    let pod = spec.template.spec.as_mut().expect("pod");
    assert_eq!(
        pod.security_context
            .as_ref()
            .and_then(|s| s.seccomp_profile.as_ref())
            .map(|p| p.type_.as_str()),
        Some("RuntimeDefault")
    );
    for c in pod
        .containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
    {
        let sc = c.security_context.as_ref().expect("a security context");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{}", c.name);
        assert!(c.resources.is_some(), "{}", c.name);
    }
    // What the version before wrote: none of it.
    pod.security_context = None;
    for c in pod
        .containers
        .iter_mut()
        .chain(pod.init_containers.iter_mut().flatten())
    {
        c.security_context = None;
        c.resources = None;
    }
    let annotations = job.metadata.annotations.expect("annotations");
    assert_eq!(
        annotations.get(uyuni_core::labels::SPEC_HASH_ANNOTATION),
        Some(&uyuni_core::builders::data_sync::spec_hash(&spec))
    );
}

/// The PodSecurity check sees the pods as they are written now: the server needs
/// `privileged` (CAP_SYS_ADMIN), every other pod `baseline` at most, as docs/security.md says.
#[test]
fn pod_hardening_leaves_every_pod_but_the_server_within_baseline() {
    use uyuni_core::pod_security::{Level, pods, required};
    let (params, _) = crate::rerun_safety::finished();
    let all = pods(&params);
    assert!(all.len() > 10, "{}", all.len());
    for (name, spec) in &all {
        let need = required(spec);
        if name == "Deployment uyuni" {
            assert_eq!(need.level, Level::Privileged, "{name}");
            continue;
        }
        assert!(
            need.level <= Level::Baseline,
            "{name} needs {:?}: {:?}",
            need.level,
            need.beyond_baseline
        );
        if name.starts_with("Deployment") {
            assert!(
                !need
                    .beyond_restricted
                    .iter()
                    .any(|r| r.contains("seccomp") || r.contains("escalation")),
                "{name}: {:?}",
                need.beyond_restricted
            );
        }
    }
}

fn server_container(o: &Observed) -> k8s_openapi::api::core::v1::Container {
    pod(o.deployment("uyuni").expect("uyuni")).containers[0].clone()
}

/// `--server-limits` on a server written before the hardening is a change the user asked for:
/// the Deployment is written, with the limits, the defaults of what was not given, and the
/// hardening; the skip of the memory limit check goes.
#[test]
fn pod_hardening_resource_flags_are_written_at_once_with_the_defaults() {
    let end = preview(&install_params(1), &common::empty_cluster())
        .expect("plans")
        .end;
    let before = written_before(&end);
    let mut args = crate::install::install_args();
    args.spec.hubxmlrpc_replicas = Some(1);
    args.spec.tftp_host_network = Some(true);
    args.spec.server_limits = Some("memory=16Gi".into());
    let params = InstallParams::from_args(&args).expect("valid");
    let plan = params.plan(&before).expect("plans");
    let step = plan
        .steps
        .iter()
        .find(|s| s.id == "server-deployment")
        .expect("the server's step");
    assert_eq!(step.op, Op::Update, "{}", step.reason);
    let after = uyuni_core::simulate(&before, &params.namespace, step);
    let d = after.deployment("uyuni").expect("uyuni");
    assert!(hardened(d));
    let resources = server_container(&after).resources.expect("resources");
    let q = |m: &Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >,
             k: &str| { m.as_ref().and_then(|m| m.get(k)).map(|q| q.0.clone()) };
    assert_eq!(q(&resources.limits, "memory").as_deref(), Some("16Gi"));
    assert_eq!(q(&resources.limits, "cpu"), None);
    assert_eq!(q(&resources.requests, "memory").as_deref(), Some("4Gi"));
    let annotations = d.metadata.annotations.clone().unwrap_or_default();
    assert!(
        !annotations.values().any(|v| v.starts_with("CKV_K8S_13=")),
        "{annotations:?}"
    );
    assert!(annotations.values().any(|v| v.starts_with("CKV_K8S_11=")));
}

#[test]
fn pod_hardening_resource_flags_take_kubectls_form_only() {
    for bad in [
        "cpu",
        "cpu=lots",
        "gpu=1",
        "cpu=1,cpu=2",
        "memory=1.Gi",
        "memory=-1Gi",
        // Not kept by the API server as written: a run again would find the Deployment
        // changed.
        "cpu=1.5",
        "memory=1024Mi",
        "cpu=2000m",
        "memory=0.5Gi",
        "cpu=01",
    ] {
        let mut args = crate::install::install_args();
        args.spec.db_requests = Some(bad.into());
        let err = InstallParams::from_args(&args).expect_err(bad).to_string();
        assert!(
            err.contains("--db-requests") && err.contains("cpu=2,memory=8Gi"),
            "{err}"
        );
    }
    let mut args = crate::install::install_args();
    for good in [
        "cpu=1500m,memory=1536Mi",
        "cpu=4,memory=64Gi",
        "memory=1073741825",
    ] {
        args.spec.db_requests = Some(good.into());
        assert!(InstallParams::from_args(&args).is_ok(), "{good}");
    }
}

/// The Jobs whose scripts write only to their volumes (the image checks and inspections, the
/// CA key, the database's backup and restore copies) run with a read-only root and an emptyDir
/// at `/tmp`; every other Job keeps a writable root and says why (CKV_K8S_22). What the
/// read-only root adds is no part of a database Job's identity, so the tool's update runs no
/// copy again.
#[test]
fn pod_hardening_gives_the_jobs_that_allow_it_a_read_only_root() {
    use uyuni_core::builders::hardening::{JOB_TMP_VOLUME, strip_job_pod};
    let (params, _) = crate::rerun_safety::finished();
    let migration = preview(&params, &common::after_sync(&params)).expect("plans");
    let checks = preview(&params, &common::empty_cluster()).expect("plans");
    let start = upgrade::installed();
    let (upgraded, end) = upgrade::run(
        &upgrade::upgrade_to(upgrade::TO),
        &start,
        &upgrade::same_major,
    )
    .expect("upgrades");
    let (back, _) = upgrade::run(
        &upgrade::rollback_of(&upgrade::upgrade_to(upgrade::TO)),
        &end,
        &upgrade::same_major,
    )
    .expect("rolls back");
    let jobs: Vec<k8s_openapi::api::batch::v1::Job> = migration
        .executed
        .iter()
        .chain(&checks.executed)
        .chain(&upgraded)
        .chain(&back)
        .filter_map(|s| match s.action.object() {
            Some(Object::Job(j)) => Some(j.clone()),
            _ => None,
        })
        .collect();
    let read_only = |step: &str| {
        step.starts_with("image-check-")
            || step.starts_with("inspect-")
            || ["ca-key", "db-backup", "db-restore"].contains(&step)
    };
    let mut seen = std::collections::BTreeSet::new();
    for job in &jobs {
        let step = job
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(uyuni_core::labels::STEP_LABEL))
            .cloned()
            .unwrap_or_default();
        seen.insert((step.clone(), read_only(&step)));
        let skipped =
            job.metadata.annotations.iter().flatten().any(|(k, v)| {
                k.starts_with(SKIP_ANNOTATION_PREFIX) && v.starts_with("CKV_K8S_22=")
            });
        let pod = job
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .expect("pod");
        for c in &pod.containers {
            let ro = c
                .security_context
                .as_ref()
                .and_then(|s| s.read_only_root_filesystem);
            assert_eq!(ro == Some(true), read_only(&step), "{step}: {ro:?}");
            if read_only(&step) {
                let tmp = c
                    .volume_mounts
                    .iter()
                    .flatten()
                    .find(|m| m.mount_path == "/tmp")
                    .unwrap_or_else(|| panic!("{step}: no /tmp"));
                let volume = pod
                    .volumes
                    .iter()
                    .flatten()
                    .find(|v| v.name == tmp.name)
                    .expect("the /tmp volume");
                assert!(volume.empty_dir.is_some(), "{step}: {volume:?}");
            }
        }
        assert_eq!(skipped, !read_only(&step), "{step}");
        // Stripped for the identity, nothing of it is left.
        let mut stripped = pod.clone();
        strip_job_pod(&mut stripped);
        assert!(
            !stripped
                .volumes
                .iter()
                .flatten()
                .any(|v| v.name == JOB_TMP_VOLUME),
            "{step}"
        );
        for c in &stripped.containers {
            assert!(
                !c.volume_mounts
                    .iter()
                    .flatten()
                    .any(|m| m.name == JOB_TMP_VOLUME),
                "{step}"
            );
            assert!(
                c.security_context
                    .as_ref()
                    .and_then(|s| s.read_only_root_filesystem)
                    .is_none(),
                "{step}"
            );
        }
    }
    for step in [
        "image-check-server",
        "ca-key",
        "db-backup",
        "db-restore",
        "db-fixup",
    ] {
        assert!(
            seen.iter().any(|(s, _)| s == step),
            "{step} not seen: {seen:?}"
        );
    }
}

/// `restart` replaces every pod anyway, so it carries the pod security settings to a server
/// written before them, in the same write as its mark, and nothing else of the template
/// changes; the database, which restart leaves running, keeps its pods; a server that has them
/// is restarted with its template as it is.
#[test]
fn pod_hardening_arrives_with_a_restart() {
    use uyuni_core::plan::lifecycle::Lifecycle;
    let end = preview(&install_params(1), &common::empty_cluster())
        .expect("plans")
        .end;
    let before = written_before(&end);
    let restart = crate::lifecycle::params(Lifecycle::Restart);
    let run = preview(&restart, &before).expect("restarts");
    let mark = uyuni_core::labels::RESTARTED_AT_ANNOTATION;
    let mut restarted = 0;
    for d in deployments(&run.end) {
        let name = d.metadata.name.clone().unwrap_or_default();
        let old = before.deployment(&name).expect("was there");
        if name == uyuni_core::catalogue::names::DB_DEPLOYMENT {
            assert_eq!(d, old, "the database was touched");
            continue;
        }
        restarted += 1;
        assert!(hardened(d), "{name} restarted without the hardening");
        assert!(
            d.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.keys().any(|k| k.starts_with(SKIP_ANNOTATION_PREFIX))),
            "{name}: no skip annotation"
        );
        // The mark and the hardening, nothing else.
        let mut back = as_before(d.clone());
        if let Some(a) = back
            .spec
            .as_mut()
            .and_then(|s| s.template.metadata.as_mut())
            .and_then(|m| m.annotations.as_mut())
        {
            assert!(a.remove(mark).is_some(), "{name}: not marked");
            if a.is_empty() {
                back.spec
                    .as_mut()
                    .expect("spec")
                    .template
                    .metadata
                    .as_mut()
                    .expect("m")
                    .annotations = None;
            }
        }
        assert_eq!(
            back.spec.as_ref().map(|s| &s.template),
            old.spec.as_ref().map(|s| &s.template),
            "{name}: the restart changed more than the pod security settings"
        );
    }
    assert!(restarted >= 3, "{restarted}");
    // Restarted again: the templates have them, the patch carries no template.
    let again = uyuni_core::plan::lifecycle::plan(
        &uyuni_core::plan::lifecycle::LifecycleParams {
            server: uyuni_core::params::ServerParams {
                run_id: "20261205000000".to_owned(),
                ..restart.server.clone()
            },
            ..restart.clone()
        },
        &run.end,
    )
    .expect("plans");
    let scales: Vec<_> = again
        .steps
        .iter()
        .filter_map(|s| match &s.action {
            Action::Scale { hardened, .. } => Some(hardened.is_some()),
            _ => None,
        })
        .collect();
    assert!(
        !scales.is_empty() && scales.iter().all(|h| !h),
        "{scales:?}"
    );
}
