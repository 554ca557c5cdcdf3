//! Building the client the way kubectl would from the same flags and environment.

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::ffi::OsString;

use kube::config::{Config, KubeConfigOptions, Kubeconfig};

use crate::error::EffectsError;

/// The kubectl-style global flags, already parsed by the plugin. `Debug` leaves the token out.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientOptions {
    /// `--kubeconfig`: this one file, not merged with anything (as kubectl does).
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub cluster: Option<String>,
    pub user: Option<String>,
    /// `-n`; else the context's namespace; else `default`.
    pub namespace: Option<String>,
    pub insecure_skip_tls_verify: bool,
    /// `--request-timeout`; `None` or zero: no timeout.
    pub request_timeout: Option<Duration>,
    /// `--as`
    pub impersonate: Option<String>,
    /// `--as-group`, repeatable.
    pub impersonate_groups: Vec<String>,
    /// `--server`/`-s`: the API server's URL, replacing the cluster's.
    pub server: Option<String>,
    /// `--token`: a bearer token replacing the user's credentials. A secret: never logged.
    pub token: Option<String>,
    /// `--certificate-authority`: the CA file (PEM) replacing the cluster's.
    pub certificate_authority: Option<PathBuf>,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("kubeconfig", &self.kubeconfig)
            .field("context", &self.context)
            .field("cluster", &self.cluster)
            .field("user", &self.user)
            .field("namespace", &self.namespace)
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field("request_timeout", &self.request_timeout)
            .field("impersonate", &self.impersonate)
            .field("impersonate_groups", &self.impersonate_groups)
            .field("server", &self.server)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("certificate_authority", &self.certificate_authority)
            .finish()
    }
}

/// A client and where it points.
#[derive(Clone)]
pub struct Connection {
    pub client: kube::Client,
    pub namespace: String,
    /// The namespace was chosen: by `-n`, by the context, or by the pod's service account.
    /// `false` when it is `default` only because nothing named one.
    pub namespace_explicit: bool,
    /// The kubeconfig context in use; `None` inside a cluster (service account).
    pub context: Option<String>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("namespace", &self.namespace)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

/// Where the kubeconfig came from, as error messages name it.
#[doc(hidden)]
// pub for the unit tests in tests/unit/
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `--kubeconfig` or `~/.kube/config`.
    File(PathBuf),
    /// `KUBECONFIG`: the files that exist, merged.
    Env(Vec<PathBuf>),
    /// None: `--server` and the other flags alone say how to connect.
    Flags,
}

impl Source {
    pub fn describe(&self) -> String {
        match self {
            Source::File(path) => path.display().to_string(),
            Source::Env(paths) => {
                let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                format!("KUBECONFIG ({})", list.join(":"))
            }
            Source::Flags => "the command-line flags (no kubeconfig)".to_owned(),
        }
    }
}

/// Connects as kubectl would with the same flags. Reads files and the environment but sends no
/// request: the first request is the caller's, so connection problems surface there, retried.
pub async fn connect(opts: &ClientOptions) -> Result<Connection, EffectsError> {
    validate(opts)?;
    let loaded = match load_kubeconfig(
        opts.kubeconfig.as_deref(),
        std::env::var_os("KUBECONFIG"),
        home_dir(),
    ) {
        // kubectl needs no kubeconfig when --server says where the API server is.
        Err(EffectsError::NoKubeconfig { .. }) | Ok(None) if opts.server.is_some() => {
            Some((Kubeconfig::default(), Source::Flags))
        }
        other => other?,
    };
    let (mut config, context, context_namespace) = match loaded {
        Some((mut kubeconfig, source)) => {
            let (context, options) = with_flags(&mut kubeconfig, &source, opts)?;
            let context_namespace = kubeconfig
                .contexts
                .iter()
                .find(|c| c.name == context)
                .and_then(|c| c.context.as_ref())
                .and_then(|c| c.namespace.as_deref())
                .is_some_and(|ns| !ns.is_empty());
            let config = Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|source_err| EffectsError::LoadContext {
                    context: context.clone(),
                    kubeconfig: source.describe(),
                    source: Box::new(source_err),
                })?;
            // The context made up for the flags is no context a pasted command could name.
            let named = (context != FLAGS_ENTRY).then_some(context);
            (config, named, context_namespace)
        }
        // kubectl's last resort too: the pod's service account.
        // Inside a pod the namespace is the service account's: chosen.
        None => (
            Config::incluster().map_err(|source| EffectsError::InCluster {
                source: Box::new(source),
            })?,
            None,
            true,
        ),
    };
    tune(&mut config, opts);
    let connect_timeout = config.connect_timeout;
    let namespace = opts
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let server = config
        .cluster_url
        .to_string()
        .trim_end_matches('/')
        .to_owned();
    // A server that has never answered this client is reported as unreachable, by address and
    // context, after a few quick tries (`retry::unreachable`), rather than after 11 s of them.
    let client = kube::client::ClientBuilder::try_from(config)
        .map_err(|source| EffectsError::BuildClient {
            context: context.clone().unwrap_or_else(|| "in-cluster".to_owned()),
            source: Box::new(source),
        })?
        .with_layer(&crate::retry::first_contact_layer(
            server,
            context.clone(),
            connect_timeout,
        ))
        .build();
    tracing::debug!(
        context = context.as_deref().unwrap_or("in-cluster"),
        %namespace,
        "connected"
    );
    Ok(Connection {
        client,
        namespace,
        namespace_explicit: opts.namespace.is_some() || context_namespace,
        context,
    })
}

