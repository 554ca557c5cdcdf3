//! What was seen in the cluster: one snapshot, plain data. "Not there yet" is a state (an
//! absent entry), never an error.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use serde::Serialize;

use crate::catalogue::data_keys;
use crate::catalogue::names;
use crate::labels;
use crate::object::{CustomKind, Kind, Object, ObjectRef};
use crate::params::MigrateParams;
use crate::secret::SecretString;

#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub mod objects;

pub use objects::{Objects, StepAttempts};

/// What `effects::observe` must fetch: named objects (absent ones are simply missing from the
/// result) and the Jobs matching a label selector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Observation {
    pub namespace: String,
    pub named: Vec<ObjectRef>,
    pub job_selector: String,
    /// API group versions whose resources to discover (`cert-manager.io/v1`): which CRDs the
    /// cluster serves.
    pub api_groups: Vec<String>,
    /// Kinds of which every object of the namespace is read, whatever its name: the user's
    /// ResourceQuotas and LimitRanges, which decide whether a new claim is admitted.
    pub every: Vec<Kind>,
}

impl Observation {
    /// The kinds read with one LIST of the namespace (kept to the names asked for) rather than
    /// a GET per name: those of the operation's namespace with two names or more. A turn of
    /// the loop then costs a request per kind, not per object. Decided here so that the reads
    /// and the permissions they need (`access`) agree.
    pub fn listed_kinds(&self) -> std::collections::BTreeSet<Kind> {
        let mut per_kind: BTreeMap<Kind, usize> = BTreeMap::new();
        for target in &self.named {
            let in_namespace = match target.kind {
                Kind::Namespace => false,
                Kind::Custom(kind) => kind.fixed_namespace().is_none(),
                _ => true,
            };
            if in_namespace {
                *per_kind.entry(target.kind).or_insert(0) += 1;
            }
        }
        per_kind
            .into_iter()
            .filter(|(_, n)| *n >= 2)
            .map(|(kind, _)| kind)
            .collect()
    }
}

/// The observation `plan` needs for a migration.
pub fn observation(params: &MigrateParams) -> Observation {
    server_observation(params, Vec::new())
}

/// The objects a migration reads that an install does not write. An install still reads
/// Secret `uyuni-migration-data`, to refuse a namespace a migration writes to.
const MIGRATION_ONLY: [(Kind, &str); 9] = [
    (Kind::Secret, names::SSH_KEY_SECRET),
    (Kind::ConfigMap, names::SSH_CONFIG_MAP),
    (Kind::ServiceAccount, names::MIGRATION_SERVICE_ACCOUNT),
    (Kind::Role, names::MIGRATION_ROLE),
    (Kind::RoleBinding, names::MIGRATION_ROLE_BINDING),
    (Kind::Secret, names::CA_PASSWORD_SECRET),
    (Kind::ServiceAccount, names::CA_KEY_SERVICE_ACCOUNT),
    (Kind::Role, names::CA_KEY_ROLE),
    (Kind::RoleBinding, names::CA_KEY_ROLE),
];

/// The observation `plan` needs for an install: the server's objects, and what only a fresh
/// server has (its setup's Secrets, `uyuni-config`, the generated CA's issuer and
/// Certificate).
pub fn install_observation(params: &crate::params::InstallParams) -> Observation {
    let mut observation = server_observation(
        params,
        vec![
            ObjectRef::new(Kind::Secret, names::ADMIN_SECRET),
            ObjectRef::new(Kind::Secret, names::SCC_SECRET),
            ObjectRef::new(Kind::ConfigMap, names::CONFIG_MAP),
            ObjectRef::new(Kind::Custom(CustomKind::Issuer), names::SELF_SIGNED_ISSUER),
            ObjectRef::new(Kind::Custom(CustomKind::Certificate), names::CA_CERTIFICATE),
        ],
    );
    observation.named.retain(|target| {
        !MIGRATION_ONLY
            .iter()
            .any(|(kind, name)| target.kind == *kind && target.name == *name)
    });
    observation
}

