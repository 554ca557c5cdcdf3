use uyuni_core::scripts::database::{
    DB_PKI_DIR, DB_TLS_CA_FILE, DB_TLS_CERT_FILE, DB_TLS_KEY_FILE, POSTGRESQL_CONF_SETTINGS,
};

fn setting(key: &str) -> Option<&'static str> {
    POSTGRESQL_CONF_SETTINGS
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)
}

/// The settings are literal text; the paths are constants the `db` Deployment mounts at.
#[test]
fn the_ssl_settings_name_the_files_the_db_pod_mounts() {
    assert_eq!(setting("ssl"), Some("on"));
    assert_eq!(
        setting("ssl_cert_file").map(str::to_owned),
        Some(format!("'{DB_TLS_CERT_FILE}'"))
    );
    assert_eq!(
        setting("ssl_key_file").map(str::to_owned),
        Some(format!("'{DB_TLS_KEY_FILE}'"))
    );
    for file in [DB_TLS_CERT_FILE, DB_TLS_KEY_FILE, DB_TLS_CA_FILE] {
        assert!(file.starts_with(&format!("{DB_PKI_DIR}/")), "{file}");
    }
}
