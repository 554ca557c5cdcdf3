//! The plugin's integration tests, one binary: each file under `tests/` is a module of it (their
//! test names start with the file's name), so kube-rs, the sim and the rest are linked into one
//! test executable instead of one per file. `scripts/run-tests.py` runs the modules as separate
//! processes (the long ones in shards).

mod support;

mod cli;
mod completion;
mod docs;
mod drive;
mod dry_run;
mod e2e;
mod e2e_faults;
mod e2e_interrupt;
mod e2e_lease;
mod e2e_lifecycle;
mod e2e_migration;
mod e2e_real_migration;
mod e2e_record;
mod e2e_remembered;
mod e2e_requests;
mod e2e_rerun;
mod e2e_safety;
mod e2e_status;
mod global_flags;
mod krew;
mod modules;
mod output_formats;
mod output_schemas;
mod secret_scan;
mod unit;
