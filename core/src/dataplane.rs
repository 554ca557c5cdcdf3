//! The data-plane part of a migration preview: what the data sync will copy, and whether the
//! volumes are big enough for it. Sizes measured on the source arrive as a value from the caller.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::object::{Kind, Object};
use crate::observed::Observed;
use crate::params::MigrateParams;
use crate::volumes::VolumeRole;

/// One volume the sync fills.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeCopy {
    pub claim: String,
    pub path: String,
    /// The claim's request: the live claim's when it exists, else the intended one.
    pub request: String,
    /// Apparent size of the path on the source, when measured.
    pub source_bytes: Option<u64>,
    /// The source data does not fit the request.
    pub too_small: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataPlane {
    pub source: String,
    pub volumes: Vec<VolumeCopy>,
    /// Why sizes are missing, when they are.
    pub measurement: String,
    /// What is known of the database before the sync.
    pub database: String,
    /// What the sync does while the source serves and what it does once its services are
    /// stopped, in order (the final run; a `--prepare` run stops nothing).
    pub order: Vec<String>,
}

/// The data-sync script's order (`core/scripts/data-sync.sh`), in words.
fn sync_order(params: &MigrateParams) -> Vec<String> {
    let source = &params.source_fqdn;
    let at_once = crate::scripts::data_sync::COPY_PARALLEL;
    if params.prepare {
        return vec![format!(
            "while {source} serves: the distribution query, then a copy of every volume, {at_once} at a time (nothing is stopped)"
        )];
    }
    vec![
        format!(
            "while {source} serves: the distribution query, the rsync filter, a catch-up copy of every volume, {at_once} at a time, and the copies of its distributions, snippets, tomcat and Kerberos configuration"
        ),
        format!(
            "the outage begins: {source}'s services and PostgreSQL stop, then the copy of what changed since (the database with checksums{})",
            if params.compress {
                ""
            } else {
                "; uncompressed, --compress for a slow link"
            }
        ),
        "then the database steps and the server's start; the run reports how long each took"
            .to_owned(),
    ]
}

/// Bytes of a Kubernetes quantity (`10Gi`, `1.5Ti`, `500M`, `1e9`), if it parses.
pub fn quantity_bytes(q: &str) -> Option<u64> {
    let q = q.trim();
    let units: [(&str, f64); 12] = [
        ("Ki", 1024f64),
        ("Mi", 1024f64.powi(2)),
        ("Gi", 1024f64.powi(3)),
        ("Ti", 1024f64.powi(4)),
        ("Pi", 1024f64.powi(5)),
        ("Ei", 1024f64.powi(6)),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let (number, factor) = units
        .iter()
        .find_map(|(suffix, f)| q.strip_suffix(suffix).map(|n| (n, *f)))
        .unwrap_or((q, 1.0));
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value >= 0.0).then(|| (value * factor).ceil() as u64)
}

/// Parses `du -s -b PATH…` output (`BYTES<TAB>PATH` lines) into path → bytes.
pub fn parse_du(output: &str) -> BTreeMap<String, u64> {
    output
        .lines()
        .filter_map(|line| {
            let (bytes, path) = line.split_once(char::is_whitespace)?;
            let bytes = bytes.trim().parse().ok()?;
            Some((path.trim().trim_end_matches('/').to_owned(), bytes))
        })
        .collect()
}

/// Human size, binary units.
pub fn human_bytes(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

/// The preview of what the data sync copies. `measured`: `du` figures from the source, or the
/// reason there are none.
pub fn data_plane(
    params: &MigrateParams,
    observed: &Observed,
    measured: Result<&BTreeMap<String, u64>, &str>,
) -> DataPlane {
    let volumes = params
        .spec
        .volumes
        .iter()
        .filter(|v| v.role != VolumeRole::Migration)
        .map(|v| {
            let path = v.mount_path.trim_end_matches('/').to_owned();
            let live_request = match observed.get(Kind::PersistentVolumeClaim, &v.name) {
                Some(Object::PersistentVolumeClaim(pvc)) => pvc
                    .spec
                    .as_ref()
                    .and_then(|s| s.resources.as_ref())
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("storage"))
                    .map(|q| q.0.clone()),
                _ => None,
            };
            let request = live_request.unwrap_or_else(|| v.size.clone());
            let source_bytes = measured.ok().and_then(|m| m.get(&path).copied());
            let too_small = match (source_bytes, quantity_bytes(&request)) {
                (Some(have), Some(room)) => have > room,
                _ => false,
            };
            VolumeCopy {
                claim: v.name.clone(),
                path,
                request,
                source_bytes,
                too_small,
            }
        })
        .collect();
    let reindex = "the server image reindexes the database at its first start when the collation version changed (it checks itself)";
    let database = match observed.extracted() {
        Ok(Some(data)) if !data.placeholder => {
            match crate::resolve::resolve(params, observed, &data).pg {
                Ok(crate::pg::Upgrade::Needed { from }) => format!(
                    "PostgreSQL {from} synced by Job {}; upgraded to {} into a new volume, the synced one kept as the backup; {reindex}",
                    data.job,
                    crate::pg::TARGET_MAJOR
                ),
                Ok(_) => format!(
                    "PostgreSQL {} synced by Job {}: no major upgrade; {reindex}",
                    data.pg_version, data.job
                ),
                Err(e) => format!(
                    "PostgreSQL {} synced by Job {}: {e}",
                    data.pg_version, data.job
                ),
            }
        }
        _ => format!(
            "copied while PostgreSQL is stopped on the source; its major is read from the synced data (known after data-sync) and upgraded to {} when older; {reindex}",
            crate::pg::TARGET_MAJOR
        ),
    };
    DataPlane {
        source: params.source_fqdn.clone(),
        volumes,
        measurement: match measured {
            Ok(_) => "apparent sizes measured on the source with du".to_owned(),
            Err(reason) => reason.to_owned(),
        },
        database,
        order: sync_order(params),
    }
}

impl DataPlane {
    /// The section of the human preview.
    pub fn render(&self) -> String {
        let mut out = format!(
            "Data sync: copies {} volumes from {} ({}).\n",
            self.volumes.len(),
            self.source,
            self.measurement
        );
        for v in &self.volumes {
            let size = v
                .source_bytes
                .map(|b| format!("{:>10} on the source", human_bytes(b)))
                .unwrap_or_else(|| format!("{:>10}", "?"));
            let warning = if v.too_small {
                "  WARNING: larger than the volume; raise it with --volume-size"
            } else {
                ""
            };
            out.push_str(&format!(
                "  {:<45} → {:<20} {} (requests {}){}\n",
                v.path, v.claim, size, v.request, warning
            ));
        }
        out.push_str(&format!("  Database: {}.\n", self.database));
        for (i, step) in self.order.iter().enumerate() {
            out.push_str(&format!("  {}. {step}.\n", i + 1));
        }
        out
    }

    pub fn warnings(&self) -> Vec<String> {
        self.volumes
            .iter()
            .filter(|v| v.too_small)
            .map(|v| {
                format!(
                    "volume {} requests {} but {} holds {} on the source: pass --volume-size {}=<larger size> (an existing claim must be resized by hand)",
                    v.claim,
                    v.request,
                    v.path,
                    human_bytes(v.source_bytes.unwrap_or_default()),
                    v.claim
                )
            })
            .collect()
    }
}
