use crate::unit::params::args;
use uyuni_core::builders::tftp::{WEB_SERVICE, tftp_deployment, tftp_service};
use uyuni_core::labels;
use uyuni_core::params::MigrateParams;

fn params(tftp: Option<bool>, host_network: bool) -> MigrateParams {
    let mut a = args();
    a.spec.tftp = tftp;
    a.spec.tftp_host_network = Some(host_network);
    MigrateParams::from_args(&a).expect("valid")
}

#[test]
fn the_deployment_is_the_charts() {
    let p = params(None, false);
    let d = tftp_deployment(&p.namespace, &p.spec, "uyuni.example.com", 1);
    let json = serde_json::to_value(&d).expect("json");
    assert_eq!(json["metadata"]["name"], "tftp");
    assert_eq!(json["metadata"]["labels"][labels::COMPONENT], "tftp");
    assert_eq!(json["metadata"]["labels"][labels::PART_OF], "uyuni");
    assert_eq!(
        json["spec"]["selector"]["matchLabels"],
        serde_json::json!({(labels::COMPONENT): "tftp", (labels::PART_OF): "uyuni"})
    );
    assert_eq!(json["spec"]["replicas"], 1);
    let pod = &json["spec"]["template"]["spec"];
    assert!(pod.get("hostNetwork").is_none() && pod.get("dnsPolicy").is_none());
    assert!(pod.get("volumes").is_none(), "it reads over HTTP");
    let c = &pod["containers"][0];
    assert_eq!(c["name"], "tftp");
    assert_eq!(c["image"], "registry.opensuse.org/uyuni/proxy-tftpd:latest");
    assert_eq!(c["imagePullPolicy"], "Always");
    assert_eq!(
        c["command"],
        serde_json::json!([
            "/usr/bin/tftp_wrapper.py",
            "--httpHost",
            "web.uyuni.svc",
            "--proxyFqdn",
            "uyuni.example.com",
            "--serverFqdn",
            "uyuni.example.com"
        ])
    );
    assert_eq!(
        c["ports"],
        serde_json::json!([{"name": "tftp", "containerPort": 69, "protocol": "UDP"}])
    );
    assert!(
        uyuni_core::ports::services(uyuni_core::ports::Features::default()).contains(&WEB_SERVICE),
        "the Service it fetches from exists"
    );
}

#[test]
fn on_the_host_network_the_pod_keeps_cluster_dns() {
    let p = params(Some(true), true);
    let d = tftp_deployment(&p.namespace, &p.spec, "uyuni.example.com", 1);
    let pod = d.spec.and_then(|s| s.template.spec).expect("pod");
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
}

#[test]
fn the_service_is_a_udp_load_balancer_selecting_the_tftp_pods() {
    let s = tftp_service("uyuni");
    let json = serde_json::to_value(&s).expect("json");
    assert_eq!(json["metadata"]["name"], "tftp");
    assert_eq!(json["metadata"]["namespace"], "uyuni");
    let spec = &json["spec"];
    assert_eq!(spec["type"], "LoadBalancer");
    assert_eq!(spec["sessionAffinity"], "ClientIP");
    assert_eq!(spec["externalTrafficPolicy"], "Local");
    assert_eq!(
        spec["selector"],
        serde_json::json!({(labels::COMPONENT): "tftp", (labels::PART_OF): "uyuni"})
    );
    assert_eq!(
        spec["ports"],
        serde_json::json!([{"name": "tftp", "port": 69, "targetPort": 69, "protocol": "UDP"}])
    );
    // The Deployment's pods carry what the Service selects.
    let p = params(None, false);
    let d = tftp_deployment(&p.namespace, &p.spec, "uyuni.example.com", 1);
    let pod_labels = d
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.labels)
        .expect("labels");
    for (k, v) in s.spec.and_then(|s| s.selector).expect("selector") {
        assert_eq!(pod_labels.get(&k), Some(&v), "{k}");
    }
}
