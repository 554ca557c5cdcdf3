//! `upgrade`'s parameters: the server as `install` set it up (its remembered inputs, its name),
//! with the images to upgrade to, and whether a copy of the database is kept first.

use serde::Serialize;

use super::{InstallParams, ServerParams};

/// Validated parameters of `upgrade`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UpgradeParams {
    /// The installed server with the images asked for: its end state is planned by `install`'s
    /// own planner on those images.
    #[serde(flatten)]
    pub install: InstallParams,
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
        &self.install
    }
}

impl std::ops::DerefMut for UpgradeParams {
    fn deref_mut(&mut self) -> &mut ServerParams {
        &mut self.install
    }
}
