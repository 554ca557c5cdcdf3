//! The TLS phase: the CA key script under bash (real openssl, stub curl), and the planner's TLS
//! decisions: preflight, password, third-party files, the reused CA's order.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use uyuni_core::params::FileInput;
use uyuni_core::plan::PlanError;
use uyuni_core::scripts::tls::render_ca_key;
use uyuni_core::secret::SecretString;
use uyuni_core::{MigrateParams, Observed, plan, preview};

const PASSWORD: &str = "ca pass#word 'q'";

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "openssl {args:?}: {out:?}");
}

/// A CA (certificate and encrypted key), and another key, in `dir`.
fn pki(dir: &Path) {
    fs::write(dir.join("pw"), PASSWORD).expect("pw");
    openssl(
        &[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            "plain.key",
        ],
        dir,
    );
    openssl(
        &[
            "req",
            "-x509",
            "-new",
            "-key",
            "plain.key",
            "-subj",
            "/CN=uyuni CA",
            "-days",
            "10",
            "-out",
            "ca.crt",
        ],
        dir,
    );
    openssl(
        &[
            "pkey",
            "-in",
            "plain.key",
            "-aes256",
            "-passout",
            "file:pw",
            "-out",
            "ca.key",
        ],
        dir,
    );
    openssl(
        &[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-aes256",
            "-pass",
            "file:pw",
            "-out",
            "other.key",
        ],
        dir,
    );
}

struct Run {
    out: Output,
    patch: Option<String>,
}

fn run(dir: &Path, key: &str, password: &str) -> Run {
    let root = dir.join("root");
    let source = root.join("run/uyuni-ca/source");
    let pwdir = root.join("run/uyuni-ca/password");
    fs::create_dir_all(&source).expect("mkdir");
    fs::create_dir_all(&pwdir).expect("mkdir");
    fs::copy(dir.join(key), source.join("ca.key")).expect("key");
    fs::copy(dir.join("ca.crt"), source.join("ca.crt")).expect("crt");
    fs::write(pwdir.join("password"), password).expect("pw");
    let sa = dir.join("sa");
    fs::create_dir_all(&sa).expect("sa");
    fs::write(sa.join("token"), "TOKEN").expect("token");
    fs::write(sa.join("ca.crt"), "CA").expect("ca");
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).expect("bin");
    let patch = dir.join("patch.json");
    let _ = fs::remove_file(&patch);
    // curl: keeps the --data-binary file and the URL; prints nothing.
    let curl = format!(
        "#!/bin/bash\nfor a; do case $a in @*) cp \"${{a#@}}\" {p} ;; https://*) echo \"$a\" >{p}.url ;; esac; done\n",
        p = patch.display()
    );
    fs::write(bin.join("curl"), curl).expect("curl");
    fs::set_permissions(bin.join("curl"), fs::Permissions::from_mode(0o755)).expect("chmod");
    let script = render_ca_key(
        "uyuni-ca",
        &sa.display().to_string(),
        &root.display().to_string(),
    );
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script.text)
        .envs(script.env.iter().map(|(k, v)| (*k, v)))
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("NAMESPACE", "uyuni")
        .env("KUBERNETES_SERVICE_HOST", "10.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", "443")
        .stdin(Stdio::null())
        .output()
        .expect("bash");
    Run {
        out,
        patch: fs::read_to_string(&patch).ok(),
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn the_ca_key_is_decrypted_and_patched_into_the_secret_never_printed() {
    let dir = tempfile::tempdir().expect("tempdir");
    pki(dir.path());
    let r = run(dir.path(), "ca.key", PASSWORD);
    assert!(r.out.status.success(), "{}", text(&r.out));
    let patch = r.patch.expect("patched");
    let v: serde_json::Value = serde_json::from_str(&patch).expect("json");
    use base64::Engine as _;
    let key = base64::engine::general_purpose::STANDARD
        .decode(v["data"]["tls.key"].as_str().expect("tls.key"))
        .expect("b64");
    let key = String::from_utf8(key).expect("text");
    assert!(
        key.contains("BEGIN PRIVATE KEY") && !key.contains("ENCRYPTED"),
        "{key}"
    );
    let body = key.lines().nth(1).expect("body");
    assert!(!text(&r.out).contains(body), "the key is never printed");
    assert!(!text(&r.out).contains(PASSWORD));
    let url = fs::read_to_string(dir.path().join("patch.json.url")).expect("url");
    assert_eq!(
        url.trim(),
        "https://10.0.0.1:443/api/v1/namespaces/uyuni/secrets/uyuni-ca"
    );
    assert!(
        !dir.path().join("root/run/uyuni-ca/scratch/ca.key").exists(),
        "scratch cleaned"
    );
}

#[test]
fn a_wrong_password_or_a_foreign_key_fails_with_the_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    pki(dir.path());
    let r = run(dir.path(), "ca.key", "wrong");
    assert!(!r.out.status.success());
    assert!(
        text(&r.out).contains("the CA password is wrong"),
        "{}",
        text(&r.out)
    );
    assert!(r.patch.is_none(), "nothing written");

    let r = run(dir.path(), "other.key", PASSWORD);
    assert!(!r.out.status.success());
    assert!(
        text(&r.out).contains("does not belong to the CA certificate"),
        "{}",
        text(&r.out)
    );
    assert!(r.patch.is_none());
}

