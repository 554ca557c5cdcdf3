//! The one catalogue of network ports (reference §6.1, images-today §A.5, §C.2): it drives the
//! containers' ports and the Services, so the two cannot disagree. Service and port names are the
//! official chart's.
//!
//! Choices kept here: monitoring ports are exposed as the chart does by default; the postgres
//! exporter runs in the server container, so its port is on a server-side Service `db-exporter`
//! instead of on `db` (reference D23).
//!
//! TFTP's port 69/UDP is not here, and that keeps the catalogue the one source of the server's
//! ports: TFTP is a container of its own in today's images (server-image 5.2.5), exposed by a
//! LoadBalancer Service or the host network instead of a ClusterIP Service, and it must never be
//! routed by the ingress controller, which every `external` port here is. Its port is
//! `builders::tftp::PORT`, shared by its container and its Service.

use k8s_openapi::api::core::v1::ContainerPort;
use serde::Serialize;

use crate::catalogue::components;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Protocol {
    Tcp,
    Udp,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "TCP",
            Protocol::Udp => "UDP",
        }
    }
}

/// When a port exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum When {
    Always,
    /// Java debugging is on (the source had it).
    Debug,
    /// The hub XML-RPC API runs.
    Hub,
}

/// What decides the conditional ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Features {
    pub debug: bool,
    pub hub: bool,
}

impl Features {
    fn has(self, when: When) -> bool {
        match when {
            When::Always => true,
            When::Debug => self.debug,
            When::Hub => self.hub,
        }
    }
}

/// One port of one Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PortDef {
    /// The Service exposing it.
    pub service: &'static str,
    /// The port's name on the Service (containers leave their ports unnamed, see
    /// [`container_ports`]).
    pub name: &'static str,
    pub port: i32,
    pub protocol: Protocol,
    /// The component whose pods serve it (the Service's selector).
    pub component: &'static str,
    pub when: When,
    /// Reached from outside the cluster through the ingress controller's TCP/UDP routing (HTTP
    /// goes through the Ingress).
    pub external: bool,
}

const fn port(
    service: &'static str,
    name: &'static str,
    port: i32,
    component: &'static str,
    when: When,
    external: bool,
) -> PortDef {
    PortDef {
        service,
        name,
        port,
        protocol: Protocol::Tcp,
        component,
        when,
        external,
    }
}

/// PostgreSQL, as the DB image serves it.
/// The Traefik entrypoint of a port: at most 15 characters (a Traefik limit).
pub fn endpoint(p: &PortDef) -> String {
    let service = match p.service {
        "taskomatic" => "tasko",
        other => other,
    };
    let name = if service.ends_with(p.name) {
        service.to_owned()
    } else {
        format!("{service}-{}", p.name)
    };
    name.chars().take(15).collect()
}

/// The name of the route object of a port.
pub fn route_name(p: &PortDef) -> String {
    format!("{}-route", endpoint(p))
}

pub const PGSQL_PORT: i32 = 5432;
/// HTTP of the server; TLS ends at the ingress.
pub const HTTP_PORT: i32 = 80;
pub const HUB_XMLRPC_PORT: i32 = 2830;

/// Every port, grouped by Service in the order Services are created.
pub const CATALOGUE: &[PortDef] = &[
    port(
        "db",
        "pgsql",
        PGSQL_PORT,
        components::DB,
        When::Always,
        false,
    ),
    // The only database port reached from outside: report database clients.
    port(
        "reportdb",
        "pgsql",
        PGSQL_PORT,
        components::DB,
        When::Always,
        true,
    ),
    port(
        "web",
        "http",
        HTTP_PORT,
        components::SERVER,
        When::Always,
        false,
    ),
    port(
        "salt",
        "publish",
        4505,
        components::SERVER,
        When::Always,
        true,
    ),
    port(
        "salt",
        "request",
        4506,
        components::SERVER,
        When::Always,
        true,
    ),
    port(
        "cobbler",
        "cobbler",
        25151,
        components::SERVER,
        When::Always,
        false,
    ),
    port(
        "tomcat",
        "node-exporter",
        9100,
        components::SERVER,
        When::Always,
        false,
    ),
    port(
        "tomcat",
        "jmx",
        5557,
        components::SERVER,
        When::Always,
        false,
    ),
    port(
        "tomcat",
        "debug",
        8003,
        components::SERVER,
        When::Debug,
        true,
    ),
    port(
        "taskomatic",
        "jmx",
        5556,
        components::SERVER,
        When::Always,
        false,
    ),
    port(
        "taskomatic",
        "mtrx",
        9800,
        components::SERVER,
        When::Always,
        false,
    ),
    port(
        "taskomatic",
        "debug",
        8001,
        components::SERVER,
        When::Debug,
        true,
    ),
    port(
        "search",
        "debug",
        8002,
        components::SERVER,
        When::Debug,
        true,
    ),
    port(
        "db-exporter",
        "exporter",
        9187,
        components::SERVER,
        When::Always,
        false,
    ),
    // The chart names this port `hub` (reference: `xmlrpc`).
    port(
        "hub-xmlrpc",
        "hub",
        HUB_XMLRPC_PORT,
        components::HUB_XMLRPC,
        When::Hub,
        true,
    ),
];

/// The ports of one Service, with these features.
pub fn of_service(service: &str, features: Features) -> Vec<PortDef> {
    CATALOGUE
        .iter()
        .filter(|p| p.service == service && features.has(p.when))
        .copied()
        .collect()
}

/// The Services that exist with these features, in catalogue order.
pub fn services(features: Features) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for p in CATALOGUE.iter().filter(|p| features.has(p.when)) {
        if !out.contains(&p.service) {
            out.push(p.service);
        }
    }
    out
}

/// The ports a component's container declares (once per port number and protocol).
pub fn of_component(component: &str, features: Features) -> Vec<PortDef> {
    let mut out: Vec<PortDef> = Vec::new();
    for p in CATALOGUE
        .iter()
        .filter(|p| p.component == component && features.has(p.when))
    {
        if !out
            .iter()
            .any(|o| o.port == p.port && o.protocol == p.protocol)
        {
            out.push(*p);
        }
    }
    out
}

/// The container ports of a component, unnamed as the official chart declares them
/// (`containers/server-helm/templates/server.yaml`, `hub.yaml`: bare `containerPort`s).
///
/// Why no names: a catalogue name is the name of a port on its *Service* (`tomcat` and
/// `taskomatic` both have a `jmx` and a `debug`, as the chart's `services.yaml` names them),
/// and one container serves several Services, so the same name would appear twice in the
/// server container, which the API server rejects (port names must be unique per container,
/// `validateContainerPorts` in Kubernetes' `pkg/apis/core/validation/validation.go`). Nothing
/// refers to a container port by name: every Service's `targetPort` and every probe use the
/// number. A second, container-wide naming scheme would only be one more thing to keep
/// unique; leaving them unnamed keeps the pods identical to the chart's.
pub fn container_ports(component: &str, features: Features) -> Vec<ContainerPort> {
    of_component(component, features)
        .into_iter()
        .map(|p| ContainerPort {
            container_port: p.port,
            protocol: Some(p.protocol.as_str().to_owned()),
            ..ContainerPort::default()
        })
        .collect()
}

/// Whether `name` is an IANA service name as Kubernetes accepts it for a port
/// (`IsValidPortName`, `k8s.io/apimachinery/pkg/util/validation/validation.go`): at most 15
/// characters, lowercase alphanumerics and '-', at least one letter, no '-' at either end and
/// no two in a row.
pub fn is_iana_svc_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 15
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && name.bytes().any(|b| b.is_ascii_lowercase())
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}
