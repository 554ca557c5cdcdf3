use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use serde_json::{Value, json};
use uyuni_core::object::Object;
use uyuni_core::observed::Observed;
use uyuni_core::status::{
    Attempts, LogsError, Reason, WorkloadState, component_deployment, report, step_jobs, steps,
};

const NS: &str = "uyuni";

fn labels(component: &str) -> Value {
    json!({
        "app.kubernetes.io/part-of": "uyuni",
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": "kubectl-uyuni",
    })
}

fn deployment(name: &str, component: &str, replicas: i32, ready: i32, claim: &str) -> Object {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": name, "generation": 2, "labels": labels(component)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/component": component,
                                         "app.kubernetes.io/part-of": "uyuni"}},
            "template": {
                "metadata": {"labels": labels(component)},
                "spec": {
                    "containers": [{"name": component, "image": format!("registry.example.com/uyuni/{component}:2025.10")}],
                    "volumes": [{"name": claim, "persistentVolumeClaim": {"claimName": claim}}],
                },
            },
        },
        "status": {"observedGeneration": 2, "replicas": ready, "updatedReplicas": ready,
                   "readyReplicas": ready, "availableReplicas": ready},
    }))
    .expect("a Deployment");
    Object::Deployment(d)
}

fn pod(name: &str, component: &str, ready: bool, restarts: i32, waiting: Option<&str>) -> Pod {
    let state = match waiting {
        Some(reason) => json!({"waiting": {"reason": reason, "message": "back-off 40s"}}),
        None => json!({"running": {}}),
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels(component)},
        "spec": {"containers": [{"name": component}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
            "containerStatuses": [{"name": component, "ready": ready, "restartCount": restarts,
                                   "image": "i", "imageID": "", "state": state}],
        },
    }))
    .expect("a Pod")
}

fn claim(name: &str, phase: &str) -> Object {
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels("server")},
        "spec": {"resources": {"requests": {"storage": "50Gi"}}, "storageClassName": "local-path"},
        "status": {"phase": phase, "capacity": if phase == "Bound" { json!({"storage": "50Gi"}) } else { json!(null) }},
    }))
    .expect("a claim");
    Object::PersistentVolumeClaim(pvc)
}

fn job(name: &str, step: &str, run: &str, created: &str, outcome: &str) -> Object {
    let job: Job = serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "creationTimestamp": created,
            "labels": labels(step),
            "annotations": {
                "kubectl-uyuni.io/step": step,
                "kubectl-uyuni.io/description": format!("the {step} step"),
                "kubectl-uyuni.io/run": run,
            },
        },
        "status": {"conditions": [{"type": outcome, "status": "True"}]},
    }))
    .expect("a Job");
    Object::Job(job)
}

fn observed(objects: Vec<Object>) -> Observed {
    let mut o = Observed::default();
    for object in objects {
        o.insert(object);
    }
    o
}

/// An installed server: the database on the upgraded claim, both Deployments ready, their
/// pods running, one run's Jobs.
fn running() -> (Observed, Vec<Pod>) {
    let o = observed(vec![
        deployment("db", "db", 1, 1, "var-pgsql18"),
        deployment("uyuni", "server", 1, 1, "var-spacewalk"),
        claim("var-pgsql", "Bound"),
        claim("var-pgsql18", "Bound"),
        job(
            "uyuni-image-check-server-1",
            "image-check-server",
            "run-1",
            "2026-01-01T10:00:00Z",
            "Complete",
        ),
        job(
            "uyuni-image-check-db-1",
            "image-check-db",
            "run-1",
            "2026-01-01T10:00:01Z",
            "Complete",
        ),
    ]);
    let pods = vec![
        pod("db-abc", "db", true, 0, None),
        pod("uyuni-abc", "server", true, 1, None),
    ];
    (o, pods)
}

#[test]
fn a_running_server_is_healthy_and_its_json_is_typed() {
    let (o, pods) = running();
    let status = report(NS, &o, &pods, &uyuni_core::kubectl::Kubectl::BARE);
    assert!(status.healthy, "{:#?}", status.problems);
    assert!(status.installed);
    assert!(status.problems.is_empty());
    assert_eq!(status.workloads.len(), 2);
    assert_eq!(status.workloads[0].component, "server");
    assert_eq!(status.workloads[0].state, WorkloadState::Ready);
    assert_eq!(status.workloads[0].restarts, 1);
    assert_eq!(status.workloads[0].release.as_deref(), Some("2025.10"));
    // The database runs on the upgraded claim: the synced one is the upgrade's backup.
    let backup: Vec<&str> = status
        .claims
        .iter()
        .filter(|c| c.upgrade_backup)
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(backup, ["var-pgsql"]);
    assert_eq!(status.migration, None);
    let op = status.last_operation.as_ref().expect("an operation");
    assert_eq!(op.run.as_deref(), Some("run-1"));
    let ids: Vec<&str> = op.steps.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(ids, ["image-check-server", "image-check-db"]);

    let value = serde_json::to_value(&status).expect("JSON");
    assert_eq!(value["kind"], "Status");
    assert_eq!(value["healthy"], true);
    assert_eq!(value["workloads"][0]["desiredReplicas"], 1);
    assert!(value["workloads"][0]["readyReplicas"].is_number());
    assert!(value["workloads"][0]["restarts"].is_number());
    assert_eq!(value["workloads"][0]["state"], "ready");
    assert_eq!(value["claims"][0]["bound"], true);
    assert_eq!(value["claims"][0]["capacity"], "50Gi");
    assert_eq!(
        value["lastOperation"]["steps"][0]["jobs"][0]["attempt"], 1,
        "{value:#}"
    );
    assert_eq!(
        value["lastOperation"]["steps"][0]["jobs"][0]["state"],
        "Succeeded"
    );
}

