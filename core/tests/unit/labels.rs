use std::collections::BTreeMap;

use uyuni_core::labels::{
    MANAGED_BY, MANAGED_BY_VALUE, MANAGED_SELECTOR, PART_OF, PART_OF_SELECTOR, PART_OF_VALUE,
    selects,
};

#[test]
fn equality_selectors_match_their_labels_only() {
    let labels: BTreeMap<String, String> = [("a", "1"), ("b", "2")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert!(selects("a=1", Some(&labels)));
    assert!(selects("a=1,b==2", Some(&labels)));
    assert!(!selects("a=1,c=3", Some(&labels)));
    assert!(!selects("a!=2", Some(&labels)));
    assert!(!selects("a in (1)", Some(&labels)));
    assert!(!selects("a=1", None));
    assert!(selects(
        MANAGED_SELECTOR,
        Some(&uyuni_core::labels::labels("server"))
    ));
}

#[test]
fn the_selectors_spell_the_labels() {
    assert_eq!(PART_OF_SELECTOR, format!("{PART_OF}={PART_OF_VALUE}"));
    assert_eq!(
        MANAGED_SELECTOR,
        format!("{PART_OF_SELECTOR},{MANAGED_BY}={MANAGED_BY_VALUE}")
    );
}
