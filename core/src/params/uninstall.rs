//! `uninstall`'s own inputs: whether the data goes too (`--purge-volumes`, confirmed) and
//! whether the namespace does (`--delete-namespace`). The server's specification is the
//! default one: uninstall deploys nothing, and only reads the names every command writes.

use serde::Serialize;

use super::{ParamsError, ServerParams, ServerSpecArgs};

/// Validated parameters of `uninstall`: where ([`ServerParams`], which it dereferences to) and
/// how much goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UninstallParams {
    #[serde(flatten)]
    pub server: ServerParams,
    /// The user asked for the claims and credential Secrets to be deleted, and confirmed it
    /// (on a terminal, or with `--yes`). Only then does the planner hold a
    /// [`crate::plan::Purge`].
    pub purge_volumes: bool,
    /// `--delete-namespace`: the namespace goes last, if this tool created it.
    pub delete_namespace: bool,
}

impl UninstallParams {
    /// Validates the namespace and the run id as every command does.
    pub fn new(
        namespace: &str,
        namespace_explicit: bool,
        kubectl: &crate::kubectl::Kubectl,
        run_id: &str,
        tool_version: &str,
        purge_volumes: bool,
        delete_namespace: bool,
    ) -> Result<Self, ParamsError> {
        Ok(UninstallParams {
            server: ServerParams::from_args(
                namespace,
                namespace_explicit,
                kubectl,
                run_id,
                tool_version,
                &ServerSpecArgs::default(),
            )?,
            purge_volumes,
            delete_namespace,
        })
    }
}

impl std::ops::Deref for UninstallParams {
    type Target = ServerParams;
    fn deref(&self) -> &ServerParams {
        &self.server
    }
}

impl std::ops::DerefMut for UninstallParams {
    fn deref_mut(&mut self) -> &mut ServerParams {
        &mut self.server
    }
}
