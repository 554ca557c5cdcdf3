//! `inspect`: the context names of the kubeconfig kubectl would use.

use uyuni_effects::inspect::context_names;

fn kubeconfig(contexts: &[&str]) -> String {
    let mut s = String::from("apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts:\n");
    for c in contexts {
        s.push_str(&format!(
            "- name: {c}\n  context: {{cluster: c, user: u}}\n"
        ));
    }
    s
}

#[test]
fn contexts_follow_kubectls_file_choice() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    std::fs::write(&a, kubeconfig(&["one", "two"])).expect("write");
    std::fs::write(&b, kubeconfig(&["two", "three"])).expect("write");
    let env = std::env::join_paths([&a, &dir.path().join("missing"), &b]).expect("join");
    assert_eq!(
        context_names(None, Some(&env), None),
        ["one", "two", "three"]
    );
    assert_eq!(context_names(Some(&b), Some(&env), None), ["two", "three"]);
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".kube")).expect("mkdir");
    std::fs::write(home.join(".kube/config"), kubeconfig(&["h"])).expect("write");
    assert_eq!(context_names(None, None, Some(&home)), ["h"]);
    assert!(context_names(None, None, Some(dir.path())).is_empty());
}
