//! Unit tests of `src/completion.rs`.

use std::path::Path;

use clap::CommandFactory as _;
use kubectl_uyuni::cli::Cli;
use kubectl_uyuni::completion::*;

fn ask(words: &[&str]) -> Answer {
    let mut root = Cli::command();
    root.build();
    let words: Vec<String> = words.iter().map(|w| (*w).to_owned()).collect();
    complete(&root, &words, &mut |what| match what {
        Dynamic::Contexts => vec!["prod".into(), "staging".into()],
        Dynamic::Namespaces => vec!["default".into(), "uyuni".into()],
    })
}

fn values(a: &Answer) -> Vec<&str> {
    a.candidates.iter().map(|(v, _)| v.as_str()).collect()
}

#[test]
fn subcommands_flags_and_values() {
    let top = ask(&[""]);
    assert_eq!(
        values(&top),
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
    assert_eq!(top.directive, directive::NO_FILE_COMP);
    assert_eq!(values(&ask(&["ver"])), ["version"]);
    let flags = ask(&["migrate", "--"]);
    for f in [
        "--prepare",
        "--ssh-key-private",
        "--context",
        "--namespace",
        "--dry-run",
    ] {
        assert!(values(&flags).contains(&f), "{f} in {:?}", values(&flags));
    }
    assert!(!values(&flags).contains(&"--v"), "hidden flags stay hidden");
    assert_eq!(values(&ask(&["--context", "s"])), ["staging"]);
    assert_eq!(values(&ask(&["migrate", "-n", ""])), ["default", "uyuni"]);
    assert_eq!(values(&ask(&["-n", "uy"])), ["uyuni"]);
    assert_eq!(values(&ask(&["--namespace=d"])), ["--namespace=default"]);
    assert_eq!(values(&ask(&["-o", ""])), ["human", "json", "yaml"]);
    assert_eq!(values(&ask(&["completion", ""])), ["bash", "zsh", "fish"]);
    assert_eq!(
        values(&ask(&["logs", "--component", ""])),
        ["server", "db", "tftp", "hub-xmlrpc", "coco"]
    );
    assert_eq!(
        ask(&["migrate", "--ssh-key-private", ""]).directive,
        directive::DEFAULT
    );
    assert_eq!(ask(&["--kubeconfig", ""]).directive, directive::DEFAULT);
    // After a flag's value, subcommands again.
    assert_eq!(values(&ask(&["-n", "uyuni", "m"])), ["migrate"]);
    assert_eq!(values(&ask(&["-vv", "m"])), ["migrate"]);
}

#[test]
fn the_wire_format_is_cobras() {
    let a = Answer {
        candidates: vec![
            ("migrate".into(), Some("Migrate a server".into())),
            ("x".into(), None),
        ],
        directive: 4,
    };
    assert_eq!(a.render(true), "migrate\tMigrate a server\nx\n:4\n");
    assert_eq!(a.render(false), "migrate\nx\n:4\n");
}

#[test]
fn typed_kube_flags_are_picked_up() {
    let words: Vec<String> = [
        "--kubeconfig",
        "/k",
        "--context=c",
        "migrate",
        "--kube-user",
        "u",
    ]
    .iter()
    .map(|w| (*w).to_owned())
    .collect();
    let f = kube_flags_from(&words);
    assert_eq!(f.kubeconfig.as_deref(), Some(Path::new("/k")));
    assert_eq!(f.context.as_deref(), Some("c"));
    assert_eq!(f.user.as_deref(), Some("u"));
}
