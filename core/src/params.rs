//! Parameters: the raw inputs of a command ([`MigrateArgs`], strings and file contents as the
//! CLI read them) validated once into [`MigrateParams`]. Nothing past this point sees raw flags,
//! and builders are total because every value they use was checked here.

use serde::Serialize;

use crate::image::{self, ImageError, PullPolicy};
use crate::secret::SecretString;
use crate::ssh::{self, SshProblem};
use crate::volumes::{self, VolumeClaim};

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
    /// Namespace chosen by `-n`, the kubeconfig context, or `default`.
    pub namespace: String,
    pub source_fqdn: String,
    pub ssh_user: String,
    pub prepare: bool,
    /// Identifies this invocation (UTC `YYYYMMDDhhmmss` from the caller's clock); Job names
    /// carry it.
    pub run_id: String,
    pub image: Option<String>,
    pub tag: Option<String>,
    pub registry_host: Option<String>,
    pub pull_policy: Option<String>,
    pub ssh_key_private: Option<FileInput>,
    pub ssh_key_public: Option<FileInput>,
    pub ssh_known_hosts: Option<FileInput>,
    pub ssh_config: Option<FileInput>,
    pub volumes_class: Option<String>,
    /// `NAME=CLASS` pairs.
    pub volume_classes: Vec<String>,
    /// mgradm's named size flags: (flag name without dashes, value).
    pub named_sizes: Vec<(String, String)>,
    /// `NAME=SIZE` pairs.
    pub volume_sizes: Vec<String>,
    /// Version of the tool, recorded on what it creates.
    pub tool_version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImageParams {
    pub server: String,
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

/// Validated parameters of `migrate`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigrateParams {
    pub namespace: String,
    pub source_fqdn: String,
    pub ssh_user: String,
    pub prepare: bool,
    pub run_id: String,
    pub image: ImageParams,
    /// Given on the command line; `None` means: reuse the Secret in the cluster.
    pub ssh_key: Option<SshKeyPair>,
    /// Given on the command line; `None` means: reuse the ConfigMap in the cluster.
    pub ssh_config: Option<SshConfig>,
    pub volumes: Vec<VolumeClaim>,
    pub tool_version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParamsError {
    #[error(
        "namespace {0:?} is not a valid namespace name (lowercase letters, digits and '-', at most 63 characters): fix -n/--namespace"
    )]
    Namespace(String),
    #[error(
        "source {0:?} is not a fully qualified domain name: give the source server's FQDN, for example uyuni.example.com"
    )]
    Fqdn(String),
    #[error("SSH user {0:?} is not a valid user name: fix --user")]
    User(String),
    #[error("run id {0:?} must be a UTC timestamp YYYYMMDDhhmmss")]
    RunId(String),
    #[error(transparent)]
    Image(#[from] ImageError),
    #[error(
        "--ssh-key-private and --ssh-key-public go together: give both, or neither to reuse Secret uyuni-migration-key"
    )]
    SshKeyPairIncomplete,
    #[error("--ssh-config needs --ssh-knownhosts: ConfigMap uyuni-migration-ssh holds both")]
    SshConfigWithoutKnownHosts,
    #[error("SSH file {path} {problem}")]
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
    #[error("{flag}: {value:?} is not a valid StorageClass name")]
    StorageClass { flag: String, value: String },
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

fn resolve_volumes(args: &MigrateArgs) -> Result<Vec<VolumeClaim>, ParamsError> {
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
    let check_size = |flag: &str, size: &str| {
        if is_storage_quantity(size) {
            Ok(())
        } else {
            Err(ParamsError::Size {
                flag: flag.to_owned(),
                value: size.to_owned(),
            })
        }
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
        check_size(&flag_name, size)?;
        if let Some((_, name)) = volumes::SIZE_FLAGS.iter().find(|(f, _)| f == flag) {
            set(name, &mut |c| c.size = size.to_owned());
        }
    }
    for pair in &args.volume_sizes {
        let (name, size) = split_pair("--volume-size", pair)?;
        known_volume("--volume-size", name)?;
        check_size("--volume-size", size)?;
        set(name, &mut |c| c.size = size.to_owned());
    }
    Ok(claims)
}

fn ssh_file_problem(file: &FileInput, problem: SshProblem) -> ParamsError {
    ParamsError::SshFile {
        path: file.path.clone(),
        problem,
    }
}

