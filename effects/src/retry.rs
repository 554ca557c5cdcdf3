//! Retries of transient API failures: which errors are transient, how long to wait, and the one
//! loop every single request goes through.
//!
//! kube's own retry layer is switched off in [`crate::connect()`] so that every retry is visible as
//! a [`ProgressEvent::Retrying`] and all requests share one schedule.
//!
//! The policy stays here rather than in the plan: it is the transport's, not a step's. Which
//! failures are transient is a question about `kube::Error` values that core cannot see, and
//! the schedule is the same for every request of every step; it changes how a step's requests
//! get through, never what the step does or when it gives up waiting (those limits are fields
//! of the step's wait, in the plan). A dry run sends no request, so it has no retry to show.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Duration;

use crate::error::{EffectsError, Target, Verb};
use crate::progress::{Progress, ProgressEvent};

/// Tries per request, the first one included. With [`backoff`] that is about 11 s of waiting
/// before giving up, enough to ride out an API server restart behind a load balancer.
pub const MAX_ATTEMPTS: u32 = 8;
const FIRST_DELAY: Duration = Duration::from_millis(100);
/// The longest [`backoff`].
pub const MAX_DELAY: Duration = Duration::from_secs(5);
/// A server asking for more than this is treated as asking for this: the user is waiting.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Tries of a request that cannot connect to an API server that has not answered once since
/// [`connect`](crate::connect()): an address that refuses or does not resolve at the start of a
/// run is a wrong address or a server that is down, which waiting 11 s does not cure; once it
/// has answered, a refused connection is a restart, retried on the whole schedule.
pub const UNREACHED_ATTEMPTS: u32 = 3;

/// A request failed before the API server it was sent to had answered any request of this
/// client: the error as the client's outermost layer ([`crate::connect()`]) passes it on, with
/// where it was sent. Its `Display` and `source` are the failure's own.
#[derive(Debug)]
pub struct NeverAnswered {
    pub server: String,
    /// `None`: no kubeconfig context (the flags, or the pod's service account).
    pub context: Option<String>,
    /// How long connecting may take ([`crate::connect::CONNECT_TIMEOUT`] or
    /// `--request-timeout`): a connection that timed out says after how long.
    pub connect_timeout: Option<Duration>,
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl std::fmt::Display for NeverAnswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl std::error::Error for NeverAnswered {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The client's outermost layer: marks the failures before the first answer (one per client,
/// so that every client of a process, the tests' included, has its own).
pub(crate) fn first_contact_layer<R>(
    server: String,
    context: Option<String>,
    connect_timeout: Option<Duration>,
) -> tower::util::MapResultLayer<impl Fn(Result<R, BoxError>) -> Result<R, BoxError> + Clone> {
    let answered = Arc::new(AtomicBool::new(false));
    tower::util::MapResultLayer::new(move |result: Result<R, BoxError>| match result {
        Ok(response) => {
            answered.store(true, Ordering::Relaxed);
            Ok(response)
        }
        // kube's own errors (credentials that cannot be obtained) stay as they are: kube
        // unwraps them, and they say nothing about the server.
        Err(source) if !answered.load(Ordering::Relaxed) && !source.is::<kube::Error>() => {
            let never: BoxError = Box::new(NeverAnswered {
                server: server.clone(),
                context: context.clone(),
                connect_timeout,
                source,
            });
            Err(never)
        }
        Err(source) => Err(source),
    })
}

fn never_answered(err: &kube::Error) -> Option<&NeverAnswered> {
    match err {
        kube::Error::Service(source) => source.downcast_ref::<NeverAnswered>(),
        _ => None,
    }
}

/// The error for a request that could not connect, if the server never answered and
/// `attempt` tries are enough to say so: the address and context, and the cause.
/// A certificate the client does not accept says so at the first try: it is not retried.
pub(crate) fn unreachable(err: &kube::Error, attempt: u32) -> Option<EffectsError> {
    let first = never_answered(err)?;
    let tls = matches!(err, kube::Error::Service(s) if is_permanent_transport_error(s.as_ref()));
    // A connection that timed out has waited its whole connect timeout (30 s) already.
    let connect = is_connect_error(err);
    let timed_out = connect && is_timeout(err);
    if !tls && !timed_out && (attempt < UNREACHED_ATTEMPTS || !connect) {
        return None;
    }
    Some(EffectsError::Unreachable {
        server: first.server.clone(),
        context: first.context.clone(),
        attempts: attempt,
        reason: if tls {
            crate::error::root_cause_text(err)
        } else if let (true, Some(limit)) = (timed_out, first.connect_timeout) {
            format!(
                "no connection within {}, the limit --request-timeout sets",
                seconds(limit)
            )
        } else {
            connect_reason(err)
        },
        tls,
    })
}

/// `10s`, `1.5s`: as `--request-timeout` takes it.
fn seconds(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

/// The request never reached a server: the connection was refused, the name did not resolve,
/// the address is unreachable, or connecting timed out (hyper's "client error (Connect)").
pub fn is_connect_error(err: &kube::Error) -> bool {
    let kube::Error::Service(source) = err else {
        return false;
    };
    let refused = any_io_error(source.as_ref(), &|io| {
        matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionRefused
                | std::io::ErrorKind::HostUnreachable
                | std::io::ErrorKind::NetworkUnreachable
                | std::io::ErrorKind::AddrNotAvailable
        )
    });
    let mut chain: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
    let mut connect = false;
    while let Some(e) = chain {
        connect |= e.to_string().contains("(Connect)");
        chain = e.source();
    }
    refused || (connect && !is_permanent_transport_error(source.as_ref()))
}

/// Why a connection failed, in a few words: "connection refused", or the resolver's message.
fn connect_reason(err: &kube::Error) -> String {
    let kube::Error::Service(source) = err else {
        return err.to_string();
    };
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
                std::io::ErrorKind::TimedOut => "connecting timed out".to_owned(),
                std::io::ErrorKind::HostUnreachable => "no route to host".to_owned(),
                std::io::ErrorKind::NetworkUnreachable => "network unreachable".to_owned(),
                _ => match io.get_ref() {
                    Some(inner) => inner.to_string(),
                    None => io.to_string(),
                },
            };
        }
        current = e.source();
    }
    crate::error::api_reason(err)
}

