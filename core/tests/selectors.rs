//! Label selectors of the objects a whole migration writes: no step Job's pod may be selected by
//! a Service or a Deployment, or it would receive the Service's traffic (or be counted as one of
//! the Deployment's pods) while it runs.

use crate::common;

use std::collections::BTreeMap;

use uyuni_core::{Object, preview};

fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[test]
fn no_service_or_deployment_selects_a_step_jobs_pod() {
    let params = common::params();
    let preview = preview(&params, &common::empty_cluster()).expect("preview");
    let objects: Vec<Object> = preview
        .executed
        .iter()
        .filter_map(|s| s.action.object())
        .collect();
    let mut selectors = Vec::new();
    let mut pods = Vec::new();
    for object in &objects {
        match object {
            Object::Service(s) => {
                let selector = s.spec.as_ref().and_then(|s| s.selector.clone());
                selectors.push((
                    format!("service/{}", s.metadata.name.clone().unwrap_or_default()),
                    selector.unwrap_or_default(),
                ));
            }
            Object::Deployment(d) => {
                let selector = d
                    .spec
                    .as_ref()
                    .and_then(|s| s.selector.match_labels.clone());
                selectors.push((
                    format!("deployment/{}", d.metadata.name.clone().unwrap_or_default()),
                    selector.unwrap_or_default(),
                ));
            }
            Object::Job(j) => {
                let labels = j
                    .spec
                    .as_ref()
                    .and_then(|s| s.template.metadata.as_ref())
                    .and_then(|m| m.labels.clone())
                    .unwrap_or_default();
                pods.push((j.metadata.name.clone().unwrap_or_default(), labels));
            }
            _ => {}
        }
    }
    assert!(
        selectors.len() >= 4 && pods.len() >= 5,
        "the migration writes Services, Deployments and Jobs"
    );
    for (job, labels) in &pods {
        for (owner, selector) in &selectors {
            assert!(
                !selects(selector, labels),
                "{owner} selects the pod of Job {job}: {labels:?}"
            );
        }
    }
    // The check is meaningful: each Deployment selects its own pods.
    assert!(objects.iter().any(|o| matches!(o, Object::Deployment(d) if {
        let sel = d.spec.as_ref().and_then(|s| s.selector.match_labels.clone()).unwrap_or_default();
        let labels = d.spec.as_ref().and_then(|s| s.template.metadata.as_ref()).and_then(|m| m.labels.clone()).unwrap_or_default();
        selects(&sel, &labels)
    })));
}
