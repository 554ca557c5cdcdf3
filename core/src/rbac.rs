//! What `kubectl uyuni rbac --for COMMAND` prints: the least-privilege Role (and a Role in a
//! fixed namespace, a ClusterRole for the cluster-scoped rules) a command needs, made from the
//! same table the preflight's `SelfSubjectAccessReview`s ask ([`crate::access`]).
//!
//! A run's preflight lists what its plan needs from the state it starts in; this cannot: it
//! has no cluster and no parameters (a migration's plan needs its SSH material). So each
//! command is described by what its planner can do, by kind of action — which kinds it
//! applies, whether it runs Jobs, scales, waits, deletes — and each row goes through the same
//! functions that turn a planned step into permissions. `core/tests/rbac.rs` checks that the
//! rules cover every permission the preflight asks for the fixtures' runs of each command, so
//! the two cannot drift apart.
//!
//! Beyond the preflight's list, the rules let a run do what it does but can do without
//! (`effects` reads a refusal there as "none" and goes on): watch each kind it reads (the loop
//! falls back to a read per turn without), list StorageClasses and IngressClasses (the claims'
//! check and the ingress controller's choice), discover the custom resources' API groups, and
//! ask the preflight's reviews themselves.
//!
//! A migration writes Roles and RoleBindings for its own Jobs; the API server lets a user write
//! those only when the user holds every right they grant, or `bind`/`escalate` (kubernetes
//! `pkg/registry/rbac/rolebinding/policybased/storage.go` @008b3652, `ConfirmNoEscalation`;
//! the same for Roles). The rules hold those rights through the writes themselves (`patch` on
//! Secrets), never `bind` or `escalate`, which would let a user grant anything. Discovery and
//! the self reviews are granted to every authenticated user by a default cluster's
//! `system:discovery` and `system:basic-user` bindings (`plugin/pkg/auth/authorizer/rbac/
//! bootstrappolicy/policy.go` @0016f7f2, `ClusterRoleBindings`); they are in the ClusterRole for
//! clusters that removed those.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use crate::access::{self, Access};
use crate::object::{CustomKind, Kind};

/// The commands `rbac --for` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Command {
    Install,
    Migrate,
    Upgrade,
    Uninstall,
    Status,
    Stop,
    Start,
    Restart,
    Logs,
    Report,
}

impl Command {
    pub const ALL: [Command; 10] = [
        Command::Install,
        Command::Migrate,
        Command::Upgrade,
        Command::Uninstall,
        Command::Status,
        Command::Stop,
        Command::Start,
        Command::Restart,
        Command::Logs,
        Command::Report,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Command::Install => "install",
            Command::Migrate => "migrate",
            Command::Upgrade => "upgrade",
            Command::Uninstall => "uninstall",
            Command::Status => "status",
            Command::Stop => "stop",
            Command::Start => "start",
            Command::Restart => "restart",
            Command::Logs => "logs",
            Command::Report => "report",
        }
    }

    /// The table of what its planner can do.
    fn table(self) -> Table {
        match self {
            // The server's objects, its credentials and its CA; its Jobs are run, not applied,
            // and it writes no ServiceAccount, Role or RoleBinding of its own (a migration's
            // Jobs have them).
            Command::Install => Table {
                applies: written_but(&[
                    Kind::Job,
                    Kind::ServiceAccount,
                    Kind::Role,
                    Kind::RoleBinding,
                ]),
                // `--network-policy=false` deletes the tool's NetworkPolicy.
                deletes: vec![Kind::NetworkPolicy],
                ..Table::WRITER
            },
            // Besides, the data-sync and CA key Jobs' ServiceAccount, Roles and RoleBindings.
            Command::Migrate => Table {
                applies: written_but(&[Kind::Job]),
                // A finished migration deletes Secrets uyuni-migration-key and
                // uyuni-ca-password (`plan::migration_secret_deletion`);
                // `--network-policy=false` deletes the tool's NetworkPolicy.
                deletes: vec![Kind::Secret, Kind::NetworkPolicy],
                ..Table::WRITER
            },
            // An upgrade of a migrated server applies migrate's end state.
            Command::Upgrade => Table {
                applies: written_but(&[Kind::Job]),
                deletes: vec![Kind::NetworkPolicy],
                reports: true,
                ..Table::WRITER
            },
            // Everything of ours but the namespace (`--delete-namespace` needs `delete` on
            // namespaces, which a Role cannot grant and the rules leave out); the claims and
            // credential Secrets only with `--purge-volumes`.
            Command::Uninstall => Table {
                deletes: written_but(&[]),
                ..Table::READER
            }
            .writer(),
            Command::Stop | Command::Start | Command::Restart => Table {
                applies: vec![Kind::ConfigMap],
                scales: true,
                ..Table::READER
            }
            .writer(),
            Command::Status => Table::READER,
            // The operation records (ConfigMaps) and Secrets are among every command's reads;
            // a report also lists the namespace's events (`effects::report`).
            Command::Logs | Command::Report => Table {
                logs: true,
                ..Table::READER
            },
        }
    }
}

