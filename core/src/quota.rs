//! Whether the API server will admit a claim the run is about to create: its StorageClass
//! exists, the namespace's LimitRanges allow its size, and its ResourceQuotas have room for it.
//! An upgrade creates its backup's (or its new PostgreSQL major's) claim after it stopped the
//! server; a refusal there would leave the server down, so the upgrade checks before its first
//! write, as admission will decide.
//!
//! Computed as Kubernetes admits a claim (v1.37.2, the Go module the real control plane builds):
//! - the claim's class: its own, else the default StorageClass, which the DefaultStorageClass
//!   admission plugin (`plugin/pkg/admission/storage/storageclass/setdefault/admission.go`)
//!   writes before the quota is evaluated;
//! - LimitRanges of type `PersistentVolumeClaim`: its `storage` request must be within `min`
//!   and `max` (`plugin/pkg/admission/limitranger/admission.go`,
//!   `PersistentVolumeClaimValidateLimitFunc`);
//! - ResourceQuotas: a claim charges `persistentvolumeclaims`, `count/persistentvolumeclaims`
//!   and `requests.storage`, and `<class>.storageclass.storage.k8s.io/persistentvolumeclaims`
//!   and `.../requests.storage` (`pkg/quota/v1/evaluator/core/persistent_volume_claims.go`,
//!   `Usage`); a quota counts when its `status.hard` names one of them and its scopes match
//!   (`Matches`: only the `VolumeAttributesClass` scope can match a claim,
//!   `pvcMatchesScopeFunc`); admission refuses when `status.used` plus the claim exceeds
//!   `status.hard`, or when `status.used` lacks a resource `status.hard` names ("status unknown
//!   for quota": `k8s.io/apiserver` `pkg/admission/plugin/resourcequota/controller.go`,
//!   `CheckRequest`).

use k8s_openapi::api::core::v1::{LimitRange, ResourceQuota};

use crate::object::Object;
use crate::observed::Observed;

/// A claim about to be created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewClaim {
    pub name: String,
    /// Its `requests.storage`, as written on the claim.
    pub size: String,
    /// Its StorageClass; `None`: the cluster's default.
    pub class: Option<String>,
}

/// Why a claim would not be admitted, or not provisioned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The claim's StorageClass does not exist (or it names none and no class is the default):
    /// it would stay Pending.
    NoClass {
        claim: String,
        class: Option<String>,
        found: Vec<String>,
    },
    /// A LimitRange bounds the size of a claim.
    Limit {
        claim: String,
        limit_range: String,
        /// `max` or `min`.
        bound: &'static str,
        limit: String,
        size: String,
    },
    /// A ResourceQuota has too little room left.
    Quota {
        claim: String,
        quota: String,
        resource: String,
        hard: String,
        used: String,
        left: String,
        needed: String,
    },
    /// A ResourceQuota's usage is not computed yet: admission refuses until it is.
    QuotaUnknown { quota: String, resource: String },
}

impl Refusal {
    /// The ResourceQuota or LimitRange that refuses, if one does.
    pub fn object(&self) -> Option<(&'static str, &str)> {
        match self {
            Refusal::NoClass { .. } => None,
            Refusal::Limit { limit_range, .. } => Some(("limitrange", limit_range)),
            Refusal::Quota { quota, .. } | Refusal::QuotaUnknown { quota, .. } => {
                Some(("resourcequota", quota))
            }
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NoClass {
                claim,
                class: Some(class),
                found,
            } => write!(
                f,
                "volume {claim} would take StorageClass {class}, the database volume's, which does not exist in this cluster (StorageClasses found: {}): the claim would stay Pending",
                list(found)
            ),
            Refusal::NoClass {
                claim,
                class: None,
                found,
            } => write!(
                f,
                "volume {claim} names no StorageClass, as the database volume, and no StorageClass is the cluster's default (found: {}): the claim would stay Pending",
                list(found)
            ),
            Refusal::Limit {
                claim,
                limit_range,
                bound,
                limit,
                size,
            } => {
                let (word, cmp) = if *bound == "max" {
                    ("at most", "more")
                } else {
                    ("at least", "less")
                };
                write!(
                    f,
                    "LimitRange {limit_range} allows claims of {word} {limit} of storage, and volume {claim} needs {size} (the database volume's size), {cmp}"
                )
            }
            Refusal::Quota {
                claim,
                quota,
                resource,
                hard,
                used,
                left,
                needed,
            } => write!(
                f,
                "ResourceQuota {quota} has room for {left} more of {resource} (hard {hard}, used {used}), and volume {claim} needs {needed}"
            ),
            Refusal::QuotaUnknown { quota, resource } => write!(
                f,
                "ResourceQuota {quota} has no usage of {resource} computed yet (status.used), so the API server refuses new claims until the quota controller computes it"
            ),
        }
    }
}

