//! End to end, through the real `kubectl` against the simulated cluster: the server's
//! specification is remembered in ConfigMap `uyuni-server-spec` (`core::record`), so a later run
//! without the flags of an earlier one keeps what they chose. The same on the real control
//! plane: `e2e_real_migration.rs`.

use crate::support;

use serde_json::Value;
use support::{Env, NS, args, quick_migration, ssh_flags, text};
use uyuni_testdata::SimConfig;

fn image_of(env: &Env, deployment: &str) -> (String, String) {
    let d = env
        .sim
        .get("apps/v1", "Deployment", Some(NS), deployment)
        .unwrap_or_else(|| panic!("Deployment {deployment}"));
    let container = &d["spec"]["template"]["spec"]["containers"][0];
    (
        container["image"].as_str().unwrap_or_default().to_owned(),
        container["imagePullPolicy"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn record(env: &Env) -> Value {
    env.sim
        .get("v1", "ConfigMap", Some(NS), "uyuni-server-spec")
        .expect("ConfigMap uyuni-server-spec")
}

fn succeeded(out: &std::process::Output) -> (String, String) {
    let (stdout, stderr) = text(out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr)
}

#[test]
fn prepare_with_a_tag_then_a_final_run_without_it_runs_the_server_at_that_tag() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    let prepare = [
        ssh_flags(),
        args(&[
            "--prepare",
            "--tag",
            "2025.10",
            "--pull-policy",
            "IfNotPresent",
        ]),
    ]
    .concat();
    succeeded(&env.migrate(&prepare));
    // The simulated copy says what a prepare copy does: it stops nothing.
    let (log, _) = succeeded(&env.uyuni(&["logs", "data-sync"]));
    assert!(log.contains("a prepare copy stops nothing"), "{log}");
    assert!(!log.contains("Stopping the source services"), "{log}");
    let spec = record(&env);
    assert_eq!(spec["data"]["tag"], "2025.10", "{spec:#}");
    assert_eq!(spec["data"]["pull-policy"], "IfNotPresent", "{spec:#}");
    assert_eq!(
        spec["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "kubectl-uyuni"
    );
    // Only the server's specification: no SSH material, no source, no run's own choice.
    let keys: Vec<&String> = spec["data"].as_object().expect("data").keys().collect();
    assert_eq!(keys, ["pull-policy", "tag"], "{spec:#}");

    // The dry run of the final run says where each value comes from, and what a flag changes.
    let (stdout, _) = succeeded(&env.migrate(&args(&["--dry-run", "--pull-policy", "Always"])));
    assert!(stdout.contains("tag: 2025.10 (remembered)"), "{stdout}");
    assert!(
        stdout.contains("pull-policy: IfNotPresent → Always (--pull-policy)"),
        "{stdout}"
    );
    let (json, _) = succeeded(&env.migrate(&args(&["--dry-run", "-o", "json"])));
    let doc: Value = serde_json::from_str(&json).expect("JSON");
    assert!(
        doc["remembered"].as_array().is_some_and(|r| r
            .iter()
            .any(|s| s["flag"] == "tag" && s["value"] == "2025.10" && s["origin"] == "remembered")),
        "{:#}",
        doc["remembered"]
    );

    // The final run, without the flags of the prepare run.
    succeeded(&env.migrate(&[]));
    let (log, _) = succeeded(&env.uyuni(&["logs", "data-sync"]));
    assert!(log.contains("Stopping the source services"), "{log}");
    let (server, policy) = image_of(&env, "uyuni");
    assert!(server.ends_with("/uyuni/server:2025.10"), "{server}");
    assert_eq!(policy, "IfNotPresent");
    let (db, _) = image_of(&env, "db");
    assert!(db.ends_with(":2025.10"), "{db}");
    assert_eq!(record(&env)["data"]["tag"], "2025.10");

    // Run again, still without them: nothing to do, nothing reverted.
    let (_, stderr) = succeeded(&env.migrate(&[]));
    assert!(stderr.contains("Nothing to do"), "{stderr}");
    assert!(image_of(&env, "uyuni").0.ends_with(":2025.10"));
}

#[test]
fn a_record_that_no_longer_validates_is_refused_with_the_fix() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    env.create_namespace();
    env.sim
        .put(serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "uyuni-server-spec", "namespace": NS},
            "data": {"pull-policy": "Sometimes", "tag": "2025.10"},
        }))
        .expect("ConfigMap");
    let before = env.sim.objects("v1", "ConfigMap", Some(NS)).len();
    let out = env.migrate(&ssh_flags());
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{stderr}");
    for part in [
        "ConfigMap uyuni-server-spec",
        "pull-policy: \"Sometimes\"",
        &format!("-n {NS} edit configmap uyuni-server-spec"),
        "--pull-policy",
        "Nothing was written",
    ] {
        assert!(stderr.contains(part), "{part:?} in {stderr}");
    }
    assert_eq!(env.sim.objects("v1", "ConfigMap", Some(NS)).len(), before);
    // The flag given replaces the bad value: the run goes on.
    let out = env.migrate(&[ssh_flags(), args(&["--pull-policy", "Always"])].concat());
    succeeded(&out);
    assert_eq!(record(&env)["data"]["pull-policy"], "Always");
}
