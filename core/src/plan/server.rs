//! The server phase of a migration, once the database runs and the TLS material exists: the
//! server-side Services of the port catalogue, the server Deployment `uyuni`, the hub XML-RPC
//! API and coco when asked for or detected, and the waits for them.

use super::{apply_step, keep_step};
use crate::builders::ingress::{self, Controller};
use crate::builders::{components, database, names, server, tls};
use crate::object::CustomKind;
use crate::object::{Kind, Object, ObjectRef};
use crate::observed::{ExtractedData, Observed, deployment_ready};
use crate::params::MigrateParams;
use crate::plan::{Action, DeploymentWait, Op, Step};
use crate::ports;

/// No limit for the server: its first start after a migration reindexes and updates the
/// schema, which grows with the data; failures (pull errors, crash loops, unschedulable pods)
/// still end the wait.
const SERVER_WAIT: DeploymentWait = DeploymentWait {
    timeout_seconds: None,
    unschedulable_grace_seconds: crate::plan::UNSCHEDULABLE_GRACE_SECONDS,
};
const SIDECAR_WAIT: DeploymentWait = DeploymentWait {
    timeout_seconds: Some(900),
    unschedulable_grace_seconds: crate::plan::UNSCHEDULABLE_GRACE_SECONDS,
};

fn wait_step(observed: &Observed, id: &str, name: &str, what: &str, wait: DeploymentWait) -> Step {
    let target = ObjectRef::new(Kind::Deployment, name);
    let description = format!("wait until {what} is ready");
    match observed.deployment(name) {
        Some(d) if deployment_ready(d) => keep_step(id, description, target, "ready".into()),
        _ => Step {
            id: id.to_owned(),
            description,
            op: Op::Wait,
            target,
            reason: "not ready yet".to_owned(),
            action: Action::WaitDeployment {
                name: name.to_owned(),
                wait,
            },
        },
    }
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
    params: &MigrateParams,
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

fn ingress_steps(
    params: &MigrateParams,
    observed: &Observed,
    features: ports::Features,
    fqdn: &str,
) -> Vec<Step> {
    let ns = &params.namespace;
    let Some((controller, class)) = ingress::choose(params, observed) else {
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
    if controller == Controller::Traefik && observed.serves(CustomKind::IngressRouteTcp) {
        for p in ingress::external_ports(features) {
            let route = ingress::route(ns, &p);
            steps.push(apply_step(
                &format!("route-{}", ingress::endpoint(&p)),
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
    if params.ingress.configure_controller && observed.serves(CustomKind::HelmChartConfig) {
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
                Object::Custom(ingress::helm_chart_config(name, values)),
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
    let features = server::features(params, &data);
    let external = ingress::external_ports(features);
    let list = external
        .iter()
        .map(|p| format!("{} {}/{}", p.service, p.port, p.protocol.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    let Some((controller, _)) = ingress::choose(params, observed) else {
        return vec![format!(
            "No ingress controller was detected (or --ingress none was given): nothing exposes the server outside the cluster. Expose Service web (HTTP, port 80) with an Ingress terminating TLS with Secret uyuni-cert, and the ports {list} with LoadBalancer or NodePort Services."
        )];
    };
    let (name, values) = controller_config(params, controller, features);
    let target = ObjectRef::new(Kind::Custom(CustomKind::HelmChartConfig), name);
    let configured = params.ingress.configure_controller
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

pub(super) fn steps(
    params: &MigrateParams,
    observed: &Observed,
    data: &ExtractedData,
) -> Vec<Step> {
    let ns = &params.namespace;
    let features = server::features(params, data);
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
    let fqdn = tls::server_fqdn(params, data);
    steps.extend(ingress_steps(params, observed, features, &fqdn));
    steps.push(apply_step(
        "server-deployment",
        format!("the Uyuni server {fqdn}"),
        Object::Deployment(server::server_deployment(params, data, &fqdn)),
        observed,
    ));
    let hub = server::hub_replicas(params, data);
    if hub > 0 || observed.deployment(server::HUB_DEPLOYMENT).is_some() {
        steps.push(apply_step(
            "hub-xmlrpc-deployment",
            format!("the hub XML-RPC API ({hub} replica(s))"),
            Object::Deployment(server::hub_deployment(params, hub)),
            observed,
        ));
    }
    if params.coco_replicas > 0 || observed.deployment(server::COCO_DEPLOYMENT).is_some() {
        steps.push(apply_step(
            "coco-deployment",
            format!(
                "the confidential computing attestation ({} replica(s))",
                params.coco_replicas
            ),
            Object::Deployment(server::coco_deployment(params, data)),
            observed,
        ));
    }
    steps.push(wait_step(
        observed,
        "server-ready",
        server::SERVER_DEPLOYMENT,
        "the server (its first start after a migration can take long)",
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
    if params.coco_replicas > 0 {
        steps.push(wait_step(
            observed,
            "coco-ready",
            server::COCO_DEPLOYMENT,
            "the attestation",
            SIDECAR_WAIT,
        ));
    }
    steps
}
