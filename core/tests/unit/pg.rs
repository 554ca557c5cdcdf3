use uyuni_core::pg::{Upgrade, VersionError, decide};

#[test]
fn supported_sources_are_upgraded_and_the_target_is_kept() {
    assert_eq!(decide(Some("14")), Ok(Upgrade::Needed { from: 14 }));
    assert_eq!(decide(Some("16\n")), Ok(Upgrade::Needed { from: 16 }));
    assert_eq!(decide(Some("18")), Ok(Upgrade::NotNeeded));
    assert_eq!(decide(None), Ok(Upgrade::Unknown));
}

#[test]
fn downgrades_and_unsupported_sources_are_refused_with_what_would_work() {
    let e = decide(Some("19")).expect_err("downgrade");
    assert!(e.to_string().contains("downgrade"), "{e}");
    for v in ["17", "15", "13", "9.6"] {
        let e = decide(Some(v)).expect_err(v);
        assert!(matches!(e, VersionError::UnsupportedSource { .. }), "{v}");
        assert!(e.to_string().contains("14 and 16"), "{e}");
    }
    assert!(matches!(
        decide(Some("sixteen")),
        Err(VersionError::NotAVersion(_))
    ));
    assert!(matches!(
        decide(Some("")),
        Err(VersionError::NotAVersion(_))
    ));
}
