//! What can go wrong while talking to the cluster, as one error type whose every variant names
//! the verb, the object, and what to do next.
//!
//! Nothing here ever holds the content of an object: errors are printed to the user and end up in
//! bug reports, and Secret data must never go there.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use uyuni_core::kubectl::Kubectl;

/// The kind of request that failed, as a user reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Get,
    List,
    Watch,
    /// Server-side apply.
    Apply,
    /// Reading a container log.
    Log,
    /// Changing a Deployment's replicas (a merge patch).
    Scale,
    /// Writing an annotation (a merge patch).
    Annotate,
    Delete,
}

impl Verb {
    /// The verb as `kubectl auth can-i` takes it.
    pub fn rbac(self) -> &'static str {
        match self {
            Verb::Get | Verb::Log => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Apply | Verb::Scale | Verb::Annotate => "patch",
            Verb::Delete => "delete",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Apply => "apply",
            Verb::Log => "read the log of",
            Verb::Scale => "scale",
            Verb::Annotate => "annotate",
            Verb::Delete => "delete",
        })
    }
}

/// The object (or set of objects) a request was about. Pods are not among the kinds the core
/// knows, so this is not an [`uyuni_core::ObjectRef`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The resource as `kubectl get` takes it: `job`, `pod`, `secret`, …
    pub resource: String,
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub selector: Option<String>,
}

impl Target {
    pub fn named(resource: &str, name: &str, namespace: Option<&str>) -> Target {
        Target {
            resource: resource.to_owned(),
            name: Some(name.to_owned()),
            namespace: namespace.map(str::to_owned),
            selector: None,
        }
    }

    /// Every object of a kind in a namespace; `resource` singular (`secret`).
    pub fn every(resource: &str, namespace: &str) -> Target {
        Target {
            resource: resource.to_owned(),
            name: None,
            namespace: Some(namespace.to_owned()),
            selector: None,
        }
    }

