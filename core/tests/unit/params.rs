use uyuni_core::image::PullPolicy;
use uyuni_core::params::{
    FileInput, MigrateArgs, MigrateParams, ParamsError, ServerSecurity, ServerSpec, ServerSpecArgs,
    TftpParams, is_storage_quantity,
};
use uyuni_core::secret::SecretString;
use uyuni_core::ssh::SshProblem;
use uyuni_core::volumes;

pub(crate) fn args() -> MigrateArgs {
    MigrateArgs {
        namespace: "uyuni".into(),
        source_fqdn: "uyuni.example.com".into(),
        ssh_user: "root".into(),
        run_id: "20261129180000".into(),
        tool_version: "0.1.0".into(),
        ..MigrateArgs::default()
    }
}

#[test]
fn defaults_give_every_catalogue_volume_and_the_default_image() {
    let p = MigrateParams::from_args(&args()).expect("valid");
    assert_eq!(p.spec.volumes.len(), volumes::CATALOGUE.len());
    assert_eq!(
        p.spec.image.server,
        "registry.opensuse.org/uyuni/server:latest"
    );
    assert_eq!(p.spec.image.pull_policy, PullPolicy::Always);
    assert_eq!(
        p.spec.image.database,
        "registry.opensuse.org/uyuni/server-postgresql:latest"
    );
    assert_eq!(
        p.spec.image.database_upgrade,
        "registry.opensuse.org/uyuni/server-database-migration:latest"
    );
    assert!(p.spec.volumes.iter().all(|v| v.storage_class.is_none()));
}

/// A command without a source (install) validates the same flags the same way: the
/// specification needs no migrate input, and migrate's parameters hold exactly what it gives.
#[test]
fn the_server_specification_is_validated_alone_as_migrate_validates_it() {
    let mut given = args();
    given.spec.tag = Some("2025.10".into());
    given.spec.coco_replicas = Some(2);
    given.spec.volume_sizes = vec!["var-pgsql=80Gi".into()];
    let spec = ServerSpec::from_args(&given.spec).expect("valid without a source");
    assert_eq!(MigrateParams::from_args(&given).expect("valid").spec, spec);
    let bad = ServerSpecArgs {
        ingress: Some("haproxy".into()),
        ..ServerSpecArgs::default()
    };
    assert_eq!(
        ServerSpec::from_args(&bad),
        Err(ParamsError::Ingress("haproxy".into()))
    );
}

#[test]
fn database_images_follow_the_server_tag_unless_overridden() {
    let mut a = args();
    a.spec.tag = Some("2026.02".into());
    a.spec.registry_host = Some("localhost:5000".into());
    a.spec.dbupgrade_tag = Some("5.2.1".into());
    let p = MigrateParams::from_args(&a).expect("valid");
    assert_eq!(
        p.spec.image.database,
        "localhost:5000/uyuni/server-postgresql:2026.02"
    );
    assert_eq!(
        p.spec.image.database_upgrade,
        "localhost:5000/uyuni/server-database-migration:5.2.1"
    );
    let mut a = args();
    a.spec.db_image = Some("registry.example.com/pg:17".into());
    a.spec.db_tag = Some("ignored".into());
    let p = MigrateParams::from_args(&a).expect("valid");
    assert_eq!(p.spec.image.database, "registry.example.com/pg:17");
    let mut a = args();
    a.spec.dbupgrade_image = Some("bad image".into());
    assert!(matches!(
        MigrateParams::from_args(&a),
        Err(ParamsError::Image(_))
    ));
}

