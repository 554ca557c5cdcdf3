//! The data-sync script: copies the source server's data into the volumes over SSH and hands
//! what it learned to the tool through the Secret `uyuni-migration-data`.

/// One volume to copy: the same path on the source and in the Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncVolume {
    pub name: String,
    pub path: String,
}

/// Everything the script is rendered from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataSyncScript {
    pub source_fqdn: String,
    pub ssh_user: String,
    /// Copy while the source keeps serving (no service stop).
    pub prepare: bool,
    pub volumes: Vec<SyncVolume>,
    /// Secret that receives the extracted data.
    pub data_secret: String,
    pub db_host: String,
    pub report_db_host: String,
}

/// Renders the script. (Placeholder until the full script lands.)
pub fn render(script: &DataSyncScript) -> String {
    let mut out = String::from("set -eu\n");
    for v in &script.volumes {
        out.push_str(&format!("echo 'Synchronizing {}'\n", v.path));
    }
    out
}