/// What to do about a failed request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Send it again, after the server's `Retry-After` if it gave one.
    Retry {
        after: Option<Duration>,
    },
    Fail,
}

/// The wait before retry number `attempt` (1 = the first retry): 100 ms doubling, capped at 5 s.
/// No jitter: a single CLI process does not stampede, and a fixed schedule keeps the tests
/// against the seeded simulated cluster reproducible.
pub fn backoff(attempt: u32) -> Duration {
    let exp = attempt.saturating_sub(1).min(16);
    FIRST_DELAY.saturating_mul(1 << exp).min(MAX_DELAY)
}

/// Every delay of [`delay`] is divided by this: 1 (the schedule as documented) unless a test
/// shortens it with [`shorten_delays`].
static DELAY_DIVISOR: AtomicU32 = AtomicU32::new(1);

/// Divides every retry delay of this process by `divisor` (at least 1): the same attempts in the
/// same order, sooner. For tests that go through the whole schedule (the plugin's hidden
/// `--retry-delay-divisor`); never for a real run, where the waits are what ride out a restart.
pub fn shorten_delays(divisor: u32) {
    DELAY_DIVISOR.store(divisor.max(1), Ordering::Relaxed);
}

/// The delay before the next try: the server's wish when it has one, else the backoff.
pub fn delay(disposition: Disposition, attempt: u32) -> Duration {
    let full = match disposition {
        Disposition::Retry { after: Some(after) } => after.min(MAX_RETRY_AFTER),
        Disposition::Retry { after: None } | Disposition::Fail => backoff(attempt),
    };
    full / DELAY_DIVISOR.load(Ordering::Relaxed).max(1)
}

/// Is this failure worth another try?
///
/// - 429 and 500/502/503/504 are the API server (or a proxy before it) being busy or restarting;
///   a 429 says how long to wait in `details.retryAfterSeconds` (kube keeps the Status body but
///   drops the `Retry-After` header, so the body is where to read it).
/// - Connection-level failures (refused, reset, closed mid-answer, timed out) are retried; TLS
///   and certificate failures are not, they do not heal by waiting.
/// - Every other 4xx is an answer, not an accident: 409 conflicts included (a forced
///   server-side apply does not conflict; anything else that does needs a fresh plan).
pub fn classify(err: &kube::Error) -> Disposition {
    match err {
        kube::Error::Api(status) => match status.code {
            429 | 500 | 502 | 503 | 504 => Disposition::Retry {
                after: status
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(u64::from(s))),
            },
            _ => Disposition::Fail,
        },
        kube::Error::HyperError(_) | kube::Error::ReadEvents(_) => {
            Disposition::Retry { after: None }
        }
        kube::Error::Service(source) => {
            if is_permanent_transport_error(source.as_ref()) {
                Disposition::Fail
            } else {
                Disposition::Retry { after: None }
            }
        }
        _ => Disposition::Fail,
    }
}

