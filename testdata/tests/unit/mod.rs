//! The library's unit tests, one module per source file (`agent_exec` is `src/agent/exec.rs`):
//! they were `#[cfg(test)]` modules under src/, and are here so that the library is not
//! compiled a second time in test mode (its `[lib]` is `test = false`). What they need of the
//! library is public, items purely for them `#[doc(hidden)]`.

mod addons_bootstrap;
mod addons_certmanager;
mod addons_provisioner;
mod agent_exec;
mod agent_logs;
mod agent_node;
mod agent_pods;
mod golden;
mod http;
mod patch;
mod protobuf;
mod scenario;
mod selectors;
mod validate;
