//! Parameters: the raw inputs of a command ([`MigrateArgs`], strings and file contents as the
//! CLI read them) validated once into [`MigrateParams`]. Nothing past this point sees raw flags,
//! and builders are total because every value they use was checked here.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::image::{self, ImageError, PullPolicy};
use crate::secret::SecretString;
use crate::ssh::{self, SshProblem};
use crate::volumes::{self, VolumeClaim};

mod install;
pub use install::{
    Account, CaSubject, CaSubjectArgs, GeneratedPasswords, InstallArgs, InstallParams,
    check_admin_password, is_email,
};
mod uninstall;
mod upgrade;
pub use uninstall::UninstallParams;
pub use upgrade::{Origin, UpgradeParams};

/// A file the user named on the command line, already read by the caller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileInput {
    /// The path as given, for error messages.
    pub path: String,
    pub content: SecretString,
}

/// `migrate` as the command line gave it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MigrateArgs {
    /// The namespace was named (`-n`, the kubeconfig context, the pod's service account) rather
    /// than left to kubectl's fallback `default`.
    pub namespace_explicit: bool,
    /// The connection flags of the run, for the `kubectl` commands the tool prints.
    pub kubectl: crate::kubectl::Kubectl,
    /// Namespace chosen by `-n`, the kubeconfig context, or `default`.
    pub namespace: String,
    pub source_fqdn: String,
    pub ssh_user: String,
    pub prepare: bool,
    /// `--compress`: rsync compresses the data on the wire.
    pub compress: bool,
    /// `--keep-migration-data`: the Secrets only the migration used, and the secret values of
    /// `uyuni-migration-data`, stay after it finished.
    pub keep_migration_data: bool,
    /// Identifies this invocation (UTC `YYYYMMDDhhmmss` from the caller's clock); Job names
    /// carry it.
    pub run_id: String,
    pub ssh_key_private: Option<FileInput>,
    pub ssh_key_public: Option<FileInput>,
    pub ssh_known_hosts: Option<FileInput>,
    pub ssh_config: Option<FileInput>,
    /// Version of the tool, recorded on what it creates.
    pub tool_version: String,
    /// The source CA's password, from `--ssl-password-file` or the environment (never argv).
    pub ssl_password: Option<SecretString>,
    /// The server's specification.
    pub spec: ServerSpecArgs,
}

/// The server's specification as the command line gave it: the flags every command that
/// deploys a server shares.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerSpecArgs {
    pub image: Option<String>,
    pub tag: Option<String>,
    pub registry_host: Option<String>,
    pub pull_policy: Option<String>,
    /// `--db-image` (mgradm's `--pgsql-image`): the PostgreSQL image.
    pub db_image: Option<String>,
    /// `--pgsql-tag`; the server's tag when absent.
    pub db_tag: Option<String>,
    /// `--dbupgrade-image`: the PostgreSQL major-upgrade image.
    pub dbupgrade_image: Option<String>,
    /// `--dbupgrade-tag`; the server's tag when absent.
    pub dbupgrade_tag: Option<String>,
    /// `--hubxmlrpc-image` and `--coco-image`; the server's registry and tag apply.
    pub hubxmlrpc_image: Option<String>,
    pub coco_image: Option<String>,
    /// `--hubxmlrpc-replicas`; `None`: 1 when the source ran the hub XML-RPC API, else 0.
    pub hubxmlrpc_replicas: Option<u32>,
    /// `--coco-replicas` (confidential computing attestation), default 0.
    pub coco_replicas: Option<u32>,
    /// `--tftp[=true|false]`; `None`: deployed when `tftp.socket` was enabled on the source.
    pub tftp: Option<bool>,
    /// `--tftp-image`, `--tftp-tag`; the server's registry and tag apply when absent.
    pub tftp_image: Option<String>,
    pub tftp_tag: Option<String>,
    /// `--tftp-host-network[=true|false]`: the TFTP pod on its node's network instead of
    /// behind a LoadBalancer Service. `None`: not given (off unless remembered).
    pub tftp_host_network: Option<bool>,
    /// `--server-privileged[=true|false]`: run the server container privileged (beyond the
    /// chart).
    pub server_privileged: Option<bool>,
    /// `--server-super-privileged[=true|false]`: the chart's `server.superPrivileged`.
    pub server_super_privileged: Option<bool>,
    /// `--server-selinux-type`: the chart's `server.selinuxType`.
    pub server_selinux_type: Option<String>,
    /// `--server-apparmor-profile`: the chart's `server.apparmorProfile`.
    pub server_apparmor_profile: Option<String>,
    /// `--server-requests`, `--server-limits`, `--db-requests`, `--db-limits`: `cpu=…,memory=…`
    /// as `kubectl set resources` takes them.
    pub server_requests: Option<String>,
    pub server_limits: Option<String>,
    pub db_requests: Option<String>,
    pub db_limits: Option<String>,
    /// `--ingress`: auto, traefik, nginx or none.
    pub ingress: Option<String>,
    /// `--ingress-class`: the IngressClass to use instead of the detected one.
    pub ingress_class: Option<String>,
    /// `--configure-ingress-controller[=true|false]`: write the controller's HelmChartConfig
    /// in kube-system.
    pub configure_ingress_controller: Option<bool>,
    /// `--network-policy[=true|false]`: a NetworkPolicy that lets only the database's
    /// consumers reach it. `None`: not given (off unless remembered).
    pub network_policy: Option<bool>,
    pub volumes_class: Option<String>,
    /// `NAME=CLASS` pairs.
    pub volume_classes: Vec<String>,
    /// mgradm's named size flags: (flag name without dashes, value).
    pub named_sizes: Vec<(String, String)>,
    /// `NAME=SIZE` pairs.
    pub volume_sizes: Vec<String>,
    /// `--ssl-cname`: more DNS names of the server's certificate.
    pub ssl_cnames: Vec<String>,
    /// Third-party certificates: `--ssl-ca-root`, `--ssl-ca-intermediate`,
    /// `--ssl-server-cert`, `--ssl-server-key`, and the `--ssl-db-*` equivalents.
    pub ssl_ca_root: Option<FileInput>,
    pub ssl_ca_intermediate: Vec<FileInput>,
    pub ssl_server_cert: Option<FileInput>,
    pub ssl_server_key: Option<FileInput>,
    pub ssl_db_ca_root: Option<FileInput>,
    pub ssl_db_ca_intermediate: Vec<FileInput>,
    pub ssl_db_cert: Option<FileInput>,
    pub ssl_db_key: Option<FileInput>,
    /// `--registry-user`, with the password from `--registry-password-file` or the environment.
    pub registry_user: Option<String>,
    pub registry_password: Option<SecretString>,
    /// `--image-pull-secret`: a pull Secret of the user's, referenced and never written.
    pub image_pull_secret: Option<String>,
    /// `--mirror-claim`: the user's PersistentVolumeClaim holding a local mirror.
    pub mirror_claim: Option<String>,
}

