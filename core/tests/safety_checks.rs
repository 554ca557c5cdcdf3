//! Issue 18, the checks before any write that the planner makes on the observed state alone:
//! the PodSecurity level of the target namespace against the pods the migration builds, the
//! source whose copy the volumes hold, and the permissions every write of the run needs.

use crate::common;

use std::collections::BTreeMap;

use uyuni_core::access::{self, Access};
use uyuni_core::builders::data_sync;
use uyuni_core::labels;
use uyuni_core::object::Kind;
use uyuni_core::plan::PlanError;
use uyuni_core::pod_security::{self, Level};
use uyuni_core::{MigrateArgs, MigrateParams, Object, Observed, plan};

fn with_ns_labels(mut o: Observed, labels: &[(&str, &str)]) -> Observed {
    let mut ns = common::namespace();
    if let Object::Namespace(n) = &mut ns {
        n.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        );
    }
    o.insert(ns);
    o
}

fn params_with(edit: impl FnOnce(&mut MigrateArgs)) -> MigrateParams {
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    edit(&mut args);
    MigrateParams::from_args(&args).expect("valid")
}

#[test]
fn the_server_needs_privileged_from_its_pod_spec() {
    let (level, reasons) = pod_security::needed(&common::params());
    assert_eq!(level, Level::Privileged);
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("Deployment uyuni") && r.contains("SYS_ADMIN")),
        "{reasons:?}"
    );
    // --server-privileged: the reason is the pod's privileged flag, read from the spec.
    let privileged = params_with(|a| a.spec.server_privileged = Some(true));
    let (_, reasons) = pod_security::needed(&privileged);
    assert!(
        reasons.iter().any(|r| r.contains("is privileged")),
        "{reasons:?}"
    );
}

#[test]
fn an_enforced_baseline_namespace_is_refused_before_any_write_with_the_label_fix() {
    let params = common::params();
    for level in ["baseline", "restricted"] {
        let o = with_ns_labels(
            common::empty_cluster(),
            &[(pod_security::ENFORCE_LABEL, level)],
        );
        let err = plan(&params, &o).expect_err("refused");
        assert!(matches!(err, PlanError::PodSecurity { .. }), "{err}");
        let k = uyuni_core::kubectl::Kubectl {
            kubeconfig: Some("/k".into()),
            context: Some("c".into()),
            migrate_flags: Vec::new(),
            ..Default::default()
        };
        let text = err.render(&k);
        assert!(
            text.contains(&format!("pod-security.kubernetes.io/enforce={level}"))
                && text.contains("SYS_ADMIN")
                && text.contains("`kubectl --kubeconfig /k --context c label namespace uyuni pod-security.kubernetes.io/enforce=privileged --overwrite`")
                && text.contains("Nothing was written"),
            "{text}"
        );
    }
    // Privileged, or no label: planned.
    let o = with_ns_labels(
        common::empty_cluster(),
        &[(pod_security::ENFORCE_LABEL, "privileged")],
    );
    assert!(plan(&params, &o).is_ok());
    assert!(plan(&params, &common::empty_cluster()).is_ok());
}

#[test]
fn warn_and_audit_levels_only_warn() {
    let params = common::params();
    let o = with_ns_labels(
        common::empty_cluster(),
        &[
            (pod_security::WARN_LABEL, "baseline"),
            (pod_security::AUDIT_LABEL, "restricted"),
        ],
    );
    assert!(plan(&params, &o).is_ok(), "no refusal");
    let warnings = pod_security::warnings(&params, &o);
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("pod-security.kubernetes.io/warn=baseline")
            && warnings[1].contains("pod-security.kubernetes.io/audit=restricted"),
        "{warnings:?}"
    );
    assert!(pod_security::warnings(&params, &common::empty_cluster()).is_empty());
}

#[test]
fn data_sync_jobs_record_their_source() {
    let job = data_sync::data_sync_job(&common::params());
    assert_eq!(
        job.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::SOURCE_ANNOTATION))
            .map(String::as_str),
        Some(common::SOURCE)
    );
}