    pub fn selected(resource: &str, selector: &str, namespace: &str) -> Target {
        Target {
            resource: resource.to_owned(),
            name: None,
            namespace: Some(namespace.to_owned()),
            selector: Some(selector.to_owned()),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.name, &self.selector) {
            (Some(name), _) => write!(f, "{}/{}", self.resource, name)?,
            (None, Some(selector)) => write!(f, "{}s matching {selector}", self.resource)?,
            (None, None) => write!(f, "{}s", self.resource)?,
        }
        if let Some(ns) = &self.namespace {
            write!(f, " in namespace {ns}")?;
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EffectsError {
    // --- connecting -------------------------------------------------------------------------
    #[error(
        "cannot read kubeconfig {path}: {source}; check the file, or pass another one with --kubeconfig"
    )]
    ReadKubeconfig {
        path: PathBuf,
        #[source]
        source: Box<kube::config::KubeconfigError>,
    },
    #[error(
        "no kubeconfig found ({looked_in}) and not running inside a cluster: pass --kubeconfig FILE or set KUBECONFIG"
    )]
    NoKubeconfig { looked_in: String },
    #[error("{}", self.render(&Kubectl::BARE))]
    NoCurrentContext { kubeconfig: String },
    #[error("{}", self.render(&Kubectl::BARE))]
    ContextNotFound {
        context: String,
        kubeconfig: String,
        available: Vec<String>,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    ClusterNotFound {
        cluster: String,
        context: String,
        kubeconfig: String,
        available: Vec<String>,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    UserNotFound {
        user: String,
        kubeconfig: String,
        available: Vec<String>,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    LoadContext {
        context: String,
        kubeconfig: String,
        #[source]
        source: Box<kube::config::KubeconfigError>,
    },
    #[error("cannot load the in-cluster configuration: {source}; pass --kubeconfig FILE")]
    InCluster {
        #[source]
        source: Box<kube::config::InClusterError>,
    },
    #[error("invalid {flag}: {problem}")]
    InvalidOption { flag: &'static str, problem: String },
    #[error("{}", self.render(&Kubectl::BARE))]
    BuildClient {
        context: String,
        #[source]
        source: Box<kube::Error>,
    },

    // --- talking to the API server ----------------------------------------------------------
    /// A request failed for good (after `attempts` tries when the failure looked transient).
    #[error("{}", self.render(&Kubectl::BARE))]
    Api {
        verb: Verb,
        target: Target,
        attempts: u32,
        #[source]
        source: Box<kube::Error>,
    },
    /// The API server could not be connected to, and never answered since the client was made.
    #[error("{}", self.render(&Kubectl::BARE))]
    Unreachable {
        server: String,
        /// `None`: no kubeconfig context (the flags, or the pod's service account).
        context: Option<String>,
        attempts: u32,
        reason: String,
        /// The connection failed its TLS checks: the server's certificate was not accepted.
        tls: bool,
    },
    /// A watch ended with an error that re-watching does not cure.
    #[error("{}", self.render(&Kubectl::BARE))]
    Watch {
        verb: Verb,
        target: Target,
        attempts: u32,
        #[source]
        source: Box<kube::runtime::watcher::Error>,
    },

    // --- Jobs -------------------------------------------------------------------------------
    #[error("{}", self.render(&Kubectl::BARE))]
    JobFailed {
        step: String,
        job: String,
        namespace: String,
        reason: String,
        /// The last lines of the Job's log (the Job's own output: scripts never print secrets).
        log_tail: Vec<String>,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    InspectionReportMissing {
        step: String,
        job: String,
        namespace: String,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    PodCannotStart {
        step: String,
        job: String,
        namespace: String,
        pod: String,
        container: String,
        reason: String,
        message: Option<String>,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    JobTimeout {
        step: String,
        job: String,
        namespace: String,
        waited: Duration,
    },
    #[error(
        "step {step}: Job {job} was not found in namespace {namespace}; it may have been deleted: run the command again to plan anew"
    )]
    JobNotFound {
        step: String,
        job: String,
        namespace: String,
    },
    #[error(
        "step {step}: Job {job} in namespace {namespace} was deleted while it ran; run the command again to start a new attempt"
    )]
    JobDeleted {
        step: String,
        job: String,
        namespace: String,
    },
    // --- Deployments ------------------------------------------------------------------------
    #[error("{}", self.render(&Kubectl::BARE))]
    DeploymentFailed {
        step: String,
        deployment: String,
        namespace: String,
        /// The pod that shows the failure, if one does.
        pod: Option<String>,
        reason: String,
        /// The last lines of the failing container's log (the previous run for a crash loop).
        log_tail: Vec<String>,
        /// What to do about the pod ([`uyuni_core::verdict::hint`] of its reason), shown with it.
        hint: &'static str,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    DeploymentTimeout {
        step: String,
        deployment: String,
        namespace: String,
        waited: Duration,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    NotReady {
        step: String,
        target: Target,
        waited: Duration,
        reason: String,
    },
    /// A deleted object still there when the step's wait ended: finalizers (in the foreground,
    /// the garbage collector's own, until the dependents are gone) hold it.
    #[error("{}", self.render(&Kubectl::BARE))]
    NotDeleted {
        step: String,
        target: Target,
        waited: Duration,
        propagation: &'static str,
    },
    #[error(
        "step {step}: deployment/{deployment} was not found in namespace {namespace}; run the command again to plan anew"
    )]
    DeploymentNotFound {
        step: String,
        deployment: String,
        namespace: String,
    },

    #[error(
        "step {step}: cannot {verb} {target}: the object has no {missing}; this is a bug in kubectl-uyuni's planner"
    )]
    MalformedObject {
        step: String,
        verb: Verb,
        target: Target,
        missing: &'static str,
    },
}

impl EffectsError {
    /// The API server refused the credentials (401 Unauthorized): the whole story of a run's
    /// failure, whatever was being read.
    pub fn unauthorized(&self) -> bool {
        matches!(self, EffectsError::Api { source, .. }
            if matches!(source.as_ref(), kube::Error::Api(status) if status.code == 401))
    }

