use kubectl_uyuni::cli::parse_since;

#[test]
fn since_takes_kubectls_durations() {
    assert_eq!(parse_since("30s").ok(), Some(30));
    assert_eq!(parse_since("10m").ok(), Some(600));
    assert_eq!(parse_since("1h30m").ok(), Some(5400));
    assert_eq!(parse_since("2h0m5s").ok(), Some(7205));
    for bad in ["", "10", "5y", "m", "0s", "1.5h", "-1m"] {
        let err = parse_since(bad).expect_err(bad).to_string();
        assert!(err.contains("not a duration"), "{bad}: {err}");
    }
}
