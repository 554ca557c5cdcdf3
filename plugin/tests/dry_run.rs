//! `--dry-run` in every output format, through the real kubectl, against the simulated cluster.

use crate::support;

use serde_json::Value;
use support::{Env, NS, SOURCE, private_key_lines, quick_migration, ssh_flags, stderr, stdout};
use uyuni_testdata::{ErrorFault, FaultTarget, Faults, SimConfig, Verb};

/// What `du -s -b` prints on the source, as the stand-in ssh answers it.
const DU: &str = "4096\\t/var/lib/cobbler\\n7340032\\t/root\\n60000000000\\t/var/lib/pgsql/data\\n";

fn env() -> Env {
    Env::new(SimConfig {
        scenario: quick_migration(),
        ..SimConfig::default()
    })
    .with_ssh_stub(DU)
}

/// `kubectl uyuni … migrate SOURCE --yes --ssh-… EXTRA…` (no terminal: the outage is
/// confirmed with the flag)
fn migrate(env: &Env, extra: &[&str]) -> std::process::Output {
    let mut all = vec!["migrate", SOURCE, "--yes"];
    all.extend_from_slice(extra);
    let flags = ssh_flags();
    all.extend(flags.iter().map(String::as_str));
    env.uyuni(&all)
}

fn assert_no_key(out: &std::process::Output) {
    for line in private_key_lines() {
        assert!(
            !stdout(out).contains(&line) && !stderr(out).contains(&line),
            "private key leaked"
        );
    }
}

