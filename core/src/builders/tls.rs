//! TLS (reference §5 with D08, D25, D26, D44, D45 fixed; images-today §A.7): the migrated CA
//! reused through a cert-manager CA issuer, or third-party certificates as plain TLS Secrets,
//! and the CA ConfigMaps the server mounts. Names are the chart's.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    ConfigMap, EmptyDirVolumeSource, EnvVar, EnvVarSource, KeyToPath, ObjectFieldSelector, Secret,
    SecretVolumeSource, ServiceAccount, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use serde_json::json;

use crate::builders::database::SYNC_JOB_ENV;
use crate::builders::hardening::JobRoot;
use crate::builders::job::{Identity, ScriptJob, env, script_job};
use crate::builders::{meta, string_map};
use crate::catalogue::{components, names};
use crate::labels;
use crate::object::{CustomKind, CustomObject};
use crate::observed::ExtractedData;
use crate::params::{CertBundle, MigrateParams};
use crate::scripts::{data_keys, data_sync::SERVICE_ACCOUNT_DIR, tls as scripts};

pub use crate::catalogue::steps::CA_KEY as CA_KEY_STEP;

/// The CA certificate the source trusts (for the placeholder state: the placeholder).
pub fn ca_cert(data: &ExtractedData) -> String {
    if data.placeholder {
        return crate::observed::PLACEHOLDER.to_owned();
    }
    data.ca_cert.clone().unwrap_or_default()
}

fn bytes(s: &str) -> ByteString {
    ByteString(s.as_bytes().to_vec())
}

fn tls_labels() -> BTreeMap<String, String> {
    labels::labels(components::TLS)
}

/// The password, for the CA key Job only.
pub fn ca_password_secret(namespace: &str, password: &str) -> Secret {
    Secret {
        metadata: meta(names::CA_PASSWORD_SECRET, namespace, components::TLS),
        type_: Some("Opaque".to_owned()),
        data: Some(BTreeMap::from([("password".to_owned(), bytes(password))])),
        ..Secret::default()
    }
}

/// The CA key pair the issuer signs with: created with the certificate and an empty key; the CA
/// key Job fills `tls.key` in the cluster, so the key never passes through this tool.
pub fn ca_secret(namespace: &str, ca_cert: &str) -> Secret {
    Secret {
        metadata: meta(names::CA_SECRET, namespace, components::TLS),
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(BTreeMap::from([
            ("ca.crt".to_owned(), bytes(ca_cert)),
            ("tls.crt".to_owned(), bytes(ca_cert)),
            ("tls.key".to_owned(), bytes("")),
        ])),
        ..Secret::default()
    }
}

/// Whether Secret `uyuni-ca` holds the key of this CA certificate.
pub fn ca_secret_complete(secret: &Secret, ca_cert: &str) -> bool {
    let data = secret.data.as_ref();
    let get = |k: &str| data.and_then(|d| d.get(k)).map(|b| b.0.as_slice());
    get("tls.crt") == Some(ca_cert.as_bytes()) && get("tls.key").is_some_and(|k| !k.is_empty())
}

/// Whether Secret `uyuni-ca` is for this CA certificate (complete or not).
pub fn ca_secret_matches(secret: &Secret, ca_cert: &str) -> bool {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get("tls.crt"))
        .is_some_and(|c| c.0 == ca_cert.as_bytes())
}

/// Only `patch`, only on Secret `uyuni-ca`: the one request `ca-key.sh` makes (`lib.sh`'s
/// `patch_secret`); the key it decrypts comes from mounted files, not from a read.
pub fn ca_key_role(namespace: &str) -> Role {
    Role {
        metadata: meta(names::CA_KEY_ROLE, namespace, components::TLS),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["secrets".to_owned()]),
            resource_names: Some(vec![names::CA_SECRET.to_owned()]),
            verbs: vec!["patch".to_owned()],
            ..PolicyRule::default()
        }]),
    }
}

/// The ServiceAccount the CA key Job runs as, its own: the data-sync Job's account may not
/// write Secret `uyuni-ca`, nor this one Secret `uyuni-migration-data`.
pub fn ca_key_service_account(namespace: &str) -> ServiceAccount {
    ServiceAccount {
        metadata: meta(names::CA_KEY_SERVICE_ACCOUNT, namespace, components::TLS),
        ..ServiceAccount::default()
    }
}

/// Grants that Role to the CA key Job's ServiceAccount.
pub fn ca_key_role_binding(namespace: &str) -> RoleBinding {
    RoleBinding {
        metadata: meta(names::CA_KEY_ROLE, namespace, components::TLS),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "Role".to_owned(),
            name: names::CA_KEY_ROLE.to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: names::CA_KEY_SERVICE_ACCOUNT.to_owned(),
            namespace: Some(namespace.to_owned()),
            ..Subject::default()
        }]),
    }
}

