//! The drive loop knows no command: a command of a few lines (one ConfigMap, then a step that
//! waits for nothing) is driven against the simulated cluster through the same loop `migrate`
//! uses, with its lease and permission check, and converges; a second drive plans nothing and
//! writes nothing. The loop keeps the record of each operation that writes (`operation`): its
//! steps and its end, the newest ten; a record that cannot be written does not fail the run.

use std::collections::BTreeMap;

use anyhow::Result;
use k8s_openapi::api::core::v1::ConfigMap;
use kubectl_uyuni::drive::{self, Command, Drive};
use kubectl_uyuni::lock::{RunLock, Writer};
use kubectl_uyuni::output::{Reporter, ReporterOptions};
use uyuni_core::access::Access;
use uyuni_core::kubectl::Kubectl;
use uyuni_core::params::{ServerParams, ServerSpecArgs};
use uyuni_core::plan::{Action, Op, Plan, PlanError, Planner, Step};
use uyuni_core::{Kind, Object, ObjectRef, Observation, Observed};
use uyuni_testdata::{SimCluster, SimConfig};

const NS: &str = "drive-test";
const NAME: &str = "drive-test";

/// Keeps one ConfigMap with one value: its own parameters and planner.
#[derive(Clone)]
struct OneConfigMap {
    server: ServerParams,
    value: String,
    kubectl: Kubectl,
    /// The steps the loop carried out, by id.
    carried_out: Vec<String>,
    first_observations: usize,
    /// Its record's name comes from it.
    run_id: String,
}

impl OneConfigMap {
    fn new(value: &str) -> OneConfigMap {
        OneConfigMap {
            server: ServerParams::from_args(
                NS,
                true,
                &Kubectl::default(),
                "20261204120000",
                "test",
                &ServerSpecArgs::default(),
            )
            .expect("valid parameters"),
            value: value.to_owned(),
            kubectl: Kubectl::default(),
            carried_out: Vec::new(),
            first_observations: 0,
            run_id: "20261204120000".to_owned(),
        }
    }

    fn wanted(&self) -> ConfigMap {
        ConfigMap {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(NAME.to_owned()),
                namespace: Some(NS.to_owned()),
                labels: Some(BTreeMap::from([(
                    uyuni_core::labels::MANAGED_BY.to_owned(),
                    uyuni_core::labels::MANAGED_BY_VALUE.to_owned(),
                )])),
                ..Default::default()
            },
            data: Some(BTreeMap::from([("key".to_owned(), self.value.clone())])),
            ..Default::default()
        }
    }
}

fn step(id: &str, op: Op, target: ObjectRef, action: Action) -> Step {
    Step {
        id: id.to_owned(),
        description: format!("test step {id}"),
        op,
        target,
        reason: "test".to_owned(),
        action,
    }
}

impl Planner for OneConfigMap {
    fn server(&self) -> &ServerParams {
        &self.server
    }

    fn observation(&self) -> Observation {
        Observation {
            namespace: NS.to_owned(),
            named: vec![
                ObjectRef::new(Kind::Namespace, NS),
                ObjectRef::new(Kind::ConfigMap, NAME),
            ],
            job_selector: uyuni_core::labels::MANAGED_SELECTOR.to_owned(),
            api_groups: Vec::new(),
            every: Vec::new(),
        }
    }

    fn plan(&self, observed: &Observed) -> Result<Plan, PlanError> {
        let target = ObjectRef::new(Kind::ConfigMap, NAME);
        let held = match observed.get(Kind::ConfigMap, NAME) {
            Some(Object::ConfigMap(cm)) => Some(cm.data.clone()),
            _ => None,
        };
        let wanted = self.wanted();
        let apply = match held {
            Some(data) if data == wanted.data => {
                step("config", Op::Unchanged, target.clone(), Action::None)
            }
            Some(_) => step(
                "config",
                Op::Update,
                target.clone(),
                Action::Apply(Box::new(Object::ConfigMap(wanted))),
            ),
            None => step(
                "config",
                Op::Create,
                target.clone(),
                Action::Apply(Box::new(Object::ConfigMap(wanted))),
            ),
        };
        Ok(Plan {
            namespace: NS.to_owned(),
            // A step that has nothing to wait for: the loop passes it by.
            steps: vec![apply, step("nothing", Op::Unchanged, target, Action::None)],
        })
    }

    fn with_stand_in(&self, _error: &PlanError) -> Option<Self> {
        None
    }
}

impl Command for OneConfigMap {
    type Params = Self;

    fn params(&self) -> &Self {
        self
    }

    fn first_observation(&mut self, _observed: &Observed) {
        self.first_observations += 1;
    }

    // The permission check of a command of its own: what it writes, not what core's planners
    // write.
    fn access_needed(&self, _observed: &Observed, foreseen: &[Step]) -> Vec<Access> {
        foreseen
            .iter()
            .flat_map(|_| {
                ["get", "patch", "create"].map(|verb| Access::new(verb, "", "configmaps", Some(NS)))
            })
            .collect()
    }

    fn identity(&self) -> kubectl_uyuni::operation::Identity {
        kubectl_uyuni::operation::Identity {
            command: "drive",
            fingerprint: uyuni_core::operation::fingerprint(&self.value),
        }
    }

    fn writer(&self) -> Writer<'_> {
        Writer {
            namespace: NS,
            kubectl: &self.kubectl,
            repeat: "the same test again".to_owned(),
            run_id: &self.run_id,
            as_user: None,
            lease_duration_seconds: None,
            force_unlock: false,
        }
    }

    async fn before_step(&mut self, _plan: &Plan, step: &Step, _drive: &Drive<'_>) -> Result<()> {
        self.carried_out.push(step.id.clone());
        Ok(())
    }
}

