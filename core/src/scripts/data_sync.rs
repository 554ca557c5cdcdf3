//! The data-sync script: copies the source server's data into the volumes over SSH and hands
//! what it learned to the tool through the Secret `uyuni-migration-data`.
//!
//! It keeps steps 1–20 of the reference's migration script (`uyuni-k8s-behaviour.md` §3.5), which
//! encode product fixes, with the "R:" changes of that section, and replaces the old Kubernetes
//! block (step 21) and the `data` file (§3.6, §3.7) by one merge patch of the Secret.
//!
//! The script is the file `core/scripts/data-sync.sh` ([`SCRIPT`]); what varies between Jobs
//! reaches it as environment variables ([`DataSyncScript::env`]), so the text a Job runs is the
//! same for every migration, and ShellCheck checks the file itself. Values the script learns
//! at run time (distribution paths, snippet directories) are quoted by its `shq` function before
//! they reach the source's shell. Nothing is `eval`ed.

use super::{SECRET_SCRATCH_DIR, SSH_CONFIG_PATH, SSH_KNOWN_HOSTS_PATH, SSH_PRIVATE_KEY_PATH};

/// The script (`core/scripts/data-sync.sh`), run after [`super::LIB`].
pub const SCRIPT: &str = include_str!("../../scripts/data-sync.sh");

/// Where the pod finds its ServiceAccount token and the cluster CA (the standard mount).
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The script's working directory: the `migration-data` volume. Cleared at every start (D31).
/// Written in the script as well (`WORK_DIR=$LOCAL_ROOT...`); a test keeps the two equal.
pub const WORK_DIR: &str = "/var/lib/uyuni-tools";

/// One volume to copy: the same path on the source and in the Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncVolume {
    pub name: String,
    pub path: String,
    /// The PostgreSQL data directory: required on the source, and copied with checksums by the
    /// final run ([`compare_mode`]).
    pub database: bool,
    /// Sized for bulk data ([`crate::volumes::VolumeDef::holds_bulk_data`]; a volume the
    /// catalogue does not know counts as bulk): copied by an rsync of its own. The others are
    /// copied together, by one rsync for all of them: an rsync's start, its remote side, its
    /// file-list exchange and its exit cost tens of milliseconds whatever it moves, which for a
    /// directory of a few configuration files is the whole copy (issue 15's profile: 20 such
    /// volumes, one rsync each, held the database's copy back by half a second).
    pub bulk: bool,
}

impl SyncVolume {
    /// The volume of `def`, at its mount path.
    pub fn of(def: &crate::volumes::VolumeDef) -> SyncVolume {
        SyncVolume {
            name: def.name.to_owned(),
            path: def.mount_path.trim_end_matches('/').to_owned(),
            database: def.role == crate::volumes::VolumeRole::Database,
            bulk: def.holds_bulk_data(),
        }
    }
}

/// How rsync decides that a file it copied before is up to date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareMode {
    /// Size and modification time, to the second: rsync's default.
    Quick,
    /// The content's checksum, on both sides.
    Checksum,
}

impl CompareMode {
    /// The word the script takes (`SYNC_VOLUMES`).
    pub fn as_arg(self) -> &'static str {
        match self {
            CompareMode::Quick => "quick",
            CompareMode::Checksum => "checksum",
        }
    }
}

/// The final run copies the database directory with checksums: a `--prepare` copy taken while
/// PostgreSQL ran may hold a file that PostgreSQL rewrote within the same second at the same
/// size, which the quick check takes for unchanged. PostgreSQL's documentation of file system
/// level backups (backup-file.html: "rsync ... a second rsync ... with --checksum") asks for
/// exactly that second, stopped-server pass. Every other volume, and every prepare run (which
/// a final run always follows), keeps the quick check: their files are not rewritten in place
/// at the same size while being copied, and checksums cost a full read of both sides.
pub fn compare_mode(prepare: bool, volume: &SyncVolume) -> CompareMode {
    if volume.database && !prepare {
        CompareMode::Checksum
    } else {
        CompareMode::Quick
    }
}

/// The local paths the script uses. Production uses [`ScriptPaths::production`]; tests point
/// them into a temporary directory so the script can run outside a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptPaths {
    /// Prefix of every local path of the server's file system (volumes, working directory).
    /// Empty in production.
    pub local_root: String,
    pub ssh_private_key: String,
    /// May be missing (the ConfigMap's `config` key is optional): `/dev/null` is used then.
    pub ssh_config: String,
    pub ssh_known_hosts: String,
    /// In-memory emptyDir where secrets are staged; never a PVC.
    pub scratch_dir: String,
    /// Directory holding `token` and `ca.crt` of the ServiceAccount.
    pub service_account_dir: String,
}

