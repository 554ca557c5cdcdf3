//! `error`: what the errors say and the hints they carry.

use std::time::Duration;

use uyuni_core::kubectl::Kubectl;
use uyuni_effects::error::{EffectsError, Target, Verb};

#[test]
fn target_display() {
    assert_eq!(
        Target::named("secret", "x", Some("ns")).to_string(),
        "secret/x in namespace ns"
    );
    assert_eq!(
        Target::named("namespace", "ns", None).to_string(),
        "namespace/ns"
    );
    assert_eq!(
        Target::selected("job", "a=b", "ns").to_string(),
        "jobs matching a=b in namespace ns"
    );
}

/// `get secret/x` in namespace uyuni, refused with 403.
fn forbidden_secret_get() -> EffectsError {
    let status =
        kube::core::Status::failure("secrets \"x\" is forbidden", "Forbidden").with_code(403);
    EffectsError::Api {
        verb: Verb::Get,
        target: Target::named("secret", "x", Some("uyuni")),
        attempts: 1,
        source: Box::new(kube::Error::Api(status.boxed())),
    }
}

#[test]
fn forbidden_says_how_to_check() {
    let err = forbidden_secret_get();
    let text = err.to_string();
    assert!(
        text.starts_with(
            "cannot get secret/x in namespace uyuni: secrets \"x\" is forbidden (403)"
        ),
        "{text}"
    );
    assert!(
        text.contains("kubectl -n uyuni auth can-i get secret"),
        "{text}"
    );
    assert!(!text.contains("after"), "{text}");
}

#[test]
fn rendered_hints_carry_the_runs_flags() {
    let k = Kubectl {
        kubeconfig: Some("/k/config".into()),
        context: Some("prod".into()),
        migrate_flags: Vec::new(),
        ..Default::default()
    };
    let err = forbidden_secret_get();
    let text = err.render(&k);
    assert!(
        text.contains(
            "`kubectl --kubeconfig /k/config --context prod -n uyuni auth can-i get secret/x`"
        ),
        "{text}"
    );
    let err = EffectsError::JobTimeout {
        step: "s".into(),
        job: "j".into(),
        namespace: "n".into(),
        waited: Duration::from_secs(5),
    };
    assert!(
        err.render(&k)
            .contains("`kubectl --kubeconfig /k/config --context prod -n n logs -f job/j`"),
        "{}",
        err.render(&k)
    );
    // The context an error is about replaces the one given.
    let err = EffectsError::ContextNotFound {
        context: "prod".into(),
        kubeconfig: "/k/config".into(),
        available: vec![],
    };
    assert!(
        err.render(&k)
            .ends_with("`kubectl --kubeconfig /k/config config get-contexts` lists them"),
        "{}",
        err.render(&k)
    );
}

#[test]
fn retried_failure_says_how_often() {
    let status = kube::core::Status::failure("unavailable", "ServiceUnavailable").with_code(503);
    let err = EffectsError::Api {
        verb: Verb::Apply,
        target: Target::named("configmap", "c", Some("ns")),
        attempts: 8,
        source: Box::new(kube::Error::Api(status.boxed())),
    };
    let text = err.to_string();
    assert!(
        text.contains(
            "cannot apply configmap/c in namespace ns (after 8 attempts): unavailable (503)"
        ),
        "{text}"
    );
}

#[test]
fn job_failed_shows_tail_and_command() {
    let err = EffectsError::JobFailed {
        step: "data-sync".into(),
        job: "uyuni-data-sync-1".into(),
        namespace: "uyuni".into(),
        reason: "container sync exited with code 3".into(),
        log_tail: vec!["rsync: connection refused".into(), "giving up".into()],
    };
    let text = err.to_string();
    assert!(text.starts_with(
        "step data-sync: Job uyuni-data-sync-1 in namespace uyuni failed: container sync exited with code 3\nlast 2 log lines:\n  | rsync: connection refused\n  | giving up\n"
    ), "{text}");
    assert!(
        text.contains("kubectl -n uyuni logs job/uyuni-data-sync-1"),
        "{text}"
    );
}

