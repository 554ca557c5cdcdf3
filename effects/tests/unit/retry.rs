//! `retry`: which failures are retried, after how long, and the retry loop.

use std::time::Duration;

use kube::core::{Status, response::StatusDetails};
use uyuni_effects::error::{EffectsError, Target, Verb};
use uyuni_effects::progress::{Progress, ProgressEvent};
use uyuni_effects::retry::{
    Disposition, MAX_ATTEMPTS, MAX_DELAY, MAX_RETRY_AFTER, backoff, classify, classify_watch,
    delay, is_timeout, with_retry,
};

fn api(code: u16) -> kube::Error {
    kube::Error::Api(Status::failure("x", "y").with_code(code).boxed())
}

#[test]
fn backoff_doubles_up_to_the_cap() {
    let schedule: Vec<u128> = (1..MAX_ATTEMPTS).map(|a| backoff(a).as_millis()).collect();
    assert_eq!(schedule, [100, 200, 400, 800, 1600, 3200, 5000]);
    assert_eq!(backoff(1000), MAX_DELAY);
}

#[test]
fn transient_statuses_are_retried() {
    for code in [429, 500, 502, 503, 504] {
        assert_eq!(
            classify(&api(code)),
            Disposition::Retry { after: None },
            "{code}"
        );
    }
}

#[test]
fn answers_are_not_retried() {
    for code in [400, 401, 403, 404, 409, 410, 422, 501] {
        assert_eq!(classify(&api(code)), Disposition::Fail, "{code}");
    }
}

#[test]
fn retry_after_is_honoured_and_capped() {
    let status = Status::failure("slow down", "TooManyRequests")
        .with_code(429)
        .with_details(StatusDetails {
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: Vec::new(),
            retry_after_seconds: 2,
        });
    let d = classify(&kube::Error::Api(status.boxed()));
    assert_eq!(
        d,
        Disposition::Retry {
            after: Some(Duration::from_secs(2))
        }
    );
    assert_eq!(delay(d, 1), Duration::from_secs(2));
    let long = Disposition::Retry {
        after: Some(Duration::from_secs(3600)),
    };
    assert_eq!(delay(long, 1), MAX_RETRY_AFTER);
}

#[test]
fn connection_failures_are_retried_but_tls_failures_are_not() {
    let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
    assert_eq!(
        classify(&kube::Error::Service(Box::new(reset))),
        Disposition::Retry { after: None }
    );
    let tls = std::io::Error::new(std::io::ErrorKind::InvalidData, "invalid peer certificate");
    assert_eq!(
        classify(&kube::Error::Service(Box::new(tls))),
        Disposition::Fail
    );
    let wrapped_tls = std::io::Error::other(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        "bad certificate",
    ));
    assert_eq!(
        classify(&kube::Error::Service(Box::new(wrapped_tls))),
        Disposition::Fail
    );
    let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "eof");
    assert_eq!(
        classify(&kube::Error::ReadEvents(eof)),
        Disposition::Retry { after: None }
    );
}

#[test]
fn timeouts_are_found_deep_in_the_chain() {
    let timed_out = std::io::Error::from(std::io::ErrorKind::TimedOut);
    let err = kube::Error::ReadEvents(std::io::Error::other(kube::Error::Service(Box::new(
        timed_out,
    ))));
    assert!(is_timeout(&err));
    assert!(!is_timeout(&api(503)));
}

#[test]
fn expired_watches_restart_at_once() {
    let gone = Status::failure("too old", "Expired").with_code(410).boxed();
    assert_eq!(
        classify_watch(&kube::runtime::watcher::Error::WatchError(gone)),
        Disposition::Retry {
            after: Some(Duration::ZERO)
        }
    );
}

#[tokio::test(start_paused = true)]
async fn with_retry_reports_each_retry_and_gives_up() {
    use std::sync::Mutex;
    #[derive(Default)]
    struct Rec(Mutex<Vec<(u32, Duration)>>);
    impl Progress for Rec {
        fn event(&self, event: ProgressEvent<'_>) {
            if let ProgressEvent::Retrying { attempt, delay, .. } = event {
                self.0.lock().unwrap().push((attempt, delay));
            }
        }
    }
    let rec = Rec::default();
    let target = Target::named("secret", "s", Some("ns"));
    let mut calls = 0;
    let result: Result<(), _> = with_retry(&rec, Verb::Get, &target, || {
        calls += 1;
        async { Err(api(503)) }
    })
    .await;
    assert_eq!(calls, MAX_ATTEMPTS);
    assert!(matches!(
        result,
        Err(EffectsError::Api {
            attempts: MAX_ATTEMPTS,
            verb: Verb::Get,
            ..
        })
    ));
    let seen = rec.0.lock().unwrap().clone();
    assert_eq!(seen.len() as u32, MAX_ATTEMPTS - 1);
    assert_eq!(seen[0], (1, Duration::from_millis(100)));

    let mut calls = 0;
    let ok = with_retry(&NoRetry, Verb::Get, &target, || {
        calls += 1;
        let n = calls;
        async move { if n < 3 { Err(api(500)) } else { Ok(n) } }
    })
    .await;
    assert_eq!(ok.ok(), Some(3));

    let mut calls = 0;
    let denied: Result<(), _> = with_retry(&NoRetry, Verb::Get, &target, || {
        calls += 1;
        async { Err(api(403)) }
    })
    .await;
    assert_eq!(calls, 1);
    assert!(matches!(denied, Err(EffectsError::Api { attempts: 1, .. })));
}

struct NoRetry;
impl Progress for NoRetry {
    fn event(&self, _event: ProgressEvent<'_>) {}
}
