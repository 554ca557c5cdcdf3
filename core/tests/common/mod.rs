//! Fixtures shared by the core's integration tests: parameters and observed cluster states.
#![allow(dead_code)]

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim};
use uyuni_core::builders::{data_sync, migration, pvc};
use uyuni_core::catalogue::names;
use uyuni_core::params::{FileInput, MigrateArgs};
use uyuni_core::plan::{PlanError, Planner};
use uyuni_core::scripts::data_keys;
use uyuni_core::secret::SecretString;
use uyuni_core::{MigrateParams, Object, Observed, Step};

pub const SOURCE: &str = "uyuni.example.com";
pub const NAMESPACE: &str = "uyuni";
pub const RUN_ID: &str = "20261129180000";

/// The test fixture key pair (made by `ssh-keygen`, not a real credential).
const FIXTURE_KEY: &str = include_str!("../../../testdata/fixtures/ssh/id_ed25519");

/// An unencrypted OpenSSH private key with a recognisable body: the fixture key with `marker` as
/// its comment, so its public key is [`PUBLIC_KEY`] whatever the marker.
pub fn private_key(marker: &str) -> String {
    let mut key = ssh_key::PrivateKey::from_openssh(FIXTURE_KEY).expect("fixture key");
    key.set_comment(marker);
    key.to_openssh(ssh_key::LineEnding::LF)
        .expect("encodes")
        .to_string()
}

/// The source CA's password in the fixtures.
pub const CA_PASSWORD: &str = "ca pass#word";

/// An empty cluster with cert-manager installed (its CRDs served).
pub fn empty_cluster() -> Observed {
    let mut o = Observed::default();
    o.serve(uyuni_core::object::CustomKind::Issuer);
    o.serve(uyuni_core::object::CustomKind::Certificate);
    o
}

pub const PUBLIC_KEY: &str = include_str!("../../../testdata/fixtures/ssh/id_ed25519.pub");
pub const KNOWN_HOSTS: &str = "uyuni.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\n";

fn file(path: &str, content: &str) -> Option<FileInput> {
    Some(FileInput {
        path: path.to_owned(),
        content: SecretString::new(content),
    })
}

pub fn args_with_ssh(key: &str) -> MigrateArgs {
    MigrateArgs {
        namespace: NAMESPACE.into(),
        source_fqdn: SOURCE.into(),
        ssh_user: "root".into(),
        run_id: RUN_ID.into(),
        tool_version: "0.1.0".into(),
        ssh_key_private: file("id_ed25519", key),
        ssh_key_public: file("id_ed25519.pub", PUBLIC_KEY),
        ssh_known_hosts: file("known_hosts", KNOWN_HOSTS),
        ssl_password: Some(SecretString::new(CA_PASSWORD)),
        ..MigrateArgs::default()
    }
}

pub fn params() -> MigrateParams {
    MigrateParams::from_args(&args_with_ssh(&private_key("fixture-private-key"))).expect("valid")
}

pub fn namespace() -> Object {
    Object::Namespace(Namespace {
        metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some(NAMESPACE.into()),
            ..Default::default()
        },
        ..Default::default()
    })
}

pub fn finished(mut job: Job, ok: bool) -> Job {
    let (kind, reason) = if ok {
        ("Complete", None)
    } else {
        ("Failed", Some("BackoffLimitExceeded".to_owned()))
    };
    job.status = Some(JobStatus {
        succeeded: ok.then_some(1),
        failed: (!ok).then_some(1),
        conditions: Some(vec![JobCondition {
            type_: kind.into(),
            status: "True".into(),
            reason,
            ..Default::default()
        }]),
        ..Default::default()
    });
    job
}

pub fn extracted_secret(job: &str, password: &str, ca_key: Option<&str>) -> Object {
    let mut s = migration::migration_data_secret(NAMESPACE);
    let mut data: BTreeMap<String, ByteString> = [
        (data_keys::JOB, job),
        (data_keys::TIMEZONE, "Europe/Berlin"),
        (data_keys::PG_VERSION, "16"),
        (data_keys::DB_USER, "spacewalk"),
        (data_keys::DB_PASSWORD, password),
        (data_keys::DB_NAME, "susemanager"),
        (data_keys::DB_PORT, "5432"),
        (data_keys::REPORT_DB_USER, "pythia_susemanager"),
        (data_keys::REPORT_DB_PASSWORD, password),
        (data_keys::HAS_HUBXMLRPC, "false"),
        (data_keys::DEBUG, "false"),
        (data_keys::TFTP, "true"),
        (
            data_keys::CA_CERT,
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), ByteString(v.as_bytes().to_vec())))
    .collect();
    if let Some(key) = ca_key {
        data.insert(
            data_keys::CA_KEY.into(),
            ByteString(key.as_bytes().to_vec()),
        );
    }
    s.data = Some(data);
    Object::Secret(s)
}

