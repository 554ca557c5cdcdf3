use uyuni_testdata::validate::{
    dns1123_label, go_label_selector, go_string_map, parse_quantity, port_name, qualified_name,
};

#[test]
fn messages_read_like_upstream() {
    assert_eq!(
        dns1123_label("Web_1"),
        vec![
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters \
             or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  \
             or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        ]
    );
    assert_eq!(dns1123_label("a.b"), vec!["must not contain dots"]);
    assert!(port_name("jmx").is_empty());
    assert_eq!(
        port_name("8080"),
        vec!["must contain at least one letter (a-z)"]
    );
    assert_eq!(
        port_name("jmx-exporter-port1"),
        vec!["must be no more than 15 characters"]
    );
    assert!(qualified_name("app.kubernetes.io/part-of").is_empty());
    assert_eq!(qualified_name("a/b/c").len(), 1);
    assert_eq!(parse_quantity("10Gi"), Some(10.0 * 1024f64.powi(3)));
    assert_eq!(parse_quantity("1e3"), Some(1000.0));
    assert_eq!(parse_quantity("ten"), None);
    assert_eq!(parse_quantity("10GB"), None);
}

#[test]
fn go_renderings() {
    assert_eq!(
        go_string_map(&serde_json::json!({"b": "2", "a": "1"})),
        r#"map[string]string{"a":"1", "b":"2"}"#
    );
    assert_eq!(
        go_label_selector(&serde_json::json!({"matchLabels": {"app": "web"}})),
        r#"v1.LabelSelector{MatchLabels:map[string]string{"app":"web"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"#
    );
}
