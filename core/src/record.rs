//! The server's specification as earlier runs chose it, recorded in ConfigMap
//! `uyuni-server-spec` so that "run it again" never reverts a choice: a run starts from the
//! record, and the flags it is given override it where given.
//!
//! The record holds the flags of the server's specification as the command line spelt them
//! (key: the long flag without its dashes), never a password, a key or a certificate: those
//! stay in their Secrets, and whether third-party certificates are in use is read from the
//! server's TLS Secret (`resolve::tls_mode`, `KeptFromEarlierRun`). Every value goes through
//! [`MigrateParams::from_args`] again on each run, so a record edited by hand is validated as
//! a flag would be.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::catalogue::names;
use crate::params::{MigrateArgs, MigrateParams, ParamsError, ServerSpecArgs};

/// How a remembered flag's value is spelt in the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Text,
    /// `true` or `false`.
    Bool,
    /// A decimal number.
    Number,
    /// A repeatable flag: the values joined with `,` (none of them may hold one: DNS names,
    /// `NAME=CLASS` and `NAME=SIZE` pairs). A flag given replaces the recorded list as a whole.
    List,
}

/// The remembered flags, in the order `--help` lists them. Not remembered: the source and the
/// SSH material (the run's, stored in their own objects), `--prepare`, `--compress`, `--yes`
/// (each run's own decision), passwords and certificate files (secrets).
pub const FLAGS: &[&str] = &[
    "image",
    "tag",
    "registry-host",
    "pull-policy",
    "registry-user",
    "image-pull-secret",
    "db-image",
    "pgsql-tag",
    "dbupgrade-image",
    "dbupgrade-tag",
    "hubxmlrpc-image",
    "hubxmlrpc-replicas",
    "coco-image",
    "coco-replicas",
    "tftp",
    "tftp-image",
    "tftp-tag",
    "tftp-host-network",
    "server-privileged",
    "server-super-privileged",
    "server-selinux-type",
    "server-apparmor-profile",
    "ingress",
    "ingress-class",
    "configure-ingress-controller",
    "network-policy",
    "ssl-cname",
    "volumes-class",
    "volume-class",
    "volumes-database-size",
    "volumes-packages-size",
    "volumes-www-size",
    "volumes-cache-size",
    "volume-size",
    "mirror-claim",
    "server-requests",
    "server-limits",
    "db-requests",
    "db-limits",
];

/// `install`'s own remembered flags: the first start's inputs, which a later run must not change
/// behind the server's back (its setup ran with them), and the database users, whose Secrets
/// are kept once written. Not remembered: the FQDN (the command's argument; a server that ran
/// refuses another), passwords (secrets).
pub const INSTALL_FLAGS: &[&str] = &[
    "admin-login",
    "admin-first-name",
    "admin-last-name",
    "organization",
    "email",
    "emailfrom",
    "tz",
    "debug-java",
    "scc-user",
    "db-user",
    "db-admin-user",
    "reportdb-user",
    "ssl-country",
    "ssl-state",
    "ssl-city",
    "ssl-org",
    "ssl-ou",
];

/// Flags that exclude each other: when the first is given (with a value that means it is in
/// use), a recorded second one is dropped instead of contradicting it, as the flag given is the
/// user's latest word. A contradiction within the record itself stays an error.
const EXCLUDES: &[(&str, &str)] = &[
    ("image-pull-secret", "registry-user"),
    ("registry-user", "image-pull-secret"),
    ("server-super-privileged", "server-selinux-type"),
    ("server-super-privileged", "server-apparmor-profile"),
    ("server-selinux-type", "server-super-privileged"),
    ("server-apparmor-profile", "server-super-privileged"),
    ("tftp", "tftp-host-network"),
    ("tftp-host-network", "tftp"),
];

/// Whether `value` of `key` is one that takes part in an exclusion: `--tftp=false` excludes the
/// host network, a switch only when on, any other flag whenever it is set.
fn in_use(key: &str, value: &str) -> bool {
    match key {
        "tftp" => value == "false",
        "server-super-privileged" | "tftp-host-network" => value == "true",
        _ => !value.is_empty(),
    }
}

