//! `install`'s own inputs: the first administrator, the organisation, the e-mail addresses, the
//! SCC credentials, the database accounts and the subject of a generated CA. Validated here
//! once, against what the images accept: the server image's first-start setup
//! (`containers/server-image/root/docker-entrypoint-init.d/00-mgrSetup.sh`, uyuni-project/uyuni
//! @059a0c20) and the database image's (`containers/server-postgresql-image/root/
//! docker-entrypoint-initdb.d/zz-create-db.sh` and `zz-create-reportdb.sh` @25f9d889), and
//! mgradm's own checks (`mgradm/shared/utils/flags.go` `CheckParameters`, uyuni-tools
//! @b6ad4452), which it applied only to values typed at its prompt; here every value is
//! checked, whichever way it came.

use serde::Serialize;

use super::{ParamsError, ServerParams, ServerSpecArgs, is_fqdn};
use crate::secret::SecretString;
use crate::volumes;

/// `install` as the command line gave it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstallArgs {
    pub namespace_explicit: bool,
    pub kubectl: crate::kubectl::Kubectl,
    pub namespace: String,
    pub run_id: String,
    pub tool_version: String,
    pub spec: ServerSpecArgs,
    /// The name the server answers to.
    pub fqdn: String,
    // The inputs below are `None` when not given: an earlier run's recorded value applies
    // (`record`), else the default in [`defaults`].
    pub admin_login: Option<String>,
    /// From a file, the environment or a prompt; `None`: not given (a re-run finds it in its
    /// Secret).
    pub admin_password: Option<SecretString>,
    pub admin_first_name: Option<String>,
    pub admin_last_name: Option<String>,
    pub organization: Option<String>,
    pub email: Option<String>,
    /// `None`: `--email`.
    pub mail_from: Option<String>,
    pub timezone: Option<String>,
    pub debug_java: Option<bool>,
    pub scc_user: Option<String>,
    pub scc_password: Option<SecretString>,
    pub db_user: Option<String>,
    pub db_password: Option<SecretString>,
    pub db_admin_user: Option<String>,
    pub db_admin_password: Option<SecretString>,
    pub reportdb_user: Option<String>,
    pub reportdb_password: Option<SecretString>,
    /// Strong random passwords made by the caller (the core has no randomness): used for the
    /// database accounts whose password was not given, when their Secret does not exist yet.
    pub generated: GeneratedPasswords,
    pub ssl_subject: CaSubjectArgs,
    pub reuse_volumes: bool,
}

/// The caller's random values, one per database account.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct GeneratedPasswords {
    pub db: SecretString,
    pub db_admin: SecretString,
    pub report_db: SecretString,
}

/// The subject fields of a generated CA, as mgradm's `--ssl-*` flags give them
/// (`shared/ssl/flags.go`: defaults DE, Bayern, Nuernberg, SUSE, SUSE).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CaSubjectArgs {
    pub country: Option<String>,
    pub state: Option<String>,
    pub city: Option<String>,
    pub org: Option<String>,
    pub ou: Option<String>,
}

/// The defaults of install's inputs: mgradm install's (`mgradm/cmd/install/flags.go`,
/// `mgradm/shared/utils/cmd_utils.go`, `shared/ssl/flags.go`, uyuni-tools @b6ad4452), the time
/// zone the chart's (`timezone | default "Etc/UTC"`).
pub mod defaults {
    pub const ADMIN_LOGIN: &str = "admin";
    pub const ADMIN_FIRST_NAME: &str = "Administrator";
    pub const ADMIN_LAST_NAME: &str = "McAdmin";
    pub const ORGANIZATION: &str = "Organization";
    pub const EMAIL: &str = "admin@example.com";
    pub const TIMEZONE: &str = "Etc/UTC";
    pub const DB_USER: &str = "spacewalk";
    pub const DB_ADMIN_USER: &str = "postgres";
    pub const REPORTDB_USER: &str = "pythia_susemanager";
    pub const SSL_COUNTRY: &str = "DE";
    pub const SSL_STATE: &str = "Bayern";
    pub const SSL_CITY: &str = "Nuernberg";
    pub const SSL_ORG: &str = "SUSE";
    pub const SSL_OU: &str = "SUSE";
}