#[test]
fn the_tftp_image_follows_the_server_and_its_flags_are_checked() {
    let mut a = args();
    a.spec.tag = Some("2026.02".into());
    a.spec.registry_host = Some("localhost:5000".into());
    let p = MigrateParams::from_args(&a).expect("valid");
    assert_eq!(
        p.spec.image.tftp,
        "localhost:5000/uyuni/proxy-tftpd:2026.02"
    );
    assert_eq!(
        p.spec.tftp,
        TftpParams {
            enabled: None,
            host_network: false
        },
        "the source decides unless told"
    );
    a.spec.tftp_image = Some("registry.example.com/tftpd".into());
    a.spec.tftp_tag = Some("5.2.1".into());
    a.spec.tftp = Some(true);
    a.spec.tftp_host_network = Some(true);
    let p = MigrateParams::from_args(&a).expect("valid");
    assert_eq!(p.spec.image.tftp, "registry.example.com/tftpd:5.2.1");
    assert_eq!(
        p.spec.tftp,
        TftpParams {
            enabled: Some(true),
            host_network: true
        }
    );
    a.spec.tftp = Some(false);
    let e = MigrateParams::from_args(&a).expect_err("contradiction");
    assert_eq!(e, ParamsError::TftpHostNetworkWithoutTftp);
    assert!(e.to_string().contains("--tftp=false"), "{e}");
}

#[test]
fn sizes_and_classes_apply_to_the_right_volumes() {
    let mut a = args();
    a.spec.volumes_class = Some("fast".into());
    a.spec.volume_classes = vec!["var-pgsql=ssd".into()];
    a.spec.named_sizes = vec![("volumes-database-size".into(), "80Gi".into())];
    a.spec.volume_sizes = vec!["root=5Mi".into(), "srv-www=1.5Ti".into()];
    let p = MigrateParams::from_args(&a).expect("valid");
    let get = |n: &str| p.spec.volumes.iter().find(|v| v.name == n).expect("volume");
    assert_eq!(get("var-pgsql").size, "80Gi");
    assert_eq!(get("var-pgsql").storage_class.as_deref(), Some("ssd"));
    assert_eq!(get("root").size, "5Mi");
    assert_eq!(get("srv-www").size, "1.5Ti");
    assert_eq!(get("var-log").storage_class.as_deref(), Some("fast"));
}

#[test]
fn bad_inputs_are_refused_with_the_flag_named() {
    let mut a = args();
    a.spec.volume_sizes = vec!["nope=1Gi".into()];
    let e = MigrateParams::from_args(&a).expect_err("unknown volume");
    assert!(e.to_string().contains("--volume-size") && e.to_string().contains("nope"));

    let mut a = args();
    a.spec.volume_sizes = vec!["root=fifty gigs".into()];
    assert!(matches!(
        MigrateParams::from_args(&a),
        Err(ParamsError::Size { .. })
    ));

    let mut a = args();
    a.source_fqdn = "uyuni".into();
    assert!(matches!(
        MigrateParams::from_args(&a),
        Err(ParamsError::Fqdn(_))
    ));

    let mut a = args();
    a.namespace = "Bad_NS".into();
    assert!(matches!(
        MigrateParams::from_args(&a),
        Err(ParamsError::Namespace(_))
    ));

    let mut a = args();
    a.ssh_user = "-oProxyCommand=x".into();
    assert!(matches!(
        MigrateParams::from_args(&a),
        Err(ParamsError::User(_))
    ));

    let mut a = args();
    a.ssh_config = Some(FileInput::default());
    assert_eq!(
        MigrateParams::from_args(&a),
        Err(ParamsError::SshConfigWithoutKnownHosts)
    );
}

#[test]
fn ssh_files_are_checked() {
    let mut a = args();
    a.ssh_known_hosts = Some(FileInput {
        path: "kh".into(),
        content: SecretString::new("other.example.com ssh-ed25519 AAAA"),
    });
    let e = MigrateParams::from_args(&a).expect_err("host missing");
    assert!(e.to_string().contains("kh") && e.to_string().contains("uyuni.example.com"));

    let mut a = args();
    a.ssh_key_private = Some(FileInput {
        path: "id".into(),
        content: SecretString::new(
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nQUFB\n-----END ENCRYPTED PRIVATE KEY-----",
        ),
    });
    a.ssh_key_public = Some(FileInput {
        path: "id.pub".into(),
        content: SecretString::new("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 x"),
    });
    let e = MigrateParams::from_args(&a).expect_err("encrypted");
    assert!(matches!(
        e,
        ParamsError::SshFile {
            problem: SshProblem::Encrypted,
            ..
        }
    ));
    assert!(!e.to_string().contains("QUFB"), "no key material in errors");
}