#[test]
fn a_stopped_server_is_not_healthy_and_says_stopped() {
    let (mut o, pods) = running();
    o.insert(deployment("uyuni", "server", 0, 0, "var-spacewalk"));
    let status = report(NS, &o, &pods[..1], &uyuni_core::kubectl::Kubectl::BARE);
    assert!(!status.healthy);
    assert_eq!(status.workloads[0].state, WorkloadState::Stopped);
    let reasons: Vec<(Reason, &str)> = status
        .problems
        .iter()
        .map(|p| (p.reason, p.object.as_str()))
        .collect();
    assert_eq!(reasons, [(Reason::Stopped, "Deployment uyuni")]);
    assert_eq!(
        serde_json::to_value(&status.problems[0]).expect("JSON")["reason"],
        "stopped"
    );
}

#[test]
fn a_component_at_zero_is_shown_stopped_but_not_a_problem() {
    let (mut o, pods) = running();
    o.insert(deployment("hub-xmlrpc", "hub-xmlrpc", 0, 0, "x"));
    let status = report(NS, &o, &pods, &uyuni_core::kubectl::Kubectl::BARE);
    assert!(status.healthy, "{:#?}", status.problems);
    assert_eq!(status.workloads[2].state, WorkloadState::Stopped);
}

#[test]
fn a_crash_loop_and_a_pull_error_are_named_with_their_container() {
    let (mut o, _) = running();
    o.insert(deployment("db", "db", 1, 0, "var-pgsql18"));
    let pods = vec![
        pod("db-abc", "db", false, 7, Some("CrashLoopBackOff")),
        pod("uyuni-abc", "server", true, 0, None),
    ];
    let status = report(NS, &o, &pods, &uyuni_core::kubectl::Kubectl::BARE);
    assert!(!status.healthy);
    let db = &status.workloads[1];
    assert_eq!(db.state, WorkloadState::CrashLooping);
    assert_eq!(db.restarts, 7);
    assert_eq!(db.pods[0].waiting[0].reason, "CrashLoopBackOff");
    assert_eq!(status.problems[0].reason, Reason::CrashLooping);
    assert!(
        status.problems[0].message.contains("container db"),
        "{:?}",
        status.problems[0]
    );

    let pods = vec![pod("db-abc", "db", false, 0, Some("ImagePullBackOff"))];
    let status = report(NS, &o, &pods, &uyuni_core::kubectl::Kubectl::BARE);
    assert_eq!(status.workloads[1].state, WorkloadState::CannotStart);
    assert_eq!(status.problems[0].reason, Reason::CannotStart);
}

#[test]
fn job_pods_are_not_a_deployments_pods() {
    let (o, mut pods) = running();
    let mut job_pod = pod("uyuni-x", "server", false, 3, Some("CrashLoopBackOff"));
    job_pod
        .metadata
        .labels
        .as_mut()
        .expect("labels")
        .insert("kubectl-uyuni.io/step".into(), "db-fixup".into());
    pods.push(job_pod);
    let status = report(NS, &o, &pods, &uyuni_core::kubectl::Kubectl::BARE);
    assert!(status.healthy, "{:#?}", status.problems);
    assert_eq!(status.workloads[0].pods.len(), 1);
}

#[test]
fn an_unbound_claim_and_a_failed_last_attempt_are_problems_a_retried_one_is_not() {
    let (mut o, pods) = running();
    o.insert(claim("srv-www", "Pending"));
    o.insert(job(
        "uyuni-db-fixup-1",
        "db-fixup",
        "run-2",
        "2026-01-02T10:00:00Z",
        "Failed",
    ));
    let status = report(NS, &o, &pods, &uyuni_core::kubectl::Kubectl::BARE);
    let reasons: Vec<Reason> = status.problems.iter().map(|p| p.reason).collect();
    assert_eq!(reasons, [Reason::ClaimNotBound, Reason::StepFailed]);
    assert_eq!(
        status
            .last_operation
            .as_ref()
            .and_then(|o| o.run.as_deref()),
        Some("run-2")
    );

    o.insert(claim("srv-www", "Bound"));
    o.insert(job(
        "uyuni-db-fixup-2",
        "db-fixup",
        "run-2",
        "2026-01-02T10:01:00Z",
        "Complete",
    ));
    let status = report(NS, &o, &pods, &uyuni_core::kubectl::Kubectl::BARE);
    assert!(status.healthy, "{:#?}", status.problems);
    let step = &status.last_operation.as_ref().expect("op").steps[0];
    let attempts: Vec<usize> = step.jobs.iter().map(|j| j.attempt).collect();
    assert_eq!(attempts, [1, 2]);
}