/// What a command's planner can do, by kind of action.
#[derive(Debug, Clone)]
struct Table {
    /// Kinds it applies (created when absent, patched else).
    applies: Vec<Kind>,
    /// It runs Jobs and waits on them.
    runs_jobs: bool,
    /// It copies an inspection Job's report onto the Job.
    reports: bool,
    /// It scales Deployments (and waits for them).
    scales: bool,
    /// It waits until Deployments are available.
    waits_deployments: bool,
    /// Kinds it waits until ready.
    waits_ready: &'static [Kind],
    /// Kinds it deletes (and watches until gone).
    deletes: Vec<Kind>,
    /// It writes, so it takes the namespace's Lease and asks the preflight's reviews first.
    writes: bool,
    /// It reads pods' logs.
    logs: bool,
}

impl Table {
    const READER: Table = Table {
        applies: Vec::new(),
        runs_jobs: false,
        reports: false,
        scales: false,
        waits_deployments: false,
        waits_ready: &[],
        deletes: Vec::new(),
        writes: false,
        logs: false,
    };

    /// Install, migrate and upgrade: the server's end state, its Jobs and waits.
    const WRITER: Table = Table {
        applies: Vec::new(),
        runs_jobs: true,
        reports: false,
        scales: true,
        waits_deployments: true,
        waits_ready: &[
            Kind::Custom(CustomKind::Issuer),
            Kind::Custom(CustomKind::Certificate),
        ],
        deletes: Vec::new(),
        writes: true,
        logs: true,
    };

    fn writer(self) -> Table {
        Table {
            writes: true,
            // A failed wait reports the failing container's log.
            logs: true,
            waits_deployments: true,
            ..self
        }
    }
}

/// The kinds no command writes: the namespace (created before the rules apply: a Role cannot
/// grant it), and the quota and limits the claims' and pods' checks only read.
const READ_ONLY: [Kind; 3] = [Kind::Namespace, Kind::ResourceQuota, Kind::LimitRange];

/// Every kind the tool knows ([`Kind::ALL`]) but [`READ_ONLY`] and `left_out`.
fn written_but(left_out: &[Kind]) -> Vec<Kind> {
    Kind::ALL
        .into_iter()
        .filter(|k| !READ_ONLY.contains(k) && !left_out.contains(k))
        .collect()
}

/// Every permission `command` needs in `namespace`, from its table: sorted, no duplicates.
/// The namespace itself must exist (a Role lives in it): creating it is not among them.
pub fn needs(command: Command, namespace: &str) -> Vec<Access> {
    let table = command.table();
    let mut out = reads(namespace);
    if matches!(command, Command::Status | Command::Logs) {
        // Their observations name no Secret (`status::observation`, `status::jobs_observation`
        // plus a Deployment): neither reads one, so neither gets a right on Secrets, which the
        // shared reads would grant as a LIST of every Secret of the namespace.
        out.retain(|a| a.resource != "secrets");
    }
    if command == Command::Status {
        // Whether a record's run that has not ended still runs: it holds the Lease.
        out.push(Access::new(
            "get",
            "coordination.k8s.io",
            "leases",
            Some(namespace),
        ));
    }
    for &kind in &table.applies {
        let ns = scope(kind, namespace);
        out.extend(access::apply_needs(kind, ns.as_deref(), true));
        // Watched as the loop watches what it writes.
        let (group, resource) = access::group_resource(kind);
        for verb in ["list", "watch"] {
            out.push(Access::new(verb, group, resource, ns.as_deref()));
        }
    }
    if table.runs_jobs {
        out.extend(access::run_job_needs(namespace));
    }
    out.extend(access::await_job_needs(namespace, table.reports));
    if table.scales {
        out.extend(access::scale_needs(namespace));
    }
    if table.waits_deployments {
        out.extend(access::wait_deployment_needs(namespace));
    }
    for &kind in table.waits_ready {
        out.extend(access::wait_ready_needs(kind, namespace));
    }
    for &kind in &table.deletes {
        out.extend(access::delete_needs(kind, namespace));
        // Found before it is deleted: the NetworkPolicy is read only by the commands that
        // may delete it, not by every reader (`observed::server_observation`).
        let (group, resource) = access::group_resource(kind);
        for verb in ["get", "list", "watch"] {
            out.push(Access::new(verb, group, resource, Some(namespace)));
        }
    }
    if table.writes {
        out.extend(crate::lock::needs(namespace));
        // The record of each operation, the oldest pruned (`operation`).
        out.extend(crate::operation::needs(namespace));
        // The preflight's own reviews (`effects::access`); `system:basic-user` grants them in
        // a default cluster, but not every cluster keeps it.
        for resource in ["selfsubjectaccessreviews", "selfsubjectrulesreviews"] {
            out.push(Access::new(
                "create",
                "authorization.k8s.io",
                resource,
                None,
            ));
        }
    }
    if !table.logs {
        out.retain(|a| a.subresource.is_none());
    }
    if command == Command::Report {
        out.push(Access::new("list", "", "events", Some(namespace)));
    }
    out.sort();
    out.dedup();
    out
}