/// A certificate with its chain and key, as a TLS Secret holds them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CertBundle {
    /// The certificate followed by the intermediates, PEM.
    pub chain: String,
    pub key: SecretString,
    /// The root CA, PEM.
    pub root: String,
    /// Where the certificate came from, for messages: `--ssl-server-cert FILE`.
    #[serde(skip)]
    pub origin: String,
}

/// TLS choices that do not depend on what the sync finds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TlsParams {
    pub cnames: Vec<String>,
    /// Server and database certificates from files: no cert-manager needed.
    pub third_party: Option<ThirdParty>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThirdParty {
    pub server: CertBundle,
    pub db: CertBundle,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageParams {
    pub server: String,
    /// `server-postgresql`: runs the `db` Deployment.
    pub database: String,
    /// `server-database-migration`: runs the PostgreSQL major upgrade.
    pub database_upgrade: String,
    pub hub_xmlrpc: String,
    pub coco: String,
    /// `proxy-tftpd`: the TFTP server.
    pub tftp: String,
    pub pull_policy: PullPolicy,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SshKeyPair {
    pub private: SecretString,
    pub public: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SshConfig {
    pub known_hosts: String,
    /// May be empty: ssh then uses its defaults.
    pub config: String,
}

/// The server's own settings, whatever command deploys it: what it runs (images, replicas,
/// confinement), where it keeps its data, how it is reached (TLS, ingress, TFTP) and how its
/// images are pulled. Nothing here says where the server's data comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerSpec {
    pub image: ImageParams,
    pub volumes: Vec<VolumeClaim>,
    pub tls: TlsParams,
    /// `None`: decided from what the source ran.
    pub hubxmlrpc_replicas: Option<i32>,
    pub coco_replicas: i32,
    pub ingress: IngressParams,
    pub pull_secret: PullSecret,
    /// The user's claim mounted at `/mirror` in the server; checked, never written.
    pub mirror_claim: Option<String>,
    pub tftp: TftpParams,
    pub server_security: ServerSecurity,
    /// Requests and limits given for the server's and the database's containers; what is not
    /// given takes the defaults of `builders::hardening`.
    pub resources: ResourceFlags,
    /// `--network-policy`: the database reachable only from its consumers
    /// (`builders::network_policy`).
    pub network_policy: bool,
}

/// `--server-requests`, `--server-limits`, `--db-requests`, `--db-limits`: resource name (`cpu`,
/// `memory`) to quantity.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResourceFlags {
    pub server_requests: BTreeMap<String, String>,
    pub server_limits: BTreeMap<String, String>,
    pub db_requests: BTreeMap<String, String>,
    pub db_limits: BTreeMap<String, String>,
}

const RESOURCE_RULE: &str = "NAME=QUANTITY pairs separated by commas, NAME cpu or memory, as \
     `kubectl set resources` takes them (for example cpu=2,memory=8Gi), each quantity in the \
     form the API server keeps (1500m, not 1.5; 1Gi, not 1024Mi; 2, not 2000m)";

/// A Kubernetes quantity in the canonical form the API server keeps (apimachinery's
/// `resource.Quantity.String()`: an integer with the largest suffix that keeps it whole, so
/// `1500m` not `1.5`, `1Gi` not `1024Mi`, `2` not `2000m`): the live object then reads back
/// as written, and a run again finds nothing to change.
fn quantity(value: &str) -> bool {
    const BINARY: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    const DECIMAL: [&str; 7] = ["m", "k", "M", "G", "T", "P", "E"];
    let (number, step) = BINARY
        .iter()
        .find_map(|s| {
            value
                .strip_suffix(s)
                .map(|n| (n, (*s != "Ei").then_some(1024)))
        })
        .or_else(|| {
            DECIMAL.iter().find_map(|s| {
                value
                    .strip_suffix(s)
                    .map(|n| (n, (*s != "E").then_some(1000)))
            })
        })
        .unwrap_or((value, Some(1000)));
    let Ok(n) = number.parse::<u64>() else {
        return false;
    };
    !number.starts_with('+')
        && (number == "0" || !number.starts_with('0'))
        && step.is_none_or(|step| n == 0 || n % step != 0 || value == number && n < step)
}

fn resource_list(
    flag: &'static str,
    value: Option<&str>,
) -> Result<BTreeMap<String, String>, ParamsError> {
    let Some(value) = value.filter(|v| !v.trim().is_empty()) else {
        return Ok(BTreeMap::new());
    };
    let invalid = || ParamsError::InstallValue {
        flag,
        value: value.to_owned(),
        rule: RESOURCE_RULE,
    };
    let mut out = BTreeMap::new();
    for pair in value.split(',') {
        let (name, q) = pair.trim().split_once('=').ok_or_else(invalid)?;
        if !matches!(name, "cpu" | "memory") || !quantity(q) || out.contains_key(name) {
            return Err(invalid());
        }
        out.insert(name.to_owned(), q.to_owned());
    }
    Ok(out)
}

fn resolve_resources(args: &ServerSpecArgs) -> Result<ResourceFlags, ParamsError> {
    Ok(ResourceFlags {
        server_requests: resource_list("--server-requests", args.server_requests.as_deref())?,
        server_limits: resource_list("--server-limits", args.server_limits.as_deref())?,
        db_requests: resource_list("--db-requests", args.db_requests.as_deref())?,
        db_limits: resource_list("--db-limits", args.db_limits.as_deref())?,
    })
}

/// What every command that deploys or changes a server works with: where (namespace, the run's
/// connection flags), as which run, and the server's specification. Each command's own
/// parameters hold one of these and dereference to it, so code that serves every command takes
/// `&ServerParams` and is handed any command's parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerParams {
    pub namespace: String,
    /// The connection flags of the run, for the `kubectl` commands in notes and hints.
    #[serde(skip)]
    pub kubectl: crate::kubectl::Kubectl,
    pub run_id: String,
    pub tool_version: String,
    pub spec: ServerSpec,
    /// The server's specification to record in ConfigMap `uyuni-server-spec` (flag name →
    /// value, `crate::record`); empty unless the parameters were made by `record::params`.
    pub spec_record: std::collections::BTreeMap<String, String>,
}