#[test]
fn an_empty_ca_key_advises_what_clears_it_not_a_plain_rerun() {
    let dir = tempfile::tempdir().expect("tempdir");
    pki(dir.path());
    fs::write(dir.path().join("empty.key"), "").expect("empty");
    let r = run(dir.path(), "empty.key", PASSWORD);
    assert!(!r.out.status.success());
    let out = text(&r.out);
    assert!(
        out.contains("holds no CA key")
            && out.contains("Running again alone does not clear this")
            && out.contains("delete Job of the final data sync in namespace uyuni"),
        "{out}"
    );
    assert!(r.patch.is_none());
}

/// A re-run does clear the empty CA key once the sync is repeated: with the final sync's Job
/// deleted, the planner syncs anew (the Job that would fail is never reached before it).
#[test]
fn deleting_the_final_sync_plans_it_anew() {
    let params = common::params();
    let mut o = common::after_sync(&params);
    let name = uyuni_core::builders::data_sync::job_name(&params.run_id);
    o.objects
        .remove(&uyuni_core::ObjectRef::new(uyuni_core::Kind::Job, name));
    let plan = uyuni_core::plan(&params, &o).expect("planned");
    let next = plan.next_step().expect("a step");
    assert!(
        next.id == uyuni_core::plan::PREPARE_SYNC_STEP || next.id == "data-sync",
        "{}",
        next.id
    );
}

#[test]
fn the_ca_key_script_is_shellcheck_clean() {
    common::shellcheck_file("ca-key.sh");
}

#[test]
fn the_ca_key_script_text_does_not_depend_on_its_parameters() {
    let a = render_ca_key(
        "uyuni-ca",
        "/var/run/secrets/kubernetes.io/serviceaccount",
        "",
    );
    let b = render_ca_key("other-ca", "/elsewhere", "");
    assert_eq!(a.text, b.text);
    assert_ne!(a.env, b.env);
}

// ---------------------------------------------------------------------------------------------
// Planning

fn third_party_args() -> uyuni_core::MigrateArgs {
    let file = |path: &str, content: &str| {
        Some(FileInput {
            path: path.into(),
            content: SecretString::new(content),
        })
    };
    let mut args = common::args_with_ssh(&common::private_key("k"));
    args.ssl_password = None;
    let tls = common::tls_chain();
    args.spec.ssl_server_cert = file("s.crt", &tls.cert);
    args.spec.ssl_server_key = file("s.key", &tls.key);
    args.spec.ssl_ca_root = file("ca.crt", &tls.root);
    args
}

#[test]
fn without_cert_manager_planning_stops_before_any_write_unless_certificates_are_given() {
    let params = common::params();
    assert_eq!(
        plan(&params, &Observed::default()),
        Err(PlanError::CertManagerMissing)
    );
    let params = MigrateParams::from_args(&third_party_args()).expect("valid");
    assert!(plan(&params, &Observed::default()).is_ok());
}

#[test]
fn a_dry_run_without_cert_manager_previews_the_migration_with_cert_manager_assumed() {
    let params = common::params();
    let mut o = common::empty_cluster();
    o.served.clear();
    assert_eq!(
        preview(&params, &o).err(),
        Some(PlanError::CertManagerMissing)
    );
    let (shown, assumption) =
        uyuni_core::preview::dry_run_preview(&params, &o).expect("a preview all the same");
    let assumption = assumption.expect("the refusal is kept");
    assert_eq!(assumption.refused, PlanError::CertManagerMissing);
    assert!(
        assumption
            .observed
            .serves(uyuni_core::object::CustomKind::Issuer)
    );
    assert!(shown.executed.iter().any(|s| s.id == "ca-issuer"));

    // With cert-manager there, nothing is assumed.
    let (_, assumption) =
        uyuni_core::preview::dry_run_preview(&params, &common::empty_cluster()).expect("preview");
    assert!(assumption.is_none());
}

