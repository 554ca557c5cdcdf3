//! `kubectl uyuni rbac --for COMMAND`: the core's rules for a command, printed for `kubectl
//! apply -f -`. Nothing is sent to the cluster; the kubeconfig is read only for the context's
//! namespace when -n is not given.

use anyhow::Result;
use uyuni_core::rbac::{self, BindTo};

use crate::cli::{Cli, OutputFormat, RbacCmd};

pub async fn run(cmd: &RbacCmd, cli: &Cli) -> Result<()> {
    let namespace = match &cli.kube.namespace {
        Some(ns) => ns.clone(),
        // The context's namespace, as every other command takes it: `connect` sends nothing.
        None => {
            crate::connect(&cli.kube)
                .await
                .map_err(|e| {
                    anyhow::anyhow!(
                        "no -n given, and the kubeconfig's namespace cannot be read ({}): pass the namespace with -n NAMESPACE",
                        e.root_cause()
                    )
                })?
                .namespace
        }
    };
    let mut subjects: Vec<BindTo> = cmd
        .serviceaccount
        .iter()
        .map(|(namespace, name)| BindTo::ServiceAccount {
            namespace: namespace.clone(),
            name: name.clone(),
        })
        .collect();
    subjects.extend(cmd.bind_user.iter().cloned().map(BindTo::User));
    subjects.extend(cmd.group.iter().cloned().map(BindTo::Group));
    let command = cmd.command.command();
    let rules = rbac::rules(command, &namespace, &subjects);
    let text = match cli.output {
        OutputFormat::Human | OutputFormat::Yaml => rbac::render(command, &namespace, &rules),
        // A List, which `kubectl apply -f -` takes as it takes the YAML stream.
        OutputFormat::Json => {
            let list = serde_json::json!({
                "apiVersion": "v1",
                "kind": "List",
                "items": rules.objects(),
            });
            format!("{}\n", serde_json::to_string_pretty(&list)?)
        }
    };
    print!("{text}");
    Ok(())
}
