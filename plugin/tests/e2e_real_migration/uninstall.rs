//! `kubectl uyuni uninstall` against the real control plane (upstream's kube-apiserver, etcd,
//! controllers and garbage collector, our node agent playing the pods): an install removed
//! with its data kept, installed again on that data, then removed with its data; the refusals
//! before any write. The clusters are the ones the migration tests share (`super::config`),
//! each test in a namespace of its own.

use std::process::Output;

use serde_json::Value;
use uyuni_testdata::Flavour;

use super::{RealEnv, both, condition, config, real_plane_or_skip, written_versions};
use crate::support::text;

const NS_UNINSTALL: &str = "uyuni-uninstall";
const NS_UNINSTALL_REFUSED: &str = "uyuni-uninstall-refused";
const FQDN: &str = "server.example.com";
const ADMIN_PASSWORD: &str = "uninstall-admin-Pa55";

/// The credential Secrets an uninstall keeps without a purge (those an install writes).
const CREDENTIALS: [&str; 5] = [
    "admin-credentials",
    "db-credentials",
    "db-admin-credentials",
    "reportdb-credentials",
    "uyuni-ca",
];

fn install(env: &RealEnv, extra: &[&str]) -> Output {
    let mut args = vec!["install", FQDN];
    args.extend_from_slice(extra);
    env.command(&args)
        .env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .output()
        .expect("kubectl runs")
}

/// Every object of the tool's in the test's namespace but the operation records, as `Kind/name`.
fn ours(env: &RealEnv) -> Vec<String> {
    let mut out: Vec<String> = env
        .items(&[
            "deployments,services,ingresses,jobs,configmaps,secrets,persistentvolumeclaims,serviceaccounts,roles,rolebindings,certificates.cert-manager.io,issuers.cert-manager.io",
            "-n",
            env.ns,
            "-l",
            // Without the operation records, which uninstall leaves (README, docs/report.md).
            "app.kubernetes.io/managed-by=kubectl-uyuni,app.kubernetes.io/component!=operation",
        ])
        .iter()
        .map(|o: &Value| {
            format!(
                "{}/{}",
                o["kind"].as_str().unwrap_or_default(),
                o["metadata"]["name"].as_str().unwrap_or_default()
            )
        })
        .collect();
    out.sort();
    out
}

fn deployments(env: &RealEnv) -> Vec<Value> {
    env.items(&["deployments", "-n", env.ns])
}

