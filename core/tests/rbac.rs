//! `rbac --for COMMAND`'s rules against the preflight: every permission the preflight asks for
//! the fixtures' runs of a command (`access::needed` over the whole run from where it starts,
//! or `needed_by` over the steps a simulated run carried out) is granted by the rules printed
//! for that command. So the table `rbac` is made from cannot fall behind a planner that starts
//! writing a new kind, running a Job or deleting where it did not.
//!
//! Left out on purpose, as `rbac` says: creating the namespace (a Role lives in an existing
//! one) and `uninstall --delete-namespace` (deleting a namespace is a cluster-wide right).

use uyuni_core::access::{self, Access};
use uyuni_core::object::{CustomKind, Kind};
use uyuni_core::params::{MigrateParams, Origin, UpgradeParams};
use uyuni_core::plan::lifecycle::Lifecycle;
use uyuni_core::rbac::{self, BindTo, Command};
use uyuni_core::{Observed, preview};

use crate::common;

/// `observed` with the namespace present, as it must be for a Role to live in it.
fn with_namespace(mut observed: Observed) -> Observed {
    observed.insert(common::namespace());
    observed
}

/// Every cluster's custom kinds served: the HelmChartConfig, Traefik routes and cert-manager
/// objects are then planned and read.
fn everything_served(observed: Observed) -> Observed {
    let mut observed = with_namespace(observed);
    for kind in [
        CustomKind::Issuer,
        CustomKind::Certificate,
        CustomKind::Middleware,
        CustomKind::IngressRouteTcp,
        CustomKind::IngressRouteUdp,
        CustomKind::HelmChartConfig,
    ] {
        observed.serve(kind);
    }
    observed
}

/// The permissions of `needed` that `command`'s rules do not grant.
fn not_granted(command: Command, needed: &[Access]) -> Vec<String> {
    let rules = rbac::rules(command, common::NAMESPACE, &[]);
    needed
        .iter()
        .filter(|a| !rules.grant(a))
        .map(Access::describe)
        .collect()
}

fn assert_covers(command: Command, case: &str, needed: &[Access]) {
    assert!(
        needed.iter().any(Access::is_write)
            || matches!(command, Command::Status | Command::Logs | Command::Report),
        "{case}: the fixture's run writes nothing, so it proves nothing"
    );
    let missing = not_granted(command, needed);
    assert!(
        missing.is_empty(),
        "rbac --for {} does not grant what the preflight asks for {case}: {missing:#?}",
        command.name()
    );
}

fn migrate_with(edit: impl FnOnce(&mut uyuni_core::params::MigrateArgs)) -> MigrateParams {
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    edit(&mut args);
    MigrateParams::from_args(&args).expect("valid")
}

#[test]
fn rbac_covers_every_permission_a_migration_asks() {
    let params = common::params();
    let cases = [
        (
            "a migration from an empty namespace",
            with_namespace(common::empty_cluster()),
        ),
        (
            "a migration after its data sync",
            with_namespace(common::after_sync(&params)),
        ),
    ];
    for (case, start) in cases {
        assert_covers(Command::Migrate, case, &access::needed(&params, &start));
    }
    // Every optional object: the Hub API, the attestation, TFTP, the k3s ingress controller's
    // config.
    let all = migrate_with(|a| {
        a.spec.hubxmlrpc_replicas = Some(1);
        a.spec.coco_replicas = Some(1);
        a.spec.tftp = Some(true);
        a.spec.ingress = Some("traefik".to_owned());
        a.spec.configure_ingress_controller = Some(true);
        a.spec.network_policy = Some(true);
    });
    let start = everything_served(common::empty_cluster());
    let needed = access::needed(&all, &start);
    assert!(
        needed
            .iter()
            .any(|a| a.resource == "helmchartconfigs" && a.is_write()),
        "the fixture writes the HelmChartConfig: {needed:#?}"
    );
    assert_covers(Command::Migrate, "a migration with every option", &needed);
    assert!(
        needed
            .iter()
            .any(|a| a.resource == "networkpolicies" && a.is_write()),
        "the fixture writes the NetworkPolicy: {needed:#?}"
    );
}

