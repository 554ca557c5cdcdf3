//! The TFTP server: Deployment and Service `tftp` as the official chart writes them
//! (`templates/tftp.yaml`, the `tftp` Service of `services.yaml`; images-today §A.5, §C.2,
//! §C.3), so a chart install and ours are interchangeable.
//!
//! TFTP is a container of its own since server-image 5.2.5 ("Split the TFTP server into a
//! separate container"); the server image keeps it off. The container fetches what PXE clients
//! ask for from the server over HTTP (Service `web`), so it mounts no volume.
//!
//! It is exposed by a LoadBalancer Service, never through the ingress controller: a TFTP server
//! answers each request from a new port (RFC 1350's transfer identifiers), and a UDP proxy —
//! Traefik's IngressRouteUDP, ingress-nginx's `udp` map — only relays replies that come from the
//! port it forwarded to, so the transfer never reaches the client. The chart's comment says the
//! same of ClusterIP and NodePort Services. Where no LoadBalancer implementation exists,
//! `--tftp-host-network` puts the pod on its node's network instead (the chart's
//! `tftp.hostNetwork`), and there is no Service.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PodSpec, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::builders::database::selector;
use crate::builders::{components, deployment, meta};
use crate::observed::ExtractedData;
use crate::params::MigrateParams;

pub use crate::catalogue::names::{TFTP_DEPLOYMENT as DEPLOYMENT, TFTP_SERVICE as SERVICE};
/// TFTP's well-known port, used by both the container and the Service. It is not in
/// [`crate::ports::CATALOGUE`]: the catalogue's ports are the server's (and its companions'),
/// exposed by ClusterIP Services and routed by the ingress controller; this one is served by its
/// own Deployment, exposed by a LoadBalancer Service or the host network, and must never be
/// routed by the ingress controller (see the module documentation).
pub const PORT: i32 = 69;
const PORT_NAME: &str = "tftp";
pub use crate::catalogue::names::WEB_SERVICE;
const WRAPPER: &str = "/usr/bin/tftp_wrapper.py";

/// Whether the TFTP server is deployed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// `--tftp=true`, or `tftp.socket` was enabled on the source.
    On,
    /// `--tftp=false`, or `tftp.socket` was not enabled on the source.
    Off,
    /// A dry run before the data sync: the source decides. Planned as if on, and said so.
    Unknown,
}

/// The data sync did not record whether the source served TFTP (data written by an older
/// kubectl-uyuni), and no flag decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the data sync did not record whether tftp.socket was enabled on the source")]
pub struct NotRecorded;

/// The flag wins; otherwise what the source did.
pub fn decide(params: &MigrateParams, data: &ExtractedData) -> Result<Decision, NotRecorded> {
    match (params.tftp.enabled, data.tftp) {
        (Some(true), _) => Ok(Decision::On),
        (Some(false), _) => Ok(Decision::Off),
        _ if data.placeholder => Ok(Decision::Unknown),
        (None, Some(true)) => Ok(Decision::On),
        (None, Some(false)) => Ok(Decision::Off),
        (None, None) => Err(NotRecorded),
    }
}

/// Where the decision came from, for step descriptions.
pub fn origin(params: &MigrateParams, decision: Decision) -> &'static str {
    match (params.tftp.enabled, decision) {
        (Some(true), _) => "--tftp",
        (Some(false), _) => "--tftp=false",
        (None, Decision::On) => "tftp.socket was enabled on the source",
        (None, Decision::Off) => "tftp.socket was not enabled on the source",
        (None, Decision::Unknown) => {
            "if tftp.socket is enabled on the source: known after data-sync"
        }
    }
}

