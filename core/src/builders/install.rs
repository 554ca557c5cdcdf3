//! What only a fresh server needs: the first administrator's Secret, the SCC credentials, and
//! the chart's ConfigMap `uyuni-config` (`containers/server-helm/templates/config.yaml`,
//! uyuni-project/uyuni @1dcc9327: keys `fqdn`, `email`, `db_host`, `db_port`, `db_name`,
//! `reportdb_host`, `reportdb_port`, `reportdb_name`). The database's credential Secrets are the
//! chart's basic-auth Secrets (`builders::database::credentials_secret`).

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::database::credentials_secret;
use super::{meta, string_map};
use crate::catalogue::{components, names};
use crate::ports;

/// `uyuni-config`, as the chart writes it with its internal database.
pub fn uyuni_config(namespace: &str, fqdn: &str, email: &str, db_name: &str) -> ConfigMap {
    let port = ports::PGSQL_PORT.to_string();
    ConfigMap {
        metadata: meta(names::CONFIG_MAP, namespace, components::SERVER),
        data: Some(string_map([
            ("fqdn", fqdn),
            ("email", email),
            ("db_host", names::DB_SERVICE),
            ("db_port", &port),
            ("db_name", db_name),
            ("reportdb_host", names::REPORTDB_SERVICE),
            ("reportdb_port", &port),
            ("reportdb_name", "reportdb"),
        ])),
        ..ConfigMap::default()
    }
}

/// `admin-credentials`: the first administrator, created by the image's first start.
pub fn admin_secret(namespace: &str, login: &str, password: &str) -> Secret {
    let mut secret = credentials_secret(namespace, names::ADMIN_SECRET, login, password);
    secret.metadata = meta(names::ADMIN_SECRET, namespace, components::SERVER);
    secret
}

/// `scc-credentials`: the SCC organisation credentials the first start stores.
pub fn scc_secret(namespace: &str, user: &str, password: &str) -> Secret {
    let mut secret = credentials_secret(namespace, names::SCC_SECRET, user, password);
    secret.metadata = meta(names::SCC_SECRET, namespace, components::SERVER);
    secret
}
