//! Reading what a run leaves of itself: the records of its operations (`uyuni_core::operation`)
//! as the simulated cluster holds them, and the files of a `report` bundle.

use std::collections::BTreeMap;
use std::io::Read;

use serde_json::Value;
use uyuni_testdata::SimCluster;

/// The operation records in `namespace`, oldest first: the ConfigMap's name, the record, and
/// the ConfigMap's data (the record and the kept logs).
pub fn operations(sim: &SimCluster, namespace: &str) -> Vec<(String, Value, Value)> {
    let mut out: Vec<_> = sim
        .objects("v1", "ConfigMap", Some(namespace))
        .into_iter()
        .filter(|cm| cm["metadata"]["labels"]["app.kubernetes.io/component"] == "operation")
        .map(|cm| {
            let name = cm["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let record: Value =
                serde_json::from_str(cm["data"]["operation.json"].as_str().unwrap_or("null"))
                    .unwrap_or_default();
            (name, record, cm["data"].clone())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The files of a report bundle: path → text.
pub fn unpack(file: &std::path::Path) -> BTreeMap<String, String> {
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(file).expect("the bundle"));
    let mut archive = tar::Archive::new(gz);
    let mut out = BTreeMap::new();
    for entry in archive.entries().expect("a tar archive") {
        let mut entry = entry.expect("an entry");
        let path = entry.path().expect("a path").display().to_string();
        let mut text = String::new();
        entry.read_to_string(&mut text).expect("text");
        out.insert(path, text);
    }
    out
}