#[test]
fn namespace_default_must_be_asked_for() {
    let mut a = args();
    a.namespace = "default".into();
    a.namespace_explicit = false;
    let e = MigrateParams::from_args(&a).expect_err("implicit default");
    assert_eq!(e, ParamsError::DefaultNamespace);
    assert!(e.to_string().contains("-n NAMESPACE"), "{e}");
    a.namespace_explicit = true;
    assert!(MigrateParams::from_args(&a).is_ok(), "-n default given");
    a.namespace = "uyuni".into();
    a.namespace_explicit = false;
    assert!(
        MigrateParams::from_args(&a).is_ok(),
        "only default is refused"
    );
}

#[test]
fn a_public_key_of_another_pair_is_refused_naming_both_flags() {
    use crate::unit::ssh::keygen;
    for kind in ["ed25519", "rsa"] {
        let (private, public) = keygen(kind, "");
        let (_, other) = keygen(kind, "");
        let file = |path: &str, content: &str| {
            Some(FileInput {
                path: path.into(),
                content: SecretString::new(content),
            })
        };
        let mut a = args();
        a.ssh_key_private = file("/keys/id", &private);
        a.ssh_key_public = file("/keys/other.pub", &other);
        let e = MigrateParams::from_args(&a).expect_err("mismatched pair");
        assert!(matches!(
            e,
            ParamsError::SshKeyPairMismatch {
                problem: SshProblem::NotThePair { .. },
                ..
            }
        ));
        let text = e.to_string();
        assert!(
            text.contains("--ssh-key-private /keys/id")
                && text.contains("--ssh-key-public /keys/other.pub"),
            "{text}"
        );
        a.ssh_key_public = file("/keys/id.pub", &public);
        let p = MigrateParams::from_args(&a).expect("matching pair");
        assert_eq!(p.ssh_key.map(|k| k.public), Some(public));
    }
}

#[test]
fn third_party_certificates_are_checked_and_the_db_defaults_to_the_server_ones() {
    let file = |path: &str, content: &str| FileInput {
        path: path.into(),
        content: SecretString::new(content),
    };
    let tls = crate::common::tls_chain();
    let mut a = args();
    a.spec.ssl_server_cert = Some(file("s.crt", &tls.cert));
    a.spec.ssl_server_key = Some(file("s.key", &tls.key));
    a.spec.ssl_ca_root = Some(file("ca.crt", &tls.root));
    a.spec.ssl_cnames = vec!["Alias.Example.com".into(), "alias.example.com.".into()];
    let p = MigrateParams::from_args(&a).expect("valid");
    let tp = p.spec.tls.third_party.clone().expect("third party");
    assert_eq!(tp.server, tp.db);
    assert!(tp.server.chain == tls.cert && tp.server.root == tls.root);
    assert_eq!(p.spec.tls.cnames, ["alias.example.com"]);
    assert!(
        !format!("{:?}", MigrateParams::from_args(&a))
            .contains(crate::common::key_body_line(&tls.key))
    );

    let mut b = a.clone();
    b.spec.ssl_server_key = Some(file(
        "s.key",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nX\n-----END ENCRYPTED PRIVATE KEY-----",
    ));
    let e = MigrateParams::from_args(&b).expect_err("encrypted");
    assert!(
        e.to_string().contains("s.key") && e.to_string().contains("encrypted"),
        "{e}"
    );

    let mut c = a.clone();
    c.spec.ssl_ca_root = None;
    assert!(matches!(
        MigrateParams::from_args(&c),
        Err(ParamsError::TlsIncomplete(_))
    ));
    let mut d = args();
    d.spec.ssl_cnames = vec!["not a name".into()];
    assert!(matches!(
        MigrateParams::from_args(&d),
        Err(ParamsError::Cname(_))
    ));
}