pub fn ca_key_description() -> String {
    "decrypt the migrated CA key with the CA password, in the cluster, into Secret uyuni-ca"
        .to_owned()
}

fn secret_volume(
    name: &str,
    secret: &str,
    items: &[(&str, &str)],
    path: &str,
) -> (Volume, VolumeMount) {
    (
        Volume {
            name: name.to_owned(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.to_owned()),
                default_mode: Some(0o400),
                items: Some(
                    items
                        .iter()
                        .map(|(key, p)| KeyToPath {
                            key: (*key).to_owned(),
                            path: (*p).to_owned(),
                            mode: None,
                        })
                        .collect(),
                ),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
        VolumeMount {
            name: name.to_owned(),
            mount_path: path.to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
    )
}

/// The CA key Job, in the server image (it has openssl and curl).
pub fn ca_key_job(params: &MigrateParams, data: &ExtractedData) -> Job {
    let scratch = (
        Volume {
            name: "scratch".to_owned(),
            empty_dir: Some(EmptyDirVolumeSource {
                medium: Some("Memory".to_owned()),
                ..EmptyDirVolumeSource::default()
            }),
            ..Volume::default()
        },
        VolumeMount {
            name: "scratch".to_owned(),
            mount_path: scripts::SCRATCH_DIR.to_owned(),
            ..VolumeMount::default()
        },
    );
    script_job(
        params,
        &ScriptJob {
            step: CA_KEY_STEP,
            description: ca_key_description(),
            component: components::TLS,
            image: &params.spec.image.server,
            script: scripts::render_ca_key(names::CA_SECRET, SERVICE_ACCOUNT_DIR, ""),
            claims: Vec::new(),
            tmpfs_tmp: false,
            env: vec![
                env(SYNC_JOB_ENV, &data.job),
                EnvVar {
                    name: "NAMESPACE".to_owned(),
                    value_from: Some(EnvVarSource {
                        field_ref: Some(ObjectFieldSelector {
                            field_path: "metadata.namespace".to_owned(),
                            ..ObjectFieldSelector::default()
                        }),
                        ..EnvVarSource::default()
                    }),
                    ..EnvVar::default()
                },
            ],
            extra_volumes: vec![
                secret_volume(
                    "source",
                    names::MIGRATION_DATA_SECRET,
                    &[
                        (data_keys::CA_KEY, "ca.key"),
                        (data_keys::CA_CERT, "ca.crt"),
                    ],
                    scripts::SOURCE_DIR,
                ),
                secret_volume(
                    "password",
                    names::CA_PASSWORD_SECRET,
                    &[("password", "password")],
                    scripts::PASSWORD_DIR,
                ),
                scratch,
            ],
            service_account: Some(names::CA_KEY_SERVICE_ACCOUNT),
            security_context: None,
            produces: Some(crate::catalogue::products::CA_KEY),
            identity: Identity::Data,
            root: JobRoot::ReadOnly,
        },
    )
}

fn custom(kind: CustomKind, name: &str, namespace: &str, spec: serde_json::Value) -> CustomObject {
    CustomObject {
        kind,
        metadata: meta(name, namespace, components::TLS),
        spec,
        status: None,
    }
}

/// The self-signed Issuer that signs a generated CA (uyuni-project/uyuni-charts
/// `server-selfsigned/templates/certificates.yaml`: `uyuni-root-issuer`, `selfSigned: {}`), in
/// the server's namespace rather than cert-manager's: the tool writes nothing outside it.
pub fn self_signed_issuer(namespace: &str) -> CustomObject {
    custom(
        CustomKind::Issuer,
        names::SELF_SIGNED_ISSUER,
        namespace,
        json!({"selfSigned": {}}),
    )
}

/// How long a generated CA is valid: ten years, as `rhn-ssl-tool` makes the classic server's
/// CA. cert-manager's default of 90 days would renew it, and with it what every client trusts,
/// every two months.
pub const GENERATED_CA_DURATION: &str = "87600h";

/// The Certificate of a generated CA, in Secret `uyuni-ca` (the charts' example names both
/// so): `isCA`, the subject of mgradm's `--ssl-*` flags, the FQDN as common name. Its key is
/// kept on renewal (`rotationPolicy: Never`), so certificates already issued still chain.
pub fn ca_certificate(
    namespace: &str,
    fqdn: &str,
    subject: Option<&crate::params::CaSubject>,
) -> CustomObject {
    let mut spec = json!({
        "secretName": names::CA_SECRET,
        "secretTemplate": {"labels": tls_labels()},
        "isCA": true,
        "duration": GENERATED_CA_DURATION,
        "usages": ["cert sign", "crl sign", "digital signature"],
        "privateKey": {"algorithm": "RSA", "size": 4096, "rotationPolicy": "Never"},
        "issuerRef": {"name": names::SELF_SIGNED_ISSUER, "kind": "Issuer", "group": "cert-manager.io"},
    });
    if fqdn.len() <= 64 {
        spec["commonName"] = json!(fqdn);
    } else {
        spec["commonName"] = json!("Uyuni CA");
    }
    if let Some(s) = subject {
        spec["subject"] = json!({
            "countries": [s.country],
            "provinces": [s.state],
            "localities": [s.city],
            "organizations": [s.org],
            "organizationalUnits": [s.ou],
        });
    }
    custom(
        CustomKind::Certificate,
        names::CA_CERTIFICATE,
        namespace,
        spec,
    )
}

/// The CA certificate cert-manager wrote into a Certificate's Secret: `ca.crt`, which a
/// self-signed certificate's Secret holds too, else `tls.crt`.
pub fn ca_of_secret(secret: &Secret) -> Option<String> {
    let data = secret.data.as_ref()?;
    ["ca.crt", "tls.crt"]
        .iter()
        .filter_map(|k| data.get(*k))
        .find(|v| !v.0.is_empty())
        .and_then(|v| String::from_utf8(v.0.clone()).ok())
}

/// The CA issuer signing with Secret `uyuni-ca`.
pub fn ca_issuer(namespace: &str) -> CustomObject {
    custom(
        CustomKind::Issuer,
        names::CA_ISSUER,
        namespace,
        json!({"ca": {"secretName": names::CA_SECRET}}),
    )
}

/// A server certificate from the CA issuer; the Secret cert-manager writes carries our labels
/// (secretTemplate, D22).
pub fn certificate(namespace: &str, name: &str, dns_names: &[String]) -> CustomObject {
    let mut spec = json!({
        "secretName": name,
        "secretTemplate": {"labels": tls_labels()},
        "dnsNames": dns_names,
        "isCA": false,
        "usages": ["server auth", "digital signature", "key encipherment"],
        "privateKey": {"algorithm": "RSA", "size": 4096, "rotationPolicy": "Always"},
        "issuerRef": {"name": names::CA_ISSUER, "kind": "Issuer", "group": "cert-manager.io"},
    });
    // The common name has a 64-character limit; the DNS names carry the rest.
    if let Some(first) = dns_names.first().filter(|n| n.len() <= 64) {
        spec["commonName"] = json!(first);
    }
    custom(CustomKind::Certificate, name, namespace, spec)
}

/// The database certificate's names: the server's, plus the in-cluster Service names (the
/// chart's README asks for them; today's images no longer need them, they do no harm).
pub fn db_dns_names(server: &[String]) -> Vec<String> {
    let mut names = server.to_vec();
    for n in [names::DB_SERVICE, names::REPORTDB_SERVICE] {
        if !names.iter().any(|x| x == n) {
            names.push(n.to_owned());
        }
    }
    names
}

/// A TLS Secret from third-party material: chain, key and root (D08: the right names).
pub fn tls_secret(namespace: &str, name: &str, bundle: &CertBundle) -> Secret {
    let mut metadata = meta(name, namespace, components::TLS);
    metadata.annotations = Some(BTreeMap::from([(
        crate::labels::THIRD_PARTY_ANNOTATION.to_owned(),
        "true".to_owned(),
    )]));
    Secret {
        metadata,
        type_: Some("kubernetes.io/tls".to_owned()),
        data: Some(BTreeMap::from([
            ("tls.crt".to_owned(), bytes(&bundle.chain)),
            ("tls.key".to_owned(), bytes(bundle.key.expose())),
            ("ca.crt".to_owned(), bytes(&bundle.root)),
        ])),
        ..Secret::default()
    }
}

/// Whether a TLS Secret was written from certificate files (see [`tls_secret`]).
pub fn is_third_party(secret: &Secret) -> bool {
    secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::labels::THIRD_PARTY_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// `uyuni-ca` or `db-ca`: the CA certificate under `ca.crt`, as the server mounts it.
pub fn ca_config_map(namespace: &str, name: &str, ca_pem: &str) -> ConfigMap {
    ConfigMap {
        metadata: meta(name, namespace, components::TLS),
        data: Some(string_map([("ca.crt", ca_pem)])),
        ..ConfigMap::default()
    }
}
