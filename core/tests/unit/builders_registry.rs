use base64::Engine;
use uyuni_core::builders::registry::pull_secret;

#[test]
fn the_docker_config_is_json_even_with_quotes_and_backslashes() {
    let secret = pull_secret("uyuni", "registry.suse.com", "us\"er", "pa\\ss\"word");
    let data = secret.data.expect("data");
    let bytes = &data.get(".dockerconfigjson").expect("config").0;
    let config: serde_json::Value = serde_json::from_slice(bytes).expect("valid JSON");
    let entry = &config["auths"]["registry.suse.com"];
    assert_eq!(entry["username"], "us\"er");
    assert_eq!(entry["password"], "pa\\ss\"word");
    let auth = base64::engine::general_purpose::STANDARD
        .decode(entry["auth"].as_str().expect("auth"))
        .expect("base64");
    assert_eq!(auth, b"us\"er:pa\\ss\"word");
    assert_eq!(
        secret.type_.as_deref(),
        Some("kubernetes.io/dockerconfigjson")
    );
}
