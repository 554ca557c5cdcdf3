//! End to end, through the real `kubectl` against the simulated cluster: runs that are stopped
//! by a signal, hints that carry the run's flags, and refusals before any write (an implicit
//! `default` namespace, a mismatched SSH key pair, a certificate with another's key or for
//! another host, claims no StorageClass can provision).

use crate::support;

use std::process::{Output, Stdio};
use std::time::Duration;

use support::{Env, NS, SOURCE, fixtures, name, quick_migration, ssh_flags, text};
use uyuni_testdata::{JobScript, SimConfig};

fn assert_nothing_written(env: &Env) {
    let writes: Vec<String> = env
        .sim
        .request_log()
        .iter()
        .filter(|r| r.write)
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "wrote before refusing: {writes:?}");
}

/// `kubectl uyuni --kubeconfig K --context uyuni-sim -n NS migrate SOURCE --prepare SSH…`: a
/// run that waits on its data-sync Job without asking, with every flag a hint must carry.
fn prepare_with_every_kube_flag(env: &Env) -> std::process::Command {
    let mut cmd = env.kubectl();
    cmd.arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args([
            "--context",
            "uyuni-sim",
            "-n",
            NS,
            "migrate",
            SOURCE,
            "--prepare",
        ])
        .args(ssh_flags());
    cmd
}

/// Runs a command line the tool printed (`kubectl …`, words without spaces or quotes) with
/// the test's kubectl.
fn run_printed(env: &Env, line: &str) -> Output {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"kubectl"), "{line}");
    env.kubectl()
        .args(&words[1..])
        .output()
        .expect("kubectl runs")
}

/// The text between `before` and the next backtick.
fn quoted_after<'a>(text: &'a str, before: &str) -> &'a str {
    let start = text
        .find(before)
        .unwrap_or_else(|| panic!("no {before:?} in:\n{text}"))
        + before.len();
    let len = text[start..].find('`').expect("closing backtick");
    &text[start..start + len]
}

/// Starts a migration whose data-sync Job runs long, sends `signal` once the Job exists, and
/// returns the run's output and the Job's name. The Job outlasts the run by a few seconds, so
/// that a re-run still finds it running and waits for it.
fn interrupted(signal: &str) -> (Env, Output, String) {
    let mut scenario = quick_migration();
    if let Some(job) = scenario.jobs.get_mut("data-sync") {
        job.duration_ms = 8_000;
    }
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    let created = env.sim.job_created_channel("data-sync");
    let child = prepare_with_every_kube_flag(&env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let job = created
        .recv_timeout(Duration::from_secs(60))
        .expect("the data-sync Job is created");
    // The run waits for the Job and follows its log: once it asked for the log, the run holds
    // the Job as started (what the interruption's message names). (The wait reads the Job from
    // the run's own watch of its Jobs, opened before: no request of its own says more.)
    let waiting = || {
        let log = env.sim.request_log();
        let created = log
            .iter()
            .rev()
            .find(|r| r.write && r.resource.as_deref() == Some("jobs"))
            .map(|r| r.seq);
        log.iter().any(|r| {
            r.resource.as_deref() == Some("pods/log")
                && r.name.as_deref().is_some_and(|n| n.starts_with(&job.name))
                && created.is_some_and(|c| r.seq > c)
        })
    };
    let start = std::time::Instant::now();
    while !waiting() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the run never followed the Job's log"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // kubectl execs its plugins, so the child's pid is the plugin's.
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .expect("kill runs");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    (env, out, job.name)
}

fn check_interrupted(signal: &str, code: i32) {
    let (env, out, job) = interrupted(signal);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!("interrupted by SIG{signal}"))
            && stderr.contains(&format!("Job {job} was already started and keeps running")),
        "{stderr}"
    );
    let prefix = format!(
        "kubectl --kubeconfig {} --context uyuni-sim -n {NS}",
        env.kubeconfig().display()
    );
    assert!(
        stderr.contains(&format!("{prefix} logs -f job/{job}"))
            && stderr.contains(&format!(
                "{prefix} get jobs -l {}",
                uyuni_core::labels::MANAGED_SELECTOR
            )),
        "the hints carry the run's flags:\n{stderr}"
    );
    let jobs = env.jobs_of("data-sync");
    assert_eq!(jobs.len(), 1, "the Job is left in place");
    assert_eq!(name(&jobs[0]), job);
    assert!(
        jobs[0]["status"]["succeeded"].is_null() && jobs[0]["status"]["failed"].is_null(),
        "the Job is still running: {}",
        jobs[0]["status"]
    );

    // The advice names the whole command line of the run (flags, resolved context and
    // namespace), and following it resumes: the same Job is waited for, none is started.
    let again = quoted_after(&stderr, "run `");
    let expected = format!(
        "{} migrate {SOURCE} --prepare {}",
        prefix.replacen("kubectl", "kubectl uyuni", 1),
        ssh_flags().join(" ")
    );
    assert_eq!(again, expected, "{stderr}");
    let mut quick = env.sim.scenario();
    if let Some(job) = quick.jobs.get_mut("data-sync") {
        job.duration_ms = 400;
    }
    env.sim.set_scenario(quick);
    let out = run_printed(&env, again);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr
            .lines()
            .next()
            .is_some_and(|l| l.contains(&format!("await Job job/{job}"))
                && l.contains("still running; waiting for it")),
        "the re-run first waits for the Job left running:\n{stderr}"
    );
    let jobs = env.jobs_of("data-sync");
    let first = jobs.iter().find(|j| name(j) == job).expect("the Job");
    assert_eq!(first["status"]["succeeded"], 1, "{}", first["status"]);
    // (A --prepare run then copies again to catch up, as each --prepare run does.)
}