#[test]
fn rbac_covers_every_permission_an_install_asks() {
    let params = crate::install::install_params();
    for (case, start) in [
        (
            "an install into an empty namespace",
            with_namespace(common::empty_cluster()),
        ),
        (
            "an install with every custom kind served",
            everything_served(common::empty_cluster()),
        ),
    ] {
        assert_covers(Command::Install, case, &access::needed(&params, &start));
    }
    // `--network-policy`, then `--network-policy=false`, which deletes it.
    let with = crate::network_policy::install(Some(true));
    let end = preview(&with, &with_namespace(common::empty_cluster()))
        .expect("plans")
        .end;
    let without = crate::network_policy::install(Some(false));
    let needed = access::needed(&without, &end);
    assert!(
        needed
            .iter()
            .any(|a| a.resource == "networkpolicies" && a.verb == "delete"),
        "turning the NetworkPolicy off deletes it: {needed:#?}"
    );
    assert_covers(
        Command::Install,
        "an install turning --network-policy off",
        &needed,
    );
}

#[test]
fn rbac_covers_every_permission_an_upgrade_asks() {
    let start = crate::upgrade::installed();
    let params = crate::upgrade::upgrade_to(crate::upgrade::TO);
    assert_covers(
        Command::Upgrade,
        "an upgrade's preview",
        &access::needed(&params, &start),
    );
    // The steps a run carries out once the inspections reported: the backup, or the
    // PostgreSQL major upgrade into a new volume.
    let same = crate::upgrade::same_major;
    let major = |image: &str| {
        if image.ends_with(crate::upgrade::TO) {
            19
        } else {
            18
        }
    };
    for (case, pg) in [
        ("an upgrade with a backup", &same as &dyn Fn(&str) -> u32),
        ("an upgrade to a new PostgreSQL major", &major),
    ] {
        let (steps, end) = crate::upgrade::run(&params, &start, pg).expect("upgrades");
        assert_covers(
            Command::Upgrade,
            case,
            &access::needed_by(&params, &start, &steps),
        );
        let back = UpgradeParams {
            rollback: true,
            ..params.clone()
        };
        let (steps, _) = crate::upgrade::run(&back, &end, pg).expect("rolls back");
        assert_covers(
            Command::Upgrade,
            "a rollback",
            &access::needed_by(&back, &end, &steps),
        );
    }
    // A migrated server: migrate's end state on the new images.
    let migrated = crate::upgrade::migrated_with_tag(Some(crate::upgrade::FROM));
    let start = common::after_migration(&migrated);
    let mut target = crate::upgrade::migrated_with_tag(Some(crate::upgrade::TO));
    target.ssh_key = None;
    target.ssh_config = None;
    let params = UpgradeParams {
        origin: Origin::Migrated(Box::new(target)),
        backup: true,
        rollback: false,
    };
    let (steps, _) = crate::upgrade::run(&params, &start, &same).expect("upgrades");
    assert_covers(
        Command::Upgrade,
        "an upgrade of a migrated server",
        &access::needed_by(&params, &start, &steps),
    );
}

#[test]
fn rbac_covers_every_permission_an_uninstall_asks_but_deleting_the_namespace() {
    let start = crate::uninstall::installed();
    for purge in [false, true] {
        let params = crate::uninstall::uninstall_params(purge, false);
        assert_covers(
            Command::Uninstall,
            &format!("an uninstall (purge {purge})"),
            &access::needed(&params, &start),
        );
    }
    let params = crate::uninstall::uninstall_params(true, true);
    let missing = not_granted(Command::Uninstall, &access::needed(&params, &start));
    assert_eq!(
        missing,
        ["delete namespaces (cluster-wide)"],
        "--delete-namespace is the one right left out"
    );
}

#[test]
fn rbac_covers_every_permission_stop_start_and_restart_ask() {
    let installed = crate::lifecycle::installed();
    let stopped = preview(&crate::lifecycle::params(Lifecycle::Stop), &installed)
        .expect("stops")
        .end;
    for (command, action, start) in [
        (Command::Stop, Lifecycle::Stop, &installed),
        (Command::Start, Lifecycle::Start, &stopped),
        (Command::Restart, Lifecycle::Restart, &installed),
    ] {
        let params = crate::lifecycle::params(action);
        assert_covers(command, command.name(), &access::needed(&params, start));
    }
}

