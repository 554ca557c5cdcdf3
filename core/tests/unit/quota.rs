//! Whether a new claim is admitted: its StorageClass, the LimitRanges, the ResourceQuotas as
//! admission computes them.

use proptest::prelude::*;
use serde_json::json;
use uyuni_core::Object;
use uyuni_core::observed::{Observed, StorageClassInfo};
use uyuni_core::quota::{NewClaim, Refusal, value};

/// The refusal, unboxed for matching; `None`: admitted.
fn refusal(observed: &Observed, claims: &[NewClaim]) -> Option<Refusal> {
    uyuni_core::quota::check(observed, claims).err().map(|r| *r)
}

fn claim(size: &str, class: Option<&str>) -> NewClaim {
    NewClaim {
        name: "var-pgsql18-backup".to_owned(),
        size: size.to_owned(),
        class: class.map(str::to_owned),
    }
}

fn quota(
    name: &str,
    spec: serde_json::Value,
    hard: serde_json::Value,
    used: serde_json::Value,
) -> Object {
    Object::ResourceQuota(
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "uyuni"},
            "spec": spec,
            "status": {"hard": hard, "used": used},
        }))
        .expect("a ResourceQuota"),
    )
}

fn limit_range(limits: serde_json::Value) -> Object {
    Object::LimitRange(
        serde_json::from_value(json!({
            "metadata": {"name": "storage-limits", "namespace": "uyuni"},
            "spec": {"limits": limits},
        }))
        .expect("a LimitRange"),
    )
}

fn with(objects: Vec<Object>) -> Observed {
    let mut observed = Observed::default();
    for object in objects {
        observed.insert(object);
    }
    observed
}

#[test]
fn quantities_read_as_admission_compares_them() {
    assert_eq!(value("0"), Some(0));
    assert_eq!(value("0Gi"), Some(0));
    assert_eq!(value("5"), Some(5));
    assert_eq!(value("10Gi"), Some(10 << 30));
    assert_eq!(value("1.5Gi"), Some(3 << 29));
    assert_eq!(value("2G"), Some(2_000_000_000));
    assert_eq!(value("1500m"), Some(2));
    assert_eq!(value("not a quantity"), None);
}

#[test]
fn no_quota_no_limit_admits() {
    assert_eq!(refusal(&Observed::default(), &[claim("50Gi", None)]), None);
}

#[test]
fn a_quota_without_room_for_the_storage_refuses_naming_it_the_room_and_the_size() {
    let observed = with(vec![quota(
        "storage",
        json!({"hard": {"requests.storage": "60Gi"}}),
        json!({"requests.storage": "60Gi"}),
        json!({"requests.storage": "50Gi"}),
    )]);
    let refused = refusal(&observed, &[claim("50Gi", Some("local-path"))]).expect("refused");
    let text = refused.to_string();
    assert!(
        text.contains("ResourceQuota storage")
            && text.contains("10.0 GiB")
            && text.contains("requests.storage")
            && text.contains("needs 50Gi"),
        "{text}"
    );
    assert_eq!(refused.object(), Some(("resourcequota", "storage")));
    // Raised: admitted, the room exactly the size included.
    let raised = with(vec![quota(
        "storage",
        json!({}),
        json!({"requests.storage": "100Gi"}),
        json!({"requests.storage": "50Gi"}),
    )]);
    assert_eq!(refusal(&raised, &[claim("50Gi", Some("local-path"))]), None);
}

