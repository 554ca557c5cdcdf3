//! `kubectl uyuni report`: a support bundle (tar.gz) of what someone helping needs, as
//! `kubectl cnpg report` makes one: the operation records and the Job logs they keep, the specs
//! of the tool's objects in the namespace, their pods, the namespace's events, the tool's and
//! the API server's versions. Reads only.
//!
//! Secrets are never in it: a Secret is kept as its name, type, labels and keys, each value
//! `***` (`uyuni_core::secret::mask`); `managedFields` and kubectl's last-applied annotation,
//! which may copy a Secret's data, are left out of every object; and every file of the bundle
//! is searched for every value the namespace's Secrets hold (and each line of a multi-line
//! one), replaced by `***` where found, in case one reached a log or an event.

use std::io::Write;

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::Value;
use uyuni_core::labels::{self, MANAGED_SELECTOR};
use uyuni_core::{Object, operation};

use crate::cli::{Cli, ReportCmd};

/// What `report` prints: where the bundle is and what it holds.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReportResult {
    api_version: &'static str,
    /// `Report`.
    kind: &'static str,
    namespace: String,
    /// The bundle written.
    file: String,
    tool_version: &'static str,
    /// The API server's `gitVersion`; `None` when it could not be read.
    server_version: Option<String>,
    /// Every file in the bundle, in its order.
    entries: Vec<String>,
    /// What could not be read (a permission missing), and so is not in it.
    notes: Vec<String>,
}

/// The shortest secret value searched for: shorter ones (`true`, a port) would mask ordinary
/// words; the tool's passwords and keys are longer.
const SHORTEST_SECRET: usize = 6;

/// `object` as the bundle keeps it: without `managedFields` and the last-applied annotation,
/// a Secret's values masked.
fn kept(object: &Value) -> Value {
    let mut value = uyuni_core::secret::mask(object, None);
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
        if let Some(annotations) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    }
    value
}

/// Whether a Secret's key names a secret value (a password, a private key, a token), not a
/// user name, a certificate or a fact the migration found (`uyuni-migration-data`'s FQDN).
fn holds_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ((key.contains("pass") || key.contains("key") || key.contains("token")) && !key.contains("pub"))
        || key.contains("secret")
        || key == ".dockerconfigjson"
}

/// Every secret value the Secrets among `objects` hold ([`holds_secret`]), and each long line
/// of a multi-line one.
fn secret_values(objects: &[&Object]) -> Vec<String> {
    use base64::Engine as _;
    let mut out = Vec::new();
    for object in objects {
        let json = object.to_json();
        if json["kind"] != "Secret" {
            continue;
        }
        for field in ["data", "stringData"] {
            for (key, value) in json[field].as_object().into_iter().flatten() {
                let Some(text) = value.as_str().filter(|_| holds_secret(key)) else {
                    continue;
                };
                let text = if field == "data" {
                    base64::engine::general_purpose::STANDARD
                        .decode(text)
                        .ok()
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .unwrap_or_default()
                } else {
                    text.to_owned()
                };
                out.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| l.len() >= SHORTEST_SECRET && !l.starts_with("-----"))
                        .map(str::to_owned),
                );
                if text.trim().len() >= SHORTEST_SECRET {
                    out.push(text.trim().to_owned());
                }
            }
        }
    }
    // The longest first, so that a value is replaced whole before a line of it.
    out.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    out.dedup();
    out
}

fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_owned();
    for s in secrets {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "***");
        }
    }
    out
}

fn yaml(value: &impl Serialize) -> Result<String> {
    serde_saphyr::to_string(value).context("cannot render YAML")
}