/// install → uninstall refused without --yes (the server serves, no terminal) and with
/// --purge-volumes without --yes, nothing written; the dry run writes nothing; uninstall
/// --yes leaves only the claims and credential Secrets, the Deployments gone, and says how to
/// reinstall; a second uninstall has nothing to do; install --reuse-volumes under another
/// name is refused, nothing written; under the install's name it runs on the kept data;
/// uninstall --purge-volumes --yes leaves nothing of the tool's.
#[test]
fn an_uninstall_keeps_the_data_for_a_reinstall_and_a_purge_removes_it() {
    if !real_plane_or_skip("uninstall on the real control plane") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_UNINSTALL);
    let out = install(&env, &[]);
    assert!(out.status.success(), "{}", both(&out));
    let before = written_versions(&env);
    let installed = ours(&env);

    let dry = env.uyuni(&["uninstall", "--dry-run"]);
    assert!(dry.status.success(), "{}", both(&dry));
    let (stdout, _) = text(&dry);
    assert!(
        stdout.contains("Dry run: nothing is deleted")
            && stdout.contains("deployment/uyuni")
            && stdout.contains("--- live/deployment/uyuni"),
        "{stdout}"
    );
    let dry = env.uyuni(&["uninstall", "--dry-run", "--purge-volumes"]);
    assert!(dry.status.success(), "{}", both(&dry));
    assert!(text(&dry).0.contains("var-pgsql18"), "{}", both(&dry));

    for args in [vec!["uninstall"], vec!["uninstall", "--purge-volumes"]] {
        let refused = env.uyuni(&args);
        let (_, stderr) = text(&refused);
        assert!(!refused.status.success(), "{args:?}: {}", both(&refused));
        assert!(
            stderr.contains("no terminal") && stderr.contains("--yes"),
            "{args:?}: {stderr}"
        );
        if args.len() == 2 {
            assert!(stderr.contains("var-pgsql18"), "{stderr}");
        }
    }
    assert_eq!(
        written_versions(&env),
        before,
        "a refused run or the dry run wrote"
    );
    assert_eq!(
        ours(&env),
        installed,
        "a refused run or the dry run deleted"
    );

    let out = env.uyuni(&["uninstall", "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("Kept")
            && stdout.contains("PersistentVolumeClaim var-pgsql18")
            && stdout.contains(&format!("install {FQDN} --reuse-volumes"))
            && stdout.contains("uninstall --purge-volumes"),
        "{stdout}"
    );
    assert!(deployments(&env).is_empty(), "{:#?}", deployments(&env));
    let left = ours(&env);
    assert!(!left.is_empty());
    for object in &left {
        let (kind, name) = object.split_once('/').expect("Kind/name");
        assert!(
            kind == "PersistentVolumeClaim" || (kind == "Secret" && CREDENTIALS.contains(&name)),
            "{object} left: {left:?}"
        );
    }
    for name in ["var-pgsql18", "var-spacewalk"] {
        assert!(
            left.contains(&format!("PersistentVolumeClaim/{name}")),
            "{left:?}"
        );
    }
    assert!(
        left.contains(&"Secret/db-credentials".to_owned()),
        "{left:?}"
    );

    let again = env.uyuni(&["uninstall", "--yes"]);
    assert!(again.status.success(), "{}", both(&again));
    assert!(text(&again).1.contains("Nothing to do"), "{}", both(&again));
    assert_eq!(ours(&env), left, "the second uninstall changed something");

    // The kept claims' data was set up as FQDN: a reuse under another name is refused, and
    // writes nothing.
    let before_rename = written_versions(&env);
    let renamed = env
        .command(&["install", "other.example.com", "--reuse-volumes"])
        .env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .output()
        .expect("kubectl runs");
    assert!(!renamed.status.success(), "{}", both(&renamed));
    let (_, stderr) = text(&renamed);
    assert!(
        stderr.contains(&format!("holds the data of server {FQDN}"))
            && stderr.contains(&format!("install {FQDN}")),
        "{stderr}"
    );
    assert_eq!(
        written_versions(&env),
        before_rename,
        "the renaming reuse wrote"
    );
    assert_eq!(ours(&env), left, "the renaming reuse changed something");

    let out = install(&env, &["--reuse-volumes"]);
    assert!(out.status.success(), "{}", both(&out));
    let server = env.get(&["deployment", "uyuni", "-n", env.ns]);
    assert_eq!(condition(&server, "Available").as_deref(), Some("True"));

    let out = env.uyuni(&["uninstall", "--purge-volumes", "--yes"]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        text(&out).0.contains("Nothing of kubectl-uyuni's is left"),
        "{}",
        both(&out)
    );
    assert!(ours(&env).is_empty(), "{:?}", ours(&env));
    let claims = env.items(&["persistentvolumeclaims", "-n", env.ns]);
    assert!(claims.is_empty(), "{claims:#?}");
    // The namespace the install created is left without --delete-namespace, and goes with it.
    let namespace = |env: &RealEnv| {
        env.items(&["namespaces"])
            .into_iter()
            .find(|n| n["metadata"]["name"] == env.ns)
    };
    let ns = namespace(&env).expect("the namespace is left");
    assert_eq!(
        ns["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "kubectl-uyuni"
    );
    let out = env.uyuni(&[
        "uninstall",
        "--purge-volumes",
        "--delete-namespace",
        "--yes",
    ]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        text(&out)
            .0
            .contains(&format!("Namespace {} was deleted", env.ns)),
        "{}",
        both(&out)
    );
    assert!(namespace(&env).is_none(), "{:#?}", namespace(&env));
}

/// Each a clear error with nothing written: a namespace without anything of the tool's (absent,
/// then holding someone else's server), --delete-namespace without --purge-volumes.
#[test]
fn an_uninstall_refuses_bad_input_before_any_write() {
    if !real_plane_or_skip("uninstall's refusals") {
        return;
    }
    let env = RealEnv::start(&config(Flavour::K3s, true), NS_UNINSTALL_REFUSED);
    let out = env.uyuni(&["uninstall", "--yes"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{}", both(&out));
    assert!(stderr.contains("nothing to uninstall"), "{stderr}");
    let namespaces = env.items(&["namespaces"]);
    assert!(
        !namespaces.iter().any(|n| n["metadata"]["name"] == env.ns),
        "the refused run created the namespace"
    );

    // No client-side validation: its fetch of the OpenAPI document can time out under load.
    let create = |args: &[&str]| {
        let args = [args, &["--validate=false"]].concat();
        let out = env.cluster.kubectl(&args, "").expect("kubectl runs");
        assert!(out.status.success(), "{}", both(&out));
    };
    create(&["create", "namespace", env.ns]);
    create(&[
        "create",
        "deployment",
        "uyuni",
        "--image=registry.example.com/other:1",
        "-n",
        env.ns,
    ]);
    for args in [
        vec!["uninstall", "--yes"],
        vec![
            "uninstall",
            "--purge-volumes",
            "--delete-namespace",
            "--yes",
        ],
        vec!["uninstall", "--dry-run"],
    ] {
        let out = env.uyuni(&args);
        let (_, stderr) = text(&out);
        assert!(!out.status.success(), "{args:?}: {}", both(&out));
        assert!(
            stderr.contains("nothing to uninstall"),
            "{args:?}: {stderr}"
        );
    }
    let deployments = env.items(&["deployments", "-n", env.ns]);
    assert_eq!(deployments.len(), 1, "someone else's server was touched");
    let leases = env.items(&["leases", "-n", env.ns]);
    assert!(
        leases.is_empty(),
        "a refused run took the lease: {leases:#?}"
    );

    let out = env.uyuni(&["uninstall", "--delete-namespace", "--yes"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{}", both(&out));
    assert!(stderr.contains("--purge-volumes"), "{stderr}");
}
