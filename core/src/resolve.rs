//! Every fact a migration decides, decided here once from what the user asked for (params),
//! what the cluster holds (observed) and what the data sync extracted: where the certificates
//! come from, the name the server answers to, TFTP, the ingress controller, the optional
//! components, the PostgreSQL upgrade, the database claim, the pull Secret in effect, and the
//! results of the preflight checks that need nothing above this layer. The planner, the notes
//! and the plugin's summary read these values, so they cannot disagree; the builders take them
//! as arguments and decide nothing.

use std::borrow::Cow;

use crate::catalogue::{names, steps};
use crate::inspect::{CaCopy, Inspection};
use crate::object::{CustomKind, Kind};
use crate::observed::{ExtractedData, Observed};
use crate::params::{IngressMode, InstallParams, MigrateParams, PullSecret, ServerParams};
use crate::pg;
use crate::ports::Features;
use crate::storage::{self, StorageError};
use crate::volumes;

/// The facts that follow from a sync's data (or from the placeholders of a dry run before it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// Where the server's certificates come from.
    pub tls: Result<TlsMode, TlsError>,
    /// The name the server answers to.
    pub fqdn: String,
    /// The server certificate's names: the FQDN, then `--ssl-cname`.
    pub dns_names: Vec<String>,
    pub tftp: Result<TftpDecision, NotRecorded>,
    /// Where the TFTP decision came from, for step descriptions.
    pub tftp_origin: &'static str,
    /// Replicas of the hub XML-RPC API (0: not deployed).
    pub hub_replicas: i32,
    /// The conditional ports and Services.
    pub features: Features,
    /// Whether the synced database is upgraded, from its `PG_VERSION`.
    pub pg: Result<pg::Upgrade, pg::VersionError>,
    /// The claim the `db` Deployment runs on.
    pub db_claim: String,
    /// The ingress controller and IngressClass, `None`: no Ingress.
    pub ingress: Option<(Controller, Option<String>)>,
    /// The checks before any write, from params and the cluster alone.
    pub preflight: Preflight,
    /// Whether the server Deployment mounts `uyuni-ca`'s CA read-only at the Salt file root's
    /// CA file: for a server image that does not copy it there at start ([`salt_ca_mount`]).
    pub salt_ca_mount: bool,
}

/// The outcomes of the checks made before any write, each decided once here. Two checks are
/// not: the check of the command line against the migration's phase
/// (`plan::phase::check`), which belongs to the planner's phases and answers with its errors,
/// and the Pod Security check (`pod_security::check`), which builds the migration's pods from
/// these facts and so cannot be part of them. The planner runs those itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preflight {
    /// Whether cert-manager is served where the certificates need it.
    pub cert_manager: Result<(), CertManagerMissing>,
    /// Whether the claims to create can be provisioned by the cluster's StorageClasses.
    pub storage: Result<(), StorageError>,
}

/// The migration needs cert-manager and the cluster does not serve its Issuer and Certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertManagerMissing;

/// The preflight results from the user's parameters and the cluster: they do not depend on a
/// sync's data beyond what `observed` holds of it, so the planner asks for them before it has
/// any.
pub fn preflight(params: &MigrateParams, observed: &Observed) -> Preflight {
    Preflight {
        cert_manager: cert_manager(params, observed),
        storage: storage::check(params, observed),
    }
}

/// Before any write: cert-manager must be there unless the certificates come from elsewhere.
/// Before the sync it is not known whether the source has its CA key, so it is required then
/// unless third-party files are given.
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn cert_manager(params: &MigrateParams, observed: &Observed) -> Result<(), CertManagerMissing> {
    let data = observed
        .extracted()
        .ok()
        .flatten()
        .filter(|d| !d.placeholder);
    let mode = tls_mode(params, observed, data.as_ref());
    let needs_cert_manager = !matches!(
        mode,
        Ok(TlsMode::ThirdPartyFiles | TlsMode::ThirdPartyMigrated | TlsMode::KeptFromEarlierRun)
    );
    let served = observed.serves(CustomKind::Issuer) && observed.serves(CustomKind::Certificate);
    if served || !needs_cert_manager {
        Ok(())
    } else {
        Err(CertManagerMissing)
    }
}

