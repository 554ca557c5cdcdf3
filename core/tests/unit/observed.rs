use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use uyuni_core::catalogue::data_keys;
use uyuni_core::observed::{ExtractError, ExtractedData, PLACEHOLDER};

fn secret(tftp: Option<&str>) -> Secret {
    let mut data: BTreeMap<String, ByteString> = [
        (data_keys::JOB, "uyuni-data-sync-1"),
        (data_keys::TIMEZONE, "Etc/UTC"),
        (data_keys::PG_VERSION, "16"),
        (data_keys::DB_USER, "spacewalk"),
        (data_keys::DB_PASSWORD, "pw"),
        (data_keys::DB_NAME, "susemanager"),
        (data_keys::DB_PORT, "5432"),
        (data_keys::REPORT_DB_USER, "pythia"),
        (data_keys::REPORT_DB_PASSWORD, "pw"),
        (data_keys::HAS_HUBXMLRPC, "false"),
        (data_keys::DEBUG, "false"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect();
    if let Some(v) = tftp {
        data.insert(
            data_keys::TFTP.to_owned(),
            ByteString(v.as_bytes().to_vec()),
        );
    }
    Secret {
        data: Some(data),
        ..Secret::default()
    }
}

#[test]
fn tftp_is_read_and_absent_or_placeholder_means_unknown() {
    let tftp = |v| ExtractedData::from_secret(&secret(v)).map(|d| d.expect("data").tftp);
    assert_eq!(tftp(Some("true")), Ok(Some(true)));
    assert_eq!(tftp(Some("false\n")), Ok(Some(false)));
    assert_eq!(tftp(None), Ok(None), "synced by an older kubectl-uyuni");
    assert_eq!(tftp(Some(PLACEHOLDER)), Ok(None));
    assert_eq!(
        tftp(Some("yes")),
        Err(ExtractError::NotBool {
            key: data_keys::TFTP,
            value: "yes".into()
        })
    );
}
