//! PodSecurity admission, checked before any write: the level the migration's pods need,
//! computed from the pod specs the builders make, against the level the target namespace
//! enforces by its `pod-security.kubernetes.io/enforce` label.
//!
//! Kubernetes' checks are in `kubernetes/pod-security-admission`, `policy/check_*.go`; the
//! levels and the namespace labels in `api/constants.go`. What is mirrored here is the part
//! the migration's pods can violate: privileged containers (`check_privileged.go`), added
//! capabilities (`check_capabilities_baseline.go`: only AUDIT_WRITE, CHOWN, DAC_OVERRIDE,
//! FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID,
//! SYS_CHROOT at baseline), host namespaces (`check_hostNamespaces.go`), host paths and ports,
//! SELinux types (`check_seLinuxOptions.go`), AppArmor (`check_appArmorProfile.go`), and for
//! `restricted` non-root, no privilege escalation, dropped capabilities and a seccomp profile
//! (`check_runAsNonRoot.go`, `check_allowPrivilegeEscalation.go`,
//! `check_capabilities_restricted.go`, `check_seccompProfile_restricted.go`).
//!
//! A cluster-wide default level set by the apiserver's admission configuration
//! (`PodSecurityConfiguration`) is not visible from the namespace: it is not checked here.

use k8s_openapi::api::core::v1::{Container, PodSpec, SecurityContext};
use serde::Serialize;

use crate::builders::{data_sync, image_check, server, tftp};
use crate::object::{Kind, Object};
use crate::observed::{ExtractedData, Observed, PLACEHOLDER};
use crate::params::MigrateParams;
use crate::secret::SecretString;

pub const ENFORCE_LABEL: &str = "pod-security.kubernetes.io/enforce";
pub const WARN_LABEL: &str = "pod-security.kubernetes.io/warn";
pub const AUDIT_LABEL: &str = "pod-security.kubernetes.io/audit";

/// A Pod Security Standards level, from the least to the most permissive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    Restricted,
    Baseline,
    Privileged,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Restricted => "restricted",
            Level::Baseline => "baseline",
            Level::Privileged => "privileged",
        }
    }

    /// A label value; unknown values are treated as the apiserver does for `enforce`: an
    /// invalid level is evaluated as `restricted` (`admission/admission.go`, the
    /// `PolicyToEvaluate` error path), so unknown here means the strictest.
    pub fn parse(value: &str) -> Level {
        match value.trim() {
            "privileged" => Level::Privileged,
            "baseline" => Level::Baseline,
            _ => Level::Restricted,
        }
    }
}

/// Capabilities baseline allows in `capabilities.add`.
const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// SELinux types baseline allows (`check_seLinuxOptions.go`).
const BASELINE_SELINUX_TYPES: [&str; 4] = [
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];

/// What a pod needs: the least permissive level that admits it, and why it needs more than
/// `restricted` and `baseline`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub level: Level,
    /// Reasons it needs `privileged` (violations of baseline).
    pub beyond_baseline: Vec<String>,
    /// Reasons it needs at least `baseline` (violations of restricted).
    pub beyond_restricted: Vec<String>,
}

fn containers(spec: &PodSpec) -> impl Iterator<Item = &Container> {
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
}

