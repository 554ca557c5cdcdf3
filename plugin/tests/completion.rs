//! Shell completion: the generated scripts, the Cobra protocol of `__complete`, and
//! `kubectl uyuni <TAB>` through the real kubectl with `kubectl_complete-uyuni` on PATH.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use uyuni_testdata::{SimCluster, SimConfig};

fn completer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kubectl_complete-uyuni")
}

/// A PATH directory with the plugin and its completer, as a user (or krew plus the caveat's
/// symlink) sets it up.
fn bin_dir() -> tempfile::TempDir {
    let bin = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(
        assert_cmd::cargo::cargo_bin("kubectl-uyuni"),
        bin.path().join("kubectl-uyuni"),
    )
    .expect("symlink");
    std::os::unix::fs::symlink(
        completer_script(),
        bin.path().join("kubectl_complete-uyuni"),
    )
    .expect("symlink");
    bin
}

fn with_env(mut cmd: Command, bin: &Path, home: &Path) -> Command {
    cmd.env(
        "PATH",
        format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    )
    .env("HOME", home)
    .env("KUBECACHEDIR", home.join("cache"))
    .env_remove("KUBECONFIG")
    .env_remove("RUST_LOG");
    cmd
}

fn complete(words: &[&str], kubeconfig_env: Option<&Path>) -> Output {
    let home = tempfile::tempdir().expect("tempdir");
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("kubectl-uyuni"));
    cmd.env("HOME", home.path()).env_remove("KUBECONFIG");
    if let Some(k) = kubeconfig_env {
        cmd.env("KUBECONFIG", k);
    }
    cmd.arg("__complete").args(words).output().expect("runs")
}

/// (candidates without descriptions, directive)
fn answer(out: &Output) -> (Vec<String>, String) {
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "completion must not write to stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines: Vec<&str> = text.lines().collect();
    let directive = lines.pop().expect("a directive line").to_owned();
    assert!(
        directive.starts_with(':'),
        "last line {directive:?} of {text}"
    );
    let candidates = lines
        .iter()
        .map(|l| l.split('\t').next().unwrap_or_default().to_owned())
        .collect();
    (candidates, directive)
}

const TWO_CONTEXTS: &str = "apiVersion: v1\nkind: Config\ncurrent-context: prod\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:9\"}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: prod\n  context: {cluster: c, user: u}\n- name: staging\n  context: {cluster: c, user: u}\n";

#[test]
fn bash_script_sources_cleanly_and_completes() {
    let out = Command::new(assert_cmd::cargo::cargo_bin("kubectl-uyuni"))
        .args(["completion", "bash"])
        .output()
        .expect("runs");
    assert!(out.status.success());
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("kubectl-uyuni.bash");
    std::fs::write(&script, &out.stdout).expect("write");
    // Sourcing registers the completion; calling it for `kubectl-uyuni migrate --ssh-key-p`
    // offers the two key flags.
    let check = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -e; source '{}'; complete -p kubectl-uyuni; \
             COMP_WORDS=(kubectl-uyuni migrate --ssh-key-p); COMP_CWORD=2; \
             _kubectl_uyuni kubectl-uyuni --ssh-key-p migrate; echo \"${{COMPREPLY[*]}}\"",
            script.display()
        ))
        .output()
        .expect("bash runs");
    let stdout = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success() && check.stderr.is_empty(),
        "{stdout}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(stdout.contains("kubectl-uyuni"), "{stdout}");
    assert!(
        stdout.contains("--ssh-key-private --ssh-key-public"),
        "{stdout}"
    );
}

#[test]
fn zsh_and_fish_scripts_are_printed() {
    for (shell, marker) in [
        ("zsh", "#compdef kubectl-uyuni"),
        ("fish", "complete -c kubectl-uyuni"),
    ] {
        let out = Command::new(assert_cmd::cargo::cargo_bin("kubectl-uyuni"))
            .args(["completion", shell])
            .output()
            .expect("runs");
        assert!(out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(marker),
            "{shell} script lacks {marker}"
        );
    }
}

#[test]
fn completion_help_says_how_to_install_the_completer() {
    let out = Command::new(assert_cmd::cargo::cargo_bin("kubectl-uyuni"))
        .args(["completion", "--help"])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("kubectl_complete-uyuni"), "{text}");
    assert!(text.contains("exec kubectl-uyuni __complete"), "{text}");
}