impl ScriptPaths {
    pub fn production() -> Self {
        ScriptPaths {
            local_root: String::new(),
            ssh_private_key: SSH_PRIVATE_KEY_PATH.to_owned(),
            ssh_config: SSH_CONFIG_PATH.to_owned(),
            ssh_known_hosts: SSH_KNOWN_HOSTS_PATH.to_owned(),
            scratch_dir: SECRET_SCRATCH_DIR.to_owned(),
            service_account_dir: SERVICE_ACCOUNT_DIR.to_owned(),
        }
    }
}

impl Default for ScriptPaths {
    fn default() -> Self {
        Self::production()
    }
}

/// Everything the script is parameterised by; [`DataSyncScript::env`] hands it to the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataSyncScript {
    pub source_fqdn: String,
    pub ssh_user: String,
    /// Copy while the source keeps serving (no service stop).
    pub prepare: bool,
    /// rsync compresses on the wire (`-z`).
    pub compress: bool,
    pub volumes: Vec<SyncVolume>,
    /// Secret that receives the extracted data.
    pub data_secret: String,
    pub db_host: String,
    pub report_db_host: String,
    pub paths: ScriptPaths,
}

pub use crate::shell::quote as shell_quote;

/// Volumes whose source paths were symlinks in the cloud images: follow the links (reference
/// step 7). The reference's `/var/lib/pgsql` no longer matched the mount path; the database
/// volume is `/var/lib/pgsql/data` now.
const FOLLOW_LINKS: &[&str] = &["/var/cache", "/var/spacewalk", "/var/lib/pgsql/data"];

/// The text the Job runs with `bash -c`: the shared helpers, then the script. The same for every
/// migration: the parameters are in the environment ([`DataSyncScript::env`]).
pub fn text() -> String {
    super::job_text(SCRIPT)
}

impl DataSyncScript {
    /// The script's parameters, as the environment variables `data-sync.sh` documents. Values
    /// only: every secret reaches the Job as a mounted file.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let p = &self.paths;
        let mut env = vec![
            ("SOURCE_FQDN", self.source_fqdn.clone()),
            ("SSH_USER", self.ssh_user.clone()),
            (
                "SYNC_MODE",
                if self.prepare { "prepare" } else { "final" }.to_owned(),
            ),
            ("COMPRESS", self.compress.to_string()),
            ("COPY_PARALLEL", COPY_PARALLEL.to_string()),
            ("SYNC_VOLUMES", sync_volumes(&self.volumes)),
            ("DATA_SECRET", self.data_secret.clone()),
            ("DB_HOST", self.db_host.clone()),
            ("REPORT_DB_HOST", self.report_db_host.clone()),
            ("SSH_KEY_FILE", p.ssh_private_key.clone()),
            ("SSH_CONFIG_FILE", p.ssh_config.clone()),
            ("SSH_KNOWN_HOSTS_FILE", p.ssh_known_hosts.clone()),
            ("SCRATCH_DIR", p.scratch_dir.clone()),
            ("SA_DIR", p.service_account_dir.clone()),
        ];
        // Empty in a Job: left out rather than shown as an empty variable.
        if !p.local_root.is_empty() {
            env.push(("LOCAL_ROOT", p.local_root.clone()));
        }
        env
    }
}

/// How many copies the data-sync Job runs at once (the small volumes together count as one,
/// [`SyncVolume::bulk`]). A server's volumes range from a few files to the bulk of its data;
/// copying a few at a time lets the small ones finish beside the large ones, and keeps the
/// number of rsyncs (each a process on the source too) small.
pub const COPY_PARALLEL: u32 = 3;

/// `SYNC_VOLUMES`: one volume a line, in copy order, tab-separated: name, path, `-L` (follow
/// symlinks) or `-l`, `required` or `optional`, the [`compare_mode`] of a copy made while
/// the source serves and of one made once it is stopped, and `alone` (a [`SyncVolume::bulk`]
/// volume: an rsync of its own) or `batch` (copied with the other batch volumes by one rsync). Decided here, once; the script only
/// reads the records. Volume names are Kubernetes names and paths come from the catalogue:
/// neither holds a tab or a newline.
pub fn sync_volumes(volumes: &[SyncVolume]) -> String {
    volumes
        .iter()
        .map(|v| {
            let links = if FOLLOW_LINKS.contains(&v.path.as_str()) {
                "-L"
            } else {
                "-l"
            };
            let need = if v.database { "required" } else { "optional" };
            let copy = if v.bulk { "alone" } else { "batch" };
            format!(
                "{}\t{}\t{links}\t{need}\t{}\t{}\t{copy}",
                v.name,
                v.path,
                compare_mode(true, v).as_arg(),
                compare_mode(false, v).as_arg()
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
