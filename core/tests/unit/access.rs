use uyuni_core::access::{Access, check, missing};
use uyuni_core::kubectl::Kubectl;

#[test]
fn only_denied_permissions_are_missing() {
    let jobs = Access::new("create", "batch", "jobs", Some("uyuni"));
    let secrets = Access::new("patch", "", "secrets", Some("uyuni"));
    let ns = Access::new("create", "", "namespaces", None);
    let answers = vec![(jobs.clone(), false), (secrets.clone(), true)];
    assert_eq!(
        missing(&[jobs.clone(), secrets, ns], &answers),
        vec![jobs.clone()]
    );
    let err = check(&[jobs], &answers).expect_err("refused");
    let k = Kubectl {
        kubeconfig: None,
        context: Some("prod".into()),
        migrate_flags: Vec::new(),
    };
    let text = err.render(&k);
    assert!(
        text.contains("create jobs.batch in namespace uyuni")
            && text.contains("`kubectl --context prod -n uyuni auth can-i create jobs.batch`")
            && text.contains("Nothing was written"),
        "{text}"
    );
}

#[test]
fn cluster_scoped_checks_have_no_namespace() {
    let ns = Access::new("create", "", "namespaces", None);
    assert_eq!(
        ns.can_i(&Kubectl::BARE),
        "kubectl auth can-i create namespaces"
    );
}
