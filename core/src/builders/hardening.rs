//! Pod security beyond what a component needs to run (issue 37): the runtime's default seccomp
//! profile, no privilege escalation where the image allows it, no ServiceAccount token where
//! the pod never calls the API, NET_RAW dropped, resource requests and limits; and, for what
//! cannot be hardened, Checkov's own skip annotation (`checkov.io/skipN: CHECK=reason`) with
//! the reason, which docs/security.md lists. `core/tests/policy_scan.rs` runs Checkov over
//! every object the commands write.
//!
//! A Deployment's builder gives its pod as it has always been (the *base*); [`deployment`]
//! adds the hardening. A changed pod template restarts a running server, so the planner keeps a
//! live Deployment that matches its base, and writes the hardened one when the Deployment is
//! created or its template changes for another reason (`plan::steps::deployment_step`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, PodSecurityContext, PodSpec,
    ResourceRequirements, SeccompProfile, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::catalogue::components;

/// The prefix of Checkov's skip annotations (checkov 3.3.30,
/// `checkov/kubernetes/kubernetes_utils.py` `SKIP_ANNOTATION_PREFIXES` and
/// `get_skipped_checks`: the value is `CHECK=reason`, split at `=`, so a reason has none).
pub const SKIP_ANNOTATION_PREFIX: &str = "checkov.io/skip";

/// A policy check an object does not meet, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Skip {
    pub check: &'static str,
    pub reason: &'static str,
}

const fn skip(check: &'static str, reason: &'static str) -> Skip {
    Skip { check, reason }
}

/// Every pod: images are named as the user names them.
pub const DIGEST: Skip = skip(
    "CKV_K8S_43",
    "images are named by registry and tag as the user gives them (--registry and --tag); \
     the tool resolves no digests",
);
/// A pod whose image has the tag `latest` (the default, as the official chart's).
pub const LATEST: Skip = skip(
    "CKV_K8S_14",
    "the tag is the user's choice (--tag); latest is the default as in the official chart",
);
/// Every pod no NetworkPolicy of the tool's selects: all but the database's with
/// `--network-policy` (`builders::network_policy`).
pub const NETWORK_POLICY: Skip = skip(
    "CKV2_K8S_6",
    "the tool writes a NetworkPolicy for the database only, and only with --network-policy; \
     the namespace's own policies apply to the other pods",
);
/// Pods whose images start as root.
pub const ROOT: Skip = skip(
    "CKV_K8S_23",
    "the image starts as root: systemd in the server image; the postgres image's entrypoint \
     and the Job scripts chown and switch to the service users themselves",
);
pub const HIGH_UID: Skip = skip(
    "CKV_K8S_40",
    "the image's own users are used: root to start; postgres (UID 999) and tomcat are the \
     image's and own the data on the volumes",
);
pub const CAPABILITIES: Skip = skip(
    "CKV_K8S_37",
    "the image starts as root and needs the runtime's default capabilities (chown, setuid, \
     setgid, dac_override) to hand the data to its service users; NET_RAW is dropped",
);
pub const READ_ONLY_ROOT: Skip = skip(
    "CKV_K8S_22",
    "the image writes outside its volumes: systemd's state and the services' runtime files in \
     the server, postgres' socket and lock files in the database",
);
/// The Jobs whose tools write outside the Job's volumes, or may: every Job but those whose
/// scripts only read the image and write to their volumes ([`JobRoot::ReadOnly`]).
pub const JOB_READ_ONLY_ROOT: Skip = skip(
    "CKV_K8S_22",
    "the Job runs the images' own tools, which write outside its volumes: pg_upgrade its \
     output directory and sockets in the working directory, PostgreSQL its lock files, \
     spacewalk-sql and the server's scripts their logs under /var/log, rsync and ssh their \
     state under the home directory; only the image checks, the inspections, the CA key Job \
     and the database's backup and restore copies, which write only to their volumes, run \
     with a read-only root",
);

/// The emptyDir a Job with a read-only root gets at `/tmp`: bash writes its here-documents
/// there (bash 4.4, the images' Leap 15 base, makes a temporary file for each; 5.1 and later
/// only for those larger than a pipe's buffer), and `lib.sh`'s `conf_set` its scratch file.
/// Its own name, so that [`strip_job_pod`] knows it from a Job's own `/tmp` volume.
pub const JOB_TMP_VOLUME: &str = "read-only-root-tmp";