#[test]
fn sigint_leaves_the_running_job_and_exits_130() {
    check_interrupted("INT", 130);
}

#[test]
fn sigterm_leaves_the_running_job_and_exits_143() {
    check_interrupted("TERM", 143);
}

#[test]
fn a_failed_jobs_hint_carries_kubeconfig_context_and_namespace() {
    let mut scenario = quick_migration();
    scenario.jobs.insert(
        "data-sync".into(),
        JobScript::fail(
            12,
            &["rsync error: error in rsync protocol data stream (code 12)"],
        ),
    );
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    let out = prepare_with_every_kube_flag(&env)
        .output()
        .expect("kubectl runs");
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    let job = name(&env.jobs_of("data-sync")[0]).to_owned();
    assert!(
        stderr.contains(&format!(
            "`kubectl --kubeconfig {} --context uyuni-sim -n {NS} logs job/{job}`",
            env.kubeconfig().display()
        )),
        "{stderr}"
    );
}

/// `kubectl uyuni --kubeconfig K [EXTRA…] migrate SOURCE FLAGS…`, with no `-n` unless given.
fn migrate_without_namespace(env: &Env, extra: &[&str]) -> Output {
    env.kubectl()
        .arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(extra)
        .args(["migrate", SOURCE, "--yes"])
        .args(ssh_flags())
        .output()
        .expect("kubectl runs")
}

#[test]
fn an_implicit_default_namespace_is_refused_and_an_explicit_one_is_used() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        namespace: None,
        ..SimConfig::default()
    });
    let out = migrate_without_namespace(&env, &[]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("-n NAMESPACE") && stderr.contains("-n uyuni"),
        "{stderr}"
    );
    assert_nothing_written(&env);

    let out = migrate_without_namespace(&env, &["-n", "default"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        env.sim
            .get("v1", "PersistentVolumeClaim", Some("default"), "var-pgsql")
            .is_some()
    );
}

#[test]
fn a_public_key_of_another_pair_is_refused_before_any_write() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let other = dir.path().join("other");
    let made = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&other)
        .status()
        .expect("ssh-keygen runs");
    assert!(made.success());
    let other_pub = other.with_extension("pub").display().to_string();
    let mut flags = ssh_flags();
    let at = flags
        .iter()
        .position(|f| f == "--ssh-key-public")
        .expect("flag");
    flags[at + 1] = other_pub.clone();
    let out = env.migrate(&flags);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    let private = fixtures().join("id_ed25519").display().to_string();
    assert!(
        stderr.contains(&format!("--ssh-key-private {private}"))
            && stderr.contains(&format!("--ssh-key-public {other_pub}"))
            && stderr.contains("not a key pair"),
        "{stderr}"
    );
    assert_nothing_written(&env);
}

/// `--ssl-server-cert`, `--ssl-server-key`, `--ssl-ca-root` in `dir`: the certificate of
/// `cert` (a chain for `names`) with the key of `key`.
fn certificate_flags(
    dir: &std::path::Path,
    cert: &uyuni_testdata::certs::Chain,
    key: &uyuni_testdata::certs::Chain,
) -> Vec<String> {
    let write = |name: &str, content: &str| {
        let p = dir.join(name);
        std::fs::write(&p, content).expect("write");
        p.display().to_string()
    };
    vec![
        "--ssl-server-cert".to_owned(),
        write("server.crt", &cert.cert),
        "--ssl-server-key".to_owned(),
        write("server.key", &key.key),
        "--ssl-ca-root".to_owned(),
        write("ca.crt", &cert.root),
    ]
}

