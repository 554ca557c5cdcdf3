//! Measures the source's data from this machine for the dry-run's data-plane preview: one
//! `ssh … du`, as core builds it from the validated parameters and the SSH files the user gave
//! on the command line. Best effort: when the source cannot be reached from here, the preview
//! says so and goes on.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;
use uyuni_core::MigrateParams;
use uyuni_core::probe::{ProbeFiles, source_probe};

use crate::cli::MigrateCmd;

/// `du` figures per path, or why there are none.
pub async fn measure(
    cmd: &MigrateCmd,
    params: &MigrateParams,
) -> Result<BTreeMap<String, u64>, String> {
    let files = ProbeFiles {
        private_key: cmd.migrate.ssh_key_private.clone(),
        known_hosts: cmd.migrate.ssh_known_hosts.clone(),
        config: cmd.migrate.ssh_config.clone(),
    };
    let probe = source_probe(params, &files).map_err(|e| e.to_string())?;
    let mut ssh = Command::new(probe.program);
    ssh.args(&probe.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let limit = Duration::from_secs(probe.timeout_seconds);
    let output = match tokio::time::timeout(limit, ssh.output()).await {
        Err(_) => {
            return Err(format!(
                "sizes not measured: du on {} took longer than {}s",
                params.source_fqdn, probe.timeout_seconds
            ));
        }
        Ok(Err(e)) => return Err(format!("sizes not measured: cannot run ssh here ({e})")),
        Ok(Ok(out)) => out,
    };
    let figures = uyuni_core::dataplane::parse_du(&String::from_utf8_lossy(&output.stdout));
    if figures.is_empty() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let reason = stderr
            .lines()
            .last()
            .unwrap_or("no output")
            .trim()
            .to_owned();
        return Err(format!(
            "sizes not measured: {} is not reachable from here with the given SSH material ({reason})",
            params.source_fqdn
        ));
    }
    Ok(figures)
}
