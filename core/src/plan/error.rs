//! Why a plan cannot be made, and what the user does about it.

use crate::catalogue::names;
use crate::kubectl::Kubectl;
use crate::labels;
use crate::object::ObjectRef;
use crate::observed::ExtractError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{}", self.render(&Kubectl::BARE))]
    NamespaceTerminating(String),
    /// `upgrade` on a namespace with no server of this tool's. `install`: the command that
    /// installs one.
    #[error(
        "namespace {namespace} has no Uyuni server to upgrade (Deployments uyuni and db): check the namespace (-n) and context; to install a server there, run `{install}`. Nothing was written"
    )]
    NoServerToUpgrade { namespace: String, install: String },
    #[error(
        "the server in namespace {namespace} changed while the upgrade was planned (its Deployments no longer carry the origin this run read): run the upgrade again. Nothing was written"
    )]
    UpgradeOriginChanged { namespace: String },
    /// `upgrade` of a migration that has not finished. `finish`: the command that finishes it.
    #[error(
        "the migration in namespace {namespace} has not finished (the server does not run on the data of its final sync yet): an upgrade comes after it. Finish it with `{finish}`, then upgrade. Nothing was written"
    )]
    MigrationUnfinished { namespace: String, finish: String },
    /// The release order or the PostgreSQL majors forbid the upgrade.
    #[error(
        "upgrade refused in namespace {namespace}: {reason}. Nothing of the server was changed"
    )]
    UpgradeRefused { namespace: String, reason: String },
    /// A resumed upgrade whose new volume the namespace would not admit: the upgrade has begun
    /// (its record is written, the server may be stopped for it), its data step not yet.
    #[error(
        "the upgrade in namespace {namespace} cannot go on: {reason}. The database is as it was before the upgrade (its copy or major upgrade has not begun); the server may be stopped for the upgrade until it goes on, or until `{rollback}` returns to the images before"
    )]
    UpgradeStalled {
        namespace: String,
        reason: String,
        rollback: String,
    },
    #[error(
        "the inspection of image {image} in namespace {namespace} did not tell {missing}: it is not a server or database image this tool can upgrade to. Check the image flags (--image/--tag, --db-image/--pgsql-tag). Nothing of the server was changed"
    )]
    InspectionIncomplete {
        namespace: String,
        image: String,
        missing: String,
    },
    /// The inspection of an image the server runs now did not tell what an upgrade needs.
    #[error(
        "the inspection of image {image}, which the server in namespace {namespace} runs now, did not tell {missing}: so the release the upgrade starts from is unknown. The image flags name only the target, not the running image: read the inspection Job's log (`kubectl uyuni logs inspect-running-server`, or `inspect-running-db`), and check that the running image is an Uyuni or SUSE Multi-Linux Manager server or database image with its release file (/etc/uyuni-release or /etc/susemanager-release). Nothing of the server was changed"
    )]
    RunningInspectionIncomplete {
        namespace: String,
        image: String,
        missing: String,
    },
    /// `upgrade --rollback` of a server that `stop` stopped after its upgrade.
    #[error(
        "the server in namespace {namespace} is stopped (Deployment {deployment} has 0 replicas, as `kubectl uyuni stop` leaves it): a rollback would start it again on the images before the upgrade. Start it with `{start}`, then run `{rollback}`; the rollback stops it first, and what it writes meanwhile is lost with the rest of what was written since the upgrade began. Nothing was written"
    )]
    StoppedBeforeRollback {
        namespace: String,
        deployment: String,
        start: String,
        rollback: String,
    },
    #[error("nothing to roll back in namespace {namespace}: {why}. Nothing was written")]
    NothingToRollBack { namespace: String, why: String },
    /// An earlier upgrade has not reached its images, and this run asks for others.
    #[error("{}", self.render(&Kubectl::BARE))]
    UpgradeUnfinished { namespace: String, to: String },
    /// `upgrade` of a server that `stop` stopped. `start`: the command that starts it.
    #[error(
        "the server in namespace {namespace} is stopped (Deployment {deployment} has 0 replicas, as `kubectl uyuni stop` leaves it): an upgrade proves itself by the new server becoming ready, and records the replica counts to come back to. Start it with `{start}`, then run the upgrade again. Nothing was written"
    )]
    ServerStopped {
        namespace: String,
        deployment: String,
        start: String,
    },
    /// `restart` of a server that `stop` stopped. `start`: the command that starts it.
    #[error(
        "the server in namespace {namespace} is stopped (Deployment {deployment} has 0 replicas, as `kubectl uyuni stop` leaves it): a restart replaces running pods, and none runs. Start it with `{start}` (its pods start anew). Nothing was written"
    )]
    RestartStopped {
        namespace: String,
        deployment: String,
        start: String,
    },
    #[error("Secret {secret} was not found in namespace {namespace} and no SSH key was given: pass --ssh-key-private and --ssh-key-public (a key pair without passphrase that can log in to the source), or create the Secret with keys `key` and `key.pub`", secret = names::SSH_KEY_SECRET)]
    SshKeyMissing { namespace: String },
    #[error("ConfigMap {cm} was not found in namespace {namespace} and no known_hosts file was given: pass --ssh-knownhosts (and optionally --ssh-config), or create the ConfigMap with keys `known_hosts` and `config`", cm = names::SSH_CONFIG_MAP)]
    SshConfigMissing { namespace: String },
    #[error(
        "{object} in namespace {namespace}: key `{key}` {problem}; fix the object or pass the SSH flags to replace it"
    )]
    SshObjectInvalid {
        object: ObjectRef,
        namespace: String,
        key: &'static str,
        problem: String,
    },
    /// `remedy` is what clears it: a new `--prepare` run copies anew; a final sync that
    /// succeeded is never repeated by itself, so its Job has to go first.
    #[error("{}", self.render(&Kubectl::BARE))]
    NoExtractedData {
        job: String,
        namespace: String,
        detail: String,
        remedy: String,
    },
    /// `finish`: the `kubectl uyuni migrate` command without `--prepare`, with the run's flags.
    #[error(
        "--prepare refused: {found}, so a copy now would overwrite the volumes of the migrated server. To finish the migration, run `{finish}` (without --prepare): it goes on from where it stands and copies nothing again. To copy from the source anew instead, losing what the migrated server wrote since: {again}then run `{finish}`. Nothing was written"
    )]
    PrepareAfterFinalSync {
        found: String,
        fqdn: String,
        again: String,
        finish: String,
    },
    #[error(
        "--prepare refused: the final data sync runs (Job {job}) and the source's services are stopped for it. Let it finish with `{finish}`: it waits for the Job and goes on. Nothing was written"
    )]
    PrepareWhileFinalSyncRuns {
        job: String,
        fqdn: String,
        finish: String,
    },
    /// The volumes hold (or receive) a copy of another source than the run names. `same`:
    /// the command that goes on with that source.
    #[error("{}", self.render(&Kubectl::BARE))]
    OtherSource {
        job: String,
        found: String,
        fqdn: String,
        namespace: String,
        same: String,
    },
    #[error(
        "a data sync would copy into the volumes {deployments} runs on: refused, nothing was written; {remedy}"
    )]
    SyncIntoRunningServer { deployments: String, remedy: String },
    /// A run that would change the images of a server that ran on its data: that is an
    /// upgrade. `changes`: each Deployment with its image now and the one asked for; `same`:
    /// the run without its image flags.
    #[error("{}", self.render(&Kubectl::BARE))]
    ImageChangeOnRunningServer {
        namespace: String,
        running: String,
        changes: String,
        same: String,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    ExtractedData {
        job: String,
        namespace: String,
        source: ExtractError,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    CertManagerMissing,
    #[error(
        "the source's CA key is encrypted: give its password with --ssl-password-file FILE or the environment variable UYUNI_SSL_PASSWORD (it is never accepted on the command line), then run again; the steps done so far are kept"
    )]
    CaPasswordNeeded,
    /// `install` on a namespace whose server it did not install.
    #[error(
        "namespace {namespace} holds a server already ({found}), which this tool did not install: install refuses to write over it. Choose another namespace with -n, or, to manage that server, use the command that made it. Nothing was written"
    )]
    ServerPresent { namespace: String, found: String },
    /// `migrate` on a namespace whose server `install` made.
    #[error(
        "namespace {namespace} holds a server this tool installed ({found}): a migration into it would replace that server's data with the source's. Migrate into another namespace with -n. Nothing was written"
    )]
    InstalledServerPresent { namespace: String, found: String },
    /// `install` again with another FQDN than the server was installed with.
    #[error(
        "refused: the server in namespace {namespace} was installed as {installed}, and this run names it {asked}. The image sets the server up under its name at the first start and does not rename it; to go on with the installed server, run `{same}`. Nothing was written"
    )]
    FqdnChange {
        namespace: String,
        installed: String,
        asked: String,
        same: String,
    },
    /// `install` on claims (kept by an uninstall) whose data was set up under another name.
    /// `advice`: the name this run gives, and the commands that go on (the same name, or a
    /// purge first).
    #[error(
        "refused: claim {claim} in namespace {namespace} holds the data of server {installed} (set up under that name at its first start), and {advice}. Nothing was written"
    )]
    ClaimsSetUpAsOther {
        namespace: String,
        claim: String,
        installed: String,
        advice: String,
    },
    /// `install --reuse-volumes` on a database whose credential Secrets are gone.
    #[error(
        "--reuse-volumes: the database on claim {claim} in namespace {namespace} was set up with its accounts' passwords, and these are gone: {}. A password generated now would lock the server out of its database: give each with the flag named (or its UYUNI_* variable), or restore the Secret. Nothing was written",
        missing.join(", ")
    )]
    ReusedDatabaseWithoutCredentials {
        namespace: String,
        claim: String,
        missing: Vec<String>,
    },
    /// `stop` or `start` where no server runs.
    #[error("{}", self.render(&Kubectl::BARE))]
    NoServer { namespace: String },
    /// `install` on a namespace a migration writes to.
    #[error("{}", self.render(&Kubectl::BARE))]
    MigrationPresent { namespace: String, found: String },
    /// Claims `install` would use exist, and it did not create them.
    #[error(
        "claim(s) {} exist in namespace {namespace} and were not created by an install of this tool: they may hold another server's data. To run the new server on that data (the image then keeps it and skips its first-start setup, so the credential Secrets must be the ones that data was set up with), run again with --reuse-volumes; to start afresh, choose another namespace with -n or delete those claims yourself. Nothing was written",
        claims.join(", ")
    )]
    ClaimsHoldData {
        namespace: String,
        claims: Vec<String>,
    },
    /// The first administrator's password is needed and was not given.
    #[error(
        "the first administrator's password is needed: put it in a file and pass --admin-password-file FILE, or set UYUNI_ADMIN_PASSWORD (it is never accepted on the command line; on a terminal it is asked for). Nothing was written"
    )]
    AdminPasswordNeeded,
    /// The password typed at the prompt cannot be used.
    #[error("the administrator's password was refused: {0}")]
    AdminPasswordRefused(String),
    #[error("{0}")]
    Tls(#[from] crate::resolve::TlsError),
    /// A third-party certificate does not name a host the server answers to.
    #[error("{0}")]
    CertificateNames(Box<CertificateNames>),
    /// The third-party certificate found on the source cannot serve: its key, its chain or its
    /// names.
    #[error(
        "the server certificate found on the source ({path}, copied by Job {job}) {problem}: the migrated server could not serve TLS with it. Give a certificate with --ssl-server-cert, --ssl-server-key and --ssl-ca-root instead (they take the place of the source's), then run again. Nothing was changed after the data sync"
    )]
    SourceCertificate {
        job: String,
        path: &'static str,
        problem: String,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    PullSecretMissing { name: String, namespace: String },
    #[error(
        "PersistentVolumeClaim {claim} (--mirror-claim) was not found in namespace {namespace}: create it first (bound to the volume holding your mirror), or leave the flag out"
    )]
    MirrorClaimMissing { claim: String, namespace: String },
    #[error(
        "Secret {name} (--image-pull-secret) in namespace {namespace} has type {kind:?}, not kubernetes.io/dockerconfigjson: pods cannot pull with it; give a registry pull Secret"
    )]
    PullSecretType {
        name: String,
        namespace: String,
        kind: String,
    },
    #[error(
        "Secret {secret} (written by Job {job}) does not say whether the source served TFTP: an older kubectl-uyuni synced it. Pass --tftp=true or --tftp=false (`systemctl is-enabled tftp.socket` on the source tells), then run again. Nothing was changed after the data sync",
        secret = names::MIGRATION_DATA_SECRET
    )]
    TftpNotRecorded { job: String },
    /// Known at the first plan after the sync, before anything else is written.
    #[error(
        "{source}. Nothing was changed after the data sync (Job {job}); the synced volumes stay in namespace {namespace}"
    )]
    PgVersion {
        job: String,
        namespace: String,
        source: crate::pg::VersionError,
    },
    #[error("{}", self.render(&Kubectl::BARE))]
    Storage(#[from] crate::storage::StorageError),
    /// The namespace's `pod-security.kubernetes.io/enforce` level rejects the migration's pods.
    #[error("{}", self.render(&Kubectl::BARE))]
    PodSecurity {
        namespace: String,
        enforced: String,
        needed: &'static str,
        reasons: Vec<String>,
    },
    /// The user may not make some of the requests (writes, or reads it waits with) the
    /// migration makes.
    #[error("{}", self.render(&Kubectl::BARE))]
    AccessDenied {
        missing: Vec<crate::permission::Access>,
    },
    /// `uninstall` of a namespace that holds nothing with the tool's labels.
    #[error(
        "namespace {namespace} holds nothing kubectl-uyuni created (no object labelled {selector}): nothing to uninstall. Check the namespace (-n) and the context. Nothing was written",
        selector = crate::labels::MANAGED_SELECTOR
    )]
    NothingToUninstall { namespace: String },
    /// A planner asked to delete what only a purge deletes (a bug).
    #[error(transparent)]
    DataDeletionRefused(#[from] super::DataDeletionRefused),
}

