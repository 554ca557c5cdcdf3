//! What a new user found in the lifecycle commands (issue 46), end to end through the real
//! kubectl on the simulated cluster: a reuse keeps the server's name; tags keep their case and
//! follow the OCI rule; a restart of a stopped server names `start`; `--tz` is a zone of the
//! tz database; the support bundle holds every object the label selector selects and scrubs
//! their secrets; a rollback reads as one; a purge removes the operation records and a plain
//! uninstall keeps them; an installed `latest` upgrades.

use std::process::Output;

use serde_json::Value;
use uyuni_testdata::SimConfig;

use crate::support::{Env, NS, text};

const ADMIN_PASSWORD: &str = "lifecycle-admin-Pa55";

/// `kubectl uyuni -n uyuni ARGS` with the administrator's password in the environment and the
/// retry schedule shortened.
fn uyuni(env: &Env, args: &[&str]) -> Output {
    let args: Vec<&str> = args
        .iter()
        .copied()
        .chain(["--retry-delay-divisor", "10"])
        .collect();
    env.uyuni_as_admin(ADMIN_PASSWORD, &args)
}

fn both(out: &Output) -> String {
    let (stdout, stderr) = text(out);
    format!(
        "exit {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status.code()
    )
}

fn ok(out: &Output, what: &str) {
    assert!(out.status.success(), "{what}: {}", both(out));
}

/// Runs `args` after clearing the request log; asserts it was refused with `code` and wrote
/// nothing; returns its stderr.
fn refused(env: &Env, args: &[&str], code: i32) -> String {
    env.sim.clear_request_log();
    let out = uyuni(env, args);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", both(&out));
    let writes: Vec<_> = env
        .sim
        .request_log()
        .into_iter()
        .filter(|r| r.is_successful_write())
        .collect();
    assert!(writes.is_empty(), "{args:?} wrote {writes:?}");
    text(&out).1
}

