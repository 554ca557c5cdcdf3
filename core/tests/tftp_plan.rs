//! The TFTP server in the planner: deployed iff the source served it or `--tftp` says so, its
//! Service or the host network, its place among the server steps, the dry run before the sync,
//! turning it off later, and what the run says about reaching it.

use crate::common;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, ServiceStatus};
use uyuni_core::builders::{server, tftp};
use uyuni_core::object::Kind;
use uyuni_core::params::MigrateArgs;
use uyuni_core::plan::{PlanError, exposure_notes};
use uyuni_core::scripts::data_keys;
use uyuni_core::{Action, MigrateParams, Object, ObjectRef, Observed, Op, Step, plan, preview};

/// The state after the sync, the source's `tftp` value set (`None`: the key is absent).
fn synced(params: &MigrateParams, source: Option<&str>) -> Observed {
    let mut o = common::after_sync(params);
    if let Some(Object::Secret(s)) = o
        .objects
        .get_mut(&ObjectRef::new(Kind::Secret, common::DATA_SECRET))
        && let Some(d) = s.data.as_mut()
    {
        match source {
            Some(v) => d.insert(data_keys::TFTP.into(), ByteString(v.as_bytes().to_vec())),
            None => d.remove(data_keys::TFTP),
        };
    }
    o
}

fn params_with(edit: impl FnOnce(&mut MigrateArgs)) -> MigrateParams {
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    edit(&mut args);
    MigrateParams::from_args(&args).expect("valid")
}

/// The ids of the TFTP steps (`pvc-srv-tftpboot` is the server's volume, not TFTP's).
const TFTP_STEPS: [&str; 3] = ["service-tftp", "tftp-deployment", "tftp-ready"];

fn tftp_steps(steps: &[Step]) -> Vec<&str> {
    steps
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| TFTP_STEPS.contains(id))
        .collect()
}

fn ids(steps: &[Step]) -> Vec<&str> {
    steps.iter().map(|s| s.id.as_str()).collect()
}

fn position(steps: &[Step], id: &str) -> usize {
    steps
        .iter()
        .position(|s| s.id == id)
        .unwrap_or_else(|| panic!("no step {id} in {:?}", ids(steps)))
}

fn has_tftp_objects(o: &Observed) -> (bool, bool) {
    (
        o.contains(Kind::Deployment, tftp::DEPLOYMENT),
        o.contains(Kind::Service, tftp::SERVICE),
    )
}

fn replicas(o: &Observed) -> Option<i32> {
    o.deployment(tftp::DEPLOYMENT)
        .and_then(|d| d.spec.as_ref())
        .and_then(|s| s.replicas)
}

#[test]
fn the_source_decides_whether_tftp_is_deployed() {
    let params = common::params();
    let on = preview(&params, &synced(&params, Some("true"))).expect("preview");
    assert_eq!(has_tftp_objects(&on.end), (true, true));
    assert_eq!(replicas(&on.end), Some(1));
    assert_eq!(tftp_steps(&on.executed), TFTP_STEPS);
    let deployment = on
        .executed
        .iter()
        .find(|s| s.id == "tftp-deployment")
        .expect("step");
    assert!(
        deployment
            .description
            .contains("tftp.socket was enabled on the source"),
        "{}",
        deployment.description
    );

    let off = preview(&params, &synced(&params, Some("false"))).expect("preview");
    assert_eq!(has_tftp_objects(&off.end), (false, false));
    assert!(tftp_steps(&off.steps).is_empty(), "{:?}", ids(&off.steps));
}

#[test]
fn the_flag_overrides_the_source_both_ways() {
    let forced_on = params_with(|a| a.spec.tftp = Some(true));
    let p = preview(&forced_on, &synced(&forced_on, Some("false"))).expect("preview");
    assert_eq!(has_tftp_objects(&p.end), (true, true));
    assert!(
        p.executed
            .iter()
            .any(|s| s.id == "tftp-deployment" && s.description.contains("(--tftp)"))
    );

    let forced_off = params_with(|a| a.spec.tftp = Some(false));
    let p = preview(&forced_off, &synced(&forced_off, Some("true"))).expect("preview");
    assert_eq!(has_tftp_objects(&p.end), (false, false));
}

