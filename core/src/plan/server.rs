//! The server phase of a migration, once the database runs and the TLS material exists: the
//! server-side Services of the port catalogue, the server Deployment `uyuni`, the hub XML-RPC
//! API and coco when asked for or detected, the TFTP server when the source served TFTP or
//! `--tftp` says so, and the waits for them.

use super::{apply_step, deployment_step, keep_step, steps::deployment_step_since};
use crate::builders::ingress;
use crate::builders::{database, network_policy, server, tftp};
use crate::catalogue::{components, names};
use crate::object::CustomKind;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::Observed;
use crate::params::{MigrateParams, ServerParams};
use crate::plan::{DeploymentWait, Step};
use crate::ports;
use crate::resolve::{Controller, Facts, TftpDecision as Decision};
use crate::settings::ServerSettings;

/// No limit for the server: its first start after a migration reindexes and updates the
/// schema, which grows with the data; failures (pull errors, crash loops, unschedulable pods)
/// still end the wait.
const SERVER_WAIT: DeploymentWait = DeploymentWait {
    timeout_seconds: None,
    unschedulable_grace_seconds: crate::plan::UNSCHEDULABLE_GRACE_SECONDS,
    log_tail_lines: 20,
};
const SIDECAR_WAIT: DeploymentWait = DeploymentWait {
    timeout_seconds: Some(900),
    unschedulable_grace_seconds: crate::plan::UNSCHEDULABLE_GRACE_SECONDS,
    log_tail_lines: 20,
};

fn wait_step(observed: &Observed, id: &str, name: &str, what: &str, wait: DeploymentWait) -> Step {
    let description = format!("wait until {what} is ready");
    super::deployment_wait_step(observed, id, name, description, wait)
}

/// Whether an object was written by this tool (its managed-by label).
fn ours(observed: &Observed, target: &ObjectRef) -> bool {
    observed.objects.get(target).is_some_and(|o| {
        o.metadata()
            .labels
            .as_ref()
            .and_then(|l| l.get(crate::labels::MANAGED_BY))
            .is_some_and(|v| v == crate::labels::MANAGED_BY_VALUE)
    })
}

fn controller_config(
    params: &ServerParams,
    controller: Controller,
    features: ports::Features,
) -> (&'static str, String) {
    let external = ingress::external_ports(features);
    match controller {
        Controller::Traefik => (names::TRAEFIK_CONFIG, ingress::traefik_values(&external)),
        Controller::Nginx => (
            names::NGINX_CONFIG,
            ingress::nginx_values(&params.namespace, &external),
        ),
    }
}

fn ingress_steps(params: &ServerParams, observed: &Observed, facts: &Facts) -> Vec<Step> {
    let ns = &params.namespace;
    let (features, fqdn) = (facts.features, facts.fqdn.as_str());
    let Some((controller, class)) = facts.ingress.clone() else {
        return Vec::new();
    };
    let mut steps = Vec::new();
    if controller == Controller::Traefik && observed.serves(CustomKind::Middleware) {
        steps.push(apply_step(
            "https-redirect",
            "Traefik middleware redirecting HTTP to HTTPS".into(),
            Object::Custom(ingress::https_redirect(ns)),
            observed,
        ));
    }
    for ing in ingress::ingresses(ns, fqdn, controller, class.as_deref()) {
        let name = ing.metadata.name.clone().unwrap_or_default();
        steps.push(apply_step(
            &format!("ingress-{name}"),
            format!("Ingress {name} for {fqdn}"),
            Object::Ingress(ing),
            observed,
        ));
    }
    // No IngressRouteUDP for TFTP (nor an ingress-nginx `udp` entry): a TFTP server answers
    // from a new port, which a UDP proxy does not relay; Service tftp is a LoadBalancer instead
    // (builders::tftp).
    if controller == Controller::Traefik && observed.serves(CustomKind::IngressRouteTcp) {
        for p in ingress::external_ports(features) {
            let route = ingress::route(ns, &p);
            steps.push(apply_step(
                &format!("route-{}", crate::ports::endpoint(&p)),
                format!(
                    "Traefik route of port {}/{} to Service {}",
                    p.port,
                    p.protocol.as_str(),
                    p.service
                ),
                Object::Custom(route),
                observed,
            ));
        }
    }
    if params.spec.ingress.configure_controller && observed.serves(CustomKind::HelmChartConfig) {
        let (name, values) = controller_config(params, controller, features);
        let target = ObjectRef::new(Kind::Custom(CustomKind::HelmChartConfig), name);
        let description = format!("kube-system/{name}: the controller's TCP/UDP ports");
        if observed.objects.contains_key(&target) && !ours(observed, &target) {
            steps.push(keep_step(
                "ingress-controller-config",
                description,
                target,
                "exists and is not managed by kubectl-uyuni: left alone (see the notes)".into(),
            ));
        } else {
            steps.push(apply_step(
                "ingress-controller-config",
                description,
                Object::Custom(ingress::helm_chart_config(name, values, &params.namespace)),
                observed,
            ));
        }
    }
    steps
}