/// The namespace an object of `kind` lives in (`None`: cluster-scoped).
fn scope(kind: Kind, namespace: &str) -> Option<String> {
    match kind {
        Kind::Custom(c) => Some(c.fixed_namespace().unwrap_or(namespace).to_owned()),
        k if k.namespaced() => Some(namespace.to_owned()),
        _ => None,
    }
}

/// What every command reads: each object any command's observation names (the preflight's
/// reads, every custom kind taken as served), read, listed and watched; the Jobs and pods of
/// the namespace; the cluster's StorageClasses and IngressClasses.
fn reads(namespace: &str) -> Vec<Access> {
    let mut observation = crate::observed::every_object(namespace);
    observation.named.extend(crate::observed::upgrade_objects());
    observation.every.extend(crate::observed::UPGRADE_EVERY);
    let mut out = access::observation_reads(&observation, |_| true);
    let read: BTreeSet<(String, String, Option<String>)> = out
        .iter()
        .map(|a| (a.group.clone(), a.resource.clone(), a.namespace.clone()))
        .collect();
    for (group, resource, ns) in read {
        for verb in ["get", "list", "watch"] {
            out.push(Access::new(verb, &group, &resource, ns.as_deref()));
        }
    }
    out.extend(access::await_job_needs(namespace, false));
    out.push(Access::new(
        "list",
        "storage.k8s.io",
        "storageclasses",
        None,
    ));
    out.push(Access::new(
        "list",
        "networking.k8s.io",
        "ingressclasses",
        None,
    ));
    out
}

/// The discovery documents of the custom resources' API groups, which the observation reads
/// to learn which the cluster serves (`system:discovery` grants them in a default cluster).
pub fn discovery_paths(namespace: &str) -> Vec<String> {
    crate::observed::every_object(namespace)
        .api_groups
        .iter()
        .map(|gv| format!("/apis/{gv}"))
        .collect()
}

/// Whom the rules are bound to, as `kubectl create rolebinding` names them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum BindTo {
    ServiceAccount { namespace: String, name: String },
    User(String),
    Group(String),
}

impl BindTo {
    fn subject(&self) -> Subject {
        match self {
            BindTo::ServiceAccount { namespace, name } => Subject {
                kind: "ServiceAccount".to_owned(),
                name: name.clone(),
                namespace: Some(namespace.clone()),
                ..Subject::default()
            },
            BindTo::User(name) => Subject {
                kind: "User".to_owned(),
                name: name.clone(),
                api_group: Some(RBAC_GROUP.to_owned()),
                ..Subject::default()
            },
            BindTo::Group(name) => Subject {
                kind: "Group".to_owned(),
                name: name.clone(),
                api_group: Some(RBAC_GROUP.to_owned()),
                ..Subject::default()
            },
        }
    }
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// The objects `rbac` prints, in the order to apply them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rules {
    /// One Role per namespace its rules name, the installation's first.
    pub roles: Vec<Role>,
    /// The cluster-scoped rules, when there are any.
    pub cluster_role: Option<ClusterRole>,
    /// With subjects: a RoleBinding per Role, a ClusterRoleBinding for the ClusterRole.
    pub role_bindings: Vec<RoleBinding>,
    pub cluster_role_binding: Option<ClusterRoleBinding>,
}

/// The name of `command`'s Roles and ClusterRole.
pub fn role_name(command: Command) -> String {
    format!("kubectl-uyuni-{}", command.name())
}

