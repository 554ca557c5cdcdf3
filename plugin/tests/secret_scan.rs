//! One scan for every secret the tests hand the tool (issue 37): the SSH private key, the CA
//! password, the source's database passwords, the registry password, the administrator's
//! password and the passwords an install generates, looked for in everything a user or a
//! cluster reader can see — every output of every command in every format (dry runs human,
//! `--summary`, `-o json`, `-o yaml`; runs at `-v=6`; `status`; `logs` of every step), every
//! Job's and Deployment's command, arguments and literal environment values, every Job's
//! log, the operation records and the files of a `report` bundle — each secret as given and
//! base64-encoded, as a Secret's data holds it. Zero hits.

use std::process::Output;

use base64::Engine as _;
use serde_json::Value;
use uyuni_testdata::{SimConfig, scenarios};

use crate::support::{Env, NS, REGISTRY_PASSWORD, secrets, ssh_flags, text};

const ADMIN_PASSWORD: &str = "sentinel-admin-Pa55word";

fn decoded(secret: &Value, key: &str) -> Option<String> {
    let b64 = secret["data"][key].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    String::from_utf8(bytes).ok()
}

/// Every secret known to this test: the fixtures' and the ones the cluster holds now.
fn sentinels(env: &Env) -> Vec<String> {
    let mut all = secrets();
    all.push(ADMIN_PASSWORD.to_owned());
    all.push(REGISTRY_PASSWORD.to_owned());
    for secret in env.sim.objects("v1", "Secret", Some(NS)) {
        for key in ["password", "key", "tls.key", "ca.key"] {
            if let Some(value) = decoded(&secret, key).filter(|v| v.len() >= 8) {
                // As a Secret's data holds it: a copied Secret shows it so.
                all.push(base64::engine::general_purpose::STANDARD.encode(&value));
                // A PEM key by its body lines, which is how it would show up in a log.
                all.extend(
                    value
                        .lines()
                        .filter(|l| l.len() >= 16 && !l.starts_with("-----"))
                        .map(str::to_owned),
                );
                if !value.contains("-----") {
                    all.push(value);
                }
            }
        }
    }
    let encoded: Vec<String> = all
        .iter()
        .map(|s| base64::engine::general_purpose::STANDARD.encode(s))
        .collect();
    all.extend(encoded);
    all.sort();
    all.dedup();
    all
}

/// What the scan looks through, each with where it came from.
#[derive(Default)]
struct Seen(Vec<(String, String)>);

impl Seen {
    fn output(&mut self, what: &str, out: &Output) {
        let (stdout, stderr) = text(out);
        self.0.push((format!("{what} (stdout)"), stdout));
        self.0.push((format!("{what} (stderr)"), stderr));
    }

    fn pod_specs(&mut self, env: &Env) {
        for (api, kind, path) in [
            ("batch/v1", "Job", "/spec/template/spec"),
            ("apps/v1", "Deployment", "/spec/template/spec"),
        ] {
            for o in env.sim.objects(api, kind, Some(NS)) {
                let name = o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let spec = o.pointer(path).cloned().unwrap_or_default();
                for list in ["initContainers", "containers"] {
                    for c in spec[list].as_array().into_iter().flatten() {
                        let mut text = format!("{}\n{}\n", c["command"], c["args"]);
                        for e in c["env"].as_array().into_iter().flatten() {
                            text.push_str(&format!("{}\n", e["value"]));
                        }
                        self.0
                            .push((format!("{kind} {name}: command, args, env"), text));
                    }
                }
            }
        }
    }

    fn assert_clean(&self, sentinels: &[String]) {
        assert!(
            self.0.len() > 20,
            "too little was scanned: {}",
            self.0.len()
        );
        // The logs were read, not empty answers: the data sync's lines are there.
        assert!(
            self.0
                .iter()
                .any(|(what, text)| what.contains("logs data-sync") && text.lines().count() > 3),
            "no data-sync log was scanned"
        );
        for (what, text) in &self.0 {
            for s in sentinels {
                assert!(!text.contains(s.as_str()), "a secret ({s:?}) in {what}");
            }
        }
    }
}

