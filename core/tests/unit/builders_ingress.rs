use uyuni_core::builders::ingress::{external_ports, nginx_values, traefik_values};
use uyuni_core::ports::{self, Features};

#[test]
fn entrypoints_fit_traefik_and_values_route_to_real_services() {
    let all = Features {
        debug: true,
        hub: true,
    };
    let external = external_ports(all);
    for p in &external {
        assert!(ports::endpoint(p).len() <= 15, "{}", ports::endpoint(p));
        assert_ne!(p.port, ports::HTTP_PORT, "HTTP goes through the Ingress");
    }
    let mut names: Vec<String> = external.iter().map(ports::endpoint).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), external.len());
    let nginx = nginx_values("uyuni", &external);
    assert!(nginx.contains("\"4506\": \"uyuni/salt:4506\""), "{nginx}");
    assert!(
        nginx.contains("\"2830\": \"uyuni/hub-xmlrpc:2830\""),
        "{nginx}"
    );
    assert!(traefik_values(&external).contains("tasko-debug:"));
}