#[test]
fn tftp_steps_come_where_the_other_components_go() {
    let params = common::params();
    let p = preview(&params, &synced(&params, Some("true"))).expect("preview");
    let steps = &p.executed;
    // The Service with the other Services, before the Ingresses and Deployments.
    assert!(position(steps, "service-web") < position(steps, "service-tftp"));
    assert!(position(steps, "service-tftp") < position(steps, "server-deployment"));
    // The Deployment with the other companions, its wait after the server's.
    assert!(position(steps, "server-deployment") < position(steps, "tftp-deployment"));
    assert!(position(steps, "tftp-deployment") < position(steps, "server-ready"));
    assert!(position(steps, "server-ready") < position(steps, "tftp-ready"));
    let Some(Step {
        op: Op::Wait,
        action: Action::WaitDeployment { name, wait },
        ..
    }) = steps.iter().find(|s| s.id == "tftp-ready")
    else {
        panic!("tftp-ready waits for the Deployment");
    };
    assert_eq!(name, tftp::DEPLOYMENT);
    assert!(wait.timeout_seconds.is_some(), "a bounded wait");
    // A finished run plans nothing more.
    assert!(plan(&params, &p.end).expect("plan").is_done());
}

#[test]
fn on_the_host_network_there_is_no_service() {
    let params = params_with(|a| a.spec.tftp_host_network = Some(true));
    let p = preview(&params, &synced(&params, Some("true"))).expect("preview");
    assert_eq!(has_tftp_objects(&p.end), (true, false));
    let pod = p
        .end
        .deployment(tftp::DEPLOYMENT)
        .and_then(|d| d.spec.as_ref())
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod");
    assert_eq!(pod.host_network, Some(true));
    assert_eq!(pod.dns_policy.as_deref(), Some("ClusterFirstWithHostNet"));
    let notes = exposure_notes(&params, &p.end).join("\n");
    assert!(notes.contains("--tftp-host-network"), "{notes}");
    assert!(notes.contains("-o wide"), "{notes}");
}

#[test]
fn data_without_the_tftp_key_stops_before_any_write_unless_a_flag_decides() {
    let params = common::params();
    let o = synced(&params, None);
    match plan(&params, &o) {
        Err(e @ PlanError::TftpNotRecorded { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("--tftp=true") && text.contains("--tftp=false"),
                "{text}"
            );
            assert!(text.contains("uyuni-data-sync-"), "names the Job: {text}");
        }
        other => panic!("expected TftpNotRecorded, got {other:?}"),
    }
    let decided = params_with(|a| a.spec.tftp = Some(false));
    let p = preview(&decided, &synced(&decided, None)).expect("preview");
    assert!(p.final_plan.is_done());
    assert_eq!(has_tftp_objects(&p.end), (false, false));
}

#[test]
fn the_dry_run_before_the_sync_shows_tftp_as_depending_on_the_source() {
    let params = common::params();
    let p = preview(&params, &common::empty_cluster()).expect("preview");
    let deployment = p
        .executed
        .iter()
        .find(|s| s.id == "tftp-deployment")
        .expect("the TFTP Deployment is previewed");
    assert!(
        deployment.description.contains("known after data-sync"),
        "{}",
        deployment.description
    );
    let service = p
        .executed
        .iter()
        .find(|s| s.id == "service-tftp")
        .expect("the TFTP Service is previewed");
    assert!(service.description.contains("known after data-sync"));
    // A flag decides even before the sync.
    let off = params_with(|a| a.spec.tftp = Some(false));
    let p = preview(&off, &common::empty_cluster()).expect("preview");
    assert!(tftp_steps(&p.steps).is_empty());
}

#[test]
fn turned_off_later_the_deployment_is_scaled_to_zero_and_the_service_left_with_advice() {
    let params = common::params();
    let first = preview(&params, &synced(&params, Some("true"))).expect("preview");
    let off = params_with(|a| a.spec.tftp = Some(false));
    let p = preview(&off, &first.end).expect("preview");
    assert_eq!(replicas(&p.end), Some(0));
    let service = p
        .steps
        .iter()
        .find(|s| s.id == "service-tftp")
        .expect("the Service is shown");
    assert_eq!(service.op, Op::Unchanged);
    assert!(
        service
            .reason
            .contains("kubectl -n uyuni delete service tftp"),
        "{}",
        service.reason
    );
    assert!(!p.steps.iter().any(|s| s.id == "tftp-ready"));
    let notes = exposure_notes(&off, &p.end).join("\n");
    assert!(
        notes.contains("kubectl -n uyuni delete service tftp"),
        "{notes}"
    );
}