/// Not `managed-by` kubectl-uyuni: the administrator applies them, and `uninstall` (which
/// deletes what carries that label) must not delete the rights it runs with.
fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            crate::labels::PART_OF.to_owned(),
            crate::labels::PART_OF_VALUE.to_owned(),
        ),
        (crate::labels::COMPONENT.to_owned(), "rbac".to_owned()),
    ])
}

fn meta(name: String, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: namespace.map(str::to_owned),
        labels: Some(labels()),
        ..ObjectMeta::default()
    }
}

/// The rules of `command` in `namespace`, bound to `subjects` when any are given.
pub fn rules(command: Command, namespace: &str, subjects: &[BindTo]) -> Rules {
    let needs = needs(command, namespace);
    let mut by_namespace: BTreeMap<Option<String>, Vec<&Access>> = BTreeMap::new();
    for a in &needs {
        by_namespace.entry(a.namespace.clone()).or_default().push(a);
    }
    let name = role_name(command);
    let mut roles = Vec::new();
    // The installation's namespace first, then any fixed one (kube-system).
    let mut namespaces: Vec<&String> = by_namespace.keys().flatten().collect();
    namespaces.sort_by_key(|ns| (ns.as_str() != namespace, ns.as_str()));
    for ns in namespaces {
        roles.push(Role {
            metadata: meta(name.clone(), Some(ns)),
            rules: Some(policy_rules(&by_namespace[&Some(ns.clone())])),
        });
    }
    let cluster_role = by_namespace.get(&None).map(|cluster| {
        let mut rules = policy_rules(cluster);
        let paths = discovery_paths(namespace);
        if !paths.is_empty() {
            rules.push(PolicyRule {
                non_resource_urls: Some(paths),
                verbs: vec!["get".to_owned()],
                ..PolicyRule::default()
            });
        }
        ClusterRole {
            metadata: meta(name.clone(), None),
            rules: Some(rules),
            ..ClusterRole::default()
        }
    });
    let subjects: Vec<Subject> = subjects.iter().map(BindTo::subject).collect();
    let (role_bindings, cluster_role_binding) = if subjects.is_empty() {
        (Vec::new(), None)
    } else {
        // Named for the installation too: a RoleBinding in kube-system or the
        // ClusterRoleBinding serves one installation's subjects.
        let binding = format!("{name}-{namespace}");
        let role_bindings = roles
            .iter()
            .map(|role| {
                let ns = role.metadata.namespace.as_deref();
                RoleBinding {
                    metadata: meta(
                        if ns == Some(namespace) {
                            name.clone()
                        } else {
                            binding.clone()
                        },
                        ns,
                    ),
                    role_ref: RoleRef {
                        api_group: RBAC_GROUP.to_owned(),
                        kind: "Role".to_owned(),
                        name: name.clone(),
                    },
                    subjects: Some(subjects.clone()),
                }
            })
            .collect();
        let cluster_role_binding = cluster_role.as_ref().map(|_| ClusterRoleBinding {
            metadata: meta(binding.clone(), None),
            role_ref: RoleRef {
                api_group: RBAC_GROUP.to_owned(),
                kind: "ClusterRole".to_owned(),
                name: name.clone(),
            },
            subjects: Some(subjects.clone()),
        });
        (role_bindings, cluster_role_binding)
    };
    Rules {
        roles,
        cluster_role,
        role_bindings,
        cluster_role_binding,
    }
}

/// RBAC rules granting exactly `needs` (one namespace's): per API group, the resources that
/// need the same verbs in one rule, as `kubectl create role` writes them.
fn policy_rules(needs: &[&Access]) -> Vec<PolicyRule> {
    let mut verbs: BTreeMap<(String, String), BTreeSet<String>> = BTreeMap::new();
    for a in needs {
        let resource = match &a.subresource {
            Some(sub) => format!("{}/{sub}", a.resource),
            None => a.resource.clone(),
        };
        verbs
            .entry((a.group.clone(), resource))
            .or_default()
            .insert(a.verb.clone());
    }
    let mut rules: BTreeMap<(String, Vec<String>), Vec<String>> = BTreeMap::new();
    for ((group, resource), verbs) in verbs {
        rules
            .entry((group, ordered_verbs(&verbs)))
            .or_default()
            .push(resource);
    }
    rules
        .into_iter()
        .map(|((group, verbs), resources)| PolicyRule {
            api_groups: Some(vec![group]),
            resources: Some(resources),
            verbs,
            ..PolicyRule::default()
        })
        .collect()
}