/// The name of the kubeconfig entries made up for `--server`, `--token` and
/// `--certificate-authority`, chosen to collide with no name of a real kubeconfig.
const FLAGS_ENTRY: &str = "kubectl-uyuni:flags";

/// Picks the context and applies the flags that replace what its cluster and user say, as
/// kubectl does: `--server`, `--certificate-authority` and `--insecure-skip-tls-verify` replace
/// the cluster's, `--token` the user's credentials. The entries the context names are copied
/// under [`FLAGS_ENTRY`] before they change, so the kubeconfig's own stay as they are. Without
/// a context, `--server` stands for one.
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn with_flags(
    kubeconfig: &mut Kubeconfig,
    source: &Source,
    opts: &ClientOptions,
) -> Result<(String, KubeConfigOptions), EffectsError> {
    use kube::config::{AuthInfo, Cluster, Context, NamedAuthInfo, NamedCluster, NamedContext};
    let no_context = opts.context.is_none()
        && kubeconfig
            .current_context
            .as_deref()
            .is_none_or(str::is_empty);
    let context = if no_context && opts.server.is_some() {
        kubeconfig.contexts.push(NamedContext {
            name: FLAGS_ENTRY.to_owned(),
            context: Some(Context {
                cluster: opts
                    .cluster
                    .clone()
                    .unwrap_or_else(|| FLAGS_ENTRY.to_owned()),
                user: opts.user.clone(),
                ..Context::default()
            }),
            other: Default::default(),
        });
        if opts.cluster.is_none() {
            kubeconfig.clusters.push(NamedCluster {
                name: FLAGS_ENTRY.to_owned(),
                cluster: Some(Cluster::default()),
                other: Default::default(),
            });
        }
        FLAGS_ENTRY.to_owned()
    } else {
        select(kubeconfig, source, opts)?
    };
    let entry = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.clone())
        .unwrap_or_default();
    let mut options = KubeConfigOptions {
        context: Some(context.clone()),
        cluster: opts.cluster.clone(),
        user: opts.user.clone(),
    };
    if opts.server.is_some()
        || opts.certificate_authority.is_some()
        || opts.insecure_skip_tls_verify
    {
        let name = opts.cluster.clone().unwrap_or(entry.cluster.clone());
        let mut cluster = kubeconfig
            .clusters
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.cluster.clone())
            .unwrap_or_default();
        if let Some(server) = &opts.server {
            cluster.server = Some(server.clone());
        }
        if let Some(ca) = &opts.certificate_authority {
            cluster.certificate_authority = Some(ca.display().to_string());
            cluster.certificate_authority_data = None;
        }
        if opts.insecure_skip_tls_verify {
            // As kubectl: skipping verification drops the CA rather than combining with it.
            cluster.insecure_skip_tls_verify = Some(true);
            cluster.certificate_authority = None;
            cluster.certificate_authority_data = None;
        }
        kubeconfig.clusters.retain(|c| c.name != FLAGS_ENTRY);
        kubeconfig.clusters.push(NamedCluster {
            name: FLAGS_ENTRY.to_owned(),
            cluster: Some(cluster),
            other: Default::default(),
        });
        options.cluster = Some(FLAGS_ENTRY.to_owned());
    }
    if let Some(token) = &opts.token {
        let name = opts.user.clone().or(entry.user.clone());
        let original = name
            .and_then(|n| kubeconfig.auth_infos.iter().find(|a| a.name == n).cloned())
            .and_then(|a| a.auth_info)
            .unwrap_or_default();
        // The token replaces the user's credentials (a client certificate stays, as with
        // kubectl); impersonation set in the kubeconfig stays too.
        let user = AuthInfo {
            token: Some(secrecy::SecretString::from(token.clone())),
            client_certificate: original.client_certificate,
            client_certificate_data: original.client_certificate_data,
            client_key: original.client_key,
            client_key_data: original.client_key_data,
            impersonate: original.impersonate,
            impersonate_uid: original.impersonate_uid,
            impersonate_groups: original.impersonate_groups,
            ..AuthInfo::default()
        };
        kubeconfig.auth_infos.retain(|a| a.name != FLAGS_ENTRY);
        kubeconfig.auth_infos.push(NamedAuthInfo {
            name: FLAGS_ENTRY.to_owned(),
            auth_info: Some(user),
            other: Default::default(),
        });
        options.user = Some(FLAGS_ENTRY.to_owned());
    }
    Ok((context, options))
}

