use uyuni_core::params::{ParamsError, is_fqdn};
use uyuni_core::timezone::{is_known, names, suggestion};

/// The zones and links of the tz database are known, case-sensitive as the image's
/// `/usr/share/zoneinfo` paths; anything else is not.
#[test]
fn the_tz_databases_names_are_known_and_others_are_not() {
    for zone in [
        "Etc/UTC",
        "UTC",
        "Europe/Berlin",
        "America/Argentina/Buenos_Aires",
        "Asia/Kolkata",
        // A link of the `backward` file, still a file in the image.
        "US/Eastern",
    ] {
        assert!(is_known(zone), "{zone}");
    }
    for not in [
        "Mars/Olympus",
        "europe/berlin",
        "",
        "Etc/",
        "../etc/passwd",
        "UTC ",
    ] {
        assert!(!is_known(not), "{not:?}");
    }
    assert_eq!(suggestion("europe/berlin"), Some("Europe/Berlin"));
    assert_eq!(suggestion("Mars/Olympus"), None);
    let all: Vec<&str> = names().collect();
    assert!(all.len() > 500, "{}", all.len());
    assert!(all.windows(2).all(|w| w[0] < w[1]), "sorted, no duplicates");
}

/// An FQDN refused says why: a label over 63 characters, a name over 253.
#[test]
fn an_fqdn_refusal_says_what_is_wrong() {
    let label = format!("{}.example.com", "a".repeat(250));
    assert!(!is_fqdn(&label));
    let text = ParamsError::ServerFqdn(label).to_string();
    assert!(
        text.contains("250 characters long") && text.contains("at most 63"),
        "{text}"
    );
    let long = format!("{}.com", vec!["a".repeat(60); 5].join("."));
    assert!(!is_fqdn(&long));
    let text = ParamsError::ServerFqdn(long).to_string();
    assert!(text.contains("at most 253"), "{text}");
    let text = ParamsError::ServerFqdn("localhost".into()).to_string();
    assert!(text.contains("no domain"), "{text}");
}