fn with_load_balancer_ip(mut o: Observed, ip: &str) -> Observed {
    if let Some(Object::Service(s)) = o
        .objects
        .get_mut(&ObjectRef::new(Kind::Service, tftp::SERVICE))
    {
        s.status = Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: Some(vec![LoadBalancerIngress {
                    ip: Some(ip.into()),
                    ..LoadBalancerIngress::default()
                }]),
            }),
            ..ServiceStatus::default()
        });
    }
    o
}

#[test]
fn the_run_says_how_pxe_clients_reach_tftp() {
    let params = common::params();
    let p = preview(&params, &synced(&params, Some("true"))).expect("preview");
    let tftp_notes = |o: &Observed| -> String {
        exposure_notes(&params, o)
            .into_iter()
            .filter(|n| n.contains("TFTP"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    // No address yet: what gives one, the way out, and how to check.
    let pending = tftp_notes(&p.end);
    for expected in [
        "ServiceLB",
        "MetalLB",
        "--tftp-host-network",
        "kubectl -n uyuni get service tftp",
        "next-server",
    ] {
        assert!(
            pending.contains(expected),
            "{expected:?} missing: {pending}"
        );
    }
    // With an address: where to point the DHCP server.
    let served = tftp_notes(&with_load_balancer_ip(p.end.clone(), "192.0.2.7"));
    assert!(
        served.contains("192.0.2.7") && served.contains("next-server"),
        "{served}"
    );
    assert!(!served.contains("MetalLB"), "{served}");
    // Off: nothing to say.
    let off = preview(&params, &synced(&params, Some("false"))).expect("preview");
    assert!(tftp_notes(&off.end).is_empty());
}

#[test]
fn the_server_does_not_serve_tftp_itself() {
    let params = common::params();
    let p = preview(&params, &synced(&params, Some("true"))).expect("preview");
    let container = p
        .end
        .deployment(server::SERVER_DEPLOYMENT)
        .and_then(|d| d.spec.as_ref())
        .and_then(|s| s.template.spec.as_ref())
        .map(|s| s.containers[0].clone())
        .expect("server container");
    let enable = container
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "MANAGER_ENABLE_TFTP")
        .and_then(|e| e.value.clone());
    assert_eq!(enable.as_deref(), Some("n"));
    assert!(
        container
            .ports
            .iter()
            .flatten()
            .all(|p| p.container_port != tftp::PORT),
        "port 69 is the tftp container's"
    );
}

#[test]
fn tftp_is_never_routed_through_the_ingress_controller() {
    use uyuni_core::object::CustomKind;
    let params = params_with(|a| {
        a.spec.ingress = Some("traefik".into());
        a.spec.configure_ingress_controller = Some(true);
    });
    let mut o = synced(&params, Some("true"));
    for kind in [
        CustomKind::Middleware,
        CustomKind::IngressRouteTcp,
        CustomKind::IngressRouteUdp,
        CustomKind::HelmChartConfig,
    ] {
        o.serve(kind);
    }
    let p = preview(&params, &o).expect("preview");
    let written: Vec<&Object> = p
        .executed
        .iter()
        .filter_map(|s| match &s.action {
            Action::Apply(object) => Some(&**object),
            _ => None,
        })
        .collect();
    assert!(
        written
            .iter()
            .any(|o| o.kind() == Kind::Custom(CustomKind::HelmChartConfig)),
        "the controller's configuration is written"
    );
    for object in written {
        if matches!(object.kind(), Kind::Custom(_)) {
            let json = object.to_json().to_string();
            assert!(
                !json.contains("tftp") && !json.contains("exposedPort: 69\\n"),
                "{} routes TFTP: {json}",
                object.name()
            );
            assert_ne!(object.kind(), Kind::Custom(CustomKind::IngressRouteUdp));
        }
    }
    assert!(
        has_tftp_objects(&p.end).1,
        "the LoadBalancer Service instead"
    );
}
