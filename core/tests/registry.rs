//! The registry pull Secret: written from `--registry-user`, reused from an earlier run, or the
//! user's own; referenced by every pod of a whole migration; its password never printed.

use crate::common;

use k8s_openapi::api::core::v1::Secret;
use uyuni_core::builders::registry;
use uyuni_core::params::PullSecret;
use uyuni_core::secret::SecretString;
use uyuni_core::{MigrateParams, Object, Observed, Op, PlanError, plan, preview, render};

const PASSWORD: &str = "reg1stry \"pass\" word";

fn params_with(f: impl FnOnce(&mut uyuni_core::MigrateArgs)) -> MigrateParams {
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    f(&mut args);
    MigrateParams::from_args(&args).expect("valid")
}

fn with_credentials() -> MigrateParams {
    params_with(|a| {
        a.spec.registry_host = Some("registry.suse.com".into());
        a.spec.registry_user = Some("scc-user".into());
        a.spec.registry_password = Some(SecretString::new(PASSWORD));
    })
}

/// The `imagePullSecrets` names of every pod the objects of a whole migration define.
fn pull_secrets_of_every_pod(
    params: &MigrateParams,
    observed: &Observed,
) -> Vec<(String, Vec<String>)> {
    let preview = preview(params, observed).expect("preview");
    preview
        .executed
        .iter()
        .filter_map(|s| s.action.object())
        .filter_map(|o| {
            let (name, pod) = match &o {
                Object::Job(j) => (
                    j.metadata.name.clone(),
                    j.spec.as_ref()?.template.spec.clone(),
                ),
                Object::Deployment(d) => (
                    d.metadata.name.clone(),
                    d.spec.as_ref()?.template.spec.clone(),
                ),
                _ => return None,
            };
            let names = pod?
                .image_pull_secrets
                .unwrap_or_default()
                .into_iter()
                .map(|r| r.name)
                .collect();
            Some((name.unwrap_or_default(), names))
        })
        .collect()
}

#[test]
fn credentials_make_a_pull_secret_before_the_image_checks_and_every_pod_uses_it() {
    let params = with_credentials();
    let observed = common::empty_cluster();
    let plan = plan(&params, &observed).expect("plan");
    let ids: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        &ids[..3],
        &["namespace", "registry-credentials", "image-check-server"]
    );
    assert_eq!(plan.steps[1].op, Op::Create);
    let pods = pull_secrets_of_every_pod(&params, &observed);
    assert!(pods.len() >= 8, "{pods:?}");
    for (name, secrets) in &pods {
        assert_eq!(
            secrets,
            &["registry-credentials".to_owned()],
            "pod of {name}"
        );
    }
}

#[test]
fn the_pull_secret_is_for_the_server_images_registry() {
    let params = params_with(|a| {
        a.spec.image = Some("registry.example.com:5000/suse/manager/server".into());
        a.spec.registry_user = Some("me".into());
        a.spec.registry_password = Some(SecretString::new(PASSWORD));
    });
    assert!(
        matches!(&params.spec.pull_secret, PullSecret::Credentials { registry, .. } if registry == "registry.example.com:5000")
    );
}

#[test]
fn the_password_never_shows_in_a_preview_or_plan() {
    let params = with_credentials();
    let observed = common::empty_cluster();
    let preview = preview(&params, &observed).expect("preview");
    let options = render::RenderOptions::default();
    let outputs = [
        render::human_preview(&preview.steps, &observed, options),
        render::manifests_yaml(&preview.steps, false),
        serde_json::to_string(&preview.final_plan).expect("json"),
        serde_json::to_string(&plan(&params, &observed).expect("plan")).expect("json"),
        format!("{params:?}"),
    ];
    let auth = {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(format!("scc-user:{PASSWORD}"))
    };
    for out in &outputs {
        assert!(
            !out.contains(PASSWORD) && !out.contains("reg1stry"),
            "{out}"
        );
        assert!(!out.contains(&auth), "{out}");
    }
}