fn shape(key: &str) -> Shape {
    match key {
        "debug-java"
        | "tftp"
        | "tftp-host-network"
        | "server-privileged"
        | "server-super-privileged"
        | "configure-ingress-controller"
        | "network-policy" => Shape::Bool,
        "hubxmlrpc-replicas" | "coco-replicas" => Shape::Number,
        "ssl-cname" | "volume-class" | "volume-size" => Shape::List,
        _ => Shape::Text,
    }
}

/// The value of a remembered flag in `args`, as the record spells it; `None` when not given.
fn get(args: &ServerSpecArgs, key: &str) -> Option<String> {
    let text = |v: &Option<String>| v.clone();
    let flag = |v: Option<bool>| v.map(|b| b.to_string());
    let list = |v: &[String]| (!v.is_empty()).then(|| v.join(","));
    match key {
        "image" => text(&args.image),
        "tag" => text(&args.tag),
        "registry-host" => text(&args.registry_host),
        "pull-policy" => text(&args.pull_policy),
        "registry-user" => text(&args.registry_user),
        "image-pull-secret" => text(&args.image_pull_secret),
        "db-image" => text(&args.db_image),
        "pgsql-tag" => text(&args.db_tag),
        "dbupgrade-image" => text(&args.dbupgrade_image),
        "dbupgrade-tag" => text(&args.dbupgrade_tag),
        "hubxmlrpc-image" => text(&args.hubxmlrpc_image),
        "hubxmlrpc-replicas" => args.hubxmlrpc_replicas.map(|n| n.to_string()),
        "coco-image" => text(&args.coco_image),
        "coco-replicas" => args.coco_replicas.map(|n| n.to_string()),
        "tftp" => flag(args.tftp),
        "tftp-image" => text(&args.tftp_image),
        "tftp-tag" => text(&args.tftp_tag),
        "tftp-host-network" => flag(args.tftp_host_network),
        "server-privileged" => flag(args.server_privileged),
        "server-super-privileged" => flag(args.server_super_privileged),
        "server-selinux-type" => text(&args.server_selinux_type),
        "server-apparmor-profile" => text(&args.server_apparmor_profile),
        "ingress" => text(&args.ingress),
        "ingress-class" => text(&args.ingress_class),
        "configure-ingress-controller" => flag(args.configure_ingress_controller),
        "network-policy" => flag(args.network_policy),
        "ssl-cname" => list(&args.ssl_cnames),
        "volumes-class" => text(&args.volumes_class),
        "volume-class" => list(&args.volume_classes),
        "volume-size" => list(&args.volume_sizes),
        "mirror-claim" => text(&args.mirror_claim),
        "server-requests" => text(&args.server_requests),
        "server-limits" => text(&args.server_limits),
        "db-requests" => text(&args.db_requests),
        "db-limits" => text(&args.db_limits),
        size => args
            .named_sizes
            .iter()
            .find(|(flag, _)| flag == size)
            .map(|(_, v)| v.clone()),
    }
    .filter(|v| !v.is_empty())
}