#[test]
fn yaml_output_is_a_stream_kubectl_applies_with_a_server_dry_run() {
    let env = env();
    env.create_namespace();
    let out = migrate(&env, &["--dry-run", "-o", "yaml"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_no_key(&out);
    let yaml = stdout(&out);
    assert!(yaml.contains("# Secret data left out"));
    let file = env.cache.path().join("manifests.yaml");
    std::fs::write(&file, &yaml).expect("write");
    env.sim.clear_request_log();
    let apply = env
        .kubectl()
        .arg("--kubeconfig")
        .arg(env.kubeconfig())
        .args(["apply", "--dry-run=server", "-f"])
        .arg(&file)
        .output()
        .expect("kubectl apply");
    assert!(
        apply.status.success(),
        "kubectl apply refused the stream:\n{}\n{}",
        stdout(&apply),
        stderr(&apply)
    );
    let applied = stdout(&apply);
    assert!(
        applied.contains("persistentvolumeclaim/var-pgsql")
            && applied.contains("job.batch/uyuni-data-sync-"),
        "{applied}"
    );
    assert!(
        env.sim
            .request_log()
            .iter()
            .all(|r| !r.is_successful_write() || r.dry_run)
    );
}

#[test]
fn json_output_is_the_plan_as_data() {
    let env = env();
    let out = migrate(&env, &["--dry-run", "-o", "json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_no_key(&out);
    let plan: Value = serde_json::from_str(&stdout(&out)).expect("valid JSON");
    assert_eq!(plan["kind"], "Plan");
    assert_eq!(plan["namespace"], NS);
    assert!(
        plan["summary"]["jobs"].as_u64() >= Some(1),
        "{}",
        plan["summary"]
    );
    let steps = plan["steps"].as_array().expect("steps");
    assert_eq!(steps[0]["id"], "namespace");
    assert_eq!(steps[0]["op"], "create");
    assert!(
        steps
            .iter()
            .any(|s| s["id"] == "data-sync" && s["op"] == "run-job")
    );
    assert!(
        steps
            .iter()
            .all(|s| s["target"]["kind"].is_string() && s["reason"].is_string())
    );
    let volumes = plan["dataPlane"]["volumes"].as_array().expect("volumes");
    let pgsql = volumes
        .iter()
        .find(|v| v["claim"] == "var-pgsql")
        .expect("database volume");
    assert_eq!(pgsql["sourceBytes"].as_u64(), Some(60_000_000_000));
    assert_eq!(
        pgsql["tooSmall"], true,
        "60 GB do not fit a 50Gi claim: {pgsql}"
    );
}

#[test]
fn human_output_shows_the_data_plane_and_warns_about_small_volumes() {
    let env = env();
    let out = migrate(&env, &["--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("Data sync: copies 26 volumes from uyuni.example.com"),
        "{text}"
    );
    assert!(text.contains("/var/lib/pgsql/data"));
    assert!(text.contains("7.0 MiB on the source"), "{text}");
    assert!(
        stderr(&out).contains("volume root requests 1Mi but /root holds 7.0 MiB"),
        "{}",
        stderr(&out)
    );
    assert!(!text.contains("\u{1b}["), "no colours with NO_COLOR");
    let coloured = migrate(&env, &["--dry-run", "--color", "always"]);
    assert!(
        stdout(&coloured).contains("\u{1b}[32m+"),
        "colours on request"
    );
}

/// The summary and the outage come first, before the step list and the diffs; --summary
/// leaves the diffs out.
#[test]
fn the_summary_and_the_outage_come_first_and_summary_alone_has_no_diffs() {
    let env = env();
    let full = stdout(&migrate(&env, &["--dry-run"]));
    let at = |text: &str, what: &str| {
        text.find(what)
            .unwrap_or_else(|| panic!("{what:?} missing from:\n{text}"))
    };
    let summary = at(&full, "Plan: ");
    let outage = at(&full, "Outage");
    let first_step = at(&full, "  1/");
    let diffs = at(&full, "--- ");
    assert!(
        summary < outage && outage < first_step && first_step < diffs,
        "{full}"
    );
    assert!(
        summary < 300,
        "the summary is not on the first lines:\n{full}"
    );
    let short = stdout(&migrate(&env, &["--dry-run", "--summary"]));
    assert!(
        short.contains("Plan: ") && short.contains("  1/"),
        "{short}"
    );
    assert!(!short.contains("--- "), "diffs with --summary:\n{short}");
    assert!(
        short.len() * 4 < full.len(),
        "{} vs {}",
        short.len(),
        full.len()
    );
}

#[test]
fn exit_code_follows_kubectl_diff() {
    let env = env();
    assert_eq!(
        migrate(&env, &["--dry-run", "--exit-code"]).status.code(),
        Some(1)
    );
    let run = migrate(&env, &[]);
    assert!(run.status.success(), "{}", stderr(&run));
    let nothing = env.uyuni(&["migrate", SOURCE, "--dry-run", "--exit-code"]);
    assert_eq!(nothing.status.code(), Some(0), "{}", stderr(&nothing));
    let broken = env.uyuni(&["migrate", "not-a-fqdn", "--dry-run", "--exit-code"]);
    assert_eq!(broken.status.code(), Some(2), "{}", stderr(&broken));
}

#[test]
fn show_secrets_reveals_values_only_when_asked_and_warns() {
    let env = env();
    let masked = migrate(&env, &["--dry-run"]);
    assert_no_key(&masked);
    let shown = migrate(&env, &["--dry-run", "--show-secrets"]);
    assert!(shown.status.success());
    assert!(stderr(&shown).contains("--show-secrets"));
    let key_line = private_key_lines().into_iter().next().expect("a key line");
    assert!(
        stdout(&shown).contains(&key_line),
        "the key is shown when asked"
    );
}

#[test]
fn server_dry_run_checks_each_write_and_reports_rejections() {
    let env = env();
    // No namespace yet: the namespaced objects can only be checked client-side.
    let out = migrate(&env, &["--dry-run=server"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("namespace/uyuni") && text.contains("accepted"),
        "{text}"
    );
    assert!(
        text.contains("checked client-side only: namespace uyuni does not exist yet"),
        "{text}"
    );

    env.create_namespace();
    env.sim.set_faults(Faults {
        errors: vec![ErrorFault {
            target: FaultTarget::new(
                Some(Verb::Patch),
                Some("persistentvolumeclaims"),
                Some("var-pgsql"),
            ),
            rate: 1.0,
            status: 422,
            retry_after_seconds: 1,
        }],
        ..Faults::default()
    });
    env.sim.clear_request_log();
    let out = migrate(&env, &["--dry-run=server"]);
    assert!(!out.status.success());
    assert!(
        stdout(&out).contains("persistentvolumeclaim/var-pgsql")
            && stdout(&out).contains("REJECTED"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("would refuse 1 object"),
        "{}",
        stderr(&out)
    );
    let log = env.sim.request_log();
    assert!(
        log.iter().any(|r| r.dry_run),
        "server dry-run requests were sent"
    );
    assert!(
        log.iter().all(|r| !r.is_successful_write() || r.dry_run),
        "nothing was written"
    );
}

/// Job names carry the run's timestamp: compare the step, not the second.
fn without_run_id(target: &str) -> String {
    let digits = target.rsplit('-').next().unwrap_or_default();
    if digits.len() == 14 && digits.chars().all(|c| c.is_ascii_digit()) {
        target[..target.len() - 15].to_owned()
    } else {
        target.to_owned()
    }
}

/// The numbered lines of a printed step list, `  3/40 + create    kind/name  …` (the
/// unchanged steps have no number), as (number, total, target).
fn listed_numbers(text: &str) -> Vec<(usize, usize, String)> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let (k, n) = words.next()?.split_once('/')?;
            let target = words.find(|w| w.contains('/'))?;
            Some((k.parse().ok()?, n.parse().ok()?, without_run_id(target)))
        })
        .collect()
}

/// The run's progress lines, `[   1.2s] step 3/40: + create    kind/name  …`, as (number,
/// total, target, whether it was found done).
fn run_numbers(stderr: &str) -> Vec<(usize, usize, String, bool)> {
    stderr
        .lines()
        .filter_map(|l| l.split_once("] step ").map(|(_, rest)| rest))
        .filter_map(|rest| {
            let (numbers, line) = rest.split_once(": ")?;
            let (k, n) = numbers.split_once('/')?;
            let target = line.split_whitespace().find(|w| w.contains('/'))?;
            Some((
                k.parse().ok()?,
                n.parse().ok()?,
                without_run_id(target),
                line.contains("done already when its turn came"),
            ))
        })
        .collect()
}

#[test]
fn the_preview_lists_the_steps_the_real_run_carries_out_in_order() {
    let env = env();
    // The namespace exists: the list's first line is a step left as it is, unnumbered.
    env.create_namespace();
    let human = migrate(&env, &["--dry-run", "--summary"]);
    assert!(human.status.success(), "{}", stderr(&human));
    let listed = listed_numbers(&stdout(&human));
    assert!(
        stdout(&human).contains("= unchanged namespace/"),
        "{}",
        stdout(&human)
    );
    let preview = migrate(&env, &["--dry-run", "-o", "json"]);
    let plan: Value = serde_json::from_str(&stdout(&preview)).expect("json");
    let execution = plan["execution"].as_array().expect("execution");
    let target = |s: &Value| without_run_id(s["target"].as_str().unwrap_or_default());
    // Waits depend on timing: a real run skips the wait for something that became ready while
    // it worked; the writes must match exactly, and every wait it did must have been previewed.
    let planned: Vec<String> = execution
        .iter()
        .filter(|s| s["op"] != "wait")
        .map(target)
        .collect();
    let planned_waits: Vec<String> = execution
        .iter()
        .filter(|s| s["op"] == "wait")
        .map(target)
        .collect();
    let run = migrate(&env, &[]);
    assert!(run.status.success(), "{}", stderr(&run));
    // Every step the dry run numbered is reported by the run under the same number, out of
    // the same total, in order, the last as N/N (a wait the cluster finished first as done).
    let numbers = run_numbers(&stderr(&run));
    let n = execution.len();
    assert_eq!(listed.len(), n, "{}", stdout(&human));
    assert_eq!(
        listed,
        numbers
            .iter()
            .map(|(k, total, target, _)| (*k, *total, target.clone()))
            .collect::<Vec<_>>(),
        "the dry run's numbers, then the run's"
    );
    assert_eq!(numbers.last().map(|s| (s.0, s.1)), Some((n, n)));
    // Progress lines: `[   1.2s] step 3/40: + create    configmap/uyuni-migration-ssh  …`
    let steps: Vec<(bool, String)> = stderr(&run)
        .lines()
        .filter_map(|l| l.split_once("] step ").map(|(_, rest)| rest))
        .filter(|rest| !rest.contains("done already when its turn came"))
        .filter_map(|rest| {
            let target = rest
                .split_whitespace()
                .find(|w| w.contains('/') && !w.ends_with(':'))?;
            Some((rest.contains("… wait"), without_run_id(target)))
        })
        .collect();
    let executed: Vec<String> = steps
        .iter()
        .filter(|(wait, _)| !wait)
        .map(|(_, t)| t.clone())
        .collect();
    assert_eq!(planned, executed);
    for (_, waited) in steps.iter().filter(|(wait, _)| *wait) {
        assert!(
            planned_waits.contains(waited),
            "{waited} was waited for but not previewed"
        );
    }
}

/// The confinement flags reach the server Deployment; the default is the chart's.
#[test]
fn the_server_confinement_flags_reach_the_server_deployment() {
    let env = env();
    let server_security = |extra: &[&str]| {
        let mut args = vec!["--dry-run", "-o", "yaml"];
        args.extend_from_slice(extra);
        let out = migrate(&env, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        let yaml = stdout(&out);
        yaml.split("\n---")
            .find(|doc| {
                doc.contains("kind: Deployment\nmetadata:")
                    && doc.contains("    app.kubernetes.io/component: server\n")
            })
            .expect("the server Deployment")
            .to_owned()
    };
    let plain = server_security(&[]);
    assert!(plain.contains("- SYS_ADMIN"), "{plain}");
    assert!(!plain.contains("privileged: true"), "{plain}");
    let privileged = server_security(&["--server-privileged"]);
    assert!(privileged.contains("privileged: true"), "{privileged}");
    let superp = server_security(&["--server-super-privileged"]);
    assert!(
        superp.contains("type: spc_t") && superp.contains("type: Unconfined"),
        "{superp}"
    );
    let out = migrate(
        &env,
        &[
            "--dry-run",
            "--server-super-privileged",
            "--server-selinux-type",
            "x_t",
        ],
    );
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--server-selinux-type"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn compress_reaches_the_data_sync_script_and_is_off_by_default() {
    let env = env();
    // The script reads COMPRESS from the data-sync container's environment; one value per
    // data-sync Job of the preview.
    let compress_values = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["--dry-run", "-o", "yaml"];
        args.extend_from_slice(extra);
        let out = migrate(&env, &args);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        lines
            .windows(2)
            .filter(|w| w[0] == "- name: COMPRESS")
            .map(|w| w[1].to_owned())
            .collect()
    };
    let plain = compress_values(&[]);
    assert!(!plain.is_empty(), "the data-sync Job sets COMPRESS");
    assert!(plain.iter().all(|l| l == "value: \"false\""), "{plain:?}");
    let compressed = compress_values(&["--compress"]);
    assert!(!compressed.is_empty());
    assert!(
        compressed.iter().all(|l| l == "value: \"true\""),
        "{compressed:?}"
    );
}

/// `kubectl uyuni -n uyuni ARGS` on `env`, with install's admin password in the environment.
fn uyuni(env: &Env, args: &[&str]) -> std::process::Output {
    env.uyuni_as_admin("install-admin-Pa55", args)
}

/// The same for `install` and `stop`: each dry run's numbers are the ones its run shows, to N/N.
#[test]
fn install_and_stop_number_their_steps_as_their_dry_runs_do() {
    let env = Env::quick_jobs();
    let uyuni = |args: &[&str]| uyuni(&env, args);
    for command in [
        &["install", "server.example.com"][..],
        &["stop", "--yes"][..],
    ] {
        let dry = uyuni(&[command, &["--dry-run"]].concat());
        assert!(dry.status.success(), "{}", stderr(&dry));
        let listed = listed_numbers(&stdout(&dry));
        assert!(!listed.is_empty(), "{}", stdout(&dry));
        let run = uyuni(command);
        assert!(run.status.success(), "{}", stderr(&run));
        let numbers: Vec<(usize, usize, String)> = run_numbers(&stderr(&run))
            .into_iter()
            .map(|(k, n, target, _)| (k, n, target))
            .collect();
        assert_eq!(
            listed, numbers,
            "{command:?}: the dry run's numbers, then the run's"
        );
        let n = listed.len();
        assert_eq!(
            numbers.last().map(|s| (s.0, s.1)),
            Some((n, n)),
            "{command:?}"
        );
    }
}

/// Sizes have bounds per volume, named in the refusal, and a refused value is a usage error
/// (exit 2) with nothing written: the database at least 1Gi, every other volume at least 1Mi,
/// none above what Kubernetes can request (issue 38).
#[test]
fn volume_sizes_out_of_bounds_are_usage_errors_naming_the_volume() {
    let env = env();
    for (flags, expected) in [
        (
            &["--volumes-database-size", "5"][..],
            "the database volume's size \"5\" is too small for PostgreSQL with the Uyuni schemas: give at least 1Gi",
        ),
        (
            &["--volumes-packages-size", "5"][..],
            "--volumes-packages-size: \"5\" (5 bytes) is too small for volume var-spacewalk (/var/spacewalk): give at least 1Mi",
        ),
        (
            &["--volume-size", "srv-www=999999999Ei"][..],
            "--volume-size: \"999999999Ei\" is larger than any volume Kubernetes can request",
        ),
    ] {
        env.sim.clear_request_log();
        let mut all = vec!["--dry-run"];
        all.extend_from_slice(flags);
        let out = migrate(&env, &all);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with(&format!("error: {expected}")),
            "{flags:?}: {}",
            stderr(&out)
        );
        let writes: Vec<_> = env
            .sim
            .request_log()
            .into_iter()
            .filter(|r| r.is_successful_write())
            .collect();
        assert!(writes.is_empty(), "{flags:?} wrote: {writes:?}");
    }
}

/// A known_hosts file that is empty, or lacks the source, is refused before anything is
/// written, as a usage error (exit 2), with the next step naming the file given: the scan to
/// append to it and the fingerprint check (issue 38).
#[test]
fn a_known_hosts_file_without_the_source_says_how_to_add_it() {
    let env = env();
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, content) in [
        ("empty known_hosts", ""),
        (
            "other_hosts",
            "other.example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5\n",
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, content).expect("write");
        let quoted = if name.contains(' ') {
            format!("'{}'", path.display())
        } else {
            path.display().to_string()
        };
        let mut flags = ssh_flags();
        let at = flags
            .iter()
            .position(|f| f == "--ssh-knownhosts")
            .expect("--ssh-knownhosts");
        flags[at + 1] = path.display().to_string();
        // --ssh-config goes with the known_hosts file it was written for.
        let config = flags
            .iter()
            .position(|f| f == "--ssh-config")
            .expect("--ssh-config");
        flags.drain(config..config + 2);
        env.sim.clear_request_log();
        let mut all = vec!["migrate", SOURCE, "--dry-run"];
        all.extend(flags.iter().map(String::as_str));
        let out = env.uyuni(&all);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        let text = stderr(&out);
        assert!(
            text.starts_with(&format!("error: SSH file {} ", path.display()))
                && text.contains(&format!("`ssh-keyscan {SOURCE} >> {quoted}`"))
                && text.contains(&format!("`ssh-keygen -lf {quoted}`")),
            "{name}: {text}"
        );
        let writes: Vec<_> = env
            .sim
            .request_log()
            .into_iter()
            .filter(|r| r.is_successful_write())
            .collect();
        assert!(writes.is_empty(), "{name}: wrote {writes:?}");
    }
}

/// upgrade's and uninstall's previews keep the conventions of install's: `--show-secrets`
/// warns, `--dry-run=server` sends the writes and `-o json` carries the verdicts as
/// `serverDryRun`, and `--summary` leaves the diffs out (uninstall's summary line first).
#[test]
fn upgrade_and_uninstall_previews_warn_check_on_the_server_and_summarize_as_install_does() {
    let env = Env::quick_jobs();
    let uyuni = |args: &[&str]| uyuni(&env, args);
    let install = uyuni(&["install", "server.example.com", "--tag", "2025.10"]);
    assert!(install.status.success(), "{}", stderr(&install));

    let shown = uyuni(&["upgrade", "--tag", "2026.04", "--dry-run", "--show-secrets"]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert!(
        stderr(&shown).contains("--show-secrets: Secret values are printed below"),
        "{}",
        stderr(&shown)
    );
    for command in [
        &["upgrade", "--tag", "2026.04"][..],
        &["uninstall", "--yes"][..],
    ] {
        let dry = uyuni(&[command, &["--dry-run=server", "-o", "json"]].concat());
        assert!(dry.status.success(), "{command:?}: {}", stderr(&dry));
        let document: serde_json::Value =
            serde_json::from_str(&stdout(&dry)).expect("a JSON document");
        let checks = document["serverDryRun"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("{command:?}: no serverDryRun: {document:#}"));
        // A plain uninstall only deletes: no write to send.
        assert_eq!(
            checks.is_empty(),
            command[0] == "uninstall",
            "{command:?}: {checks:#?}"
        );
        assert!(
            checks.iter().all(|c| c["result"] == "accepted"),
            "{command:?}: {checks:#?}"
        );
    }
    let human = uyuni(&["uninstall", "--dry-run=server"]);
    assert!(
        stdout(&human).contains("Server-side dry run (dryRun=All):")
            && stdout(&human).contains("deletions are not sent"),
        "{}",
        stdout(&human)
    );
    let full = uyuni(&["uninstall", "--dry-run"]);
    let summary = uyuni(&["uninstall", "--dry-run", "--summary"]);
    assert!(summary.status.success(), "{}", stderr(&summary));
    assert!(stdout(&full).contains("--- live/"), "{}", stdout(&full));
    assert!(
        !stdout(&summary).contains("--- live/"),
        "{}",
        stdout(&summary)
    );
    let first_lines: Vec<String> = stdout(&summary)
        .lines()
        .take(4)
        .map(str::to_owned)
        .collect();
    assert!(
        first_lines
            .iter()
            .any(|l| l.starts_with("Plan: ") && l.contains(" to delete")),
        "{first_lines:#?}"
    );
}
