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
use crate::builders::{deployment, meta};
use crate::catalogue::components;
use crate::params::ServerSpec;

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
/// The TFTP Deployment. `fqdn` is the server's: the wrapper answers as the server, as the chart
/// passes `global.fqdn` for both names. With `--tftp-host-network` the pod uses its node's
/// network, and cluster DNS all the same (`ClusterFirstWithHostNet`) to find Service `web`.
pub fn tftp_deployment(
    namespace: &str,
    spec: &ServerSpec,
    fqdn: &str,
    replicas: i32,
) -> Deployment {
    let host_network = spec.tftp.host_network;
    let container = Container {
        name: "tftp".to_owned(),
        image: Some(spec.image.tftp.clone()),
        image_pull_policy: Some(spec.image.pull_policy.as_str().to_owned()),
        command: Some(
            [
                WRAPPER,
                "--httpHost",
                &format!("{WEB_SERVICE}.{namespace}.svc"),
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
        namespace,
        spec,
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
