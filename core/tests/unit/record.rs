use std::collections::BTreeMap;

use uyuni_core::params::MigrateArgs;
use uyuni_core::record::{Origin, RecordError, merge, params};

fn given() -> MigrateArgs {
    MigrateArgs {
        namespace: "uyuni".into(),
        source_fqdn: "uyuni.example.com".into(),
        ssh_user: "root".into(),
        run_id: "20261129180000".into(),
        ..MigrateArgs::default()
    }
}

fn record(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn origin<'a>(
    m: &'a uyuni_core::record::Merged<uyuni_core::MigrateArgs>,
    flag: &str,
) -> Option<&'a Origin> {
    m.settings
        .iter()
        .find(|s| s.flag == flag)
        .map(|s| &s.origin)
}

#[test]
fn a_flag_not_given_takes_the_recorded_value() {
    let m = merge(
        given(),
        &record(&[("tag", "2025.10"), ("pull-policy", "Never")]),
    )
    .expect("merges");
    assert_eq!(m.args.spec.tag.as_deref(), Some("2025.10"));
    assert_eq!(m.args.spec.pull_policy.as_deref(), Some("Never"));
    assert_eq!(origin(&m, "tag"), Some(&Origin::Remembered));
    assert_eq!(
        m.record,
        record(&[("tag", "2025.10"), ("pull-policy", "Never")])
    );
}

#[test]
fn a_flag_given_wins_and_says_what_it_changed() {
    let mut args = given();
    args.spec.pull_policy = Some("IfNotPresent".into());
    args.spec.tag = Some("2025.10".into());
    args.spec.ingress = Some("nginx".into());
    let m = merge(
        args,
        &record(&[("tag", "2025.10"), ("pull-policy", "Always")]),
    )
    .expect("merges");
    assert_eq!(m.args.spec.pull_policy.as_deref(), Some("IfNotPresent"));
    assert_eq!(
        origin(&m, "pull-policy"),
        Some(&Origin::Changed {
            from: "Always".into(),
            by: "--pull-policy".into()
        })
    );
    assert_eq!(origin(&m, "tag"), Some(&Origin::Repeated));
    assert_eq!(origin(&m, "ingress"), Some(&Origin::New));
    assert_eq!(m.record["pull-policy"], "IfNotPresent");
    assert_eq!(m.record["ingress"], "nginx");
    let lines: Vec<String> = m.settings.iter().map(|s| s.text()).collect();
    assert!(
        lines.contains(&"pull-policy: Always → IfNotPresent (--pull-policy)".to_owned()),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"tag: 2025.10 (--tag, as remembered)".to_owned()),
        "{lines:?}"
    );
}

#[test]
fn a_remembered_switch_is_turned_off_with_false() {
    let recorded = record(&[("tftp-host-network", "true"), ("server-privileged", "true")]);
    let m = merge(given(), &recorded).expect("merges");
    assert_eq!(m.args.spec.tftp_host_network, Some(true));
    assert_eq!(m.args.spec.server_privileged, Some(true));

    let mut off = given();
    off.spec.tftp_host_network = Some(false);
    let m = merge(off, &recorded).expect("merges");
    assert_eq!(m.args.spec.tftp_host_network, Some(false));
    assert_eq!(m.record["tftp-host-network"], "false");
    assert_eq!(
        origin(&m, "tftp-host-network"),
        Some(&Origin::Changed {
            from: "true".into(),
            by: "--tftp-host-network".into()
        })
    );
    let (p, _) = params(
        {
            let mut a = given();
            a.spec.tftp_host_network = Some(false);
            a
        },
        &recorded,
    )
    .expect("valid");
    assert!(!p.spec.tftp.host_network);
    assert!(p.spec.server_security.privileged);
}

#[test]
fn a_repeatable_flag_given_replaces_the_recorded_list_as_a_whole() {
    let recorded = record(&[
        ("ssl-cname", "a.example.com,b.example.com"),
        ("volume-size", "root=2Gi,var-cache=20Gi"),
    ]);
    let m = merge(given(), &recorded).expect("merges");
    assert_eq!(m.args.spec.ssl_cnames, ["a.example.com", "b.example.com"]);
    assert_eq!(m.args.spec.volume_sizes, ["root=2Gi", "var-cache=20Gi"]);

    let mut args = given();
    args.spec.ssl_cnames = vec!["c.example.com".into()];
    let m = merge(args, &recorded).expect("merges");
    assert_eq!(m.args.spec.ssl_cnames, ["c.example.com"]);
    assert_eq!(m.record["ssl-cname"], "c.example.com");
    assert_eq!(m.args.spec.volume_sizes, ["root=2Gi", "var-cache=20Gi"]);
}

#[test]
fn the_named_size_flags_are_remembered_one_by_one() {
    let recorded = record(&[
        ("volumes-database-size", "80Gi"),
        ("volumes-www-size", "1Ti"),
    ]);
    let mut args = given();
    args.spec.named_sizes = vec![("volumes-www-size".into(), "2Ti".into())];
    let (p, _) = params(args, &recorded).expect("valid");
    let size = |name: &str| {
        p.spec
            .volumes
            .iter()
            .find(|v| v.name == name)
            .map(|v| v.size.clone())
    };
    assert_eq!(size("var-pgsql").as_deref(), Some("80Gi"));
    assert_eq!(size("srv-www").as_deref(), Some("2Ti"));
    assert_eq!(p.spec_record["volumes-www-size"], "2Ti");
}