impl ServerParams {
    /// Validates what every command shares: the namespace, the run id and the specification.
    pub fn from_args(
        namespace: &str,
        namespace_explicit: bool,
        kubectl: &crate::kubectl::Kubectl,
        run_id: &str,
        tool_version: &str,
        spec: &ServerSpecArgs,
    ) -> Result<Self, ParamsError> {
        if !is_dns_label(namespace) {
            return Err(ParamsError::Namespace(namespace.to_owned()));
        }
        // Its 27 claims and Deployments would land among unrelated objects, and a later
        // `kubectl get` in the namespace the user meant would find nothing.
        if namespace == "default" && !namespace_explicit {
            return Err(ParamsError::DefaultNamespace);
        }
        if run_id.len() != 14 || !run_id.chars().all(|c| c.is_ascii_digit()) {
            return Err(ParamsError::RunId(run_id.to_owned()));
        }
        Ok(ServerParams {
            namespace: namespace.to_owned(),
            kubectl: kubectl.clone(),
            run_id: run_id.to_owned(),
            tool_version: tool_version.to_owned(),
            spec: ServerSpec::from_args(spec)?,
            spec_record: std::collections::BTreeMap::new(),
        })
    }

    /// The name of the pull Secret every pod references, if any.
    pub fn pull_secret_name(&self) -> Option<&str> {
        self.spec.pull_secret_name()
    }
}

/// Validated parameters of `migrate`: the server to deploy ([`ServerParams`], which it
/// dereferences to), and what only a migration needs (the source, how to reach it, the copy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrateParams {
    #[serde(flatten)]
    pub server: ServerParams,
    pub source_fqdn: String,
    pub ssh_user: String,
    pub prepare: bool,
    /// rsync compresses on the wire (`-z`): for slow links only; on a LAN it costs the copy
    /// more CPU than it saves.
    pub compress: bool,
    /// Keep Secrets uyuni-migration-key and uyuni-ca-password, and the secret values of
    /// uyuni-migration-data, once the migration has finished; by default they are deleted
    /// (the values emptied) then, as nothing needs them any more.
    pub keep_migration_data: bool,
    /// Given on the command line; `None` means: reuse the Secret in the cluster.
    pub ssh_key: Option<SshKeyPair>,
    /// Given on the command line; `None` means: reuse the ConfigMap in the cluster.
    pub ssh_config: Option<SshConfig>,
    /// The password of the source's CA key, which the migrated server keeps signing with.
    pub ca_password: Option<SecretString>,
}

impl std::ops::Deref for MigrateParams {
    type Target = ServerParams;
    fn deref(&self) -> &ServerParams {
        &self.server
    }
}

impl std::ops::DerefMut for MigrateParams {
    fn deref_mut(&mut self) -> &mut ServerParams {
        &mut self.server
    }
}

/// How the server container is confined: the official chart's options
/// (`containers/server-helm/templates/server.yaml`, `values.yaml` `server.superPrivileged`,
/// `server.selinuxType`, `server.apparmorProfile`, tested in `tests/security_test.yaml`) and,
/// beyond the chart, `privileged`.
///
/// The default is the chart's: capability `SYS_ADMIN` only (the image's
/// `99-cgroupfs-mount.sh` mounts cgroup2 over `/sys/fs/cgroup`) with SELinux level `s0`. A
/// privileged container is worse than it looks here: on containerd it gets no private cgroup
/// namespace, so that cgroup2 mount shows the host's whole cgroup tree to the server's systemd.
/// It stays available for clusters whose runtime or policy refuses the mount with `SYS_ADMIN`
/// alone (for instance a seccomp or LSM profile that blocks `mount` and cannot be relaxed per
/// pod), and only when asked for by name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ServerSecurity {
    /// `--server-privileged`.
    pub privileged: bool,
    /// SELinux type `spc_t` and AppArmor `Unconfined` (chart `server.superPrivileged`).
    pub super_privileged: bool,
    /// SELinux type of the container (chart `server.selinuxType`).
    pub selinux_type: Option<String>,
    /// A `Localhost` AppArmor profile (chart `server.apparmorProfile`).
    pub apparmor_profile: Option<String>,
}

/// The TFTP server (the chart's `tftp.enable` and `tftp.hostNetwork`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TftpParams {
    /// `None`: what the source did (`tftp.socket` enabled), known after the data sync.
    pub enabled: Option<bool>,
    pub host_network: bool,
}

/// How the pods authenticate to the registry (reference §1.8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum PullSecret {
    /// No pull Secret.
    None,
    /// Secret `registry-credentials`, written from `--registry-user` and its password for the
    /// registry of the server image.
    Credentials {
        registry: String,
        user: String,
        password: SecretString,
    },
    /// Secret `registry-credentials` as an earlier run wrote it (no flag given this time).
    Reused,
    /// `--image-pull-secret NAME`: the user's Secret.
    Existing(String),
}