/// The observation of `uninstall`: every name `install` and `migrate` write (the union of
/// their observations, every claim of the catalogue), and the Jobs of the managed selector.
/// What it deletes of them is the planner's choice (only what carries the managed labels).
pub fn uninstall_observation(params: &crate::params::UninstallParams) -> Observation {
    let mut extra = vec![
        ObjectRef::new(Kind::Secret, names::ADMIN_SECRET),
        ObjectRef::new(Kind::Secret, names::SCC_SECRET),
        ObjectRef::new(Kind::ConfigMap, names::CONFIG_MAP),
        // The counts `stop` recorded.
        ObjectRef::new(Kind::ConfigMap, names::REPLICAS_CONFIG_MAP),
        network_policy(),
        ObjectRef::new(Kind::Custom(CustomKind::Issuer), names::SELF_SIGNED_ISSUER),
        ObjectRef::new(Kind::Custom(CustomKind::Certificate), names::CA_CERTIFICATE),
    ];
    extra.extend(
        crate::volumes::CATALOGUE
            .iter()
            .map(|v| ObjectRef::new(Kind::PersistentVolumeClaim, v.name)),
    );
    // An upgrade's record, backups and newer database volumes.
    extra.extend(upgrade_objects());
    let mut observation = server_observation(params, Vec::new());
    for target in extra {
        if !observation.named.contains(&target) {
            observation.named.push(target);
        }
    }
    observation
}

/// The observation of `upgrade`: install's, its record, and the database volumes an upgrade
/// may write (the backup of each, and one per PostgreSQL major it may upgrade to).
pub fn upgrade_observation(params: &crate::params::UpgradeParams) -> Observation {
    let mut observation = match &params.origin {
        crate::params::Origin::Installed(p) => install_observation(p),
        crate::params::Origin::Migrated(p) => observation(p),
    };
    for target in upgrade_objects() {
        if !observation.named.contains(&target) {
            observation.named.push(target);
        }
    }
    observation.every = UPGRADE_EVERY.to_vec();
    observation
}

/// The kinds an upgrade reads every object of: what admits the backup's or the new major's
/// claim (`crate::quota`).
pub const UPGRADE_EVERY: [Kind; 2] = [Kind::ResourceQuota, Kind::LimitRange];

/// What an upgrade writes besides the server's objects: its record, and the database volumes
/// (the backup of each, and one per PostgreSQL major it may upgrade to).
pub fn upgrade_objects() -> Vec<ObjectRef> {
    let mut extra = vec![ObjectRef::new(Kind::ConfigMap, names::UPGRADE_CONFIG_MAP)];
    let base = crate::volumes::DATABASE_VOLUME;
    let suffix = crate::volumes::BACKUP_SUFFIX;
    extra.push(ObjectRef::new(Kind::PersistentVolumeClaim, base));
    extra.push(ObjectRef::new(
        Kind::PersistentVolumeClaim,
        format!("{base}{suffix}"),
    ));
    for major in UPGRADE_MAJORS {
        extra.push(ObjectRef::new(
            Kind::PersistentVolumeClaim,
            format!("{base}{major}"),
        ));
        extra.push(ObjectRef::new(
            Kind::PersistentVolumeClaim,
            format!("{base}{major}{suffix}"),
        ));
    }
    extra
}

/// The PostgreSQL majors whose volumes an upgrade reads: today's and the next few.
pub const UPGRADE_MAJORS: std::ops::RangeInclusive<u32> = 14..=30;

/// The tool's NetworkPolicy (`--network-policy`).
fn network_policy() -> ObjectRef {
    ObjectRef::new(Kind::NetworkPolicy, names::DB_NETWORK_POLICY)
}

/// The objects of the server's end state and of a migration's opening, then `extra`.
fn server_observation(params: &crate::params::ServerParams, extra: Vec<ObjectRef>) -> Observation {
    let pull_secret = match &params.spec.pull_secret {
        crate::params::PullSecret::Existing(name) => Some(name.as_str()),
        _ => None,
    };
    let claims: Vec<String> = params
        .spec
        .mirror_claim
        .iter()
        .cloned()
        .chain(params.spec.volumes.iter().map(|v| v.name.clone()))
        .collect();
    let mut extra = extra;
    // Read only where `--network-policy` is or was in use (given now, or in the record, `=false`
    // included): a server that never had one asks no right on NetworkPolicies of its user.
    if params.spec.network_policy || params.spec_record.contains_key("network-policy") {
        extra.push(network_policy());
    }
    objects_observation(&params.namespace, pull_secret, &claims, extra)
}

