//! `connect`: choosing the context, loading the kubeconfig, tuning kube's config.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kube::config::{Config, Kubeconfig};
use uyuni_effects::EffectsError;
use uyuni_effects::connect::{ClientOptions, Source, connect, load_kubeconfig, select, tune};

const TWO_CONTEXTS: &str = r#"
apiVersion: v1
kind: Config
current-context: one
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:1111", insecure-skip-tls-verify: true}
- name: c2
  cluster: {server: "https://127.0.0.1:2222", insecure-skip-tls-verify: true}
contexts:
- name: one
  context: {cluster: c1, user: u1}
- name: two
  context: {cluster: c2, user: u1, namespace: second}
users:
- name: u1
  user: {token: secret-token}
"#;

fn config() -> Kubeconfig {
    Kubeconfig::from_yaml(TWO_CONTEXTS).expect("valid test kubeconfig")
}

fn source() -> Source {
    Source::File(PathBuf::from("/tmp/kc"))
}

#[test]
fn current_context_is_the_default() {
    let ctx = select(&config(), &source(), &ClientOptions::default()).unwrap();
    assert_eq!(ctx, "one");
}

#[test]
fn unknown_context_lists_the_known_ones() {
    let opts = ClientOptions {
        context: Some("three".into()),
        ..Default::default()
    };
    let err = select(&config(), &source(), &opts).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("context \"three\" not found in /tmp/kc (it has: one, two)"),
        "{text}"
    );
    assert!(text.contains("kubectl config get-contexts"), "{text}");
}

#[test]
fn unknown_cluster_and_user_are_reported() {
    let opts = ClientOptions {
        cluster: Some("c9".into()),
        ..Default::default()
    };
    assert!(matches!(
        select(&config(), &source(), &opts),
        Err(EffectsError::ClusterNotFound { .. })
    ));
    let opts = ClientOptions {
        user: Some("u9".into()),
        ..Default::default()
    };
    assert!(matches!(
        select(&config(), &source(), &opts),
        Err(EffectsError::UserNotFound { .. })
    ));
}

#[test]
fn group_impersonation_needs_a_user() {
    let opts = ClientOptions {
        impersonate_groups: vec!["system:masters".into()],
        ..Default::default()
    };
    assert!(matches!(
        select(&config(), &source(), &opts),
        Err(EffectsError::InvalidOption {
            flag: "--as-group",
            ..
        })
    ));
}

#[tokio::test]
async fn flags_reach_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    std::fs::write(&path, TWO_CONTEXTS).unwrap();
    let opts = ClientOptions {
        kubeconfig: Some(path),
        context: Some("two".into()),
        ..Default::default()
    };
    let conn = connect(&opts).await.unwrap();
    assert!(conn.namespace_explicit, "context two sets a namespace");
    assert_eq!(conn.namespace, "second");
    assert_eq!(conn.context.as_deref(), Some("two"));

    let mut config = Config::new("https://127.0.0.1:1".parse().unwrap());
    let opts = ClientOptions {
        insecure_skip_tls_verify: true,
        request_timeout: Some(Duration::from_secs(7)),
        impersonate: Some("jane".into()),
        impersonate_groups: vec!["devs".into()],
        ..Default::default()
    };
    tune(&mut config, &opts);
    assert_eq!(config.connect_timeout, Some(Duration::from_secs(7)));
    assert!(config.accept_invalid_certs);
    assert!(!config.default_retry);
    assert_eq!(config.read_timeout, Some(Duration::from_secs(7)));
    assert_eq!(config.auth_info.impersonate.as_deref(), Some("jane"));
    assert_eq!(
        config.auth_info.impersonate_groups,
        Some(vec!["devs".to_owned()])
    );
}

/// Without --request-timeout (or with 0, no limit per request) connecting still gives up after
/// 10 s, not kube's 30 s: an unreachable server is named quickly (issue 38).
#[test]
fn connecting_is_bounded_without_a_request_timeout() {
    for request_timeout in [None, Some(Duration::ZERO)] {
        let mut config = Config::new("https://127.0.0.1:1".parse().unwrap());
        tune(
            &mut config,
            &ClientOptions {
                request_timeout,
                ..Default::default()
            },
        );
        assert_eq!(config.connect_timeout, Some(Duration::from_secs(10)));
        assert_eq!(config.read_timeout, None, "no limit on a watch's reads");
    }
}