/// The TFTP Deployment. `fqdn` is the server's: the wrapper answers as the server, as the chart
/// passes `global.fqdn` for both names. With `--tftp-host-network` the pod uses its node's
/// network, and cluster DNS all the same (`ClusterFirstWithHostNet`) to find Service `web`.
pub fn tftp_deployment(params: &MigrateParams, fqdn: &str, replicas: i32) -> Deployment {
    let host_network = params.tftp.host_network;
    let container = Container {
        name: "tftp".to_owned(),
        image: Some(params.image.tftp.clone()),
        image_pull_policy: Some(params.image.pull_policy.as_str().to_owned()),
        command: Some(
            [
                WRAPPER,
                "--httpHost",
                &format!("{WEB_SERVICE}.{}.svc", params.namespace),
                "--proxyFqdn",
                fqdn,
                "--serverFqdn",
                fqdn,
            ]
            .map(str::to_owned)
            .to_vec(),
        ),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.to_owned()),
            container_port: PORT,
            protocol: Some("UDP".to_owned()),
            ..ContainerPort::default()
        }]),
        // No probes, as in the chart: the kubelet cannot probe UDP, and what the image offers
        // for an exec probe is not known. Ready means running; crash loops and pull errors
        // still end the wait for it.
        ..Container::default()
    };
    deployment(
        params,
        DEPLOYMENT,
        components::TFTP,
        replicas,
        PodSpec {
            host_network: host_network.then_some(true),
            dns_policy: host_network.then(|| "ClusterFirstWithHostNet".to_owned()),
            containers: vec![container],
            ..PodSpec::default()
        },
    )
}

/// The TFTP Service: a LoadBalancer (see the module documentation for why), the client's
/// packets to one pod (`ClientIP`), and the client's address kept with no hop between nodes
/// (`Local`), as the chart has it.
pub fn tftp_service(namespace: &str) -> Service {
    Service {
        metadata: meta(SERVICE, namespace, components::TFTP),
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            selector: Some(selector(components::TFTP)),
            session_affinity: Some("ClientIP".to_owned()),
            external_traffic_policy: Some("Local".to_owned()),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.to_owned()),
                port: PORT,
                target_port: Some(IntOrString::Int(PORT)),
                protocol: Some("UDP".to_owned()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels;
    use crate::params::{MigrateParams, tests::args};
    use crate::secret::SecretString;

    fn data(tftp: Option<bool>, placeholder: bool) -> ExtractedData {
        ExtractedData {
            job: "uyuni-data-sync-20261129180000".into(),
            timezone: "Etc/UTC".into(),
            pg_version: "16".into(),
            db_user: "spacewalk".into(),
            db_password: SecretString::new("pw"),
            db_name: "susemanager".into(),
            db_port: "5432".into(),
            report_db_user: "pythia".into(),
            report_db_password: SecretString::new("pw"),
            has_hubxmlrpc: false,
            debug: false,
            tftp,
            mirror: None,
            fqdn: None,
            ca_cert: None,
            ca_key: None,
            server_cert: None,
            server_key: None,
            placeholder,
        }
    }

    fn params(tftp: Option<bool>, host_network: bool) -> MigrateParams {
        let mut a = args();
        a.tftp = tftp;
        a.tftp_host_network = host_network;
        MigrateParams::from_args(&a).expect("valid")
    }

    #[test]
    fn the_flag_wins_over_the_source_and_the_source_decides_otherwise() {
        for source in [Some(true), Some(false), None] {
            assert_eq!(
                decide(&params(Some(true), false), &data(source, false)),
                Ok(Decision::On)
            );
            assert_eq!(
                decide(&params(Some(false), false), &data(source, false)),
                Ok(Decision::Off)
            );
        }
        let auto = params(None, false);
        assert_eq!(decide(&auto, &data(Some(true), false)), Ok(Decision::On));
        assert_eq!(decide(&auto, &data(Some(false), false)), Ok(Decision::Off));
        assert_eq!(decide(&auto, &data(None, false)), Err(NotRecorded));
        assert_eq!(decide(&auto, &data(None, true)), Ok(Decision::Unknown));
        assert!(origin(&auto, Decision::Unknown).contains("known after data-sync"));
    }

    #[test]
    fn the_deployment_is_the_charts() {
        let p = params(None, false);
        let d = tftp_deployment(&p, "uyuni.example.com", 1);
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
            crate::ports::services(crate::ports::Features::default()).contains(&WEB_SERVICE),
            "the Service it fetches from exists"
        );
    }

    #[test]
    fn on_the_host_network_the_pod_keeps_cluster_dns() {
        let d = tftp_deployment(&params(Some(true), true), "uyuni.example.com", 1);
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
        let d = tftp_deployment(&params(None, false), "uyuni.example.com", 1);
        let pod_labels = d
            .spec
            .and_then(|s| s.template.metadata)
            .and_then(|m| m.labels)
            .expect("labels");
        for (k, v) in s.spec.and_then(|s| s.selector).expect("selector") {
            assert_eq!(pod_labels.get(&k), Some(&v), "{k}");
        }
    }
}
