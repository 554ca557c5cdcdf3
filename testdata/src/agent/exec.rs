//! Real execution of a pod's containers, for the pods that ask for it with the annotation
//! [`EXECUTE_ANNOTATION`]`: "true"` (pods of a Job get it from the Job's pod template).
//!
//! There is no container runtime here, so "the sandbox" is only this: each container's
//! `command` + `args` run as a child process of the agent, from the host's binaries (the image
//! is ignored), in its own process group, with an environment made only of the container's
//! `env` (plus `PATH`, `HOME` and `HOSTNAME`), in a fresh working directory under the agent's
//! `--sandbox-dir`. No other isolation exists: the process runs as the agent's user, sees the
//! host's file system and network. Paths cannot be remapped, so each emptyDir volume a
//! container mounts is a directory of the sandbox whose path is given to the process in
//! `UYUNI_SANDBOX_MOUNT_<VOLUME>` (the volume name upper-cased, every character other than a
//! letter or digit turned into `_`); other volume kinds are not provided.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use kube::Client;
use kube::api::Api;

/// The pod annotation that asks for real execution.
pub const EXECUTE_ANNOTATION: &str = "uyuni.test/execute";
/// The prefix of the environment variable that gives a mounted emptyDir's directory.
pub const MOUNT_ENV_PREFIX: &str = "UYUNI_SANDBOX_MOUNT_";

/// Whether the pod asks for its commands to be run.
pub fn wants_execution(pod: &Pod) -> bool {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXECUTE_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// `UYUNI_SANDBOX_MOUNT_<VOLUME>` for a volume name.
pub fn mount_env_name(volume: &str) -> String {
    let tail: String = volume
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("{MOUNT_ENV_PREFIX}{tail}")
}

/// The argv of a container, or why it cannot start: with no image there is no entrypoint,
/// so a container without `command` is what a runtime reports for an image without one.
pub fn argv(container: &Container) -> Result<Vec<String>, String> {
    let command = container.command.clone().unwrap_or_default();
    if command.is_empty() {
        return Err(format!(
            "container {:?} has no command: uyuni-node-agent runs no image, so there is no \
             entrypoint to fall back on (no command specified); give the container a `command`",
            container.name
        ));
    }
    let mut argv = command;
    argv.extend(container.args.clone().unwrap_or_default());
    Ok(argv)
}

/// The exit code a container status reports: the process's own, or 128 + the signal that
/// ended it (as a shell and container runtimes report: 143 for SIGTERM, 137 for SIGKILL).
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// `terminated.reason` for an exit code (kubelet: `Completed` for 0, `Error` otherwise).
pub fn exit_reason(code: i32) -> &'static str {
    if code == 0 { "Completed" } else { "Error" }
}

