use uyuni_core::image::{
    DEFAULT_REGISTRY, DEFAULT_SERVER_IMAGE, ImageError, PullPolicy, check_target, reference,
};

#[test]
fn registry_is_prepended_to_names_without_host() {
    assert_eq!(
        reference(DEFAULT_REGISTRY, DEFAULT_SERVER_IMAGE, Some("latest")),
        Ok("registry.opensuse.org/uyuni/server:latest".to_owned())
    );
}

#[test]
fn names_with_a_host_or_port_are_kept() {
    assert_eq!(
        reference(DEFAULT_REGISTRY, "localhost:5000/uyuni/server", Some("5.2")),
        Ok("localhost:5000/uyuni/server:5.2".to_owned())
    );
    assert_eq!(
        reference(
            DEFAULT_REGISTRY,
            "registry.suse.com/suse/manager/5.1/x86_64/server",
            Some("5.1.0")
        ),
        Ok("registry.suse.com/suse/manager/5.1/x86_64/server:5.1.0".to_owned())
    );
}

#[test]
fn existing_tag_or_digest_wins_over_the_fallback() {
    assert_eq!(
        reference(DEFAULT_REGISTRY, "uyuni/server:2025.10", Some("latest")),
        Ok("registry.opensuse.org/uyuni/server:2025.10".to_owned())
    );
    let digest =
        "uyuni/server@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    assert_eq!(
        reference(DEFAULT_REGISTRY, digest, Some("latest")),
        Ok(format!("registry.opensuse.org/{digest}"))
    );
}

#[test]
fn bad_references_are_refused() {
    assert!(matches!(
        reference(DEFAULT_REGISTRY, "uyuni/ser ver", Some("x")),
        Err(ImageError::Invalid(_))
    ));
    assert!(matches!(
        reference(DEFAULT_REGISTRY, "uyuni/server", None),
        Err(ImageError::NoTag(_))
    ));
    assert!(matches!(
        reference(DEFAULT_REGISTRY, "uyuni/server", Some("a:b")),
        Err(ImageError::Invalid(_))
    ));
}

#[test]
fn pre_5_2_targets_are_refused_and_other_tags_accepted() {
    let old = "registry.suse.com/suse/manager/5.1/x86_64/server:5.1.2";
    let e = check_target("server", old).expect_err("5.1 is not a target");
    assert!(
        e.to_string().contains("5.1") && e.to_string().contains("--tag"),
        "{e}"
    );
    assert!(
        check_target(
            "database",
            "registry.opensuse.org/uyuni/server-postgresql:5.0.9"
        )
        .expect_err("5.0")
        .to_string()
        .contains("--pgsql-tag")
    );
    for ok in [
        "registry.opensuse.org/uyuni/server:latest",
        "registry.opensuse.org/uyuni/server:2025.10",
        "registry.suse.com/suse/multi-linux-manager/5.2/x86_64/server:5.2.1",
        "localhost:5000/uyuni/server:6.0",
        "registry.opensuse.org/uyuni/server@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ] {
        assert_eq!(check_target("server", ok), Ok(()), "{ok}");
    }
}

#[test]
fn pull_policy_is_case_insensitive() {
    assert_eq!(
        PullPolicy::parse("ifnotpresent"),
        Ok(PullPolicy::IfNotPresent)
    );
    assert_eq!(PullPolicy::parse("ALWAYS"), Ok(PullPolicy::Always));
    assert!(PullPolicy::parse("sometimes").is_err());
}
