//! The database's NetworkPolicy (`--network-policy`): only the pods that use the database
//! reach the `db` pods, on PostgreSQL's port alone.
//!
//! The official chart writes no NetworkPolicy (uyuni-project/uyuni
//! `containers/server-helm/templates/` at 0f3c1b8a holds none); its `db.yaml` labels the
//! database's pods `app.kubernetes.io/component: db`, `app.kubernetes.io/part-of: uyuni`, as
//! ours are ([`super::database::selector`]), so the policy guards a chart's database as well.
//!
//! Who connects to `db` on 5432, from the builders and the Job scripts:
//! - the server (`MANAGER_DB_HOST`, `REPORT_DB_HOST` in `server.rs`), whose container also runs
//!   the postgres exporter (`ports.rs`);
//! - the attestation (`database_connection` in `server.rs`);
//! - the migration's SQL Job (`db-migration-sql.sh`: `spacewalk-sql`, which reads `db_host`
//!   from rhn.conf), whose pods are labelled with their step, never `db` (`job::pod_labels`);
//! - the report database's clients outside the cluster, through the ingress controller's TCP
//!   route of Service `reportdb` (`ports::CATALOGUE`): the controller's pods open the
//!   connection.
//!
//! Nobody else: the hub XML-RPC API talks to the server's HTTP API (`HUB_API_URL`), TFTP to
//! Service `web`; the password re-hash Job (`db-passwords.sh`) runs its own PostgreSQL on a
//! Unix socket; the fix-up, upgrade, backup and restore Jobs work on the files; the image
//! checks and inspections read their own image. The kubelet's probes need no rule: "traffic
//! to and from the node where a Pod is running is always allowed" (kubernetes/website
//! `content/en/docs/concepts/services-networking/network-policies.md`), and the database's own
//! probe is `pg_isready -h localhost` inside the pod.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::builders::{database, meta};
use crate::catalogue::{components, names, steps};
use crate::labels;
use crate::ports;
use crate::resolve::Controller;

/// The components whose pods connect to the database, in the namespace.
pub const CONSUMERS: [&str; 3] = [
    components::SERVER,
    components::COCO,
    steps::DB_MIGRATION_SQL,
];

/// The `app.kubernetes.io/name` of the ingress controllers' pods: the chart's name.
/// Traefik: `traefik.labelselector` in traefik/traefik-helm-chart `traefik/templates/
/// _helpers.tpl` at 0233fef0 (`traefik.name`, the chart's name, as k3s packages it).
/// ingress-nginx: `ingress-nginx.selectorLabels` in kubernetes/ingress-nginx `charts/
/// ingress-nginx/templates/_helpers.tpl` (`ingress-nginx.name`, the chart's name), which RKE2
/// packages as `rke2-ingress-nginx`.
pub fn controller_pod_names(controller: Controller) -> &'static [&'static str] {
    match controller {
        Controller::Traefik => &["traefik"],
        Controller::Nginx => &["rke2-ingress-nginx", "ingress-nginx"],
    }
}

fn name_in(key: &str, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.to_owned(),
        operator: "In".to_owned(),
        values: Some(values.iter().map(|v| (*v).to_owned()).collect()),
    }
}

fn postgres_port() -> Vec<NetworkPolicyPort> {
    vec![NetworkPolicyPort {
        protocol: Some("TCP".to_owned()),
        port: Some(IntOrString::Int(ports::PGSQL_PORT)),
        ..NetworkPolicyPort::default()
    }]
}

/// NetworkPolicy `db`: the `db` pods take connections on 5432 from the consumers in the
/// namespace and, when an ingress controller routes the report database, from that
/// controller's pods in whatever namespace it runs; nothing else reaches them.
pub fn db_network_policy(namespace: &str, controller: Option<Controller>) -> NetworkPolicy {
    let consumers = NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(BTreeMap::from([(
                labels::PART_OF.to_owned(),
                labels::PART_OF_VALUE.to_owned(),
            )])),
            match_expressions: Some(vec![name_in(labels::COMPONENT, &CONSUMERS)]),
        }),
        ..NetworkPolicyPeer::default()
    };
    let mut ingress = vec![NetworkPolicyIngressRule {
        from: Some(vec![consumers]),
        ports: Some(postgres_port()),
    }];
    if let Some(controller) = controller {
        ingress.push(NetworkPolicyIngressRule {
            from: Some(vec![NetworkPolicyPeer {
                // Every namespace: k3s and RKE2 run the controller in kube-system, other
                // installations elsewhere; its pods' name label is what identifies it.
                namespace_selector: Some(LabelSelector::default()),
                pod_selector: Some(LabelSelector {
                    match_expressions: Some(vec![name_in(
                        "app.kubernetes.io/name",
                        controller_pod_names(controller),
                    )]),
                    ..LabelSelector::default()
                }),
                ..NetworkPolicyPeer::default()
            }]),
            ports: Some(postgres_port()),
        });
    }
    NetworkPolicy {
        metadata: meta(names::DB_NETWORK_POLICY, namespace, components::DB),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(database::selector(components::DB)),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".to_owned()]),
            ingress: Some(ingress),
            ..NetworkPolicySpec::default()
        }),
    }
}