/// Verbs in kubectl's order: reads, then writes.
fn ordered_verbs(verbs: &BTreeSet<String>) -> Vec<String> {
    const ORDER: [&str; 8] = [
        "get",
        "list",
        "watch",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ];
    let mut out: Vec<String> = ORDER
        .iter()
        .filter(|v| verbs.contains(**v))
        .map(|v| (*v).to_owned())
        .collect();
    out.extend(
        verbs
            .iter()
            .filter(|v| !ORDER.contains(&v.as_str()))
            .cloned(),
    );
    out
}

/// Whether `rule` grants `access` (RBAC's matching, `k8s.io/kubernetes`
/// `pkg/apis/rbac/v1/evaluation_helpers.go`: `VerbMatches`, `APIGroupMatches`,
/// `ResourceMatches`): `*` matches every verb, group and resource; `*/sub` every resource's
/// subresource `sub`. A rule naming objects (`resourceNames`) covers no request for a kind as a
/// whole, which is what the preflight asks.
pub fn grants(
    verbs: &[String],
    api_groups: Option<&[String]>,
    resources: Option<&[String]>,
    resource_names: Option<&[String]>,
    access: &Access,
) -> bool {
    let verb = verbs.iter().any(|v| v == "*" || *v == access.verb);
    let group = api_groups.is_some_and(|g| g.iter().any(|g| g == "*" || *g == access.group));
    let wanted = match &access.subresource {
        Some(sub) => format!("{}/{sub}", access.resource),
        None => access.resource.clone(),
    };
    let resource = resources.is_some_and(|r| {
        r.iter().any(|r| {
            r == "*"
                || *r == wanted
                || access
                    .subresource
                    .as_ref()
                    .is_some_and(|sub| *r == format!("*/{sub}"))
        })
    });
    let unnamed = resource_names.is_none_or(<[String]>::is_empty);
    verb && group && resource && unnamed
}

impl Rules {
    /// Whether these rules grant `access`: a Role's in its own namespace, the ClusterRole's
    /// for a cluster-scoped request (only cluster-scoped rules are put there).
    pub fn grant(&self, access: &Access) -> bool {
        let by = |rules: &Option<Vec<PolicyRule>>| {
            rules.iter().flatten().any(|r| {
                grants(
                    &r.verbs,
                    r.api_groups.as_deref(),
                    r.resources.as_deref(),
                    r.resource_names.as_deref(),
                    access,
                )
            })
        };
        match &access.namespace {
            Some(ns) => self
                .roles
                .iter()
                .any(|r| r.metadata.namespace.as_deref() == Some(ns) && by(&r.rules)),
            None => self.cluster_role.as_ref().is_some_and(|c| by(&c.rules)),
        }
    }

    /// The objects as JSON values, in the order to apply them.
    pub fn objects(&self) -> Vec<serde_json::Value> {
        fn typed(kind: &str, object: &impl Serialize) -> serde_json::Value {
            let mut out =
                serde_json::json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind});
            if let (Some(out), Ok(serde_json::Value::Object(fields))) =
                (out.as_object_mut(), serde_json::to_value(object))
            {
                out.extend(fields);
            }
            out
        }
        let mut out: Vec<serde_json::Value> = self.roles.iter().map(|r| typed("Role", r)).collect();
        out.extend(self.cluster_role.iter().map(|c| typed("ClusterRole", c)));
        out.extend(self.role_bindings.iter().map(|b| typed("RoleBinding", b)));
        out.extend(
            self.cluster_role_binding
                .iter()
                .map(|b| typed("ClusterRoleBinding", b)),
        );
        out
    }
}

/// The YAML stream `kubectl apply -f -` takes, after a comment saying what it is for.
pub fn render(command: Command, namespace: &str, rules: &Rules) -> String {
    let mut out = format!(
        "# The least privilege `kubectl uyuni {cmd}` needs in namespace {namespace}: what its\n\
         # preflight checks before any write, by what the command can do. As a cluster\n\
         # administrator, pipe it to `kubectl apply -f -`; the namespace must exist first\n\
         # (kubectl create namespace {namespace}).\n",
        cmd = command.name()
    );
    if rules.role_bindings.is_empty() {
        out.push_str(
            "# Bound to nobody yet: add --serviceaccount NAMESPACE:NAME, --bind-user NAME or --group NAME.\n",
        );
    }
    for object in rules.objects() {
        out.push_str("---\n");
        out.push_str(&crate::render::to_yaml(&object));
    }
    out
}
