//! The dry run's ssh to the source (`du` over the trees the data sync copies), as an argv built
//! from the validated parameters: the plugin only spawns it. Its options are the data-sync
//! Job's, so the dry run reaches the source exactly when the Job would.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::params::MigrateParams;
use crate::shell::quote as shell_quote;
use crate::volumes::VolumeRole;

/// The `-o` options of every ssh to the source that runs unattended: the host key is checked
/// against the given known_hosts only, and nothing ever prompts (a prompt would hang a Job or a
/// dry run). The data-sync script's `ssh` and `RSYNC_RSH` carry the same two (a test in
/// tests/unit/probe.rs keeps them in step until the script takes them from here).
pub const SSH_BATCH_OPTIONS: &[&str] = &["StrictHostKeyChecking=yes", "BatchMode=yes"];

/// How long the dry run's measurement of the source may take before the preview goes on
/// without it: `du` over the largest trees of a big server takes tens of seconds.
pub const PROBE_LIMIT_SECONDS: u64 = 60;

/// Gives up on a source that does not answer, well inside [`PROBE_LIMIT_SECONDS`].
const PROBE_CONNECT_TIMEOUT: &str = "ConnectTimeout=10";

/// The SSH files the user named on the command line, as paths on this machine. ssh reads the
/// key from its file itself, so the key never travels in argv.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeFiles {
    pub private_key: Option<PathBuf>,
    pub known_hosts: Option<PathBuf>,
    /// Optional, as for the Job: ssh then uses no config file at all.
    pub config: Option<PathBuf>,
}

/// The dry run's one `ssh … du` to the source: the program, its arguments and its limit. The
/// caller only spawns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceProbe {
    pub program: &'static str,
    pub args: Vec<OsString>,
    pub timeout_seconds: u64,
}

/// Why the source cannot be measured from here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeUnavailable {
    #[error(
        "sizes not measured: give --ssh-key-private and --ssh-knownhosts to measure the source from here"
    )]
    NoSshFiles,
}

/// The ssh command that measures, on the source, the trees the data-sync Job copies: the same
/// user, host key checking and config as the Job (no config file when none is given, so the
/// preview does not reach the source through the local user's `~/.ssh/config` when the Job
/// could not), and `sudo -n` for a user other than root, as the Job does. No connection
/// sharing: it is one session, and a master left behind would outlive the command on the
/// user's machine.
pub fn source_probe(
    params: &MigrateParams,
    files: &ProbeFiles,
) -> Result<SourceProbe, ProbeUnavailable> {
    let (Some(key), Some(known_hosts)) = (&files.private_key, &files.known_hosts) else {
        return Err(ProbeUnavailable::NoSshFiles);
    };
    let paths: Vec<String> = params
        .spec
        .volumes
        .iter()
        .filter(|v| v.role != VolumeRole::Migration)
        .map(|v| shell_quote(v.mount_path.trim_end_matches('/')))
        .collect();
    let sudo = if params.ssh_user == "root" {
        ""
    } else {
        "sudo -n "
    };
    // Missing paths are skipped by du with a message on stderr, which is discarded; `true`
    // keeps the figures of the paths that exist from being taken for a failure.
    let remote = format!("{sudo}du -s -b {} 2>/dev/null; true", paths.join(" "));
    let mut known_hosts_option = OsString::from("UserKnownHostsFile=");
    known_hosts_option.push(ssh_option_value(known_hosts));
    let mut args: Vec<OsString> = vec!["-i".into(), key.into(), "-o".into(), known_hosts_option];
    for option in SSH_BATCH_OPTIONS.iter().chain([&PROBE_CONNECT_TIMEOUT]) {
        args.push("-o".into());
        args.push((*option).into());
    }
    args.push("-F".into());
    args.push(
        files
            .config
            .as_ref()
            .map_or_else(|| OsString::from("/dev/null"), |c| c.into()),
    );
    args.push(format!("{}@{}", params.ssh_user, params.source_fqdn).into());
    args.push(remote.into());
    Ok(SourceProbe {
        program: "ssh",
        args,
        timeout_seconds: PROBE_LIMIT_SECONDS,
    })
}

/// A path as the value of an `-o` option: ssh splits option values at whitespace (known_hosts
/// takes a list of files), so a path with a blank goes in double quotes.
fn ssh_option_value(path: &std::path::Path) -> OsString {
    let has_blank = path.to_string_lossy().chars().any(char::is_whitespace);
    if has_blank {
        let mut quoted = OsString::from("\"");
        quoted.push(path);
        quoted.push("\"");
        quoted
    } else {
        path.into()
    }
}