fn ours(object: &Value) -> bool {
    object["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "kubectl-uyuni"
}

/// 1. `install A`, `uninstall --yes`, then `install B --reuse-volumes` is refused before any
///    write, naming the command with A; `install A --reuse-volumes` runs on the kept claims.
#[test]
fn a_reuse_keeps_the_name_the_data_was_set_up_under() {
    let env = Env::quick_jobs();
    ok(&uyuni(&env, &["install", "rss.example.com"]), "install");
    let claims = env.sim.objects("v1", "PersistentVolumeClaim", Some(NS));
    assert!(!claims.is_empty());
    for claim in &claims {
        assert_eq!(
            claim["metadata"]["annotations"]["kubectl-uyuni.io/server-name"], "rss.example.com",
            "{claim:#}"
        );
    }
    let out = uyuni(&env, &["uninstall", "--yes"]);
    ok(&out, "uninstall");
    assert!(
        text(&out)
            .0
            .contains("install rss.example.com --reuse-volumes"),
        "{}",
        both(&out)
    );

    let stderr = refused(
        &env,
        &["install", "other.example.com", "--reuse-volumes"],
        1,
    );
    assert!(
        stderr.contains("holds the data of server rss.example.com")
            && stderr.contains("this run names it other.example.com")
            && stderr.contains("install rss.example.com")
            && stderr.contains("uninstall --purge-volumes")
            && stderr.contains("Nothing was written"),
        "{stderr}"
    );
    // Without --reuse-volumes too: the claims are the same.
    let stderr = refused(&env, &["install", "other.example.com"], 1);
    assert!(
        stderr.contains("holds the data of server rss.example.com"),
        "{stderr}"
    );

    ok(
        &uyuni(&env, &["install", "rss.example.com", "--reuse-volumes"]),
        "the reuse under the same name",
    );
    let server = env
        .sim
        .objects("apps/v1", "Deployment", Some(NS))
        .into_iter()
        .find(|d| d["metadata"]["name"] == "uyuni")
        .expect("Deployment uyuni");
    let env_vars = server["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        env_vars
            .iter()
            .any(|e| e["name"] == "UYUNI_HOSTNAME" && e["value"] == "rss.example.com"),
        "{env_vars:#?}"
    );
}

/// 2. A tag keeps its case (`upgrade --tag Foo` inspects `server:Foo`); a tag of 200
///    characters and an empty one are refused, each saying why, before any write.
#[test]
fn tags_keep_their_case_and_follow_the_oci_rule() {
    let env = Env::quick_jobs();
    let dry = uyuni(
        &env,
        &[
            "install",
            "srv.example.com",
            "--tag",
            "Build_7.Rc-1",
            "--dry-run",
        ],
    );
    ok(&dry, "dry run with a mixed-case tag");
    let (stdout, _) = text(&dry);
    assert!(
        stdout.contains("uyuni/server:Build_7.Rc-1") && !stdout.contains("server:build_7.rc-1"),
        "{stdout}"
    );

    let long = "a".repeat(200);
    let stderr = refused(&env, &["install", "srv.example.com", "--tag", &long], 2);
    assert!(
        stderr.contains("200 characters long") && stderr.contains("at most 128"),
        "{stderr}"
    );
    let stderr = refused(&env, &["install", "srv.example.com", "--tag", ""], 2);
    assert!(
        stderr.contains("is empty") && !stderr.contains("pass --tag"),
        "{stderr}"
    );

    ok(
        &uyuni(&env, &["install", "srv.example.com", "--tag", "2025.10"]),
        "install",
    );
    let up = uyuni(&env, &["upgrade", "--tag", "Foo", "--yes"]);
    // `Foo` is no release: the inspection runs on it, and the upgrade is refused after it.
    assert!(!up.status.success(), "{}", both(&up));
    let inspected: Vec<String> = env
        .jobs_of("inspect-server")
        .iter()
        .filter_map(|j| {
            j["spec"]["template"]["spec"]["containers"][0]["image"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert!(
        !inspected.is_empty() && inspected.iter().all(|i| i.ends_with("/uyuni/server:Foo")),
        "{inspected:?}"
    );
}

/// 3. `restart` of a stopped server is refused before any write and names `start`, as
///    `upgrade` is; `stop --dry-run` opens with its plan line, as the other dry runs do.
#[test]
fn a_restart_of_a_stopped_server_names_start() {
    let env = Env::quick_jobs();
    ok(&uyuni(&env, &["install", "srv.example.com"]), "install");
    let dry = uyuni(&env, &["stop", "--dry-run"]);
    ok(&dry, "stop --dry-run");
    let (stdout, _) = text(&dry);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.len() > 3 && lines[0].starts_with("Dry run:") && lines[2].starts_with("Plan: "),
        "{stdout}"
    );
    ok(&uyuni(&env, &["stop", "--yes"]), "stop");
    for command in ["restart", "upgrade"] {
        let args: &[&str] = if command == "restart" {
            &["restart", "--yes"]
        } else {
            &["upgrade", "--tag", "2026.04", "--yes"]
        };
        let stderr = refused(&env, args, 1);
        assert!(
            stderr.contains("is stopped")
                && stderr.contains("kubectl uyuni")
                && stderr.contains(" start`")
                && stderr.contains("Nothing was written"),
            "{command}: {stderr}"
        );
    }
    ok(&uyuni(&env, &["start"]), "start");
    ok(&uyuni(&env, &["restart", "--yes"]), "restart once started");
}

/// 4. `--tz` outside the tz database is refused before any write (the image's start would
///    refuse it after every object was written); a name in another case is suggested; a zone
///    of the database is written as `TZ`.
#[test]
fn a_time_zone_outside_the_tz_database_is_refused_before_any_write() {
    let env = Env::quick_jobs();
    let stderr = refused(
        &env,
        &["install", "srv.example.com", "--tz", "Mars/Olympus"],
        2,
    );
    assert!(
        stderr.contains("\"Mars/Olympus\"")
            && stderr.contains("tz database")
            && stderr.contains("Nothing was written"),
        "{stderr}"
    );
    let stderr = refused(
        &env,
        &["install", "srv.example.com", "--tz", "europe/berlin"],
        2,
    );
    assert!(stderr.contains("did you mean Europe/Berlin?"), "{stderr}");
    ok(
        &uyuni(
            &env,
            &["install", "srv.example.com", "--tz", "America/New_York"],
        ),
        "install with a zone",
    );
    let server = env
        .sim
        .objects("apps/v1", "Deployment", Some(NS))
        .into_iter()
        .find(|d| d["metadata"]["name"] == "uyuni")
        .expect("Deployment uyuni");
    assert!(
        server["spec"]["template"]["spec"]["containers"][0]["env"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["name"] == "TZ" && e["value"] == "America/New_York"),
        "{server:#}"
    );
}

/// 5. The support bundle holds every object the tool's label selector selects: Secret
///    `admin-credentials` (keys only), ConfigMaps `uyuni-config` and `uyuni-replicas`; the
///    administrator's password, which an event here repeats, is scrubbed from every file.
#[test]
fn the_support_bundle_holds_what_the_label_selector_selects_and_scrubs_it() {
    let env = Env::quick_jobs();
    ok(&uyuni(&env, &["install", "srv.example.com"]), "install");
    ok(&uyuni(&env, &["stop", "--yes"]), "stop");
    env.sim
        .put(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": "leak.1", "namespace": NS},
            "involvedObject": {"kind": "Pod", "name": "uyuni-0", "namespace": NS},
            "reason": "Leak",
            "message": format!("a script echoed {ADMIN_PASSWORD} by mistake"),
            "type": "Warning"
        }))
        .expect("event");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("bundle.tar.gz");
    let out = env
        .kubectl()
        .arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["-n", NS, "report", "--file", file.to_str().expect("utf-8")])
        .output()
        .expect("kubectl runs");
    ok(&out, "report");
    let files = crate::support::records::unpack(&file);
    let object = |needle: &str| {
        files
            .iter()
            .find(|(path, _)| path.contains("/objects/") && path.ends_with(needle))
            .map(|(_, content)| content.clone())
            .unwrap_or_else(|| panic!("no {needle} in {:#?}", files.keys()))
    };
    let admin = object("secret_admin-credentials.yaml");
    assert!(admin.contains("***"), "{admin}");
    assert!(object("configmap_uyuni-config.yaml").contains("srv.example.com"));
    object("configmap_uyuni-replicas.yaml");
    let events = files
        .iter()
        .find(|(path, _)| path.ends_with("events.yaml"))
        .map(|(_, c)| c.clone())
        .expect("events.yaml");
    assert!(
        events.contains("a script echoed *** by mistake"),
        "{events}"
    );
    for (path, content) in &files {
        assert!(
            !content.contains(ADMIN_PASSWORD),
            "{path} holds the password"
        );
    }
}

