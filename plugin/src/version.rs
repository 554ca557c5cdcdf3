//! `kubectl uyuni version`: the client's version and, when a server runs in the namespace, the
//! images of its server and database. The cluster part is best effort: an unreachable cluster
//! gives the client version and a note on stderr, never a failure.

use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use uyuni_effects::inspect::ComponentImage;

use crate::cli::{KubeFlags, OutputFormat};
use crate::output::{error_chain, print_data};

/// How long the whole cluster lookup may take when --request-timeout does not say.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// What `version -o json|yaml` prints. Field names are stable (see docs/output.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VersionReport {
    /// [`uyuni_core::render::API_VERSION`], so consumers can tell which field set they read.
    pub api_version: &'static str,
    /// `Version`.
    pub kind: &'static str,
    pub client_version: ClientVersion,
    pub cluster: ClusterInfo,
    /// The container of the Deployment labelled `app.kubernetes.io/component=server`.
    pub server: Option<ImageInfo>,
    /// The container of the Deployment labelled `app.kubernetes.io/component=db`.
    pub db: Option<ImageInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientVersion {
    pub version: String,
    pub platform: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInfo {
    /// Whether the Deployments could be listed.
    pub reachable: bool,
    pub context: Option<String>,
    pub namespace: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageInfo {
    pub deployment: String,
    pub container: String,
    /// The reference as written in the Deployment.
    pub image: String,
    /// `None` when the reference names no tag (the registry's `latest`) or only a digest.
    pub tag: Option<String>,
    pub digest: Option<String>,
}

/// The tag and digest of an image reference: `host:5000/a/b:1.2@sha256:…` has tag `1.2`; the
/// port of a registry host is not a tag.
pub fn split_reference(image: &str) -> (Option<String>, Option<String>) {
    let digest = image.split_once('@').map(|(_, d)| d.to_owned());
    (uyuni_core::image::tag(image), digest)
}

fn image_info(found: &[ComponentImage], component: &str) -> Option<ImageInfo> {
    found.iter().find(|c| c.component == component).map(|c| {
        let (tag, digest) = split_reference(&c.image);
        ImageInfo {
            deployment: c.deployment.clone(),
            container: c.container.clone(),
            image: c.image.clone(),
            tag,
            digest,
        }
    })
}

fn platform() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{os}/{arch}")
}

/// The report from what the lookup found; `Err` carries the note for stderr.
pub fn report(
    context: Option<String>,
    namespace: Option<String>,
    found: Result<Vec<ComponentImage>, String>,
) -> (VersionReport, Option<String>) {
    let client_version = ClientVersion {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        platform: platform(),
    };
    let (reachable, found, note) = match found {
        Ok(found) => (true, found, None),
        Err(note) => (false, Vec::new(), Some(note)),
    };
    let report = VersionReport {
        api_version: uyuni_core::render::API_VERSION,
        kind: "Version",
        client_version,
        cluster: ClusterInfo {
            reachable,
            context,
            namespace,
        },
        server: image_info(&found, "server"),
        db: image_info(&found, "db"),
    };
    (report, note)
}

pub fn human(r: &VersionReport) -> String {
    let mut out = format!(
        "Client: kubectl-uyuni {} ({})\n",
        r.client_version.version, r.client_version.platform
    );
    let line = |what: &str, i: &Option<ImageInfo>| match i {
        Some(i) => format!(
            "{what}{} (tag {}, deployment {})\n",
            i.image,
            i.tag.as_deref().unwrap_or("none: latest"),
            i.deployment
        ),
        None => format!("{what}not found\n"),
    };
    if r.cluster.reachable {
        let ns = r.cluster.namespace.as_deref().unwrap_or("default");
        if r.server.is_none() && r.db.is_none() {
            out.push_str(&format!("No Uyuni server in namespace {ns}.\n"));
        } else {
            out.push_str(&line("Server: ", &r.server));
            out.push_str(&line("DB:     ", &r.db));
        }
    }
    out
}

/// Looks the server up and prints the report; fails only when stdout cannot be written.
pub async fn run(kube: &KubeFlags, format: OutputFormat) -> Result<()> {
    let limit = kube
        .request_timeout
        .filter(|t| !t.is_zero())
        .unwrap_or(LOOKUP_TIMEOUT);
    let mut kube = kube.clone();
    if kube.request_timeout.is_none() {
        kube.request_timeout = Some(LOOKUP_TIMEOUT);
    }
    let lookup = async {
        let conn = crate::connect(&kube)
            .await
            .map_err(|e| (None, kube.namespace.clone(), error_chain(&e)))?;
        let ctx = conn.context.clone();
        let ns = conn.namespace.clone();
        match uyuni_effects::inspect::uyuni_images(&conn.client, &conn.namespace).await {
            Ok(found) => Ok((ctx, ns, found)),
            Err(e) => Err((ctx, Some(ns), e.to_string())),
        }
    };
    let (context, namespace, found) = match tokio::time::timeout(limit, lookup).await {
        Ok(Ok((ctx, ns, found))) => (ctx, Some(ns), Ok(found)),
        Ok(Err((ctx, ns, e))) => (ctx, ns, Err(e)),
        Err(_) => (
            None,
            kube.namespace.clone(),
            Err(format!(
                "no answer from the cluster within {}s (raise it with --request-timeout)",
                limit.as_secs()
            )),
        ),
    };
    let (report, note) = report(context, namespace, found);
    if let Some(note) = note {
        eprintln!("note: server version unknown: {note}");
    }
    print_data(format, &report, human)
}