fn list(found: &[String]) -> String {
    if found.is_empty() {
        "none".to_owned()
    } else {
        found.join(", ")
    }
}

/// The value of a quantity as a whole number of its unit, rounded up (bytes for storage, a
/// count for objects); `None` for a form this does not read, which is then not checked.
pub fn value(quantity: &str) -> Option<u128> {
    let q = quantity.trim();
    if let Some(milli) = q.strip_suffix('m') {
        return value(milli).map(|v| v.div_ceil(1000));
    }
    if let Some(v) = crate::params::storage_bytes(q) {
        return Some(v);
    }
    // Zero, which `storage_bytes` (a volume's size) does not take: `0`, `0Gi`.
    let number = q.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    (number.contains('0') && number.chars().all(|c| c == '0' || c == '.')).then_some(0)
}

/// How a quantity of `resource` is shown: storage in binary units, counts as numbers.
fn shown(resource: &str, amount: u128) -> String {
    if resource.ends_with("requests.storage") {
        crate::dataplane::human_bytes(u64::try_from(amount).unwrap_or(u64::MAX))
    } else {
        amount.to_string()
    }
}

const CLASS_SUFFIX: &str = ".storageclass.storage.k8s.io/";

/// What the claims charge to each quota resource (`Usage`): the resource, the amount, and the
/// amount as said to the user (the claims' sizes as written, for storage).
fn usage(claims: &[(&NewClaim, Option<String>, u128)]) -> Vec<(String, u128, String)> {
    let mut out: std::collections::BTreeMap<String, (u128, Vec<String>)> = Default::default();
    for (claim, class, bytes) in claims {
        let mut charges = vec![
            ("persistentvolumeclaims".to_owned(), 1),
            ("count/persistentvolumeclaims".to_owned(), 1),
            ("requests.storage".to_owned(), *bytes),
        ];
        if let Some(class) = class {
            charges.push((format!("{class}{CLASS_SUFFIX}persistentvolumeclaims"), 1));
            charges.push((format!("{class}{CLASS_SUFFIX}requests.storage"), *bytes));
        }
        for (resource, amount) in charges {
            let entry = out.entry(resource).or_default();
            entry.0 += amount;
            entry.1.push(claim.size.clone());
        }
    }
    out.into_iter()
        .map(|(resource, (amount, sizes))| {
            let needed = if resource.ends_with("requests.storage") {
                sizes.join(" + ")
            } else {
                amount.to_string()
            };
            (resource, amount, needed)
        })
        .collect()
}

/// Whether a quota's scopes let it count a claim that names no VolumeAttributesClass (the
/// claims this tool writes): `Matches` with `pvcMatchesScopeFunc`, which matches only the
/// `VolumeAttributesClass` scope, on a claim's empty set of such classes.
fn scopes_match(quota: &ResourceQuota) -> bool {
    let Some(spec) = &quota.spec else {
        return true;
    };
    let plain = spec
        .scopes
        .iter()
        .flatten()
        .map(|scope| (scope.as_str(), "Exists"));
    let selected = spec
        .scope_selector
        .iter()
        .flat_map(|s| s.match_expressions.iter().flatten())
        .map(|e| (e.scope_name.as_str(), e.operator.as_str()));
    plain.chain(selected).all(|(scope, operator)| {
        scope == "VolumeAttributesClass" && matches!(operator, "DoesNotExist" | "NotIn")
    })
}