fn validate(opts: &ClientOptions) -> Result<(), EffectsError> {
    if let Some(ns) = &opts.namespace
        && ns.is_empty()
    {
        return Err(EffectsError::InvalidOption {
            flag: "--namespace",
            problem: "it is empty; pass a namespace name".to_owned(),
        });
    }
    for (flag, value) in [
        ("--context", &opts.context),
        ("--cluster", &opts.cluster),
        ("--user", &opts.user),
        ("--as", &opts.impersonate),
    ] {
        if value.as_deref() == Some("") {
            return Err(EffectsError::InvalidOption {
                flag,
                problem: "it is empty; leave the flag out to use the kubeconfig's choice"
                    .to_owned(),
            });
        }
    }
    Ok(())
}

/// How long connecting to the API server (TCP and TLS) may take unless `--request-timeout`
/// says otherwise: a reachable API server answers in well under a second, even far away.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Applies the flags kube's `Config` has no kubeconfig entry for.
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn tune(config: &mut Config, opts: &ClientOptions) {
    // Our own retry loop reports each retry; kube's would retry silently underneath it and
    // multiply the attempts.
    config.default_retry = false;
    if opts.insecure_skip_tls_verify {
        config.accept_invalid_certs = true;
    }
    // kube's default is 30 s, as client-go's dialer (k8s.io/client-go/transport/cache.go,
    // `Timeout: 30 * time.Second`): an address that drops packets kept the user waiting that
    // long in silence before the first message. kube's connect timeout wraps the whole
    // connector (hyper-timeout's `TimeoutConnector` around the TLS one, kube-client
    // `client/builder.rs`), so it bounds the TCP connection and the TLS handshake together.
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    if let Some(timeout) = opts.request_timeout.filter(|t| !t.is_zero()) {
        // kube's read timeout is per read, not per request: a watch or a followed log that stays
        // quiet longer ends and is re-established by the wait loop, as a dropped one would be.
        config.connect_timeout = Some(timeout);
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        config.reset_reader_on_write = true;
    }
    // Inside a pod (no kubeconfig) the flags apply to the service account's configuration.
    if let Some(token) = &opts.token {
        config.auth_info.token = Some(secrecy::SecretString::from(token.clone()));
        config.auth_info.token_file = None;
    }
    if let Some(user) = &opts.impersonate {
        config.auth_info.impersonate = Some(user.clone());
    }
    if !opts.impersonate_groups.is_empty() {
        config.auth_info.impersonate_groups = Some(opts.impersonate_groups.clone());
    }
}

fn read_file(path: &Path) -> Result<Kubeconfig, EffectsError> {
    Kubeconfig::read_from(path).map_err(|source| EffectsError::ReadKubeconfig {
        path: path.to_owned(),
        source: Box::new(source),
    })
}