/// The level one pod spec needs. Pure.
pub fn required(spec: &PodSpec) -> Need {
    let mut baseline = Vec::new();
    let mut restricted = Vec::new();
    if spec.host_network == Some(true) {
        baseline.push("uses the node's network (hostNetwork)".to_owned());
    }
    if spec.host_pid == Some(true) || spec.host_ipc == Some(true) {
        baseline.push("uses the node's PID or IPC namespace".to_owned());
    }
    for v in spec.volumes.iter().flatten() {
        if v.host_path.is_some() {
            baseline.push(format!("mounts a hostPath volume ({})", v.name));
        }
    }
    let pod_sc = spec.security_context.as_ref();
    let pod_non_root = pod_sc.and_then(|s| s.run_as_non_root) == Some(true);
    let pod_seccomp = pod_sc
        .and_then(|s| s.seccomp_profile.as_ref())
        .map(|p| p.type_.clone());
    if let Some(se) = pod_sc.and_then(|s| s.se_linux_options.as_ref())
        && let Some(t) = se.type_.as_deref()
        && !BASELINE_SELINUX_TYPES.contains(&t)
    {
        baseline.push(format!("sets the pod's SELinux type {t}"));
    }
    for c in containers(spec) {
        let name = &c.name;
        let sc: SecurityContext = c.security_context.clone().unwrap_or_default();
        if sc.privileged == Some(true) {
            baseline.push(format!("container {name} is privileged"));
        }
        let added: Vec<String> = sc
            .capabilities
            .as_ref()
            .and_then(|caps| caps.add.clone())
            .unwrap_or_default();
        for cap in &added {
            let bare = cap.trim_start_matches("CAP_");
            if !BASELINE_CAPABILITIES.contains(&bare) {
                baseline.push(format!("container {name} adds capability {cap}"));
            } else if bare != "NET_BIND_SERVICE" {
                restricted.push(format!("container {name} adds capability {cap}"));
            }
        }
        if let Some(t) = sc
            .se_linux_options
            .as_ref()
            .and_then(|s| s.type_.as_deref())
            && !BASELINE_SELINUX_TYPES.contains(&t)
        {
            baseline.push(format!("container {name} sets SELinux type {t}"));
        }
        if sc
            .app_armor_profile
            .as_ref()
            .is_some_and(|p| p.type_ == "Unconfined")
        {
            baseline.push(format!(
                "container {name} runs without AppArmor (Unconfined)"
            ));
        }
        if c.ports
            .iter()
            .flatten()
            .any(|p| p.host_port.is_some_and(|h| h != 0))
        {
            baseline.push(format!("container {name} uses a host port"));
        }
        let seccomp = sc
            .seccomp_profile
            .as_ref()
            .map(|p| p.type_.clone())
            .or_else(|| pod_seccomp.clone());
        if seccomp.as_deref() == Some("Unconfined") {
            baseline.push(format!(
                "container {name} runs without seccomp (Unconfined)"
            ));
        }
        if !matches!(seccomp.as_deref(), Some("RuntimeDefault" | "Localhost")) {
            restricted.push(format!("container {name} sets no seccomp profile"));
        }
        if sc.run_as_non_root != Some(true) && !pod_non_root {
            restricted.push(format!("container {name} may run as root"));
        }
        if sc.allow_privilege_escalation != Some(false) {
            restricted.push(format!(
                "container {name} does not forbid privilege escalation"
            ));
        }
        let drops_all = sc
            .capabilities
            .as_ref()
            .and_then(|caps| caps.drop.as_ref())
            .is_some_and(|d| d.iter().any(|c| c == "ALL"));
        if !drops_all {
            restricted.push(format!("container {name} does not drop all capabilities"));
        }
    }
    let level = if !baseline.is_empty() {
        Level::Privileged
    } else if !restricted.is_empty() {
        Level::Baseline
    } else {
        Level::Restricted
    };
    Need {
        level,
        beyond_baseline: baseline,
        beyond_restricted: restricted,
    }
}

/// Data standing in for what the sync finds, so that the pods of the later steps can be built
/// before it ran: every optional part on, as the migration may need it.
fn stand_in_data() -> ExtractedData {
    ExtractedData {
        job: PLACEHOLDER.to_owned(),
        timezone: "UTC".to_owned(),
        pg_version: PLACEHOLDER.to_owned(),
        db_user: PLACEHOLDER.to_owned(),
        db_password: SecretString::new(PLACEHOLDER),
        db_name: PLACEHOLDER.to_owned(),
        db_port: "5432".to_owned(),
        report_db_user: PLACEHOLDER.to_owned(),
        report_db_password: SecretString::new(PLACEHOLDER),
        has_hubxmlrpc: true,
        debug: true,
        tftp: Some(true),
        mirror: None,
        fqdn: None,
        ca_cert: None,
        ca_key: None,
        server_cert: None,
        server_key: None,
        placeholder: true,
    }
}