#[test]
fn quantities() {
    for ok in ["1", "10Mi", "1.5Gi", "100G", "2Ti"] {
        assert!(is_storage_quantity(ok), "{ok}");
    }
    for bad in ["", "Gi", "0", "1.Gi", "-1Gi", "10 Gi", "1Gb", "abc"] {
        assert!(!is_storage_quantity(bad), "{bad}");
    }
}

#[test]
fn the_server_runs_as_the_chart_confines_it_unless_asked_otherwise() {
    let plain = MigrateParams::from_args(&args()).expect("valid");
    assert_eq!(plain.spec.server_security, ServerSecurity::default());

    let mut a = args();
    a.spec.server_privileged = Some(true);
    a.spec.server_selinux_type = Some(" uyuni_container_t ".into());
    a.spec.server_apparmor_profile = Some("uyuni-server".into());
    let p = MigrateParams::from_args(&a).expect("valid");
    assert!(p.spec.server_security.privileged);
    assert_eq!(
        p.spec.server_security.selinux_type.as_deref(),
        Some("uyuni_container_t")
    );
    assert_eq!(
        p.spec.server_security.apparmor_profile.as_deref(),
        Some("uyuni-server")
    );

    let mut b = args();
    b.spec.server_super_privileged = Some(true);
    b.spec.server_apparmor_profile = Some("uyuni-server".into());
    assert!(matches!(
        MigrateParams::from_args(&b),
        Err(ParamsError::SuperPrivilegedWithProfile)
    ));
    let mut c = args();
    c.spec.server_selinux_type = Some("a b".into());
    assert!(matches!(
        MigrateParams::from_args(&c),
        Err(ParamsError::SecurityName { .. })
    ));
}

#[test]
fn volume_sizes_are_bounded() {
    use uyuni_core::params::storage_bytes;
    assert_eq!(storage_bytes("1.5Gi"), Some(3 << 29));
    assert_eq!(storage_bytes("500M"), Some(500_000_000));
    assert_eq!(storage_bytes("10Gi"), Some(10 << 30));
    assert_eq!(storage_bytes("big"), None);
    let with = |edit: fn(&mut MigrateArgs)| {
        let mut a = args();
        edit(&mut a);
        MigrateParams::from_args(&a)
    };
    let tiny = with(|a| a.spec.named_sizes = vec![("volumes-database-size".into(), "5".into())])
        .expect_err("a 5-byte database");
    assert!(
        matches!(tiny, ParamsError::DatabaseVolumeTooSmall(_)),
        "{tiny:?}"
    );
    assert!(tiny.to_string().contains("at least 1Gi"));
    let huge = with(|a| a.spec.volume_sizes = vec!["srv-www=999999999Ei".into()])
        .expect_err("larger than int64 bytes");
    assert!(matches!(huge, ParamsError::SizeTooLarge { .. }), "{huge:?}");
    assert!(with(|a| a.spec.volume_sizes = vec!["var-pgsql=2Gi".into()]).is_ok());
    // Every other volume: at least 1Mi, the message naming the flag, the volume and its path.
    let packages =
        with(|a| a.spec.named_sizes = vec![("volumes-packages-size".into(), "5".into())])
            .expect_err("a 5-byte packages volume");
    assert!(
        matches!(
            packages,
            ParamsError::VolumeTooSmall { volume, .. } if volume.name == "var-spacewalk"
        ),
        "{packages:?}"
    );
    assert!(
        packages.to_string().starts_with(
            "--volumes-packages-size: \"5\" (5 bytes) is too small for volume var-spacewalk (/var/spacewalk): give at least 1Mi (its default is 100Gi)"
        ),
        "{packages}"
    );
    let root = with(|a| a.spec.volume_sizes = vec!["root=1k".into()]).expect_err("1000 bytes");
    assert!(
        root.to_string()
            .starts_with("--volume-size: \"1k\" (1000 bytes) is too small for volume root (/root)"),
        "{root}"
    );
    assert!(with(|a| a.spec.volume_sizes = vec!["root=1Mi".into()]).is_ok());
    assert!(with(|a| a.spec.volume_sizes = vec!["srv-www=500Mi".into()]).is_ok());
}