/// Sets a remembered flag in `args` from the record's spelling (checked by [`parse`]).
fn set(args: &mut ServerSpecArgs, key: &str, value: Parsed) {
    let (text, flag, number, list) = match value {
        Parsed::Text(t) => (Some(t), None, None, Vec::new()),
        Parsed::Bool(b) => (None, Some(b), None, Vec::new()),
        Parsed::Number(n) => (None, None, Some(n), Vec::new()),
        Parsed::List(l) => (None, None, None, l),
    };
    match key {
        "image" => args.image = text,
        "tag" => args.tag = text,
        "registry-host" => args.registry_host = text,
        "pull-policy" => args.pull_policy = text,
        "registry-user" => args.registry_user = text,
        "image-pull-secret" => args.image_pull_secret = text,
        "db-image" => args.db_image = text,
        "pgsql-tag" => args.db_tag = text,
        "dbupgrade-image" => args.dbupgrade_image = text,
        "dbupgrade-tag" => args.dbupgrade_tag = text,
        "hubxmlrpc-image" => args.hubxmlrpc_image = text,
        "hubxmlrpc-replicas" => args.hubxmlrpc_replicas = number,
        "coco-image" => args.coco_image = text,
        "coco-replicas" => args.coco_replicas = number,
        "tftp" => args.tftp = flag,
        "tftp-image" => args.tftp_image = text,
        "tftp-tag" => args.tftp_tag = text,
        "tftp-host-network" => args.tftp_host_network = flag,
        "server-privileged" => args.server_privileged = flag,
        "server-super-privileged" => args.server_super_privileged = flag,
        "server-selinux-type" => args.server_selinux_type = text,
        "server-apparmor-profile" => args.server_apparmor_profile = text,
        "ingress" => args.ingress = text,
        "ingress-class" => args.ingress_class = text,
        "configure-ingress-controller" => args.configure_ingress_controller = flag,
        "network-policy" => args.network_policy = flag,
        "ssl-cname" => args.ssl_cnames = list,
        "volumes-class" => args.volumes_class = text,
        "volume-class" => args.volume_classes = list,
        "volume-size" => args.volume_sizes = list,
        "mirror-claim" => args.mirror_claim = text,
        "server-requests" => args.server_requests = text,
        "server-limits" => args.server_limits = text,
        "db-requests" => args.db_requests = text,
        "db-limits" => args.db_limits = text,
        size => {
            args.named_sizes.retain(|(flag, _)| flag != size);
            if let Some(v) = text {
                args.named_sizes.push((size.to_owned(), v));
            }
        }
    }
}

enum Parsed {
    Text(String),
    Bool(bool),
    Number(u32),
    List(Vec<String>),
}

/// A recorded value in its flag's shape; `Err`: what it should be.
fn parse(key: &str, value: &str) -> Result<Parsed, &'static str> {
    match shape(key) {
        Shape::Text => Ok(Parsed::Text(value.to_owned())),
        Shape::Bool => match value {
            "true" => Ok(Parsed::Bool(true)),
            "false" => Ok(Parsed::Bool(false)),
            _ => Err("is not true or false"),
        },
        Shape::Number => value
            .parse()
            .map(Parsed::Number)
            .map_err(|_| "is not a whole number"),
        Shape::List => Ok(Parsed::List(
            value
                .split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
                .collect(),
        )),
    }
}

/// Where a remembered flag's value in effect comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(tag = "origin", rename_all = "kebab-case")]
pub enum Origin {
    /// From the record; the flag was not given.
    Remembered,
    /// Given, with the value the record holds.
    Repeated,
    /// Given, and the record held none.
    New,
    /// Given with another value than the record's, or dropped because a flag given excludes
    /// it (`by` names that flag).
    Changed { from: String, by: String },
}

/// A remembered flag in effect for this run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Setting {
    /// The long flag without its dashes: the record's key.
    pub flag: &'static str,
    /// `None`: unset (the default), after a flag given dropped the recorded value.
    pub value: Option<String>,
    #[serde(flatten)]
    pub origin: Origin,
}

impl Setting {
    /// One line of the dry run: `tag: 2025.10 (remembered)`, `pull-policy: Always →
    /// IfNotPresent (--pull-policy)`.
    pub fn text(&self) -> String {
        let value = self.value.as_deref().unwrap_or("unset");
        match &self.origin {
            Origin::Remembered => format!("{}: {value} (remembered)", self.flag),
            Origin::Repeated => format!("{}: {value} (--{}, as remembered)", self.flag, self.flag),
            Origin::New => format!("{}: {value} (--{})", self.flag, self.flag),
            Origin::Changed { from, by } => format!("{}: {from} → {value} ({by})", self.flag),
        }
    }
}

