//! The server's settings that its objects are built from and that do not care where they came
//! from: a migration reads them from the data its sync extracted from the source
//! ([`ServerSettings::migrated`]), an install takes them from its flags
//! ([`ServerSettings::installed`]). The end state's builders (`db`, the server, the attestation)
//! take these, never a command's own inputs.

use crate::observed::ExtractedData;

/// Where the server's data comes from: what ties its Deployments to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The data this data-sync Job copied (`None`: placeholders of a dry run before it).
    DataSync(String),
    /// A fresh database the image sets up at its first start.
    Install,
}

/// What the server image's first-start setup needs beyond the credential Secrets
/// (`containers/server-image/root/docker-entrypoint-init.d/00-mgrSetup.sh`, uyuni-project/uyuni
/// @059a0c20: `ORG_NAME`, `ADMIN_FIRST_NAME`, `ADMIN_LAST_NAME`, `MANAGER_ADMIN_EMAIL`,
/// `MANAGER_MAIL_FROM`; the admin's login and password and the SCC credentials come from
/// Secrets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstStart {
    pub organization: String,
    pub admin_first_name: String,
    pub admin_last_name: String,
    pub email: String,
    pub mail_from: String,
    /// Whether Secret `scc-credentials` is given to the setup.
    pub scc: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    pub origin: Origin,
    /// The server's and the database's time zone (`TZ`).
    pub timezone: String,
    /// The main database's name.
    pub db_name: String,
    /// Java debugging ports and `DEBUG_JAVA`.
    pub debug: bool,
    /// The first-start setup's inputs; `None` when the data is set up already (a migration),
    /// and the image skips its setup.
    pub first_start: Option<FirstStart>,
}

/// The database name today's images create (`zz-create-db.sh`: `MANAGER_DB_NAME=susemanager`).
pub const DB_NAME: &str = "susemanager";
/// The chart's default time zone (`server.yaml`: `.Values.timezone | default "Etc/UTC"`).
pub const DEFAULT_TIMEZONE: &str = "Etc/UTC";

impl ServerSettings {
    /// The settings of a migrated server: the source's.
    pub fn migrated(data: &ExtractedData) -> Self {
        ServerSettings {
            origin: Origin::DataSync(data.job.clone()),
            timezone: data.timezone.clone(),
            db_name: data.db_name.clone(),
            debug: data.debug,
            first_start: None,
        }
    }

    /// The settings of a fresh server.
    pub fn installed(timezone: &str, debug: bool, first_start: FirstStart) -> Self {
        ServerSettings {
            origin: Origin::Install,
            timezone: timezone.to_owned(),
            db_name: DB_NAME.to_owned(),
            debug,
            first_start: Some(first_start),
        }
    }

    /// The settings of a fresh server, from `install`'s parameters.
    pub fn for_install(params: &crate::params::InstallParams) -> Self {
        Self::installed(
            &params.timezone,
            params.debug_java,
            FirstStart {
                organization: params.organization.clone(),
                admin_first_name: params.admin_first_name.clone(),
                admin_last_name: params.admin_last_name.clone(),
                email: params.email.clone(),
                mail_from: params.mail_from.clone(),
                scc: params.scc.is_some(),
            },
        )
    }

    /// The data-sync Job the server's data comes from, if it was migrated.
    pub fn sync_job(&self) -> Option<&str> {
        match &self.origin {
            Origin::DataSync(job) => Some(job),
            Origin::Install => None,
        }
    }
}