#[test]
fn a_run_naming_another_source_than_the_copy_is_refused() {
    let params = common::params();
    let synced = common::after_sync(&params);
    let other = params_with(|a| {
        a.source_fqdn = "other.example.com".into();
        a.ssh_known_hosts = Some(uyuni_core::params::FileInput {
            path: "known_hosts".into(),
            content: uyuni_core::secret::SecretString::new(
                "other.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\n",
            ),
        });
    });
    for p in [
        other.clone(),
        MigrateParams {
            prepare: true,
            ..other.clone()
        },
    ] {
        let err = plan(&p, &synced).expect_err("refused");
        let text = err.to_string();
        assert!(
            matches!(err, PlanError::OtherSource { .. })
                && text.contains("hold a copy of uyuni.example.com")
                && text.contains("this run names other.example.com")
                && text.contains("Nothing was written")
                && text.contains("kubectl uyuni -n uyuni migrate uyuni.example.com"),
            "{text}"
        );
    }
    // The same source goes on.
    assert!(plan(&params, &synced).is_ok());
    // Removing the copy, as the message says, clears it.
    let mut cleared = synced.clone();
    cleared
        .objects
        .retain(|r, _| !matches!(r.kind, Kind::Job | Kind::PersistentVolumeClaim));
    assert!(plan(&other, &cleared).is_ok());
}

#[test]
fn the_permissions_of_a_run_name_every_kind_it_writes() {
    let params = common::params();
    let needed = access::needed(&params, &common::empty_cluster());
    let has = |verb: &str, resource: &str, ns: Option<&str>| {
        needed
            .iter()
            .any(|a| a.verb == verb && a.resource == resource && a.namespace.as_deref() == ns)
    };
    assert!(has("create", "namespaces", None), "{needed:?}");
    assert!(has("create", "jobs", Some("uyuni")));
    assert!(has("create", "persistentvolumeclaims", Some("uyuni")));
    assert!(has("patch", "secrets", Some("uyuni")));
    assert!(has("create", "roles", Some("uyuni")));
    // The namespace's Lease, one writer at a time.
    for verb in ["get", "create", "update", "delete"] {
        assert!(has(verb, "leases", Some("uyuni")), "{verb} leases");
    }
    assert!(
        has("patch", "deployments", Some("uyuni")),
        "the server, after the sync"
    );
    let mut sorted = needed.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, needed, "distinct and sorted");

    let denied: Vec<(Access, bool)> = needed
        .iter()
        .map(|a| (a.clone(), a.resource != "jobs"))
        .collect();
    let err = access::check(&needed, &denied).expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains(
            "create jobs.batch in namespace uyuni (`kubectl -n uyuni auth can-i create jobs.batch`)"
        ) && !text.contains("secrets"),
        "{text}"
    );
    let allowed: Vec<(Access, bool)> = needed.iter().map(|a| (a.clone(), true)).collect();
    assert!(access::check(&needed, &allowed).is_ok());
}