/// Every object any command reads, the claims of the whole volume catalogue: what `status`
/// starts from (it has no parameters to narrow it).
pub fn every_object(namespace: &str) -> Observation {
    let install_only = vec![
        ObjectRef::new(Kind::Custom(CustomKind::Issuer), names::SELF_SIGNED_ISSUER),
        ObjectRef::new(Kind::Custom(CustomKind::Certificate), names::CA_CERTIFICATE),
    ];
    let claims: Vec<String> = crate::volumes::CATALOGUE
        .iter()
        .map(|v| v.name.to_owned())
        .collect();
    objects_observation(namespace, None, &claims, install_only)
}

/// What `report` reads: every object of the kinds the tool writes in the namespace (each
/// kind listed whole; those `rbac --for report` lets it list: not NetworkPolicies), with the
/// named objects of [`every_object`]; the report keeps those the
/// tool's label selector ([`labels::MANAGED_SELECTOR`]) or a name of the tool selects.
/// `secrets`: whether Secrets and the RBAC objects are read (a user who may not read them
/// gets the rest).
pub fn report_observation(namespace: &str, secrets: bool) -> Observation {
    let mut observation = every_object(namespace);
    observation.every = vec![
        Kind::ConfigMap,
        Kind::PersistentVolumeClaim,
        Kind::Deployment,
        Kind::Service,
        Kind::Ingress,
    ];
    if secrets {
        observation.every.extend([
            Kind::Secret,
            Kind::ServiceAccount,
            Kind::Role,
            Kind::RoleBinding,
        ]);
    } else {
        observation.named.retain(|t| {
            !matches!(
                t.kind,
                Kind::Secret | Kind::ServiceAccount | Kind::Role | Kind::RoleBinding
            )
        });
    }
    observation
}