impl MigrateParams {
    /// Validates everything that can be validated without the cluster.
    pub fn from_args(args: &MigrateArgs) -> Result<Self, ParamsError> {
        if !is_dns_label(&args.namespace) {
            return Err(ParamsError::Namespace(args.namespace.clone()));
        }
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
        if args.run_id.len() != 14 || !args.run_id.chars().all(|c| c.is_ascii_digit()) {
            return Err(ParamsError::RunId(args.run_id.clone()));
        }
        let registry = args
            .registry_host
            .as_deref()
            .unwrap_or(image::DEFAULT_REGISTRY);
        let name = args.image.as_deref().unwrap_or(image::DEFAULT_SERVER_IMAGE);
        let tag = args.tag.as_deref().or(Some(image::DEFAULT_TAG));
        let server = image::reference(registry, name, tag)?;
        let pull_policy = match &args.pull_policy {
            Some(p) => PullPolicy::parse(p)?,
            None => PullPolicy::Always,
        };

        let ssh_key = match (&args.ssh_key_private, &args.ssh_key_public) {
            (Some(private), Some(public)) => {
                ssh::check_private_key(private.content.expose())
                    .map_err(|p| ssh_file_problem(private, p))?;
                ssh::check_public_key(public.content.expose())
                    .map_err(|p| ssh_file_problem(public, p))?;
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
            namespace: args.namespace.clone(),
            source_fqdn: source,
            ssh_user: user.to_owned(),
            prepare: args.prepare,
            run_id: args.run_id.clone(),
            image: ImageParams {
                server,
                pull_policy,
            },
            ssh_key,
            ssh_config,
            volumes: resolve_volumes(args)?,
            tool_version: args.tool_version.clone(),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn args() -> MigrateArgs {
        MigrateArgs {
            namespace: "uyuni".into(),
            source_fqdn: "uyuni.example.com".into(),
            ssh_user: "root".into(),
            run_id: "20261129180000".into(),
            tool_version: "0.1.0".into(),
            ..MigrateArgs::default()
        }
    }

    #[test]
    fn defaults_give_every_catalogue_volume_and_the_default_image() {
        let p = MigrateParams::from_args(&args()).expect("valid");
        assert_eq!(p.volumes.len(), volumes::CATALOGUE.len());
        assert_eq!(p.image.server, "registry.opensuse.org/uyuni/server:latest");
        assert_eq!(p.image.pull_policy, PullPolicy::Always);
        assert!(p.volumes.iter().all(|v| v.storage_class.is_none()));
    }

    #[test]
    fn sizes_and_classes_apply_to_the_right_volumes() {
        let mut a = args();
        a.volumes_class = Some("fast".into());
        a.volume_classes = vec!["var-pgsql=ssd".into()];
        a.named_sizes = vec![("volumes-database-size".into(), "80Gi".into())];
        a.volume_sizes = vec!["root=5Mi".into(), "srv-www=1.5Ti".into()];
        let p = MigrateParams::from_args(&a).expect("valid");
        let get = |n: &str| p.volumes.iter().find(|v| v.name == n).expect("volume");
        assert_eq!(get("var-pgsql").size, "80Gi");
        assert_eq!(get("var-pgsql").storage_class.as_deref(), Some("ssd"));
        assert_eq!(get("root").size, "5Mi");
        assert_eq!(get("srv-www").size, "1.5Ti");
        assert_eq!(get("var-log").storage_class.as_deref(), Some("fast"));
    }

    #[test]
    fn bad_inputs_are_refused_with_the_flag_named() {
        let mut a = args();
        a.volume_sizes = vec!["nope=1Gi".into()];
        let e = MigrateParams::from_args(&a).expect_err("unknown volume");
        assert!(e.to_string().contains("--volume-size") && e.to_string().contains("nope"));

        let mut a = args();
        a.volume_sizes = vec!["root=fifty gigs".into()];
        assert!(matches!(
            MigrateParams::from_args(&a),
            Err(ParamsError::Size { .. })
        ));

        let mut a = args();
        a.source_fqdn = "uyuni".into();
        assert!(matches!(
            MigrateParams::from_args(&a),
            Err(ParamsError::Fqdn(_))
        ));

        let mut a = args();
        a.namespace = "Bad_NS".into();
        assert!(matches!(
            MigrateParams::from_args(&a),
            Err(ParamsError::Namespace(_))
        ));

        let mut a = args();
        a.ssh_user = "-oProxyCommand=x".into();
        assert!(matches!(
            MigrateParams::from_args(&a),
            Err(ParamsError::User(_))
        ));

        let mut a = args();
        a.ssh_config = Some(FileInput::default());
        assert_eq!(
            MigrateParams::from_args(&a),
            Err(ParamsError::SshConfigWithoutKnownHosts)
        );
    }

    #[test]
    fn ssh_files_are_checked() {
        let mut a = args();
        a.ssh_known_hosts = Some(FileInput {
            path: "kh".into(),
            content: SecretString::new("other.example.com ssh-ed25519 AAAA"),
        });
        let e = MigrateParams::from_args(&a).expect_err("host missing");
        assert!(e.to_string().contains("kh") && e.to_string().contains("uyuni.example.com"));

        let mut a = args();
        a.ssh_key_private = Some(FileInput {
            path: "id".into(),
            content: SecretString::new(
                "-----BEGIN ENCRYPTED PRIVATE KEY-----\nQUFB\n-----END ENCRYPTED PRIVATE KEY-----",
            ),
        });
        a.ssh_key_public = Some(FileInput {
            path: "id.pub".into(),
            content: SecretString::new("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 x"),
        });
        let e = MigrateParams::from_args(&a).expect_err("encrypted");
        assert!(matches!(
            e,
            ParamsError::SshFile {
                problem: SshProblem::Encrypted,
                ..
            }
        ));
        assert!(!e.to_string().contains("QUFB"), "no key material in errors");
    }

    #[test]
    fn quantities() {
        for ok in ["1", "10Mi", "1.5Gi", "100G", "2Ti"] {
            assert!(is_storage_quantity(ok), "{ok}");
        }
        for bad in ["", "Gi", "0", "1.Gi", "-1Gi", "10 Gi", "1Gb", "abc"] {
            assert!(!is_storage_quantity(bad), "{bad}");
        }
    }
}