/// The arguments of a run with the record applied, what each remembered flag's value comes
/// from, and the record the run writes.
#[derive(Debug, Clone, PartialEq)]
pub struct Merged<A> {
    pub args: A,
    /// Every remembered flag with a value, or whose recorded value a flag changed.
    pub settings: Vec<Setting>,
    /// What ConfigMap `uyuni-server-spec` is to hold: every flag with a value, and an empty
    /// value for one recorded before and unset now (written as empty rather than left out, so
    /// that the write replaces it whoever wrote it last: server-side apply removes a key only
    /// from the fields its own manager owns, and a `kubectl edit` owns what it changed).
    pub record: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error(
        "ConfigMap {config_map} in namespace {namespace} (the server's specification that earlier runs recorded) holds key {key:?}, which is not a flag this version remembers: remove the key with `{edit}`. Nothing was written",
        config_map = names::SERVER_SPEC_CONFIG_MAP
    )]
    UnknownKey {
        namespace: String,
        key: String,
        edit: String,
    },
    #[error(
        "ConfigMap {config_map} in namespace {namespace} (the server's specification that earlier runs recorded) holds {key}: {value:?}, which {problem}: correct or empty the value with `{edit}`, or give --{key} to replace it. Nothing was written",
        config_map = names::SERVER_SPEC_CONFIG_MAP
    )]
    Invalid {
        namespace: String,
        key: String,
        value: String,
        problem: String,
        edit: String,
    },
    #[error(transparent)]
    Params(#[from] ParamsError),
}

/// The arguments of a command that deploys a server, into which the record is merged.
pub trait WithSpec: Clone {
    type Params;
    fn namespace(&self) -> &str;
    fn kubectl(&self) -> &crate::kubectl::Kubectl;
    fn spec(&self) -> &ServerSpecArgs;
    fn spec_mut(&mut self) -> &mut ServerSpecArgs;
    fn validate(&self) -> Result<Self::Params, ParamsError>;
    /// Sets the record the run writes on its parameters.
    fn set_record(params: &mut Self::Params, record: BTreeMap<String, String>);
    /// The command's own remembered flags, beyond the specification's.
    fn own_flags() -> &'static [&'static str] {
        &[]
    }
    /// The value of one of [`WithSpec::own_flags`] as given; `None` when not given.
    fn own_get(&self, _key: &str) -> Option<String> {
        None
    }
    /// Sets one of [`WithSpec::own_flags`] from the record (checked by its shape).
    fn own_set(&mut self, _key: &str, _value: String) {}
}

impl WithSpec for MigrateArgs {
    type Params = MigrateParams;
    fn namespace(&self) -> &str {
        &self.namespace
    }
    fn kubectl(&self) -> &crate::kubectl::Kubectl {
        &self.kubectl
    }
    fn spec(&self) -> &ServerSpecArgs {
        &self.spec
    }
    fn spec_mut(&mut self) -> &mut ServerSpecArgs {
        &mut self.spec
    }
    fn validate(&self) -> Result<MigrateParams, ParamsError> {
        MigrateParams::from_args(self)
    }
    fn set_record(params: &mut MigrateParams, record: BTreeMap<String, String>) {
        params.spec_record = record;
    }
}

