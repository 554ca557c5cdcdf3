//! The library's unit tests (`unit::output::…` for `src/output.rs`).

mod cli;
mod clock;
mod completion;
mod dry_run;
mod logs;
mod output;
mod status;
mod version;