    /// The API server refused a request with 403 Forbidden: `Some((verb, target))` of it.
    pub fn forbidden(&self) -> Option<(Verb, &Target)> {
        use kube::runtime::watcher::Error as W;
        let code = match self {
            EffectsError::Api { source, .. } => match source.as_ref() {
                kube::Error::Api(status) => status.code,
                _ => 0,
            },
            EffectsError::Watch { source, .. } => match source.as_ref() {
                W::InitialListFailed(kube::Error::Api(status))
                | W::WatchStartFailed(kube::Error::Api(status))
                | W::WatchFailed(kube::Error::Api(status)) => status.code,
                W::WatchError(status) => status.code,
                _ => 0,
            },
            _ => 0,
        };
        match self {
            EffectsError::Api { verb, target, .. } | EffectsError::Watch { verb, target, .. }
                if code == 403 =>
            {
                Some((*verb, target))
            }
            _ => None,
        }
    }

    /// The message, with the `kubectl` commands it advises carrying the run's flags (`k`).
    /// `Display` renders it without them.
    pub fn render(&self, k: &Kubectl) -> String {
        // The same flags in another context (the one the error is about).
        let in_context = |context: &str| Kubectl {
            context: Some(context.to_owned()),
            ..k.clone()
        };
        match self {
            EffectsError::NoCurrentContext { kubeconfig } => format!(
                "kubeconfig {kubeconfig} has no current context: pass --context NAME or run `{}` (`{}` lists them)",
                k.cmd(None, "config use-context NAME"),
                k.cmd(None, "config get-contexts")
            ),
            EffectsError::ContextNotFound {
                context,
                kubeconfig,
                available,
            } => format!(
                "context {context:?} not found in {kubeconfig}{}; `{}` lists them",
                known_list("contexts", available),
                Kubectl {
                    context: None,
                    ..k.clone()
                }
                .cmd(None, "config get-contexts")
            ),
            EffectsError::ClusterNotFound {
                cluster,
                context,
                kubeconfig,
                available,
            } => format!(
                "cluster {cluster:?} (of context {context:?}) not found in {kubeconfig}{}; `{}` lists them",
                known_list("clusters", available),
                Kubectl {
                    context: None,
                    ..k.clone()
                }
                .cmd(None, "config get-clusters")
            ),
            EffectsError::UserNotFound {
                user,
                kubeconfig,
                available,
            } => format!(
                "user {user:?} not found in {kubeconfig}{}; `{}` lists them",
                known_list("users", available),
                Kubectl {
                    context: None,
                    ..k.clone()
                }
                .cmd(None, "config get-users")
            ),
            EffectsError::LoadContext {
                context,
                kubeconfig,
                source,
            } => format!(
                "cannot load context {context:?} from {kubeconfig}: {source}; fix the entry (`{}`)",
                in_context(context).cmd(None, "config view --minify")
            ),
            EffectsError::BuildClient { context, source } => format!(
                "cannot build a client for context {context:?}: {source}; check the cluster's server URL and certificates (`{}`)",
                in_context(context).cmd(None, "config view --minify")
            ),
            // Refused credentials refuse every request alike: which one came first (often a
            // discovery of cert-manager's API) would point the reader elsewhere.
            EffectsError::Api {
                verb,
                target,
                source,
                ..
            } if self.unauthorized() => format!(
                "the API server{} refused this run's credentials: {}; {}",
                of_context(k.context.as_deref()),
                api_reason(source),
                api_hint(k, *verb, target, source)
            ),
            EffectsError::Api {
                verb,
                target,
                attempts,
                source,
            } => format!(
                "cannot {verb} {target}{}: {}; {}",
                attempts_note(*attempts),
                api_reason(source),
                api_hint(k, *verb, target, source)
            ),
            EffectsError::Unreachable {
                server,
                context,
                reason,
                tls: true,
                ..
            } => format!(
                "cannot reach the API server {server}{}: its certificate was not accepted ({reason}); pass the CA that signed it with --certificate-authority FILE, or fix the cluster's certificate-authority in the kubeconfig (`{}`)",
                of_context(context.as_deref()),
                k.cmd(None, "config view --minify"),
            ),
            EffectsError::Unreachable {
                server,
                context,
                attempts,
                reason,
                tls: false,
            } if k.server.is_some() => format!(
                "cannot reach the API server {server}{}: {reason} ({}); check the address given with --server and that the server is up (`{}`)",
                of_context(context.as_deref()),
                tries(*attempts),
                k.cmd(None, "cluster-info"),
            ),
            EffectsError::Unreachable {
                server,
                context,
                attempts,
                reason,
                tls: false,
            } => format!(
                "cannot reach the API server {server}{}: {reason} ({}); check the address and that the server is up (`{}`), or choose another context (`{}`)",
                of_context(context.as_deref()),
                tries(*attempts),
                k.cmd(None, "cluster-info"),
                Kubectl {
                    context: None,
                    ..k.clone()
                }
                .cmd(None, "config get-contexts"),
            ),
            EffectsError::Watch {
                verb,
                target,
                attempts,
                source,
            } => format!(
                "cannot {verb} {target}{}: {source}; check that the API server is reachable (`{}`), then run again",
                attempts_note(*attempts),
                k.cmd(None, "cluster-info")
            ),
            EffectsError::JobFailed {
                step,
                job,
                namespace,
                reason,
                log_tail,
            } => job_failed(k, step, job, namespace, reason, log_tail),
            EffectsError::InspectionReportMissing {
                step,
                job,
                namespace,
            } => format!(
                "step {step}: Job {job} in namespace {namespace} succeeded, but no pod of it holds its report any more (the report is its container's termination message): delete the Job (`{}`) and run again; the inspection runs anew",
                k.cmd(Some(namespace), &format!("delete job {job}"))
            ),
            EffectsError::PodCannotStart {
                step,
                job,
                namespace,
                pod,
                container,
                reason,
                message,
            } => format!(
                "step {step}: Job {job} in namespace {namespace} cannot start: container {container} of pod {pod} is waiting: {reason}{}; see `{}`, fix the cause ({}), then run again (the Job is left in place)",
                message
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default(),
                k.cmd(Some(namespace), &format!("describe pod {pod}")),
                uyuni_core::verdict::hint(reason)
            ),
            EffectsError::JobTimeout {
                step,
                job,
                namespace,
                waited,
            } => format!(
                "step {step}: Job {job} in namespace {namespace} is still running after {}; it keeps running in the cluster: follow it with `{}`, and run the command again to wait for it",
                human_duration(*waited),
                k.cmd(Some(namespace), &format!("logs -f job/{job}"))
            ),
            EffectsError::DeploymentFailed {
                step,
                deployment,
                namespace,
                pod,
                reason,
                log_tail,
                hint,
            } => deployment_failed(
                k,
                step,
                deployment,
                namespace,
                pod.as_deref().map(|pod| (pod, *hint)),
                reason,
                log_tail,
            ),
            EffectsError::DeploymentTimeout {
                step,
                deployment,
                namespace,
                waited,
            } => format!(
                "step {step}: deployment/{deployment} in namespace {namespace} is not ready after {}; it stays in place: see `{}` and `{}`, then run the command again to keep waiting",
                human_duration(*waited),
                k.cmd(
                    Some(namespace),
                    &format!("describe deployment {deployment}")
                ),
                k.cmd(Some(namespace), &format!("logs deployment/{deployment}"))
            ),
            EffectsError::NotReady {
                step,
                target,
                waited,
                reason,
            } => format!(
                "step {step}: {target} is not ready after {} ({reason}); see `{}`, fix the cause, then run the command again to keep waiting",
                human_duration(*waited),
                k.cmd(
                    target.namespace.as_deref(),
                    &format!(
                        "describe {} {}",
                        target.resource,
                        target.name.as_deref().unwrap_or_default()
                    )
                )
            ),
            EffectsError::NotDeleted {
                step,
                target,
                waited,
                propagation,
            } => format!(
                "step {step}: {target} is still there {} after it was deleted (propagationPolicy {propagation}); its finalizers, or dependents still being removed, hold it: see metadata.finalizers and metadata.deletionTimestamp in `{}`, resolve what holds it, then run the command again",
                human_duration(*waited),
                k.cmd(
                    target.namespace.as_deref(),
                    &format!(
                        "get {} {} -o yaml",
                        target.resource,
                        target.name.as_deref().unwrap_or_default()
                    )
                )
            ),
            // Their messages advise no kubectl command, or only a flag. (A variant whose
            // `#[error]` calls `render` must have its own arm above.)
            EffectsError::ReadKubeconfig { .. }
            | EffectsError::NoKubeconfig { .. }
            | EffectsError::InCluster { .. }
            | EffectsError::InvalidOption { .. }
            | EffectsError::JobNotFound { .. }
            | EffectsError::JobDeleted { .. }
            | EffectsError::DeploymentNotFound { .. }
            | EffectsError::MalformedObject { .. } => self.to_string(),
        }
    }
}