fn issued(names: &[&str]) -> uyuni_testdata::certs::Chain {
    use uyuni_testdata::certs::{KeyKind, chain};
    chain(names, KeyKind::EcP256, KeyKind::EcP256, false).expect("certificates")
}

#[test]
fn a_certificate_with_the_key_of_another_is_refused_before_any_write() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let (mine, other) = (issued(&[SOURCE]), issued(&[SOURCE]));
    let tls = certificate_flags(dir.path(), &mine, &other);
    let out = env.migrate(&[ssh_flags(), tls.clone()].concat());
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "the key in --ssl-server-key {} does not belong to the certificate in --ssl-server-cert {} (its public key differs)",
            tls[3], tls[1]
        )),
        "{stderr}"
    );
    let body = other.key.lines().nth(1).expect("key body");
    assert!(!stderr.contains(body) && !stdout.contains(body));
    assert_nothing_written(&env);
}

#[test]
fn a_certificate_for_another_host_is_refused_before_any_write() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let other_host = issued(&["other.example.com"]);
    let tls = certificate_flags(dir.path(), &other_host, &other_host);
    let out = env.migrate(&[ssh_flags(), tls.clone()].concat());
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!(
            "the certificate in --ssl-server-cert {} names other.example.com, not {SOURCE}",
            tls[1]
        )) && stderr.contains("Nothing was written"),
        "{stderr}"
    );
    assert_nothing_written(&env);
}

#[test]
fn without_a_default_storage_class_the_run_is_refused_naming_the_classes() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        default_storage_class: false,
        ..SimConfig::default()
    });
    let out = env.migrate(&ssh_flags());
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("no default StorageClass")
            && stderr.contains("--volumes-class")
            && stderr.contains("local-path"),
        "{stderr}"
    );
    assert_nothing_written(&env);

    let mut flags = ssh_flags();
    flags.extend(["--volumes-class".to_owned(), "fast".to_owned()]);
    let out = env.migrate(&flags);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("StorageClass fast") && stderr.contains("local-path"),
        "{stderr}"
    );
    assert_nothing_written(&env);
}

#[test]
fn a_user_who_may_not_list_storage_classes_is_warned_not_blocked() {
    let faults = uyuni_testdata::Faults {
        errors: vec![uyuni_testdata::ErrorFault {
            target: uyuni_testdata::FaultTarget {
                verb: Some(uyuni_testdata::Verb::List),
                resource: Some("storageclasses".into()),
                name: None,
            },
            rate: 1.0,
            status: 403,
            retry_after_seconds: 0,
        }],
        ..Default::default()
    };
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        faults,
        ..SimConfig::default()
    });
    let out = env.migrate(&ssh_flags());
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("warning: StorageClasses could not be listed"),
        "{stderr}"
    );
    assert!(
        env.sim
            .request_log()
            .iter()
            .any(|r| r.resource.as_deref() == Some("storageclasses") && r.status == 403),
        "the fault was hit"
    );
}

/// The flags `kubectl uyuni` hints carry in these tests: the kubeconfig, and the context the
/// connection resolved although none was given.
fn hint_prefix(env: &Env) -> String {
    format!(
        "--kubeconfig {} --context uyuni-sim -n {NS}",
        env.kubeconfig().display()
    )
}

#[test]
fn a_denied_permission_is_refused_before_any_write_naming_the_check() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        denied_access: vec![("create".into(), "jobs".into())],
        ..SimConfig::default()
    });
    let out = env.migrate(&ssh_flags());
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("create jobs.batch in namespace uyuni")
            && stderr.contains(&format!(
                "`kubectl {} auth can-i create jobs.batch`",
                hint_prefix(&env)
            ))
            && stderr.contains("Nothing was written")
            && !stderr.contains("secrets in namespace"),
        "{stderr}"
    );
    assert_nothing_written(&env);
    assert!(
        env.sim
            .request_log()
            .iter()
            .any(|r| r.resource.as_deref() == Some("selfsubjectaccessreviews")),
        "asked with SelfSubjectAccessReviews"
    );

    // The dry run lists it among the inputs.
    let mut flags = ssh_flags();
    flags.push("--dry-run".into());
    let out = env.migrate(&flags);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("Permissions"))
        .unwrap_or_else(|| panic!("no Permissions input:\n{stdout}"));
    assert!(
        line.contains("MISSING") && line.contains("create jobs.batch"),
        "{line}"
    );
}