fn limit_refusal(range: &LimitRange, claim: &NewClaim, bytes: u128) -> Option<Refusal> {
    let name = range.metadata.name.clone().unwrap_or_default();
    let limits = range.spec.as_ref()?.limits.iter();
    for limit in limits.filter(|l| l.type_ == "PersistentVolumeClaim") {
        let bound = |bound: &'static str,
                     q: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
                     refuses: fn(u128, u128) -> bool| {
            let q = q?;
            let limit = value(&q.0)?;
            refuses(bytes, limit).then(|| Refusal::Limit {
                claim: claim.name.clone(),
                limit_range: name.clone(),
                bound,
                limit: q.0.clone(),
                size: claim.size.clone(),
            })
        };
        let max = limit.max.as_ref().and_then(|m| m.get("storage"));
        let min = limit.min.as_ref().and_then(|m| m.get("storage"));
        if let Some(refusal) = bound("max", max, |size, max| size > max)
            .or_else(|| bound("min", min, |size, min| size < min))
        {
            return Some(refusal);
        }
    }
    None
}

fn quota_refusal(
    quota: &ResourceQuota,
    charged: &[(String, u128, String)],
    claim: &str,
) -> Option<Refusal> {
    if !scopes_match(quota) {
        return None;
    }
    let name = quota.metadata.name.clone().unwrap_or_default();
    let status = quota.status.as_ref()?;
    let hard = status.hard.as_ref()?;
    let used = status.used.as_ref();
    for (resource, amount, needed) in charged {
        let Some(limit) = hard.get(resource) else {
            continue;
        };
        let Some(used_q) = used.and_then(|u| u.get(resource)) else {
            return Some(Refusal::QuotaUnknown {
                quota: name,
                resource: resource.clone(),
            });
        };
        let (Some(limit_v), Some(used_v)) = (value(&limit.0), value(&used_q.0)) else {
            continue;
        };
        if used_v.saturating_add(*amount) > limit_v {
            return Some(Refusal::Quota {
                claim: claim.to_owned(),
                quota: name,
                resource: resource.clone(),
                hard: limit.0.clone(),
                used: used_q.0.clone(),
                left: shown(resource, limit_v.saturating_sub(used_v)),
                needed: needed.clone(),
            });
        }
    }
    None
}

/// Checks that the namespace admits `claims` (none of which exists yet): their StorageClass
/// exists (when the classes could be listed), no LimitRange bounds their size, every
/// ResourceQuota has room for all of them together.
/// The refusal is boxed: it is rare, and large beside `Ok`.
pub fn check(observed: &Observed, claims: &[NewClaim]) -> Result<(), Box<Refusal>> {
    let default = observed
        .storage_classes
        .as_ref()
        .and_then(|cs| cs.iter().find(|c| c.default).map(|c| c.name.clone()));
    let mut sized = Vec::new();
    for claim in claims {
        if let Some(classes) = &observed.storage_classes {
            let exists = match &claim.class {
                Some(class) => classes.iter().any(|c| &c.name == class),
                None => default.is_some(),
            };
            if !exists {
                return Err(Box::new(Refusal::NoClass {
                    claim: claim.name.clone(),
                    class: claim.class.clone(),
                    found: classes.iter().map(|c| c.name.clone()).collect(),
                }));
            }
        }
        let Some(bytes) = value(&claim.size) else {
            continue;
        };
        for object in observed.objects.values() {
            if let Object::LimitRange(range) = object
                && let Some(refusal) = limit_refusal(range, claim, bytes)
            {
                return Err(Box::new(refusal));
            }
        }
        sized.push((
            claim,
            claim.class.clone().or_else(|| default.clone()),
            bytes,
        ));
    }
    let charged = usage(&sized);
    let names: Vec<&str> = claims.iter().map(|c| c.name.as_str()).collect();
    for object in observed.objects.values() {
        if let Object::ResourceQuota(quota) = object
            && let Some(refusal) = quota_refusal(quota, &charged, &names.join(" and "))
        {
            return Err(Box::new(refusal));
        }
    }
    Ok(())
}