/// The kubeconfig kubectl would use: `--kubeconfig`, else the files `KUBECONFIG` lists (missing
/// ones skipped, as client-go does, the first to set a value winning), else `~/.kube/config`.
/// `None`: there is none at all (then the in-cluster config is tried).
/// The environment comes in as arguments so tests need not change the process's.
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn load_kubeconfig(
    explicit: Option<&Path>,
    env: Option<OsString>,
    home: Option<PathBuf>,
) -> Result<Option<(Kubeconfig, Source)>, EffectsError> {
    if let Some(path) = explicit {
        return Ok(Some((read_file(path)?, Source::File(path.to_owned()))));
    }
    let env = env.unwrap_or_default();
    let listed: Vec<PathBuf> = std::env::split_paths(&env)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    if !listed.is_empty() {
        let existing: Vec<PathBuf> = listed.iter().filter(|p| p.exists()).cloned().collect();
        if existing.is_empty() {
            return fallback(format!(
                "KUBECONFIG lists {}, none exists",
                listed
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(":")
            ));
        }
        let mut merged = Kubeconfig::default();
        for path in &existing {
            let next = read_file(path)?;
            merged = merged
                .merge(next)
                .map_err(|source| EffectsError::ReadKubeconfig {
                    path: path.clone(),
                    source: Box::new(source),
                })?;
        }
        return Ok(Some((merged, Source::Env(existing))));
    }
    match home.map(|h| h.join(".kube").join("config")) {
        Some(path) if path.exists() => Ok(Some((read_file(&path)?, Source::File(path)))),
        Some(path) => fallback(format!("{} does not exist", path.display())),
        None => fallback("no home directory to find ~/.kube/config in".to_owned()),
    }
}

/// No kubeconfig: inside a pod the service account is used, elsewhere that is an error.
fn fallback(looked_in: String) -> Result<Option<(Kubeconfig, Source)>, EffectsError> {
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        Ok(None)
    } else {
        Err(EffectsError::NoKubeconfig { looked_in })
    }
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .or_else(|| std::env::var_os("USERPROFILE"))
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// Picks the context and checks that what the flags name exists, so the error can list what
/// does (kube's own errors only say "not found").
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn select(
    kubeconfig: &Kubeconfig,
    source: &Source,
    opts: &ClientOptions,
) -> Result<String, EffectsError> {
    let describe = || source.describe();
    let contexts: Vec<String> = kubeconfig.contexts.iter().map(|c| c.name.clone()).collect();
    let context = match (&opts.context, &kubeconfig.current_context) {
        (Some(c), _) => c.clone(),
        (None, Some(c)) if !c.is_empty() => c.clone(),
        (None, _) => {
            return Err(EffectsError::NoCurrentContext {
                kubeconfig: describe(),
            });
        }
    };
    let Some(entry) = kubeconfig
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
    else {
        return Err(EffectsError::ContextNotFound {
            context,
            kubeconfig: describe(),
            available: contexts,
        });
    };
    let cluster = opts
        .cluster
        .clone()
        .unwrap_or_else(|| entry.cluster.clone());
    if !kubeconfig.clusters.iter().any(|c| c.name == cluster) {
        return Err(EffectsError::ClusterNotFound {
            cluster,
            context,
            kubeconfig: describe(),
            available: kubeconfig.clusters.iter().map(|c| c.name.clone()).collect(),
        });
    }
    // A missing user named by the context is tolerated (client-go does: anonymous access); one
    // named by --user is a typo worth reporting, as kubectl does.
    if let Some(user) = &opts.user
        && !kubeconfig.auth_infos.iter().any(|u| &u.name == user)
    {
        return Err(EffectsError::UserNotFound {
            user: user.clone(),
            kubeconfig: describe(),
            available: kubeconfig
                .auth_infos
                .iter()
                .map(|u| u.name.clone())
                .collect(),
        });
    }
    if !opts.impersonate_groups.is_empty() && opts.impersonate.is_none() {
        let user_name = opts.user.as_ref().or(entry.user.as_ref());
        let configured = user_name
            .and_then(|u| kubeconfig.auth_infos.iter().find(|a| &a.name == u))
            .and_then(|a| a.auth_info.as_ref())
            .and_then(|a| a.impersonate.as_ref())
            .is_some();
        if !configured {
            // The API server rejects group impersonation without a user; say so before asking.
            return Err(EffectsError::InvalidOption {
                flag: "--as-group",
                problem: "impersonating groups needs a user to impersonate: add --as USER"
                    .to_owned(),
            });
        }
    }
    Ok(context)
}