impl PlanError {
    /// The message, with the `kubectl` commands it advises carrying the run's flags (`kubectl`).
    /// `Display` renders it without them.
    pub fn render(&self, kubectl: &Kubectl) -> String {
        let data = names::MIGRATION_DATA_SECRET;
        match self {
            PlanError::NoServer { namespace } => format!(
                "namespace {namespace} holds no server of kubectl-uyuni (no Deployment uyuni or db): install one with `{}` or migrate one with `{}`, or name the server's namespace with -n. Nothing was written",
                kubectl.uyuni(Some(namespace), "install FQDN"),
                kubectl.uyuni(Some(namespace), "migrate SOURCE_FQDN"),
            ),
            PlanError::MigrationPresent { namespace, found } => format!(
                "namespace {namespace} holds a migration ({found}): install refuses to write over it. Finish it with `{}`, or choose another namespace with -n. Nothing was written",
                kubectl.uyuni(Some(namespace), "migrate SOURCE_FQDN"),
            ),
            PlanError::NamespaceTerminating(ns) => format!(
                "namespace {ns} is being deleted: wait until it is gone (`{}`), then run again",
                kubectl.cmd(None, &format!("get namespace {ns}"))
            ),
            PlanError::NoExtractedData {
                job,
                namespace,
                detail,
                remedy,
            } => format!(
                "Job {job} succeeded but Secret {data} holds no data from it ({detail}); read `{}`, then {remedy}",
                kubectl.cmd(Some(namespace), &format!("logs job/{job}"))
            ),
            PlanError::ExtractedData {
                job,
                namespace,
                source,
            } => format!(
                "Job {job} wrote unusable data into Secret {data}: {}; read `{}`",
                source.render(Some(namespace), kubectl),
                kubectl.cmd(Some(namespace), &format!("logs job/{job}"))
            ),
            PlanError::UpgradeUnfinished { namespace, to } => format!(
                "an upgrade to {to} in namespace {namespace} has not finished (ConfigMap {}): run `{}` with the same image flags to finish it first. Nothing was written",
                names::UPGRADE_CONFIG_MAP,
                kubectl.uyuni(Some(namespace), "upgrade"),
            ),
            PlanError::ImageChangeOnRunningServer {
                namespace,
                running,
                changes,
                same,
            } => format!(
                "refused: this run would change the images of the server in namespace {namespace}, which runs on its data ({running}): {changes}. Changing them is an upgrade: a new image may need a PostgreSQL major upgrade of the data and updates the database schema at its start, with no way back from here. Run `{}` with the same image flags to do it: it inspects the images, keeps a copy of the database and can roll back. To go on with the images it runs, run `{same}` (without the image flags). Nothing was written",
                kubectl.uyuni(Some(namespace), "upgrade"),
            ),
            PlanError::CertManagerMissing => format!(
                "cert-manager is not installed in this cluster (its CRDs issuers.cert-manager.io and certificates.cert-manager.io are not served), and the migration reuses the source's CA through it. Install it first, for example `{}` (or with its Helm chart), wait until its pods are ready, then run again; or give third-party certificates with --ssl-server-cert, --ssl-server-key and --ssl-ca-root, which need no cert-manager. Nothing was written",
                kubectl.cmd(
                    None,
                    "apply -f https://github.com/cert-manager/cert-manager/releases/latest/download/cert-manager.yaml"
                )
            ),
            PlanError::PullSecretMissing { name, namespace } => format!(
                "Secret {name} (--image-pull-secret) was not found in namespace {namespace}: create it first, for example `{}` (create the namespace too if needed), or give --registry-user to let this tool write one",
                kubectl.cmd(
                    Some(namespace),
                    &format!("create secret generic {name} --type=kubernetes.io/dockerconfigjson --from-file=.dockerconfigjson=$HOME/.docker/config.json")
                )
            ),
            PlanError::Storage(e) => e.render(kubectl),
            PlanError::OtherSource {
                job,
                found,
                fqdn,
                namespace,
                same,
            } => format!(
                "the volumes in namespace {namespace} hold a copy of {found} (data-sync Job {job}, annotation {}), and this run names {fqdn}: refused, copying {fqdn} over it would mix two servers' data. Nothing was written. To go on with {found}: `{same}`. To migrate {fqdn} instead, use another namespace (-n), or remove the copy of {found} first (`{}`), then run again",
                labels::SOURCE_ANNOTATION,
                kubectl.cmd(
                    Some(namespace),
                    &format!(
                        "delete jobs,persistentvolumeclaims -l {}",
                        labels::MANAGED_SELECTOR
                    )
                ),
            ),
            PlanError::PodSecurity {
                namespace,
                enforced,
                needed,
                reasons,
            } => format!(
                "namespace {namespace} enforces PodSecurity level {enforced} (label {label}={enforced}), which would reject the pods this run starts: they need level {needed} ({}). Allow it with `{}`, then run again; or use another namespace with -n. Nothing was written",
                reasons.join("; "),
                kubectl.cmd(
                    None,
                    &format!(
                        "label namespace {namespace} {}={needed} --overwrite",
                        crate::pod_security::ENFORCE_LABEL
                    )
                ),
                label = crate::pod_security::ENFORCE_LABEL,
            ),
            PlanError::AccessDenied { missing } => format!(
                "you may not make every request this run makes; missing: {}. Ask a cluster administrator to grant them (a Role or ClusterRole bound to your user), then run again. Nothing was written",
                missing
                    .iter()
                    .map(|a| format!("{} (`{}`)", a.describe(), a.can_i(kubectl)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            // Their messages advise no kubectl command. (A variant whose `#[error]` calls
            // `render` must have its own arm above.)
            other => other.to_string(),
        }
    }
}

/// The names a third-party certificate lacks. `after`: what was written before the refusal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the certificate in {origin} names {carried}, not {missing}: {why}. Give a certificate whose subjectAltName lists {required}, then run again. {after}"
)]
pub struct CertificateNames {
    pub origin: String,
    pub carried: String,
    pub missing: String,
    pub why: String,
    pub required: String,
    pub after: String,
}