/// Whether a Job's container may have a read-only root filesystem: only where its script
/// writes nothing outside the Job's volumes and `/tmp` (checked script by script,
/// `core/scripts/*.sh`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobRoot {
    /// The script only reads the image and writes to its volumes and the termination log
    /// (the kubelet's own mount): read-only, with an emptyDir at `/tmp`.
    ReadOnly,
    /// Its tools write elsewhere ([`JOB_READ_ONLY_ROOT`]).
    Writable,
}
pub const SECRET_ENV: Skip = skip(
    "CKV_K8S_35",
    "the image reads these credentials from environment variables only; they come from \
     secretKeyRef, never as literals",
);
/// The server's container.
pub const SERVER_ESCALATION: Skip = skip(
    "CKV_K8S_20",
    "the server runs systemd with CAP_SYS_ADMIN, with which no_new_privs protects nothing, and \
     its services switch users through setuid and setgid helpers (postfix's postdrop)",
);
pub const SERVER_ADDED_CAPABILITY: Skip = skip(
    "CKV_K8S_25",
    "systemd in the server image mounts the cgroup2 filesystem, which needs CAP_SYS_ADMIN",
);
pub const SERVER_SYS_ADMIN: Skip = skip(
    "CKV_K8S_39",
    "systemd in the server image mounts the cgroup2 filesystem, which needs CAP_SYS_ADMIN",
);
pub const SERVER_NET_RAW: Skip = skip(
    "CKV_K8S_28",
    "the server pings its clients; its container kept NET_RAW as the podman installation adds it",
);
/// Limits the tool does not set by default.
pub const NO_CPU_LIMIT: Skip = skip(
    "CKV_K8S_11",
    "a CPU limit throttles the server and the database under load (repository syncs, Salt \
     events) and protects nothing the request does not; the requests are set, and \
     --server-limits and --db-limits set limits",
);
pub const DB_MEMORY_LIMIT: Skip = skip(
    "CKV_K8S_13",
    "the database image sizes shared_buffers from the node's memory (/proc/meminfo), so a fixed \
     limit would have it killed on a larger node; the request is set, and --db-limits sets a \
     limit",
);
pub const SERVER_MEMORY_LIMIT: Skip = skip(
    "CKV_K8S_13",
    "the server's memory grows with the clients it manages, and an out-of-memory kill is an \
     outage; the request is set, and --server-limits sets a limit",
);
/// Jobs run once and end.
pub const JOB_CPU_LIMIT: Skip = skip(
    "CKV_K8S_11",
    "a Job runs once and ends; a CPU limit would only slow a data copy or a database upgrade \
     during the outage; the requests are set",
);
pub const JOB_MEMORY_LIMIT: Skip = skip(
    "CKV_K8S_13",
    "a Job runs once and ends; a memory limit could kill a data copy or pg_upgrade half-way \
     (postgres sizes its buffers from the node's memory); the requests are set",
);
/// Pods the kubelet cannot probe.
pub const TFTP_LIVENESS: Skip = skip(
    "CKV_K8S_8",
    "TFTP is UDP, which the kubelet cannot probe, and the image offers no check command",
);
pub const TFTP_READINESS: Skip = skip(
    "CKV_K8S_9",
    "TFTP is UDP, which the kubelet cannot probe, and the image offers no check command",
);
pub const HOST_NETWORK: Skip = skip(
    "CKV_K8S_19",
    "asked for with --tftp-host-network: TFTP answers from the node's own address",
);
pub const SIDECAR_LIVENESS: Skip = skip(
    "CKV_K8S_8",
    "a probe fits only some of the pod's containers: the database's cert-reload loop and the \
     attestation service serve no port and have no check command",
);
pub const SIDECAR_READINESS: Skip = skip(
    "CKV_K8S_9",
    "a probe fits only some of the pod's containers: the database's cert-reload loop and the \
     attestation service serve no port and have no check command",
);
/// Jobs with a ServiceAccount of their own.
pub const JOB_TOKEN: Skip = skip(
    "CKV_K8S_38",
    "the Job's script calls the API as its own ServiceAccount, allowed only what it uses",
);

