//! `install`'s plan: from an empty cluster to a running server, on the same end state as
//! `migrate`; what it refuses before any write; that a finished install plans nothing again;
//! that no secret reaches printable output.

use uyuni_core::catalogue::names;
use uyuni_core::object::{Kind, ObjectRef};
use uyuni_core::params::{CaSubjectArgs, GeneratedPasswords, InstallArgs, InstallParams};
use uyuni_core::plan::{PlanError, Planner, install};
use uyuni_core::secret::SecretString;
use uyuni_core::{Action, Object, Observed, preview};

use crate::common;

pub const FQDN: &str = "server.example.com";
pub const ADMIN_PASSWORD: &str = "Adm1n-pass-word";
pub const GENERATED: [&str; 3] = [
    "gen-db-0123456789",
    "gen-dba-0123456789",
    "gen-rep-0123456789",
];

pub fn install_args() -> InstallArgs {
    InstallArgs {
        namespace: common::NAMESPACE.into(),
        run_id: common::RUN_ID.into(),
        tool_version: "0.1.0".into(),
        fqdn: FQDN.into(),
        admin_login: None,
        admin_password: Some(SecretString::new(ADMIN_PASSWORD)),
        admin_first_name: None,
        admin_last_name: None,
        organization: Some("Example Org".into()),
        email: None,
        mail_from: None,
        timezone: None,
        generated: GeneratedPasswords {
            db: SecretString::new(GENERATED[0]),
            db_admin: SecretString::new(GENERATED[1]),
            report_db: SecretString::new(GENERATED[2]),
        },
        ssl_subject: CaSubjectArgs::default(),
        ..InstallArgs::default()
    }
}

pub fn install_params() -> InstallParams {
    InstallParams::from_args(&install_args()).expect("valid install arguments")
}

fn ids(steps: &[uyuni_core::Step]) -> Vec<&str> {
    steps.iter().map(|s| s.id.as_str()).collect()
}

#[test]
fn install_from_an_empty_cluster_converges_and_replans_nothing() {
    let params = install_params();
    let preview = preview(&params, &common::empty_cluster()).expect("plans");
    let executed = ids(&preview.executed);
    for id in [
        "namespace",
        "image-check-server",
        "image-check-db",
        "server-spec",
        "pvc-var-pgsql18",
        "db-admin-credentials",
        "db-credentials",
        "reportdb-credentials",
        "admin-credentials",
        "uyuni-config",
        "self-signed-issuer",
        "ca-certificate",
        "ca-certificate-ready",
        "ca-issuer",
        "server-certificate",
        "db-certificate",
        "ca-config-map",
        "db-deployment",
        "db-ready",
        "server-deployment",
        "server-ready",
    ] {
        assert!(executed.contains(&id), "{id} missing from {executed:?}");
    }
    // What only a migration does.
    for id in [
        "image-check-db-upgrade",
        "data-sync",
        "pvc-var-pgsql",
        "db-fixup",
    ] {
        assert!(!executed.contains(&id), "{id} in an install: {executed:?}");
    }
    let position = |id: &str| executed.iter().position(|s| *s == id).expect("present");
    assert!(position("ca-certificate-ready") < position("ca-config-map"));
    assert!(position("db-certificate-ready") < position("db-deployment"));
    assert!(position("admin-credentials") < position("server-deployment"));
    assert!(preview.final_plan.is_done());
    let again = params.plan(&preview.end).expect("plans again");
    assert!(again.is_done(), "{:?}", again.next_step());
}

fn end_state() -> Observed {
    preview(&install_params(), &common::empty_cluster())
        .expect("plans")
        .end
}

