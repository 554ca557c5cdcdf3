//! The library's unit tests, one module per source file (`plan_phase` is `src/plan/migrate/phase.rs`),
//! with the same test names: they were `#[cfg(test)]` modules under src/, and are here so that
//! the library is not compiled a second time in test mode (its `[lib]` is `test = false`). What
//! they need of the library is public, items purely for them `#[doc(hidden)]`.

mod access;
mod builders_ingress;
mod builders_registry;
mod builders_tftp;
mod catalogue;
mod dataplane;
mod image;
mod kubectl;
mod labels;
mod lock;
mod observed;
mod observed_objects;
mod params;
mod pg;
mod plan_phase;
mod plan_steps;
mod pod_security;
mod ports;
mod probe;
mod quota;
mod record;
mod render;
mod resolve;
mod scripts_database;
mod secret;
mod simulate;
mod ssh;
mod status;
mod sync_progress;
mod timezone;
mod verdict;
mod volumes;
