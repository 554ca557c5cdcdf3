//! Unit tests of `src/clock.rs`.

use kubectl_uyuni::clock::*;

#[test]
fn timestamps() {
    assert_eq!(timestamp(0), "19700101000000");
    assert_eq!(timestamp(951_782_400), "20000229000000");
    assert_eq!(timestamp(1_795_977_000), "20261129183000");
}

#[test]
fn a_run_id_no_job_carries() {
    assert_eq!(unused_run_id(1_795_977_000, |_| false), "20261129183000");
    let taken = ["20261129183000", "20261129183001"];
    assert_eq!(
        unused_run_id(1_795_977_000, |id| taken.contains(&id)),
        "20261129183002"
    );
}