#[test]
fn the_count_of_claims_and_the_class_quotas_count_too() {
    let count = with(vec![quota(
        "claims",
        json!({}),
        json!({"persistentvolumeclaims": "3"}),
        json!({"persistentvolumeclaims": "3"}),
    )]);
    assert!(matches!(
        refusal(&count, &[claim("1Gi", None)]),
        Some(Refusal::Quota { ref resource, .. }) if resource == "persistentvolumeclaims"
    ));
    let by_class = with(vec![quota(
        "gold",
        json!({}),
        json!({"gold.storageclass.storage.k8s.io/requests.storage": "10Gi"}),
        json!({"gold.storageclass.storage.k8s.io/requests.storage": "0"}),
    )]);
    // Charged to the claim's class only.
    assert!(refusal(&by_class, &[claim("20Gi", Some("gold"))]).is_some());
    assert_eq!(refusal(&by_class, &[claim("20Gi", Some("silver"))]), None);
    // A claim without a class is charged to the default class, as admission defaults it.
    let mut defaulted = by_class.clone();
    defaulted.storage_classes = Some(vec![StorageClassInfo {
        name: "gold".into(),
        default: true,
    }]);
    assert!(refusal(&defaulted, &[claim("20Gi", None)]).is_some());
}

#[test]
fn a_quota_scoped_to_other_objects_does_not_count_and_an_uncomputed_one_refuses() {
    let scoped = with(vec![quota(
        "terminating",
        json!({"scopes": ["Terminating"]}),
        json!({"requests.storage": "1Gi"}),
        json!({"requests.storage": "1Gi"}),
    )]);
    assert_eq!(refusal(&scoped, &[claim("50Gi", None)]), None);
    let unknown = with(vec![quota(
        "new",
        json!({}),
        json!({"requests.storage": "100Gi"}),
        json!({}),
    )]);
    assert!(matches!(
        refusal(&unknown, &[claim("50Gi", None)]),
        Some(Refusal::QuotaUnknown { .. })
    ));
}

#[test]
fn a_limit_range_bounds_the_claim_size() {
    let observed = with(vec![limit_range(json!([
        {"type": "Container", "max": {"memory": "1Gi"}},
        {"type": "PersistentVolumeClaim", "max": {"storage": "20Gi"}, "min": {"storage": "1Gi"}},
    ]))]);
    let refused = refusal(&observed, &[claim("50Gi", None)]).expect("refused");
    assert!(
        refused.to_string().contains("at most 20Gi") && refused.to_string().contains("50Gi"),
        "{refused}"
    );
    assert!(matches!(
        refusal(&observed, &[claim("500Mi", None)]),
        Some(Refusal::Limit { bound: "min", .. })
    ));
    assert_eq!(refusal(&observed, &[claim("10Gi", None)]), None);
}

#[test]
fn a_storage_class_that_is_gone_refuses() {
    let mut observed = Observed {
        storage_classes: Some(vec![StorageClassInfo {
            name: "local-path".into(),
            default: true,
        }]),
        ..Observed::default()
    };
    let refused = refusal(&observed, &[claim("50Gi", Some("fast"))]).expect("refused");
    assert!(
        refused.to_string().contains("StorageClass fast"),
        "{refused}"
    );
    assert_eq!(
        refusal(&observed, &[claim("50Gi", Some("local-path"))]),
        None
    );
    observed.storage_classes = Some(Vec::new());
    assert!(matches!(
        refusal(&observed, &[claim("50Gi", None)]),
        Some(Refusal::NoClass { class: None, .. })
    ));
    // Not listable: not checked.
    observed.storage_classes = None;
    assert_eq!(refusal(&observed, &[claim("50Gi", Some("fast"))]), None);
}

proptest! {
    /// Admission's rule: a quota on `requests.storage` admits exactly when used + size ≤ hard.
    #[test]
    fn a_storage_quota_admits_exactly_what_fits(hard in 0u64..1 << 20, used in 0u64..1 << 20, size in 1u64..1 << 20) {
        let observed = with(vec![quota(
            "q",
            json!({}),
            json!({"requests.storage": format!("{hard}Mi")}),
            json!({"requests.storage": format!("{used}Mi")}),
        )]);
        let admitted = refusal(&observed, &[claim(&format!("{size}Mi"), None)]).is_none();
        prop_assert_eq!(admitted, used + size <= hard);
    }
}