pub async fn run(cmd: &ReportCmd, cli: &Cli) -> Result<()> {
    let conn = crate::connect(&cli.kube).await?;
    let client = &conn.client;
    let ns = conn.namespace.clone();
    let mut notes = Vec::new();
    let mut files: Vec<(String, String)> = Vec::new();

    // The tool's objects: every object of the namespace its label selector selects (and
    // those of its names), Secrets included (masked below); a user who may not read Secrets
    // gets the rest.
    let full = uyuni_core::observed::report_observation(&ns, true);
    let (observation, observed) = match uyuni_effects::observe(client, &full).await {
        Ok(observed) => (full, observed),
        Err(e) => {
            notes.push(format!(
                "Secrets, ServiceAccounts and RBAC objects are not in the report: {e}"
            ));
            let observation = uyuni_core::observed::report_observation(&ns, false);
            let observed = uyuni_effects::observe(client, &observation)
                .await
                .with_context(|| format!("cannot read namespace {ns}"))?;
            (observation, observed)
        }
    };
    // Every value of the namespace's Secrets is searched for, ours or not.
    let every: Vec<&Object> = observed.objects.values().collect();
    let secrets = secret_values(&every);
    let objects: Vec<&Object> = every
        .into_iter()
        .filter(|o| {
            labels::selects(MANAGED_SELECTOR, o.metadata().labels.as_ref())
                || observation.named.contains(&o.object_ref())
        })
        .collect();
    for object in &objects {
        let target = object.object_ref();
        files.push((
            format!("objects/{}.yaml", target.to_string().replace('/', "_")),
            yaml(&kept(&object.to_json()))?,
        ));
    }

    match uyuni_effects::logs::pods(client, &ns, MANAGED_SELECTOR).await {
        Ok(pods) => {
            for pod in pods {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let value = serde_json::to_value(&pod).unwrap_or_default();
                files.push((format!("pods/{name}.yaml"), yaml(&kept(&value))?));
            }
        }
        Err(e) => notes.push(format!("the pods are not in the report: {e}")),
    }

    match uyuni_effects::operation::list(client, &ns).await {
        Ok(list) => {
            let records = operation::newest_first(&list);
            if records.is_empty() {
                notes.push(format!("no operation record in namespace {ns}"));
            }
            for record in records {
                files.push((
                    format!("operations/{}.json", record.name),
                    operation::record_json(&record.operation),
                ));
                for (job, log) in &record.logs {
                    files.push((format!("operations/{}/{job}.log", record.name), log.clone()));
                }
            }
        }
        Err(e) => notes.push(format!("the operation records are not in the report: {e}")),
    }

    match uyuni_effects::report::events(client, &ns).await {
        Ok(events) => {
            let list: Vec<Value> = events
                .iter()
                .map(|e| kept(&serde_json::to_value(e).unwrap_or_default()))
                .collect();
            files.push(("events.yaml".to_owned(), yaml(&list)?));
        }
        Err(e) => notes.push(format!("the events are not in the report: {e}")),
    }

    let server_version = match uyuni_effects::report::server_version(client).await {
        Ok(v) => Some(v),
        Err(e) => {
            notes.push(format!("the API server's version could not be read: {e}"));
            None
        }
    };

    let file = match &cmd.file {
        Some(f) => f.clone(),
        None => format!("uyuni-report-{ns}-{}.tar.gz", crate::clock::run_id()),
    };
    let mut entries: Vec<String> = vec!["report.json".to_owned()];
    entries.extend(files.iter().map(|(path, _)| path.clone()));
    let result = ReportResult {
        api_version: uyuni_core::render::API_VERSION,
        kind: "Report",
        namespace: ns.clone(),
        file: file.clone(),
        tool_version: env!("CARGO_PKG_VERSION"),
        server_version,
        entries,
        notes,
    };
    let summary = serde_json::to_string_pretty(&result).context("cannot render the summary")?;
    files.insert(0, ("report.json".to_owned(), summary));
    write_bundle(&file, &ns, &files, &secrets)
        .with_context(|| format!("cannot write the report to {file}"))?;

    crate::output::print_data(cli.output, &result, |r| {
        let mut out = format!(
            "Wrote {} ({} files: operation records and their Job logs, the objects of namespace {}, their pods and its events; Secrets by name and keys only).\n",
            r.file,
            r.entries.len(),
            r.namespace
        );
        for note in &r.notes {
            out.push_str(&format!("Not in it: {note}\n"));
        }
        out
    })
}

/// The bundle: every file under a directory named after the namespace, each searched for the
/// Secrets' values.
fn write_bundle(
    file: &str,
    ns: &str,
    files: &[(String, String)],
    secrets: &[String],
) -> Result<()> {
    let out = std::fs::File::create(file)?;
    let gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    let mtime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for (path, text) in files {
        let text = scrub(text, secrets);
        let mut header = tar::Header::new_gnu();
        header.set_size(text.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(mtime);
        header.set_cksum();
        tar.append_data(
            &mut header,
            format!("uyuni-report-{ns}/{path}"),
            text.as_bytes(),
        )?;
    }
    tar.into_inner()?.finish()?.flush()?;
    Ok(())
}