#[test]
fn complete_lists_subcommands_flags_and_values() {
    let (subs, directive) = answer(&complete(&[""], None));
    assert_eq!(
        subs,
        [
            "migrate",
            "install",
            "upgrade",
            "uninstall",
            "stop",
            "start",
            "restart",
            "status",
            "logs",
            "version",
            "rbac",
            "report",
            "completion"
        ]
    );
    assert_eq!(directive, ":4");

    let (flags, directive) = answer(&complete(&["migrate", "--"], None));
    for f in [
        "--prepare",
        "--user",
        "--ssh-key-private",
        "--dry-run",
        "--context",
        "--namespace",
        "--kube-user",
    ] {
        assert!(flags.iter().any(|c| c == f), "{f} missing from {flags:?}");
    }
    assert_eq!(directive, ":4");

    let (values, _) = answer(&complete(&["version", "-o", ""], None));
    assert_eq!(values, ["human", "json", "yaml"]);
    let (_, directive) = answer(&complete(&["migrate", "x", "--ssh-key-private", ""], None));
    assert_eq!(directive, ":0", "file names for a key file");

    // Descriptions travel after a tab unless __completeNoDesc.
    let out = complete(&["mig"], None);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("migrate\tMigrate a classic"));
    let out = Command::new(assert_cmd::cargo::cargo_bin("kubectl-uyuni"))
        .args(["__completeNoDesc", "mig"])
        .output()
        .expect("runs");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "migrate\n:4\n");
}

#[test]
fn context_values_come_from_the_kubeconfig() {
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("config");
    std::fs::write(&kc, TWO_CONTEXTS).expect("write");
    let (contexts, _) = answer(&complete(&["--context", ""], Some(&kc)));
    assert_eq!(contexts, ["prod", "staging"]);
    let (contexts, _) = answer(&complete(&["migrate", "--context=st"], Some(&kc)));
    assert_eq!(contexts, ["--context=staging"]);
    let kc_flag = kc.display().to_string();
    let (contexts, _) = answer(&complete(
        &["--kubeconfig", &kc_flag, "--context", "p"],
        None,
    ));
    assert_eq!(contexts, ["prod"]);
    // No kubeconfig: nothing, quietly.
    let (contexts, directive) = answer(&complete(&["--context", ""], None));
    assert!(contexts.is_empty());
    assert_eq!(directive, ":4");
}

#[test]
fn namespace_values_come_from_the_cluster_or_nothing() {
    let sim = SimCluster::start_blocking(SimConfig::default()).expect("simulated cluster");
    let (namespaces, _) = answer(&complete(&["-n", ""], Some(sim.kubeconfig_path())));
    assert!(namespaces.iter().any(|n| n == "default"), "{namespaces:?}");
    assert!(
        namespaces.iter().any(|n| n == "kube-system"),
        "{namespaces:?}"
    );
    let (namespaces, _) = answer(&complete(
        &["migrate", "--namespace", "kube-"],
        Some(sim.kubeconfig_path()),
    ));
    assert!(
        namespaces.iter().all(|n| n.starts_with("kube-")),
        "{namespaces:?}"
    );

    // An unreachable cluster: no candidates, no error output, quickly.
    let dir = tempfile::tempdir().expect("tempdir");
    let kc = dir.path().join("config");
    std::fs::write(&kc, TWO_CONTEXTS).expect("write");
    let started = std::time::Instant::now();
    let (namespaces, directive) = answer(&complete(&["-n", ""], Some(&kc)));
    assert!(namespaces.is_empty());
    assert_eq!(directive, ":4");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn kubectl_completes_the_plugin_through_kubectl_complete_uyuni() {
    let bin = bin_dir();
    let home = tempfile::tempdir().expect("tempdir");
    let kc = home.path().join("config");
    std::fs::write(&kc, TWO_CONTEXTS).expect("write");
    let run = |args: &[&str]| {
        let mut cmd = with_env(Command::new("kubectl"), bin.path(), home.path());
        cmd.env("KUBECONFIG", &kc);
        let out = cmd
            .arg("__complete")
            .arg("uyuni")
            .args(args)
            .output()
            .expect("kubectl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let top = run(&[""]);
    for sub in ["migrate", "status", "logs", "version", "completion"] {
        assert!(
            top.lines().any(|l| l.starts_with(sub)),
            "{sub} missing:\n{top}"
        );
    }
    assert!(top.trim_end().ends_with(":4"), "{top}");
    let flags = run(&["migrate", "--ssh-key-p"]);
    assert!(flags.contains("--ssh-key-private"), "{flags}");
    let contexts = run(&["--context", ""]);
    assert!(
        contexts.lines().any(|l| l == "prod") && contexts.lines().any(|l| l == "staging"),
        "{contexts}"
    );
}