async fn drive_once(sim: &SimCluster, command: &mut OneConfigMap) -> Observed {
    let conn = uyuni_effects::connect(&uyuni_effects::ClientOptions {
        kubeconfig: Some(sim.kubeconfig_path().to_owned()),
        namespace: Some(NS.to_owned()),
        ..uyuni_effects::ClientOptions::default()
    })
    .await
    .expect("connects to the simulated cluster");
    let reporter = Reporter::new(ReporterOptions {
        quiet: true,
        ..ReporterOptions::plain()
    });
    let run_lock = RunLock::default();
    let drive = Drive {
        conn: &conn,
        reporter: &reporter,
        run_lock: &run_lock,
        barrier_timeout: None,
    };
    let observed = drive::run(command, &drive).await;
    run_lock.release(&reporter).await;
    observed.expect("the drive converges")
}

fn stored_value(sim: &SimCluster) -> Option<String> {
    sim.objects("v1", "ConfigMap", Some(NS))
        .into_iter()
        .find(|cm| cm["metadata"]["name"] == NAME)
        .and_then(|cm| cm["data"]["key"].as_str().map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drive_a_command_of_its_own_converges_and_a_second_drive_plans_nothing() {
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("simulated cluster");
    sim.put(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
        .expect("namespace");

    let mut first = OneConfigMap::new("one");
    let observed = drive_once(&sim, &mut first).await;
    assert_eq!(first.carried_out, ["config"]);
    assert_eq!(first.first_observations, 1);
    assert_eq!(stored_value(&sim).as_deref(), Some("one"));
    // What the loop returns is the cluster after the write, not a prediction of it.
    assert!(
        matches!(observed.get(Kind::ConfigMap, NAME), Some(Object::ConfigMap(cm))
            if cm.data.as_ref().and_then(|d| d.get("key")).map(String::as_str) == Some("one")),
        "{:?}",
        observed.objects.keys()
    );

    sim.clear_request_log();
    let mut second = OneConfigMap::new("one");
    drive_once(&sim, &mut second).await;
    assert!(second.carried_out.is_empty(), "{:?}", second.carried_out);
    let writes: Vec<String> = sim
        .request_log()
        .into_iter()
        .filter(|r| r.write)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "a converged drive wrote: {writes:?}");

    // A changed input is carried out by the same loop: an update, then nothing.
    let mut third = OneConfigMap::new("two");
    drive_once(&sim, &mut third).await;
    assert_eq!(third.carried_out, ["config"]);
    assert_eq!(stored_value(&sim).as_deref(), Some("two"));
}

/// The operation records in the simulated cluster, oldest first: name and record.
fn records(sim: &SimCluster) -> Vec<(String, serde_json::Value)> {
    crate::support::records::operations(sim, NS)
        .into_iter()
        .map(|(name, record, _)| (name, record))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_writing_drive_leaves_a_record_of_its_steps_and_the_newest_ten_are_kept() {
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("simulated cluster");
    sim.put(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
        .expect("namespace");

    let mut first = OneConfigMap::new("one");
    drive_once(&sim, &mut first).await;
    let found = records(&sim);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (name, record) = &found[0];
    assert_eq!(name, "uyuni-operation-20261204120000-drive");
    assert_eq!(record["command"], "drive");
    assert_eq!(record["run"], "20261204120000");
    assert_eq!(record["outcome"], "succeeded");
    assert_eq!(record["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        record["fingerprint"],
        uyuni_core::operation::fingerprint(&"one".to_owned()).as_str()
    );
    assert!(record["ended"].is_string(), "{record:#}");
    let steps = record["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 1, "{record:#}");
    assert_eq!(steps[0]["id"], "config");
    assert_eq!(steps[0]["phase"], "done");
    assert!(steps[0]["started"].is_string() && steps[0]["ended"].is_string());

    // A run that writes nothing records nothing.
    let mut again = OneConfigMap::new("one");
    again.run_id = "20261204120001".to_owned();
    drive_once(&sim, &mut again).await;
    assert_eq!(records(&sim).len(), 1);

    // Twelve more operations: the ten newest records stay, the oldest are deleted.
    for i in 0..12 {
        let mut next = OneConfigMap::new(&format!("value {i}"));
        next.run_id = format!("202612041201{i:02}");
        drive_once(&sim, &mut next).await;
    }
    let names: Vec<String> = records(&sim).into_iter().map(|(n, _)| n).collect();
    let expected: Vec<String> = (2..12)
        .map(|i| format!("uyuni-operation-202612041201{i:02}-drive"))
        .collect();
    assert_eq!(names, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_cannot_be_written_does_not_fail_the_run() {
    let sim = SimCluster::start(SimConfig::default())
        .await
        .expect("simulated cluster");
    sim.put(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
        .expect("namespace");
    // Every write of the record is refused for good.
    sim.set_faults(uyuni_testdata::Faults {
        errors: vec![uyuni_testdata::ErrorFault {
            target: uyuni_testdata::FaultTarget {
                verb: Some(uyuni_testdata::Verb::Patch),
                resource: Some("configmaps".to_owned()),
                name: Some("uyuni-operation-20261204120000-drive".to_owned()),
            },
            status: 403,
            rate: 1.0,
            retry_after_seconds: 1,
        }],
        ..uyuni_testdata::Faults::default()
    });
    let mut first = OneConfigMap::new("one");
    drive_once(&sim, &mut first).await;
    assert_eq!(first.carried_out, ["config"]);
    assert_eq!(stored_value(&sim).as_deref(), Some("one"));
    assert!(records(&sim).is_empty());
}