#[test]
fn install_sets_the_images_first_start_variables_from_secrets() {
    let end = end_state();
    let Some(Object::Deployment(server)) = end.get(Kind::Deployment, names::SERVER_DEPLOYMENT)
    else {
        panic!("no server Deployment");
    };
    let container = &server
        .spec
        .as_ref()
        .expect("present")
        .template
        .spec
        .as_ref()
        .expect("present")
        .containers[0];
    let env = container.env.as_ref().expect("present");
    let var = |name: &str| env.iter().find(|e| e.name == name);
    for (name, secret) in [
        ("ADMIN_USER", names::ADMIN_SECRET),
        ("ADMIN_PASS", names::ADMIN_SECRET),
        ("MANAGER_PASS", names::DB_SECRET),
        ("REPORT_DB_PASS", names::REPORTDB_SECRET),
    ] {
        let e = var(name).unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(e.value, None, "{name} is a literal");
        let r = e
            .value_from
            .as_ref()
            .expect("present")
            .secret_key_ref
            .as_ref()
            .expect("present");
        assert_eq!(r.name, secret);
    }
    for (name, value) in [
        ("UYUNI_HOSTNAME", FQDN),
        ("ORG_NAME", "Example Org"),
        ("ADMIN_FIRST_NAME", "Administrator"),
        ("ADMIN_LAST_NAME", "McAdmin"),
        ("MANAGER_ADMIN_EMAIL", "admin@example.com"),
        ("MANAGER_MAIL_FROM", "admin@example.com"),
        ("MANAGER_DB_NAME", "susemanager"),
        ("TZ", "Etc/UTC"),
        ("container", "oci"),
    ] {
        assert_eq!(
            var(name).and_then(|e| e.value.as_deref()),
            Some(value),
            "{name}"
        );
    }
    assert!(var("SCC_USER").is_none(), "no SCC credentials were given");
    let Some(Object::Deployment(db)) = end.get(Kind::Deployment, names::DB_DEPLOYMENT) else {
        panic!("no db Deployment");
    };
    let volumes = db
        .spec
        .as_ref()
        .expect("present")
        .template
        .spec
        .as_ref()
        .expect("present")
        .volumes
        .as_ref()
        .expect("present");
    assert!(
        volumes.iter().any(|v| v
            .persistent_volume_claim
            .as_ref()
            .is_some_and(|c| c.claim_name == "var-pgsql18")),
        "db runs on var-pgsql18"
    );
}

#[test]
fn install_keeps_generated_passwords_once_written() {
    let end = end_state();
    let Some(Object::Secret(secret)) = end.get(Kind::Secret, names::DB_SECRET) else {
        panic!("no db-credentials");
    };
    let password = &secret.data.as_ref().expect("present")["password"].0;
    assert_eq!(password, GENERATED[0].as_bytes());
    // A later run generates other values: the Secret is kept.
    let mut args = install_args();
    args.generated.db = SecretString::new("another-generated-value");
    args.admin_password = None;
    let params = InstallParams::from_args(&args).expect("valid");
    let plan = params
        .plan(&end)
        .expect("a re-run without the admin password plans");
    assert!(plan.is_done());
    let step = plan
        .steps
        .iter()
        .find(|s| s.id == names::DB_SECRET)
        .expect("present");
    assert_eq!(step.action, Action::None);
}

#[test]
fn install_never_prints_a_secret() {
    let params = install_params();
    let preview = preview(&params, &common::empty_cluster()).expect("plans");
    let observed = common::empty_cluster();
    let text = format!(
        "{}\n{}\n{}\n{}",
        uyuni_core::render::human_preview(&preview.executed, &observed, Default::default()),
        uyuni_core::render::manifests_yaml(&preview.executed, false),
        serde_json::to_string(&preview.executed).expect("present"),
        serde_json::to_string(&params).expect("present"),
    );
    for secret in GENERATED.iter().chain([&ADMIN_PASSWORD]) {
        assert!(!text.contains(secret), "{secret} printed");
        let b64 = base64_of(secret);
        assert!(!text.contains(&b64), "{secret} printed in base64");
    }
}

fn base64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

#[test]
fn install_refuses_a_namespace_with_another_server_or_a_migration() {
    let migrate = common::params();
    let migrated = common::after_sync(&migrate);
    let refused = install::plan(&install_params(), &migrated).expect_err("refused");
    assert!(
        matches!(
            refused,
            PlanError::MigrationPresent { .. } | PlanError::ServerPresent { .. }
        ),
        "{refused:?}"
    );
}

#[test]
fn install_refuses_claims_it_did_not_create_unless_reused() {
    let mut observed = common::empty_cluster();
    observed.insert(common::namespace());
    let params = install_params();
    let claim = params
        .spec
        .volumes
        .iter()
        .find(|v| v.name == "var-spacewalk")
        .expect("present");
    observed.insert(Object::PersistentVolumeClaim(
        uyuni_core::builders::pvc::pvc(common::NAMESPACE, claim),
    ));
    let refused = install::plan(&params, &observed).expect_err("refused");
    let PlanError::ClaimsHoldData { claims, .. } = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(claims, &["var-spacewalk"]);
    assert!(refused.to_string().contains("--reuse-volumes"));
    let mut args = install_args();
    args.reuse_volumes = true;
    let reused = InstallParams::from_args(&args).expect("present");
    let plan = install::plan(&reused, &observed).expect("reuses the claim");
    let step = plan
        .steps
        .iter()
        .find(|s| s.id == "pvc-var-spacewalk")
        .expect("present");
    assert_eq!(step.action, Action::None);
    // Its own claims do not stop a resumed install.
    let end = end_state();
    assert!(install::plan(&params, &end).is_ok());
    assert!(end.contains(Kind::PersistentVolumeClaim, "var-spacewalk"));
    let _ = ObjectRef::new(Kind::PersistentVolumeClaim, "var-spacewalk");
}