/// Which ingress controller to expose the server through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum IngressMode {
    /// From the cluster's default IngressClass.
    Auto,
    Traefik,
    Nginx,
    /// No Ingress: the user exposes the Services.
    None,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IngressParams {
    pub mode: IngressMode,
    pub class: Option<String>,
    pub configure_controller: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    #[error(
        "namespace {0:?} is not a valid namespace name (lowercase letters, digits and '-', at most 63 characters): fix -n/--namespace"
    )]
    Namespace(String),
    #[error(
        "no namespace was given (no -n, and the kubeconfig context sets none), so the migration would go into namespace default, beside whatever else runs there: pass -n NAMESPACE (for example -n uyuni), or -n default if that is really meant. Nothing was written"
    )]
    DefaultNamespace,
    #[error(
        "source {0:?} is not a fully qualified domain name ({problem}): give the source server's FQDN, for example uyuni.example.com",
        problem = fqdn_problem(.0)
    )]
    Fqdn(String),
    #[error(
        "{0:?} is not a fully qualified domain name ({problem}): give the name the server will answer to, in lower case, for example uyuni.example.com. Nothing was written",
        problem = fqdn_problem(.0)
    )]
    ServerFqdn(String),
    #[error(
        "--tz {value:?} is not a time zone the server image knows: it must be a name of the tz database (a file under the image's /usr/share/zoneinfo), such as Etc/UTC or Europe/Berlin{}. Nothing was written",
        suggestion.as_ref().map(|s| format!("; did you mean {s}?")).unwrap_or_default()
    )]
    Timezone {
        value: String,
        suggestion: Option<String>,
    },
    #[error("{flag} {value:?} is not valid: it must be {rule}. Nothing was written")]
    InstallValue {
        flag: &'static str,
        value: String,
        rule: &'static str,
    },
    #[error("{what} cannot be used: {problem}. Give another one. Nothing was written")]
    Password {
        what: &'static str,
        problem: &'static str,
    },
    #[error(
        "--scc-user was given without the SCC password: put it in a file and pass --scc-password-file FILE, or set UYUNI_SCC_PASSWORD. Nothing was written"
    )]
    SccPasswordMissing,
    #[error(
        "an SCC password was given without --scc-user: give the SCC organisation user too, or neither. Nothing was written"
    )]
    SccUserMissing,
    #[error("SSH user {0:?} is not a valid user name: fix --user")]
    User(String),
    #[error("run id {0:?} must be a UTC timestamp YYYYMMDDhhmmss")]
    RunId(String),
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(transparent)]
    UnsupportedTarget(#[from] image::UnsupportedTarget),
    #[error(
        "--ssh-key-private and --ssh-key-public go together: give both, or neither to reuse Secret uyuni-migration-key"
    )]
    SshKeyPairIncomplete,
    #[error(
        "--ssh-key-private {private} and --ssh-key-public {public} are not a key pair: the public key {problem}. Nothing was written"
    )]
    SshKeyPairMismatch {
        private: String,
        public: String,
        problem: SshProblem,
    },
    #[error("--ssh-config needs --ssh-knownhosts: ConfigMap uyuni-migration-ssh holds both")]
    SshConfigWithoutKnownHosts,
    #[error("SSH file {path} {}", problem.for_file(path))]
    SshFile { path: String, problem: SshProblem },
    #[error("{flag} {value:?} is not NAME=VALUE")]
    Pair { flag: &'static str, value: String },
    #[error("{flag}: there is no volume named {name:?}; known volumes: {known}")]
    UnknownVolume {
        flag: &'static str,
        name: String,
        known: String,
    },
    #[error("{flag}: {value:?} is not a storage size such as 10Gi or 500Mi")]
    Size { flag: String, value: String },
    #[error(
        "{flag}: {value:?} is larger than any volume Kubernetes can request (at most about 8Ei); give the size in Gi or Ti, for example 100Gi"
    )]
    SizeTooLarge { flag: String, value: String },
    #[error(
        "the database volume's size {0:?} is too small for PostgreSQL with the Uyuni schemas: give at least 1Gi with --volumes-database-size (the default is 50Gi). Nothing was written"
    )]
    DatabaseVolumeTooSmall(String),
    /// A volume other than the database's asked smaller than [`MIN_VOLUME_BYTES`]: a size
    /// without a unit is bytes, so `5` where `5Gi` was meant.
    #[error(
        "{flag}: {value:?} ({} bytes) is too small for volume {} ({}): give at least 1Mi (its default is {}); a size without a unit is in bytes, as Kubernetes reads it. Nothing was written",
        storage_bytes(value).unwrap_or_default(),
        volume.name,
        volume.mount_path,
        volume.default_size
    )]
    VolumeTooSmall {
        flag: String,
        value: String,
        volume: &'static volumes::VolumeDef,
    },
    #[error("{flag}: {value:?} is not a valid StorageClass name")]
    StorageClass { flag: String, value: String },
    #[error("--ssl-cname {0:?} is not a DNS name")]
    Cname(String),
    #[error("{flag} {path} {problem}")]
    TlsFile {
        flag: &'static str,
        path: String,
        problem: &'static str,
    },
    #[error("{0}")]
    TlsIncomplete(&'static str),
    #[error("{flag} {path} {problem}. Nothing was written")]
    TlsUnreadable {
        flag: &'static str,
        path: String,
        problem: crate::certs::Unreadable,
    },
    /// `key`, `cert`: the flag and the path, `--ssl-server-key FILE`.
    #[error(
        "the key in {key} does not belong to the certificate in {cert} ({problem}): give the key the certificate was issued for, or the certificate issued for this key. Nothing was written"
    )]
    TlsKeyMismatch {
        key: String,
        cert: String,
        problem: crate::certs::Mismatch,
    },
    #[error(
        "the certificate in {cert} does not chain to the CA in {root}: {problem}. Give the CA that issued it with {root_flag}, and every CA between them with {intermediate_flag}. Nothing was written"
    )]
    TlsUnchained {
        cert: String,
        root: String,
        root_flag: &'static str,
        intermediate_flag: &'static str,
        problem: Box<crate::certs::Unchained>,
    },
    #[error("--ingress {0:?} is not one of auto, traefik, nginx, none")]
    Ingress(String),
    #[error("--ingress-class {0:?} is not a valid IngressClass name")]
    IngressClass(String),
    #[error("{flag} {value}: give 0 to 10 replicas")]
    Replicas { flag: &'static str, value: u32 },
    #[error(
        "--registry-user needs the registry password: give it with --registry-password-file FILE or the environment variable UYUNI_REGISTRY_PASSWORD (it is never accepted on the command line)"
    )]
    RegistryPasswordMissing,
    #[error("a registry password was given without --registry-user: give the user too")]
    RegistryUserMissing,
    #[error("--registry-user {0:?} is not a valid user name (no ':' or control characters)")]
    RegistryUser(String),
    #[error(
        "--image-pull-secret and --registry-user exclude each other: use your own Secret, or let the tool write registry-credentials from the user and password"
    )]
    PullSecretConflict,
    #[error("--image-pull-secret {0:?} is not a valid Secret name")]
    PullSecretName(String),
    #[error(
        "--mirror-claim {0:?} is not a valid PersistentVolumeClaim name, or names a claim of the server's own volumes"
    )]
    MirrorClaim(String),
    #[error(
        "--server-super-privileged sets the SELinux type (spc_t) and AppArmor profile (Unconfined) itself: drop --server-selinux-type and --server-apparmor-profile, or --server-super-privileged"
    )]
    SuperPrivilegedWithProfile,
    #[error(
        "{flag} {value:?} is not a profile or type name (no spaces, quotes or control characters, at most 253 characters): fix {flag}"
    )]
    SecurityName { flag: &'static str, value: String },
    #[error(
        "--tftp-host-network places the TFTP server on its node's network, but --tftp=false turns TFTP off: drop one of them"
    )]
    TftpHostNetworkWithoutTftp,
}

