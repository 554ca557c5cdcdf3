//! Read-only, best-effort looks at the kubeconfig and the cluster for `version` and shell
//! completion. Unlike [`observe`](mod@crate::observe) nothing here is retried: a caller asks
//! once, under a short deadline, and shows what it got.

use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::config::Kubeconfig;

use uyuni_core::labels::{COMPONENT, PART_OF_SELECTOR};

use crate::error::{EffectsError, Target, Verb};

/// One container of a Deployment labelled as part of Uyuni.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentImage {
    /// `app.kubernetes.io/component` (`server`, `db`, …); empty when the label is missing.
    pub component: String,
    pub deployment: String,
    pub container: String,
    /// The image reference as written in the Deployment.
    pub image: String,
}

/// The containers of the Deployments labelled `app.kubernetes.io/part-of=uyuni` in
/// `namespace`, sorted by component, Deployment and container name.
pub async fn uyuni_images(
    client: &kube::Client,
    namespace: &str,
) -> Result<Vec<ComponentImage>, EffectsError> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let list = api
        .list(&ListParams::default().labels(PART_OF_SELECTOR))
        .await
        .map_err(|source| EffectsError::Api {
            verb: Verb::List,
            target: Target::selected("deployment", PART_OF_SELECTOR, namespace),
            attempts: 1,
            source: Box::new(source),
        })?;
    let mut out = Vec::new();
    for deployment in list.items {
        let name = deployment.metadata.name.clone().unwrap_or_default();
        let component = deployment
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(COMPONENT))
            .cloned()
            .unwrap_or_default();
        let containers = deployment
            .spec
            .and_then(|s| s.template.spec)
            .map(|s| s.containers)
            .unwrap_or_default();
        for container in containers {
            out.push(ComponentImage {
                component: component.clone(),
                deployment: name.clone(),
                container: container.name,
                image: container.image.unwrap_or_default(),
            });
        }
    }
    out.sort_by(|a, b| {
        (&a.component, &a.deployment, &a.container).cmp(&(
            &b.component,
            &b.deployment,
            &b.container,
        ))
    });
    Ok(out)
}

/// The names of the namespaces, sorted.
pub async fn namespace_names(client: &kube::Client) -> Result<Vec<String>, EffectsError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|source| EffectsError::Api {
            verb: Verb::List,
            target: Target {
                resource: "namespace".to_owned(),
                name: None,
                namespace: None,
                selector: None,
            },
            attempts: 1,
            source: Box::new(source),
        })?;
    let mut names: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    names.sort();
    Ok(names)
}

/// The context names of the kubeconfig kubectl would read: `explicit` (`--kubeconfig`), else
/// the existing files `kubeconfig_env` (`KUBECONFIG`) lists, else `~/.kube/config` under
/// `home`. In file order, without duplicates; unreadable files are skipped, as completion
/// must never fail loudly.
pub fn context_names(
    explicit: Option<&Path>,
    kubeconfig_env: Option<&std::ffi::OsStr>,
    home: Option<&Path>,
) -> Vec<String> {
    let files: Vec<PathBuf> = match (explicit, kubeconfig_env) {
        (Some(path), _) => vec![path.to_owned()],
        (None, Some(env)) if !env.is_empty() => std::env::split_paths(env)
            .filter(|p| !p.as_os_str().is_empty())
            .collect(),
        _ => home
            .map(|h| vec![h.join(".kube").join("config")])
            .unwrap_or_default(),
    };
    let mut names: Vec<String> = Vec::new();
    for file in files {
        let Ok(config) = Kubeconfig::read_from(&file) else {
            continue;
        };
        for context in config.contexts {
            if !names.contains(&context.name) {
                names.push(context.name);
            }
        }
    }
    names
}