impl WithSpec for crate::params::InstallArgs {
    type Params = crate::params::InstallParams;
    fn namespace(&self) -> &str {
        &self.namespace
    }
    fn kubectl(&self) -> &crate::kubectl::Kubectl {
        &self.kubectl
    }
    fn spec(&self) -> &ServerSpecArgs {
        &self.spec
    }
    fn spec_mut(&mut self) -> &mut ServerSpecArgs {
        &mut self.spec
    }
    fn validate(&self) -> Result<crate::params::InstallParams, ParamsError> {
        crate::params::InstallParams::from_args(self)
    }
    fn set_record(params: &mut crate::params::InstallParams, record: BTreeMap<String, String>) {
        params.spec_record = record;
    }
    fn own_flags() -> &'static [&'static str] {
        INSTALL_FLAGS
    }
    fn own_get(&self, key: &str) -> Option<String> {
        let s = &self.ssl_subject;
        match key {
            "admin-login" => self.admin_login.clone(),
            "admin-first-name" => self.admin_first_name.clone(),
            "admin-last-name" => self.admin_last_name.clone(),
            "organization" => self.organization.clone(),
            "email" => self.email.clone(),
            "emailfrom" => self.mail_from.clone(),
            "tz" => self.timezone.clone(),
            "debug-java" => self.debug_java.map(|b| b.to_string()),
            "scc-user" => self.scc_user.clone(),
            "db-user" => self.db_user.clone(),
            "db-admin-user" => self.db_admin_user.clone(),
            "reportdb-user" => self.reportdb_user.clone(),
            "ssl-country" => s.country.clone(),
            "ssl-state" => s.state.clone(),
            "ssl-city" => s.city.clone(),
            "ssl-org" => s.org.clone(),
            "ssl-ou" => s.ou.clone(),
            _ => None,
        }
        .filter(|v| !v.is_empty())
    }
    fn own_set(&mut self, key: &str, value: String) {
        let v = Some(value);
        let s = &mut self.ssl_subject;
        match key {
            "admin-login" => self.admin_login = v,
            "admin-first-name" => self.admin_first_name = v,
            "admin-last-name" => self.admin_last_name = v,
            "organization" => self.organization = v,
            "email" => self.email = v,
            "emailfrom" => self.mail_from = v,
            "tz" => self.timezone = v,
            "debug-java" => self.debug_java = v.map(|b| b == "true"),
            "db-user" => self.db_user = v,
            "db-admin-user" => self.db_admin_user = v,
            "reportdb-user" => self.reportdb_user = v,
            "ssl-country" => s.country = v,
            "ssl-state" => s.state = v,
            "ssl-city" => s.city = v,
            "ssl-org" => s.org = v,
            "ssl-ou" => s.ou = v,
            // The SCC user comes with its password, which is not remembered: a remembered
            // user alone is recorded, not applied (its Secret is kept once written).
            _ => {}
        }
    }
}

fn edit_command<A: WithSpec>(args: &A) -> String {
    args.kubectl().cmd(
        Some(args.namespace()),
        &format!("edit configmap {}", names::SERVER_SPEC_CONFIG_MAP),
    )
}

fn invalid<A: WithSpec>(args: &A, key: &str, value: &str, problem: String) -> RecordError {
    RecordError::Invalid {
        namespace: args.namespace().to_owned(),
        key: key.to_owned(),
        value: value.to_owned(),
        problem,
        edit: edit_command(args),
    }
}

