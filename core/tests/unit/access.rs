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
        ..Default::default()
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

#[test]
fn a_delete_step_needs_delete_and_the_watch_of_its_wait() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use uyuni_core::object::{Kind, Object, ObjectRef};
    use uyuni_core::observed::Observed;
    use uyuni_core::plan::delete_step;

    let params = crate::common::params();
    let mut observed = Observed::default();
    observed.insert(Object::Deployment(Deployment {
        metadata: ObjectMeta {
            name: Some("uyuni".into()),
            ..ObjectMeta::default()
        },
        ..Deployment::default()
    }));
    let step = delete_step(
        &observed,
        ObjectRef::new(Kind::Deployment, "uyuni"),
        "goes".into(),
    )
    .expect("allowed");
    let needed = uyuni_core::access::needed_by(&params, &observed, &[step]);
    let ns = Some(params.namespace.as_str());
    for verb in ["delete", "list", "watch"] {
        let access = Access::new(verb, "apps", "deployments", ns);
        assert!(needed.contains(&access), "{access:?} not in {needed:?}");
    }
    // Planned without it, nothing asks for a delete.
    let without = uyuni_core::access::needed_by(&params, &observed, &[]);
    assert!(!without.iter().any(|a| a.verb == "delete"), "{without:?}");
}
