use k8s_openapi::api::core::v1::{Capabilities, Container, PodSpec, SecurityContext};
use uyuni_core::pod_security::{Level, required};

fn pod(sc: SecurityContext) -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: "c".into(),
            security_context: Some(sc),
            ..Container::default()
        }],
        ..PodSpec::default()
    }
}

#[test]
fn sys_admin_needs_privileged_and_chown_baseline() {
    let caps = |c: &str| SecurityContext {
        capabilities: Some(Capabilities {
            add: Some(vec![c.into()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    };
    assert_eq!(required(&pod(caps("SYS_ADMIN"))).level, Level::Privileged);
    assert_eq!(required(&pod(caps("CHOWN"))).level, Level::Baseline);
    let privileged = SecurityContext {
        privileged: Some(true),
        ..SecurityContext::default()
    };
    assert_eq!(required(&pod(privileged)).level, Level::Privileged);
}

#[test]
fn a_hardened_pod_fits_restricted() {
    let sc = SecurityContext {
        run_as_non_root: Some(true),
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        seccomp_profile: Some(k8s_openapi::api::core::v1::SeccompProfile {
            type_: "RuntimeDefault".into(),
            localhost_profile: None,
        }),
        ..SecurityContext::default()
    };
    assert_eq!(required(&pod(sc)).level, Level::Restricted);
}

#[test]
fn unknown_label_values_are_the_strictest() {
    assert_eq!(Level::parse("privileged"), Level::Privileged);
    assert_eq!(Level::parse("bogus"), Level::Restricted);
}
