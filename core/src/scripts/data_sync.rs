//! The data-sync script: copies the source server's data into the volumes over SSH and hands
//! what it learned to the tool through the Secret `uyuni-migration-data`.
//!
//! It keeps steps 1–20 of the reference's migration script (`uyuni-k8s-behaviour.md` §3.5), which
//! encode product fixes, with the "R:" changes of that section, and replaces the old Kubernetes
//! block (step 21) and the `data` file (§3.6, §3.7) by one merge patch of the Secret.
//!
//! Every value that comes from the parameters is shell-quoted with [`shell_quote`]; values the
//! script learns at run time (distribution paths, snippet directories) are quoted by the script's
//! own `shq` function before they reach the source's shell. Nothing is `eval`ed.

use super::{
    SECRET_SCRATCH_DIR, SSH_CONFIG_PATH, SSH_KNOWN_HOSTS_PATH, SSH_PRIVATE_KEY_PATH, data_keys,
};

/// Where the pod finds its ServiceAccount token and the cluster CA (the standard mount).
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The script's working directory: the `migration-data` volume. Cleared at every start (D31).
pub const WORK_DIR: &str = "/var/lib/uyuni-tools";

/// One volume to copy: the same path on the source and in the Job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncVolume {
    pub name: String,
    pub path: String,
    /// The PostgreSQL data directory: required on the source, and copied with checksums by the
    /// final run ([`compare_mode`]).
    pub database: bool,
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
    /// The word the script's `sync_volume` takes.
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

/// Everything the script is rendered from.
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

/// Quotes `s` as one argument inside rsync's `-e` command, which rsync splits itself: single
/// quotes, a doubled quote standing for itself (rsync does not honour backslashes there).
pub fn rsync_rsh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Volumes whose source paths were symlinks in the cloud images: follow the links (reference
/// step 7). The reference's `/var/lib/pgsql` no longer matched the mount path; the database
/// volume is `/var/lib/pgsql/data` now.
const FOLLOW_LINKS: &[&str] = &["/var/cache", "/var/spacewalk", "/var/lib/pgsql/data"];

/// Fixed rsync exclusions (reference step 5.3), with the reason for each.
const FIXED_EXCLUDES: &[(&str, &str)] = &[
    (
        "/var/cache/zypp/**",
        "zypper's cache is not worth migrating",
    ),
    (
        "/var/cache/rhn/reposync/**",
        "brings nothing and holds dangling symlinks (bsc#1231769)",
    ),
    ("/root/.mgr-sync", "so that it is regenerated (bsc#1228685)"),
    (
        "/etc/sysconfig/tomcat",
        "tomcat defaults: settings belong in /etc/tomcat/conf.d",
    ),
    ("/etc/tomcat/tomcat.conf", "tomcat defaults, as above"),
    (
        "/etc/krb5.conf.d",
        "copied into /etc/rhn/krb5.conf.d instead (step 13)",
    ),
    (
        "/etc/rhn/krb5.conf.d",
        "filled from the source's /etc/krb5.conf.d (step 13)",
    ),
    (
        "/etc/sysconfig/rhn/reportdb-schema-upgrade",
        "schema migration state of the old server",
    ),
    (
        "/etc/sysconfig/rhn/schema-upgrade",
        "schema migration state of the old server",
    ),
    ("/var/log/lastlog", "not needed, and can be huge"),
    ("/etc/systemd/**", "units are recreated by the image"),
    (
        "/etc/salt/master.d/py2*-compat-salt.conf",
        "cannot work in the container",
    ),
    (
        "/etc/apache2/vhosts.d/cobbler.conf",
        "left on some old systems (uyuni#10055)",
    ),
];

/// Where the source keeps custom CA certificates (reference step 15); either may be missing.
const CA_ANCHOR_DIRS: &[&str] = &["/usr/share/pki/trust/anchors", "/etc/pki/trust/anchors"];

/// Monitoring files and where today's image expects them (reference step 14).
const MONITORING_FILES: &[(&str, &str)] = &[
    (
        "/usr/lib/systemd/system/tomcat.service.d/jmx.conf",
        "/etc/sysconfig/tomcat/systemd/",
    ),
    (
        "/usr/lib/systemd/system/taskomatic.service.d/jmx.conf",
        "/etc/sysconfig/taskomatic/systemd/",
    ),
    (
        "/etc/postgres_exporter/postgres_exporter_queries.yaml",
        "/etc/sysconfig/prometheus-postgres_exporter/",
    ),
    (
        "/etc/systemd/system/prometheus-postgres_exporter.service.d/60-server.conf",
        "/etc/sysconfig/prometheus-postgres_exporter/systemd/",
    ),
    (
        "/etc/postgres_exporter/pg_passwd",
        "/etc/sysconfig/prometheus-postgres_exporter/",
    ),
];

/// ssh options that make every session of a run share one connection: the first session opens
/// a master (`ControlMaster=auto`) that outlives it (`ControlPersist`, seconds idle) for the
/// next ones; `ControlPath` ([`ssh_control_path`]) names its socket. Without the master (it
/// failed or timed out) a session connects on its own, as before.
/// https://man.openbsd.org/ssh_config#ControlMaster
pub const SSH_MULTIPLEX_OPTIONS: &[&str] = &["ControlMaster=auto", "ControlPersist=600"];

/// The master connection's socket: in the Job's scratch dir (an emptyDir of the pod only). A
/// Job talks to one source, so a fixed name serves, and the script can tell whether a master
/// was opened.
pub fn ssh_control_path(scratch_dir: &str) -> String {
    format!("{}/ssh-master", scratch_dir.trim_end_matches('/'))
}

/// The reference's distribution query (step 3): one row per distinct tree path, named after the
/// lowest `org_id-label` using it.
const DISTROS_SQL: &str = "COPY (SELECT MIN(CONCAT(org_id, '-', label)) AS target, base_path \
     FROM rhnKickstartableTree GROUP BY base_path) TO STDOUT WITH CSV;";

/// The script's helper functions. Static text: every rendered value is assigned to a variable
/// before this is included.
const HELPERS: &str = r##"
fail() {
  echo "ERROR: $*" >&2
  exit 1
}

# Quotes a value the script learned at run time for the source's shell (single quotes).
shq() {
  printf "'%s'" "${1//\'/\'\\\'\'}"
}

# Runs a command line on the source, as root (through `sudo -n` for another user). Stdin is
# passed through. An SSH failure (255) ends the script even where the caller tests the result,
# so "cannot connect" never reads as "file missing".
ssh_source() {
  local rc=0
  "${SSH[@]}" "$SOURCE" "$SUDO$1" || rc=$?
  if [ "$rc" -eq 255 ]; then
    echo "ERROR: ssh to $SOURCE_FQDN failed" >&2
    exit 255
  fi
  return "$rc"
}

# The same without stdin, so that loops reading files keep their input.
on_source() {
  ssh_source "$1" </dev/null
}

# Directories and files the server reads as non-root users get the usual modes, not the
# script's umask 077.
mkdir_pub() {
  (umask 022 && mkdir -p -- "$@")
}

rsync_run() {
  local rc=0
  "${RSYNC[@]}" "$@" || rc=$?
  if [ "$rc" -eq 24 ] && [ "$VANISHED_OK" = 1 ]; then
    echo "Warning: some files vanished on the source during the copy (the source is serving)"
  elif [ "$rc" -ne 0 ]; then
    echo "ERROR: rsync failed with exit code $rc" >&2
    exit "$rc"
  fi
}

# What each volume's path is on the source, asked in one remote command for all of them before
# a pass: one session instead of two per volume, which counts inside the outage. Fills
# SOURCE_KIND[path] with stat's file type ("directory", "regular file", ...); a path that does
# not exist gets no entry (stat lists the others and fails; that failure is expected).
declare -A SOURCE_KIND=()
probe_volumes() {
  local args=() line listing p
  for p in "$@"; do
    args+=("$(shq "$p")")
  done
  SOURCE_KIND=()
  listing=$(on_source "stat -L -c '%n:%F' -- ${args[*]} 2>/dev/null") || true
  while IFS= read -r line; do
    if [ -n "$line" ]; then
      SOURCE_KIND[${line%%:*}]=${line#*:}
    fi
  done <<<"$listing"
}

# Copies the source's directory $2 into the same local path (volume $1, reference step 7).
# $3 is -L (follow symlinks) or -l (keep them); $4 is how rsync tells a file it copied before
# is unchanged: quick (size and modification time) or checksum (the content); $5 is required
# or optional. A missing optional directory is skipped before rsync sees it: rsync's
# --ignore-missing-args does not cover a source given as DIR/ (it fails with "change_dir ...
# failed", code 23). Each volume's mode is recorded for the summary at the end. What the path
# is comes from the last probe_volumes.
sync_volume() {
  local name=$1 path=$2 links=$3 mode=$4 need=$5 compare=() label
  local kind=${SOURCE_KIND[$path]-}
  if [ "$kind" != directory ]; then
    if [ -n "$kind" ]; then
      fail "$path on $SOURCE_FQDN is not a directory: it cannot be copied into volume $name"
    fi
    if [ "$need" = required ]; then
      fail "$path does not exist on $SOURCE_FQDN: volume $name cannot be filled without it"
    fi
    echo "Not on the source, skipping $path"
    COPY_MODES+=("$name: skipped (not on the source)")
    return 0
  fi
  case $mode in
    checksum)
      compare=(--checksum)
      label='checksum'
      ;;
    *) label='quick (size+mtime)' ;;
  esac
  echo "Synchronizing $path ($name: $label)"
  mkdir_pub "$LOCAL_ROOT$path"
  rsync_run "$links" "${compare[@]}" --delete --info=progress2 -f "merge $WORK_DIR/exclude_list" \
    "$SOURCE:$path/" "$LOCAL_ROOT$path/"
  COPY_MODES+=("$name: $label")
}

