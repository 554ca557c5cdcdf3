//! Deletion against the real control plane (`scripts/cluster.sh`): the garbage collector's
//! foreground deletion and a finalizer that holds an object are upstream's, which the
//! simulated cluster does not model (testdata/README.md, "Foreground delete").
#![allow(clippy::unwrap_used)]

use std::process::Output;

use crate::common::*;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use uyuni_core::plan::{DeleteWait, Propagation};
use uyuni_core::{Action, Kind, Object, ObjectRef, Observation, Op, Step};
use uyuni_effects::{ClientOptions, EffectsError, NoProgress, connect, execute, observe};
use uyuni_testdata::real::{self, RealCluster, RealConfig};
use uyuni_testdata::{Flavour, Scenario};

/// The cluster, or `None` (said so) where it was not built; in CI its absence fails the test.
fn cluster() -> Option<RealCluster> {
    if let Err(why) = real::available() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the real control plane is needed in CI: {why}"
        );
        println!("real control plane NOT tested: {why}");
        return None;
    }
    Some(
        RealCluster::start_config(&RealConfig {
            scenario: Some(Scenario::default()),
            flavour: Flavour::Plain,
            cert_manager: false,
            addons: false,
        })
        .expect("the real control plane starts"),
    )
}

fn kubectl(cluster: &RealCluster, args: &[&str]) -> Output {
    cluster.kubectl(args, "").expect("kubectl runs")
}

fn web() -> Object {
    Object::Deployment(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": NS, "labels": managed_labels()},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{
                        "name": "main",
                        "image": "registry.example.com/uyuni/server:5.1",
                    }]},
                },
            },
        }))
        .unwrap(),
    )
}

fn observation() -> Observation {
    Observation {
        namespace: NS.to_owned(),
        named: vec![
            ObjectRef::new(Kind::Deployment, "web"),
            ObjectRef::new(Kind::ConfigMap, "held"),
        ],
        job_selector: uyuni_core::labels::MANAGED_SELECTOR.to_owned(),
        api_groups: Vec::new(),
        every: Vec::new(),
    }
}

#[test]
fn real_delete_of_a_deployment_takes_its_replica_set_and_pods_first() {
    let Some(cluster) = cluster() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let conn = connect(&ClientOptions {
            kubeconfig: Some(cluster.kubeconfig_path()),
            namespace: Some(NS.to_owned()),
            ..ClientOptions::default()
        })
        .await
        .unwrap();
        with_namespace(&conn).await;
        execute(&conn.client, NS, &apply_step(web()), &NoProgress)
            .await
            .unwrap();
        let ready = Step {
            id: "wait-web".into(),
            description: "web is ready".into(),
            op: Op::Wait,
            target: ObjectRef::new(Kind::Deployment, "web"),
            reason: "test".into(),
            action: Action::WaitDeployment {
                name: "web".into(),
                wait: uyuni_core::plan::DeploymentWait {
                    timeout_seconds: Some(60),
                    unschedulable_grace_seconds: 60,
                    log_tail_lines: 0,
                },
            },
        };
        bounded(execute(&conn.client, NS, &ready, &NoProgress))
            .await
            .unwrap();
        let replica_sets: Api<ReplicaSet> = Api::namespaced(conn.client.clone(), NS);
        let pods: Api<Pod> = Api::namespaced(conn.client.clone(), NS);
        let selected = ListParams::default().labels("app=web");
        assert_eq!(replica_sets.list(&selected).await.unwrap().items.len(), 1);
        assert_eq!(pods.list(&selected).await.unwrap().items.len(), 1);

        let observed = observe(&conn.client, &observation()).await.unwrap();
        let step = uyuni_core::plan::delete_step(
            &observed,
            ObjectRef::new(Kind::Deployment, "web"),
            "web goes".into(),
        )
        .unwrap();
        assert!(matches!(
            step.action,
            Action::Delete {
                propagation: Propagation::Foreground,
                ..
            }
        ));
        bounded(execute(&conn.client, NS, &step, &NoProgress))
            .await
            .unwrap();
        // Foreground: the Deployment went last, after what it owned.
        assert!(replica_sets.list(&selected).await.unwrap().items.is_empty());
        assert!(pods.list(&selected).await.unwrap().items.is_empty());
        let observed = observe(&conn.client, &observation()).await.unwrap();
        assert!(observed.objects.is_empty(), "{:?}", observed.objects.keys());

        // An object a finalizer holds stays terminating: the wait ends with the object named
        // and the command that shows what holds it.
        let held: Object = Object::ConfigMap(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {
                    "name": "held", "namespace": NS, "labels": managed_labels(),
                    "finalizers": ["example.com/hold"],
                },
            }))
            .unwrap(),
        );
        execute(&conn.client, NS, &apply_step(held), &NoProgress)
            .await
            .unwrap();
        let target = ObjectRef::new(Kind::ConfigMap, "held");
        let step = Step {
            id: "delete-held".into(),
            description: "held goes".into(),
            op: Op::Delete,
            target: target.clone(),
            reason: "test".into(),
            action: Action::Delete {
                target,
                propagation: Propagation::Background,
                wait: DeleteWait {
                    timeout_seconds: Some(2),
                },
            },
        };
        let err = bounded(execute(&conn.client, NS, &step, &NoProgress))
            .await
            .unwrap_err();
        assert!(matches!(err, EffectsError::NotDeleted { .. }), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("configmap/held in namespace uyuni-test is still there")
                && text.contains(&format!("kubectl -n {NS} get configmap held -o yaml")),
            "{text}"
        );
    });
    let out = kubectl(
        &cluster,
        &[
            "-n",
            NS,
            "patch",
            "configmap",
            "held",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    assert!(out.status.success(), "{out:?}");
}
