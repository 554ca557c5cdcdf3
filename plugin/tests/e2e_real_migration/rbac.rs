//! `kubectl uyuni rbac --for COMMAND` on the real control plane: what it prints, applied by the
//! cluster admin for a ServiceAccount, is enough for a whole migration and a whole install run
//! with that account's token alone (`--server`, `--token`, `--certificate-authority`, no
//! kubeconfig), upstream's RBAC deciding every request, the Roles the migration grants its own
//! Jobs included (RBAC refuses a RoleBinding to rights its writer does not hold); with one right
//! taken out, the preflight names it before any write, its hint carrying the identity flags and
//! never the token.

use std::process::{Command, Output, Stdio};

use serde_json::Value;

use super::{RealEnv, both, condition, config, real_plane_or_skip};
use crate::support::{SOURCE, assert_no_secret, ssh_flags, text};
use uyuni_testdata::Flavour;

const NS_RBAC_MIGRATE: &str = "uyuni-rbac-migrate";
const NS_RBAC_INSTALL: &str = "uyuni-rbac-install";
const NS_RBAC_DENIED: &str = "uyuni-rbac-denied";
/// Where the ServiceAccounts live: not the installation's namespace, so that nothing there
/// grants them anything by accident.
const NS_ACCOUNTS: &str = "uyuni-rbac-accounts";

/// The cluster admin's `kubectl ARGS` with `stdin`, which must succeed.
fn admin(env: &RealEnv, args: &[&str], stdin: &str) -> Output {
    let out = env.cluster.kubectl(args, stdin).expect("kubectl runs");
    assert!(out.status.success(), "kubectl {args:?}: {}", both(&out));
    out
}

