//! Measures the source's data from this machine for the dry-run's data-plane preview: one
//! `ssh … du` with the SSH material the user gave on the command line. Best effort: when the
//! source cannot be reached from here, the preview says so and goes on.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::Command;
use uyuni_core::MigrateParams;
use uyuni_core::volumes::VolumeRole;

use crate::cli::MigrateCmd;

/// How long the measurement may take before the preview goes on without it.
const LIMIT: Duration = Duration::from_secs(60);

/// `du` figures per path, or why there are none.
pub async fn measure(
    cmd: &MigrateCmd,
    params: &MigrateParams,
) -> Result<BTreeMap<String, u64>, String> {
    let (Some(key), Some(known_hosts)) = (&cmd.ssh_key_private, &cmd.ssh_known_hosts) else {
        return Err("sizes not measured: give --ssh-key-private and --ssh-knownhosts to measure the source from here".into());
    };
    let paths: Vec<String> = params
        .volumes
        .iter()
        .filter(|v| v.role != VolumeRole::Migration)
        .map(|v| v.mount_path.trim_end_matches('/').to_owned())
        .collect();
    let mut remote = String::new();
    if params.ssh_user != "root" {
        remote.push_str("sudo -n ");
    }
    // Paths are from the volume catalogue (no shell metacharacters); missing ones are skipped
    // by du with a message on stderr, which is discarded.
    remote.push_str("du -s -b ");
    remote.push_str(&paths.join(" "));
    remote.push_str(" 2>/dev/null; true");
    let mut ssh = Command::new("ssh");
    ssh.arg("-i")
        .arg(key)
        .arg("-o")
        .arg(format!("UserKnownHostsFile={}", known_hosts.display()))
        .args([
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            "-o",
            "ConnectTimeout=10",
        ]);
    if let Some(config) = cmd.ssh_config.as_deref().filter(|p| Path::new(p).exists()) {
        ssh.arg("-F").arg(config);
    }
    ssh.arg(format!("{}@{}", params.ssh_user, params.source_fqdn))
        .arg(remote)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(LIMIT, ssh.output()).await {
        Err(_) => {
            return Err(format!(
                "sizes not measured: du on {} took longer than {}s",
                params.source_fqdn,
                LIMIT.as_secs()
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