/// Applies the record to the arguments given: a flag given wins, a flag not given takes the
/// recorded value. The registry user stays out of the arguments when only remembered: its
/// password is not, and the Secret `registry-credentials` the earlier run wrote stays in use
/// (`resolve::in_effect`).
pub fn merge<A: WithSpec>(
    given: A,
    recorded: &BTreeMap<String, String>,
) -> Result<Merged<A>, RecordError> {
    let recorded: BTreeMap<&str, &str> = recorded
        .iter()
        .map(|(k, v)| (k.as_str(), v.trim()))
        .collect();
    let known = |k: &str| FLAGS.contains(&k) || INSTALL_FLAGS.contains(&k);
    if let Some(key) = recorded.keys().find(|k| !known(k)) {
        return Err(RecordError::UnknownKey {
            namespace: given.namespace().to_owned(),
            key: (*key).to_owned(),
            edit: edit_command(&given),
        });
    }
    let own = A::own_flags();
    let given_values: BTreeMap<&str, String> = FLAGS
        .iter()
        .filter_map(|k| Some((*k, get(given.spec(), k)?)))
        .chain(own.iter().filter_map(|k| Some((*k, given.own_get(k)?))))
        .collect();
    let mut args = given.clone();
    let mut settings = Vec::new();
    let mut record = BTreeMap::new();
    // Another command's keys (install's, read by a migration): kept as they are.
    for (key, value) in &recorded {
        if !FLAGS.contains(key) && !own.contains(key) {
            record.insert((*key).to_owned(), (*value).to_owned());
        }
    }
    for &key in FLAGS.iter().chain(own) {
        let old = recorded.get(key).copied().filter(|v| !v.is_empty());
        let (value, origin) = match (given_values.get(key), old) {
            (Some(new), None) => (Some(new.clone()), Some(Origin::New)),
            (Some(new), Some(old)) if new == old => (Some(new.clone()), Some(Origin::Repeated)),
            (Some(new), Some(old)) => (
                Some(new.clone()),
                Some(Origin::Changed {
                    from: old.to_owned(),
                    by: format!("--{key}"),
                }),
            ),
            (None, Some(old)) => {
                let excluded_by = EXCLUDES.iter().find_map(|(by, excluded)| {
                    (*excluded == key
                        && in_use(key, old)
                        && given_values.get(by).is_some_and(|v| in_use(by, v)))
                    .then_some(*by)
                });
                match excluded_by {
                    Some(by) => (
                        None,
                        Some(Origin::Changed {
                            from: old.to_owned(),
                            by: format!("--{by}"),
                        }),
                    ),
                    None => {
                        let parsed =
                            parse(key, old).map_err(|p| invalid(&given, key, old, p.to_owned()))?;
                        if own.contains(&key) {
                            if key != "scc-user" {
                                args.own_set(key, old.to_owned());
                            }
                        } else if key != "registry-user" {
                            set(args.spec_mut(), key, parsed);
                        }
                        (Some(old.to_owned()), Some(Origin::Remembered))
                    }
                }
            }
            (None, None) => (None, None),
        };
        match &value {
            Some(v) => {
                record.insert(key.to_owned(), v.clone());
            }
            None if recorded.contains_key(key) => {
                record.insert(key.to_owned(), String::new());
            }
            None => {}
        }
        if let Some(origin) = origin {
            settings.push(Setting {
                flag: key,
                value,
                origin,
            });
        }
    }
    Ok(Merged {
        args,
        settings,
        record,
    })
}

/// The parameters of a run from the arguments given and the record read from the cluster
/// (empty when there is none), with the record the run writes; and what each remembered value
/// comes from, for the dry run.
///
/// A recorded value that no longer validates is reported as the record's, with the key to fix:
/// when the merged arguments fail and the arguments given alone do not fail the same way, each
/// remembered value is left out in turn until the one to blame is found.
pub fn params<A: WithSpec>(
    given: A,
    recorded: &BTreeMap<String, String>,
) -> Result<(A::Params, Vec<Setting>), RecordError> {
    let merged = merge(given.clone(), recorded)?;
    match merged.args.validate() {
        Ok(mut params) => {
            A::set_record(&mut params, merged.record);
            Ok((params, merged.settings))
        }
        Err(error) => {
            if given.validate().err().as_ref() == Some(&error) {
                return Err(error.into());
            }
            for setting in merged
                .settings
                .iter()
                .filter(|s| s.origin == Origin::Remembered)
            {
                let mut without = recorded.clone();
                without.remove(setting.flag);
                let fixed = merge(given.clone(), &without)
                    .ok()
                    .is_some_and(|m| m.args.validate().is_ok());
                if fixed {
                    return Err(invalid(
                        &given,
                        setting.flag,
                        setting.value.as_deref().unwrap_or_default(),
                        format!("no longer validates ({error})"),
                    ));
                }
            }
            Err(error.into())
        }
    }
}

/// The dry run's lines on the remembered flags.
pub fn render(settings: &[Setting]) -> String {
    let mut out = format!(
        "Remembered flags (ConfigMap {}; a flag given replaces its value):\n",
        names::SERVER_SPEC_CONFIG_MAP
    );
    if settings.is_empty() {
        out.push_str("    none: every value is the default\n");
    }
    for setting in settings {
        out.push_str(&format!("    {}\n", setting.text()));
    }
    out
}