/// A new server's parameters in effect: its database volume named for the PostgreSQL major its
/// database image check reported (`var-pgsql19` for PostgreSQL 19), as the chart names it per
/// major (`uyuni.pgPVCName`); once a `db` runs, the volume it runs on (after an upgrade to a
/// new major, the volume named for that one). The name fixed in the parameters
/// (`var-pgsql18`) before either is known, as in a dry run before the check.
pub fn install_in_effect<'a>(
    params: &'a InstallParams,
    observed: &Observed,
) -> Cow<'a, InstallParams> {
    let named = volumes::upgraded_database_volume();
    let reported_major = || {
        reported(
            observed,
            &[
                steps::IMAGE_CHECK_DB,
                steps::INSPECT_DB,
                steps::INSPECT_RUNNING_DB,
            ],
            &params.spec.image.database,
            |report| report.pg_major,
        )
        .map(|major| format!("{}{major}", volumes::DATABASE_VOLUME))
    };
    let Some(claim) = live_db_claim(observed)
        .or_else(reported_major)
        .filter(|claim| *claim != named)
    else {
        return Cow::Borrowed(params);
    };
    let mut in_effect = params.clone();
    for v in &mut in_effect.spec.volumes {
        if v.name == named {
            v.name.clone_from(&claim);
        }
    }
    Cow::Owned(in_effect)
}

/// The parameters in effect in this cluster: as given, except that a pull Secret written by an
/// earlier run stays in use when no registry flag is given (the pods that run already reference
/// it). Every object is built from these.
pub fn in_effect<'a, P>(params: &'a P, observed: &Observed) -> Cow<'a, P>
where
    P: Clone + std::ops::DerefMut<Target = ServerParams>,
{
    if params.spec.pull_secret == PullSecret::None
        && observed.contains(Kind::Secret, names::REGISTRY_SECRET)
    {
        let mut in_effect = params.clone();
        in_effect.spec.pull_secret = PullSecret::Reused;
        Cow::Owned(in_effect)
    } else {
        Cow::Borrowed(params)
    }
}

/// Decides every fact from the user's parameters, the cluster and a sync's data (placeholders
/// in a dry run before the sync: the facts are then those the dry run shows).
pub fn resolve(params: &MigrateParams, observed: &Observed, data: &ExtractedData) -> Facts {
    let pg = if data.placeholder {
        Ok(pg::Upgrade::Unknown)
    } else {
        pg::decide(Some(&data.pg_version))
    };
    Facts {
        tls: tls_mode(params, observed, Some(data)),
        fqdn: server_fqdn(params, data),
        dns_names: server_dns_names(params, data),
        tftp: tftp(params, data),
        tftp_origin: tftp(params, data).map_or("", |d| tftp_origin(params, d)),
        hub_replicas: hub_replicas(params, data),
        features: features(params, data),
        db_claim: data_claim(pg.clone().unwrap_or(pg::Upgrade::Unknown)),
        pg,
        ingress: ingress(params, observed),
        preflight: preflight(params, observed),
        salt_ca_mount: salt_ca_mount(params, observed),
    }
}