#[test]
fn a_pull_secret_of_an_earlier_run_stays_in_use_without_flags() {
    let earlier = with_credentials();
    let PullSecret::Credentials {
        registry,
        user,
        password,
    } = &earlier.spec.pull_secret
    else {
        panic!("credentials");
    };
    let mut observed = common::empty_cluster();
    observed.insert(common::namespace());
    observed.insert(Object::Secret(registry::pull_secret(
        common::NAMESPACE,
        registry,
        user,
        password.expose(),
    )));
    let params = common::params();
    assert_eq!(params.spec.pull_secret, PullSecret::None);
    let plan = plan(&params, &observed).expect("plan");
    let step = plan
        .steps
        .iter()
        .find(|s| s.id == "registry-credentials")
        .expect("step");
    assert_eq!(step.op, Op::Unchanged);
    for (name, secrets) in pull_secrets_of_every_pod(&params, &observed) {
        assert_eq!(
            secrets,
            ["registry-credentials".to_owned()],
            "pod of {name}"
        );
    }
    // Without it, no pod names a pull Secret.
    let mut bare = common::empty_cluster();
    bare.insert(common::namespace());
    assert!(
        pull_secrets_of_every_pod(&params, &bare)
            .iter()
            .all(|(_, s)| s.is_empty())
    );
}

#[test]
fn the_users_own_pull_secret_is_checked_and_never_written() {
    let params = params_with(|a| a.spec.image_pull_secret = Some("my-pull".into()));
    let mut observed = common::empty_cluster();
    observed.insert(common::namespace());
    let err = plan(&params, &observed).expect_err("missing");
    assert!(matches!(err, PlanError::PullSecretMissing { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("kubectl -n uyuni create secret generic my-pull"),
        "{err}"
    );

    let mut secret = Secret {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("my-pull".into()),
            namespace: Some(common::NAMESPACE.into()),
            ..Default::default()
        },
        type_: Some("Opaque".into()),
        ..Default::default()
    };
    observed.insert(Object::Secret(secret.clone()));
    let err = plan(&params, &observed).expect_err("wrong type");
    assert!(err.to_string().contains("\"Opaque\""), "{err}");

    secret.type_ = Some("kubernetes.io/dockerconfigjson".into());
    observed.insert(Object::Secret(secret));
    let plan = plan(&params, &observed).expect("plan");
    let step = plan
        .steps
        .iter()
        .find(|s| s.id == "registry-credentials")
        .expect("step");
    assert_eq!(
        (step.op, step.target.name.as_str()),
        (Op::Unchanged, "my-pull")
    );
    for (name, secrets) in pull_secrets_of_every_pod(&params, &observed) {
        assert_eq!(secrets, ["my-pull".to_owned()], "pod of {name}");
    }
}

#[test]
fn registry_flags_are_validated() {
    let mut args = common::args_with_ssh(&common::private_key("k"));
    args.spec.registry_user = Some("me".into());
    assert!(matches!(
        MigrateParams::from_args(&args),
        Err(uyuni_core::ParamsError::RegistryPasswordMissing)
    ));
    args.spec.image_pull_secret = Some("mine".into());
    assert!(matches!(
        MigrateParams::from_args(&args),
        Err(uyuni_core::ParamsError::PullSecretConflict)
    ));
    args.spec.registry_user = None;
    args.spec.image_pull_secret = Some("Not_A_Name".into());
    assert!(matches!(
        MigrateParams::from_args(&args),
        Err(uyuni_core::ParamsError::PullSecretName(_))
    ));
    args.spec.image_pull_secret = None;
    args.spec.registry_password = Some(SecretString::new("x"));
    assert!(matches!(
        MigrateParams::from_args(&args),
        Err(uyuni_core::ParamsError::RegistryUserMissing)
    ));
    args.spec.registry_user = Some("a:b".into());
    assert!(matches!(
        MigrateParams::from_args(&args),
        Err(uyuni_core::ParamsError::RegistryUser(_))
    ));
}