/// Every kind of pod the migration runs, by the object that makes it: the image checks, the
/// data syncs (final, and the copy while the source serves), the database's Jobs (fixup, upgrade, passwords, migration SQL) and Deployment,
/// the CA key Job, the server, the hub XML-RPC API, the confidential-computing attestation
/// and the TFTP server. Each is built by the builder the plan uses, with data that turns every
/// optional part on, so that no pod of the run escapes the check (a Job that PodSecurity
/// rejects after the source was stopped would leave it down).
pub fn pods(params: &MigrateParams) -> Vec<(String, PodSpec)> {
    use crate::builders::database;
    let data = stand_in_data();
    let mut jobs = image_check::jobs(params);
    jobs.push(data_sync::data_sync_job(params));
    // A final run without an earlier --prepare copies while the source serves first.
    let mut prepare_copy = data_sync::data_sync_job(&MigrateParams {
        prepare: true,
        ..params.clone()
    });
    prepare_copy.metadata.name = Some(data_sync::prepare_job_name(&params.run_id));
    jobs.push(prepare_copy);
    // The database Jobs as a PostgreSQL upgrade runs them: the most that runs.
    let upgrade = crate::pg::Upgrade::Unknown;
    jobs.push(database::fixup_job(params, &data, upgrade));
    jobs.push(database::upgrade_job(params, &data, None));
    jobs.push(database::passwords_job(params, &data, upgrade));
    jobs.push(database::migration_sql_job(params, &data));
    jobs.push(crate::builders::tls::ca_key_job(params, &data));
    // The facts of a cluster holding nothing yet: no earlier run's objects.
    let facts = crate::resolve::resolve(params, &Observed::default(), &data);
    let fqdn = facts.fqdn.clone();
    let settings = crate::settings::ServerSettings::migrated(&data);
    pod_specs(jobs, server_deployments(params, &settings, &facts, &fqdn))
}

/// The Deployments of the server's end state, every optional one included.
fn server_deployments(
    params: &crate::params::ServerParams,
    settings: &crate::settings::ServerSettings,
    facts: &crate::resolve::Facts,
    fqdn: &str,
) -> Vec<k8s_openapi::api::apps::v1::Deployment> {
    use crate::builders::database;
    let mut deployments = vec![
        database::db_deployment(params, settings, &facts.db_claim),
        server::server_deployment(params, settings, facts),
        server::hub_deployment(&params.namespace, &params.spec, 1),
        server::coco_deployment(params, settings),
    ];
    if params.spec.tftp.enabled != Some(false) {
        deployments.push(tftp::tftp_deployment(
            &params.namespace,
            &params.spec,
            fqdn,
            1,
        ));
    }
    deployments
}

/// Every kind of pod an install runs: the image checks and the server's Deployments.
pub fn install_pods(
    params: &crate::params::InstallParams,
    settings: &crate::settings::ServerSettings,
) -> Vec<(String, PodSpec)> {
    let facts = crate::resolve::install(params, &Observed::default());
    pod_specs(
        image_check::install_jobs(params),
        server_deployments(params, settings, &facts, &params.fqdn),
    )
}

fn pod_specs(
    jobs: Vec<k8s_openapi::api::batch::v1::Job>,
    deployments: Vec<k8s_openapi::api::apps::v1::Deployment>,
) -> Vec<(String, PodSpec)> {
    let mut out = Vec::new();
    for job in jobs {
        let name = format!("Job {}", job.metadata.name.clone().unwrap_or_default());
        if let Some(spec) = job.spec.and_then(|s| s.template.spec) {
            out.push((name, spec));
        }
    }
    // As a Deployment is created now: hardened (`builders::hardening`). One written by an
    // earlier version without it needs no less, and none of it raises the level.
    for d in deployments
        .into_iter()
        .map(crate::builders::hardening::deployment)
    {
        let name = format!("Deployment {}", d.metadata.name.clone().unwrap_or_default());
        if let Some(spec) = d.spec.and_then(|s| s.template.spec) {
            out.push((name, spec));
        }
    }
    out
}

/// The level the migration needs, and the reasons, pod by pod.
pub fn needed(params: &MigrateParams) -> (Level, Vec<String>) {
    needed_by(pods(params))
}