/// Every fact of a fresh server, from `install`'s parameters and the cluster: nothing comes
/// from a source. TFTP is on unless `--tftp=false`, as the chart's `tftp.enable` defaults to
/// true (`containers/server-helm/values.yaml`); the hub XML-RPC API only with
/// `--hubxmlrpc-replicas`; the database on the chart's `var-pgsql18`.
pub fn install(params: &InstallParams, observed: &Observed) -> Facts {
    let tls = if params.spec.tls.third_party.is_some() {
        TlsMode::ThirdPartyFiles
    } else if earlier_third_party(observed) {
        TlsMode::KeptFromEarlierRun
    } else {
        TlsMode::GeneratedCa
    };
    let mut dns_names = vec![params.fqdn.clone()];
    for c in &params.spec.tls.cnames {
        if !dns_names.contains(c) {
            dns_names.push(c.clone());
        }
    }
    let hub_replicas = params.spec.hubxmlrpc_replicas.unwrap_or(0);
    let needs_cert_manager = tls == TlsMode::GeneratedCa;
    let served = observed.serves(CustomKind::Issuer) && observed.serves(CustomKind::Certificate);
    Facts {
        tls: Ok(tls),
        fqdn: params.fqdn.clone(),
        dns_names,
        tftp: Ok(if params.spec.tftp.enabled == Some(false) {
            TftpDecision::Off
        } else {
            TftpDecision::On
        }),
        tftp_origin: match params.spec.tftp.enabled {
            Some(true) => "--tftp",
            Some(false) => "--tftp=false",
            None => "on by default, as in the official chart; --tftp=false turns it off",
        },
        hub_replicas,
        features: Features {
            debug: params.debug_java,
            hub: hub_replicas > 0,
        },
        pg: Ok(pg::Upgrade::NotNeeded),
        // Where `db` runs already, it stays: after an upgrade to a new PostgreSQL major, the
        // volume named for it, not the one the install began with.
        db_claim: live_db_claim(observed).unwrap_or_else(|| {
            params
                .spec
                .volumes
                .iter()
                .find(|v| v.role == volumes::VolumeRole::Database)
                .map_or_else(volumes::upgraded_database_volume, |v| v.name.clone())
        }),
        ingress: ingress(params, observed),
        preflight: Preflight {
            cert_manager: if served || !needs_cert_manager {
                Ok(())
            } else {
                Err(CertManagerMissing)
            },
            storage: storage::check(params, observed),
        },
        salt_ca_mount: salt_ca_mount(params, observed),
    }
}

/// Where the certificates come from, an earlier run's kept certificates included. `data`:
/// what a sync extracted, `None` before any (then the usual case, the reused CA, as a dry run
/// shows it).
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn tls_mode(
    params: &MigrateParams,
    observed: &Observed,
    data: Option<&ExtractedData>,
) -> Result<TlsMode, TlsError> {
    let base = match data {
        Some(data) => base_tls_mode(params, data),
        None if params.spec.tls.third_party.is_some() => Ok(TlsMode::ThirdPartyFiles),
        None => Ok(TlsMode::ReusedCa),
    };
    match base {
        // Without files this time, the earlier run's certificates stay, whatever the source
        // has: they are what the server was given.
        Ok(TlsMode::ReusedCa) | Err(_) if earlier_third_party(observed) => {
            Ok(TlsMode::KeptFromEarlierRun)
        }
        other => other,
    }
}

/// An earlier run wrote the server's certificate from files (`--ssl-*`).
pub(crate) fn earlier_third_party(observed: &Observed) -> bool {
    observed
        .secret(names::SERVER_CERT_SECRET)
        .and_then(|s| s.metadata.annotations.as_ref())
        .and_then(|a| a.get(crate::labels::THIRD_PARTY_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// Where the server's certificates come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// The source's Uyuni CA, its key decrypted in the cluster, issuing through cert-manager.
    ReusedCa,
    /// Certificates from `--ssl-*` files.
    ThirdPartyFiles,
    /// The third-party server certificate and key found on the source.
    ThirdPartyMigrated,
    /// An earlier run wrote the server's certificate from `--ssl-*` files and none are given
    /// this time: kept as it is, never replaced by one issued from the migrated CA.
    KeptFromEarlierRun,
    /// A new CA made by cert-manager (self-signed issuer, CA Certificate, CA issuer): a fresh
    /// server's, when no certificate files are given.
    GeneratedCa,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    #[error(
        "the source has neither the key of its Uyuni CA nor a server certificate with its key: give the server certificate with --ssl-server-cert, --ssl-server-key and --ssl-ca-root"
    )]
    NoMaterial,
}

