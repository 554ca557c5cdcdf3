//! A new server's database volume is named for the PostgreSQL major its database image check
//! reported, as the chart names it per major: `var-pgsql19` for PostgreSQL 19.

use uyuni_core::Kind;
use uyuni_core::plan::Planner;

use crate::common;
use crate::salt_ca::run_with;
use crate::upgrade::{FROM, installed_with_tag};

#[test]
fn an_install_names_its_database_volume_for_the_major_its_image_reported() {
    let params = installed_with_tag(FROM);
    let kind = |_: &str| Some("salt-file-root");
    let (_, end) = run_with(&params, &common::empty_cluster(), &kind, 19);
    assert_eq!(
        uyuni_core::resolve::live_db_claim(&end).as_deref(),
        Some("var-pgsql19")
    );
    assert!(end.contains(Kind::PersistentVolumeClaim, "var-pgsql19"));
    assert!(
        !end.contains(Kind::PersistentVolumeClaim, "var-pgsql18"),
        "a volume of the major the image does not run"
    );
    let again = params.plan(&end).expect("plans again");
    assert!(again.is_done(), "{:?}", again.next_step());
    // PostgreSQL 18: the name the parameters have.
    let (_, eighteen) = run_with(&params, &common::empty_cluster(), &kind, 18);
    assert_eq!(
        uyuni_core::resolve::live_db_claim(&eighteen).as_deref(),
        Some("var-pgsql18")
    );
}