/// The annotations that tell Checkov which checks an object skips and why.
pub fn skip_annotations(skips: &[Skip]) -> BTreeMap<String, String> {
    let mut seen: Vec<&str> = Vec::new();
    skips
        .iter()
        .filter(|s| {
            let new = !seen.contains(&s.check);
            seen.push(s.check);
            new
        })
        .enumerate()
        .map(|(i, s)| {
            (
                format!("{SKIP_ANNOTATION_PREFIX}{}", i + 1),
                format!("{}={}", s.check, s.reason),
            )
        })
        .collect()
}

/// Requests and limits of one container; `None`: not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resources {
    pub cpu_request: &'static str,
    pub memory_request: &'static str,
    pub cpu_limit: Option<&'static str>,
    pub memory_limit: Option<&'static str>,
}

/// The official chart sets no requests or limits (uyuni `containers/server-helm/values.yaml`
/// and `templates/server.yaml`, `db.yaml`, `hub.yaml`, `tftp.yaml` at c19024a5): these are
/// ours. The requests are what each needs to start and serve a small installation, so that
/// the scheduler places the pods where they fit; the server and the database get no limit by
/// default (see [`NO_CPU_LIMIT`], [`SERVER_MEMORY_LIMIT`], [`DB_MEMORY_LIMIT`]).
pub const SERVER_RESOURCES: Resources = Resources {
    cpu_request: "1",
    memory_request: "4Gi",
    cpu_limit: None,
    memory_limit: None,
};
pub const DB_RESOURCES: Resources = Resources {
    cpu_request: "500m",
    memory_request: "1Gi",
    cpu_limit: None,
    memory_limit: None,
};
/// The small services (TFTP, the hub XML-RPC API, the attestation) and the database's helper
/// containers: requests and limits.
pub const SMALL_RESOURCES: Resources = Resources {
    cpu_request: "50m",
    memory_request: "64Mi",
    cpu_limit: Some("500m"),
    memory_limit: Some("512Mi"),
};
/// The attestation service is a Java program.
pub const COCO_RESOURCES: Resources = Resources {
    cpu_request: "100m",
    memory_request: "256Mi",
    cpu_limit: Some("1"),
    memory_limit: Some("1Gi"),
};
/// Every Job: requests only ([`JOB_CPU_LIMIT`], [`JOB_MEMORY_LIMIT`]).
pub const JOB_RESOURCES: Resources = Resources {
    cpu_request: "100m",
    memory_request: "256Mi",
    cpu_limit: None,
    memory_limit: None,
};

pub fn requirements(r: &Resources) -> ResourceRequirements {
    let q = |v: &str| Quantity(v.to_owned());
    let mut requests = BTreeMap::from([
        ("cpu".to_owned(), q(r.cpu_request)),
        ("memory".to_owned(), q(r.memory_request)),
    ]);
    requests.retain(|_, v| !v.0.is_empty());
    let mut limits = BTreeMap::new();
    if let Some(cpu) = r.cpu_limit {
        limits.insert("cpu".to_owned(), q(cpu));
    }
    if let Some(memory) = r.memory_limit {
        limits.insert("memory".to_owned(), q(memory));
    }
    ResourceRequirements {
        requests: Some(requests),
        limits: (!limits.is_empty()).then_some(limits),
        ..ResourceRequirements::default()
    }
}

/// The runtime's default seccomp profile, added to the pod's security context.
pub fn with_runtime_default_seccomp(context: Option<PodSecurityContext>) -> PodSecurityContext {
    PodSecurityContext {
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".to_owned(),
            ..SeccompProfile::default()
        }),
        ..context.unwrap_or_default()
    }
}

/// `container` hardened: no privilege escalation unless `escalation`, NET_RAW dropped unless
/// `net_raw`, `resources` where it has none.
fn harden_container(
    container: &mut Container,
    resources: &Resources,
    escalation: bool,
    net_raw: bool,
) {
    let mut context = container.security_context.take().unwrap_or_default();
    if !escalation {
        context.allow_privilege_escalation = Some(false);
    }
    if !net_raw {
        let caps = context
            .capabilities
            .get_or_insert_with(Capabilities::default);
        let drop = caps.drop.get_or_insert_with(Vec::new);
        // Idempotent: a restart hardens a live template that may have it already.
        if !drop.iter().any(|d| d == "NET_RAW") {
            drop.push("NET_RAW".to_owned());
        }
    }
    container.security_context = (context != SecurityContext::default()).then_some(context);
    // What the user gave (`--server-requests`…) stays; the defaults fill in the rest.
    let defaults = requirements(resources);
    let given = container
        .resources
        .get_or_insert_with(ResourceRequirements::default);
    for (given, default) in [
        (&mut given.requests, defaults.requests),
        (&mut given.limits, defaults.limits),
    ] {
        for (name, q) in default.into_iter().flatten() {
            given
                .get_or_insert_with(BTreeMap::new)
                .entry(name)
                .or_insert(q);
        }
    }
}

