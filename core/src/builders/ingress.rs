//! Exposing the server (reference §6.3–6.5 with D12, D13, D23, D24, D53 fixed): the Ingresses
//! for the detected controller with `ingressClassName`, Traefik's redirect middleware and TCP/UDP
//! routes (traefik.io), and the controllers' HelmChartConfig objects through the API.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, IngressTLS, ServiceBackendPort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::json;

use crate::builders::meta;

use crate::catalogue::{components, names};
use crate::object::{CustomKind, CustomObject};
use crate::ports::{self, Features, PortDef, Protocol};
use crate::resolve::Controller;

/// Paths that must stay reachable over plain HTTP (clients, PXE). The reference's two regular
/// expressions are expanded into prefixes (D53); `/rhn/<name>/DownloadFile` has no prefix form
/// and goes over HTTPS.
pub const PLAIN_HTTP_PATHS: &[&str] = &[
    "/pub",
    "/rpc/api",
    "/rhn/rpc/api",
    "/rhn/errors",
    "/rhn/ty/TinyUrl",
    "/rhn/websocket",
    "/rhn/metrics",
    "/cobbler_api",
    "/cblr",
    "/httpboot",
    "/images",
    "/cobbler",
    "/os-images",
    "/tftp",
    "/docs",
];

fn web_path(path: &str) -> HTTPIngressPath {
    HTTPIngressPath {
        path: Some(path.to_owned()),
        path_type: "Prefix".to_owned(),
        backend: IngressBackend {
            service: Some(IngressServiceBackend {
                name: "web".to_owned(),
                port: Some(ServiceBackendPort {
                    number: Some(ports::HTTP_PORT),
                    ..ServiceBackendPort::default()
                }),
            }),
            ..IngressBackend::default()
        },
    }
}

fn ingress(
    namespace: &str,
    name: &str,
    class: Option<&str>,
    fqdn: &str,
    paths: &[&str],
    tls: bool,
    annotations: BTreeMap<String, String>,
) -> Ingress {
    let mut metadata: ObjectMeta = meta(name, namespace, components::SERVER);
    metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    Ingress {
        metadata,
        spec: Some(IngressSpec {
            ingress_class_name: class.map(str::to_owned),
            tls: tls.then(|| {
                vec![IngressTLS {
                    hosts: Some(vec![fqdn.to_owned()]),
                    secret_name: Some(names::SERVER_CERT_SECRET.to_owned()),
                }]
            }),
            rules: Some(vec![IngressRule {
                host: Some(fqdn.to_owned()),
                http: Some(HTTPIngressRuleValue {
                    paths: paths.iter().map(|p| web_path(p)).collect(),
                }),
            }]),
            ..IngressSpec::default()
        }),
        ..Ingress::default()
    }
}