fn tries(attempts: u32) -> String {
    if attempts == 1 {
        "1 attempt".to_owned()
    } else {
        format!("{attempts} attempts")
    }
}

fn of_context(context: Option<&str>) -> String {
    match context {
        Some(c) => format!(" of context {c}"),
        None => String::new(),
    }
}

/// The innermost cause of `err`, or its own text: what a TLS failure comes down to.
pub(crate) fn root_cause_text(err: &kube::Error) -> String {
    root_cause(err).unwrap_or_else(|| err.to_string())
}

fn known_list(what: &str, names: &[String]) -> String {
    if names.is_empty() {
        format!(" (it has no {what})")
    } else {
        format!(" (it has: {})", names.join(", "))
    }
}

fn attempts_note(attempts: u32) -> String {
    if attempts > 1 {
        format!(" (after {attempts} attempts)")
    } else {
        String::new()
    }
}

/// The API server's own words, without kube's debug dump of the whole Status: what a message
/// shows of a `kube::Error` (whose `Display` ends in `Status { … }`).
pub fn api_reason(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) if !status.message.is_empty() => {
            format!("{} ({})", status.message, status.code)
        }
        kube::Error::Api(status) => format!("{} ({})", status.reason, status.code),
        other => {
            // kube's own text stops at "client error (Connect)"; the cause is at the bottom.
            let top = other.to_string();
            match root_cause(other) {
                Some(root) if !top.contains(&root) => format!("{top}: {root}"),
                _ => top,
            }
        }
    }
}