#[test]
fn the_password_is_needed_only_to_decrypt_the_ca_key() {
    let mut args = common::args_with_ssh(&common::private_key("fixture-private-key"));
    args.ssl_password = None;
    let params = MigrateParams::from_args(&args).expect("valid");
    let with_password = common::params();
    // Before the sync: not needed yet (and the dry run shows the whole migration).
    assert!(preview(&params, &common::empty_cluster()).is_ok());
    assert_eq!(
        plan(&params, &common::after_sync(&params)),
        Err(PlanError::CaPasswordNeeded)
    );
    // Once the key is in Secret uyuni-ca, the password is not asked for again.
    let done = common::after_migration(&with_password);
    let next = plan(&params, &done).expect("plan");
    assert!(next.is_done(), "{:?}", next.next_step());
}

#[test]
fn third_party_files_become_tls_secrets_with_the_chart_names() {
    let params = MigrateParams::from_args(&third_party_args()).expect("valid");
    let mut o = common::after_sync(&params);
    o.served.clear();
    let p = preview(&params, &o).expect("preview");
    let ids: Vec<&str> = p.executed.iter().map(|s| s.id.as_str()).collect();
    for id in [
        "server-cert",
        "db-cert",
        "ca-config-map",
        "db-ca-config-map",
    ] {
        assert!(ids.contains(&id), "{ids:?}");
    }
    assert!(
        !ids.iter()
            .any(|i| i.starts_with("ca-key") || *i == "ca-issuer"),
        "{ids:?}"
    );
    let pos = |id: &str| {
        ids.iter()
            .position(|i| *i == id)
            .unwrap_or_else(|| panic!("{id}: {ids:?}"))
    };
    assert!(pos("db-cert") < pos("db-deployment"), "{ids:?}");
    assert!(pos("db-upgrade") < pos("db-cert"), "{ids:?}");
    let secret = p.end.secret("uyuni-cert").expect("uyuni-cert");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let out = uyuni_core::render::human_preview(&p.steps, &o, Default::default());
    assert!(
        !out.contains(common::key_body_line(&common::tls_chain().key)),
        "the key is masked"
    );
}

#[test]
fn a_later_run_without_the_files_keeps_the_third_party_certificates() {
    let params = MigrateParams::from_args(&third_party_args()).expect("valid");
    let mut o = common::after_sync(&params);
    o.served.clear();
    let done = preview(&params, &o).expect("preview").end;
    // The same command without the --ssl-* files, on a cluster without cert-manager: the
    // certificates stay, no issuer replaces them, and nothing is to do.
    let mut args = third_party_args();
    args.spec.ssl_server_cert = None;
    args.spec.ssl_server_key = None;
    args.spec.ssl_ca_root = None;
    let plain = MigrateParams::from_args(&args).expect("valid");
    let again = plan(&plain, &done).expect("no cert-manager needed");
    assert!(again.is_done(), "{:?}", again.next_step());
    let server_cert = again
        .steps
        .iter()
        .find(|s| s.id == "server-cert")
        .expect("server-cert step");
    assert!(
        server_cert.reason.contains("kept"),
        "{}",
        server_cert.reason
    );
    assert!(!again.steps.iter().any(|s| s.id == "ca-issuer"));

    // With cert-manager there, still no issuer takes the Secrets over.
    let mut with_cm = done.clone();
    with_cm.serve(uyuni_core::object::CustomKind::Issuer);
    with_cm.serve(uyuni_core::object::CustomKind::Certificate);
    let again = plan(&plain, &with_cm).expect("plan");
    assert!(again.is_done(), "{:?}", again.next_step());
}

#[test]
fn the_reused_ca_is_decrypted_before_the_issuer_and_the_certificates() {
    let params = common::params();
    let p = preview(&params, &common::after_sync(&params)).expect("preview");
    let ids: Vec<&str> = p.executed.iter().map(|s| s.id.as_str()).collect();
    let pos = |id: &str| {
        ids.iter()
            .position(|i| *i == id)
            .unwrap_or_else(|| panic!("{id}: {ids:?}"))
    };
    // Between the database's upgrade and the db Deployment, which mounts db-cert.
    assert!(pos("db-upgrade") < pos("ca-password"));
    assert!(pos("db-certificate-ready") < pos("db-deployment"));
    assert!(pos("ca-password") < pos("ca-secret"));
    assert!(pos("ca-secret") < pos("ca-key"));
    assert!(pos("ca-key") < pos("ca-issuer"));
    assert!(pos("ca-issuer") < pos("server-certificate"));
    assert!(pos("server-certificate") < pos("server-certificate-ready"));
    let out = uyuni_core::render::human_preview(
        &p.steps,
        &common::after_sync(&params),
        Default::default(),
    );
    assert!(!out.contains(common::CA_PASSWORD));
}