/// TLS handshake failures surface as I/O errors of kind `InvalidData` somewhere in the chain.
pub(crate) fn is_permanent_transport_error(err: &(dyn std::error::Error + 'static)) -> bool {
    any_io_error(err, &|io| {
        matches!(
            io.kind(),
            std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput
        )
    })
}

/// A read timed out: with `--request-timeout` set, kube's read timeout also ends watches and
/// followed logs that merely stayed quiet that long. On a stream that was open, that is no
/// failure: it is re-established at once and not counted against the attempts.
pub fn is_timeout(err: &(dyn std::error::Error + 'static)) -> bool {
    any_io_error(err, &|io| io.kind() == std::io::ErrorKind::TimedOut)
}

/// Does an I/O error in the chain of `err` satisfy `pred`? Looks inside wrapping I/O errors too
/// (their `source` skips the wrapped error itself).
fn any_io_error(
    err: &(dyn std::error::Error + 'static),
    pred: &dyn Fn(&std::io::Error) -> bool,
) -> bool {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if pred(io) {
                return true;
            }
            if let Some(inner) = io.get_ref()
                && any_io_error(inner, pred)
            {
                return true;
            }
        }
        current = e.source();
    }
    false
}

/// Classifies a watcher failure. The watcher re-establishes itself on the next poll; this says
/// whether polling again is worth it, and after how long.
pub fn classify_watch(err: &kube::runtime::watcher::Error) -> Disposition {
    use kube::runtime::watcher::Error as W;
    match err {
        W::InitialListFailed(e) | W::WatchStartFailed(e) | W::WatchFailed(e) => classify(e),
        // 410 Gone: the resourceVersion expired; the watcher re-lists by itself, at once.
        W::WatchError(status) if status.code == 410 => Disposition::Retry {
            after: Some(Duration::ZERO),
        },
        W::WatchError(status) => classify(&kube::Error::Api(status.clone())),
        W::NoResourceVersion => Disposition::Fail,
    }
}

/// [`with_retry`] for the requests around the steps — the lease, the permission reviews —
/// which are no step's and report no progress: the same classification and schedule, and the
/// last failure as it came, for the caller's own error.
pub async fn quietly<T, F, Fut>(mut request: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 1;
    loop {
        let err = match request().await {
            Ok(value) => return Ok(value),
            Err(err) => err,
        };
        let disposition = classify(&err);
        if unreachable(&err, attempt).is_some()
            || disposition == Disposition::Fail
            || attempt >= MAX_ATTEMPTS
        {
            return Err(err);
        }
        tracing::debug!(attempt, error = %err, "retrying");
        tokio::time::sleep(delay(disposition, attempt)).await;
        attempt += 1;
    }
}

/// Sends a request until it succeeds, fails for good, or [`MAX_ATTEMPTS`] are used up.
#[doc(hidden)]
// pub for the unit tests in tests/unit/
pub async fn with_retry<T, F, Fut>(
    progress: &dyn Progress,
    verb: Verb,
    target: &Target,
    mut request: F,
) -> Result<T, EffectsError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut attempt = 1;
    loop {
        let err = match request().await {
            Ok(value) => return Ok(value),
            Err(err) => err,
        };
        if let Some(unreachable) = unreachable(&err, attempt) {
            return Err(unreachable);
        }
        let disposition = classify(&err);
        if disposition == Disposition::Fail || attempt >= MAX_ATTEMPTS {
            return Err(EffectsError::Api {
                verb,
                target: target.clone(),
                attempts: attempt,
                source: Box::new(err),
            });
        }
        let wait = delay(disposition, attempt);
        report_retry(
            progress,
            verb,
            target,
            attempt,
            wait,
            &crate::error::api_reason(&err),
        );
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

pub(crate) fn report_retry(
    progress: &dyn Progress,
    verb: Verb,
    target: &Target,
    attempt: u32,
    delay: Duration,
    error: &str,
) {
    let what = format!("{verb} {target}");
    tracing::debug!(%what, attempt, ?delay, %error, "retrying");
    progress.event(ProgressEvent::Retrying {
        what: &what,
        attempt,
        delay,
        error,
    });
}