/// What the user still has to do to reach the server from outside, in words; printed after a
/// run (no file is ever written on a node).
pub fn exposure_notes(params: &MigrateParams, observed: &Observed) -> Vec<String> {
    let Ok(Some(data)) = observed.extracted() else {
        return Vec::new();
    };
    let facts = crate::resolve::resolve(params, observed, &data);
    let mut notes = reach_notes(params, observed, &facts);
    if let Some(dir) = data
        .mirror
        .as_deref()
        .filter(|_| params.spec.mirror_claim.is_none())
    {
        notes.push(format!(
            "The source served a local mirror from {dir} (server.susemanager.fromdir); the migrated configuration points at {path}, where nothing is mounted. Give the claim holding the mirror with --mirror-claim CLAIM and run again.",
            path = crate::builders::server::MIRROR_PATH
        ));
    }
    notes
}

/// How the server is reached from outside, and what the user still has to set up for it:
/// every command's end notes.
pub fn reach_notes(params: &ServerParams, observed: &Observed, facts: &Facts) -> Vec<String> {
    let mut notes = ingress_notes(params, observed, facts);
    notes.extend(tftp_notes(params, observed, facts));
    notes
}

fn ingress_notes(params: &ServerParams, observed: &Observed, facts: &Facts) -> Vec<String> {
    let features = facts.features;
    let external = ingress::external_ports(features);
    let list = external
        .iter()
        .map(|p| format!("{} {}/{}", p.service, p.port, p.protocol.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let Some((controller, _)) = facts.ingress else {
        return vec![format!(
            "No ingress controller was detected (or --ingress none was given): nothing exposes the server outside the cluster. Expose Service web (HTTP, port 80) with an Ingress terminating TLS with Secret uyuni-cert, and the ports {list} with LoadBalancer or NodePort Services."
        )];
    };
    let (name, values) = controller_config(params, controller, features);
    let target = ObjectRef::new(Kind::Custom(CustomKind::HelmChartConfig), name);
    let configured = params.spec.ingress.configure_controller
        && observed.serves(CustomKind::HelmChartConfig)
        && (!observed.objects.contains_key(&target) || ours(observed, &target));
    if configured {
        return Vec::new();
    }
    vec![format!(
        "The ingress controller must also route the ports {list}. Run again with --configure-ingress-controller to write HelmChartConfig kube-system/{name} (it needs rights in kube-system), or merge these values into the controller's configuration yourself:
{values}"
    )]
}

/// The address a LoadBalancer Service was given, if any.
fn load_balancer_address(observed: &Observed, name: &str) -> Option<String> {
    let Some(Object::Service(service)) = observed.get(Kind::Service, name) else {
        return None;
    };
    service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .iter()
        .find_map(|i| i.ip.clone().or_else(|| i.hostname.clone()))
}

/// How PXE clients reach the TFTP server, and what is left to do for it. TFTP is never routed
/// through the ingress controller (see [`crate::builders::tftp`]).
fn tftp_notes(params: &ServerParams, observed: &Observed, facts: &Facts) -> Vec<String> {
    let ns = &params.namespace;
    let service = ObjectRef::new(Kind::Service, tftp::SERVICE);
    let leftover = ours(observed, &service);
    let kubectl = |args: &str| params.kubectl.cmd(Some(ns), args);
    let delete = kubectl(&format!("delete service {}", tftp::SERVICE));
    let mut notes = Vec::new();
    match facts.tftp {
        Ok(Decision::On) if params.spec.tftp.host_network => {
            notes.push(format!(
                "TFTP runs on the network of its node (--tftp-host-network): PXE clients reach it at that node's address, port {port}/UDP. Find the node with `{get}` and point the DHCP server's next-server at its address; it changes if the pod moves to another node.",
                port = tftp::PORT,
                get = kubectl(&format!(
                    "get pod -l app.kubernetes.io/component={} -o wide",
                    components::TFTP
                )),
            ));
            if leftover {
                notes.push(format!(
                    "Service {svc} of an earlier run is not needed on the host network, and on k3s its ServiceLB holds port {port}/UDP on the nodes, which the TFTP pod needs: delete it with `{delete}`.",
                    svc = tftp::SERVICE,
                    port = tftp::PORT,
                ));
            }
        }
        Ok(Decision::On) => match load_balancer_address(observed, tftp::SERVICE) {
            Some(address) => notes.push(format!(
                "TFTP answers at {address}, port {port}/UDP (LoadBalancer Service {svc}): point the DHCP server's next-server at {address}. `{get}` shows it.",
                port = tftp::PORT,
                svc = tftp::SERVICE,
                get = kubectl(&format!("get service {}", tftp::SERVICE)),
            )),
            None => notes.push(format!(
                "Service {svc} (LoadBalancer, port {port}/UDP) has no external address yet, and PXE clients need one: on k3s, its ServiceLB gives it a node's address; elsewhere the cluster needs a LoadBalancer implementation such as MetalLB, or run again with --tftp-host-network to serve TFTP on its node's network. The ingress controller cannot carry TFTP: the server answers from a new port, which a UDP proxy does not relay. Check with `{get}` (EXTERNAL-IP), then point the DHCP server's next-server at that address.",
                port = tftp::PORT,
                svc = tftp::SERVICE,
                get = kubectl(&format!("get service {}", tftp::SERVICE)),
            )),
        },
        Ok(Decision::Off) if leftover => notes.push(format!(
            "TFTP is off ({}); Service {} of an earlier run is left: delete it with `{delete}`.",
            facts.tftp_origin,
            tftp::SERVICE,
        )),
        Ok(Decision::Off | Decision::Unknown) | Err(_) => {}
    }
    notes
}

/// The TFTP Service, when TFTP is on and not on the host network. A Service this tool wrote and
/// that is no longer wanted is left, with the command to delete it (the tool deletes nothing).
fn tftp_service_step(
    params: &ServerParams,
    observed: &Observed,
    decision: Decision,
    origin: &str,
) -> Option<Step> {
    let ns = &params.namespace;
    let description = format!(
        "Service {} ({} {}/UDP, LoadBalancer): how PXE clients reach TFTP",
        tftp::SERVICE,
        tftp::SERVICE,
        tftp::PORT
    );
    let wanted = decision != Decision::Off && !params.spec.tftp.host_network;
    if wanted {
        let description = match decision {
            Decision::Unknown => format!("{description} ({origin})"),
            Decision::On | Decision::Off => description,
        };
        return Some(apply_step(
            "service-tftp",
            description,
            Object::Service(tftp::tftp_service(ns)),
            observed,
        ));
    }
    let target = ObjectRef::new(Kind::Service, tftp::SERVICE);
    ours(observed, &target).then(|| {
        let why = if decision == Decision::Off {
            "TFTP is off"
        } else {
            "TFTP runs on the host network"
        };
        keep_step(
            "service-tftp",
            description,
            target,
            format!(
                "exists from an earlier run and is not needed ({why}): left; delete it with `{}`",
                params
                    .kubectl
                    .cmd(Some(ns), &format!("delete service {}", tftp::SERVICE))
            ),
        )
    })
}

/// The TFTP Deployment: one replica when on; scaled to 0 when off and it exists (as the hub).
fn tftp_deployment_step(
    params: &ServerParams,
    observed: &Observed,
    decision: Decision,
    fqdn: &str,
    origin: &str,
) -> Option<Step> {
    let replicas = i32::from(decision != Decision::Off);
    if replicas == 0 && observed.deployment(tftp::DEPLOYMENT).is_none() {
        return None;
    }
    let network = if params.spec.tftp.host_network {
        "on its node's network"
    } else {
        "behind Service tftp"
    };
    let description = if replicas == 0 {
        format!("the TFTP server, scaled to 0 ({origin})")
    } else {
        format!(
            "the TFTP server, {network}, serving files of Service {} ({})",
            tftp::WEB_SERVICE,
            origin
        )
    };
    Some(deployment_step(
        "tftp-deployment",
        description,
        tftp::tftp_deployment(&params.namespace, &params.spec, fqdn, replicas),
        observed,
    ))
}

/// NetworkPolicy `db` with `--network-policy`; without it, the tool's own one deleted (the flag
/// was turned off: `--network-policy=false`), a policy of someone else's left alone, and
/// nothing planned where there is none.
fn network_policy_step(params: &ServerParams, observed: &Observed, facts: &Facts) -> Option<Step> {
    let target = ObjectRef::new(Kind::NetworkPolicy, names::DB_NETWORK_POLICY);
    if params.spec.network_policy {
        let controller = facts.ingress.as_ref().map(|(c, _)| *c);
        return Some(apply_step(
            "network-policy-db",
            format!(
                "NetworkPolicy {}: only the database's consumers reach it on port {}",
                names::DB_NETWORK_POLICY,
                ports::PGSQL_PORT
            ),
            Object::NetworkPolicy(network_policy::db_network_policy(
                &params.namespace,
                controller,
            )),
            observed,
        ));
    }
    if !ours(observed, &target) {
        return None;
    }
    super::delete_step(
        observed,
        target,
        format!(
            "delete NetworkPolicy {}: --network-policy is off",
            names::DB_NETWORK_POLICY
        ),
    )
    .ok()
}

pub(super) fn steps(
    params: &ServerParams,
    observed: &Observed,
    settings: &ServerSettings,
    facts: &Facts,
    tftp_decision: Decision,
) -> Vec<Step> {
    let ns = &params.namespace;
    let features = facts.features;
    let mut steps = Vec::new();
    for service in ports::services(features) {
        let ports = ports::of_service(service, features);
        if ports.first().is_some_and(|p| p.component == components::DB) {
            continue; // the database phase has them
        }
        steps.push(apply_step(
            &format!("service-{service}"),
            format!(
                "Service {service} ({})",
                ports
                    .iter()
                    .map(|p| format!("{} {}/{}", p.name, p.port, p.protocol.as_str()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Object::Service(database::service(ns, service, features)),
            observed,
        ));
    }
    steps.extend(tftp_service_step(
        params,
        observed,
        tftp_decision,
        facts.tftp_origin,
    ));
    let fqdn = &facts.fqdn;
    steps.extend(ingress_steps(params, observed, facts));
    steps.extend(network_policy_step(params, observed, facts));
    // Versions of this tool before the CA mount wrote no mount for any image: a running server
    // without it keeps running until its template changes for another reason.
    let before_salt_ca_mount: Vec<_> = facts
        .salt_ca_mount
        .then(|| {
            let facts = Facts {
                salt_ca_mount: false,
                ..facts.clone()
            };
            server::server_deployment(params, settings, &facts)
        })
        .into_iter()
        .collect();
    // Before the image's check (or inspection) has run, as in a dry run, its kind is not
    // known and the plan shows no CA mount (`resolve::salt_ca_mount`): say that it may come.
    let kind_unknown = if crate::resolve::server_image_kind(params, observed).is_none() {
        "; the CA mounted into the Salt file root if the image does not copy it there \
         (known after the image check)"
    } else {
        ""
    };
    steps.push(deployment_step_since(
        "server-deployment",
        format!("the Uyuni server {fqdn}{kind_unknown}"),
        server::server_deployment(params, settings, facts),
        &before_salt_ca_mount,
        observed,
        false,
    ));
    let hub = facts.hub_replicas;
    if hub > 0 || observed.deployment(server::HUB_DEPLOYMENT).is_some() {
        steps.push(deployment_step(
            "hub-xmlrpc-deployment",
            format!("the hub XML-RPC API ({hub} replica(s))"),
            server::hub_deployment(&params.namespace, &params.spec, hub),
            observed,
        ));
    }
    if params.spec.coco_replicas > 0 || observed.deployment(server::COCO_DEPLOYMENT).is_some() {
        steps.push(deployment_step(
            "coco-deployment",
            format!(
                "the confidential computing attestation ({} replica(s))",
                params.spec.coco_replicas
            ),
            server::coco_deployment(params, settings),
            observed,
        ));
    }
    steps.extend(tftp_deployment_step(
        params,
        observed,
        tftp_decision,
        fqdn,
        facts.tftp_origin,
    ));
    steps.push(wait_step(
        observed,
        "server-ready",
        server::SERVER_DEPLOYMENT,
        if settings.first_start.is_some() {
            "the server (its first start sets it up, which can take long)"
        } else {
            "the server (its first start after a migration can take long)"
        },
        SERVER_WAIT,
    ));
    if hub > 0 {
        steps.push(wait_step(
            observed,
            "hub-xmlrpc-ready",
            server::HUB_DEPLOYMENT,
            "the hub XML-RPC API",
            SIDECAR_WAIT,
        ));
    }
    if params.spec.coco_replicas > 0 {
        steps.push(wait_step(
            observed,
            "coco-ready",
            server::COCO_DEPLOYMENT,
            "the attestation",
            SIDECAR_WAIT,
        ));
    }
    if tftp_decision != Decision::Off {
        steps.push(wait_step(
            observed,
            "tftp-ready",
            tftp::DEPLOYMENT,
            "the TFTP server",
            SIDECAR_WAIT,
        ));
    }
    steps
}
