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
        Err(ImageError::InvalidTag { .. })
    ));
}

/// OCI tags are case-sensitive (`FOO` is not `foo`); only the registry and repository are
/// lower-cased.
#[test]
fn the_tag_keeps_its_case_and_the_repository_is_lower_cased() {
    assert_eq!(
        reference("Registry.Example.COM", "Uyuni/Server", Some("FOO")),
        Ok("registry.example.com/uyuni/server:FOO".to_owned())
    );
    assert_eq!(
        reference(
            DEFAULT_REGISTRY,
            "uyuni/server:Build_7.Rc-1",
            Some("latest")
        ),
        Ok("registry.opensuse.org/uyuni/server:Build_7.Rc-1".to_owned())
    );
    assert_eq!(
        reference(DEFAULT_REGISTRY, "localhost:5000/uyuni/server", Some("V1")),
        Ok("localhost:5000/uyuni/server:V1".to_owned())
    );
}

/// The OCI tag rule `[A-Za-z0-9_][A-Za-z0-9._-]{0,127}`: 128 characters pass, 129 do not, and
/// neither does a tag starting with `.` or `-`; an empty `--tag` says it is empty.
#[test]
fn tags_outside_the_oci_rule_are_refused_with_the_reason() {
    let longest = "a".repeat(128);
    assert_eq!(
        reference(DEFAULT_REGISTRY, "uyuni/server", Some(&longest)),
        Ok(format!("registry.opensuse.org/uyuni/server:{longest}"))
    );
    let e = reference(DEFAULT_REGISTRY, "uyuni/server", Some(&"a".repeat(200)))
        .expect_err("200 characters");
    assert!(
        matches!(e, ImageError::InvalidTag { .. })
            && e.to_string().contains("200 characters long")
            && e.to_string().contains("at most 128"),
        "{e}"
    );
    for bad in [".hidden", "-dash", "a+b"] {
        assert!(
            matches!(
                reference(DEFAULT_REGISTRY, "uyuni/server", Some(bad)),
                Err(ImageError::InvalidTag { .. })
            ),
            "{bad}"
        );
    }
    let e = reference(DEFAULT_REGISTRY, "uyuni/server", Some("")).expect_err("empty");
    assert!(
        matches!(e, ImageError::EmptyTag(_)) && e.to_string().contains("is empty"),
        "{e}"
    );
    assert!(!e.to_string().contains("pass --tag"), "{e}");
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