/// The container's environment from its `env`: plain values, and `valueFrom` secretKeyRef and
/// configMapKeyRef read through the API with `client`. `Err` is the message of kubelet's
/// `CreateContainerConfigError` (its wording from `makeEnvironmentVariables` in upstream's
/// `pkg/kubelet/kubelet_pods.go`: the API's not-found error for a missing object, "couldn't
/// find key K in Secret NS/NAME" for a missing key). Other `valueFrom`s (fieldRef,
/// resourceFieldRef) and `envFrom` are not supported and said so.
pub async fn resolve_env(
    client: &Client,
    namespace: &str,
    container: &Container,
) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut secrets: BTreeMap<String, Option<Secret>> = BTreeMap::new();
    let mut maps: BTreeMap<String, Option<ConfigMap>> = BTreeMap::new();
    if container.env_from.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err(format!(
            "container {:?}: envFrom is not supported by uyuni-node-agent's execution",
            container.name
        ));
    }
    for var in container.env.as_deref().unwrap_or_default() {
        let Some(from) = &var.value_from else {
            out.push((var.name.clone(), var.value.clone().unwrap_or_default()));
            continue;
        };
        if let Some(r) = &from.secret_key_ref {
            let optional = r.optional.unwrap_or(false);
            if !secrets.contains_key(&r.name) {
                let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
                let got = api
                    .get_opt(&r.name)
                    .await
                    .map_err(|e| format!("cannot read secret {:?}: {e}", r.name))?;
                secrets.insert(r.name.clone(), got);
            }
            let value = match secrets.get(&r.name).and_then(|s| s.as_ref()) {
                None if optional => continue,
                None => return Err(format!("secret \"{}\" not found", r.name)),
                Some(s) => s
                    .data
                    .as_ref()
                    .and_then(|d| d.get(&r.key))
                    .map(|b| String::from_utf8_lossy(&b.0).into_owned()),
            };
            match value {
                Some(v) => out.push((var.name.clone(), v)),
                None if optional => {}
                None => {
                    return Err(format!(
                        "couldn't find key {} in Secret {namespace}/{}",
                        r.key, r.name
                    ));
                }
            }
        } else if let Some(r) = &from.config_map_key_ref {
            let optional = r.optional.unwrap_or(false);
            if !maps.contains_key(&r.name) {
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
                let got = api
                    .get_opt(&r.name)
                    .await
                    .map_err(|e| format!("cannot read configmap {:?}: {e}", r.name))?;
                maps.insert(r.name.clone(), got);
            }
            let value = match maps.get(&r.name).and_then(|m| m.as_ref()) {
                None if optional => continue,
                None => return Err(format!("configmap \"{}\" not found", r.name)),
                Some(m) => m.data.as_ref().and_then(|d| d.get(&r.key)).cloned(),
            };
            match value {
                Some(v) => out.push((var.name.clone(), v)),
                None if optional => {}
                None => {
                    return Err(format!(
                        "couldn't find key {} in ConfigMap {namespace}/{}",
                        r.key, r.name
                    ));
                }
            }
        } else {
            return Err(format!(
                "env {:?}: only value, secretKeyRef and configMapKeyRef are supported by \
                 uyuni-node-agent's execution",
                var.name
            ));
        }
    }
    Ok(out)
}

/// The directory of a pod in the sandbox.
pub fn pod_dir(root: &Path, namespace: &str, name: &str, uid: &str) -> PathBuf {
    root.join(format!("{namespace}_{name}_{uid}"))
}

/// The emptyDir volumes the container mounts: (env var, directory under `pod_dir`).
pub fn mounts(pod: &Pod, container: &Container, pod_dir: &Path) -> Vec<(String, PathBuf)> {
    let volumes = pod
        .spec
        .as_ref()
        .and_then(|s| s.volumes.clone())
        .unwrap_or_default();
    container
        .volume_mounts
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|m| {
            volumes
                .iter()
                .any(|v| v.name == m.name && v.empty_dir.is_some())
        })
        .map(|m| {
            (
                mount_env_name(&m.name),
                pod_dir.join("volumes").join(&m.name),
            )
        })
        .collect()
}

/// The environment every process gets besides its container's `env`: a `PATH` to find the
/// host's binaries, `HOME` its working directory, `HOSTNAME` the pod's name (as in a pod).
pub fn base_env(workdir: &Path, pod_name: &str) -> Vec<(String, String)> {
    let path = std::env::var("PATH")
        .unwrap_or_else(|_| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    vec![
        ("PATH".to_owned(), path),
        ("HOME".to_owned(), workdir.display().to_string()),
        ("HOSTNAME".to_owned(), pod_name.to_owned()),
    ]
}

/// How a pod's processes are asked, then made, to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Term,
    Kill,
}

/// Signals the process group `pgid` (the child leads it: `process_group(0)`). A group already
/// gone (ESRCH) is what was wanted.
pub fn signal_group(pgid: u32, stop: Stop) {
    let Some(pid) = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let signal = match stop {
        Stop::Term => rustix::process::Signal::TERM,
        Stop::Kill => rustix::process::Signal::KILL,
    };
    if let Err(e) = rustix::process::kill_process_group(pid, signal)
        && e != rustix::io::Errno::SRCH
    {
        tracing::warn!("cannot signal the process group {pgid} ({signal:?}): {e}");
    }
}
