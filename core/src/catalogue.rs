//! The catalogue of names every other module agrees on: Kubernetes object names, components,
//! step ids, in-pod paths and the keys of the extracted data.
//!
//! It depends on nothing, so that anything may use it without an import cycle: a builder, the
//! observation that looks for what the builders wrote, the scripts that write at the paths the
//! builders mount, and the planner that names the steps.

/// Object names, as the reference and the official chart use them.
pub mod names {
    pub const SSH_KEY_SECRET: &str = "uyuni-migration-key";
    pub const SSH_CONFIG_MAP: &str = "uyuni-migration-ssh";
    pub const MIGRATION_SERVICE_ACCOUNT: &str = "uyuni-migration";
    pub const MIGRATION_ROLE: &str = "uyuni-migration";
    pub const MIGRATION_ROLE_BINDING: &str = "uyuni-migration";
    pub const MIGRATION_DATA_SECRET: &str = "uyuni-migration-data";
    /// The server's specification as the flags of earlier runs chose it (`record`).
    pub const SERVER_SPEC_CONFIG_MAP: &str = "uyuni-server-spec";
    /// Prefix of data-sync Job names; the run id follows.
    pub const DATA_SYNC_JOB_PREFIX: &str = "uyuni-data-sync";
    /// The chart's credential Secrets (images-today §C.1).
    pub const DB_ADMIN_SECRET: &str = "db-admin-credentials";
    pub const DB_SECRET: &str = "db-credentials";
    pub const REPORTDB_SECRET: &str = "reportdb-credentials";
    /// The first administrator's login and password, for the image's first-start setup.
    pub const ADMIN_SECRET: &str = "admin-credentials";
    /// The SCC organisation credentials, when given (the chart takes the name from
    /// `server.sccSecret`; mgradm named it so).
    pub const SCC_SECRET: &str = "scc-credentials";
    /// The chart's ConfigMap of the server's name, e-mail and database endpoints
    /// (`containers/server-helm/templates/config.yaml`).
    pub const CONFIG_MAP: &str = "uyuni-config";
    /// The replica counts `stop` recorded, which `start` scales back to.
    pub const REPLICAS_CONFIG_MAP: &str = "uyuni-replicas";
    /// What an upgrade changes and how to go back: the images and replica counts before it,
    /// the database's volumes and its backup (`plan::upgrade`).
    pub const UPGRADE_CONFIG_MAP: &str = "uyuni-upgrade";
    /// The self-signed issuer that signs a generated CA, and that CA's Certificate (whose
    /// Secret is [`CA_SECRET`]).
    pub const SELF_SIGNED_ISSUER: &str = "uyuni-root-issuer";
    pub const CA_CERTIFICATE: &str = "uyuni-ca";
    pub const DB_DEPLOYMENT: &str = "db";
    /// The NetworkPolicy that guards the `db` pods (`--network-policy`).
    pub const DB_NETWORK_POLICY: &str = "db";
    pub const DB_SERVICE: &str = "db";
    pub const REPORTDB_SERVICE: &str = "reportdb";
    /// The CA as a TLS Secret, the CA issuer's key pair (reference §5.4).
    pub const CA_SECRET: &str = "uyuni-ca";
    /// The source CA's password, for the Job that decrypts the CA key in the cluster.
    pub const CA_PASSWORD_SECRET: &str = "uyuni-ca-password";
    pub const CA_ISSUER: &str = "uyuni-ca-issuer";
    /// The server's TLS Secret, and its Certificate (chart names, images-today §C.1).
    pub const SERVER_CERT_SECRET: &str = "uyuni-cert";
    pub const DB_CERT_SECRET: &str = "db-cert";
    pub const CA_CONFIG_MAP: &str = "uyuni-ca";
    pub const DB_CA_CONFIG_MAP: &str = "db-ca";
    /// Role and RoleBinding letting the CA key Job write the key into Secret `uyuni-ca`.
    pub const CA_KEY_ROLE: &str = "uyuni-ca-key";
    /// The CA key Job's own ServiceAccount: the data-sync Job's (`uyuni-migration`) may
    /// patch only Secret `uyuni-migration-data`, this one only Secret `uyuni-ca`.
    pub const CA_KEY_SERVICE_ACCOUNT: &str = "uyuni-ca-key";
    /// Ingresses (reference §6.3).
    pub const INGRESS_SSL: &str = "uyuni-ingress-ssl";
    pub const INGRESS_NOSSL: &str = "uyuni-ingress-nossl";
    pub const INGRESS_REDIRECT: &str = "uyuni-ingress-ssl-redirect";
    /// Traefik's HTTPS redirect middleware.
    pub const HTTPS_REDIRECT: &str = "uyuni-https-redirect";
    /// The distributions' HelmChartConfig objects, in kube-system.
    pub const TRAEFIK_CONFIG: &str = "traefik";
    pub const NGINX_CONFIG: &str = "rke2-ingress-nginx";
    /// The registry pull Secret the tool writes from `--registry-user` (reference §1.8).
    pub const REGISTRY_SECRET: &str = "registry-credentials";
    /// The server's Deployments (the chart's names, images-today §C.2).
    pub const SERVER_DEPLOYMENT: &str = "uyuni";
    pub const HUB_DEPLOYMENT: &str = "hub-xmlrpc";
    pub const COCO_DEPLOYMENT: &str = "coco-attestation";
    /// The TFTP server's Deployment and its Service.
    pub const TFTP_DEPLOYMENT: &str = "tftp";
    pub const TFTP_SERVICE: &str = "tftp";
    /// The server's HTTP Service, where the TFTP container fetches the files it serves.
    pub const WEB_SERVICE: &str = "web";
}