#[test]
fn context_not_found_lists_the_known_ones() {
    let err = EffectsError::ContextNotFound {
        context: "prod".into(),
        kubeconfig: "/home/u/.kube/config".into(),
        available: vec!["kind".into(), "test".into()],
    };
    assert_eq!(
        err.to_string(),
        "context \"prod\" not found in /home/u/.kube/config (it has: kind, test); `kubectl config get-contexts` lists them"
    );
}

#[test]
fn timeout_says_how_to_follow() {
    let err = EffectsError::JobTimeout {
        step: "s".into(),
        job: "j".into(),
        namespace: "n".into(),
        waited: Duration::from_secs(150),
    };
    let text = err.to_string();
    assert!(text.contains("still running after 2m30s"), "{text}");
    assert!(text.contains("kubectl -n n logs -f job/j"), "{text}");
}

#[test]
fn a_deployment_pods_failure_comes_with_the_hint_for_its_reason() {
    let blocked = EffectsError::DeploymentFailed {
        step: "wait-db".into(),
        deployment: "db".into(),
        namespace: "n".into(),
        pod: Some("db-1".into()),
        reason: "ImagePullBackOff: container db (Back-off pulling image)".into(),
        log_tail: Vec::new(),
        hint: uyuni_core::verdict::hint("ImagePullBackOff"),
    };
    let text = blocked.to_string();
    assert!(
        text.contains("check the image name, tag and registry access"),
        "{text}"
    );
    assert!(text.contains("kubectl -n n describe pod db-1"), "{text}");
    let stalled = EffectsError::DeploymentFailed {
        step: "wait-db".into(),
        deployment: "db".into(),
        namespace: "n".into(),
        pod: None,
        reason: "ProgressDeadlineExceeded: timed out".into(),
        log_tail: Vec::new(),
        hint: uyuni_core::verdict::hint(""),
    };
    let text = stalled.to_string();
    assert!(
        text.contains("kubectl -n n describe deployment db"),
        "{text}"
    );
}

#[test]
fn an_unreachable_server_is_named_with_its_context_first() {
    let err = EffectsError::Unreachable {
        server: "https://10.0.0.1:6443".into(),
        context: Some("prod".into()),
        attempts: 3,
        reason: "connection refused".into(),
        tls: false,
    };
    let k = Kubectl {
        kubeconfig: Some("/k".into()),
        context: Some("prod".into()),
        ..Default::default()
    };
    assert_eq!(
        err.render(&k),
        "cannot reach the API server https://10.0.0.1:6443 of context prod: connection refused (3 attempts); check the address and that the server is up (`kubectl --kubeconfig /k --context prod cluster-info`), or choose another context (`kubectl --kubeconfig /k config get-contexts`)"
    );
    let tls = EffectsError::Unreachable {
        server: "https://10.0.0.1:6443".into(),
        context: None,
        attempts: 1,
        reason: "invalid peer certificate: UnknownIssuer".into(),
        tls: true,
    };
    assert!(
        tls.to_string().starts_with(
            "cannot reach the API server https://10.0.0.1:6443: its certificate was not accepted (invalid peer certificate: UnknownIssuer); pass the CA that signed it with --certificate-authority FILE"
        ),
        "{tls}"
    );
}

#[test]
fn a_kube_error_shows_the_servers_words_not_its_status() {
    let status =
        kube::core::Status::failure("secrets \"x\" is forbidden", "Forbidden").with_code(403);
    let err = kube::Error::Api(status.boxed());
    assert!(
        err.to_string().contains("Status {"),
        "kube's own Display changed: {err}"
    );
    let reason = uyuni_effects::error::kube_reason(&err).expect("a kube error");
    assert_eq!(reason, "secrets \"x\" is forbidden (403)");
}