/// The namespace and a ServiceAccount `name` of [`NS_ACCOUNTS`] bound to `rbac --for
/// command`'s rules (printed by the plugin, applied by the admin as the docs say); `edit`
/// changes the printed objects first. Returns the account's token.
fn account_for(env: &RealEnv, command: &str, name: &str, edit: impl Fn(&mut Value)) -> String {
    let _ = env.cluster.kubectl(
        &["create", "namespace", NS_ACCOUNTS, "--validate=false"],
        "",
    );
    // Created by the first account of the test.
    let _ = env
        .cluster
        .kubectl(&["create", "namespace", env.ns, "--validate=false"], "");
    let _ = env.cluster.kubectl(
        &[
            "-n",
            NS_ACCOUNTS,
            "create",
            "serviceaccount",
            name,
            "--validate=false",
        ],
        "",
    );
    let account = format!("{NS_ACCOUNTS}:{name}");
    let out = env.uyuni(&[
        "rbac",
        "--for",
        command,
        "--serviceaccount",
        &account,
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", both(&out));
    let mut list: Value = serde_json::from_slice(&out.stdout).expect("a JSON List");
    edit(&mut list);
    // `--validate=false`: kubectl's validation (even with `--server-side`) first fetches the
    // whole OpenAPI v2 document, which timed out (32 s) on a loaded machine while the shared
    // clusters started; the server still validates every value, and `core/tests/schemas.rs`
    // checks these objects against the official schemas with unknown fields refused.
    admin(
        env,
        &["apply", "--server-side", "--validate=false", "-f", "-"],
        &list.to_string(),
    );
    let token = admin(
        env,
        &[
            "-n",
            NS_ACCOUNTS,
            "create",
            "token",
            name,
            "--duration",
            "1h",
        ],
        "",
    );
    String::from_utf8(token.stdout)
        .expect("UTF-8")
        .trim()
        .to_owned()
}

/// `kubectl uyuni --server URL --token TOKEN --certificate-authority CA -n NS ARGS…` through
/// the real kubectl, with no kubeconfig at all: the account's token is the only identity.
fn as_token(env: &RealEnv, token: &str, args: &[&str]) -> Command {
    let path = format!(
        "{}:{}",
        env.bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("kubectl");
    command
        .env("PATH", path)
        // No ~/.kube/config to fall back on.
        .env("HOME", env.cache.path())
        .env("KUBECACHEDIR", env.cache.path())
        .env_remove("KUBECONFIG")
        .env("UYUNI_SSL_PASSWORD", crate::support::CA_PASSWORD)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .arg("uyuni")
        .args(["--server", env.cluster.server(), "--token", token])
        .arg("--certificate-authority")
        .arg(env.cluster.dir().join("pki/ca.crt"))
        .args(["-n", env.ns])
        .args(args);
    command
}

/// Every Job Complete, every Deployment Available: the run went through to its end.
fn assert_complete(env: &RealEnv) {
    let jobs = env.items(&["jobs", "-n", env.ns]);
    assert!(!jobs.is_empty());
    for job in &jobs {
        assert_eq!(
            condition(job, "Complete").as_deref(),
            Some("True"),
            "Job {} is not Complete: {:#}",
            job["metadata"]["name"],
            job["status"]
        );
    }
    let deployments = env.items(&["deployments", "-n", env.ns]);
    assert!(deployments.iter().any(|d| d["metadata"]["name"] == "uyuni"));
    for d in &deployments {
        assert_eq!(
            condition(d, "Available").as_deref(),
            Some("True"),
            "Deployment {} is not Available",
            d["metadata"]["name"]
        );
    }
}

fn assert_no_token(out: &Output, token: &str) {
    let (stdout, stderr) = text(out);
    assert!(
        !stdout.contains(token) && !stderr.contains(token),
        "the token was printed:\n{}",
        both(out)
    );
}

/// The README's migration as a ServiceAccount holding only `rbac --for migrate`'s rules: it
/// completes (the data-sync pod patching its Secret through the Role the run wrote, which RBAC
/// let the account bind because it holds those rights itself), and the same account's second
/// run plans nothing.
#[test]
fn rbac_for_migrate_is_enough_for_a_whole_migration_with_a_service_accounts_token() {
    if !real_plane_or_skip("rbac --for migrate on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_RBAC_MIGRATE);
    let token = account_for(&env, "migrate", "migrator", |_| {});
    let mut args = vec!["migrate", SOURCE, "--yes"];
    let flags = ssh_flags();
    args.extend(flags.iter().map(String::as_str));
    let out = as_token(&env, &token, &args)
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    assert_no_secret(&out);
    assert_no_token(&out, &token);
    assert_complete(&env);
    let data = env.get(&["secret", "uyuni-migration-data", "-n", env.ns]);
    assert!(
        data["data"].as_object().is_some_and(|d| d.len() > 3),
        "the data-sync pod reported nothing: {data:#}"
    );

    let again = as_token(&env, &token, &["migrate", SOURCE, "--yes"])
        .output()
        .expect("kubectl runs");
    assert!(again.status.success(), "{}", both(&again));
    assert!(text(&again).1.contains("Nothing to do"), "{}", both(&again));
}

/// An install as a ServiceAccount holding only `rbac --for install`'s rules completes; another
/// holding only `rbac --for upgrade`'s upgrades it (inspections, backup, new images); one
/// holding only `rbac --for status`'s reads the server's status; `--for stop` and `--for
/// start` stop and start it; one holding only `rbac --for uninstall`'s removes it, keeping the
/// claims.
#[test]
fn rbac_for_install_upgrade_status_and_uninstall_are_enough_for_each_with_a_service_accounts_token()
{
    if !real_plane_or_skip("rbac --for install on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_RBAC_INSTALL);
    let token = account_for(&env, "install", "installer", |_| {});
    let out = as_token(
        &env,
        &token,
        &["install", "server.example.com", "--tag", "2025.10"],
    )
    .env("UYUNI_ADMIN_PASSWORD", "rbac-admin-Pa55")
    .output()
    .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    assert_no_token(&out, &token);
    assert!(!text(&out).1.contains("rbac-admin-Pa55"));
    assert_complete(&env);

    // The upgrade: its inspections (the report copied onto each Job), the backup, the roll.
    let token = account_for(&env, "upgrade", "upgrader", |_| {});
    let out = as_token(&env, &token, &["upgrade", "--tag", "2026.04", "--yes"])
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    assert!(text(&out).0.contains("2025.10 → 2026.04"), "{}", both(&out));
    assert_no_token(&out, &token);
    assert_complete(&env);

    let token = account_for(&env, "status", "reader", |_| {});
    let out = as_token(&env, &token, &["status", "-o", "json"])
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    let status: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(status.is_object(), "{status}");
    assert!(!text(&out).0.is_empty());
    // logs, with its rules alone (no right on Secrets, as status): the steps, a server's log.
    let token = account_for(&env, "logs", "logreader", |_| {});
    for args in [&["logs"][..], &["logs", "--component", "db", "--tail", "5"]] {
        let out = as_token(&env, &token, args).output().expect("kubectl runs");
        assert!(out.status.success(), "{args:?}: {}", both(&out));
        assert_no_token(&out, &token);
    }

    for (command, account) in [("stop", "stopper"), ("start", "starter")] {
        let token = account_for(&env, command, account, |_| {});
        let out = as_token(&env, &token, &[command, "--yes"])
            .output()
            .expect("kubectl runs");
        assert!(out.status.success(), "{command}: {}", both(&out));
    }
    assert_complete(&env);

    let token = account_for(&env, "uninstall", "remover", |_| {});
    let out = as_token(&env, &token, &["uninstall", "--yes"])
        .output()
        .expect("kubectl runs");
    assert!(out.status.success(), "{}", both(&out));
    assert_no_token(&out, &token);
    assert!(
        env.items(&["deployments,jobs", "-n", env.ns]).is_empty(),
        "uninstall left Deployments or Jobs"
    );
    assert!(
        !env.items(&["persistentvolumeclaims", "-n", env.ns])
            .is_empty(),
        "uninstall kept no claim"
    );
}

/// `rbac --for install` without `create` on PersistentVolumeClaims: the preflight names that
/// right, with the `kubectl auth can-i` that checks it carrying the run's identity flags
/// (the token as `--token "$TOKEN"`), and nothing is written, no Lease taken.
#[test]
fn rbac_a_right_taken_out_is_reported_by_the_preflight_before_any_write() {
    if !real_plane_or_skip("rbac with a right taken out on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_RBAC_DENIED);
    let token = account_for(&env, "install", "short", |list| {
        for item in list["items"].as_array_mut().into_iter().flatten() {
            if item["kind"] != "Role" {
                continue;
            }
            for rule in item["rules"].as_array_mut().into_iter().flatten() {
                let claims = rule["resources"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|r| r == "persistentvolumeclaims"));
                if claims && let Some(verbs) = rule["verbs"].as_array_mut() {
                    verbs.retain(|v| v != "create");
                }
            }
        }
    });
    let out = as_token(&env, &token, &["install", "server.example.com"])
        .env("UYUNI_ADMIN_PASSWORD", "rbac-admin-Pa55")
        .output()
        .expect("kubectl runs");
    assert!(!out.status.success(), "{}", both(&out));
    assert_no_token(&out, &token);
    let (_, stderr) = text(&out);
    let ns = env.ns;
    for part in [
        format!("create persistentvolumeclaims in namespace {ns}"),
        "auth can-i create persistentvolumeclaims".to_owned(),
        format!("--server {}", env.cluster.server()),
        "--token \"$TOKEN\"".to_owned(),
        "--certificate-authority".to_owned(),
        "Nothing was written".to_owned(),
    ] {
        assert!(stderr.contains(&part), "{part:?} in:\n{stderr}");
    }
    let written = env.items(&[
        "secrets,configmaps,persistentvolumeclaims,deployments,jobs,leases",
        "-n",
        ns,
    ]);
    let ours: Vec<&Value> = written
        .iter()
        .filter(|o| {
            o["kind"] == "Lease"
                || o["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubectl-uyuni"
        })
        .collect();
    assert!(ours.is_empty(), "written before the refusal: {ours:#?}");
}
