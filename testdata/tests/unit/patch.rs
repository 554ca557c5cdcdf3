use serde_json::json;
use uyuni_testdata::patch::{
    apply_conflicts, fields_v1, json_patch, merge_patch, strategic_merge_patch, take_over_conflicts,
};

#[test]
fn merge_patch_rfc7386_examples() {
    let mut doc = json!({"a": "b", "c": {"d": "e", "f": "g"}});
    merge_patch(&mut doc, &json!({"a": "z", "c": {"f": null}}));
    assert_eq!(doc, json!({"a": "z", "c": {"d": "e"}}));
    let mut doc = json!({"a": [1, 2]});
    merge_patch(&mut doc, &json!({"a": [3]}));
    assert_eq!(doc, json!({"a": [3]}));
}

#[test]
fn strategic_merge_by_name() {
    let mut doc = json!({"spec": {"containers": [
        {"name": "a", "image": "a:1", "args": ["x"]},
        {"name": "b", "image": "b:1"}
    ]}});
    strategic_merge_patch(
        &mut doc,
        &json!({"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "a", "image": "a:2"}, {"name": "b", "$patch": "delete"}]
        }}),
    );
    assert_eq!(
        doc,
        json!({"spec": {"containers": [{"name": "a", "image": "a:2", "args": ["x"]}]}})
    );
}

#[test]
fn json_patch_ops() {
    let mut doc = json!({"a": {"b": [1, 2]}, "c": 1});
    json_patch(
        &mut doc,
        &json!([
            {"op": "add", "path": "/a/b/1", "value": 9},
            {"op": "add", "path": "/a/b/-", "value": 3},
            {"op": "remove", "path": "/c"},
            {"op": "replace", "path": "/a/x~1y", "value": 1},
        ]),
    )
    .expect_err("replace of a missing key fails");
    let mut doc = json!({"a": {"b": [1, 2]}, "c": 1});
    json_patch(
        &mut doc,
        &json!([
            {"op": "add", "path": "/a/b/1", "value": 9},
            {"op": "test", "path": "/c", "value": 1},
            {"op": "move", "from": "/c", "path": "/d"},
            {"op": "copy", "from": "/d", "path": "/a/e~1f"},
        ]),
    )
    .expect("valid patch");
    assert_eq!(doc, json!({"a": {"b": [1, 9, 2], "e/f": 1}, "d": 1}));
}

#[test]
fn apply_conflicts_with_other_managers_applies_and_updates_alike() {
    let existing = json!({
        "metadata": {"managedFields": [
            {"manager": "a", "operation": "Apply", "fieldsV1": {"f:spec": {"f:replicas": {}}}},
            {"manager": "b", "operation": "Update", "fieldsV1": {"f:spec": {"f:paused": {}}}},
        ]},
        "spec": {"replicas": 1, "paused": false}
    });
    let body = json!({"spec": {"replicas": 2, "paused": true}});
    assert_eq!(
        apply_conflicts(&existing, &body, "c", None),
        vec![
            ("a".to_string(), ".spec.replicas".to_string()),
            ("b".to_string(), ".spec.paused".to_string())
        ]
    );
    assert_eq!(
        apply_conflicts(&existing, &body, "a", None),
        vec![("b".to_string(), ".spec.paused".to_string())]
    );
    // Forced, the fields change hands; b owned nothing else and loses its entry.
    let mut obj = existing.clone();
    take_over_conflicts(&mut obj, &existing, &body, "c", None);
    assert_eq!(obj["metadata"]["managedFields"], json!([]));
}

#[test]
fn fields_v1_shape() {
    let f = fields_v1(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "labels": {"a": "b"}},
        "data": {"k": "v"}
    }));
    assert_eq!(
        f,
        json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:data": {"f:k": {}}})
    );
}