/// status and logs have no preflight: what they read is the observation of every object
/// (`status::observation`), the Jobs and pods, and for logs the pods' logs.
#[test]
fn rbac_covers_what_status_and_logs_read() {
    let ns = common::NAMESPACE;
    let observation = uyuni_core::status::observation(ns);
    let mut reads: Vec<Access> = observation
        .named
        .iter()
        .map(|t| {
            let (group, resource) = access::group_resource(t.kind);
            let scope = match t.kind {
                Kind::Namespace => None,
                Kind::Custom(c) => Some(c.fixed_namespace().unwrap_or(ns)),
                _ => Some(ns),
            };
            Access::new("get", group, resource, scope)
        })
        .collect();
    for verb in ["list", "watch"] {
        reads.push(Access::new(verb, "", "pods", Some(ns)));
        reads.push(Access::new(verb, "batch", "jobs", Some(ns)));
    }
    let missing = not_granted(Command::Status, &reads);
    assert!(missing.is_empty(), "{missing:#?}");
    let log = rbac::needs(Command::Logs, ns);
    assert!(log.iter().any(|a| a.subresource.as_deref() == Some("log")));
    assert!(
        !rbac::needs(Command::Status, ns)
            .iter()
            .any(|a| a.is_write() || a.subresource.is_some()),
        "status only reads, and no log"
    );
    // Neither reads a Secret, so neither may list them (a LIST returns every Secret's data).
    for command in [Command::Status, Command::Logs] {
        let secrets: Vec<Access> = rbac::needs(command, ns)
            .into_iter()
            .filter(|a| a.resource == "secrets")
            .collect();
        assert!(secrets.is_empty(), "{command:?}: {secrets:#?}");
    }
    assert!(
        !uyuni_core::status::observation(ns)
            .named
            .iter()
            .chain(&uyuni_core::status::jobs_observation(ns).named)
            .any(|t| t.kind == Kind::Secret)
    );
}

/// The readers write nothing; only uninstall deletes, migrate its two Secrets and every writer
/// the oldest operation records (ConfigMaps) and its Lease; none gets a
/// right on namespaces beyond reading them, nor anything named `*`.
#[test]
fn rbac_grants_no_more_than_each_command_does() {
    for command in Command::ALL {
        let needs = rbac::needs(command, common::NAMESPACE);
        let writes: Vec<&Access> = needs.iter().filter(|a| a.is_write()).collect();
        match command {
            Command::Status | Command::Logs | Command::Report => {
                assert!(writes.is_empty(), "{writes:?}")
            }
            Command::Uninstall => {}
            _ => assert!(
                !writes.iter().any(|a| a.verb == "delete"
                    && a.resource != "leases"
                    // The oldest operation records (`operation::KEEP`).
                    && a.resource != "configmaps"
                    && !(command == Command::Migrate && a.resource == "secrets")
                    // `--network-policy=false` removes the tool's NetworkPolicy.
                    && !(matches!(
                        command,
                        Command::Install | Command::Migrate | Command::Upgrade
                    ) && a.resource == "networkpolicies")),
                "{} deletes: {writes:?}",
                command.name()
            ),
        }
        for a in &needs {
            assert!(
                a.resource != "namespaces"
                    || a.verb == "get"
                    || a.verb == "list"
                    || a.verb == "watch",
                "{}: {a:?}",
                command.name()
            );
            assert!(!a.resource.contains('*') && a.verb != "*", "{a:?}");
            // Every namespaced right is in the installation's namespace, or kube-system for
            // the k3s/RKE2 ingress controller's HelmChartConfig only.
            if let Some(ns) = &a.namespace
                && ns != common::NAMESPACE
            {
                assert_eq!(
                    (ns.as_str(), a.resource.as_str()),
                    ("kube-system", "helmchartconfigs")
                );
            }
        }
    }
    // Nothing of the tool's own rights is needed to read the cluster's Secrets elsewhere.
    let rules = rbac::rules(Command::Migrate, common::NAMESPACE, &[]);
    assert!(!rules.grant(&Access::new("get", "", "secrets", Some("kube-system"))));
    assert!(!rules.grant(&Access::new("get", "", "secrets", None)));
}

