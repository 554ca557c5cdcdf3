//! Whether the claims a migration writes can be provisioned: a claim whose StorageClass does not
//! exist, or that names none in a cluster without a default class, stays Pending for ever, and
//! the first Job that mounts it waits for ever. So the classes are checked before any write.

use crate::kubectl::Kubectl;
use crate::object::Kind;
use crate::observed::Observed;
use crate::params::ServerParams;
use crate::volumes;

/// The annotation that makes a StorageClass the default of claims naming none
/// (<https://kubernetes.io/docs/tasks/administer-cluster/change-default-storage-class/>).
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

pub use crate::observed::StorageClassInfo;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StorageError {
    #[error(
        "this cluster has no default StorageClass and no --volumes-class was given: claims {} would stay Pending and the first Job would wait for ever. Pass --volumes-class NAME (StorageClasses found: {}), or make one the default. Nothing was written by this run",
        claims.join(", "),
        found_list(found)
    )]
    NoDefault {
        claims: Vec<String>,
        found: Vec<String>,
    },
    #[error(
        "StorageClass {class} (--volumes-class or --volume-class), asked for claims {}, does not exist in this cluster, so they would stay Pending and the first Job would wait for ever. Pass one that exists (StorageClasses found: {}). Nothing was written by this run",
        claims.join(", "),
        found_list(found)
    )]
    Missing {
        class: String,
        claims: Vec<String>,
        found: Vec<String>,
    },
}

fn found_list(found: &[String]) -> String {
    if found.is_empty() {
        "none".to_owned()
    } else {
        found.join(", ")
    }
}

impl StorageError {
    /// The message, with `kubectl` commands carrying the run's flags.
    pub fn render(&self, kubectl: &Kubectl) -> String {
        match self {
            StorageError::NoDefault { .. } => format!(
                "{self} (`{}`)",
                kubectl.cmd(
                    None,
                    &format!("annotate storageclass NAME {DEFAULT_CLASS_ANNOTATION}=true")
                )
            ),
            StorageError::Missing { .. } => self.to_string(),
        }
    }
}

/// Checks that every claim the plan would create can be provisioned. Claims that exist are
/// left alone (a resumed run's claims are bound already, whatever their class). When the
/// classes could not be listed (`observed.storage_classes` is `None`), nothing is checked; see
/// [`unchecked_warning`].
pub fn check(params: &ServerParams, observed: &Observed) -> Result<(), StorageError> {
    let Some(classes) = &observed.storage_classes else {
        return Ok(());
    };
    // The upgraded database's claim too (`builders::database::upgraded_claim`), known here by
    // its name and class: this check runs in `resolve`, below the builders.
    let upgraded = volumes::upgraded_database_volume();
    let wanted: Vec<(&str, Option<&str>)> = params
        .spec
        .volumes
        .iter()
        .map(|c| (c.name.as_str(), c.storage_class.as_deref()))
        // Only where the specification has the database's volume before an upgrade (a
        // migration's): an install names its database's volume itself.
        .chain(
            params
                .spec
                .volumes
                .iter()
                .any(|v| v.name == volumes::DATABASE_VOLUME)
                .then(|| {
                    (
                        upgraded.as_str(),
                        volumes::upgraded_database_class(&params.spec.volumes),
                    )
                }),
        )
        .filter(|(name, _)| !observed.contains(Kind::PersistentVolumeClaim, name))
        .collect();
    // An install's specification names the database claim `var-pgsql18` already.
    let mut wanted = wanted;
    let mut seen = std::collections::BTreeSet::new();
    wanted.retain(|(name, _)| seen.insert(*name));
    let found: Vec<String> = classes.iter().map(|c| c.name.clone()).collect();
    let claims_of = |class: Option<&str>| -> Vec<String> {
        wanted
            .iter()
            .filter(|(_, c)| *c == class)
            .map(|(name, _)| (*name).to_owned())
            .collect()
    };
    let mut asked: Vec<&str> = wanted.iter().filter_map(|(_, c)| *c).collect();
    asked.sort_unstable();
    asked.dedup();
    if let Some(class) = asked.into_iter().find(|a| !found.iter().any(|f| f == a)) {
        return Err(StorageError::Missing {
            class: class.to_owned(),
            claims: claims_of(Some(class)),
            found,
        });
    }
    let unnamed = claims_of(None);
    if !unnamed.is_empty() && !classes.iter().any(|c| c.default) {
        return Err(StorageError::NoDefault {
            claims: unnamed,
            found,
        });
    }
    Ok(())
}

/// The warning of a run that could not list StorageClasses (not allowed to): it goes on, as
/// the check is a courtesy, not a need.
pub fn unchecked_warning(observed: &Observed) -> Option<String> {
    observed.storage_classes.is_none().then(|| {
        "StorageClasses could not be listed (not allowed for this user): whether the volumes can be provisioned is not checked; if the claims stay Pending, pass --volumes-class NAME with a class that exists".to_owned()
    })
}