/// 6. A rollback's dry run and result read as a rollback: its images, no inspection, and the
///    releases from the upgraded one back, without a way back of its own.
#[test]
fn a_rollback_reads_as_a_rollback() {
    let env = Env::quick_jobs();
    ok(
        &uyuni(&env, &["install", "srv.example.com", "--tag", "2025.10"]),
        "install",
    );
    ok(
        &uyuni(&env, &["upgrade", "--tag", "2026.04", "--yes"]),
        "upgrade",
    );
    let dry = uyuni(&env, &["upgrade", "--rollback", "--dry-run"]);
    ok(&dry, "rollback --dry-run");
    let (stdout, _) = text(&dry);
    assert!(
        stdout.starts_with(&format!(
            "Dry run: nothing is written. Rollback of the server in namespace {NS} to registry.opensuse.org/uyuni/server:2025.10:"
        )) && stdout.contains("A rollback runs no inspection")
            && !stdout.contains("Upgrade of the server")
            && !stdout.contains("inspection Jobs have run"),
        "{stdout}"
    );
    let back = uyuni(&env, &["upgrade", "--rollback", "--yes"]);
    ok(&back, "rollback");
    let (stdout, _) = text(&back);
    assert!(
        stdout.contains("was rolled back and runs registry.opensuse.org/uyuni/server:2025.10")
            && stdout.contains("Rolled back:      2026.04 → 2025.10")
            && !stdout.contains("Release:")
            && !stdout.contains("Way back"),
        "{stdout}"
    );
    let json = uyuni(&env, &["upgrade", "--rollback", "--yes", "-o", "json"]);
    ok(&json, "rollback again, as JSON");
    let document: Value = serde_json::from_str(&text(&json).0).expect("JSON");
    assert_eq!(document["rolledBack"], true, "{document:#}");
}

