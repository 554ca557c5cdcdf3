//! Unit tests of `src/version.rs`.

use kubectl_uyuni::version::*;
use uyuni_effects::inspect::ComponentImage;

#[test]
fn references_split_into_tag_and_digest() {
    let s = |a: Option<&str>, b: Option<&str>| (a.map(str::to_owned), b.map(str::to_owned));
    assert_eq!(
        split_reference("registry.opensuse.org/uyuni/server:2025.10"),
        s(Some("2025.10"), None)
    );
    assert_eq!(
        split_reference("localhost:5000/uyuni/server"),
        s(None, None)
    );
    assert_eq!(
        split_reference("localhost:5000/uyuni/server:5.1@sha256:abc"),
        s(Some("5.1"), Some("sha256:abc"))
    );
    assert_eq!(
        split_reference("uyuni/server@sha256:abc"),
        s(None, Some("sha256:abc"))
    );
}

fn found() -> Vec<ComponentImage> {
    let c = |component: &str, deployment: &str, image: &str| ComponentImage {
        component: component.into(),
        deployment: deployment.into(),
        container: deployment.into(),
        image: image.into(),
    };
    vec![
        c(
            "db",
            "uyuni-db",
            "registry.opensuse.org/uyuni/server-postgresql:2025.10",
        ),
        c(
            "server",
            "uyuni",
            "registry.opensuse.org/uyuni/server:2025.10",
        ),
    ]
}

#[test]
fn the_report_names_server_and_db() {
    let (r, note) = report(Some("ctx".into()), Some("uyuni".into()), Ok(found()));
    assert_eq!(note, None);
    assert!(r.cluster.reachable);
    assert_eq!(
        r.server.as_ref().map(|s| s.tag.as_deref()),
        Some(Some("2025.10"))
    );
    assert_eq!(
        r.db.as_ref().map(|s| s.deployment.as_str()),
        Some("uyuni-db")
    );
    let text = human(&r);
    assert!(
        text.contains(
            "Server: registry.opensuse.org/uyuni/server:2025.10 (tag 2025.10, deployment uyuni)"
        ),
        "{text}"
    );
    assert!(
        text.contains("DB:     registry.opensuse.org/uyuni/server-postgresql:2025.10"),
        "{text}"
    );
}

#[test]
fn unreachable_or_empty_still_prints_the_client() {
    let (r, note) = report(None, None, Err("connection refused".into()));
    assert_eq!(note.as_deref(), Some("connection refused"));
    assert!(!r.cluster.reachable);
    assert_eq!(human(&r).lines().count(), 1);
    let (r, _) = report(None, Some("uyuni".into()), Ok(Vec::new()));
    assert!(human(&r).contains("No Uyuni server in namespace uyuni."));
}