/// The mode from the flags first, then from what the sync found, before an earlier run's
/// certificates are taken into account. Dry runs before the sync show the usual case: the
/// reused CA.
fn base_tls_mode(params: &MigrateParams, data: &ExtractedData) -> Result<TlsMode, TlsError> {
    if params.spec.tls.third_party.is_some() {
        Ok(TlsMode::ThirdPartyFiles)
    } else if data.placeholder || data.ca_key.is_some() {
        Ok(TlsMode::ReusedCa)
    } else if data.server_cert.is_some() && data.server_key.is_some() {
        Ok(TlsMode::ThirdPartyMigrated)
    } else {
        Err(TlsError::NoMaterial)
    }
}

/// The name the server answers to: the source's `java.hostname`, else the source FQDN.
pub(crate) fn server_fqdn(params: &MigrateParams, data: &ExtractedData) -> String {
    match data.fqdn.as_deref() {
        Some(f) if !f.is_empty() && !data.placeholder => f.to_ascii_lowercase(),
        _ => params.source_fqdn.clone(),
    }
}

/// The server certificate's names: the FQDN, then `--ssl-cname` (D45).
pub(crate) fn server_dns_names(params: &MigrateParams, data: &ExtractedData) -> Vec<String> {
    let mut names = vec![server_fqdn(params, data)];
    for c in &params.spec.tls.cnames {
        if !names.contains(c) {
            names.push(c.clone());
        }
    }
    names
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TftpDecision {
    /// `--tftp=true`, or `tftp.socket` was enabled on the source.
    On,
    /// `--tftp=false`, or `tftp.socket` was not enabled on the source.
    Off,
    /// A dry run before the data sync: the source decides. Planned as if on, and said so.
    Unknown,
}

/// The data sync did not record whether the source served TFTP (data written by an older
/// kubectl-uyuni), and no flag decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the data sync did not record whether tftp.socket was enabled on the source")]
pub struct NotRecorded;

/// The flag wins; otherwise what the source did.
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn tftp(params: &MigrateParams, data: &ExtractedData) -> Result<TftpDecision, NotRecorded> {
    match (params.spec.tftp.enabled, data.tftp) {
        (Some(true), _) => Ok(TftpDecision::On),
        (Some(false), _) => Ok(TftpDecision::Off),
        _ if data.placeholder => Ok(TftpDecision::Unknown),
        (None, Some(true)) => Ok(TftpDecision::On),
        (None, Some(false)) => Ok(TftpDecision::Off),
        (None, None) => Err(NotRecorded),
    }
}

/// Where the decision came from, for step descriptions.
pub fn tftp_origin(params: &ServerParams, decision: TftpDecision) -> &'static str {
    match (params.spec.tftp.enabled, decision) {
        (Some(true), _) => "--tftp",
        (Some(false), _) => "--tftp=false",
        (None, TftpDecision::On) => "tftp.socket was enabled on the source",
        (None, TftpDecision::Off) => "tftp.socket was not enabled on the source",
        (None, TftpDecision::Unknown) => {
            "if tftp.socket is enabled on the source: known after data-sync"
        }
    }
}

/// The ingress controllers the tool knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    Traefik,
    Nginx,
}

/// The controller and IngressClass to use: the flag, else the cluster's default class (or its
/// only one), known by its controller string. `None`: no Ingress.
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub fn ingress(params: &ServerParams, observed: &Observed) -> Option<(Controller, Option<String>)> {
    let of = |controller: &str| match controller {
        "traefik.io/ingress-controller" => Some(Controller::Traefik),
        "k8s.io/ingress-nginx" => Some(Controller::Nginx),
        _ => None,
    };
    let classes = &observed.ingress_classes;
    let detected = classes
        .iter()
        .find(|c| c.default)
        .or_else(|| (classes.len() == 1).then(|| &classes[0]));
    let class_of = |controller: Controller| {
        params.spec.ingress.class.clone().or_else(|| {
            classes
                .iter()
                .find(|c| of(&c.controller) == Some(controller))
                .map(|c| c.name.clone())
        })
    };
    let controller = match params.spec.ingress.mode {
        IngressMode::None => return None,
        IngressMode::Traefik => Controller::Traefik,
        IngressMode::Nginx => Controller::Nginx,
        IngressMode::Auto => detected.and_then(|c| of(&c.controller))?,
    };
    Some((controller, class_of(controller)))
}