# Copies the source file $1, if it exists, into the local directory $2.
copy_if_present() {
  if on_source "test -e $(shq "$1")"; then
    mkdir_pub "$LOCAL_ROOT$2"
    rsync_run -l "$SOURCE:$1" "$LOCAL_ROOT$2"
  fi
}

trim_var() {
  local -n ref=$1
  ref=${ref#"${ref%%[![:space:]]*}"}
  ref=${ref%"${ref##*[![:space:]]}"}
}

# Prints the value of key $1 in the rhn.conf-style file $2, or fails when the key is absent.
# As the rhn.conf parser does, only the whitespace around "=" and at the line ends is trimmed:
# spaces, "#", quotes and "$" inside the value are kept (D30). The last occurrence wins.
conf_get() {
  local key=$1 file=$2 line k v value='' found=1
  [ -f "$file" ] || return 1
  while IFS= read -r line || [ -n "$line" ]; do
    [[ $line == *=* ]] || continue
    k=${line%%=*}
    trim_var k
    [ "$k" = "$key" ] || continue
    v=${line#*=}
    trim_var v
    value=$v
    found=0
  done <"$file"
  if [ "$found" -eq 0 ]; then
    printf '%s' "$value"
  fi
  return "$found"
}

# Sets key $1 to $2 in the rhn.conf-style file $3: every line of that key is replaced, and with
# $4 = append the line is added when there is none, so a second run changes nothing (D50).
# Rewritten in place, which keeps the owner and mode of the file (rhn.conf is root:www 0640).
conf_set() {
  local key=$1 value=$2 file=$3 mode=$4 line k found=0 tmp
  tmp=$(mktemp "$SCRATCH/conf.XXXXXX")
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ $line == *=* ]]; then
      k=${line%%=*}
      trim_var k
      if [ "$k" = "$key" ]; then
        printf '%s = %s\n' "$key" "$value"
        found=1
        continue
      fi
    fi
    printf '%s\n' "$line"
  done <"$file" >"$tmp"
  if [ "$found" -eq 0 ] && [ "$mode" = append ]; then
    printf '%s = %s\n' "$key" "$value" >>"$tmp"
  fi
  cat "$tmp" >"$file"
  rm -f -- "$tmp"
}