/// 7. A plain uninstall keeps the operation records and says so; a purge deletes them, its own
///    included, and says so; `--delete-namespace` ends without a warning.
#[test]
fn a_purge_removes_the_operation_records_and_a_plain_uninstall_keeps_them() {
    let env = Env::quick_jobs();
    let records = |env: &Env| -> Vec<String> {
        env.sim
            .objects("v1", "ConfigMap", Some(NS))
            .into_iter()
            .filter(|c| c["metadata"]["labels"]["app.kubernetes.io/component"] == "operation")
            .filter_map(|c| c["metadata"]["name"].as_str().map(str::to_owned))
            .collect()
    };
    ok(&uyuni(&env, &["install", "srv.example.com"]), "install");
    let out = uyuni(&env, &["uninstall", "--yes"]);
    ok(&out, "uninstall");
    let kept = records(&env);
    assert!(
        kept.iter().any(|r| r.ends_with("-uninstall"))
            && kept.iter().any(|r| r.ends_with("-install")),
        "{kept:?}"
    );
    assert!(
        text(&out).0.contains("Kept too: the operation records"),
        "{}",
        both(&out)
    );

    let out = uyuni(&env, &["uninstall", "--purge-volumes", "--yes"]);
    ok(&out, "purge");
    let (stdout, stderr) = text(&out);
    assert!(
        stdout
            .contains("Nothing of kubectl-uyuni's is left: its operation records were deleted too"),
        "{stdout}"
    );
    assert!(
        !stderr.contains("could not be written") && !stderr.contains("could not be deleted"),
        "{stderr}"
    );
    assert!(records(&env).is_empty(), "{:?}", records(&env));
    let left: Vec<Value> = ["ConfigMap", "Secret", "PersistentVolumeClaim"]
        .iter()
        .flat_map(|kind| env.sim.objects("v1", kind, Some(NS)))
        .filter(ours)
        .collect();
    assert!(left.is_empty(), "{left:#?}");
    // Nothing of ours: a second uninstall says so, and it is true.
    let again = uyuni(&env, &["uninstall", "--yes"]);
    assert!(!again.status.success(), "{}", both(&again));

    ok(
        &uyuni(&env, &["install", "srv.example.com"]),
        "install again",
    );
    let out = uyuni(
        &env,
        &[
            "uninstall",
            "--purge-volumes",
            "--delete-namespace",
            "--yes",
        ],
    );
    ok(&out, "purge with the namespace");
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains(&format!("Namespace {NS} was deleted")),
        "{stdout}"
    );
    assert!(
        !stderr.contains("record of this operation could not be written")
            && !stderr.contains("could not be deleted"),
        "{stderr}"
    );
}

