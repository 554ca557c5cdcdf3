//! The core's integration tests, one binary: each file under `tests/` is a module of it (their
//! test names start with the file's name; `unit` is a directory), so the core and its
//! dependencies are linked into one test executable instead of one per file. `unit` holds the
//! library's unit tests (`unit::plan_phase::…` for `src/plan/migrate/phase.rs`), which are not under
//! src/ so that the library is not compiled a second time in test mode. `scripts/run-tests.py`
//! runs the modules as separate processes.

mod common;

mod certs;
mod data_sync_script;
mod database_plan;
mod database_scripts;
mod db_volume;
mod golden;
mod image_check_scripts;
mod install;
mod install_properties;
mod job_accounts;
mod layers;
mod lifecycle;
mod migration_secrets;
mod mirror;
mod network_policy;
mod operation;
mod outage;
mod phases;
mod pod_hardening;
mod policy_scan;
mod preflight;
mod properties;
mod rbac;
mod real_postgres;
mod registry;
mod release;
mod rerun_safety;
mod safety_checks;
mod salt_ca;
mod schemas;
mod selectors;
mod server_pod;
mod server_spec;
mod step_numbers;
mod sync_plan;
mod tftp_plan;
mod tls;
mod uninstall;
mod unit;
mod upgrade;
mod upgrade_scripts;