fn resolve_pull_secret(
    args: &ServerSpecArgs,
    server_image: &str,
) -> Result<PullSecret, ParamsError> {
    let user = args
        .registry_user
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty());
    let password = args.registry_password.clone().filter(|p| !p.is_empty());
    let existing = args
        .image_pull_secret
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty());
    match (existing, user, password) {
        (Some(_), Some(_), _) => Err(ParamsError::PullSecretConflict),
        (Some(name), None, _) if !is_dns_subdomain(name) => {
            Err(ParamsError::PullSecretName(name.to_owned()))
        }
        (Some(name), None, _) => Ok(PullSecret::Existing(name.to_owned())),
        (None, Some(user), _) if user.contains(':') || user.chars().any(char::is_control) => {
            Err(ParamsError::RegistryUser(user.to_owned()))
        }
        (None, Some(_), None) => Err(ParamsError::RegistryPasswordMissing),
        (None, Some(user), Some(password)) => Ok(PullSecret::Credentials {
            registry: image::host(server_image).to_owned(),
            user: user.to_owned(),
            password,
        }),
        (None, None, Some(_)) => Err(ParamsError::RegistryUserMissing),
        (None, None, None) => Ok(PullSecret::None),
    }
}

fn replicas(flag: &'static str, value: Option<u32>) -> Result<Option<i32>, ParamsError> {
    value
        .map(|v| match i32::try_from(v) {
            Ok(n) if n <= 10 => Ok(n),
            _ => Err(ParamsError::Replicas { flag, value: v }),
        })
        .transpose()
}

fn pem_certs(flag: &'static str, file: &FileInput) -> Result<String, ParamsError> {
    let text = file.content.expose();
    if !text.contains("-----BEGIN CERTIFICATE-----") {
        return Err(ParamsError::TlsFile {
            flag,
            path: file.path.clone(),
            problem: "holds no PEM certificate",
        });
    }
    let mut out = text.trim().to_owned();
    out.push('\n');
    Ok(out)
}

fn pem_key(flag: &'static str, file: &FileInput) -> Result<SecretString, ParamsError> {
    let text = file.content.expose();
    let problem = if !text.contains("PRIVATE KEY-----") {
        Some("holds no PEM private key")
    } else if text.contains("ENCRYPTED") {
        Some(
            "holds an encrypted key: give the key without passphrase (a TLS Secret cannot hold an encrypted key)",
        )
    } else {
        None
    };
    match problem {
        Some(problem) => Err(ParamsError::TlsFile {
            flag,
            path: file.path.clone(),
            problem,
        }),
        None => Ok(SecretString::new(format!("{}\n", text.trim()))),
    }
}