/// `value`, or `default` when not given.
fn or<'a>(value: &'a Option<String>, default: &'a str) -> &'a str {
    value.as_deref().unwrap_or(default)
}

/// A generated CA's subject, checked against X.509's bounds (RFC 5280 upper bounds, as
/// OpenSSL enforces them in `crypto/asn1/a_strnid.c`): cert-manager's webhook checks none of
/// them (`internal/apis/certmanager/validation/certificate.go` limits only the common name),
/// and Go's x509 would sign a certificate that OpenSSL-based clients then refuse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CaSubject {
    pub country: String,
    pub state: String,
    pub city: String,
    pub org: String,
    pub ou: String,
}

/// A database account: user and password.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Account {
    pub user: String,
    /// Given by the user; `None`: the generated one.
    pub password: Option<SecretString>,
    pub generated: SecretString,
}

impl Account {
    /// The password to write when the account's Secret does not exist yet.
    pub fn password(&self) -> &SecretString {
        self.password.as_ref().unwrap_or(&self.generated)
    }
}

/// Validated parameters of `install`: the server to deploy ([`ServerParams`], which it
/// dereferences to) and what only a fresh server needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InstallParams {
    #[serde(flatten)]
    pub server: ServerParams,
    pub fqdn: String,
    pub admin_login: String,
    pub admin_password: Option<SecretString>,
    pub admin_first_name: String,
    pub admin_last_name: String,
    pub organization: String,
    pub email: String,
    pub mail_from: String,
    pub timezone: String,
    pub debug_java: bool,
    /// SCC user and password.
    pub scc: Option<(String, SecretString)>,
    pub db: Account,
    pub db_admin: Account,
    pub report_db: Account,
    pub ca_subject: CaSubject,
    pub reuse_volumes: bool,
}

impl std::ops::Deref for InstallParams {
    type Target = ServerParams;
    fn deref(&self) -> &ServerParams {
        &self.server
    }
}

impl std::ops::DerefMut for InstallParams {
    fn deref_mut(&mut self) -> &mut ServerParams {
        &mut self.server
    }
}