fn objects_observation(
    namespace: &str,
    pull_secret: Option<&str>,
    claims: &[String],
    extra: Vec<ObjectRef>,
) -> Observation {
    let mut named = vec![
        ObjectRef::new(Kind::Namespace, namespace.to_owned()),
        ObjectRef::new(Kind::ConfigMap, names::SERVER_SPEC_CONFIG_MAP),
        ObjectRef::new(Kind::Secret, names::SSH_KEY_SECRET),
        ObjectRef::new(Kind::ConfigMap, names::SSH_CONFIG_MAP),
        ObjectRef::new(Kind::ServiceAccount, names::MIGRATION_SERVICE_ACCOUNT),
        ObjectRef::new(Kind::Role, names::MIGRATION_ROLE),
        ObjectRef::new(Kind::RoleBinding, names::MIGRATION_ROLE_BINDING),
        ObjectRef::new(Kind::Secret, names::MIGRATION_DATA_SECRET),
        ObjectRef::new(Kind::Secret, names::REGISTRY_SECRET),
    ];
    if let Some(name) = pull_secret {
        named.push(ObjectRef::new(Kind::Secret, name.to_owned()));
    }
    named.extend(
        claims
            .iter()
            .map(|c| ObjectRef::new(Kind::PersistentVolumeClaim, c.clone())),
    );
    named.extend([
        ObjectRef::new(
            Kind::PersistentVolumeClaim,
            crate::volumes::upgraded_database_volume(),
        ),
        ObjectRef::new(Kind::Secret, names::DB_ADMIN_SECRET),
        ObjectRef::new(Kind::Secret, names::DB_SECRET),
        ObjectRef::new(Kind::Secret, names::REPORTDB_SECRET),
        ObjectRef::new(Kind::Service, names::DB_SERVICE),
        ObjectRef::new(Kind::Service, names::REPORTDB_SERVICE),
        ObjectRef::new(Kind::Deployment, names::DB_DEPLOYMENT),
        ObjectRef::new(Kind::Deployment, names::SERVER_DEPLOYMENT),
        ObjectRef::new(Kind::Deployment, names::HUB_DEPLOYMENT),
        ObjectRef::new(Kind::Deployment, names::COCO_DEPLOYMENT),
        ObjectRef::new(Kind::Deployment, names::TFTP_DEPLOYMENT),
        ObjectRef::new(Kind::Service, names::TFTP_SERVICE),
        ObjectRef::new(Kind::Secret, names::CA_SECRET),
        ObjectRef::new(Kind::Secret, names::CA_PASSWORD_SECRET),
        ObjectRef::new(Kind::Secret, names::SERVER_CERT_SECRET),
        ObjectRef::new(Kind::Secret, names::DB_CERT_SECRET),
        ObjectRef::new(Kind::ConfigMap, names::CA_CONFIG_MAP),
        ObjectRef::new(Kind::ConfigMap, names::DB_CA_CONFIG_MAP),
        ObjectRef::new(Kind::ServiceAccount, names::CA_KEY_SERVICE_ACCOUNT),
        ObjectRef::new(Kind::Role, names::CA_KEY_ROLE),
        ObjectRef::new(Kind::RoleBinding, names::CA_KEY_ROLE),
    ]);
    let all = crate::ports::Features {
        debug: true,
        hub: true,
    };
    for service in crate::ports::services(all) {
        let target = ObjectRef::new(Kind::Service, service);
        if !named.contains(&target) {
            named.push(target);
        }
    }
    // Custom resources only where their CRDs are served: asking for them elsewhere is a 404
    // of the whole resource type.
    named.extend([
        ObjectRef::new(Kind::Custom(CustomKind::Issuer), names::CA_ISSUER),
        ObjectRef::new(
            Kind::Custom(CustomKind::Certificate),
            names::SERVER_CERT_SECRET,
        ),
        ObjectRef::new(Kind::Custom(CustomKind::Certificate), names::DB_CERT_SECRET),
        ObjectRef::new(Kind::Custom(CustomKind::Middleware), names::HTTPS_REDIRECT),
        ObjectRef::new(
            Kind::Custom(CustomKind::HelmChartConfig),
            names::TRAEFIK_CONFIG,
        ),
        ObjectRef::new(
            Kind::Custom(CustomKind::HelmChartConfig),
            names::NGINX_CONFIG,
        ),
    ]);
    for name in [
        names::INGRESS_SSL,
        names::INGRESS_NOSSL,
        names::INGRESS_REDIRECT,
    ] {
        named.push(ObjectRef::new(Kind::Ingress, name));
    }
    for p in crate::ports::CATALOGUE.iter().filter(|p| p.external) {
        let kind = match p.protocol {
            crate::ports::Protocol::Tcp => CustomKind::IngressRouteTcp,
            crate::ports::Protocol::Udp => CustomKind::IngressRouteUdp,
        };
        named.push(ObjectRef::new(
            Kind::Custom(kind),
            crate::ports::route_name(p),
        ));
    }
    named.extend(extra);
    Observation {
        namespace: namespace.to_owned(),
        named,
        job_selector: labels::MANAGED_SELECTOR.to_owned(),
        api_groups: vec![
            CustomKind::Issuer.api_version().to_owned(),
            CustomKind::Middleware.api_version().to_owned(),
            CustomKind::HelmChartConfig.api_version().to_owned(),
        ],
        every: Vec::new(),
    }
}

/// One snapshot of the objects that matter.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Observed {
    /// Read like a `BTreeMap<ObjectRef, Object>`; changed through [`Observed::insert`] or the
    /// map's own `insert`, `remove`, `get_mut` and `retain`, which keep its Jobs' index.
    pub objects: Objects,
    /// Resources the cluster serves, as `group/version/plural` (custom resources only).
    pub served: std::collections::BTreeSet<String>,
    /// The cluster's IngressClasses (empty when none, or when they may not be listed).
    pub ingress_classes: Vec<IngressClassInfo>,
    /// The cluster's StorageClasses; `None` when they could not be listed (not allowed), and
    /// then nothing is checked against them.
    pub storage_classes: Option<Vec<StorageClassInfo>>,
}

/// An IngressClass, as far as choosing the controller goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IngressClassInfo {
    pub name: String,
    pub controller: String,
    pub default: bool,
}

/// How a Job ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub enum JobState {
    Running,
    Succeeded,
    Failed,
}

