//! Job scripts: shell files under `core/scripts/`, embedded in the binary and run as
//! `bash -c TEXT` in the Job's container, where TEXT is the shared helpers (`lib.sh`) followed
//! by the script ([`job_text`]). Parameters reach a script as environment variables of the
//! Job's container, secrets as mounted files or `secretKeyRef` variables: the text of a script
//! is the same in every Job, so ShellCheck checks the files themselves and a Job carries no
//! value in its command line.
//!
//! The paths and key names they share with the builders are in [`crate::catalogue`].

pub mod data_sync;
pub mod database;
pub mod image_check;
pub mod image_inspect;
pub mod tls;

pub use crate::catalogue::data_keys;
pub use crate::catalogue::paths::{
    SECRET_SCRATCH_DIR, SSH_CONF_DIR, SSH_CONFIG_PATH, SSH_KEY_DIR, SSH_KNOWN_HOSTS_PATH,
    SSH_PRIVATE_KEY_PATH,
};

/// The helpers every Job script shares (`core/scripts/lib.sh`): one `conf_set`, one
/// `patch_secret`, one `fail`.
pub const LIB: &str = include_str!("../../scripts/lib.sh");

/// What a Job runs with `bash -c`: the helpers, then `script`. One text keeps the Job
/// self-contained (no ConfigMap to create and keep in step); a script run as a file loads
/// `lib.sh` itself, and skips that here because the helpers are already defined.
pub fn job_text(script: &str) -> String {
    format!("{LIB}\n{script}")
}

/// A script as a Job runs it: its text for `bash -c` ([`job_text`]) and its parameters, the
/// environment variables the script's file documents. Values only: a secret reaches a script as
/// a mounted file or a `secretKeyRef` variable, never here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobScript {
    pub text: String,
    pub env: Vec<(&'static str, String)>,
}

impl JobScript {
    /// `script` (a file of `core/scripts/`) with its parameters; `local_root`, the tests'
    /// prefix of every path, becomes `LOCAL_ROOT` when it is not empty.
    pub fn new(script: &str, mut env: Vec<(&'static str, String)>, local_root: &str) -> Self {
        if !local_root.is_empty() {
            env.push(("LOCAL_ROOT", local_root.to_owned()));
        }
        JobScript {
            text: job_text(script),
            env,
        }
    }
}

/// A list parameter: one record a line, its fields tab-separated.
pub(crate) fn records<'a>(rows: impl IntoIterator<Item = &'a [&'a str]>) -> String {
    rows.into_iter()
        .map(|fields| fields.join("\t"))
        .collect::<Vec<_>>()
        .join("\n")
}