#[test]
fn install_without_admin_password_asks_for_it_before_any_write() {
    let mut args = install_args();
    args.admin_password = None;
    let params = InstallParams::from_args(&args).expect("present");
    assert_eq!(
        install::plan(&params, &common::empty_cluster()).expect_err("refused"),
        PlanError::AdminPasswordNeeded
    );
    // The steps a run would take are still foreseen, with a stand-in.
    let foreseen = uyuni_core::preview::foreseen(&params, &common::empty_cluster());
    assert!(foreseen.iter().any(|s| s.id == "server-ready"));
}

#[test]
fn install_refuses_bad_input() {
    type Edit = fn(&mut InstallArgs);
    let cases: Vec<(Edit, &str)> = vec![
        (|a| a.fqdn = "not a name".into(), "fully qualified"),
        (
            |a| a.email = Some("Admin <admin@example.com>".into()),
            "--email",
        ),
        (
            |a| a.ssl_subject.country = Some("DEU".into()),
            "--ssl-country",
        ),
        (|a| a.organization = Some("ab".into()), "--organization"),
        (|a| a.db_user = Some("Space Walk".into()), "--db-user"),
        (
            |a| a.db_password = Some(SecretString::new("it's")),
            "single quote",
        ),
        (
            |a| a.admin_password = Some(SecretString::new("abc")),
            "5 to 48",
        ),
        (|a| a.scc_user = Some("org".into()), "SCC password"),
    ];
    for (edit, expected) in cases {
        let mut args = install_args();
        edit(&mut args);
        let error = InstallParams::from_args(&args)
            .expect_err("refused")
            .to_string();
        assert!(error.contains(expected), "{expected:?} not in {error}");
    }
}

#[test]
fn install_a_migration_into_an_installed_namespace_is_refused() {
    let end = end_state();
    let refused = uyuni_core::plan(&common::params(), &end).expect_err("refused");
    assert!(
        matches!(refused, PlanError::InstalledServerPresent { .. }),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .contains("Migrate into another namespace")
    );
}

#[test]
fn install_a_rerun_with_another_fqdn_is_refused_once_the_server_exists() {
    let end = end_state();
    let mut args = install_args();
    args.fqdn = "other.example.com".into();
    let params = InstallParams::from_args(&args).expect("valid");
    let refused = install::plan(&params, &end).expect_err("refused");
    let PlanError::FqdnChange {
        installed, same, ..
    } = &refused
    else {
        panic!("{refused:?}");
    };
    assert_eq!(installed, FQDN);
    assert!(same.contains(&format!("install {FQDN}")), "{same}");
    // Before the server Deployment exists, the name may still change.
    assert!(install::plan(&params, &common::empty_cluster()).is_ok());
}

/// After an uninstall kept the claims, their data keeps the name it was set up under: a
/// reinstall under another name is refused, with or without `--reuse-volumes`, naming the
/// command with the claims' name; under the same name it plans.
#[test]
fn install_on_kept_claims_keeps_the_name_they_were_set_up_under() {
    let kept = preview(
        &crate::uninstall::uninstall_params(false, false),
        &end_state(),
    )
    .expect("uninstalls")
    .end;
    assert!(kept.deployment(names::SERVER_DEPLOYMENT).is_none());
    for reuse in [false, true] {
        let mut args = install_args();
        args.fqdn = "other.example.com".into();
        args.reuse_volumes = reuse;
        let params = InstallParams::from_args(&args).expect("valid");
        let refused = install::plan(&params, &kept).expect_err("refused");
        let PlanError::ClaimsSetUpAsOther {
            installed, advice, ..
        } = &refused
        else {
            panic!("{refused:?}");
        };
        assert_eq!(installed, FQDN);
        assert!(advice.contains(&format!("install {FQDN}")), "{advice}");
        let mut args = install_args();
        args.reuse_volumes = reuse;
        let params = InstallParams::from_args(&args).expect("valid");
        assert!(install::plan(&params, &kept).is_ok(), "reuse {reuse}");
    }
}