pub fn job_state(job: &Job) -> JobState {
    let status = job.status.as_ref();
    let condition = |kind: &str| {
        status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == "True"))
    };
    // The conditions decide: a failed pod of a Job that may retry does not make the Job failed.
    if condition("Complete") {
        JobState::Succeeded
    } else if condition("Failed") {
        JobState::Failed
    } else {
        JobState::Running
    }
}

/// The replicas a Deployment asks for (1 when unset, as the API server defaults it).
pub fn desired_replicas(deployment: &Deployment) -> i32 {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1)
}

/// The pure predicate of the Deployment wait: the controller has seen the current spec, every
/// replica runs the current template and is ready (reference §7.7 R: not just "one is ready").
/// The Deployment's condition of `type_` when its status is `status` (`"True"`, `"False"`).
pub fn deployment_condition<'a>(
    deployment: &'a Deployment,
    type_: &str,
    status: &str,
) -> Option<&'a k8s_openapi::api::apps::v1::DeploymentCondition> {
    deployment
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
}

pub fn deployment_ready(deployment: &Deployment) -> bool {
    let want = desired_replicas(deployment);
    let generation = deployment.metadata.generation;
    let Some(status) = deployment.status.as_ref() else {
        return false;
    };
    let seen = match (generation, status.observed_generation) {
        (Some(g), Some(o)) => o >= g,
        (None, _) => true,
        (Some(_), None) => false,
    };
    seen && status.updated_replicas.unwrap_or(0) >= want
        && status.ready_replicas.unwrap_or(0) >= want
        && status.replicas.unwrap_or(0) == want
}

/// A custom resource's `Ready` condition is `True` for its current generation.
pub fn custom_ready(object: &crate::object::CustomObject) -> bool {
    let generation = object.metadata.generation;
    object
        .status
        .as_ref()
        .and_then(|s| s.get("conditions"))
        .and_then(serde_json::Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c["type"] == "Ready"
                    && c["status"] == "True"
                    && match (generation, c["observedGeneration"].as_i64()) {
                        (Some(g), Some(o)) => o >= g,
                        _ => true,
                    }
            })
        })
}

/// The Deployment has no pods left (after a scale to 0).
pub fn deployment_stopped(deployment: &Deployment) -> bool {
    desired_replicas(deployment) == 0
        && deployment
            .status
            .as_ref()
            .is_none_or(|s| s.replicas.unwrap_or(0) == 0)
}

impl Observed {
    pub fn insert(&mut self, object: Object) {
        self.objects.insert(object.object_ref(), object);
    }

    pub fn get(&self, kind: Kind, name: &str) -> Option<&Object> {
        self.objects.get(&ObjectRef::new(kind, name))
    }

    pub fn contains(&self, kind: Kind, name: &str) -> bool {
        self.get(kind, name).is_some()
    }

    pub fn secret(&self, name: &str) -> Option<&Secret> {
        match self.get(Kind::Secret, name) {
            Some(Object::Secret(s)) => Some(s),
            _ => None,
        }
    }

    /// Whether the cluster serves this custom resource (its CRD is installed).
    pub fn serves(&self, kind: CustomKind) -> bool {
        self.served
            .contains(&format!("{}/{}", kind.api_version(), kind.plural()))
    }

    /// Marks the custom resources as served (for fixtures and the simulation).
    pub fn serve(&mut self, kind: CustomKind) {
        self.served
            .insert(format!("{}/{}", kind.api_version(), kind.plural()));
    }

    pub fn deployment(&self, name: &str) -> Option<&Deployment> {
        match self.get(Kind::Deployment, name) {
            Some(Object::Deployment(d)) => Some(d),
            _ => None,
        }
    }

    pub fn config_map(&self, name: &str) -> Option<&ConfigMap> {
        match self.get(Kind::ConfigMap, name) {
            Some(Object::ConfigMap(c)) => Some(c),
            _ => None,
        }
    }

    /// Jobs of a step, oldest first (by creation time, then name).
    pub fn jobs_for_step(&self, step: &str) -> Vec<&Job> {
        self.attempts(step).all()
    }

