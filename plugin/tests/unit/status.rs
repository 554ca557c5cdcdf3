use kubectl_uyuni::status::human;
use uyuni_core::observed::Observed;
use uyuni_core::status::report;

#[test]
fn nothing_installed_says_so_and_how_to_install_or_migrate() {
    let text = human(&report(
        "uyuni",
        &Observed::default(),
        &[],
        &uyuni_core::kubectl::Kubectl::BARE,
    ));
    assert!(
        text.starts_with("Nothing of kubectl-uyuni's is in namespace uyuni"),
        "{text}"
    );
    assert!(
        text.contains("kubectl uyuni -n uyuni install FQDN")
            && text.contains("kubectl uyuni -n uyuni migrate SOURCE_FQDN"),
        "{text}"
    );
}

/// `status` of the state an install from an empty cluster ends in, as the preview simulates
/// it: the sample in docs/status.md (the docs test compares the two).
#[test]
fn a_finished_install_is_healthy() {
    use k8s_openapi::api::core::v1::PersistentVolumeClaimStatus;
    use uyuni_core::Object;
    use uyuni_core::object::CustomKind;
    use uyuni_core::params::{CaSubjectArgs, GeneratedPasswords, InstallArgs, InstallParams};
    use uyuni_core::secret::SecretString;

    let args = InstallArgs {
        namespace: "uyuni".into(),
        run_id: "20261129180000".into(),
        tool_version: "0.1.0".into(),
        fqdn: "server.example.com".into(),
        admin_password: Some(SecretString::new("Adm1n-pass-word")),
        organization: Some("Example Org".into()),
        generated: GeneratedPasswords {
            db: SecretString::new("gen-db-0123456789"),
            db_admin: SecretString::new("gen-dba-0123456789"),
            report_db: SecretString::new("gen-rep-0123456789"),
        },
        ssl_subject: CaSubjectArgs::default(),
        ..InstallArgs::default()
    };
    let params = InstallParams::from_args(&args).expect("valid install arguments");
    let mut empty = Observed::default();
    empty.serve(CustomKind::Issuer);
    empty.serve(CustomKind::Certificate);
    let preview = uyuni_core::preview(&params, &empty).expect("plans");
    // The simulation binds no claim: bind each as the cluster's provisioner would, with the
    // size it asks for, in class local-path.
    let mut end = preview.end.clone();
    let claims: Vec<_> = end
        .objects
        .iter()
        .filter_map(|(_, o)| match o {
            Object::PersistentVolumeClaim(c) => Some(c.clone()),
            _ => None,
        })
        .collect();
    for mut claim in claims {
        let size = claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .cloned();
        if let Some(spec) = claim.spec.as_mut() {
            spec.storage_class_name = Some("local-path".into());
        }
        claim.status = Some(PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            capacity: size.map(|s| [("storage".to_owned(), s)].into()),
            ..PersistentVolumeClaimStatus::default()
        });
        end.insert(Object::PersistentVolumeClaim(claim));
    }
    let text = human(&report(
        "uyuni",
        &end,
        &[],
        &uyuni_core::kubectl::Kubectl::BARE,
    ));
    uyuni_testdata::golden::check_golden("status-after-install", "status.txt", &text);

    // An upgrade that has not reached its images is a problem whose commands carry the run's
    // connection flags.
    let record = uyuni_core::plan::upgrade::UpgradeRecord {
        to: [(
            "uyuni".to_owned(),
            "registry.example.com/uyuni/server:9999.1".to_owned(),
        )]
        .into(),
        release_from: "2025.10".into(),
        release_to: "9999.1".into(),
        ..Default::default()
    };
    end.insert(Object::ConfigMap(record.config_map("uyuni")));
    let kubectl = uyuni_core::kubectl::Kubectl {
        kubeconfig: Some("/etc/k.yaml".into()),
        context: Some("prod".into()),
        as_user: Some("alice".into()),
        ..Default::default()
    };
    let status = report("uyuni", &end, &[], &kubectl);
    let problem = status
        .problems
        .iter()
        .find(|p| p.object == "ConfigMap uyuni-upgrade")
        .unwrap_or_else(|| panic!("{:#?}", status.problems));
    for flag in [
        "--kubeconfig /etc/k.yaml",
        "--context prod",
        "--as alice",
        "-n uyuni upgrade",
    ] {
        assert!(
            problem.message.contains(flag),
            "{flag}: {}",
            problem.message
        );
    }
    assert_eq!(status.upgrade.as_ref().map(|u| u.state), Some("unfinished"));
}