# Replaces every literal occurrence of $2 by $3 in file $1 (no regular expression: the paths
# come from the database).
replace_literal() {
  local content
  content=$(
    cat -- "$1"
    printf x
  )
  content=${content%x}
  printf '%s' "${content//"$2"/"$3"}" >"$1"
}

fingerprint() {
  openssl x509 -in "$1" -noout -fingerprint -sha256 2>/dev/null
}

b64() {
  printf '%s' "$1" | base64 -w0
}

# Merge-patches the Secret with the JSON in file $1 through the API server, as the pod's
# ServiceAccount (allowed get and patch on this one Secret). Output goes to /dev/null: the
# answer would echo the Secret's data.
patch_secret() {
  local host=$KUBERNETES_SERVICE_HOST
  case $host in *:*) host="[$host]" ;; esac
  curl -sS --fail --cacert "$SA_DIR/ca.crt" \
    -H "Authorization: Bearer $(cat "$SA_DIR/token")" \
    -H 'Content-Type: application/merge-patch+json' \
    -X PATCH --data-binary "@$1" -o /dev/null \
    "https://$host:$KUBERNETES_SERVICE_PORT/api/v1/namespaces/$NAMESPACE/secrets/$DATA_SECRET" ||
    fail "could not update Secret $DATA_SECRET"
}

# Ends the shared SSH connection, if one was opened: its socket is in the scratch dir.
close_ssh() {
  if [ -e "$SSH_SOCKET" ]; then
    "${SSH[@]}" -O exit "$SOURCE" >/dev/null 2>&1 || true
  fi
}

# The shared connection goes first: its socket is one of the scratch dir's files.
cleanup_scratch() {
  close_ssh
  find "$SCRATCH" -mindepth 1 -delete 2>/dev/null || true
}

# Also on failure: the synced CA key must not stay on the root volume (D31), and the staged
# secrets go with the scratch dir.
on_exit() {
  rm -rf -- "$SSL_BUILD" 2>/dev/null || true
  cleanup_scratch
}
"##;

/// Accumulates the script text.
struct Out(String);

impl Out {
    fn line(&mut self, s: &str) {
        self.0.push_str(s);
        self.0.push('\n');
    }
    fn text(&mut self, s: &str) {
        self.0.push_str(s);
    }
}