    /// The Jobs of a step, from the snapshot's index of Jobs by step: what the planner asks
    /// about them without going through every Job of every run.
    pub fn attempts(&self, step: &str) -> StepAttempts<'_> {
        StepAttempts::new(&self.objects, step)
    }

    /// The data the data-sync Job wrote, if any; `None` when the Secret is absent or empty.
    /// The secret values a finished migration emptied (key [`data_keys::REDACTED`]) are read
    /// from their home Secrets ([`data_keys::HOMES`]), so that every later run plans from the
    /// same data as before.
    pub fn extracted(&self) -> Result<Option<ExtractedData>, ExtractError> {
        let Some(secret) = self.secret(names::MIGRATION_DATA_SECRET) else {
            return Ok(None);
        };
        let Some(mut data) = ExtractedData::from_secret(secret)? else {
            return Ok(None);
        };
        for key in redacted_keys(secret) {
            let Some((key, home, home_key)) = data_keys::HOMES.iter().find(|h| h.0 == key) else {
                return Err(ExtractError::UnknownRedacted(key.to_owned()));
            };
            let value = self
                .secret(home)
                .and_then(|s| s.data.as_ref())
                .and_then(|d| d.get(*home_key))
                .filter(|v| !v.0.is_empty())
                .map(|v| String::from_utf8(v.0.clone()))
                .and_then(Result::ok)
                .map(SecretString::new)
                .ok_or(ExtractError::HomeLacks { key, home })?;
            match *key {
                data_keys::DB_PASSWORD => data.db_password = value,
                data_keys::REPORT_DB_PASSWORD => data.report_db_password = value,
                data_keys::CA_KEY => data.ca_key = Some(value),
                _ => data.server_key = Some(value),
            }
        }
        Ok(Some(data))
    }
}

/// The keys a finished migration emptied in Secret `uyuni-migration-data` (see
/// [`data_keys::REDACTED`]); none while it holds the values itself.
pub fn redacted_keys(secret: &Secret) -> Vec<&str> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(data_keys::REDACTED))
        .and_then(|v| std::str::from_utf8(&v.0).ok())
        .map(|v| v.split_whitespace().collect())
        .unwrap_or_default()
}

/// A value the data-sync Job extracted. During `--dry-run` the values are not known yet and are
/// placeholders naming the step that fills them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExtractedData {
    /// The Job that wrote the data.
    pub job: String,
    pub timezone: String,
    pub pg_version: String,
    pub db_user: String,
    pub db_password: SecretString,
    pub db_name: String,
    pub db_port: String,
    pub report_db_user: String,
    pub report_db_password: SecretString,
    pub has_hubxmlrpc: bool,
    pub debug: bool,
    /// Whether `tftp.socket` was enabled on the source. `None` for placeholders, and for data
    /// written by a kubectl-uyuni that did not record it yet.
    pub tftp: Option<bool>,
    /// The directory the source mirrored from (`server.susemanager.fromdir`), if it had one.
    pub mirror: Option<String>,
    pub fqdn: Option<String>,
    pub ca_cert: Option<String>,
    pub ca_key: Option<SecretString>,
    pub server_cert: Option<String>,
    pub server_key: Option<SecretString>,
    /// True when these are dry-run placeholders, not values from a real sync.
    pub placeholder: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    #[error("Secret uyuni-migration-data misses key {0:?}")]
    MissingKey(&'static str),
    #[error("Secret uyuni-migration-data key {0:?} is not UTF-8 text")]
    NotText(&'static str),
    #[error("Secret uyuni-migration-data key {key:?} is not a boolean: {value:?}")]
    NotBool { key: &'static str, value: String },
    /// A finished migration emptied `key`, whose value lives in Secret `home` since; that
    /// Secret is gone or no longer holds it.
    #[error("{}", self.render(None, &crate::kubectl::Kubectl::BARE))]
    HomeLacks {
        key: &'static str,
        home: &'static str,
    },
    #[error(
        "Secret uyuni-migration-data says key {0:?} was emptied, which no kubectl-uyuni empties: a newer kubectl-uyuni wrote it; use that version"
    )]
    UnknownRedacted(String),
}