/// The names of the Jobs and Deployments a whole run from `observed` starts, as the preview
/// carries it out.
fn pods_of_the_run(params: &MigrateParams, observed: &Observed) -> Vec<String> {
    let preview = uyuni_core::preview(params, observed).expect("plans");
    let mut out: Vec<String> = preview
        .executed
        .iter()
        .filter_map(|step| match &step.action {
            uyuni_core::plan::Action::RunJob { job, .. } => Some(format!(
                "Job {}",
                job.metadata.name.clone().unwrap_or_default()
            )),
            uyuni_core::plan::Action::Apply(object) => match &**object {
                Object::Deployment(d) => Some(format!(
                    "Deployment {}",
                    d.metadata.name.clone().unwrap_or_default()
                )),
                _ => None,
            },
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[test]
fn every_pod_the_plan_runs_has_its_pod_security_level_computed() {
    // With and without TFTP; from an empty cluster (placeholders after the sync) and from a
    // finished sync (real data: the database's Jobs and Deployment as they will run).
    for params in [common::params(), params_with(|a| a.spec.tftp = Some(true))] {
        let checked: Vec<String> = pod_security::pods(&params)
            .into_iter()
            .map(|(name, _)| name)
            .collect();
        for observed in [common::empty_cluster(), common::after_sync(&params)] {
            let run = pods_of_the_run(&params, &observed);
            assert!(
                run.iter().any(|p| p == "Deployment db")
                    && run.iter().filter(|p| p.starts_with("Job uyuni-db")).count() >= 2,
                "the run has database pods: {run:?}"
            );
            let unchecked: Vec<&String> = run.iter().filter(|p| !checked.contains(p)).collect();
            assert!(
                unchecked.is_empty(),
                "pods the run starts whose PodSecurity level is not computed: {unchecked:?} (checked: {checked:?})"
            );
        }
    }
}

#[test]
fn the_permissions_of_a_run_name_every_read_it_waits_with() {
    let params = common::params();
    let needed = access::needed(&params, &common::empty_cluster());
    let has = |verb: &str, group: &str, resource: &str, sub: Option<&str>| {
        needed.iter().any(|a| {
            a.verb == verb
                && a.group == group
                && a.resource == resource
                && a.subresource.as_deref() == sub
                && a.namespace.as_deref() == Some("uyuni")
        })
    };
    // What the observation reads, before anything else.
    assert!(has("get", "", "secrets", None), "{needed:?}");
    assert!(has("get", "", "configmaps", None));
    assert!(has("list", "batch", "jobs", None));
    assert!(
        needed
            .iter()
            .any(|a| a.verb == "get" && a.resource == "namespaces" && a.namespace.is_none()),
        "the namespace is read cluster-wide"
    );
    // Jobs are written by server-side apply: a patch that creates.
    assert!(has("patch", "batch", "jobs", None), "{needed:?}");
    // Waiting on Jobs: the Job watched, its pods listed and watched, their log read.
    for verb in ["get", "list", "watch"] {
        assert!(has(verb, "batch", "jobs", None), "{verb} jobs: {needed:?}");
        assert!(has(verb, "apps", "deployments", None), "{verb} deployments");
    }
    for verb in ["list", "watch"] {
        assert!(has(verb, "", "pods", None), "{verb} pods");
        assert!(
            has(verb, "cert-manager.io", "certificates", None),
            "{verb} certificates (waited on until Ready)"
        );
    }
    assert!(has("get", "", "pods", Some("log")), "get pods/log");
    assert!(
        !has("get", "", "pods", None),
        "pods are never read one by one"
    );
    // Cluster-wide lists whose refusal reads as "none" are not required.
    assert!(
        !needed
            .iter()
            .any(|a| a.resource == "storageclasses" || a.resource == "ingressclasses"),
        "{needed:?}"
    );
    let log = needed
        .iter()
        .find(|a| a.subresource.is_some())
        .expect("pods/log");
    assert_eq!(log.describe(), "get pods/log in namespace uyuni");
    assert_eq!(
        log.can_i(&uyuni_core::kubectl::Kubectl::BARE),
        "kubectl -n uyuni auth can-i get pods --subresource=log"
    );
    assert!(!log.is_write());

    // The dry run's line counts both.
    let allowed: Vec<(Access, bool)> = needed.iter().map(|a| (a.clone(), true)).collect();
    let input = access::input(&needed, &allowed, &uyuni_core::kubectl::Kubectl::BARE);
    let text = format!("{:?}", input.need);
    let writes = needed.iter().filter(|a| a.is_write()).count();
    assert!(
        text.contains(&format!(
            "({writes} to write, {} to read",
            needed.len() - writes
        )),
        "{text}"
    );
}

#[test]
fn the_permissions_of_a_run_without_the_ca_password_reach_past_the_point_it_is_asked_for() {
    // After a --prepare copy the final run needs the CA password; the run asks for it there,
    // and the requests after it are reviewed all the same.
    let without = params_with(|a| a.ssl_password = None);
    let after_sync = common::after_sync(&without);
    assert_eq!(
        plan(&without, &after_sync).map(|_| ()),
        Err(PlanError::CaPasswordNeeded)
    );
    let needed = access::needed(&without, &after_sync);
    assert_eq!(needed, access::needed(&common::params(), &after_sync));
    assert!(
        needed
            .iter()
            .any(|a| a.verb == "patch" && a.resource == "deployments"),
        "the server's Deployment, planned past the password: {needed:?}"
    );
}

#[test]
fn the_foreseen_steps_are_the_previews_and_reach_past_a_missing_ca_password() {
    // The migrate loop's step count and its permission review come from one planning pass.
    let params = common::params();
    let empty = common::empty_cluster();
    let preview = uyuni_core::preview(&params, &empty).expect("previews");
    assert_eq!(
        uyuni_core::preview::foreseen(&params, &empty),
        preview.executed
    );

    let without = params_with(|a| a.ssl_password = None);
    let after_sync = common::after_sync(&without);
    assert!(uyuni_core::preview(&without, &after_sync).is_err());
    let foreseen = uyuni_core::preview::foreseen(&without, &after_sync);
    let with = uyuni_core::preview(&common::params(), &after_sync).expect("previews");
    let ids = |steps: &[uyuni_core::Step]| steps.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&foreseen), ids(&with.executed));
    assert!(!foreseen.is_empty());
}