#[test]
fn an_empty_namespace_is_not_installed() {
    let status = report(
        NS,
        &Observed::default(),
        &[],
        &uyuni_core::kubectl::Kubectl::BARE,
    );
    assert!(!status.installed);
    assert!(!status.healthy);
    assert_eq!(status.problems[0].reason, Reason::NotInstalled);
    assert!(status.workloads.is_empty());
}

#[test]
fn an_unfinished_migration_says_its_phase() {
    let mut sync = job(
        "uyuni-data-sync-1",
        "data-sync",
        "run-1",
        "2026-01-01T10:00:00Z",
        "Complete",
    );
    if let Object::Job(j) = &mut sync {
        j.metadata
            .annotations
            .as_mut()
            .expect("annotations")
            .insert("kubectl-uyuni.io/sync-mode".into(), "prepare".into());
    }
    let status = report(
        NS,
        &observed(vec![sync]),
        &[],
        &uyuni_core::kubectl::Kubectl::BARE,
    );
    assert!(status.installed);
    assert!(!status.healthy);
    assert_eq!(
        serde_json::to_value(&status.migration).expect("JSON")["phase"],
        "prepared"
    );
    assert_eq!(status.problems[0].reason, Reason::MigrationUnfinished);
}

#[test]
fn logs_finds_a_steps_attempts_and_names_the_known_steps_otherwise() {
    let (mut o, _) = running();
    o.insert(job(
        "uyuni-image-check-server-2",
        "image-check-server",
        "run-2",
        "2026-01-02T10:00:00Z",
        "Failed",
    ));
    let known: Vec<String> = steps(&o).into_iter().map(|s| s.step).collect();
    assert_eq!(known, ["image-check-server", "image-check-db"]);

    let latest = step_jobs(NS, &o, "image-check-server", Attempts::Latest).expect("found");
    assert_eq!(latest.len(), 1);
    assert_eq!(latest[0].name, "uyuni-image-check-server-2");
    let first = step_jobs(NS, &o, "image-check-server", Attempts::Number(1)).expect("found");
    assert_eq!(first[0].name, "uyuni-image-check-server-1");
    let all = step_jobs(NS, &o, "image-check-server", Attempts::All).expect("found");
    assert_eq!(all.len(), 2);
    assert!(matches!(
        step_jobs(NS, &o, "image-check-server", Attempts::Number(3)),
        Err(LogsError::NoAttempt { count: 2, .. })
    ));

    let err = step_jobs(NS, &o, "data-snyc", Attempts::Latest).expect_err("unknown");
    let text = err.to_string();
    assert!(
        text.contains("data-snyc") && text.contains("image-check-server, image-check-db"),
        "{text}"
    );
    assert_eq!(component_deployment("server"), Some("uyuni"));
    assert_eq!(component_deployment("coco"), Some("coco-attestation"));
}

#[test]
fn a_stopped_migrated_server_is_stopped_not_a_migration_under_way() {
    let (mut o, pods) = running();
    let mut sync = job(
        "uyuni-data-sync-1",
        "data-sync",
        "run-0",
        "2025-12-31T10:00:00Z",
        "Complete",
    );
    if let Object::Job(j) = &mut sync {
        j.metadata
            .annotations
            .as_mut()
            .expect("annotations")
            .insert("kubectl-uyuni.io/sync-mode".into(), "final".into());
    }
    o.insert(sync);
    assert_eq!(
        report(NS, &o, &pods, &uyuni_core::kubectl::Kubectl::BARE).migration,
        None
    );
    o.insert(deployment("uyuni", "server", 0, 0, "var-spacewalk"));
    let status = report(NS, &o, &pods[..1], &uyuni_core::kubectl::Kubectl::BARE);
    assert_eq!(status.migration, None);
    let reasons: Vec<Reason> = status.problems.iter().map(|p| p.reason).collect();
    assert_eq!(reasons, [Reason::Stopped]);
}

#[test]
fn status_reads_nothing_a_namespaces_reader_may_not() {
    use uyuni_core::object::{CustomKind, Kind};
    let observation = uyuni_core::status::observation(NS);
    for target in &observation.named {
        assert!(
            !matches!(
                target.kind,
                Kind::Secret
                    | Kind::Namespace
                    | Kind::Role
                    | Kind::RoleBinding
                    | Kind::Custom(CustomKind::HelmChartConfig)
            ),
            "{target:?}"
        );
    }
    let claims = observation
        .named
        .iter()
        .filter(|t| t.kind == Kind::PersistentVolumeClaim)
        .count();
    assert!(claims > 20, "{claims}");
    assert!(
        observation
            .named
            .iter()
            .any(|t| t.kind == Kind::Custom(CustomKind::Certificate) && t.name == "uyuni-ca")
    );
}