#[tokio::test]
async fn namespace_flag_wins_and_default_is_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config");
    std::fs::write(&path, TWO_CONTEXTS).unwrap();
    let conn = connect(&ClientOptions {
        kubeconfig: Some(path.clone()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(conn.namespace, "default");
    assert!(!conn.namespace_explicit, "nothing named the namespace");
    let conn = connect(&ClientOptions {
        kubeconfig: Some(path),
        context: Some("two".into()),
        namespace: Some("mine".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(conn.namespace, "mine");
    assert!(conn.namespace_explicit);
}

#[test]
fn kubeconfig_env_merges_existing_files_first_wins() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    std::fs::write(&first, TWO_CONTEXTS).unwrap();
    std::fs::write(
        &second,
        r#"
apiVersion: v1
kind: Config
current-context: three
clusters:
- name: c1
  cluster: {server: "https://10.0.0.1:1"}
- name: c3
  cluster: {server: "https://127.0.0.1:3333"}
contexts:
- name: three
  context: {cluster: c3}
"#,
    )
    .unwrap();
    let missing = dir.path().join("missing");
    let env = std::env::join_paths([&missing, &first, &second]).unwrap();
    let (merged, source) = load_kubeconfig(None, Some(env), None).unwrap().unwrap();
    assert_eq!(source, Source::Env(vec![first.clone(), second.clone()]));
    // The first file to set current-context wins, and so does its cluster c1.
    assert_eq!(merged.current_context.as_deref(), Some("one"));
    let names: Vec<&str> = merged.contexts.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["one", "two", "three"]);
    let c1 = merged.clusters.iter().find(|c| c.name == "c1").unwrap();
    assert_eq!(
        c1.cluster.as_ref().unwrap().server.as_deref(),
        Some("https://127.0.0.1:1111")
    );
    assert!(source.describe().starts_with("KUBECONFIG ("));

    let only_missing = std::env::join_paths([&missing]).unwrap();
    let err = load_kubeconfig(None, Some(only_missing), None).unwrap_err();
    assert!(
        matches!(err, EffectsError::NoKubeconfig { .. })
            || std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
    );

    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".kube")).unwrap();
    std::fs::write(home.join(".kube/config"), TWO_CONTEXTS).unwrap();
    let (_, source) = load_kubeconfig(None, None, Some(home.clone()))
        .unwrap()
        .unwrap();
    assert_eq!(source, Source::File(home.join(".kube/config")));
}

#[test]
fn missing_kubeconfig_file_names_it() {
    let err = load_kubeconfig(Some(Path::new("/nonexistent/kc")), None, None).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("/nonexistent/kc"), "{text}");
    assert!(text.contains("--kubeconfig"), "{text}");
}

#[test]
fn server_certificate_authority_and_token_flags_replace_the_contexts_entries() {
    use secrecy::ExposeSecret;
    let mut kc = config();
    let opts = ClientOptions {
        server: Some("https://10.0.0.9:6443".into()),
        certificate_authority: Some(PathBuf::from("/ca.pem")),
        token: Some("flag-token".into()),
        ..Default::default()
    };
    let (context, options) = uyuni_effects::connect::with_flags(&mut kc, &source(), &opts).unwrap();
    assert_eq!(context, "one");
    let cluster_name = options.cluster.clone().expect("a cluster of the flags");
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.9:6443"));
    assert_eq!(cluster.certificate_authority.as_deref(), Some("/ca.pem"));
    // The context's own cluster stays as it was.
    let c1 = kc.clusters.iter().find(|c| c.name == "c1").unwrap();
    assert_eq!(
        c1.cluster.as_ref().unwrap().server.as_deref(),
        Some("https://127.0.0.1:1111")
    );
    let user_name = options.user.clone().expect("a user of the flags");
    let user = kc
        .auth_infos
        .iter()
        .find(|a| a.name == user_name)
        .and_then(|a| a.auth_info.clone())
        .unwrap();
    assert_eq!(user.token.unwrap().expose_secret(), "flag-token");
    // The Debug of the options never shows the token.
    assert!(!format!("{opts:?}").contains("flag-token"));
}

#[test]
fn the_server_flag_stands_for_a_missing_context() {
    let mut kc = Kubeconfig::default();
    let opts = ClientOptions {
        server: Some("https://10.0.0.9:6443".into()),
        insecure_skip_tls_verify: true,
        ..Default::default()
    };
    let (context, options) =
        uyuni_effects::connect::with_flags(&mut kc, &Source::Flags, &opts).unwrap();
    assert_eq!(options.context.as_deref(), Some(context.as_str()));
    let cluster_name = options.cluster.clone().unwrap();
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .unwrap();
    assert_eq!(cluster.server.as_deref(), Some("https://10.0.0.9:6443"));
    assert_eq!(cluster.insecure_skip_tls_verify, Some(true));
}
