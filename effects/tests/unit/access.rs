//! `access`: matching a request against RBAC rules.

use k8s_openapi::api::authorization::v1::ResourceRule;
use uyuni_core::access::Access;
use uyuni_effects::access::allows;

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> ResourceRule {
    ResourceRule {
        verbs: verbs.iter().map(|s| (*s).to_owned()).collect(),
        api_groups: Some(groups.iter().map(|s| (*s).to_owned()).collect()),
        resources: Some(resources.iter().map(|s| (*s).to_owned()).collect()),
        resource_names: None,
    }
}

fn access(verb: &str, group: &str, resource: &str, sub: Option<&str>) -> Access {
    Access {
        verb: verb.to_owned(),
        group: group.to_owned(),
        resource: resource.to_owned(),
        subresource: sub.map(str::to_owned),
        namespace: Some("uyuni".to_owned()),
    }
}

#[test]
fn rules_match_as_rbac_does() {
    let jobs = access("create", "batch", "jobs", None);
    assert!(allows(&rule(&["*"], &["*"], &["*"]), &jobs));
    assert!(allows(
        &rule(&["create", "get"], &["batch"], &["jobs"]),
        &jobs
    ));
    assert!(!allows(&rule(&["get"], &["batch"], &["jobs"]), &jobs));
    assert!(!allows(&rule(&["create"], &[""], &["jobs"]), &jobs));
    assert!(!allows(
        &rule(&["create"], &["batch"], &["cronjobs"]),
        &jobs
    ));
    let log = access("get", "", "pods", Some("log"));
    assert!(!allows(&rule(&["get"], &[""], &["pods"]), &log));
    assert!(allows(&rule(&["get"], &[""], &["pods/log"]), &log));
    assert!(allows(&rule(&["get"], &[""], &["*/log"]), &log));
    let mut named = rule(&["*"], &["*"], &["*"]);
    named.resource_names = Some(vec!["uyuni-ca".to_owned()]);
    assert!(!allows(&named, &jobs), "a rule for named objects");
}