pub(crate) fn features(params: &MigrateParams, data: &ExtractedData) -> Features {
    Features {
        debug: data.debug,
        hub: hub_replicas(params, data) > 0,
    }
}

/// Hub replicas: the flag, else one when the source ran the hub XML-RPC API (D18 fixed).
pub(crate) fn hub_replicas(params: &MigrateParams, data: &ExtractedData) -> i32 {
    params
        .spec
        .hubxmlrpc_replicas
        .unwrap_or(i32::from(data.has_hubxmlrpc))
}

/// The claim the `db` Deployment runs on.
pub(crate) fn data_claim(upgrade: pg::Upgrade) -> String {
    match upgrade {
        pg::Upgrade::NotNeeded => volumes::DATABASE_VOLUME.to_owned(),
        pg::Upgrade::Needed { .. } | pg::Upgrade::Unknown => volumes::upgraded_database_volume(),
    }
}

/// The newest report on `image` that tells `what`, among the Jobs of `steps` that ran that
/// image (an image check's or an inspection's report, copied onto its Job as
/// [`crate::labels::INSPECTION_ANNOTATION`]); `None` before any told it. A dry run's stand-in
/// report tells nothing.
pub fn reported<T>(
    observed: &Observed,
    steps: &[&str],
    image: &str,
    what: impl Fn(&Inspection) -> Option<T>,
) -> Option<T> {
    steps
        .iter()
        .flat_map(|step| observed.attempts(step).all())
        .filter(|job| {
            job.spec
                .as_ref()
                .and_then(|s| s.template.spec.as_ref())
                .and_then(|p| p.containers.first())
                .and_then(|c| c.image.as_deref())
                == Some(image)
        })
        .filter_map(|job| {
            let text = job
                .metadata
                .annotations
                .as_ref()?
                .get(crate::labels::INSPECTION_ANNOTATION)?;
            Some((
                job.metadata.creation_timestamp.clone(),
                what(&Inspection::parse(text))?,
            ))
        })
        .max_by(|a, b| a.0.cmp(&b.0))
        .map(|(_, value)| value)
}

/// Which kind of server image `params` asks for, as its check (install, migrate) or its
/// inspection (upgrade, and a rollback's image, inspected as the one the server ran) reported
/// it; `None` before either ran, and for a report of a version of this tool that did not tell.
pub fn server_image_kind(params: &ServerParams, observed: &Observed) -> Option<CaCopy> {
    reported(
        observed,
        &[
            steps::IMAGE_CHECK_SERVER,
            steps::INSPECT_SERVER,
            steps::INSPECT_RUNNING_SERVER,
        ],
        &params.spec.image.server,
        |report| report.ca_copy,
    )
}

/// Whether the server Deployment mounts `uyuni-ca`'s CA read-only over the Salt file root's
/// CA file ([`crate::scripts::image_check::SALT_CA_FILE`]), as the official chart does: only
/// for an image known not to copy it there at start (`ca_copy=none`). Such an image has only
/// its package's symlink there, which Salt cannot serve (`crate::builders::server` cites
/// both). An image that copies it must find no read-only file there: the copy fails, and the
/// newest script stops the start on it.
///
/// An image whose kind is not known (no report yet, as in a dry run before its check ran, or a
/// check run by a version of this tool that did not report it) gets no mount: a wrong mount
/// stops the server's start, a missing one only leaves the CA out of what Salt serves to new
/// clients, with the server up, and the next run after a check mounts it.
pub fn salt_ca_mount(params: &ServerParams, observed: &Observed) -> bool {
    server_image_kind(params, observed) == Some(CaCopy::None)
}

/// The claim the `db` Deployment runs on (its volume [`volumes::DATABASE_VOLUME`]), when it
/// exists.
pub fn live_db_claim(observed: &Observed) -> Option<String> {
    observed
        .deployment(crate::catalogue::names::DB_DEPLOYMENT)?
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .volumes
        .as_ref()?
        .iter()
        .find(|v| v.name == volumes::DATABASE_VOLUME)?
        .persistent_volume_claim
        .as_ref()
        .map(|c| c.claim_name.clone())
}
