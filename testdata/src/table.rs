//! Server-side printing (`as=Table`): what `kubectl get` shows. Without it kubectl prints only
//! NAME and AGE, which makes demos and error hints less useful.

use serde_json::{Value, json};

use crate::resources::ResourceType;

/// Kubernetes' `HumanDuration` for the AGE column.
pub fn human_duration(secs: i64) -> String {
    let s = secs.max(0);
    if s < 120 {
        format!("{s}s")
    } else if s < 600 {
        let (m, r) = (s / 60, s % 60);
        if r == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{r}s")
        }
    } else if s < 3 * 3600 {
        format!("{}m", s / 60)
    } else if s < 8 * 3600 {
        let (h, m) = (s / 3600, (s % 3600) / 60);
        if m == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{m}m")
        }
    } else if s < 48 * 3600 {
        format!("{}h", s / 3600)
    } else {
        format!("{}d", s / 86400)
    }
}

fn age(obj: &Value) -> String {
    let created = obj["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok());
    match created {
        Some(t) => human_duration(crate::engine::now_seconds() - t.as_second()),
        None => "<unknown>".to_string(),
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<none>".to_string(),
        other => other.to_string(),
    }
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn condition(obj: &Value, kind: &str) -> Option<String> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == json!(kind))
        .map(|c| s(&c["status"]))
}

/// Column names (after NAME) and cells for a kind.
fn columns(rt: &ResourceType, obj: &Value) -> (Vec<&'static str>, Vec<Value>) {
    let st = &obj["status"];
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Pod") => {
            let statuses = st["containerStatuses"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let total = obj["spec"]["containers"].as_array().map_or(0, Vec::len);
            let ready = statuses
                .iter()
                .filter(|c| c["ready"] == json!(true))
                .count();
            let restarts: i64 = statuses.iter().map(|c| int(&c["restartCount"])).sum();
            let waiting = statuses
                .iter()
                .find_map(|c| c["state"]["waiting"]["reason"].as_str().map(str::to_string));
            let terminated = statuses.iter().find_map(|c| {
                c["state"]["terminated"]["reason"]
                    .as_str()
                    .map(str::to_string)
            });
            let status = waiting.or(terminated).unwrap_or_else(|| s(&st["phase"]));
            (
                vec!["Ready", "Status", "Restarts"],
                vec![
                    json!(format!("{ready}/{total}")),
                    json!(status),
                    json!(restarts),
                ],
            )
        }
        ("batch", "Job") => {
            let status = if condition(obj, "Complete").as_deref() == Some("True") {
                "Complete"
            } else if condition(obj, "Failed").as_deref() == Some("True") {
                "Failed"
            } else {
                "Running"
            };
            let completions = int(&obj["spec"]["completions"]).max(1);
            (
                vec!["Status", "Completions"],
                vec![
                    json!(status),
                    json!(format!("{}/{completions}", int(&st["succeeded"]))),
                ],
            )
        }
        ("apps", "Deployment") => (
            vec!["Ready", "Up-to-date", "Available"],
            vec![
                json!(format!(
                    "{}/{}",
                    int(&st["readyReplicas"]),
                    int(&obj["spec"]["replicas"])
                )),
                json!(int(&st["updatedReplicas"])),
                json!(int(&st["availableReplicas"])),
            ],
        ),
        ("", "PersistentVolumeClaim") => (
            vec!["Status", "Volume", "Capacity", "StorageClass"],
            vec![
                json!(s(&st["phase"])),
                json!(obj["spec"]["volumeName"].as_str().unwrap_or("")),
                json!(st["capacity"]["storage"].as_str().unwrap_or("")),
                json!(s(&obj["spec"]["storageClassName"])),
            ],
        ),
        ("", "Secret") => (
            vec!["Type", "Data"],
            vec![
                json!(s(&obj["type"])),
                json!(obj["data"].as_object().map_or(0, |m| m.len())),
            ],
        ),
        ("", "ConfigMap") => (
            vec!["Data"],
            vec![json!(obj["data"].as_object().map_or(0, |m| m.len()))],
        ),
        ("", "Namespace") => (vec!["Status"], vec![json!(s(&st["phase"]))]),
        ("", "Service") => {
            let ports: Vec<String> = obj["spec"]["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    // As the API server prints them: `port:nodePort/protocol` with a node port.
                    let node_port = p["nodePort"]
                        .as_i64()
                        .map(|n| format!(":{n}"))
                        .unwrap_or_default();
                    format!(
                        "{}{node_port}/{}",
                        s(&p["port"]),
                        p["protocol"].as_str().unwrap_or("TCP")
                    )
                })
                .collect();
            let pending = if obj["spec"]["type"] == json!("LoadBalancer") {
                "<pending>"
            } else {
                "<none>"
            };
            let external = st["loadBalancer"]["ingress"]
                .as_array()
                .and_then(|a| a.first())
                .and_then(|i| i["ip"].as_str())
                .unwrap_or(pending);
            (
                vec!["Type", "Cluster-IP", "External-IP", "Ports"],
                vec![
                    json!(s(&obj["spec"]["type"])),
                    json!(s(&obj["spec"]["clusterIP"])),
                    json!(external),
                    json!(ports.join(",")),
                ],
            )
        }
        _ if rt.group.ends_with("cert-manager.io") => (
            vec!["Ready"],
            vec![json!(condition(obj, "Ready").unwrap_or_default())],
        ),
        _ => (Vec::new(), Vec::new()),
    }
}

/// A `meta.k8s.io/v1` Table of the objects.
pub fn table(rt: &ResourceType, items: &[Value], rv: u64) -> Value {
    let probe = json!({});
    let (names, _) = columns(rt, items.first().unwrap_or(&probe));
    let mut defs = vec![
        json!({"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0}),
    ];
    for n in &names {
        defs.push(
            json!({"name": n, "type": "string", "format": "", "description": "", "priority": 0}),
        );
    }
    defs.push(
        json!({"name": "Age", "type": "string", "format": "", "description": "", "priority": 0}),
    );
    let rows: Vec<Value> = items
        .iter()
        .map(|obj| {
            let (_, extra) = columns(rt, obj);
            let mut cells = vec![obj["metadata"]["name"].clone()];
            cells.extend(extra);
            cells.push(json!(age(obj)));
            json!({
                "cells": cells,
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj["metadata"],
                },
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "columnDefinitions": defs,
        "rows": rows,
    })
}