/// An e-mail address as mgradm's `emailChecker` accepts it: a bare address (no display name,
/// no angle brackets), one `@`, a domain with a dot.
pub fn is_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && local.len() <= 64
        && s.len() <= 128
        && !domain.contains('@')
        && is_fqdn(domain)
        && local
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&*+-/=?^_`{|}~.".contains(c))
        && !local.starts_with('.')
        && !local.ends_with('.')
        && !local.contains("..")
}

/// A PostgreSQL role name the database image can use: its init scripts put it into SQL
/// unquoted (`CREATE ROLE $MANAGER_USER PASSWORD '…'`), so a plain lower-case identifier of at
/// most 63 bytes (NAMEDATALEN − 1).
fn is_role_name(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= 63
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// A password the images can take: the database image puts it into SQL between single quotes
/// without escaping them, and the server image writes it into `rhn.conf` line by line.
fn password_problem(p: &str) -> Option<&'static str> {
    if p.is_empty() {
        Some("it is empty")
    } else if p.contains('\'') {
        Some(
            "it contains a single quote ('), which the database image's setup puts into SQL unescaped",
        )
    } else if p.chars().any(|c| c.is_control()) {
        Some("it contains a control character (a newline?), which breaks rhn.conf")
    } else {
        None
    }
}

fn check_password(what: &'static str, p: &SecretString) -> Result<(), ParamsError> {
    match password_problem(p.expose()) {
        Some(problem) => Err(ParamsError::Password { what, problem }),
        None => Ok(()),
    }
}

fn bounded(
    flag: &'static str,
    value: &str,
    min: usize,
    max: usize,
    rule: &'static str,
    ok: impl Fn(&str) -> bool,
) -> Result<String, ParamsError> {
    let v = value.trim();
    let n = v.chars().count();
    if n < min || n > max || !ok(v) {
        return Err(ParamsError::InstallValue {
            flag,
            value: value.to_owned(),
            rule,
        });
    }
    Ok(v.to_owned())
}

fn printable(s: &str) -> bool {
    !s.chars().any(|c| c.is_control())
}

/// The first administrator's password: one the images take, of 5 to 48 characters (mgradm's
/// rule).
pub fn check_admin_password(p: &SecretString) -> Result<(), ParamsError> {
    check_password("the administrator's password", p)?;
    let n = p.expose().chars().count();
    if !(5..=48).contains(&n) {
        return Err(ParamsError::Password {
            what: "the administrator's password",
            problem: "it must have 5 to 48 characters (mgradm's rule)",
        });
    }
    Ok(())
}

impl CaSubject {
    fn from_args(args: &CaSubjectArgs) -> Result<Self, ParamsError> {
        Ok(CaSubject {
            country: bounded(
                "--ssl-country",
                or(&args.country, defaults::SSL_COUNTRY),
                2,
                2,
                "a two-letter country code (ISO 3166), for example DE",
                |v| v.chars().all(|c| c.is_ascii_uppercase()),
            )?,
            state: bounded(
                "--ssl-state",
                or(&args.state, defaults::SSL_STATE),
                1,
                128,
                "1 to 128 printable characters",
                printable,
            )?,
            city: bounded(
                "--ssl-city",
                or(&args.city, defaults::SSL_CITY),
                1,
                128,
                "1 to 128 printable characters",
                printable,
            )?,
            org: bounded(
                "--ssl-org",
                or(&args.org, defaults::SSL_ORG),
                1,
                64,
                "1 to 64 printable characters",
                printable,
            )?,
            ou: bounded(
                "--ssl-ou",
                or(&args.ou, defaults::SSL_OU),
                1,
                64,
                "1 to 64 printable characters",
                printable,
            )?,
        })
    }
}

impl InstallParams {
    /// Validates everything that can be validated without the cluster.
    pub fn from_args(args: &InstallArgs) -> Result<Self, ParamsError> {
        let mut server = ServerParams::from_args(
            &args.namespace,
            args.namespace_explicit,
            &args.kubectl,
            &args.run_id,
            &args.tool_version,
            &args.spec,
        )?;
        // A fresh server's database claim has the chart's name, `var-pgsql18`
        // (`containers/server-helm/templates/_helpers.tpl` `uyuni.pgPVCName`), with the size
        // and class given for `var-pgsql`; the migration's working volume is not needed.
        server
            .spec
            .volumes
            .retain(|v| v.role != volumes::VolumeRole::Migration);
        for v in &mut server.spec.volumes {
            if v.name == volumes::DATABASE_VOLUME {
                v.name = volumes::upgraded_database_volume();
            }
        }
        // The image's setup refuses an FQDN with upper case (`00-mgrSetup.sh`: "contains
        // uppercase letters", exit 4); DNS does not care, so it is lowered here.
        let fqdn = args.fqdn.trim().trim_end_matches('.').to_ascii_lowercase();
        if !is_fqdn(&fqdn) {
            return Err(ParamsError::ServerFqdn(args.fqdn.clone()));
        }
        let admin_login = bounded(
            "--admin-login",
            or(&args.admin_login, defaults::ADMIN_LOGIN),
            1,
            64,
            "1 to 64 letters, digits, '.', '_' or '-' (mgradm's rule)",
            |v| {
                v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            },
        )?;
        if let Some(p) = &args.admin_password {
            check_admin_password(p)?;
        }
        let name =
            |flag, v: &str| bounded(flag, v, 1, 64, "1 to 64 printable characters", printable);
        let admin_first_name = name(
            "--admin-first-name",
            or(&args.admin_first_name, defaults::ADMIN_FIRST_NAME),
        )?;
        let admin_last_name = name(
            "--admin-last-name",
            or(&args.admin_last_name, defaults::ADMIN_LAST_NAME),
        )?;
        let organization = bounded(
            "--organization",
            or(&args.organization, defaults::ORGANIZATION),
            3,
            128,
            "3 to 128 printable characters (mgradm's rule)",
            printable,
        )?;
        let email = bounded(
            "--email",
            or(&args.email, defaults::EMAIL),
            3,
            128,
            "a bare e-mail address such as admin@example.com",
            is_email,
        )?;
        let mail_from = if or(&args.mail_from, "").trim().is_empty() {
            email.clone()
        } else {
            bounded(
                "--emailfrom",
                or(&args.mail_from, ""),
                3,
                128,
                "a bare e-mail address such as notifications@example.com",
                is_email,
            )?
        };
        // The image refuses a zone without a file under /usr/share/zoneinfo at its start,
        // after every object was written (`crate::timezone`): checked here, before any write.
        let timezone = or(&args.timezone, defaults::TIMEZONE).trim().to_owned();
        if !crate::timezone::is_known(&timezone) {
            return Err(ParamsError::Timezone {
                suggestion: crate::timezone::suggestion(&timezone).map(str::to_owned),
                value: timezone,
            });
        }
        let scc = match (&args.scc_user, &args.scc_password) {
            (None, None) => None,
            (Some(user), Some(password)) => {
                let user = bounded(
                    "--scc-user",
                    user,
                    1,
                    128,
                    "an SCC organisation user name without spaces or quotes",
                    |v| {
                        v.chars()
                            .all(|c| c.is_ascii_graphic() && c != '\'' && c != '"')
                    },
                )?;
                check_password("the SCC password", password)?;
                Some((user, password.clone()))
            }
            (Some(_), None) => return Err(ParamsError::SccPasswordMissing),
            (None, Some(_)) => return Err(ParamsError::SccUserMissing),
        };
        let account = |flag: &'static str,
                       what: &'static str,
                       user: &str,
                       password: &Option<SecretString>,
                       generated: &SecretString|
         -> Result<Account, ParamsError> {
            let user = bounded(
                flag,
                user,
                1,
                63,
                "a PostgreSQL role name: lower-case letters, digits and '_', not starting with a digit",
                is_role_name,
            )?;
            if let Some(p) = password {
                check_password(what, p)?;
            }
            Ok(Account {
                user,
                password: password.clone(),
                generated: generated.clone(),
            })
        };
        let db = account(
            "--db-user",
            "the database password",
            or(&args.db_user, defaults::DB_USER),
            &args.db_password,
            &args.generated.db,
        )?;
        let db_admin = account(
            "--db-admin-user",
            "the database administrator's password",
            or(&args.db_admin_user, defaults::DB_ADMIN_USER),
            &args.db_admin_password,
            &args.generated.db_admin,
        )?;
        let report_db = account(
            "--reportdb-user",
            "the report database password",
            or(&args.reportdb_user, defaults::REPORTDB_USER),
            &args.reportdb_password,
            &args.generated.report_db,
        )?;
        Ok(InstallParams {
            server,
            fqdn,
            admin_login,
            admin_password: args.admin_password.clone(),
            admin_first_name,
            admin_last_name,
            organization,
            email,
            mail_from,
            timezone,
            debug_java: args.debug_java.unwrap_or(false),
            scc,
            db,
            db_admin,
            report_db,
            ca_subject: CaSubject::from_args(&args.ssl_subject)?,
            reuse_volumes: args.reuse_volumes,
        })
    }
}