/// Renders the script, for `bash -c`.
pub fn render(script: &DataSyncScript) -> String {
    let q = shell_quote;
    let p = &script.paths;
    let root = p.local_root.trim_end_matches('/');
    // A local path, prefixed and quoted.
    let local = |path: &str| q(&format!("{root}{path}"));
    let as_root = script.ssh_user == "root";
    let mut o = Out(String::new());

    o.line(&format!(
        "# kubectl-uyuni data-sync of {} ({} mode), rendered for bash.",
        script.source_fqdn.replace('\n', " "),
        if script.prepare { "prepare" } else { "final" }
    ));
    // No `set -x`, ever: values of the Secret pass through variables.
    o.line("set -euo pipefail");
    o.line("shopt -s inherit_errexit");
    o.line("# Secrets are staged in files: only root may read what the script creates.");
    o.line("umask 077");
    o.line("");
    o.line(&format!("SOURCE_FQDN={}", q(&script.source_fqdn)));
    o.line(&format!(
        "SOURCE={}",
        q(&format!("{}@{}", script.ssh_user, script.source_fqdn))
    ));
    if !as_root {
        o.line(&format!("SSH_USER={}", q(&script.ssh_user)));
    }
    o.line(&format!("LOCAL_ROOT={}", q(root)));
    o.line(&format!("WORK_DIR={}", local(WORK_DIR)));
    o.line(&format!("SCRATCH={}", q(&p.scratch_dir)));
    o.line(&format!(
        "SSH_SOCKET={}",
        q(&ssh_control_path(&p.scratch_dir))
    ));
    o.line(&format!("SA_DIR={}", q(&p.service_account_dir)));
    o.line(&format!("DATA_SECRET={}", q(&script.data_secret)));
    o.line(&format!("SSL_BUILD={}", local("/root/ssl-build")));
    o.line(&format!(
        "VANISHED_OK={}",
        if script.prepare { "1" } else { "0" }
    ));
    // Not root: every source command goes through sudo, which must not ask for a password.
    o.line(&format!(
        "SUDO={}",
        q(if as_root { "" } else { "sudo -n " })
    ));

    // SSH without agent (R of §3.4): key, config and known_hosts mounted outside every synced
    // path (D33), host key checked strictly, never a prompt.
    // One connection for the whole run (issue: cutover downtime): every ssh, rsync's included,
    // goes through a master connection whose socket is in the scratch dir; the first use opens
    // it, `close_ssh` ends it on exit. A session costs a round trip instead of a handshake.
    let control_path = format!("ControlPath={}", ssh_control_path(&p.scratch_dir));
    let rsh = |config: &str| {
        format!(
            "ssh -i {} -F {} -o {} -o StrictHostKeyChecking=yes -o BatchMode=yes {}",
            rsync_rsh_quote(&p.ssh_private_key),
            rsync_rsh_quote(config),
            rsync_rsh_quote(&format!("UserKnownHostsFile={}", p.ssh_known_hosts)),
            SSH_MULTIPLEX_OPTIONS
                .iter()
                .map(|o| format!("-o {o}"))
                .chain([format!("-o {}", rsync_rsh_quote(&control_path))])
                .collect::<Vec<_>>()
                .join(" "),
        )
    };
    o.line("# The ConfigMap's `config` key is optional (R of §3.2).");
    o.line(&format!("if [ -f {} ]; then", q(&p.ssh_config)));
    o.line(&format!("  SSH_CONFIG={}", q(&p.ssh_config)));
    o.line(&format!("  RSYNC_RSH={}", q(&rsh(&p.ssh_config))));
    o.line("else");
    o.line("  SSH_CONFIG=/dev/null");
    o.line(&format!("  RSYNC_RSH={}", q(&rsh("/dev/null"))));
    o.line("fi");
    o.line(&format!(
        "SSH=(ssh -i {} -F \"$SSH_CONFIG\" -o {} -o StrictHostKeyChecking=yes -o BatchMode=yes {} -o {})",
        q(&p.ssh_private_key),
        q(&format!("UserKnownHostsFile={}", p.ssh_known_hosts)),
        SSH_MULTIPLEX_OPTIONS
            .iter()
            .map(|o| format!("-o {o}"))
            .collect::<Vec<_>>()
            .join(" "),
        q(&control_path),
    ));
    // No compression unless asked: on a LAN, -z makes rsync CPU-bound (issue 15 measured a
    // 300 MB database at 0.7 s with plain `rsync -a`).
    o.line(&format!(
        "RSYNC=(rsync -a{} --trust-sender -e \"$RSYNC_RSH\")",
        if script.compress { " -z" } else { "" }
    ));
    if !as_root {
        o.line("RSYNC+=(--rsync-path='sudo -n rsync')");
    }
    o.text(HELPERS);

    o.line("");
    o.line(": \"${NAMESPACE:?NAMESPACE is not set}\"");
    o.line(": \"${JOB_NAME:?JOB_NAME is not set}\"");
    o.line(": \"${KUBERNETES_SERVICE_HOST:?KUBERNETES_SERVICE_HOST is not set}\"");
    o.line(": \"${KUBERNETES_SERVICE_PORT:?KUBERNETES_SERVICE_PORT is not set}\"");
    o.line("");
    o.line("# Start from nothing (D31): stale files of an earlier run must never be taken for");
    o.line("# this run's, and the Secret loses its data until this run writes it at the end.");
    o.line("mkdir -p -- \"$WORK_DIR\" \"$SCRATCH\"");
    o.line("find \"$WORK_DIR\" -mindepth 1 -delete");
    o.line("cleanup_scratch");
    o.line("trap on_exit EXIT");
    o.line("cd \"$WORK_DIR\"");
    o.line("printf '%s\\n' '{\"data\":null}' >\"$SCRATCH/clear.json\"");
    o.line("patch_secret \"$SCRATCH/clear.json\"");
    o.line("");

    o.line("echo \"Connecting to $SOURCE_FQDN...\"");
    o.line("if ! on_source true; then");
    if as_root {
        o.line("  fail \"cannot run commands on $SOURCE_FQDN\"");
    } else {
        o.line("  fail \"user $SSH_USER cannot run commands as root on $SOURCE_FQDN: it needs passwordless sudo\"");
    }
    o.line("fi");
    o.line("");
    o.line("# Step 1: the source must be a classic (RPM-installed) server.");
    o.line(
        "if ! on_source 'test -e /etc/susemanager-release' && ! on_source 'test -e /etc/uyuni-release'; then",
    );
    o.line(
        "  fail \"neither /etc/susemanager-release nor /etc/uyuni-release exists on $SOURCE_FQDN: is it a non-containerized Uyuni or SUSE Manager server?\"",
    );
    o.line("fi");
    o.line("# What the migration cannot go on without, looked for before any service stops: the");
    o.line("# database directory and rhn.conf. Every other directory is optional.");
    for v in script.volumes.iter().filter(|v| v.database) {
        o.line(&format!(
            "on_source {} ||",
            q(&format!("test -d {}", q(&v.path)))
        ));
        o.line(&format!(
            "  fail {}",
            q(&format!(
                "the database directory {} does not exist on {}: is PostgreSQL of this server elsewhere? The migration copies a local database only",
                v.path, script.source_fqdn
            ))
        ));
    }
    o.line("on_source 'test -f /etc/rhn/rhn.conf' ||");
    o.line("  fail \"/etc/rhn/rhn.conf does not exist on $SOURCE_FQDN: is it an Uyuni or SUSE Manager server?\"");
    o.line("");
    o.line("# Asked before any service is stopped, and about the unit itself: the reference's");
    o.line("# quoting made it list all units instead (§3.6, D30).");
    o.line("has_hubxmlrpc=false");
    o.line("if on_source 'systemctl is-active --quiet hub-xmlrpc-api.service 2>/dev/null' ||");
    o.line("  on_source 'systemctl is-enabled --quiet hub-xmlrpc-api.service 2>/dev/null'; then");
    o.line("  has_hubxmlrpc=true");
    o.line("fi");
    o.line(
        "# TFTP is a container of its own with today's images (server-image 5.2.5): whether the",
    );
    o.line("# source served it is only recorded, for the tool to deploy that container; the");
    o.line("# reference enabled tftp.socket in the server instead (step 8).");
    o.line("tftp=false");
    o.line("if on_source 'systemctl is-enabled --quiet tftp.socket 2>/dev/null' ||");
    o.line("  on_source 'systemctl is-active --quiet tftp.socket 2>/dev/null'; then");
    o.line("  tftp=true");
    o.line("fi");
    o.line("");

    o.line("# Step 2: the source keeps serving until everything that can be done before its");
    o.line("# stop is done (issue 15): the distribution query, the rsync filter and, in the final");
    o.line("# run, a catch-up copy of every volume.");
    if script.prepare {
        o.line("echo \"Preparing the migration: $SOURCE_FQDN keeps serving\"");
    }
    o.line("on_source 'systemctl start postgresql.service'");
    o.line("");
    o.line("# Step 3: the auto-installable distributions.");
    o.line(&format!(
        "printf '%s\\n' {} | ssh_source 'spacewalk-sql --select-mode -' >\"$WORK_DIR/distros\"",
        q(DISTROS_SQL)
    ));
    o.line("");

    o.line("# Step 5: the rsync filter.");
    o.line("{");
    o.line("  # 5.1: distribution trees are copied by step 10; protect what a prepare run copied.");
    o.line("  while IFS=, read -r target path; do");
    o.line("    case $path in /*) ;; *) continue ;; esac");
    o.line("    if on_source \"test -e $(shq \"$path\")\"; then");
    o.line("      printf -- '-/ %s\\n' \"$path\"");
    o.line("      printf 'P/ /srv/www/distributions/%s\\n' \"$target\"");
    o.line("    fi");
    o.line("  done <\"$WORK_DIR/distros\"");
    o.line(
        "  # 5.2: files under /etc owned by the image's RPMs and not noreplace keep the image's",
    );
    o.line("  # version (config(noreplace) is 1<<4 in lib/rpmlib.h).");
    o.line("  rpm -qa --qf '[%{fileflags},%{filenames}\\n]' | while IFS=, read -r flags path; do");
    o.line("    case $path in /etc/*) ;; *) continue ;; esac");
    o.line("    # Checked as a number before the arithmetic, which would evaluate anything else.");
    o.line("    case $flags in '' | *[!0-9]*) continue ;; esac");
    o.line("    if [ $((flags & 16)) -eq 0 ] && [ -f \"$LOCAL_ROOT$path\" ]; then");
    o.line("      printf -- '-/ %s\\n' \"$path\"");
    o.line("    fi");
    o.line("  done");
    o.line("  # 5.3: fixed exclusions.");
    for (pattern, why) in FIXED_EXCLUDES {
        o.line(&format!("  # {why}"));
        o.line(&format!("  printf '%s\\n' {}", q(&format!("-/ {pattern}"))));
    }
    o.line("} >\"$WORK_DIR/exclude_list\"");
    o.line("");

    let copy_volumes = |o: &mut Out, prepare: bool| {
        o.line(&format!(
            "probe_volumes {}",
            script
                .volumes
                .iter()
                .map(|v| q(&v.path))
                .collect::<Vec<_>>()
                .join(" ")
        ));
        for v in &script.volumes {
            let links = if FOLLOW_LINKS.contains(&v.path.as_str()) {
                "-L"
            } else {
                "-l"
            };
            let need = if v.database { "required" } else { "optional" };
            o.line(&format!(
                "sync_volume {} {} {links} {} {need}",
                q(&v.name),
                q(&v.path),
                compare_mode(prepare, v).as_arg()
            ));
        }
    };
    if !script.prepare {
        o.line(
            "# The catch-up copy: what changed since the last copy moves while the source still",
        );
        o.line("# serves, so that the copy after the stop moves only the last moments' changes.");
        o.line("echo \"Catching up while $SOURCE_FQDN keeps serving...\"");
        o.line("VANISHED_OK=1");
        o.line("COPY_MODES=()");
        copy_volumes(&mut o, true);
        o.line("VANISHED_OK=0");
        o.line("");
        o.line("# When the outage began and when the services were down, as the Job's clock says;");
        o.line("# the tool reports the outage from them (core::outage).");
        o.line("outage_started_at=$(date +%s)");
        o.line("echo \"Stopping the services of $SOURCE_FQDN...\"");
        o.line("on_source 'spacewalk-service stop'");
        o.line("# Step 4: the database is copied with PostgreSQL stopped.");
        o.line("on_source 'systemctl stop postgresql.service'");
        o.line("services_stopped_at=$(date +%s)");
        o.line("");
    }
    o.line("# Step 6 of the reference (a -nolink CA copy written on the source) is gone: nothing");
    o.line("# is written on the source (D50); step 16 reads the CA with cat instead.");
    o.line("");
    o.line("# Step 7: every volume, the database included.");
    o.line("COPY_MODES=()");
    copy_volumes(&mut o, script.prepare);
    o.line("");

    o.line("# Step 8: enable the services in the (volume-backed) systemd wants directories.");
    o.line("spacewalk-service enable");
    o.line("# Not tftp.socket: TFTP runs in its own container. A link an earlier version of this");
    o.line("# script made would start a second, unreachable TFTP server in the server container.");
    o.line(&format!(
        "rm -f -- {}",
        local("/etc/systemd/system/sockets.target.wants/tftp.socket")
    ));
    o.line("");
    o.line("# Step 9: paths that moved into the image.");
    o.line(&format!(
        "if [ -f {} ]; then",
        local("/etc/tomcat/server.xml")
    ));
    o.line(&format!(
        "  sed -i -e 's|appBase=\"webapps\"|appBase=\"/usr/share/susemanager/www/tomcat/webapps\"|' {}",
        local("/etc/tomcat/server.xml")
    ));
    o.line("fi");
    o.line(&format!(
        "if [ -f {} ]; then",
        local("/etc/apache2/vhosts.d/vhost-ssl.conf")
    ));
    o.line(&format!(
        "  sed -i -e 's|DocumentRoot\\s*\"/srv/www/htdocs\"|DocumentRoot \"/usr/share/susemanager/www/htdocs\"|' {}",
        local("/etc/apache2/vhosts.d/vhost-ssl.conf")
    ));
    o.line("fi");
    o.line("");

    o.line("# Step 10: distribution trees move to /srv/www/distributions/<org-label>.");
    o.line("echo 'Migrating auto-installable distributions...'");
    o.line("while IFS=, read -r target path; do");
    o.line("  case $path in /*) ;; *) continue ;; esac");
    o.line("  # The target becomes a directory name: no path separators, no dot names.");
    o.line("  case $target in '' | */* | . | ..) echo \"Skipping distribution $path: unusable name\"; continue ;; esac");
    o.line("  if on_source \"test -e $(shq \"$path\")\"; then");
    o.line("    echo \"Copying distribution $target from $path\"");
    o.line(&format!(
        "    mkdir_pub {}\"/$target\"",
        local("/srv/www/distributions")
    ));
    o.line(&format!(
        "    rsync_run -l --delete --info=progress2 \"$SOURCE:$path/\" {}\"/$target/\"",
        local("/srv/www/distributions")
    ));
    o.line("    while IFS= read -r -d '' config; do");
    o.line("      replace_literal \"$config\" \"$path/\" \"/srv/www/distributions/$target/\"");
    o.line(&format!(
        "    done < <(grep -rlZF -- \"$path/\" {} 2>/dev/null || true)",
        local("/var/lib/cobbler/collections/distros/")
    ));
    o.line("  else");
    o.line("    echo \"Skipping missing distribution $path\"");
    o.line("  fi");
    o.line("done <\"$WORK_DIR/distros\"");
    o.line("");

    o.line("# Step 11: auto-installation snippets.");
    o.line("echo 'Migrating auto-installation snippets...'");
    o.line("if on_source 'test -d /var/lib/cobbler/snippets/spacewalk'; then");
    o.line(
        "  on_source 'find /var/lib/cobbler/snippets/spacewalk -mindepth 1 -maxdepth 1 -type d' >\"$WORK_DIR/snippets_dirs\"",
    );
    o.line("  while IFS= read -r dir; do");
    o.line("    case $dir in /var/lib/cobbler/snippets/spacewalk/*) ;; *) continue ;; esac");
    o.line("    echo \"Copying auto-installation snippets from $dir\"");
    o.line("    mkdir_pub \"$LOCAL_ROOT$dir\"");
    o.line("    # Trailing slashes: the content into the directory, not the directory into itself (D50).");
    o.line("    rsync_run -l --delete \"$SOURCE:$dir/\" \"$LOCAL_ROOT$dir/\"");
    o.line("  done <\"$WORK_DIR/snippets_dirs\"");
    o.line("fi");
    o.line("");

    o.line("# Step 12: tomcat configuration.");
    o.line("if on_source 'test -d /etc/tomcat/conf.d'; then");
    o.line("  echo 'Copying the tomcat configuration...'");
    o.line(&format!("  mkdir_pub {}", local("/etc/tomcat/conf.d")));
    o.line(&format!(
        "  rsync_run -l --delete \"$SOURCE:/etc/tomcat/conf.d/\" {}",
        local("/etc/tomcat/conf.d/")
    ));
    o.line("fi");
    o.line("");
    o.line("# Step 13: Kerberos configuration, kept on the etc-rhn volume.");
    o.line("if on_source 'test -d /etc/krb5.conf.d'; then");
    o.line("  echo 'Copying the Kerberos configuration...'");
    o.line(&format!("  mkdir_pub {}", local("/etc/rhn/krb5.conf.d")));
    o.line(&format!(
        "  rsync_run -l --delete \"$SOURCE:/etc/krb5.conf.d/\" {}",
        local("/etc/rhn/krb5.conf.d/")
    ));
    o.line("fi");
    o.line("");

    o.line("# Step 14: monitoring configuration.");
    o.line("echo 'Migrating the monitoring configuration...'");
    o.line(&format!(
        "if [ -f {} ]; then",
        local("/etc/sysconfig/prometheus-postgres_exporter")
    ));
    o.line("  echo 'The monitoring configuration of the source is too old: apply it again after the migration'");
    o.line(&format!(
        "  rm -f -- {}",
        local("/etc/sysconfig/prometheus-postgres_exporter")
    ));
    o.line("fi");
    for (file, dir) in MONITORING_FILES {
        o.line(&format!("copy_if_present {} {}", q(file), q(dir)));
    }
    let exporter_link =
        "/etc/systemd/system/multi-user.target.wants/prometheus-postgres_exporter.service";
    o.line(&format!(
        "mkdir_pub {}",
        local("/etc/systemd/system/multi-user.target.wants")
    ));
    o.line(&format!("rm -f -- {}", local(exporter_link)));
    o.line(
        "if on_source 'systemctl is-enabled --quiet prometheus-postgres_exporter.service 2>/dev/null'; then",
    );
    o.line("  echo 'Enabling the prometheus-postgres_exporter service...'");
    o.line(&format!(
        "  ln -s /usr/lib/systemd/system/prometheus-postgres_exporter.service {}",
        local(exporter_link)
    ));
    o.line("fi");
    o.line("");

    o.line("# Step 15: custom CAs go to /etc/rhn/ca on the etc-rhn volume, where today's image");
    o.line("# loads them from; the anchors are not a volume any more and nothing is wiped (D17).");
    o.line("# The exclusions are base names, so they match (the reference's absolute pattern did");
    o.line("# not, D50); -L copies the certificates that anchors link to.");
    o.line("echo 'Migrating custom CA certificates...'");
    o.line(
        "# Each directory is looked for first: --ignore-missing-args does not cover DIR/ (D50).",
    );
    o.line(&format!("mkdir_pub {}", local("/etc/rhn/ca")));
    o.line("ca_dirs=()");
    o.line(&format!(
        "for dir in {}; do",
        CA_ANCHOR_DIRS
            .iter()
            .map(|d| q(d))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    o.line("  if on_source \"test -d $(shq \"$dir\")\"; then");
    o.line("    ca_dirs+=(\"$SOURCE:$dir/\")");
    o.line("  else");
    o.line("    echo \"Not on the source, skipping $dir\"");
    o.line("  fi");
    o.line("done");
    o.line("if [ \"${#ca_dirs[@]}\" -gt 0 ]; then");
    o.line("  rsync_run -L \\");
    o.line("    --exclude=LOCAL-RHN-ORG-TRUSTED-SSL-CERT --exclude=RHN-ORG-TRUSTED-SSL-CERT \\");
    o.line(&format!(
        "    \"${{ca_dirs[@]}}\" {}",
        local("/etc/rhn/ca/")
    ));
    o.line("fi");
    o.line("");

    o.line("# Step 16: the deployed CA, read dereferenced with cat: nothing is written on the");
    o.line("# source (D50). It is public, but staged in the scratch dir with the rest.");
    o.line("ca_file=\"$SCRATCH/ca.crt\"");
    o.line("if ! on_source 'test -f /etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT'; then");
    o.line(
        "  fail \"no CA certificate /etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT on $SOURCE_FQDN\"",
    );
    o.line("fi");
    o.line("on_source 'cat /etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT' >\"$ca_file\"");
    o.line(&format!("mkdir_pub {}", local("/srv/www/htdocs/pub")));
    o.line(&format!(
        "rm -f -- {}",
        local("/srv/www/htdocs/pub/RHN-ORG-TRUSTED-SSL-CERT")
    ));
    o.line(&format!(
        "ln -s /etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT {}",
        local("/srv/www/htdocs/pub/RHN-ORG-TRUSTED-SSL-CERT")
    ));
    o.line("");

    o.line(&format!("RHN_CONF={}", local("/etc/rhn/rhn.conf")));
    o.line("[ -f \"$RHN_CONF\" ] || fail \"no /etc/rhn/rhn.conf was copied from $SOURCE_FQDN\"");
    o.line("");
    o.line("# Step 18: domain resolution. The hosts are never empty on Kubernetes (D15).");
    o.line("echo 'Altering the configuration for domain resolution...'");
    o.line(&format!(
        "conf_set db_host {} \"$RHN_CONF\" append",
        q(&script.db_host)
    ));
    o.line(&format!(
        "conf_set report_db_host {} \"$RHN_CONF\" append",
        q(&script.report_db_host)
    ));
    o.line(
        "# In-cluster DB connections run without SSL with today's images (images-today A.7, D.3).",
    );
    o.line("conf_set db_ssl_enabled 0 \"$RHN_CONF\" append");
    o.line("conf_set report_db_ssl_enabled 0 \"$RHN_CONF\" append");
    o.line("# TLS ends at the ingress (reference step 21.1, made idempotent).");
    o.line("conf_set server.no_ssl 1 \"$RHN_CONF\" append");
    o.line("# The reference renamed server.jabber_server to java.hostname when the latter is");
    o.line("# missing; adding java.hostname with the same value is equivalent and idempotent.");
    o.line("if ! conf_get java.hostname \"$RHN_CONF\" >/dev/null &&");
    o.line("  jabber_server=$(conf_get server.jabber_server \"$RHN_CONF\"); then");
    o.line("  conf_set java.hostname \"$jabber_server\" \"$RHN_CONF\" append");
    o.line("fi");
    let cobbler_settings = local("/etc/cobbler/settings.d/zz-uyuni.settings");
    o.line("# Appended once, not on every run (D50).");
    o.line(&format!("mkdir_pub {}", local("/etc/cobbler/settings.d")));
    o.line(&format!(
        "if ! grep -qx 'client_use_localhost: true' {cobbler_settings} 2>/dev/null; then"
    ));
    o.line(&format!(
        "  if [ -f {cobbler_settings} ]; then sed -i -e '/^client_use_localhost:/d' {cobbler_settings}; fi"
    ));
    o.line(&format!(
        "  (umask 022 && echo 'client_use_localhost: true' >>{cobbler_settings})"
    ));
    o.line("fi");
    o.line("");
    o.line("# Step 19: container changes (JDWP on all interfaces, obsolete JVM options).");
    o.line("echo 'Altering the configuration for the container environment...'");
    o.line(&format!(
        "if [ -f {} ]; then",
        local("/etc/rhn/taskomatic.conf")
    ));
    o.line(&format!(
        "  sed -i -e 's/address=[^:]*:/address=*:/' {}",
        local("/etc/rhn/taskomatic.conf")
    ));
    o.line("fi");
    o.line(&format!(
        "for conf in {}/*; do",
        local("/etc/tomcat/conf.d")
    ));
    o.line("  [ -f \"$conf\" ] || continue");
    o.line("  sed -i -e 's/--add-modules java.annotation,com.sun.xml.bind://' -e 's/-XX:-UseConcMarkSweepGC//' \"$conf\"");
    o.line("done");
    o.line(&format!(
        "if [ -f {} ]; then",
        local("/etc/tomcat/conf.d/remote_debug.conf")
    ));
    o.line(&format!(
        "  sed -i -e 's/address=[^:]*:/address=*:/' {}",
        local("/etc/tomcat/conf.d/remote_debug.conf")
    ));
    o.line("fi");
    o.line("");
    o.line("# Step 20: the mirror, if one is configured, is mounted at /mirror. The source's own");
    o.line("# directory is reported, so that the run can say when nothing is mounted there.");
    o.line(
        "source_mirror=$(conf_get server.susemanager.fromdir \"$RHN_CONF\") || source_mirror=''",
    );
    o.line("conf_set server.susemanager.fromdir /mirror \"$RHN_CONF\" existing");
    o.line("");

    render_extraction(&mut o, script);

    o.line(
        "echo 'How each volume was copied (quick: size and modification time; checksum: content):'",
    );
    o.line("printf '  %s\\n' \"${COPY_MODES[@]}\"");
    o.line("echo DONE");
    o.0
}

/// The end of the script: step 17 and the old step 21.2–21.3, delivered as one merge patch of
/// the Secret instead of files on a PVC read through pod logs (D28, D31).
fn render_extraction(o: &mut Out, script: &DataSyncScript) {
    let q = shell_quote;
    let root = script.paths.local_root.trim_end_matches('/');
    let local = |path: &str| q(&format!("{root}{path}"));
    o.line("echo 'Extracting the migration data...'");
    o.line("# Values stay in variables and files of the scratch dir: never printed.");
    o.line("declare -A values=() files=()");
    o.line(&format!(
        "values[{}]=$(on_source 'timedatectl show -p Timezone --value')",
        q(data_keys::TIMEZONE)
    ));
    o.line("# From the synced data: that is what the database will run on (R of §3.5, D01).");
    o.line(&format!(
        "PG_VERSION_FILE={}",
        local("/var/lib/pgsql/data/PG_VERSION")
    ));
    o.line("[ -f \"$PG_VERSION_FILE\" ] || fail \"the synced database has no PG_VERSION\"");
    o.line("read -r pg_version <\"$PG_VERSION_FILE\" || true");
    o.line("trim_var pg_version");
    o.line("[ -n \"$pg_version\" ] || fail \"the synced PG_VERSION is empty\"");
    o.line(&format!("values[{}]=$pg_version", q(data_keys::PG_VERSION)));
    // Exact values (D30): conf_get trims only around "=" and at the ends.
    // The Secret keys are the rhn.conf keys. The second field is the value used when rhn.conf
    // lacks the key; `None`: the migration cannot go on without it.
    for (key, fallback) in [
        (data_keys::DB_USER, None),
        (data_keys::DB_PASSWORD, None),
        (data_keys::DB_NAME, None),
        // PostgreSQL's default port, which the server uses when rhn.conf does not say.
        (data_keys::DB_PORT, Some("5432")),
        // Absent on servers without a report database.
        (data_keys::REPORT_DB_USER, Some("")),
        (data_keys::REPORT_DB_PASSWORD, Some("")),
    ] {
        let otherwise = match fallback {
            None => format!("fail {}", q(&format!("/etc/rhn/rhn.conf has no {key}"))),
            Some(value) => format!("values[{}]={}", q(key), q(value)),
        };
        o.line(&format!(
            "values[{k}]=$(conf_get {k} \"$RHN_CONF\") || {otherwise}",
            k = q(key)
        ));
    }
    o.line(&format!(
        "values[{}]=$has_hubxmlrpc",
        q(data_keys::HAS_HUBXMLRPC)
    ));
    o.line(&format!("values[{}]=$tftp", q(data_keys::TFTP)));
    if !script.prepare {
        o.line(&format!(
            "values[{}]=$outage_started_at",
            q(data_keys::OUTAGE_STARTED_AT)
        ));
        o.line(&format!(
            "values[{}]=$services_stopped_at",
            q(data_keys::SERVICES_STOPPED_AT)
        ));
    }
    o.line(&format!("values[{}]=$source_mirror", q(data_keys::MIRROR)));
    o.line(&format!(
        "if on_source 'grep -rqs jdwp /etc/tomcat/conf.d /etc/rhn/taskomatic.conf'; then values[{k}]=true; else values[{k}]=false; fi",
        k = q(data_keys::DEBUG)
    ));
    o.line("if fqdn=$(conf_get java.hostname \"$RHN_CONF\") && [ -n \"$fqdn\" ]; then");
    o.line(&format!("  values[{}]=$fqdn", q(data_keys::FQDN)));
    o.line("fi");
    o.line(&format!("files[{}]=$ca_file", q(data_keys::CA_CERT)));
    o.line("");
    o.line(
        "# The CA key only when ssl-build holds the deployed CA: the fingerprints are compared as",
    );
    o.line("# variables (the reference compared a literal, D16). Otherwise the certificates are");
    o.line("# third-party ones: the server certificate and key, fetched into the scratch dir.");
    o.line("ca_fp=$(fingerprint \"$ca_file\") || ca_fp=''");
    o.line("build_fp=''");
    o.line("if [ -f \"$SSL_BUILD/RHN-ORG-TRUSTED-SSL-CERT\" ]; then");
    o.line("  build_fp=$(fingerprint \"$SSL_BUILD/RHN-ORG-TRUSTED-SSL-CERT\") || build_fp=''");
    o.line("fi");
    o.line("if [ -n \"$ca_fp\" ] && [ \"$build_fp\" = \"$ca_fp\" ] && [ -f \"$SSL_BUILD/RHN-ORG-PRIVATE-SSL-KEY\" ]; then");
    o.line("  echo 'found the Uyuni CA key'");
    o.line("  cat -- \"$SSL_BUILD/RHN-ORG-PRIVATE-SSL-KEY\" >\"$SCRATCH/ca.key\"");
    o.line(&format!(
        "  files[{}]=$SCRATCH/ca.key",
        q(data_keys::CA_KEY)
    ));
    o.line("elif on_source 'test -f /etc/pki/tls/certs/spacewalk.crt' &&");
    o.line("  on_source 'test -f /etc/pki/tls/private/spacewalk.key'; then");
    o.line("  echo 'found a third-party server certificate'");
    o.line("  on_source 'cat /etc/pki/tls/certs/spacewalk.crt' >\"$SCRATCH/server.crt\"");
    o.line("  on_source 'cat /etc/pki/tls/private/spacewalk.key' >\"$SCRATCH/server.key\"");
    o.line(&format!(
        "  files[{}]=$SCRATCH/server.crt",
        q(data_keys::SERVER_CERT)
    ));
    o.line(&format!(
        "  files[{}]=$SCRATCH/server.key",
        q(data_keys::SERVER_KEY)
    ));
    o.line("else");
    o.line("  echo 'found neither the Uyuni CA key nor a server certificate and key'");
    o.line("fi");
    o.line("");
    o.line("# One merge patch, every value base64-encoded: the JSON needs no escaping.");
    o.line("patch=\"$SCRATCH/data.json\"");
    o.line("{");
    o.line(&format!(
        "  printf '{{\"data\":{{\"%s\":\"%s\"' {} \"$(b64 \"$JOB_NAME\")\"",
        q(data_keys::JOB)
    ));
    o.line("  for key in \"${!values[@]}\"; do");
    o.line("    printf ',\"%s\":\"%s\"' \"$key\" \"$(b64 \"${values[$key]}\")\"");
    o.line("  done");
    o.line("  for key in \"${!files[@]}\"; do");
    o.line("    printf ',\"%s\":\"%s\"' \"$key\" \"$(base64 -w0 <\"${files[$key]}\")\"");
    o.line("  done");
    o.line("  printf '}}\\n'");
    o.line("} >\"$patch\"");
    o.line("");
    o.line("# The CA key must not stay on a volume (D31): it is in the scratch dir now. Removed");
    o.line("# before the patch, so a failed patch leaves no copy behind either (on_exit too).");
    o.line("rm -rf -- \"$SSL_BUILD\"");
    o.line("patch_secret \"$patch\"");
    o.line("cleanup_scratch");
}