/// 10. A server installed with the default tag `latest` upgrades: the simulated inspection
///     reports the release an installed `latest` names in its release file, as the real image
///     does (`uyuni_testdata::scenario::image_release`).
#[test]
fn a_server_installed_as_latest_upgrades() {
    let env = Env::quick_jobs();
    ok(
        &uyuni(&env, &["install", "srv.example.com"]),
        "install latest",
    );
    let out = uyuni(&env, &["upgrade", "--tag", "2026.04", "--yes"]);
    ok(&out, "upgrade from latest");
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains(&format!(
            "Release:          {} → 2026.04",
            uyuni_testdata::scenario::LATEST_RELEASE
        )),
        "{stdout}"
    );
}

/// 8. A 403 on the run's first read (the recorded specification, read before the loop) is
///    explained as the loop's first observation is: every permission missing, each with its
///    `kubectl auth can-i`, and the `rbac --for` command that prints the Role for it.
#[test]
fn a_refused_first_read_lists_what_is_missing_and_names_rbac() {
    use uyuni_testdata::{ErrorFault, FaultTarget, Faults, Verb};
    let mut scenario = uyuni_testdata::scenarios::migration();
    scenario.faults = Faults {
        errors: vec![ErrorFault {
            target: FaultTarget {
                verb: Some(Verb::Get),
                resource: Some("configmaps".into()),
                name: Some("uyuni-server-spec".into()),
            },
            rate: 1.0,
            status: 403,
            retry_after_seconds: 1,
        }],
        ..Faults::default()
    };
    let env = Env::new(SimConfig {
        scenario,
        denied_access: vec![("get".into(), "configmaps".into())],
        ..SimConfig::default()
    });
    let stderr = refused(&env, &["install", "srv.example.com"], 1);
    assert!(
        stderr.contains("refused to get configmap")
            && stderr.contains("403 Forbidden")
            && stderr.contains("missing:")
            && stderr.contains("auth can-i get configmaps`")
            && stderr.contains("rbac --for install`"),
        "{stderr}"
    );
}

/// Sends SIGINT to `child` (kubectl execs its plugins: its pid is the plugin's) and waits.
fn interrupt(child: std::process::Child) -> Output {
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    child.wait_with_output().expect("wait")
}

/// 8. Ctrl-C: an install run without `--context` is told how to resume with the context the
///    connection resolved (the kubeconfig's current one), as every other hint is; `status -w`
///    ends with 130 as the README says.
#[test]
fn ctrl_c_resumes_with_the_resolved_context_and_ends_a_watch_with_130() {
    use std::process::Stdio;
    let mut scenario = uyuni_testdata::scenarios::migration();
    for job in scenario.jobs.values_mut() {
        job.duration_ms = 0;
    }
    if let Some(job) = scenario.jobs.get_mut("image-check-server") {
        job.duration_ms = 8_000;
    }
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    let created = env.sim.job_created_channel("image-check-server");
    let child = env
        .kubectl()
        .env("UYUNI_ADMIN_PASSWORD", ADMIN_PASSWORD)
        .arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["-n", NS, "install", "srv.example.com"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    created
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the server image check starts");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let out = interrupt(child);
    assert_eq!(out.status.code(), Some(130), "{}", both(&out));
    let (_, stderr) = text(&out);
    let prefix = format!(
        "kubectl --kubeconfig {} --context uyuni-sim -n {NS}",
        env.kubeconfig().display()
    );
    assert!(
        stderr.contains("interrupted by SIGINT")
            && stderr.contains(&format!("{prefix} get jobs -l"))
            && stderr.contains(&format!(
                "run `{} install srv.example.com`",
                prefix.replacen("kubectl", "kubectl uyuni", 1)
            )),
        "{stderr}"
    );

    let mut watch = env
        .kubectl()
        .arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["-n", NS, "status", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // The first report printed: the watch runs.
    let mut stdout = watch.stdout.take().expect("piped");
    let mut first = [0u8; 1];
    std::io::Read::read_exact(&mut stdout, &mut first).expect("a report");
    let out = interrupt(watch);
    assert_eq!(out.status.code(), Some(130), "{}", both(&out));
    assert!(
        text(&out).1.contains("interrupted by SIGINT"),
        "{}",
        both(&out)
    );
}