#[test]
fn a_denied_read_the_run_waits_with_is_refused_before_any_write() {
    // Without them the run would create its Jobs, stop the source, and only then fail to
    // follow the data sync.
    for (verb, resource, described, check) in [
        (
            "list",
            "pods",
            "list pods in namespace uyuni",
            "auth can-i list pods",
        ),
        (
            "get",
            "pods/log",
            "get pods/log in namespace uyuni",
            "auth can-i get pods --subresource=log",
        ),
        // The renewal of the namespace's Lease, one writer at a time.
        (
            "update",
            "leases",
            "update leases.coordination.k8s.io in namespace uyuni",
            "auth can-i update leases.coordination.k8s.io",
        ),
    ] {
        let env = Env::new(SimConfig {
            scenario: quick_migration(),
            denied_access: vec![(verb.into(), resource.into())],
            ..SimConfig::default()
        });
        let out = env.migrate(&ssh_flags());
        let (_, stderr) = text(&out);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "{described} (`kubectl {} {check}`)",
                hint_prefix(&env)
            )) && stderr.contains("Nothing was written"),
            "{stderr}"
        );
        assert_nothing_written(&env);

        // The dry run shows it as the missing part of the Permissions input.
        let mut flags = ssh_flags();
        flags.push("--dry-run".into());
        let out = env.migrate(&flags);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stderr}");
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with("Permissions"))
            .unwrap_or_else(|| panic!("no Permissions input:\n{stdout}"));
        assert!(
            line.contains("MISSING") && line.contains(described),
            "{line}"
        );
    }
}

#[test]
fn an_allowed_run_lists_its_permissions_as_allowed_in_the_dry_run() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    let mut flags = ssh_flags();
    flags.push("--dry-run".into());
    let out = env.migrate(&flags);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout
            .lines()
            .any(|l| l.trim_start().starts_with("Permissions")
                && l.contains("allowed")
                && l.contains("to read")),
        "{stdout}"
    );
}

fn labelled_namespace(labels: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NS, "labels": labels},
    })
}

#[test]
fn an_enforced_baseline_namespace_is_refused_before_any_write() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        objects: vec![labelled_namespace(
            serde_json::json!({"pod-security.kubernetes.io/enforce": "baseline"}),
        )],
        ..SimConfig::default()
    });
    let out = env.migrate(&ssh_flags());
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("pod-security.kubernetes.io/enforce=baseline")
            && stderr.contains("SYS_ADMIN")
            && stderr.contains(&format!(
                "`kubectl --kubeconfig {} --context uyuni-sim label namespace {NS} pod-security.kubernetes.io/enforce=privileged --overwrite`",
                env.kubeconfig().display()
            )),
        "{stderr}"
    );
    assert_nothing_written(&env);
}

#[test]
fn a_warn_level_namespace_only_warns() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        objects: vec![labelled_namespace(
            serde_json::json!({"pod-security.kubernetes.io/warn": "restricted"}),
        )],
        ..SimConfig::default()
    });
    let mut flags = ssh_flags();
    flags.push("--prepare".into());
    let out = env.migrate(&flags);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(
        stderr.contains("warning:")
            && stderr.contains("pod-security.kubernetes.io/warn=restricted"),
        "{stderr}"
    );
}

#[test]
fn a_run_naming_another_source_than_the_copy_is_refused() {
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    let mut flags = ssh_flags();
    flags.push("--prepare".into());
    let out = env.migrate(&flags);
    assert!(out.status.success(), "{}", text(&out).1);
    let job = name(&env.jobs_of("data-sync")[0]).to_owned();
    assert_eq!(
        env.jobs_of("data-sync")[0]["metadata"]["annotations"]["kubectl-uyuni.io/source"],
        SOURCE
    );

    for prepare in [true, false] {
        env.sim.clear_request_log();
        let mut args = vec!["migrate", "other.example.com", "--yes"];
        if prepare {
            args.push("--prepare");
        }
        let out = env.uyuni(&args);
        let (_, stderr) = text(&out);
        assert!(!out.status.success());
        assert!(
            stderr.contains(&format!("hold a copy of {SOURCE} (data-sync Job {job}"))
                && stderr.contains("this run names other.example.com")
                && stderr.contains(&format!(
                    "`kubectl uyuni {} migrate {SOURCE}",
                    hint_prefix(&env)
                ))
                && stderr.contains("Nothing was written"),
            "{stderr}"
        );
        assert_nothing_written(&env);
    }
}