/// The recorded specification after a first install, as `effects::record` reads it back.
fn recorded_after(args: InstallArgs) -> std::collections::BTreeMap<String, String> {
    let (params, _) = uyuni_core::record::params(args, &Default::default()).expect("valid");
    let end = preview(&params, &common::empty_cluster())
        .expect("plans")
        .end;
    let Some(Object::ConfigMap(spec)) = end.get(Kind::ConfigMap, names::SERVER_SPEC_CONFIG_MAP)
    else {
        panic!("no recorded specification");
    };
    spec.data.clone().unwrap_or_default()
}

#[test]
fn install_a_rerun_keeps_the_first_starts_inputs_it_recorded() {
    let mut first = install_args();
    first.organization = Some("First Org".into());
    first.email = Some("ops@example.com".into());
    first.timezone = Some("Europe/Berlin".into());
    let recorded = recorded_after(first);
    assert_eq!(
        recorded.get("organization").map(String::as_str),
        Some("First Org")
    );
    assert_eq!(
        recorded.get("tz").map(String::as_str),
        Some("Europe/Berlin")
    );
    // Run again without those flags: the recorded values, not the defaults.
    let mut again = install_args();
    again.organization = None;
    again.email = None;
    again.timezone = None;
    let (params, settings) = uyuni_core::record::params(again, &recorded).expect("valid");
    assert_eq!(params.organization, "First Org");
    assert_eq!(params.email, "ops@example.com");
    assert_eq!(params.timezone, "Europe/Berlin");
    assert!(
        settings
            .iter()
            .any(|s| s.flag == "organization" && s.origin == uyuni_core::record::Origin::Remembered),
        "{settings:?}"
    );
    // A migration reading that record is not confused by install's keys.
    let migrate =
        uyuni_core::record::params(common::args_with_ssh(&common::private_key("k")), &recorded);
    assert!(migrate.is_ok(), "{migrate:?}");
}

#[test]
fn install_reusing_a_database_without_its_credentials_is_refused() {
    let mut observed = end_state();
    // Claims another tool left (no install origin), without the database's Secrets.
    observed.objects.retain(|target, _| {
        target.kind == Kind::PersistentVolumeClaim || target.kind == Kind::Namespace
    });
    let claims: Vec<Object> = observed.objects.values().cloned().collect();
    for object in claims {
        if let Object::PersistentVolumeClaim(mut claim) = object {
            claim.metadata.annotations = None;
            observed.insert(Object::PersistentVolumeClaim(claim));
        }
    }
    let mut args = install_args();
    args.reuse_volumes = true;
    let params = InstallParams::from_args(&args).expect("valid");
    let refused = install::plan(&params, &observed).expect_err("refused");
    let text = refused.to_string();
    assert!(
        text.contains("Secret db-credentials (--db-password-file)")
            && text.contains("Secret db-admin-credentials"),
        "{text}"
    );
    args.db_password = Some(SecretString::new("the-old-one"));
    args.db_admin_password = Some(SecretString::new("the-old-admin"));
    args.reportdb_password = Some(SecretString::new("the-old-report"));
    let params = InstallParams::from_args(&args).expect("valid");
    assert!(install::plan(&params, &observed).is_ok());
}

/// The rule of the reuse holds for a migrated server's claims too: the migration names them
/// after the source, whose name the migrated server keeps, and an install on them (an
/// uninstall kept them) under another name is refused before any write.
#[test]
fn install_on_a_migrated_servers_kept_claims_keeps_the_sources_name() {
    let migration = common::params();
    let planned = uyuni_core::plan::plan(&migration, &common::empty_cluster()).expect("plans");
    let mut kept = common::empty_cluster();
    for step in planned.steps {
        if let Action::Apply(object) = step.action
            && let Object::PersistentVolumeClaim(claim) = *object
        {
            let name = claim
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(uyuni_core::labels::SERVER_NAME_ANNOTATION));
            assert_eq!(
                name.map(String::as_str),
                Some(common::SOURCE),
                "{step:?}",
                step = step.id
            );
            kept.insert(Object::PersistentVolumeClaim(claim));
        }
    }
    assert!(
        kept.objects
            .keys()
            .any(|r| r.kind == Kind::PersistentVolumeClaim),
        "the migration creates claims"
    );
    let mut args = install_args();
    args.fqdn = "other.example.com".into();
    args.reuse_volumes = true;
    let params = InstallParams::from_args(&args).expect("valid");
    let refused = install::plan(&params, &kept).expect_err("refused");
    let PlanError::ClaimsSetUpAsOther { installed, .. } = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(installed, common::SOURCE);
    let mut args = install_args();
    args.fqdn = common::SOURCE.into();
    args.reuse_volumes = true;
    let params = InstallParams::from_args(&args).expect("valid");
    assert!(install::plan(&params, &kept).is_ok());
}
