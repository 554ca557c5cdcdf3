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

#[test]
fn kubectl_connection_flags_and_the_token_are_never_repeated() {
    let argv = words(
        "kubectl-uyuni install uyuni.example.com -s https://api:6443 --token s3cret --certificate-authority /ca.pem --server=https://x --token=s3cret -shttps://y --user ops --cluster c --tag 5.1",
    );
    assert_eq!(
        kubectl_uyuni::cli::repeat_flags_of(&argv, "install", "uyuni.example.com"),
        words("--tag 5.1")
    );
    // After `migrate`, --user is the SSH user: repeated.
    let argv = words("kubectl-uyuni migrate src --token s3cret --user admin");
    assert_eq!(repeat_flags(&argv, "src"), words("--user admin"));
}

#[test]
fn the_token_is_redacted_from_a_recorded_command_line() {
    let argv = words("install x --token s3cret --token=s3cret -- --token kept");
    assert_eq!(
        kubectl_uyuni::cli::redact_secrets(argv),
        words("install x --token $TOKEN --token=$TOKEN -- --token kept")
    );
}

#[test]
fn request_timeouts_read_as_kubectl_reads_them() {
    use kubectl_uyuni::cli::parse_request_timeout as parse;
    use std::time::Duration;
    assert_eq!(parse("0"), Ok(Duration::ZERO));
    assert_eq!(parse("30"), Ok(Duration::from_secs(30)));
    assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
    assert_eq!(parse("1m"), Ok(Duration::from_secs(60)));
    assert_eq!(parse("2h"), Ok(Duration::from_secs(7200)));
    assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
    assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
    for bad in ["", "soon", "1d", "m", "-1s", "1.2.3s"] {
        assert!(parse(bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn a_server_is_a_url_https_unless_said() {
    use kubectl_uyuni::cli::parse_server;
    assert_eq!(
        parse_server("api.example.com:6443").as_deref(),
        Ok("https://api.example.com:6443")
    );
    assert_eq!(
        parse_server("http://127.0.0.1:8080").as_deref(),
        Ok("http://127.0.0.1:8080")
    );
    for bad in ["", "ftp://x", "https://", "https:// x", ":6443"] {
        assert!(parse_server(bad).is_err(), "{bad:?} accepted");
    }
}