impl ExtractError {
    /// The message, with the `kubectl` command it advises carrying the run's flags and the
    /// namespace (`None`: the command names none). `Display` renders it without them.
    pub fn render(&self, namespace: Option<&str>, kubectl: &crate::kubectl::Kubectl) -> String {
        match self {
            ExtractError::HomeLacks { key, home } => format!(
                "Secret uyuni-migration-data no longer holds {key:?}: the finished migration kept it only in Secret {home}, which is missing or lacks it. Restore Secret {home} (from a backup of the namespace), or sync again: delete the final data-sync Job (`{}`) and run the migration again",
                kubectl.cmd(
                    namespace,
                    &format!("get jobs -l {}=data-sync", crate::labels::STEP_LABEL)
                )
            ),
            other => other.to_string(),
        }
    }
}

/// Text shown instead of values that only the data-sync can know.
/// A StorageClass, as far as provisioning the claims goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StorageClassInfo {
    pub name: String,
    pub default: bool,
}

pub const PLACEHOLDER: &str = "<known after data-sync>";
/// Marks placeholder data in the Secret of a simulated (dry-run) state.
pub const PLACEHOLDER_KEY: &str = "placeholder";

impl ExtractedData {
    pub fn from_secret(secret: &Secret) -> Result<Option<Self>, ExtractError> {
        let Some(data) = secret.data.as_ref().filter(|d| !d.is_empty()) else {
            return Ok(None);
        };
        let get = |key: &'static str| -> Result<Option<String>, ExtractError> {
            data.get(key)
                .map(|v| String::from_utf8(v.0.clone()).map_err(|_| ExtractError::NotText(key)))
                .transpose()
        };
        let req = |key: &'static str| get(key)?.ok_or(ExtractError::MissingKey(key));
        let boolean = |key: &'static str| -> Result<bool, ExtractError> {
            match req(key)?.trim() {
                "true" => Ok(true),
                "false" | PLACEHOLDER => Ok(false),
                other => Err(ExtractError::NotBool {
                    key,
                    value: other.to_owned(),
                }),
            }
        };
        Ok(Some(ExtractedData {
            job: req(data_keys::JOB)?,
            timezone: req(data_keys::TIMEZONE)?,
            pg_version: req(data_keys::PG_VERSION)?,
            db_user: req(data_keys::DB_USER)?,
            db_password: SecretString::new(req(data_keys::DB_PASSWORD)?),
            db_name: req(data_keys::DB_NAME)?,
            db_port: req(data_keys::DB_PORT)?,
            report_db_user: req(data_keys::REPORT_DB_USER)?,
            report_db_password: SecretString::new(req(data_keys::REPORT_DB_PASSWORD)?),
            has_hubxmlrpc: boolean(data_keys::HAS_HUBXMLRPC)?,
            debug: boolean(data_keys::DEBUG)?,
            tftp: match get(data_keys::TFTP)?.as_deref().map(str::trim) {
                None | Some(PLACEHOLDER) => None,
                Some("true") => Some(true),
                Some("false") => Some(false),
                Some(other) => {
                    return Err(ExtractError::NotBool {
                        key: data_keys::TFTP,
                        value: other.to_owned(),
                    });
                }
            },
            mirror: get(data_keys::MIRROR)?
                .map(|m| m.trim().to_owned())
                .filter(|m| !m.is_empty() && m != PLACEHOLDER),
            fqdn: get(data_keys::FQDN)?,
            ca_cert: get(data_keys::CA_CERT)?,
            ca_key: get(data_keys::CA_KEY)?.map(SecretString::new),
            server_cert: get(data_keys::SERVER_CERT)?,
            server_key: get(data_keys::SERVER_KEY)?.map(SecretString::new),
            placeholder: data.contains_key(PLACEHOLDER_KEY),
        }))
    }

    /// Which TLS material the sync found, in words (never the material itself).
    pub fn ssl_summary(&self) -> String {
        if self.placeholder {
            return PLACEHOLDER.to_owned();
        }
        match (&self.ca_key, &self.server_cert, &self.server_key) {
            (Some(_), _, _) => {
                "Uyuni-generated CA with its (encrypted) key: the CA will be reused".into()
            }
            (None, Some(_), Some(_)) => "third-party server certificate and key".into(),
            _ if self.ca_cert.is_some() => "CA certificate only (no CA key, no server key)".into(),
            _ => "none".into(),
        }
    }
}
