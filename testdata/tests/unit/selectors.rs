use serde_json::json;
use uyuni_testdata::selectors::{FieldSelector, LabelSelector};

#[test]
fn label_selector_forms() {
    let obj = json!({"metadata": {"labels": {"a": "1", "b": "x"}}});
    let cases = [
        ("a=1", true),
        ("a==1", true),
        ("a!=1", false),
        ("c!=1", true),
        ("a", true),
        ("!a", false),
        ("!c", true),
        ("b in (x, y)", true),
        ("b notin (x,y)", false),
        ("c notin (x)", true),
        ("a=1,b in (y,z)", false),
        ("a=1,b in (x,z),!c", true),
        ("", true),
    ];
    for (sel, want) in cases {
        let parsed = LabelSelector::parse(sel).expect("valid selector");
        assert_eq!(parsed.matches(&obj), want, "{sel}");
    }
}

#[test]
fn field_selector_forms() {
    let obj = json!({"metadata": {"name": "x", "namespace": "ns"}, "status": {"phase": "Running"}});
    assert!(
        FieldSelector::parse("metadata.name=x")
            .expect("valid")
            .matches(&obj)
    );
    assert!(
        !FieldSelector::parse("metadata.name=y")
            .expect("valid")
            .matches(&obj)
    );
    assert!(
        FieldSelector::parse("metadata.namespace==ns,status.phase!=Failed")
            .expect("valid")
            .matches(&obj)
    );
    assert!(FieldSelector::parse("garbage").is_err());
}
