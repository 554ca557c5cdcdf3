//! The record of the server's specification (ConfigMap `uyuni-server-spec`, `core::record`):
//! written by the planner at the first write, and the start of every later run.

use std::collections::BTreeMap;

use crate::common::{self, NAMESPACE};
use uyuni_core::catalogue::names;
use uyuni_core::plan::Op;
use uyuni_core::{Kind, Object, ObjectRef, Observed};

fn record_of(observed: &Observed) -> BTreeMap<String, String> {
    observed
        .config_map(names::SERVER_SPEC_CONFIG_MAP)
        .and_then(|c| c.data.clone())
        .unwrap_or_default()
}

fn args() -> uyuni_core::MigrateArgs {
    common::args_with_ssh(&common::private_key("fixture-private-key"))
}

fn server_image(observed: &Observed) -> String {
    observed
        .deployment(names::SERVER_DEPLOYMENT)
        .and_then(|d| d.spec.as_ref())
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.containers.first())
        .and_then(|c| c.image.clone())
        .expect("the server's image")
}

#[test]
fn the_first_write_after_the_namespace_records_the_flags() {
    let mut given = args();
    given.spec.tag = Some("2025.10".into());
    given.spec.tftp_host_network = Some(true);
    let (params, _) = uyuni_core::record::params(given, &BTreeMap::new()).expect("valid");
    let plan = uyuni_core::plan(&params, &common::empty_cluster()).expect("plans");
    let ids: Vec<&str> = plan.steps.iter().map(|s| s.id.as_str()).collect();
    // The first write after the namespace and the image checks.
    let at = ids
        .iter()
        .position(|i| *i == "server-spec")
        .expect("planned");
    assert!(
        ids[..at]
            .iter()
            .all(|i| *i == "namespace" || i.starts_with("image-check-")),
        "{ids:?}"
    );
    assert_eq!(ids[at + 1], "ssh-key", "{ids:?}");
    let step = &plan.steps[at];
    assert_eq!(step.op, Op::Create);
    let Some(Object::ConfigMap(cm)) = step.action.object() else {
        panic!("not a ConfigMap: {step:?}");
    };
    assert_eq!(
        cm.metadata.name.as_deref(),
        Some(names::SERVER_SPEC_CONFIG_MAP)
    );
    assert_eq!(cm.metadata.namespace.as_deref(), Some(NAMESPACE));
    let labels = cm.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels[uyuni_core::labels::MANAGED_BY], "kubectl-uyuni");
    assert_eq!(labels[uyuni_core::labels::PART_OF], "uyuni");
    assert_eq!(
        cm.data,
        Some(BTreeMap::from([
            ("tag".to_owned(), "2025.10".to_owned()),
            ("tftp-host-network".to_owned(), "true".to_owned()),
        ]))
    );
}

#[test]
fn a_run_without_remembered_flags_records_nothing_and_a_rerun_keeps_it() {
    let (params, _) = uyuni_core::record::params(args(), &BTreeMap::new()).expect("valid");
    let end = uyuni_core::preview(&params, &common::empty_cluster())
        .expect("previews")
        .end;
    let cm = end
        .config_map(names::SERVER_SPEC_CONFIG_MAP)
        .expect("written even when empty: later runs know a record exists");
    // Absent, not empty: the API server drops an empty map.
    assert_eq!(cm.data, None);
    let again = uyuni_core::plan(&params, &end).expect("plans");
    let step = again
        .steps
        .iter()
        .find(|s| s.id == "server-spec")
        .expect("listed");
    assert_eq!(step.op, Op::Unchanged);
}

/// `--prepare --tag X`, then the final run without `--tag`: the server runs at tag X.
#[test]
fn a_final_run_without_the_tag_of_the_prepare_run_keeps_it() {
    let mut prepare = args();
    prepare.prepare = true;
    prepare.spec.tag = Some("2025.10".into());
    prepare.spec.pull_policy = Some("IfNotPresent".into());
    let (params, _) = uyuni_core::record::params(prepare, &BTreeMap::new()).expect("valid");
    let mut start = common::empty_cluster();
    start.insert(common::namespace());
    let prepared = uyuni_core::preview(&params, &start).expect("previews").end;
    let recorded = record_of(&prepared);
    assert_eq!(recorded["tag"], "2025.10");

    // The final run: no image flag, the record as the cluster holds it.
    let (params, settings) = uyuni_core::record::params(args(), &recorded).expect("valid");
    assert!(
        params.spec.image.server.ends_with(":2025.10"),
        "{}",
        params.spec.image.server
    );
    assert!(
        settings
            .iter()
            .any(|s| s.text() == "tag: 2025.10 (remembered)"),
        "{settings:?}"
    );
    let mut synced = common::after_sync(&params);
    let spec = ObjectRef::new(Kind::ConfigMap, names::SERVER_SPEC_CONFIG_MAP);
    synced.insert(prepared.objects.get(&spec).cloned().expect("recorded"));
    let end = uyuni_core::preview(&params, &synced).expect("previews").end;
    assert!(
        server_image(&end).ends_with("/uyuni/server:2025.10"),
        "{}",
        server_image(&end)
    );
    assert_eq!(record_of(&end), recorded, "the final run records the same");
}

#[test]
fn a_changed_flag_updates_the_record() {
    let (params, _) = uyuni_core::record::params(args(), &BTreeMap::new()).expect("valid");
    let end = uyuni_core::preview(&params, &common::after_sync(&params))
        .expect("previews")
        .end;
    let mut given = args();
    given.spec.coco_replicas = Some(1);
    let (params, settings) = uyuni_core::record::params(given, &record_of(&end)).expect("valid");
    assert_eq!(settings[0].text(), "coco-replicas: 1 (--coco-replicas)");
    let plan = uyuni_core::plan(&params, &end).expect("plans");
    let step = plan
        .steps
        .iter()
        .find(|s| s.id == "server-spec")
        .expect("listed");
    assert_eq!(step.op, Op::Update);
}