fn annotations(pairs: &[(&str, String)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

/// The Ingresses for the controller, in order.
pub fn ingresses(
    namespace: &str,
    fqdn: &str,
    controller: Controller,
    class: Option<&str>,
) -> Vec<Ingress> {
    let traefik = "traefik.ingress.kubernetes.io/router";
    match controller {
        Controller::Traefik => vec![
            ingress(
                namespace,
                names::INGRESS_SSL,
                class,
                fqdn,
                &["/"],
                true,
                annotations(&[
                    (&format!("{traefik}.entrypoints"), "websecure".to_owned()),
                    (&format!("{traefik}.tls"), "true".to_owned()),
                ]),
            ),
            ingress(
                namespace,
                names::INGRESS_NOSSL,
                class,
                fqdn,
                PLAIN_HTTP_PATHS,
                false,
                annotations(&[(&format!("{traefik}.entrypoints"), "web".to_owned())]),
            ),
            ingress(
                namespace,
                names::INGRESS_REDIRECT,
                class,
                fqdn,
                &["/"],
                false,
                annotations(&[
                    (&format!("{traefik}.entrypoints"), "web".to_owned()),
                    // The middleware of this namespace (D24: not `default`).
                    (
                        &format!("{traefik}.middlewares"),
                        format!("{namespace}-{}@kubernetescrd", names::HTTPS_REDIRECT),
                    ),
                ]),
            ),
        ],
        Controller::Nginx => vec![
            ingress(
                namespace,
                names::INGRESS_SSL,
                class,
                fqdn,
                &["/"],
                true,
                BTreeMap::new(),
            ),
            ingress(
                namespace,
                names::INGRESS_NOSSL,
                class,
                fqdn,
                PLAIN_HTTP_PATHS,
                false,
                annotations(&[(
                    "nginx.ingress.kubernetes.io/ssl-redirect",
                    "false".to_owned(),
                )]),
            ),
        ],
    }
}

/// Traefik's permanent redirect to HTTPS.
pub fn https_redirect(namespace: &str) -> CustomObject {
    CustomObject {
        kind: CustomKind::Middleware,
        metadata: meta(names::HTTPS_REDIRECT, namespace, components::SERVER),
        spec: json!({"redirectScheme": {"scheme": "https", "permanent": true}}),
        status: None,
    }
}

/// The ports reached from outside through the controller, with these features.
pub fn external_ports(features: Features) -> Vec<PortDef> {
    ports::services(features)
        .into_iter()
        .flat_map(|s| ports::of_service(s, features))
        .filter(|p| p.external)
        .collect()
}

/// A Traefik TCP or UDP route from the port's entrypoint to its Service.
pub fn route(namespace: &str, p: &PortDef) -> CustomObject {
    let service = json!({"name": p.service, "port": p.port});
    let (kind, spec) = match p.protocol {
        Protocol::Tcp => (
            CustomKind::IngressRouteTcp,
            json!({"entryPoints": [ports::endpoint(p)], "routes": [{"match": "HostSNI(`*`)", "services": [service]}]}),
        ),
        Protocol::Udp => (
            CustomKind::IngressRouteUdp,
            json!({"entryPoints": [ports::endpoint(p)], "routes": [{"services": [service]}]}),
        ),
    };
    CustomObject {
        kind,
        metadata: meta(&ports::route_name(p), namespace, components::SERVER),
        spec,
        status: None,
    }
}

/// Traefik's entrypoints for the ports, as k3s's bundled chart takes them (chart ≥ 27).
pub fn traefik_values(ports: &[PortDef]) -> String {
    let mut out = String::from("ports:\n");
    for p in ports {
        out.push_str(&format!(
            "  {}:\n    port: {}\n    expose:\n      default: true\n    exposedPort: {}\n    protocol: {}\n",
            ports::endpoint(p),
            p.port,
            p.port,
            p.protocol.as_str()
        ));
    }
    out
}

/// ingress-nginx's TCP/UDP exposure, each port to its real Service (D13).
pub fn nginx_values(namespace: &str, ports: &[PortDef]) -> String {
    let mut out = String::from("controller:\n  config:\n    hsts: \"false\"\n");
    for (section, protocol) in [("tcp", Protocol::Tcp), ("udp", Protocol::Udp)] {
        let of: Vec<&PortDef> = ports.iter().filter(|p| p.protocol == protocol).collect();
        if of.is_empty() {
            continue;
        }
        out.push_str(&format!("{section}:\n"));
        for p in of {
            out.push_str(&format!(
                "  \"{}\": \"{namespace}/{}:{}\"\n",
                p.port, p.service, p.port
            ));
        }
    }
    out
}

/// The controller's HelmChartConfig in kube-system.
pub fn helm_chart_config(name: &str, values: String, for_namespace: &str) -> CustomObject {
    let mut metadata = meta(name, "kube-system", components::SERVER);
    metadata.annotations = Some(BTreeMap::from([(
        crate::labels::FOR_NAMESPACE_ANNOTATION.to_owned(),
        for_namespace.to_owned(),
    )]));
    CustomObject {
        kind: CustomKind::HelmChartConfig,
        metadata,
        spec: json!({"valuesContent": values}),
        status: None,
    }
}