fn bundle(
    cert: (&'static str, &FileInput),
    key: (&'static str, &FileInput),
    intermediates: (&'static str, &[FileInput]),
    root: (&'static str, &FileInput),
) -> Result<CertBundle, ParamsError> {
    let mut chain = pem_certs(cert.0, cert.1)?;
    for i in intermediates.1 {
        chain.push_str(&pem_certs(intermediates.0, i)?);
    }
    let bundle = CertBundle {
        chain,
        key: pem_key(key.0, key.1)?,
        root: pem_certs(root.0, root.1)?,
        origin: format!("{} {}", cert.0, cert.1.path),
    };
    check_bundle(&bundle, cert, key, intermediates, root)?;
    Ok(bundle)
}

/// The pair and the chain, known from the files alone; the names need the FQDN the server
/// answers to, which the source decides (`plan::tls`).
fn check_bundle(
    bundle: &CertBundle,
    cert: (&'static str, &FileInput),
    key: (&'static str, &FileInput),
    intermediates: (&'static str, &[FileInput]),
    root: (&'static str, &FileInput),
) -> Result<(), ParamsError> {
    use crate::certs;
    fn unreadable(
        (flag, file): (&'static str, &FileInput),
    ) -> impl FnOnce(certs::Unreadable) -> ParamsError {
        let path = file.path.clone();
        move |problem| ParamsError::TlsUnreadable {
            flag,
            path,
            problem,
        }
    }
    certs::certificates(cert.1.content.expose()).map_err(unreadable(cert))?;
    for i in intermediates.1 {
        certs::certificates(i.content.expose()).map_err(unreadable((intermediates.0, i)))?;
    }
    certs::certificates(&bundle.root).map_err(unreadable(root))?;
    certs::check_pair(&bundle.chain, bundle.key.expose())
        .map_err(unreadable(key))?
        .map_err(|problem| ParamsError::TlsKeyMismatch {
            key: format!("{} {}", key.0, key.1.path),
            cert: format!("{} {}", cert.0, cert.1.path),
            problem,
        })?;
    certs::check_chain(&bundle.chain, &bundle.root)
        .map_err(unreadable(cert))?
        .map_err(|problem| ParamsError::TlsUnchained {
            cert: format!("{} {}", cert.0, cert.1.path),
            root: format!("{} {}", root.0, root.1.path),
            root_flag: root.0,
            intermediate_flag: intermediates.0,
            problem: Box::new(problem),
        })
}

fn resolve_tls(args: &ServerSpecArgs) -> Result<TlsParams, ParamsError> {
    let mut cnames = Vec::new();
    for c in &args.ssl_cnames {
        let c = c.trim().trim_end_matches('.').to_ascii_lowercase();
        if !is_dns_subdomain(&c) {
            return Err(ParamsError::Cname(c));
        }
        if !cnames.contains(&c) {
            cnames.push(c);
        }
    }
    let third_party = match (
        &args.ssl_server_cert,
        &args.ssl_server_key,
        &args.ssl_ca_root,
    ) {
        (None, None, None) => {
            if args.ssl_db_cert.is_some()
                || args.ssl_db_key.is_some()
                || !args.ssl_ca_intermediate.is_empty()
            {
                return Err(ParamsError::TlsIncomplete(
                    "--ssl-db-* and --ssl-ca-intermediate need --ssl-server-cert, --ssl-server-key and --ssl-ca-root",
                ));
            }
            None
        }
        (Some(cert), Some(key), Some(root)) => {
            let server = bundle(
                ("--ssl-server-cert", cert),
                ("--ssl-server-key", key),
                ("--ssl-ca-intermediate", &args.ssl_ca_intermediate),
                ("--ssl-ca-root", root),
            )?;
            let db = match (&args.ssl_db_cert, &args.ssl_db_key) {
                (Some(db_cert), Some(db_key)) => bundle(
                    ("--ssl-db-cert", db_cert),
                    ("--ssl-db-key", db_key),
                    ("--ssl-db-ca-intermediate", &args.ssl_db_ca_intermediate),
                    match &args.ssl_db_ca_root {
                        Some(db_root) => ("--ssl-db-ca-root", db_root),
                        None => ("--ssl-ca-root", root),
                    },
                )?,
                // Today's images use one certificate for the server and the database
                // (images-today A.7).
                (None, None) => server.clone(),
                _ => {
                    return Err(ParamsError::TlsIncomplete(
                        "--ssl-db-cert and --ssl-db-key go together",
                    ));
                }
            };
            Some(ThirdParty { server, db })
        }
        _ => {
            return Err(ParamsError::TlsIncomplete(
                "third-party certificates need all of --ssl-server-cert, --ssl-server-key and --ssl-ca-root",
            ));
        }
    };
    Ok(TlsParams {
        cnames,
        third_party,
    })
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// A fully qualified domain name: at least two labels, the last one starting with a letter.
/// Why `s` (already refused by [`is_fqdn`]) is not an FQDN, in words for the error message.
pub fn fqdn_problem(s: &str) -> String {
    let name = s.trim().trim_end_matches('.').to_ascii_lowercase();
    let labels: Vec<&str> = name.split('.').collect();
    if let Some(long) = labels.iter().find(|l| l.len() > 63) {
        format!(
            "its label {}… is {} characters long, and a DNS label has at most 63",
            long.chars().take(12).collect::<String>(),
            long.len()
        )
    } else if name.len() > 253 {
        format!(
            "it is {} characters long, and a DNS name has at most 253",
            name.len()
        )
    } else if labels.len() < 2 {
        "it has no domain: it needs at least two labels, such as uyuni.example.com".to_owned()
    } else if labels.iter().any(|l| l.is_empty()) {
        "it has an empty label (two dots in a row, or a leading dot)".to_owned()
    } else if labels
        .last()
        .and_then(|l| l.chars().next())
        .is_some_and(|c| !c.is_ascii_alphabetic())
    {
        "its last label does not start with a letter".to_owned()
    } else {
        "each label holds only letters, digits and `-`, and neither starts nor ends with `-`"
            .to_owned()
    }
}

pub fn is_fqdn(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let labels: Vec<&str> = lower.split('.').collect();
    labels.len() >= 2
        && lower.len() <= 253
        && labels.iter().all(|l| is_dns_label(l))
        && labels
            .last()
            .and_then(|l| l.chars().next())
            .is_some_and(|c| c.is_ascii_alphabetic())
}

/// A Kubernetes quantity as used for storage: digits, optional fraction, optional suffix.
pub fn is_storage_quantity(s: &str) -> bool {
    let suffixes = [
        "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E", "",
    ];
    suffixes.iter().any(|suffix| {
        s.strip_suffix(suffix).is_some_and(|num| {
            let (int, frac) = num.split_once('.').unwrap_or((num, "0"));
            !int.is_empty()
                && int.chars().all(|c| c.is_ascii_digit())
                && !frac.is_empty()
                && frac.chars().all(|c| c.is_ascii_digit())
                && num.chars().any(|c| c != '0' && c != '.')
        })
    })
}

/// The bytes a storage quantity stands for ([`is_storage_quantity`]'s forms); `None` when it
/// is not one.
pub fn storage_bytes(s: &str) -> Option<u128> {
    if !is_storage_quantity(s) {
        return None;
    }
    let factors: [(&str, u128); 12] = [
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("Ei", 1 << 60),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
        ("E", 1_000_000_000_000_000_000),
    ];
    let (num, factor) = factors
        .iter()
        .find_map(|(suffix, f)| s.strip_suffix(suffix).map(|n| (n, *f)))
        .unwrap_or((s, 1));
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    // At most 38 digits fit a u128; a longer number is larger than any volume anyway.
    let int: u128 = int.parse().ok()?;
    let bytes = int.checked_mul(factor)?;
    // The fraction exactly: factor × digits / 10^len, at most 19 digits of it.
    let digits: String = frac.chars().take(19).collect();
    if digits.is_empty() {
        return Some(bytes);
    }
    let numerator: u128 = digits.parse().ok()?;
    let part = factor.checked_mul(numerator)? / 10u128.pow(digits.len() as u32);
    bytes.checked_add(part)
}

/// The largest storage request Kubernetes takes: its quantities of bytes are 64-bit.
const MAX_VOLUME_BYTES: u128 = i64::MAX as u128;
/// The smallest database volume: PostgreSQL's cluster with the Uyuni schemas and their WAL
/// take hundreds of MiB before any data.
const MIN_DATABASE_BYTES: u128 = 1 << 30;
/// The smallest other volume: 1Mi, the smallest default ([`volumes::CATALOGUE`]). Less is a
/// unit left out (`5` is 5 bytes), not a volume any part of the server could use.
const MIN_VOLUME_BYTES: u128 = 1 << 20;

fn split_pair<'a>(flag: &'static str, value: &'a str) -> Result<(&'a str, &'a str), ParamsError> {
    value
        .split_once('=')
        .map(|(k, v)| (k.trim(), v.trim()))
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .ok_or_else(|| ParamsError::Pair {
            flag,
            value: value.to_owned(),
        })
}

fn known_volume(flag: &'static str, name: &str) -> Result<(), ParamsError> {
    if volumes::find(name).is_some() {
        Ok(())
    } else {
        Err(ParamsError::UnknownVolume {
            flag,
            name: name.to_owned(),
            known: volumes::CATALOGUE
                .iter()
                .map(|v| v.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

fn resolve_volumes(args: &ServerSpecArgs) -> Result<Vec<VolumeClaim>, ParamsError> {
    let mut claims: Vec<VolumeClaim> = volumes::CATALOGUE
        .iter()
        .map(|def| VolumeClaim {
            name: def.name.to_owned(),
            mount_path: def.mount_path.to_owned(),
            size: def.default_size.to_owned(),
            storage_class: None,
            role: def.role,
        })
        .collect();
    let mut set = |name: &str, f: &mut dyn FnMut(&mut VolumeClaim)| {
        claims.iter_mut().filter(|c| c.name == name).for_each(f);
    };
    let check_class = |flag: &str, class: &str| {
        if is_dns_subdomain(class) {
            Ok(())
        } else {
            Err(ParamsError::StorageClass {
                flag: flag.to_owned(),
                value: class.to_owned(),
            })
        }
    };
    // The database's own lower bound is checked below, whichever flag sized it.
    let check_size = |flag: &str, size: &str, name: Option<&str>| match storage_bytes(size) {
        Some(bytes) if bytes < MIN_VOLUME_BYTES => match name
            .filter(|n| *n != volumes::DATABASE_VOLUME)
            .and_then(volumes::find)
        {
            Some(volume) => Err(ParamsError::VolumeTooSmall {
                flag: flag.to_owned(),
                value: size.to_owned(),
                volume,
            }),
            None => Ok(()),
        },
        Some(bytes) if bytes <= MAX_VOLUME_BYTES => Ok(()),
        Some(_) => Err(ParamsError::SizeTooLarge {
            flag: flag.to_owned(),
            value: size.to_owned(),
        }),
        None => Err(ParamsError::Size {
            flag: flag.to_owned(),
            value: size.to_owned(),
        }),
    };
    if let Some(class) = args
        .volumes_class
        .as_deref()
        .map(str::trim)
        .filter(|c| !c.is_empty())
    {
        check_class("--volumes-class", class)?;
        for def in volumes::CATALOGUE {
            set(def.name, &mut |c| c.storage_class = Some(class.to_owned()));
        }
    }
    for pair in &args.volume_classes {
        let (name, class) = split_pair("--volume-class", pair)?;
        known_volume("--volume-class", name)?;
        check_class("--volume-class", class)?;
        set(name, &mut |c| c.storage_class = Some(class.to_owned()));
    }
    for (flag, size) in &args.named_sizes {
        let size = size.trim();
        let flag_name = format!("--{flag}");
        let name = volumes::SIZE_FLAGS
            .iter()
            .find(|(f, _)| f == flag)
            .map(|(_, name)| *name);
        check_size(&flag_name, size, name)?;
        if let Some(name) = name {
            set(name, &mut |c| c.size = size.to_owned());
        }
    }
    for pair in &args.volume_sizes {
        let (name, size) = split_pair("--volume-size", pair)?;
        known_volume("--volume-size", name)?;
        check_size("--volume-size", size, Some(name))?;
        set(name, &mut |c| c.size = size.to_owned());
    }
    if let Some(db) = claims.iter().find(|c| c.name == volumes::DATABASE_VOLUME)
        && storage_bytes(&db.size).is_some_and(|b| b < MIN_DATABASE_BYTES)
    {
        return Err(ParamsError::DatabaseVolumeTooSmall(db.size.clone()));
    }
    Ok(claims)
}

fn ssh_file_problem(file: &FileInput, problem: SshProblem) -> ParamsError {
    ParamsError::SshFile {
        path: file.path.clone(),
        problem,
    }
}

impl ServerSpec {
    /// Validates the server's specification alone: every command that deploys a server checks
    /// its flags here, before its own inputs.
    pub fn from_args(args: &ServerSpecArgs) -> Result<Self, ParamsError> {
        let registry = args
            .registry_host
            .as_deref()
            .unwrap_or(image::DEFAULT_REGISTRY);
        let name = args.image.as_deref().unwrap_or(image::DEFAULT_SERVER_IMAGE);
        let tag = args.tag.as_deref().or(Some(image::DEFAULT_TAG));
        let server = image::reference(registry, name, tag)?;
        // The other images follow the server's registry and tag unless told otherwise (the
        // reference's pgsql image ignored --tag, D47).
        let database = image::reference(
            registry,
            args.db_image.as_deref().unwrap_or(image::DEFAULT_DB_IMAGE),
            args.db_tag.as_deref().or(tag),
        )?;
        // A target that certainly predates today's images is refused before anything is
        // written (images-today §E.4).
        image::check_target("server", &server)?;
        image::check_target("database", &database)?;
        let database_upgrade = image::reference(
            registry,
            args.dbupgrade_image
                .as_deref()
                .unwrap_or(image::DEFAULT_DBUPGRADE_IMAGE),
            args.dbupgrade_tag.as_deref().or(tag),
        )?;
        let hub_xmlrpc = image::reference(
            registry,
            args.hubxmlrpc_image
                .as_deref()
                .unwrap_or(image::DEFAULT_HUB_XMLRPC_IMAGE),
            tag,
        )?;
        let coco = image::reference(
            registry,
            args.coco_image
                .as_deref()
                .unwrap_or(image::DEFAULT_COCO_IMAGE),
            tag,
        )?;
        // As the chart's `<repository>/proxy-tftpd:<tag>`: the server's registry and tag.
        let tftp = image::reference(
            registry,
            args.tftp_image
                .as_deref()
                .unwrap_or(image::DEFAULT_TFTP_IMAGE),
            args.tftp_tag.as_deref().or(tag),
        )?;
        let tftp_host_network = args.tftp_host_network.unwrap_or(false);
        if args.tftp == Some(false) && tftp_host_network {
            return Err(ParamsError::TftpHostNetworkWithoutTftp);
        }
        let pull_policy = match &args.pull_policy {
            Some(p) => PullPolicy::parse(p)?,
            None => PullPolicy::Always,
        };

        Ok(ServerSpec {
            image: ImageParams {
                server: server.clone(),
                database,
                database_upgrade,
                hub_xmlrpc,
                coco,
                tftp,
                pull_policy,
            },
            volumes: resolve_volumes(args)?,
            tls: resolve_tls(args)?,
            hubxmlrpc_replicas: replicas("--hubxmlrpc-replicas", args.hubxmlrpc_replicas)?,
            coco_replicas: replicas("--coco-replicas", args.coco_replicas)?.unwrap_or(0),
            ingress: IngressParams {
                mode: match args
                    .ingress
                    .as_deref()
                    .map(str::to_ascii_lowercase)
                    .as_deref()
                {
                    None | Some("auto") => IngressMode::Auto,
                    Some("traefik") => IngressMode::Traefik,
                    Some("nginx") => IngressMode::Nginx,
                    Some("none") => IngressMode::None,
                    Some(other) => return Err(ParamsError::Ingress(other.to_owned())),
                },
                class: match args.ingress_class.as_deref().map(str::trim) {
                    Some(c) if is_dns_subdomain(c) => Some(c.to_owned()),
                    Some(c) => return Err(ParamsError::IngressClass(c.to_owned())),
                    None => None,
                },
                configure_controller: args.configure_ingress_controller.unwrap_or(false),
            },
            pull_secret: resolve_pull_secret(args, &server)?,
            mirror_claim: match args.mirror_claim.as_deref().map(str::trim) {
                Some(c) if is_dns_subdomain(c) && volumes::find(c).is_none() => Some(c.to_owned()),
                Some(c) => return Err(ParamsError::MirrorClaim(c.to_owned())),
                None => None,
            },
            tftp: TftpParams {
                enabled: args.tftp,
                host_network: tftp_host_network,
            },
            server_security: resolve_server_security(args)?,
            resources: resolve_resources(args)?,
            network_policy: args.network_policy.unwrap_or(false),
        })
    }

    /// The name of the pull Secret every pod references, if any.
    pub fn pull_secret_name(&self) -> Option<&str> {
        match &self.pull_secret {
            PullSecret::None => None,
            PullSecret::Credentials { .. } | PullSecret::Reused => {
                Some(crate::catalogue::names::REGISTRY_SECRET)
            }
            PullSecret::Existing(name) => Some(name),
        }
    }
}

impl MigrateParams {
    /// Validates everything that can be validated without the cluster.
    pub fn from_args(args: &MigrateArgs) -> Result<Self, ParamsError> {
        let server = ServerParams::from_args(
            &args.namespace,
            args.namespace_explicit,
            &args.kubectl,
            &args.run_id,
            &args.tool_version,
            &args.spec,
        )?;
        let source = args
            .source_fqdn
            .trim()
            .trim_end_matches('.')
            .to_ascii_lowercase();
        if !is_fqdn(&source) {
            return Err(ParamsError::Fqdn(args.source_fqdn.clone()));
        }
        let user = args.ssh_user.trim();
        let user_ok = !user.is_empty()
            && user.len() <= 32
            && user
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && !user.starts_with('-');
        if !user_ok {
            return Err(ParamsError::User(args.ssh_user.clone()));
        }

        let ssh_key = match (&args.ssh_key_private, &args.ssh_key_public) {
            (Some(private), Some(public)) => {
                ssh::check_private_key(private.content.expose())
                    .map_err(|p| ssh_file_problem(private, p))?;
                ssh::check_public_key(public.content.expose())
                    .map_err(|p| ssh_file_problem(public, p))?;
                ssh::check_key_pair(private.content.expose(), public.content.expose()).map_err(
                    |problem| match problem {
                        SshProblem::NotThePair { .. } => ParamsError::SshKeyPairMismatch {
                            private: private.path.clone(),
                            public: public.path.clone(),
                            problem,
                        },
                        SshProblem::NotAPublicKey => ssh_file_problem(public, problem),
                        other => ssh_file_problem(private, other),
                    },
                )?;
                Some(SshKeyPair {
                    private: private.content.clone(),
                    public: public.content.expose().to_owned(),
                })
            }
            (None, None) => None,
            _ => return Err(ParamsError::SshKeyPairIncomplete),
        };
        let ssh_config = match (&args.ssh_known_hosts, &args.ssh_config) {
            (Some(known_hosts), config) => {
                ssh::check_known_hosts(known_hosts.content.expose(), &source)
                    .map_err(|p| ssh_file_problem(known_hosts, p))?;
                Some(SshConfig {
                    known_hosts: known_hosts.content.expose().to_owned(),
                    config: config
                        .as_ref()
                        .map(|c| c.content.expose().to_owned())
                        .unwrap_or_default(),
                })
            }
            (None, Some(_)) => return Err(ParamsError::SshConfigWithoutKnownHosts),
            (None, None) => None,
        };

        Ok(MigrateParams {
            server,
            source_fqdn: source,
            ssh_user: user.to_owned(),
            prepare: args.prepare,
            compress: args.compress,
            keep_migration_data: args.keep_migration_data,
            ssh_key,
            ssh_config,
            ca_password: args.ssl_password.clone().filter(|p| !p.expose().is_empty()),
        })
    }
}

fn security_name(flag: &'static str, value: Option<&str>) -> Result<Option<String>, ParamsError> {
    match value.map(str::trim) {
        None => Ok(None),
        Some(v)
            if !v.is_empty()
                && v.len() <= 253
                && v.chars()
                    .all(|c| c.is_ascii_graphic() && c != '"' && c != '\'' && c != '\\') =>
        {
            Ok(Some(v.to_owned()))
        }
        Some(v) => Err(ParamsError::SecurityName {
            flag,
            value: v.to_owned(),
        }),
    }
}

fn resolve_server_security(args: &ServerSpecArgs) -> Result<ServerSecurity, ParamsError> {
    let selinux_type = security_name("--server-selinux-type", args.server_selinux_type.as_deref())?;
    let apparmor_profile = security_name(
        "--server-apparmor-profile",
        args.server_apparmor_profile.as_deref(),
    )?;
    let super_privileged = args.server_super_privileged.unwrap_or(false);
    if super_privileged && (selinux_type.is_some() || apparmor_profile.is_some()) {
        return Err(ParamsError::SuperPrivilegedWithProfile);
    }
    Ok(ServerSecurity {
        privileged: args.server_privileged.unwrap_or(false),
        super_privileged,
        selinux_type,
        apparmor_profile,
    })
}