/// [`api_reason`] of `cause` when it is a `kube::Error`: for a chain of errors printed by a
/// caller that does not know kube's types.
pub fn kube_reason(cause: &(dyn std::error::Error + 'static)) -> Option<String> {
    cause.downcast_ref::<kube::Error>().map(api_reason)
}

/// The innermost error of a chain, looking inside wrapping I/O errors too.
fn root_cause(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut last: Option<&(dyn std::error::Error + 'static)> = None;
    let mut current = err.source();
    while let Some(e) = current {
        last = Some(e);
        current = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    last.map(ToString::to_string)
}

/// What to do next, by the kind of failure.
fn api_hint(k: &Kubectl, verb: Verb, target: &Target, err: &kube::Error) -> String {
    let code = match err {
        kube::Error::Api(status) => status.code,
        _ => 0,
    };
    // `auth can-i get pods/log` would ask about the pod named `log`.
    let resource = if verb == Verb::Log {
        "pods --subresource=log"
    } else {
        target.resource.as_str()
    };
    match code {
        401 if k.token => "the token given with --token was refused: check that it is the whole token and has not expired or been revoked".to_owned(),
        401 => format!("your credentials were refused: log in again or check the user in your kubeconfig (`{}`)", k.cmd(None, "config view --minify")),
        403 => {
            // The object by name where there is one: a Role may grant some names only.
            let object = match (&target.name, verb) {
                (Some(name), v) if v != Verb::Log => format!("{resource}/{name}"),
                _ => resource.to_owned(),
            };
            format!(
                "you may not {} {}: check with `{}`, and ask a cluster administrator for the permission (a Role or ClusterRole bound to your user); if that says yes, an admission policy refused it, as the server's message says",
                verb.rbac(),
                match &target.namespace {
                    Some(ns) => format!("{resource} in namespace {ns}"),
                    None => format!("{resource} (cluster-wide)"),
                },
                k.cmd(target.namespace.as_deref(), &format!("auth can-i {} {object}", verb.rbac()))
            )
        }
        404 => "it does not exist (or its API is not served by this cluster)".to_owned(),
        409 => "someone else changed it at the same time: run the command again".to_owned(),
        422 | 400 => "the API server rejected the object; this is likely a bug in kubectl-uyuni, please report it with the message above".to_owned(),
        429 | 500..=599 => format!("the API server is overloaded or failing: wait a little and run the command again (`{}` shows whether it is reachable)", k.cmd(None, "cluster-info")),
        0 if crate::retry::is_permanent_transport_error(err) => format!("the connection to the API server failed its TLS checks: check the cluster's certificate-authority in your kubeconfig (`{}`)", k.cmd(None, "config view --minify")),
        _ => format!("check that the API server is reachable (`{}`) and run the command again", k.cmd(None, "cluster-info")),
    }
}

/// The message of a Deployment that cannot become ready.
pub(crate) fn deployment_failed(
    k: &Kubectl,
    step: &str,
    deployment: &str,
    namespace: &str,
    // The pod that shows the failure, with what to do about it.
    pod: Option<(&str, &str)>,
    reason: &str,
    log_tail: &[String],
) -> String {
    let mut out = format!(
        "step {step}: deployment/{deployment} in namespace {namespace} cannot become ready: {reason}"
    );
    if !log_tail.is_empty() {
        out.push_str("\nlast log lines:");
        for line in log_tail {
            out.push_str("\n  ");
            out.push_str(line);
        }
    }
    match pod {
        Some((pod, hint)) => out.push_str(&format!(
            "\nsee `{}` and `{}`; fix the cause ({}), then run the command again (everything written so far stays)",
            k.cmd(Some(namespace), &format!("describe pod {pod}")),
            k.cmd(Some(namespace), &format!("logs {pod} --previous")),
            hint
        )),
        None => out.push_str(&format!(
            "\nsee `{}`; fix the cause, then run the command again (everything written so far stays)",
            k.cmd(Some(namespace), &format!("describe deployment {deployment}"))
        )),
    }
    out
}

fn human_duration(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..=119 => format!("{secs}s"),
        120..=7199 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60),
    }
}

/// The message of a failed Job: what failed, why, its last log lines, and where the rest is.
pub(crate) fn job_failed(
    k: &Kubectl,
    step: &str,
    job: &str,
    namespace: &str,
    reason: &str,
    log_tail: &[String],
) -> String {
    let mut out = format!("step {step}: Job {job} in namespace {namespace} failed: {reason}");
    if log_tail.is_empty() {
        out.push_str("\n(its log is empty or could not be read)");
    } else {
        out.push_str(&format!("\nlast {} log lines:", log_tail.len()));
        for line in log_tail {
            out.push_str("\n  | ");
            out.push_str(line);
        }
    }
    out.push_str(&format!(
        "\nread the whole log with `{}`; fix the cause, then run the command again (a new attempt is started, this Job stays for reference)",
        k.cmd(Some(namespace), &format!("logs job/{job}"))
    ));
    out
}
