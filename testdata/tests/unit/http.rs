use uyuni_testdata::http::{Query, parse_resource_path};

#[test]
fn query_tolerates_empty_parts_and_decodes() {
    let q = Query::parse("&labelSelector=a%3Db%2Cc+in+%28x%29&&watch=1");
    assert_eq!(q.get("labelSelector"), Some("a=b,c in (x)"));
    assert!(q.flag("watch"));
}

#[test]
fn resource_paths() {
    let rp = parse_resource_path("/apis/batch/v1/namespaces/uyuni/jobs/x/status").expect("path");
    assert_eq!((rp.group.as_str(), rp.plural.as_str()), ("batch", "jobs"));
    assert_eq!(rp.namespace.as_deref(), Some("uyuni"));
    assert_eq!(rp.subresource.as_deref(), Some("status"));
    let rp = parse_resource_path("/api/v1/namespaces").expect("path");
    assert_eq!((rp.plural.as_str(), rp.namespace), ("namespaces", None));
    let rp = parse_resource_path("/api/v1/namespaces/foo").expect("path");
    assert_eq!(rp.plural, "namespaces");
    assert_eq!(rp.name.as_deref(), Some("foo"));
}