#[test]
fn rbac_binds_each_role_to_the_subjects_given() {
    let subjects = [
        BindTo::ServiceAccount {
            namespace: "ops".to_owned(),
            name: "deployer".to_owned(),
        },
        BindTo::User("alice".to_owned()),
    ];
    let rules = rbac::rules(Command::Install, common::NAMESPACE, &subjects);
    assert_eq!(rules.role_bindings.len(), rules.roles.len());
    for (role, binding) in rules.roles.iter().zip(&rules.role_bindings) {
        assert_eq!(role.metadata.namespace, binding.metadata.namespace);
        assert_eq!(Some(&binding.role_ref.name), role.metadata.name.as_ref());
        let subjects = binding.subjects.as_deref().unwrap_or_default();
        assert_eq!(subjects.len(), 2);
        assert_eq!(subjects[0].kind, "ServiceAccount");
        assert_eq!(subjects[0].namespace.as_deref(), Some("ops"));
        assert_eq!(subjects[1].kind, "User");
    }
    let cluster = rules
        .cluster_role_binding
        .as_ref()
        .expect("a ClusterRoleBinding");
    assert_eq!(cluster.role_ref.kind, "ClusterRole");
    assert!(
        rbac::rules(Command::Install, common::NAMESPACE, &[])
            .role_bindings
            .is_empty()
    );
}

/// The secret-name variables of a Job's containers, as its script reads them (`DATA_SECRET` in
/// data-sync.sh, `SECRET` in ca-key.sh): the Secrets `patch_secret` may be called on.
fn patched_secrets(job: &k8s_openapi::api::batch::v1::Job) -> Vec<String> {
    let pod = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("a pod spec");
    pod.containers
        .iter()
        .chain(pod.init_containers.iter().flatten())
        .flat_map(|c| c.env.iter().flatten())
        .filter(|e| e.name == "DATA_SECRET" || e.name == "SECRET")
        .filter_map(|e| e.value.clone())
        .collect()
}