/// `python3 pty_answer.py '[y/N]' -- kubectl uyuni … migrate SOURCE SSH…` without --yes: the
/// run on a pseudo-terminal, answered with `answer` (`y`, `n` or `EOF`). Returns the exit
/// code, the output on the terminal, and the writes made after the question was shown.
fn answered(answer: &str) -> (Env, Option<i32>, String, Vec<String>) {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    });
    let mut kubectl = env.kubectl();
    kubectl
        .arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["-n", NS, "migrate", SOURCE])
        .args(ssh_flags());
    let helper =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/pty_answer.py");
    let mut cmd = std::process::Command::new("python3");
    cmd.arg(helper)
        .arg("[y/N]")
        .arg("--")
        .arg(kubectl.get_program())
        .args(kubectl.get_args());
    for (key, value) in kubectl.get_envs() {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs");
    let mut reader = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    reader.read_line(&mut line).expect("read");
    assert_eq!(line.trim(), "PROMPTED", "the question was asked");
    let before = env.sim.request_log().len();
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(stdin, "{answer}").expect("answer");
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).expect("read");
    let status = child.wait().expect("wait");
    // Every write after the answer but the release of the run's own Lease (one writer at a
    // time), which ends every run that took it, and the end written into the run's operation
    // record (`uyuni_core::operation`: bookkeeping, no step).
    let after: Vec<String> = env.sim.request_log()[before..]
        .iter()
        .filter(|r| r.write && !(r.method == "DELETE" && r.resource.as_deref() == Some("leases")))
        .filter(|r| !r.path.contains("/configmaps/uyuni-operation-"))
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    (env, status.code(), rest, after)
}

#[test]
fn on_a_terminal_no_stops_nothing_and_says_how_to_go_on() {
    let (env, code, output, writes) = answered("n");
    assert_eq!(code, Some(1), "{output}");
    assert!(writes.is_empty(), "wrote after the question: {writes:?}");
    assert!(
        output.contains("Stop the services of uyuni.example.com now? [y/N]")
            && output.contains("not confirmed: the services of uyuni.example.com keep running"),
        "{output}"
    );
    // The advice repeats the run: its connection and SSH flags, no --yes.
    let private = fixtures().join("id_ed25519").display().to_string();
    assert!(
        output.contains(&format!(
            "`kubectl uyuni {} migrate {SOURCE} --ssh-key-private {private}",
            hint_prefix(&env)
        )),
        "{output}"
    );
    assert!(env.syncs_of_mode("final").is_empty(), "no final sync");
}

#[test]
fn on_a_terminal_end_of_file_is_a_no() {
    let (env, code, output, writes) = answered("EOF");
    // Ctrl-D ends the question by itself (no waiting on), as a no.
    assert_eq!(code, Some(1), "{output}");
    assert!(writes.is_empty(), "wrote after the question: {writes:?}");
    assert!(output.contains("not confirmed"), "{output}");
    assert!(env.syncs_of_mode("final").is_empty());
}

#[test]
fn on_a_terminal_yes_runs_the_final_sync() {
    let (env, code, output, writes) = answered("y");
    assert_eq!(code, Some(0), "{output}");
    assert!(!writes.is_empty());
    assert_eq!(env.syncs_of_mode("final").len(), 1, "{output}");
}