/// Whether the pod's first container has a limit on `resource`.
fn limited(pod: &PodSpec, resource: &str) -> bool {
    pod.containers
        .first()
        .and_then(|c| c.resources.as_ref())
        .and_then(|r| r.limits.as_ref())
        .is_some_and(|l| l.contains_key(resource))
}

/// Requests and limits the user gave, as the container's resources; `None`: none given.
pub fn given(
    requests: &BTreeMap<String, String>,
    limits: &BTreeMap<String, String>,
) -> Option<ResourceRequirements> {
    let map = |m: &BTreeMap<String, String>| {
        (!m.is_empty()).then(|| {
            m.iter()
                .map(|(k, v)| (k.clone(), Quantity(v.clone())))
                .collect()
        })
    };
    (!requests.is_empty() || !limits.is_empty()).then(|| ResourceRequirements {
        requests: map(requests),
        limits: map(limits),
        ..ResourceRequirements::default()
    })
}

/// Does any container of the pod run an image with the tag `latest` (or none)?
fn latest_tag(pod: &PodSpec) -> bool {
    pod.containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
        .filter_map(|c| c.image.as_deref())
        .any(|image| {
            let last = image.rsplit('/').next().unwrap_or(image);
            !last.contains(':') || last.ends_with(":latest")
        })
}

/// The skips every pod of the tool shares; `network_policy`: a NetworkPolicy of the tool's
/// selects the pod.
fn common_skips(pod: &PodSpec, network_policy: bool) -> Vec<Skip> {
    let mut skips = vec![DIGEST];
    if !network_policy {
        skips.push(NETWORK_POLICY);
    }
    skips.extend([ROOT, HIGH_UID, CAPABILITIES]);
    if latest_tag(pod) {
        skips.push(LATEST);
    }
    let secret_env = pod
        .containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
        .flat_map(|c| c.env.iter().flatten())
        .any(|e| {
            e.value_from
                .as_ref()
                .is_some_and(|v| v.secret_key_ref.is_some())
        });
    if secret_env {
        skips.push(SECRET_ENV);
    }
    skips
}

/// The hardened form of a Deployment the tool writes, by its component, with no NetworkPolicy
/// of the tool's.
pub fn deployment(d: Deployment) -> Deployment {
    deployment_with(d, false)
}

/// [`deployment`]; `network_policy`: `--network-policy` is on, so the tool's NetworkPolicy
/// selects the database's pods (`builders::network_policy`), and only those.
pub fn deployment_with(mut d: Deployment, network_policy: bool) -> Deployment {
    let component = d
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(crate::labels::COMPONENT))
        .cloned()
        .unwrap_or_default();
    let Some(pod) = d.spec.as_mut().and_then(|s| s.template.spec.as_mut()) else {
        return d;
    };
    pod.automount_service_account_token = Some(false);
    pod.security_context = Some(with_runtime_default_seccomp(pod.security_context.take()));
    let mut skips = common_skips(pod, network_policy && component == components::DB);
    skips.push(READ_ONLY_ROOT);
    let server = component == components::SERVER;
    for (i, c) in pod.containers.iter_mut().enumerate() {
        let resources = match component.as_str() {
            components::SERVER => SERVER_RESOURCES,
            components::DB if i == 0 => DB_RESOURCES,
            components::COCO => COCO_RESOURCES,
            _ => SMALL_RESOURCES,
        };
        harden_container(c, &resources, server, server);
    }
    for c in pod.init_containers.iter_mut().flatten() {
        harden_container(c, &SMALL_RESOURCES, server, server);
    }
    let (cpu_limit, memory_limit) = (limited(pod, "cpu"), limited(pod, "memory"));
    match component.as_str() {
        components::SERVER => {
            skips.extend([
                SERVER_ESCALATION,
                SERVER_ADDED_CAPABILITY,
                SERVER_SYS_ADMIN,
                SERVER_NET_RAW,
            ]);
            skips.extend((!cpu_limit).then_some(NO_CPU_LIMIT));
            skips.extend((!memory_limit).then_some(SERVER_MEMORY_LIMIT));
        }
        components::DB => {
            skips.extend([SIDECAR_LIVENESS, SIDECAR_READINESS]);
            skips.extend((!cpu_limit).then_some(NO_CPU_LIMIT));
            skips.extend((!memory_limit).then_some(DB_MEMORY_LIMIT));
        }
        components::TFTP => {
            skips.extend([TFTP_LIVENESS, TFTP_READINESS]);
            if pod.host_network == Some(true) {
                skips.push(HOST_NETWORK);
            }
        }
        components::COCO => skips.extend([SIDECAR_LIVENESS, SIDECAR_READINESS]),
        _ => {}
    }
    d.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .extend(skip_annotations(&skips));
    d
}