/// Each Job that runs with a ServiceAccount (data-sync, ca-key) may do only what its script
/// does: the scripts' one API request is `lib.sh`'s `patch_secret`, a PATCH of the Secret its
/// environment names, so every Role bound to the Job's account grants `patch`, on `secrets`,
/// on those names only. data-sync and ca-key each have an account of their own, so neither
/// may patch the other's Secret (docs/rbac.md).
#[test]
fn rbac_jobs_service_accounts_may_only_patch_the_secrets_their_scripts_report_in() {
    let scripts = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
    let mut requests = Vec::new();
    for entry in std::fs::read_dir(&scripts).expect("core/scripts") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).expect("a script");
        for (n, line) in text.lines().enumerate() {
            // A command at the start of a line, of a pipe or of a substitution (the words in
            // messages are advice to the user, not requests).
            let code = line.split('#').next().unwrap_or_default().trim_start();
            let runs = |tool: &str| {
                code.starts_with(&format!("{tool} "))
                    || code.contains(&format!("| {tool} "))
                    || code.contains(&format!("$({tool} "))
            };
            if runs("curl") || runs("kubectl") || runs("wget") {
                requests.push(format!("{}:{}: {line}", path.display(), n + 1));
            }
        }
    }
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let lib = std::fs::read_to_string(scripts.join("lib.sh")).expect("lib.sh");
    let patch = &lib[lib.find("patch_secret() {").expect("patch_secret")..];
    let patch = &patch[..patch.find("\n}").expect("its end")];
    assert!(
        patch.contains("curl ") && patch.contains("-X PATCH") && patch.contains("/secrets/$secret"),
        "{patch}"
    );

    let params = common::params();
    let run = preview(&params, &with_namespace(common::empty_cluster())).expect("plans");
    let jobs: Vec<&k8s_openapi::api::batch::v1::Job> = run
        .executed
        .iter()
        .filter_map(|s| match &s.action {
            uyuni_core::Action::RunJob { job, .. } => Some(job.as_ref()),
            _ => None,
        })
        .collect();
    let account_of = |job: &k8s_openapi::api::batch::v1::Job| {
        job.spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.service_account_name.clone())
    };
    let with_account: Vec<_> = jobs.iter().filter(|j| account_of(j).is_some()).collect();
    assert!(
        with_account.len() >= 2,
        "data-sync and ca-key run with an account"
    );
    for job in &with_account {
        let account = account_of(job).expect("an account");
        // Every Job of the account: the Secrets any of them reports in.
        let allowed: Vec<String> = jobs
            .iter()
            .filter(|j| account_of(j).as_deref() == Some(account.as_str()))
            .flat_map(|j| patched_secrets(j))
            .collect();
        assert!(!allowed.is_empty(), "{:?}", job.metadata.name);
        let mut distinct = allowed.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 1, "{account} patches {distinct:?}");
        let mut roles = 0;
        for object in run.end.objects.values() {
            let uyuni_core::Object::RoleBinding(binding) = object else {
                continue;
            };
            let bound = binding.subjects.iter().flatten().any(|s| {
                s.kind == "ServiceAccount"
                    && s.name == account
                    && s.namespace.as_deref() == Some(common::NAMESPACE)
            });
            if !bound {
                continue;
            }
            let role = run
                .end
                .objects
                .get(&uyuni_core::object::ObjectRef::new(
                    Kind::Role,
                    binding.role_ref.name.clone(),
                ))
                .expect("the bound Role exists");
            let uyuni_core::Object::Role(role) = role else {
                panic!("not a Role")
            };
            roles += 1;
            for rule in role.rules.iter().flatten() {
                assert_eq!(rule.verbs, ["patch"], "{rule:?}");
                assert_eq!(rule.resources.as_deref(), Some(&["secrets".to_owned()][..]));
                let names = rule.resource_names.as_deref().unwrap_or_default();
                assert!(!names.is_empty(), "a rule for every Secret: {rule:?}");
                for name in names {
                    assert!(
                        allowed.contains(name),
                        "{name} is not what {account}'s Jobs patch"
                    );
                }
            }
        }
        assert!(roles > 0, "no Role bound to {account}");
    }
}

/// `report` reads what `logs` reads, the operation records and the Secrets (kept as keys only)
/// among them, and the namespace's events; it writes nothing.
#[test]
fn rbac_for_report_reads_the_records_secrets_and_events() {
    let ns = common::NAMESPACE;
    let needs = rbac::needs(Command::Report, ns);
    for (verb, resource) in [
        ("list", "configmaps"),
        ("list", "secrets"),
        ("list", "events"),
        ("list", "pods"),
    ] {
        assert!(
            needs.iter().any(|a| a.verb == verb
                && a.resource == resource
                && a.namespace.as_deref() == Some(ns)),
            "{verb} {resource}: {needs:#?}"
        );
    }
    assert!(
        needs
            .iter()
            .any(|a| a.subresource.as_deref() == Some("log"))
    );
    assert!(!needs.iter().any(Access::is_write), "{needs:#?}");
}

/// Every kind the support bundle lists whole (`observed::report_observation`) is one that
/// `rbac --for report` lets it list: a least-privilege user gets the whole bundle.
#[test]
fn rbac_for_report_lists_every_kind_the_bundle_lists() {
    let ns = common::NAMESPACE;
    let needs = rbac::needs(Command::Report, ns);
    let observation = uyuni_core::observed::report_observation(ns, true);
    assert!(!observation.every.is_empty());
    for kind in &observation.every {
        let (group, resource) = uyuni_core::access::group_resource(*kind);
        assert!(
            needs.iter().any(|a| a.verb == "list"
                && a.group == group
                && a.resource == resource
                && a.namespace.as_deref() == Some(ns)),
            "list {resource}: {needs:#?}"
        );
    }
}
