//! The built binary's command line, without a cluster.

use assert_cmd::Command;
use predicates::prelude::*;

fn plugin() -> Command {
    Command::cargo_bin("kubectl-uyuni").expect("binary built")
}

#[test]
fn migrate_help_groups_the_flags() {
    let out = plugin().args(["migrate", "--help"]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    for heading in [
        "SSH to the source server:",
        "Volumes:",
        "Image:",
        "Kubectl flags:",
        "Preview and output:",
    ] {
        assert!(text.contains(heading), "missing {heading} in:\n{text}");
    }
    for flag in [
        "--ssh-key-private",
        "--ssh-knownhosts",
        "--volume-size",
        "--volumes-database-size",
        "--pull-policy",
        "--kubeconfig",
        "--context",
        "--namespace",
        "--dry-run",
        "--prepare",
        "--user",
    ] {
        assert!(text.contains(flag), "missing {flag}");
    }
}

/// The whole text, so that a change to the flags' declarations (their grouping into shared
/// structs, say) cannot reorder, regroup or reword the help unnoticed.
#[test]
fn migrate_help_is_unchanged() {
    // Piped stdout: clap wraps at $COLUMNS, so the width is the test's, not the terminal's.
    let out = plugin()
        .env("COLUMNS", "100")
        .args(["migrate", "--help"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    uyuni_testdata::golden::check_golden("cli-migrate-help", "help.txt", &text);
}

/// `install --help` whole, for the same reason: it flattens the same shared groups as
/// `migrate` beside its own.
#[test]
fn install_help_is_unchanged() {
    let out = plugin()
        .env("COLUMNS", "100")
        .args(["install", "--help"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    uyuni_testdata::golden::check_golden("cli-install-help", "help.txt", &text);
}

/// `upgrade --help` whole: what it does, --rollback and --no-backup, the image flags, its
/// examples.
#[test]
fn upgrade_help_is_unchanged() {
    let out = plugin()
        .env("COLUMNS", "100")
        .args(["upgrade", "--help"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains("Examples:") && text.contains("--rollback"),
        "{text}"
    );
    uyuni_testdata::golden::check_golden("cli-upgrade-help", "help.txt", &text);
}

/// `uninstall --help` whole: its own flags, the shared run and preview groups, its examples.
#[test]
fn uninstall_help_is_unchanged() {
    let out = plugin()
        .env("COLUMNS", "100")
        .args(["uninstall", "--help"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains("--purge-volumes") && text.contains("Examples:"),
        "{text}"
    );
    uyuni_testdata::golden::check_golden("cli-uninstall-help", "help.txt", &text);
}

#[test]
fn version_prints_the_client_version() {
    plugin()
        .arg("version")
        .assert()
        .success()
        .stdout(predicate::str::contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn a_missing_source_is_a_usage_error() {
    plugin()
        .arg("migrate")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("SOURCE_FQDN"));
}

#[test]
fn an_unreadable_key_file_names_the_flag_and_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: uyuni\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .expect("kubeconfig");
    plugin()
        .args(["--kubeconfig"])
        .arg(&kubeconfig)
        .args([
            "migrate",
            "uyuni.example.com",
            "--ssh-key-private",
            "/nonexistent/id",
            "--ssh-key-public",
            "/nonexistent/id.pub",
        ])
        .assert()
        .failure()
        .stderr(predicate::str::contains(
            "--ssh-key-private /nonexistent/id",
        ));
}

#[test]
fn a_negative_replica_count_is_an_invalid_value_not_an_unknown_flag() {
    plugin()
        .args(["migrate", "uyuni.example.com", "--hubxmlrpc-replicas", "-1"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("invalid value '-1'")
                .and(predicate::str::contains("--hubxmlrpc-replicas"))
                .and(predicate::str::contains("-1 is not in 0..=10")),
        );
    plugin()
        .args(["install", "uyuni.example.com", "--coco-replicas", "11"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("11 is not in 0..=10"));
}

#[test]
fn status_and_logs_help_show_examples_and_the_exit_codes() {
    plugin()
        .args(["status", "--help"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("Examples:")
                .and(predicate::str::contains("status --exit-code"))
                .and(predicate::str::contains("3 not healthy")),
        );
    plugin().args(["logs", "--help"]).assert().success().stdout(
        predicate::str::contains("Examples:")
            .and(predicate::str::contains("logs db-fixup --all-attempts"))
            .and(predicate::str::contains("--component server -f")),
    );
}

#[test]
fn logs_flags_are_checked_before_the_cluster_is_asked() {
    // An attempt without a step, a step with a component: usage errors.
    plugin().args(["logs", "--attempt", "1"]).assert().code(2);
    plugin()
        .args(["logs", "data-sync", "--component", "db"])
        .assert()
        .code(2);
    plugin()
        .args(["logs", "data-sync", "--attempt", "0"])
        .assert()
        .code(2);
    // A duration kubectl would refuse, before any connection (none is configured here): a
    // usage error like any other value (issue 38).
    plugin()
        .env("KUBECONFIG", "/nonexistent")
        .args(["logs", "data-sync", "--since", "5y"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "invalid value '5y' for '--since <DURATION>': \"5y\" is not a duration such as 30s",
        ));
}

/// Every flag of every command, in `--help`, under a heading that says what it is about
/// (source, server, database, TLS, networking, output, kubectl connection…): none is left
/// among the bare "Options", but `--help` and `--version`.
/// kubectl's style: every command's help ends with examples to copy.
#[test]
fn every_command_has_an_examples_section() {
    use clap::CommandFactory;
    let mut command = kubectl_uyuni::cli::Cli::command();
    command.build();
    let mut missing = Vec::new();
    for sub in command.get_subcommands_mut() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        if !sub.render_long_help().to_string().contains("\nExamples:\n") {
            missing.push(sub.get_name().to_owned());
        }
    }
    assert!(missing.is_empty(), "no Examples section: {missing:?}");
}

#[test]
fn every_flag_of_every_command_has_a_heading() {
    use clap::CommandFactory;
    fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if arg.is_positional() || arg.is_hide_set() || id == "help" || id == "version" {
                continue;
            }
            if arg.get_help_heading().is_none() {
                let name = arg
                    .get_long()
                    .map(|l| format!("--{l}"))
                    .unwrap_or_else(|| id.to_owned());
                missing.push(format!("{path} {name}"));
            }
        }
        for sub in command.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), missing);
        }
    }
    let mut command = kubectl_uyuni::cli::Cli::command();
    command.build();
    let mut missing = Vec::new();
    walk(&command, "kubectl uyuni", &mut missing);
    assert!(
        missing.is_empty(),
        "flags without a help heading:\n{}",
        missing.join("\n")
    );
}

/// `rbac --help` whole: --for's commands, the binding flags, the examples.
#[test]
fn rbac_help_is_unchanged() {
    let out = plugin()
        .env("COLUMNS", "100")
        .args(["rbac", "--help"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(
        text.contains("--serviceaccount") && text.contains("Examples:"),
        "{text}"
    );
    uyuni_testdata::golden::check_golden("cli-rbac-help", "help.txt", &text);
}

/// `rbac --for COMMAND` for every command, as printed (the core's tests check that the rules
/// cover the preflight's; these keep the output reviewed), one bound to a ServiceAccount, a
/// user and a group, and the same as a JSON List. It needs no cluster and no kubeconfig with -n.
#[test]
fn rbac_prints_each_commands_rules() {
    let mut golden = uyuni_testdata::golden::GoldenDir::new("rbac");
    for command in [
        "install",
        "migrate",
        "upgrade",
        "uninstall",
        "status",
        "stop",
        "start",
        "restart",
        "logs",
        "report",
    ] {
        let out = plugin()
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .args(["-n", "uyuni", "rbac", "--for", command])
            .assert()
            .success();
        let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(
            text.contains(&format!("name: kubectl-uyuni-{command}")),
            "{text}"
        );
        assert!(
            !text.contains("kind: RoleBinding"),
            "bound to nobody: {text}"
        );
        golden.file(&format!("{command}.yaml"), &text);
    }
    let bound = [
        "-n",
        "uyuni",
        "rbac",
        "--for",
        "install",
        "--serviceaccount",
        "ops:deployer",
        "--bind-user",
        "alice",
        "--group",
        "uyuni-admins",
    ];
    let out = plugin().args(bound).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert_eq!(text.matches("kind: RoleBinding").count(), 2, "{text}");
    assert_eq!(
        text.matches("kind: ClusterRoleBinding").count(),
        1,
        "{text}"
    );
    golden.file("install-bound.yaml", &text);
    let out = plugin().args(bound).args(["-o", "json"]).assert().success();
    let list: serde_json::Value =
        serde_json::from_slice(&out.get_output().stdout).expect("a JSON List");
    assert_eq!(list["kind"], "List");
    let kinds: Vec<&str> = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|i| i["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "Role",
            "Role",
            "ClusterRole",
            "RoleBinding",
            "RoleBinding",
            "ClusterRoleBinding"
        ]
    );
    golden.check();
}

#[test]
fn rbac_refuses_a_service_account_not_in_kubectls_form() {
    plugin()
        .args([
            "-n",
            "uyuni",
            "rbac",
            "--for",
            "migrate",
            "--serviceaccount",
            "deployer",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("NAMESPACE:NAME"));
}

/// Without -n, `rbac` takes the context's namespace from the kubeconfig (and sends nothing:
/// the server here is a closed port); with no kubeconfig, it asks for -n.
#[test]
fn rbac_takes_the_contexts_namespace_or_asks_for_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: from-context\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    )
    .expect("kubeconfig");
    let out = plugin()
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["rbac", "--for", "logs"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("  namespace: from-context\n"), "{text}");
    plugin()
        .env("HOME", dir.path())
        .env_remove("KUBECONFIG")
        .args(["rbac", "--for", "logs"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "pass the namespace with -n NAMESPACE",
        ));
}

/// `--color` and then `NO_COLOR` govern every stream, the `-v` log included: a redirected log
/// asked for `--color never` holds no escape, nor one on a terminal with `NO_COLOR`, and
/// `--color always` colours it even redirected (issue 38). The run fails to connect (a port
/// nothing listens on), after its first debug line.
#[test]
fn color_and_no_color_govern_the_verbose_log_on_every_stream() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n"),
    )
    .expect("kubeconfig");
    let kubeconfig = kubeconfig.to_str().expect("utf-8").to_owned();
    let redirected = |color: &str| {
        let out = plugin()
            .env_remove("NO_COLOR")
            .env_remove("RUST_LOG")
            .args([
                "--kubeconfig",
                &kubeconfig,
                "-n",
                "uyuni",
                "-vv",
                "--color",
                color,
                "status",
            ])
            .output()
            .expect("runs");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let never = redirected("never");
    assert!(never.contains("DEBUG"), "{never}");
    assert!(!never.contains('\u{1b}'), "{never}");
    let always = redirected("always");
    let log_line = always
        .lines()
        .find(|l| l.contains("DEBUG"))
        .unwrap_or_else(|| panic!("no debug line:\n{always}"));
    assert!(log_line.contains("\u{1b}["), "{log_line}");
    assert!(always.contains("\u{1b}[31merror:"), "{always}");
    // On a terminal: coloured by default, plain with NO_COLOR or --color never.
    let on_terminal = |no_color: bool, extra: &[&str]| {
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/pty_answer.py");
        let mut cmd = std::process::Command::new("python3");
        cmd.arg(script)
            .args(["(no question)", "--"])
            .arg(env!("CARGO_BIN_EXE_kubectl-uyuni"))
            .args(["--kubeconfig", &kubeconfig, "-n", "uyuni", "-vv"])
            .args(extra)
            .arg("status")
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null());
        if no_color {
            cmd.env("NO_COLOR", "1");
        } else {
            cmd.env_remove("NO_COLOR");
        }
        let out = cmd.output().expect("python3 runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let coloured = on_terminal(false, &[]);
    assert!(
        coloured.contains("DEBUG") && coloured.contains("\u{1b}["),
        "{coloured}"
    );
    for (no_color, extra) in [(true, &[][..]), (false, &["--color", "never"][..])] {
        let plain = on_terminal(no_color, extra);
        assert!(plain.contains("DEBUG"), "{plain}");
        assert!(
            !plain.contains('\u{1b}'),
            "NO_COLOR {no_color}, {extra:?}: {plain}"
        );
    }
}
