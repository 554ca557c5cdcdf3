//! The release order `upgrade` compares image releases in, and its refusals.

use proptest::prelude::*;
use uyuni_core::release::{Release, Stage, Step, UpgradeRefusal, check_upgrade};

fn r(text: &str) -> Release {
    Release::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

#[test]
fn release_order_is_the_numeric_one() {
    for (low, high) in [
        ("5.0.10", "5.1.0"),
        ("5.0.9", "5.0.10"),
        ("5.1.0 Alpha1", "5.1.0 Beta2"),
        ("5.1.0 Beta2", "5.1.0"),
        ("5.1.0-rc1", "5.1.0"),
        ("5.1.0 Alpha2", "5.1.0 Alpha10"),
        ("2025.10", "2026.04"),
        ("2025.9", "2025.10"),
        ("v5.1", "5.1.1"),
    ] {
        assert!(r(low) < r(high), "{low} < {high}");
    }
    assert_eq!(r("5.1"), r("5.1.0"));
    assert_eq!(r("5.1.0 Beta 2").pre, Some((Stage::Beta, 2)));
}

#[test]
fn release_refusals_name_both_releases() {
    let refused = check_upgrade(&r("5.1.2"), &r("5.0.10")).expect_err("downgrade");
    assert!(matches!(refused, UpgradeRefusal::Downgrade { .. }));
    assert!(refused.to_string().contains("5.0.10") && refused.to_string().contains("5.1.2"));
    assert!(matches!(
        check_upgrade(&r("5.1.0"), &r("2025.10")),
        Err(UpgradeRefusal::ProductSwitch { .. })
    ));
    let jump = check_upgrade(&r("5.0.3"), &r("5.2.0")).expect_err("jump");
    assert!(jump.to_string().contains("5.1"), "{jump}");
    assert_eq!(check_upgrade(&r("5.0.3"), &r("5.1.0")), Ok(Step::Newer));
    assert_eq!(check_upgrade(&r("2025.10"), &r("2026.04")), Ok(Step::Newer));
    assert_eq!(check_upgrade(&r("5.1"), &r("5.1.0")), Ok(Step::Same));
    for bad in [
        "",
        "latest",
        "5..1",
        "5.1.",
        "5.1.0 gamma",
        "99999999999999999999999",
    ] {
        assert!(Release::parse(bad).is_err(), "{bad:?} parsed");
    }
}

fn release() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(0u64..30, 1..5),
        prop::option::of((0usize..3, 0u64..5)),
    )
        .prop_map(|(numbers, pre)| {
            let mut text = numbers
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(".");
            if let Some((stage, n)) = pre {
                text.push_str(&format!(" {}{n}", ["Alpha", "Beta", "RC"][stage]));
            }
            text
        })
}

proptest! {
    #[test]
    fn release_parsing_never_panics(text in ".*") {
        let _ = Release::parse(&text);
    }

    #[test]
    fn release_order_is_total_and_numeric(a in release(), b in release(), c in release()) {
        let (ra, rb, rc) = (r(&a), r(&b), r(&c));
        // Antisymmetric and total.
        prop_assert_eq!(ra.cmp(&rb), rb.cmp(&ra).reverse());
        // Transitive.
        if ra <= rb && rb <= rc {
            prop_assert!(ra <= rc, "{} <= {} <= {}", a, b, c);
        }
        // Consistent with the numbers read as numbers, zero-padded.
        let pad = |r: &Release| {
            let mut n = r.numbers.clone();
            n.resize(6, 0);
            n
        };
        if pad(&ra) != pad(&rb) {
            prop_assert_eq!(ra.cmp(&rb), pad(&ra).cmp(&pad(&rb)));
        }
    }
}
