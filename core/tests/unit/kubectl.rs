use uyuni_core::kubectl::Kubectl;

#[test]
fn bare_commands_name_only_the_namespace() {
    assert_eq!(
        Kubectl::BARE.cmd(Some("uyuni"), "logs job/x"),
        "kubectl -n uyuni logs job/x"
    );
    assert_eq!(
        Kubectl::BARE.cmd(None, "cluster-info"),
        "kubectl cluster-info"
    );
}

#[test]
fn the_runs_flags_come_first_and_are_quoted_where_needed() {
    let k = Kubectl {
        kubeconfig: Some("/home/me/my clusters/prod.yaml".into()),
        context: Some("prod-admin@prod".into()),
        migrate_flags: Vec::new(),
        ..Default::default()
    };
    assert_eq!(
        k.cmd(Some("uyuni"), "get jobs"),
        "kubectl --kubeconfig '/home/me/my clusters/prod.yaml' --context prod-admin@prod -n uyuni get jobs"
    );
    let odd = Kubectl {
        kubeconfig: None,
        context: Some("it's".into()),
        migrate_flags: Vec::new(),
        ..Default::default()
    };
    assert_eq!(odd.cmd(None, ""), r"kubectl --context 'it'\''s'");
}

#[test]
fn plugin_commands_carry_the_connection_and_migrate_flags() {
    let k = Kubectl {
        kubeconfig: Some("/k".into()),
        context: Some("c".into()),
        migrate_flags: vec![
            "--tag".into(),
            "5.1".into(),
            "--ssh-knownhosts".into(),
            "/my dir/kh".into(),
        ],
        ..Default::default()
    };
    assert_eq!(
        k.migrate(Some("uyuni"), "src.example.com", true),
        "kubectl uyuni --kubeconfig /k --context c -n uyuni migrate src.example.com --prepare --tag 5.1 --ssh-knownhosts '/my dir/kh'"
    );
    assert_eq!(
        k.uyuni(Some("uyuni"), "version"),
        "kubectl uyuni --kubeconfig /k --context c -n uyuni version"
    );
    assert_eq!(
        Kubectl::BARE.migrate(None, "s", false),
        "kubectl uyuni migrate s"
    );
}

#[test]
fn plan_errors_render_their_hints_with_the_flags() {
    let err = uyuni_core::PlanError::NoExtractedData {
        job: "uyuni-data-sync-1".into(),
        namespace: "uyuni".into(),
        detail: "empty".into(),
        remedy: "run again".into(),
    };
    let k = Kubectl {
        kubeconfig: Some("/k".into()),
        context: Some("c".into()),
        migrate_flags: Vec::new(),
        ..Default::default()
    };
    assert!(
        err.render(&k)
            .contains("`kubectl --kubeconfig /k --context c -n uyuni logs job/uyuni-data-sync-1`")
    );
    assert!(
        err.to_string()
            .contains("`kubectl -n uyuni logs job/uyuni-data-sync-1`")
    );
    let gone = uyuni_core::PlanError::NamespaceTerminating("uyuni".into());
    assert!(
        gone.render(&k)
            .contains("`kubectl --kubeconfig /k --context c get namespace uyuni`"),
        "cluster-scoped: no -n"
    );
}

#[test]
fn hints_carry_the_identity_the_run_acted_as() {
    let k = Kubectl {
        context: Some("prod".into()),
        as_user: Some("alice".into()),
        as_groups: vec!["ops team".into()],
        ..Default::default()
    };
    assert_eq!(
        k.cmd(Some("uyuni"), "auth can-i get pods/log"),
        "kubectl --context prod --as alice --as-group 'ops team' -n uyuni auth can-i get pods/log"
    );
    assert!(
        k.uyuni(Some("uyuni"), "status")
            .starts_with("kubectl uyuni --context prod --as alice --as-group 'ops team' -n uyuni"),
        "{}",
        k.uyuni(Some("uyuni"), "status")
    );
}

#[test]
fn hints_carry_the_connection_flags_and_never_the_token() {
    let k = Kubectl {
        kubeconfig: Some("/k".into()),
        context: Some("c".into()),
        cluster: Some("prod".into()),
        user: Some("ops".into()),
        server: Some("https://api.example.com:6443".into()),
        certificate_authority: Some("/etc/ca.pem".into()),
        token: true,
        as_user: Some("alice".into()),
        ..Default::default()
    };
    assert_eq!(
        k.cmd(Some("uyuni"), "auth can-i get secrets"),
        "kubectl --kubeconfig /k --context c --cluster prod --user ops --server https://api.example.com:6443 --certificate-authority /etc/ca.pem --token \"$TOKEN\" --as alice -n uyuni auth can-i get secrets"
    );
    // A plugin command names the kubeconfig user --kube-user: `migrate --user` is the SSH user.
    assert_eq!(
        k.migrate(Some("uyuni"), "src", false),
        "kubectl uyuni --kubeconfig /k --context c --cluster prod --kube-user ops --server https://api.example.com:6443 --certificate-authority /etc/ca.pem --token \"$TOKEN\" --as alice -n uyuni migrate src"
    );
    let insecure = Kubectl {
        insecure_skip_tls_verify: true,
        ..Default::default()
    };
    assert_eq!(
        insecure.cmd(None, "cluster-info"),
        "kubectl --insecure-skip-tls-verify cluster-info"
    );
}

/// Every command a plan error advises carries all of the run's identity flags: the upgrade an
/// unfinished upgrade or an image change asks for, and the look-up of the data-sync Jobs after
/// the extracted data's home was lost (issue 38).
#[test]
fn plan_errors_advise_upgrade_and_job_commands_with_the_runs_identity() {
    use uyuni_core::PlanError;
    use uyuni_core::observed::ExtractError;
    let k = Kubectl {
        kubeconfig: Some("/k".into()),
        context: Some("c".into()),
        cluster: Some("prod".into()),
        user: Some("ops".into()),
        as_user: Some("alice".into()),
        as_groups: vec!["ops".into()],
        ..Default::default()
    };
    let identity = "--kubeconfig /k --context c --cluster prod --kube-user ops --as alice --as-group ops -n uyuni";
    let unfinished = PlanError::UpgradeUnfinished {
        namespace: "uyuni".into(),
        to: "2026.10".into(),
    };
    assert!(
        unfinished.render(&k).contains(&format!(
            "run `kubectl uyuni {identity} upgrade` with the same image flags"
        )),
        "{}",
        unfinished.render(&k)
    );
    assert!(
        unfinished
            .to_string()
            .contains("run `kubectl uyuni -n uyuni upgrade` with the same image flags")
    );
    let image = PlanError::ImageChangeOnRunningServer {
        namespace: "uyuni".into(),
        running: "Deployment uyuni".into(),
        changes: "Deployment uyuni runs a, this run asks for b".into(),
        same: k.migrate(Some("uyuni"), "src", false),
    };
    assert!(
        image.render(&k).contains(&format!(
            "Run `kubectl uyuni {identity} upgrade` with the same image flags"
        )),
        "{}",
        image.render(&k)
    );
    let lost = PlanError::ExtractedData {
        job: "uyuni-data-sync-1".into(),
        namespace: "uyuni".into(),
        source: ExtractError::HomeLacks {
            key: "ca_key",
            home: "uyuni-ca",
        },
    };
    let kubectl_identity = identity.replace("--kube-user", "--user");
    assert!(
        lost.render(&k).contains(&format!(
            "(`kubectl {kubectl_identity} get jobs -l kubectl-uyuni.io/step=data-sync`)"
        )),
        "{}",
        lost.render(&k)
    );
}
