use std::collections::BTreeMap;

use uyuni_core::dataplane::{data_plane, parse_du, quantity_bytes};
use uyuni_core::observed::Observed;
use uyuni_core::params::MigrateParams;

#[test]
fn quantities_to_bytes() {
    assert_eq!(quantity_bytes("10Mi"), Some(10 * 1024 * 1024));
    assert_eq!(quantity_bytes("1.5Gi"), Some(1_610_612_736));
    assert_eq!(quantity_bytes("500M"), Some(500_000_000));
    assert_eq!(quantity_bytes("42"), Some(42));
    assert_eq!(quantity_bytes("lots"), None);
}

#[test]
fn du_output_is_parsed() {
    let m = parse_du("1234\t/var/lib/cobbler\n99 /srv/www/\ngarbage\n");
    assert_eq!(m.get("/var/lib/cobbler"), Some(&1234));
    assert_eq!(m.get("/srv/www"), Some(&99));
    assert_eq!(m.len(), 2);
}

#[test]
fn too_small_volumes_are_flagged() {
    let params = MigrateParams::from_args(&crate::unit::params::args()).expect("valid params");
    let measured = BTreeMap::from([
        ("/root".to_owned(), 5 * 1024 * 1024),
        ("/var/lib/cobbler".to_owned(), 1024),
    ]);
    let plane = data_plane(&params, &Observed::default(), Ok(&measured));
    let root = plane
        .volumes
        .iter()
        .find(|v| v.claim == "root")
        .expect("root");
    assert!(root.too_small);
    let cobbler = plane
        .volumes
        .iter()
        .find(|v| v.claim == "var-cobbler")
        .expect("cobbler");
    assert!(!cobbler.too_small);
    assert!(plane.volumes.iter().any(|v| v.claim == "var-pgsql"));
    assert!(!plane.volumes.iter().any(|v| v.claim == "migration-data"));
    assert_eq!(plane.warnings().len(), 1);
    assert!(plane.render().contains("WARNING"));

    let unmeasured = data_plane(&params, &Observed::default(), Err("no local SSH key"));
    assert!(
        unmeasured
            .volumes
            .iter()
            .all(|v| v.source_bytes.is_none() && !v.too_small)
    );
    assert!(unmeasured.render().contains("no local SSH key"));
}

#[test]
fn the_order_says_what_happens_before_and_after_the_stop() {
    let params = MigrateParams::from_args(&crate::unit::params::args()).expect("valid params");
    let plane = data_plane(&params, &Observed::default(), Err("not measured"));
    assert_eq!(plane.order.len(), 3, "{:?}", plane.order);
    assert!(plane.order[0].contains("serves") && plane.order[0].contains("catch-up"));
    assert!(plane.order[1].starts_with("the outage begins"));
    assert!(plane.order[1].contains("--compress"));
    assert!(plane.render().contains("  2. the outage begins: "));
    let compressed = MigrateParams {
        compress: true,
        ..params.clone()
    };
    let plane = data_plane(&compressed, &Observed::default(), Err("not measured"));
    assert!(!plane.order[1].contains("--compress"));
    let prepare = MigrateParams {
        prepare: true,
        ..params
    };
    let plane = data_plane(&prepare, &Observed::default(), Err("not measured"));
    assert_eq!(plane.order.len(), 1);
    assert!(plane.order[0].contains("nothing is stopped"));
}