/// A Job's pod hardened as every Job's is: requests, NET_RAW dropped, a read-only root where
/// `root` allows it, and the skips of what cannot be; `own_account`: the Job calls the API as
/// its own ServiceAccount.
pub fn job_pod(pod: &mut PodSpec, own_account: bool, root: JobRoot) -> BTreeMap<String, String> {
    pod.automount_service_account_token = (!own_account).then_some(false);
    pod.security_context = Some(with_runtime_default_seccomp(pod.security_context.take()));
    for c in pod
        .containers
        .iter_mut()
        .chain(pod.init_containers.iter_mut().flatten())
    {
        harden_container(c, &JOB_RESOURCES, false, false);
    }
    if root == JobRoot::ReadOnly {
        read_only_root(pod);
    }
    let mut skips = common_skips(pod, false);
    if root == JobRoot::Writable {
        skips.push(JOB_READ_ONLY_ROOT);
    }
    skips.extend([JOB_CPU_LIMIT, JOB_MEMORY_LIMIT]);
    if own_account {
        skips.push(JOB_TOKEN);
    }
    skip_annotations(&skips)
}

/// Every container's root filesystem read-only, and an emptyDir at `/tmp` where the
/// container has no volume there ([`JOB_TMP_VOLUME`]).
fn read_only_root(pod: &mut PodSpec) {
    let mut needs_tmp = false;
    for c in pod
        .containers
        .iter_mut()
        .chain(pod.init_containers.iter_mut().flatten())
    {
        c.security_context
            .get_or_insert_with(SecurityContext::default)
            .read_only_root_filesystem = Some(true);
        let mounts = c.volume_mounts.get_or_insert_with(Vec::new);
        if !mounts.iter().any(|m| m.mount_path == "/tmp") {
            mounts.push(VolumeMount {
                name: JOB_TMP_VOLUME.to_owned(),
                mount_path: "/tmp".to_owned(),
                ..VolumeMount::default()
            });
            needs_tmp = true;
        }
    }
    if needs_tmp {
        pod.volumes.get_or_insert_with(Vec::new).push(Volume {
            name: JOB_TMP_VOLUME.to_owned(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        });
    }
}

/// The pod without what this module adds to a Job: a Job of a version without it is the same
/// work (the database Jobs' identity, the data sync's).
pub fn strip_job_pod(pod: &mut PodSpec) {
    pod.automount_service_account_token = None;
    if let Some(volumes) = pod.volumes.as_mut() {
        volumes.retain(|v| v.name != JOB_TMP_VOLUME);
    }
    if let Some(sc) = pod.security_context.as_mut() {
        sc.seccomp_profile = None;
    }
    if pod.security_context == Some(PodSecurityContext::default()) {
        pod.security_context = None;
    }
    for c in pod
        .containers
        .iter_mut()
        .chain(pod.init_containers.iter_mut().flatten())
    {
        c.resources = None;
        if let Some(mounts) = c.volume_mounts.as_mut() {
            mounts.retain(|m| m.name != JOB_TMP_VOLUME);
        }
        if let Some(sc) = c.security_context.as_mut() {
            sc.allow_privilege_escalation = None;
            sc.read_only_root_filesystem = None;
            if let Some(caps) = sc.capabilities.as_mut() {
                if let Some(drop) = caps.drop.as_mut() {
                    drop.retain(|d| d != "NET_RAW");
                }
                if caps.drop.as_ref().is_some_and(Vec::is_empty) {
                    caps.drop = None;
                }
            }
            if sc.capabilities == Some(Capabilities::default()) {
                sc.capabilities = None;
            }
        }
        if c.security_context == Some(SecurityContext::default()) {
            c.security_context = None;
        }
    }
}