/// Components, as the `app.kubernetes.io/component` label says them.
pub mod components {
    pub const MIGRATION: &str = "migration";
    /// The Jobs of an upgrade (inspections, the database's backup).
    pub const UPGRADE: &str = "upgrade";
    pub const SERVER: &str = "server";
    pub const DB: &str = "db";
    pub const TLS: &str = "tls";
    pub const HUB_XMLRPC: &str = "hub-xmlrpc";
    /// The chart's `coco.yaml` says `coco-attestation`.
    pub const COCO: &str = "coco-attestation";
    pub const TFTP: &str = "tftp";
}

/// Step ids: the `kubectl-uyuni.io/step` label of a step's Jobs, and the id the plan shows.
pub mod steps {
    pub const IMAGE_CHECK_SERVER: &str = "image-check-server";
    pub const IMAGE_CHECK_DB: &str = "image-check-db";
    pub const IMAGE_CHECK_DB_UPGRADE: &str = "image-check-db-upgrade";
    /// The inspections of an upgrade: the images the server runs and the ones it is given.
    pub const INSPECT_RUNNING_SERVER: &str = "inspect-running-server";
    pub const INSPECT_RUNNING_DB: &str = "inspect-running-db";
    pub const INSPECT_SERVER: &str = "inspect-server";
    pub const INSPECT_DB: &str = "inspect-db";
    /// An upgrade's check of the database upgrade image, before a PostgreSQL major upgrade.
    pub const CHECK_DB_UPGRADE: &str = "check-db-upgrade";
    /// The copy of the stopped database's directory an upgrade keeps as its way back.
    pub const DB_BACKUP: &str = "db-backup";
    /// A rollback's copy of that backup into the database's volume.
    pub const DB_RESTORE: &str = "db-restore";
    pub const DATA_SYNC: &str = "data-sync";
    /// The copy a final run makes first while the source keeps serving.
    pub const PREPARE_SYNC: &str = "prepare-sync";
    /// The check of every input, on that copy's data, before the source is stopped.
    pub const PREPARE_CHECK: &str = "prepare-check";
    pub const DB_FIXUP: &str = "db-fixup";
    pub const DB_UPGRADE: &str = "db-upgrade";
    pub const DB_PASSWORDS: &str = "db-passwords";
    pub const DB_MIGRATION_SQL: &str = "db-migration-sql";
    pub const CA_KEY: &str = "ca-key";
}

/// What a Job writes besides its own status, as its `kubectl-uyuni.io/produces` annotation says
/// it: the dry run's model of a Job reads the annotation instead of knowing the steps.
pub mod products {
    /// Secret `uyuni-migration-data`, the values the data sync extracted from the source.
    pub const MIGRATION_DATA: &str = "secret/uyuni-migration-data";
    /// Key `tls.key` of Secret `uyuni-ca`, the CA key decrypted in the cluster.
    pub const CA_KEY: &str = "secret/uyuni-ca/tls.key";
    /// The report of an image inspection, in the Job's own annotation
    /// ([`crate::labels::INSPECTION_ANNOTATION`]), copied there from its pod's termination
    /// message by the run.
    pub const INSPECTION: &str = "job/inspection";

    /// The name of the Secret a product is written into (`secret/NAME` or
    /// `secret/NAME/KEY`); `None` for anything else.
    pub fn secret(product: &str) -> Option<&str> {
        let mut parts = product.split('/');
        match (parts.next(), parts.next()) {
            (Some("secret"), Some(name)) if !name.is_empty() => Some(name),
            _ => None,
        }
    }
}