/// The level these pods need, and the reasons, pod by pod.
fn needed_by(pods: Vec<(String, PodSpec)>) -> (Level, Vec<String>) {
    let mut level = Level::Restricted;
    let mut reasons = Vec::new();
    let needs: Vec<(String, Need)> = pods
        .into_iter()
        .map(|(name, spec)| (name, required(&spec)))
        .collect();
    for (_, need) in &needs {
        level = level.max(need.level);
    }
    for (name, need) in &needs {
        let why = match level {
            Level::Privileged => &need.beyond_baseline,
            Level::Baseline => &need.beyond_restricted,
            Level::Restricted => continue,
        };
        if let Some(first) = why.first() {
            reasons.push(format!("{name}: {first}"));
        }
    }
    (level, reasons)
}

fn namespace_label<'a>(observed: &'a Observed, ns: &str, label: &str) -> Option<&'a str> {
    match observed.get(Kind::Namespace, ns) {
        Some(Object::Namespace(n)) => n
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(label))
            .map(String::as_str),
        _ => None,
    }
}

/// A namespace whose enforced level the migration's pods exceed: what `check` refuses with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub namespace: String,
    /// The level the namespace enforces, as its label says it.
    pub enforced: String,
    /// The level the migration's pods need.
    pub needed: &'static str,
    /// Why they need it, one line per pod feature.
    pub reasons: Vec<String>,
}

/// Refuses, before any write, a namespace whose enforced level would reject the migration's
/// pods.
pub fn check(params: &MigrateParams, observed: &Observed) -> Result<(), Refusal> {
    check_pods(&params.namespace, observed, || pods(params))
}

/// [`check`] for an install's pods.
pub fn check_install(
    params: &crate::params::InstallParams,
    settings: &crate::settings::ServerSettings,
    observed: &Observed,
) -> Result<(), Refusal> {
    check_pods(&params.namespace, observed, || {
        install_pods(params, settings)
    })
}

fn check_pods(
    ns: &str,
    observed: &Observed,
    pods: impl FnOnce() -> Vec<(String, PodSpec)>,
) -> Result<(), Refusal> {
    let Some(value) = namespace_label(observed, ns, ENFORCE_LABEL) else {
        return Ok(());
    };
    let enforced = Level::parse(value);
    let (needed, reasons) = needed_by(pods());
    if needed <= enforced {
        return Ok(());
    }
    Err(Refusal {
        namespace: ns.to_owned(),
        enforced: value.to_owned(),
        needed: needed.name(),
        reasons,
    })
}

/// Warning lines for `warn` and `audit` labels the migration's pods exceed: no refusal, the
/// apiserver admits the pods and only warns or records.
pub fn warnings(params: &MigrateParams, observed: &Observed) -> Vec<String> {
    warnings_of(&params.namespace, observed, "the migration's pods", || {
        pods(params)
    })
}

/// [`warnings`] for an install's pods.
pub fn install_warnings(params: &crate::params::InstallParams, observed: &Observed) -> Vec<String> {
    let settings = crate::settings::ServerSettings::for_install(params);
    warnings_of(&params.namespace, observed, "the install's pods", || {
        install_pods(params, &settings)
    })
}

fn warnings_of(
    ns: &str,
    observed: &Observed,
    whose: &str,
    pods: impl FnOnce() -> Vec<(String, PodSpec)>,
) -> Vec<String> {
    let labelled = [WARN_LABEL, AUDIT_LABEL]
        .iter()
        .any(|l| namespace_label(observed, ns, l).is_some());
    if !labelled {
        return Vec::new();
    }
    let (needed, reasons) = needed_by(pods());
    [(WARN_LABEL, "warns about"), (AUDIT_LABEL, "records in the audit log")]
        .into_iter()
        .filter_map(|(label, what)| {
            let value = namespace_label(observed, ns, label)?;
            (needed > Level::parse(value)).then(|| {
                format!(
                    "namespace {ns} has label {label}={value}: the apiserver {what} {whose}, which need PodSecurity level {} ({}); they are admitted all the same",
                    needed.name(),
                    reasons.join("; ")
                )
            })
        })
        .collect()
}
