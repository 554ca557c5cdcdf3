use uyuni_core::catalogue::components;
use uyuni_core::ports::{
    CATALOGUE, Features, PGSQL_PORT, container_ports, is_iana_svc_name, of_component, of_service,
    services,
};

const ALL: Features = Features {
    debug: true,
    hub: true,
};

#[test]
fn a_service_selects_one_component_and_names_its_ports_uniquely() {
    for service in services(ALL) {
        let ports = of_service(service, ALL);
        assert!(ports.iter().all(|p| p.component == ports[0].component));
        let mut names: Vec<&str> = ports.iter().map(|p| p.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ports.len(), "{service}");
        assert!(names.iter().all(|n| n.len() <= 15), "IANA port names");
    }
    assert_eq!(of_component(components::DB, ALL).len(), 1);
}

/// Every combination of the features.
fn all_features() -> Vec<Features> {
    let mut out = Vec::new();
    for debug in [false, true] {
        for hub in [false, true] {
            out.push(Features { debug, hub });
        }
    }
    out
}

fn components_of_catalogue() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for p in CATALOGUE {
        if !out.contains(&p.component) {
            out.push(p.component);
        }
    }
    out
}

/// What a real API server checks on a pod's ports and a Service's ports: named ports have
/// unique IANA names, per container and per Service, for every feature combination.
#[test]
fn every_named_port_is_unique_and_an_iana_name_per_container_and_per_service() {
    for features in all_features() {
        for component in components_of_catalogue() {
            let ports = container_ports(component, features);
            let mut names: Vec<&str> = ports.iter().filter_map(|p| p.name.as_deref()).collect();
            assert!(
                names.iter().all(|n| is_iana_svc_name(n)),
                "{component} {features:?}: {names:?}"
            );
            let count = names.len();
            names.sort_unstable();
            names.dedup();
            assert_eq!(
                names.len(),
                count,
                "{component} {features:?}: duplicate port names"
            );
            let mut numbers: Vec<(i32, Option<String>)> = ports
                .iter()
                .map(|p| (p.container_port, p.protocol.clone()))
                .collect();
            let count = numbers.len();
            numbers.sort_unstable();
            numbers.dedup();
            assert_eq!(
                numbers.len(),
                count,
                "{component} {features:?}: duplicate ports"
            );
        }
        for service in services(features) {
            let ports = of_service(service, features);
            assert!(
                ports.iter().all(|p| is_iana_svc_name(p.name)),
                "{service} {features:?}"
            );
            let mut names: Vec<&str> = ports.iter().map(|p| p.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), ports.len(), "{service} {features:?}");
        }
    }
}

#[test]
fn iana_service_names_are_checked_as_kubernetes_does() {
    for good in [
        "http",
        "node-exporter",
        "jmx",
        "a1",
        "x-1-y",
        "abcdefghijklmno",
    ] {
        assert!(is_iana_svc_name(good), "{good}");
    }
    for bad in [
        "",
        "1234",
        "-http",
        "http-",
        "a--b",
        "HTTP",
        "web_ui",
        "abcdefghijklmnop",
    ] {
        assert!(!is_iana_svc_name(bad), "{bad}");
    }
}

#[test]
fn debug_and_hub_ports_follow_the_features() {
    let plain = Features::default();
    assert!(!services(plain).contains(&"search"));
    assert!(!services(plain).contains(&"hub-xmlrpc"));
    assert!(services(ALL).contains(&"search"));
    assert!(
        of_service("tomcat", plain)
            .iter()
            .all(|p| p.name != "debug")
    );
    assert!(
        of_component(components::SERVER, ALL)
            .iter()
            .any(|p| p.port == 8003)
    );
    assert!(
        of_component(components::SERVER, ALL)
            .iter()
            .all(|p| p.port != PGSQL_PORT)
    );
}
