//! `upgrade`'s parameters: the server as the command that made it set it up (`install`'s
//! remembered inputs and name, or `migrate`'s source), with the images to upgrade to, and
//! whether a copy of the database is kept first.

use serde::Serialize;

use super::{InstallParams, MigrateParams, ServerParams};

/// The command that made the server, with its parameters: its planner plans the end state on
/// the new images.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "origin")]
pub enum Origin {
    Installed(Box<InstallParams>),
    Migrated(Box<MigrateParams>),
}

/// Validated parameters of `upgrade`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpgradeParams {
    /// The server's origin with the images asked for.
    pub origin: Origin,
    /// Keep a copy of the stopped database before the images change (not `--no-backup`).
    /// Without a PostgreSQL major change it is the only way back; with one, the old volume is
    /// kept whatever this says.
    pub backup: bool,
    /// `--rollback`: back to the images ConfigMap `uyuni-upgrade` recorded, on the data kept.
    pub rollback: bool,
}

impl std::ops::Deref for UpgradeParams {
    type Target = ServerParams;
    fn deref(&self) -> &ServerParams {
        match &self.origin {
            Origin::Installed(p) => p,
            Origin::Migrated(p) => p,
        }
    }
}

impl std::ops::DerefMut for UpgradeParams {
    fn deref_mut(&mut self) -> &mut ServerParams {
        match &mut self.origin {
            Origin::Installed(p) => p,
            Origin::Migrated(p) => p,
        }
    }
}