#[test]
fn no_secret_in_any_output_job_spec_or_log_of_a_migration_and_an_install() {
    let mut seen = Seen::default();

    // A migration: its dry runs in every format, the run at -v=6, then status and logs.
    let mut scenario = scenarios::migration();
    for job in scenario.jobs.values_mut() {
        job.duration_ms = 0;
    }
    let env = Env::new(SimConfig {
        scenario: scenario.clone(),
        ..SimConfig::default()
    });
    let flags = ssh_flags();
    for extra in [
        &[][..],
        &["--summary"][..],
        &["-o", "json"][..],
        &["-o", "yaml"][..],
    ] {
        let mut args = flags.clone();
        args.push("--dry-run".into());
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let out = env.migrate(&args);
        assert!(out.status.success(), "{}", text(&out).1);
        seen.output(&format!("migrate --dry-run {extra:?}"), &out);
    }
    let mut args = flags.clone();
    args.push("-v=6".into());
    let out = env.migrate(&args);
    assert!(out.status.success(), "{}", text(&out).1);
    seen.output("migrate -v=6", &out);
    scan_after_run(&env, &mut seen, "migrate");
    let migrated = sentinels(&env);

    // An install: its administrator password given, its database passwords generated.
    let installed = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    for extra in [&["--dry-run", "-o", "yaml"][..], &["-v=6"][..]] {
        let out = installed
            .kubectl()
            .env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD)
            .arg("uyuni")
            .arg("--kubeconfig")
            .arg(installed.kubeconfig())
            .args(["-n", NS, "install", "server.example.com"])
            .args(extra)
            .output()
            .expect("kubectl runs");
        assert!(out.status.success(), "{}", text(&out).1);
        seen.output(&format!("install {extra:?}"), &out);
    }
    scan_after_run(&installed, &mut seen, "install");
    let mut all = migrated;
    all.extend(sentinels(&installed));
    assert!(
        all.iter().any(|s| s == ADMIN_PASSWORD) && all.len() > 10,
        "the sentinels were not gathered: {}",
        all.len()
    );
    seen.assert_clean(&all);
}

/// After a run: status in every format, the log of every step, every pod spec.
fn scan_after_run(env: &Env, seen: &mut Seen, command: &str) {
    for extra in [&[][..], &["-o", "json"][..], &["-o", "yaml"][..]] {
        let mut args = vec!["status"];
        args.extend(extra);
        let out = env.uyuni(&args);
        seen.output(&format!("{command}: status {extra:?}"), &out);
    }
    let mut steps: Vec<String> = env
        .sim
        .objects("batch/v1", "Job", Some(NS))
        .iter()
        .filter_map(|j| j["metadata"]["annotations"]["kubectl-uyuni.io/step"].as_str())
        .map(str::to_owned)
        .collect();
    steps.sort();
    steps.dedup();
    assert!(steps.len() >= 2, "{command}: steps {steps:?}");
    for step in &steps {
        let out = env.uyuni(&["logs", step, "--all-attempts"]);
        assert!(out.status.success(), "logs {step}: {}", text(&out).1);
        seen.output(&format!("{command}: logs {step}"), &out);
    }
    seen.pod_specs(env);
    // The operation records as the cluster holds them, and the support bundle, unpacked.
    for cm in env.sim.objects("v1", "ConfigMap", Some(NS)) {
        if cm["metadata"]["labels"]["app.kubernetes.io/component"] == "operation" {
            seen.0.push((
                format!("{command}: record {}", cm["metadata"]["name"]),
                cm.to_string(),
            ));
        }
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("report.tar.gz");
    let out = env.uyuni(&["report", "--file", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "report: {}", text(&out).1);
    seen.output(&format!("{command}: report"), &out);
    let files = crate::support::records::unpack(&file);
    assert!(
        files.keys().any(|k| k.contains("/operations/")),
        "{command}: no record in the report: {:?}",
        files.keys()
    );
    for (path, content) in files {
        seen.0.push((format!("{command}: report {path}"), content));
    }
}