#[test]
fn hints_follow_the_context_each_run_resolved_after_use_context() {
    let mut scenario = quick_migration();
    scenario.jobs.insert(
        "data-sync".into(),
        JobScript::fail(12, &["rsync error: connection unexpectedly closed"]),
    );
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    // A kubeconfig of our own with a second context to the same cluster.
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config");
    std::fs::copy(env.kubeconfig(), &config).expect("copy");
    let kubectl = |args: &[&str]| {
        let out = env
            .kubectl()
            .arg("--kubeconfig")
            .arg(&config)
            .args(args)
            .output()
            .expect("kubectl runs");
        assert!(out.status.success(), "kubectl {args:?}: {:?}", text(&out));
    };
    kubectl(&[
        "config",
        "set-context",
        "second",
        "--cluster=uyuni-sim",
        "--user=uyuni-sim-admin",
    ]);
    for context in ["second", "uyuni-sim"] {
        kubectl(&["config", "use-context", context]);
        let out = env
            .kubectl()
            .arg("uyuni")
            .arg("--kubeconfig")
            .arg(&config)
            .args(["-n", NS, "migrate", SOURCE, "--prepare"])
            .args(ssh_flags())
            .output()
            .expect("kubectl runs");
        let (_, stderr) = text(&out);
        assert!(!out.status.success(), "{stderr}");
        let job = env
            .jobs_of("data-sync")
            .iter()
            .map(|j| name(j).to_owned())
            .max()
            .expect("a Job");
        // The context this run resolved from the current context, not the one of the
        // earlier run, nor none (a pasted hint would follow a later use-context).
        assert!(
            stderr.contains(&format!(
                "`kubectl --kubeconfig {} --context {context} -n {NS} logs job/{job}`",
                config.display()
            )),
            "{stderr}"
        );
    }
}

/// Ctrl-C while the final copy runs: the message says that the source's services are stopped
/// and stay so, with the two ways on (resume, or start them on the source).
#[test]
fn an_interrupted_final_copy_says_the_source_is_stopped() {
    let mut scenario = quick_migration();
    if let Some(job) = scenario.jobs.get_mut("data-sync") {
        job.duration_ms = 6_000;
    }
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    let created = env.sim.job_created_channel("data-sync");
    let child = env
        .kubectl()
        .arg("uyuni")
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["-n", NS, "migrate", SOURCE, "--yes"])
        .args(ssh_flags())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // The run copies while the source serves first, then makes the final copy.
    let final_job = loop {
        let job = created
            .recv_timeout(Duration::from_secs(90))
            .expect("a data-sync Job is created");
        if !job.name.contains("-prepare-") {
            break job;
        }
    };
    let following = || {
        env.sim.request_log().iter().any(|r| {
            r.resource.as_deref() == Some("pods/log")
                && r.name
                    .as_deref()
                    .is_some_and(|n| n.starts_with(&final_job.name))
        })
    };
    let start = std::time::Instant::now();
    while !following() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the run never followed the final copy's log"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "The services of {SOURCE} are stopped: the final copy stopped them"
        )) && stderr.contains("spacewalk-service start"),
        "{stderr}"
    );
}

/// Ctrl-C after the final copy, while the outage goes on (the database fix-up here): the
/// message says that the source's services are stopped and the two ways on, and so does the
/// next run's, interrupted again, whose copy was an earlier run's (issue 38).
#[test]
fn an_interruption_after_the_final_copy_says_the_source_is_still_stopped() {
    let mut scenario = quick_migration();
    if let Some(job) = scenario.jobs.get_mut("db-fixup") {
        job.duration_ms = 12_000;
    }
    let env = Env::new(SimConfig {
        scenario,
        ..SimConfig::default()
    });
    let created = env.sim.job_created_channel("db-fixup");
    let run = || {
        env.kubectl()
            .arg("uyuni")
            .arg("--kubeconfig")
            .arg(env.kubeconfig())
            .args(["-n", NS, "migrate", SOURCE, "--yes"])
            .args(ssh_flags())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    let following = |job: &str, after: u64| {
        env.sim.request_log().iter().any(|r| {
            r.seq > after
                && r.resource.as_deref() == Some("pods/log")
                && r.name.as_deref().is_some_and(|n| n.starts_with(job))
        })
    };
    let interrupt = |child: std::process::Child, job: &str, after: u64| {
        let start = std::time::Instant::now();
        while !following(job, after) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "the run never followed {job}'s log"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let status = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        let out = child.wait_with_output().expect("wait");
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(130), "{stderr}");
        assert!(
            stderr.contains(&format!("Job {job} was already started and keeps running"))
                && stderr.contains(&format!(
                    "The services of {SOURCE} are stopped: the final copy stopped them, and they stay stopped until the migrated server is ready"
                ))
                && stderr.contains("spacewalk-service start"),
            "{stderr}"
        );
    };
    let child = run();
    let fixup = created
        .recv_timeout(Duration::from_secs(90))
        .expect("a db-fixup Job is created");
    interrupt(child, &fixup.name, 0);
    // Again, while the fix-up still runs: this run waits for it.
    let last = env.sim.request_log().last().map_or(0, |r| r.seq);
    interrupt(run(), &fixup.name, last);
}