#[test]
fn a_flag_given_drops_a_recorded_one_it_excludes() {
    let recorded = record(&[
        ("server-super-privileged", "true"),
        ("tftp-host-network", "true"),
    ]);
    let mut args = given();
    args.spec.server_selinux_type = Some("uyuni_container_t".into());
    args.spec.tftp = Some(false);
    let (p, settings) = params(args, &recorded).expect("the flags given win, no conflict");
    assert!(!p.spec.server_security.super_privileged);
    assert!(!p.spec.tftp.host_network);
    // Written as empty, so the write replaces them whoever wrote them.
    assert_eq!(p.spec_record["server-super-privileged"], "");
    assert_eq!(p.spec_record["tftp-host-network"], "");
    let dropped = settings
        .iter()
        .find(|s| s.flag == "tftp-host-network")
        .expect("listed");
    assert_eq!(dropped.text(), "tftp-host-network: true → unset (--tftp)");
}

#[test]
fn a_remembered_registry_user_keeps_the_secret_in_use_without_its_password() {
    let recorded = record(&[("registry-user", "bob")]);
    let (p, settings) = params(given(), &recorded).expect("no password is asked for");
    // Not in the arguments (it would need the password): the Secret registry-credentials of
    // the earlier run stays in use (resolve::in_effect).
    assert_eq!(p.spec.pull_secret, uyuni_core::params::PullSecret::None);
    assert_eq!(p.spec_record["registry-user"], "bob");
    assert_eq!(settings[0].text(), "registry-user: bob (remembered)");

    let mut mine = given();
    mine.spec.image_pull_secret = Some("my-pull-secret".into());
    let (p, _) = params(mine, &recorded).expect("the given pull Secret wins");
    assert_eq!(
        p.spec.pull_secret,
        uyuni_core::params::PullSecret::Existing("my-pull-secret".into())
    );
    assert_eq!(p.spec_record["registry-user"], "");
}

#[test]
fn an_empty_value_is_no_value() {
    let m = merge(given(), &record(&[("tag", ""), ("ingress", "  ")])).expect("merges");
    assert_eq!(m.args.spec.tag, None);
    assert_eq!(m.args.spec.ingress, None);
    assert!(m.settings.is_empty());
}

#[test]
fn a_malformed_record_names_the_config_map_the_key_and_the_fix() {
    let err = merge(given(), &record(&[("coco-replicas", "two")])).expect_err("malformed");
    let text = err.to_string();
    for part in [
        "ConfigMap uyuni-server-spec",
        "namespace uyuni",
        "coco-replicas",
        "\"two\"",
        "kubectl -n uyuni edit configmap uyuni-server-spec",
        "--coco-replicas",
    ] {
        assert!(text.contains(part), "{part:?} in {text}");
    }

    // A value of the right shape that no longer validates: found by leaving each remembered
    // value out in turn.
    let err = params(
        given(),
        &record(&[("tag", "2025.10"), ("pull-policy", "Sometimes")]),
    )
    .expect_err("invalid");
    assert!(
        matches!(&err, RecordError::Invalid { key, .. } if key == "pull-policy"),
        "{err}"
    );
    let text = err.to_string();
    assert!(text.contains("edit configmap uyuni-server-spec"), "{text}");
    assert!(text.contains("--pull-policy"), "{text}");

    let err = merge(given(), &record(&[("password", "x")])).expect_err("unknown");
    assert!(matches!(err, RecordError::UnknownKey { .. }), "{err}");
    assert!(err.to_string().contains("\"password\""), "{err}");
}

#[test]
fn an_error_of_the_flags_given_stays_theirs() {
    let mut args = given();
    args.spec.pull_policy = Some("Sometimes".into());
    let err = params(args, &record(&[("tag", "2025.10")])).expect_err("invalid flag");
    assert!(matches!(err, RecordError::Params(_)), "{err}");
}

#[test]
fn the_record_never_holds_a_secret() {
    use uyuni_core::params::FileInput;
    use uyuni_core::secret::SecretString;
    let file = |content: &str| {
        Some(FileInput {
            path: "f".into(),
            content: SecretString::new(content),
        })
    };
    let mut args = given();
    args.spec.registry_user = Some("bob".into());
    args.spec.registry_password = Some(SecretString::new("registry-password-1"));
    args.ssl_password = Some(SecretString::new("ca-password-1"));
    args.ssh_key_private = file("PRIVATE-KEY-1");
    args.spec.ssl_server_key = file("SERVER-KEY-1");
    args.spec.ssl_server_cert = file("SERVER-CERT-1");
    args.spec.ssl_ca_root = file("CA-ROOT-1");
    // Every remembered flag set, so that nothing is left out by chance.
    for flag in uyuni_core::record::FLAGS {
        let m = merge(args.clone(), &record(&[(flag, "value-of-the-record")]));
        if let Ok(m) = m {
            args = m.args;
        }
    }
    let m = merge(args, &BTreeMap::new()).expect("merges");
    let text = format!("{:?}", m.record);
    for secret in [
        "registry-password-1",
        "ca-password-1",
        "PRIVATE-KEY-1",
        "SERVER-KEY-1",
        "SERVER-CERT-1",
        "CA-ROOT-1",
    ] {
        assert!(!text.contains(secret), "{secret} in the record {text}");
    }
    assert_eq!(m.record["registry-user"], "bob");
}
