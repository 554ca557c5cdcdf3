use serde_json::{Value, json};
use uyuni_testdata::Flavour;
use uyuni_testdata::addons::bootstrap::{crds, established, objects, strip_descriptions};
use uyuni_testdata::addons::{AddonsConfig, BindingMode, meta};

fn config(flavour: Flavour, cert_manager: bool) -> AddonsConfig {
    AddonsConfig {
        flavour,
        cert_manager,
        volumes_dir: "/tmp/v".into(),
        crds_dir: uyuni_testdata::cluster::default_crds_dir(),
        binding_mode: BindingMode::WaitForFirstConsumer,
        resync: uyuni_testdata::addons::DEFAULT_RESYNC,
    }
}

fn names(objects: &[Value], kind: &str) -> Vec<String> {
    objects
        .iter()
        .filter(|o| o["kind"] == json!(kind))
        .map(|o| meta(o, "name").to_string())
        .collect()
}

#[test]
fn k3s_with_cert_manager_has_traefik_and_cert_managers_objects() {
    let objects = objects(&config(Flavour::K3s, true));
    assert_eq!(objects[0]["kind"], "Namespace");
    assert_eq!(names(&objects, "Namespace"), ["cert-manager"]);
    assert_eq!(names(&objects, "IngressClass"), ["traefik"]);
    let deployments = names(&objects, "Deployment");
    for d in [
        "traefik",
        "coredns",
        "cert-manager",
        "cert-manager-cainjector",
        "cert-manager-webhook",
    ] {
        assert!(deployments.contains(&d.to_string()), "{deployments:?}");
    }
    assert!(objects.iter().all(|o| o.get("status").is_none()));
    assert!(names(&objects, "Node").is_empty());
    assert!(names(&objects, "ServiceAccount").is_empty());
    let sc = objects.last().expect("a StorageClass");
    assert_eq!(sc["volumeBindingMode"], "WaitForFirstConsumer");
    assert_eq!(
        sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"],
        "true"
    );
    let crds = crds(&config(Flavour::K3s, true));
    let crd_names: Vec<&str> = crds.iter().map(|c| meta(c, "name")).collect();
    for c in [
        "ingressroutes.traefik.io",
        "helmchartconfigs.helm.cattle.io",
        "certificates.cert-manager.io",
        "issuers.cert-manager.io",
        "clusterissuers.cert-manager.io",
    ] {
        assert!(crd_names.contains(&c), "{crd_names:?}");
    }
    assert!(crds.iter().all(|c| c.get("status").is_none()));
}

#[test]
fn rke2_has_nginx_and_plain_has_no_ingress_class_nor_cert_manager() {
    let rke2 = objects(&config(Flavour::Rke2, false));
    assert_eq!(names(&rke2, "IngressClass"), ["nginx"]);
    assert!(names(&rke2, "Namespace").is_empty());
    let plain = objects(&config(Flavour::Plain, false));
    assert!(names(&plain, "IngressClass").is_empty());
    assert_eq!(names(&plain, "Deployment"), ["coredns"]);
    assert!(crds(&config(Flavour::Plain, false)).is_empty());
}

#[test]
fn the_crds_schemas_keep_their_fields_without_the_prose() {
    let crds = crds(&config(Flavour::K3s, true));
    for crd in &crds {
        for version in crd["spec"]["versions"].as_array().expect("versions") {
            let schema = &version["schema"]["openAPIV3Schema"];
            let text = serde_json::to_string(schema).expect("JSON");
            assert!(
                !text.contains("\"description\":\""),
                "{}",
                meta(crd, "name")
            );
        }
    }
    let certificate = crds
        .iter()
        .find(|c| meta(c, "name") == "certificates.cert-manager.io")
        .expect("the Certificate CRD");
    let spec =
        &certificate["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["properties"]["secretName"]["type"], "string");
    assert!(spec["required"].as_array().is_some_and(|r| !r.is_empty()));

    let mut schema = json!({"type": "object", "description": "prose", "properties": {
        "description": {"type": "string", "description": "more prose"},
    }});
    strip_descriptions(&mut schema);
    assert_eq!(
        schema,
        json!({"type": "object", "properties": {"description": {"type": "string"}}})
    );
}

#[test]
fn established_reads_the_condition() {
    assert!(!established(&json!({"status": {"conditions": [
        {"type": "NamesAccepted", "status": "True"},
        {"type": "Established", "status": "False"},
    ]}})));
    assert!(established(&json!({"status": {"conditions": [
        {"type": "Established", "status": "True"},
    ]}})));
    assert!(!established(&json!({})));
}
