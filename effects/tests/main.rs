//! The effects crate's tests, one binary: `sim_cluster` runs `connect`, `observe` and `execute`
//! against the simulated cluster, and `unit` holds the unit tests of the modules under `src/`
//! (one file per module, through the crate's public items), so the library is not compiled a
//! second time in test mode. `scripts/run-tests.py` runs the modules as separate processes.

mod common;

mod real_delete;
mod sim_cluster;
mod unit;