/// Paths inside the Job pods, shared by the scripts and the builders that mount things there,
/// so the two cannot drift apart.
pub mod paths {
    /// Where the data-sync Job finds the SSH private and public key (Secret `uyuni-migration-key`).
    /// Outside every synced path, so rsync `--delete` never meets a mount point (reference D33).
    pub const SSH_KEY_DIR: &str = "/etc/uyuni-migration-ssh/key";
    pub const SSH_PRIVATE_KEY_PATH: &str = "/etc/uyuni-migration-ssh/key/id";
    /// Where the data-sync Job finds `config` and `known_hosts` (ConfigMap `uyuni-migration-ssh`).
    pub const SSH_CONF_DIR: &str = "/etc/uyuni-migration-ssh/conf";
    pub const SSH_CONFIG_PATH: &str = "/etc/uyuni-migration-ssh/conf/config";
    pub const SSH_KNOWN_HOSTS_PATH: &str = "/etc/uyuni-migration-ssh/conf/known_hosts";
    /// Scratch directory of the data-sync Job, on an emptyDir: secrets pass through here on their way
    /// into the Secret `uyuni-migration-data`, never through a PVC or the log.
    pub const SECRET_SCRATCH_DIR: &str = "/run/uyuni-migration";
}

/// Keys of the Secret `uyuni-migration-data`, written by the data-sync Job at its end.
pub mod data_keys {
    /// The name of the Job that wrote the data; data from an older Job is stale.
    pub const JOB: &str = "job";
    pub const TIMEZONE: &str = "timezone";
    /// PostgreSQL major of the synced data (`PG_VERSION`).
    pub const PG_VERSION: &str = "pg_version";
    pub const DB_USER: &str = "db_user";
    pub const DB_PASSWORD: &str = "db_password";
    pub const DB_NAME: &str = "db_name";
    pub const DB_PORT: &str = "db_port";
    pub const REPORT_DB_USER: &str = "report_db_user";
    pub const REPORT_DB_PASSWORD: &str = "report_db_password";
    pub const HAS_HUBXMLRPC: &str = "has_hubxmlrpc";
    /// The source's `server.susemanager.fromdir` (a local mirror), empty when it had none.
    pub const MIRROR: &str = "mirror";
    pub const DEBUG: &str = "debug";
    /// `true` when `tftp.socket` was enabled (or active) on the source: the TFTP server is
    /// deployed as its own Deployment then, unless `--tftp` says otherwise.
    pub const TFTP: &str = "tftp";
    /// `java.hostname` of the source's rhn.conf.
    pub const FQDN: &str = "fqdn";
    /// The CA certificate the source trusts (`LOCAL-RHN-ORG-TRUSTED-SSL-CERT`).
    pub const CA_CERT: &str = "ca.crt";
    /// The CA key generated by Uyuni (`/root/ssl-build/RHN-ORG-PRIVATE-SSL-KEY`), encrypted with
    /// the CA password; only when `ssl-build` holds the deployed CA.
    pub const CA_KEY: &str = "ca.key";
    /// Third-party server certificate and key, only when there is no Uyuni-generated CA key.
    pub const SERVER_CERT: &str = "server.crt";
    pub const SERVER_KEY: &str = "server.key";
    /// Final runs only: when the script began to stop the source's services, and when they
    /// were stopped (Unix seconds, the Job's clock).
    pub const OUTAGE_STARTED_AT: &str = "outage_started_at";
    pub const SERVICES_STOPPED_AT: &str = "services_stopped_at";
    /// Prepare runs only: what the run measured for the final run's expected window
    /// (`core::sync_progress::Estimate`): the delta left after its copy and the scan that
    /// found it, what its copy transferred in how long, and its steps after the copy
    /// (milliseconds, bytes).
    pub const DELTA_BYTES: &str = "delta_bytes";
    pub const SCAN_MS: &str = "scan_ms";
    pub const COPIED_BYTES: &str = "copied_bytes";
    pub const COPY_MS: &str = "copy_ms";
    pub const REST_MS: &str = "rest_ms";
    /// Written by a finished migration (not by the Job): the secret keys it emptied, separated
    /// by spaces, because their values are in their home Secrets ([`HOMES`]) by then.
    pub const REDACTED: &str = "redacted";

    /// Where each secret value of the Secret lives once the migration has written it, as
    /// (data key, Secret, key of that Secret). The CA key's home holds it decrypted (the CA
    /// key Job's work), the others' the very value.
    pub const HOMES: [(&str, &str, &str); 4] = [
        (DB_PASSWORD, super::names::DB_SECRET, "password"),
        (
            REPORT_DB_PASSWORD,
            super::names::REPORTDB_SECRET,
            "password",
        ),
        (CA_KEY, super::names::CA_SECRET, "tls.key"),
        (SERVER_KEY, super::names::SERVER_CERT_SECRET, "tls.key"),
    ];
}