/// The state after a complete, successful run of `params`.
pub fn after_sync(params: &MigrateParams) -> Observed {
    let mut o = empty_cluster();
    o.insert(namespace());
    o.insert(Object::ConfigMap(uyuni_core::builders::spec::server_spec(
        params,
    )));
    o.insert(Object::Secret(migration::ssh_key_secret(
        NAMESPACE,
        params.ssh_key.as_ref().expect("key"),
    )));
    o.insert(Object::ConfigMap(migration::ssh_config_map(
        NAMESPACE,
        params.ssh_config.as_ref().expect("ssh"),
    )));
    for job in uyuni_core::builders::image_check::jobs(params) {
        o.insert(Object::Job(finished(job, true)));
    }
    for claim in &params.spec.volumes {
        o.insert(Object::PersistentVolumeClaim(pvc::pvc(NAMESPACE, claim)));
    }
    o.insert(Object::ServiceAccount(migration::service_account(
        NAMESPACE,
    )));
    o.insert(Object::Role(migration::role(NAMESPACE)));
    o.insert(Object::RoleBinding(migration::role_binding(NAMESPACE)));
    let job = finished(data_sync::data_sync_job(params), true);
    let name = job.metadata.name.clone().expect("name");
    o.insert(Object::Job(job));
    o.insert(extracted_secret(&name, "s3cret pass#1", Some("-----BEGIN ENCRYPTED PRIVATE KEY-----\nCAKEYBODY\n-----END ENCRYPTED PRIVATE KEY-----\n")));
    o
}

pub fn pvc_of(params: &MigrateParams, name: &str) -> PersistentVolumeClaim {
    let claim = params
        .spec
        .volumes
        .iter()
        .find(|v| v.name == name)
        .expect("volume");
    pvc::pvc(NAMESPACE, claim)
}

pub const DATA_SECRET: &str = names::MIGRATION_DATA_SECRET;

/// The state after a complete migration of `params`: the sync of [`after_sync`], then every
/// later step carried out as the pure simulation models it.
pub fn after_migration(params: &MigrateParams) -> Observed {
    uyuni_core::preview(params, &after_sync(params))
        .expect("the state after the sync plans")
        .end
}

/// Whether ShellCheck is on PATH to check `name`; without it the check is skipped, except in CI,
/// where that fails.
fn shellcheck_available(name: &str) -> bool {
    let available = std::process::Command::new("shellcheck")
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !available {
        assert!(
            std::env::var_os("CI").is_none(),
            "shellcheck is not on PATH, and CI is set"
        );
        println!("shellcheck not found: {name} was not checked");
    }
    available
}

/// Runs ShellCheck on a rendered script; without ShellCheck on PATH the check is skipped, except
/// in CI, where that fails.
pub fn shellcheck(name: &str, script: &str) {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    if !shellcheck_available(name) {
        return;
    }
    let mut child = Command::new("shellcheck")
        .args(["-s", "bash", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("shellcheck runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("shellcheck ends");
    assert!(
        out.status.success(),
        "shellcheck {name}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `shellcheck -x` on the file `name` of `core/scripts/` (following its `source` of
/// `lib.sh`), as `scripts/test.sh` does for all of them; without ShellCheck on PATH the check is
/// skipped, except in CI, where that fails.
pub fn shellcheck_file(name: &str) {
    use std::process::Command;
    if !shellcheck_available(name) {
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
    let out = Command::new("shellcheck")
        .arg("-x")
        .arg(name)
        .current_dir(&dir)
        .output()
        .expect("shellcheck runs");
    assert!(
        out.status.success(),
        "shellcheck {name}:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Third-party certificate files for [`SOURCE`]: a root CA, and the server's certificate with
/// its key, consistent (the checks of `uyuni_core::certs` pass). Issued once per test binary.
pub fn tls_chain() -> &'static uyuni_testdata::certs::Chain {
    use uyuni_testdata::certs::{KeyKind, chain};
    static CHAIN: std::sync::OnceLock<uyuni_testdata::certs::Chain> = std::sync::OnceLock::new();
    CHAIN.get_or_init(|| {
        chain(&[SOURCE], KeyKind::EcP256, KeyKind::EcP256, false).expect("certificates")
    })
}

/// A line of a PEM key's body: found in an output, the key leaked.
pub fn key_body_line(pem: &str) -> &str {
    pem.lines().nth(1).unwrap_or(pem)
}

/// `step` carried out on the simulated cluster; the pod of a Job that `report(step id, image)`
/// answers for reports that, as the run copies a check's or an inspection's report onto its
/// Job (the simulated cluster's Jobs report nothing).
pub fn carried_out_reporting(
    observed: &Observed,
    namespace: &str,
    step: &Step,
    report: &dyn Fn(&str, &str) -> Option<String>,
) -> Observed {
    let mut observed = uyuni_core::simulate::simulate(observed, namespace, step);
    if let Some(Object::Job(mut job)) = observed
        .get(uyuni_core::Kind::Job, &step.target.name)
        .cloned()
    {
        let image = job
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.containers[0].image.clone())
            .unwrap_or_default();
        if let Some(text) = report(&step.id, &image) {
            job.metadata
                .annotations
                .get_or_insert_default()
                .insert(uyuni_core::labels::INSPECTION_ANNOTATION.to_owned(), text);
            observed.insert(Object::Job(job));
        }
    }
    observed
}

/// Runs `params`' plan step by step on the simulated cluster, the Jobs reporting as
/// [`carried_out_reporting`] says; returns the steps carried out and the end.
pub fn run_reporting<P: Planner>(
    params: &P,
    start: &Observed,
    report: &dyn Fn(&str, &str) -> Option<String>,
) -> Result<(Vec<Step>, Observed), PlanError> {
    let ns = params.server().namespace.clone();
    let mut observed = start.clone();
    let mut executed = Vec::new();
    for _ in 0..300 {
        let plan = params.plan(&observed)?;
        let Some(step) = plan.next_step().cloned() else {
            return Ok((executed, observed));
        };
        observed = carried_out_reporting(&observed, &ns, &step, report);
        executed.push(step);
    }
    panic!("the plan did not converge in 300 steps");
}
