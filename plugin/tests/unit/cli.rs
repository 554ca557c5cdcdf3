//! Unit tests of `src/cli.rs`.

use kubectl_uyuni::cli::repeat_flags;

fn words(s: &str) -> Vec<String> {
    s.split(' ').map(str::to_owned).collect()
}

#[test]
fn only_the_migrate_flags_are_repeated() {
    let argv = words(
        "kubectl-uyuni --kubeconfig /k migrate src.example.com -n uyuni --context=c --prepare --yes --tag 5.1 --ssh-knownhosts /kh -o json --dry-run=client -vv --user admin",
    );
    assert_eq!(
        repeat_flags(&argv, "src.example.com"),
        words("--tag 5.1 --ssh-knownhosts /kh --user admin")
    );
}
