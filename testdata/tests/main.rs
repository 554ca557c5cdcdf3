//! The test crate's integration tests, one binary: each file under `tests/` is a module of it
//! (their test names start with the file's name; `kubectl`, `sim` and `unit` are directories), so
//! the sim, kube-rs and the rest are linked into one test executable instead of one per file.
//! `unit` holds the library's unit tests (`unit::patch::…` for `src/patch.rs`), which are not
//! under src/ so that the library is not compiled a second time in test mode.
//! `scripts/run-tests.py` runs the modules as separate processes.

mod agent_support;

mod binary;
mod cluster_addons;
mod deps_cache;
mod differential;
#[path = "kubectl/main.rs"]
mod kubectl;
mod node_agent;
mod node_agent_exec;
mod real_control_plane;
mod real_node;
#[path = "sim/main.rs"]
mod sim;
mod unit;
