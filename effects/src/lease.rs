//! The namespace's Lease, held from a run's first write to its end: read with the API server's
//! clock, taken with optimistic concurrency, renewed in the background, released at the end.
//! What to do about the lease found is [`uyuni_core::lock::decide`]'s decision; this module
//! only carries it out.
//!
//! Two runs cannot both win: a create of a lease that exists fails with 409 AlreadyExists, and
//! an update carries the resourceVersion that was read, so an update of a lease written since
//! fails with 409 Conflict (optimistic concurrency,
//! <https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions>;
//! `staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`, `Update`, which
//! compares the resourceVersion in the object with the stored one). The loser reads again and
//! sees the winner as the holder.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::core::Status;
use uyuni_core::labels::FIELD_MANAGER;
use uyuni_core::lock::{Decision, Holder, LEASE_NAME, TakeOver, Taker};

/// A request about the lease that failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot {verb} Lease {LEASE_NAME} in namespace {namespace}, which keeps a second run from writing there at the same time: {}. Check that the API server is reachable and that you may {verb} leases.coordination.k8s.io in that namespace, then run the command again",
    crate::error::api_reason(source)
)]
pub struct LeaseError {
    pub verb: &'static str,
    pub namespace: String,
    #[source]
    pub source: kube::Error,
}

/// The outcome of trying to take the lease.
#[derive(Debug)]
pub enum Acquired {
    /// This run holds it now; `from`: whose it was, if it took it over; `now` on the server's
    /// clock.
    Held {
        held: Held,
        from: Option<TakeOver>,
        now: Timestamp,
    },
    /// Another run holds it and it has not run out: `now` on the server's clock.
    Refused { holder: Holder, now: Timestamp },
    /// The namespace does not exist (yet): a lease cannot be created in it.
    NamespaceMissing,
}

/// The local clock as a timestamp (the plugin's clock: `effects` reads it only to follow the
/// server's, see [`ServerClock`]).
fn local_now() -> Timestamp {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp::new(
        i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        i32::try_from(since.subsec_nanos()).unwrap_or(0),
    )
    .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// The API server's clock as this process estimates it: the local clock plus the offset seen
/// in a response's `Date` header (every response of the Go HTTP server has one, RFC 9110
/// §6.6.1; whole seconds, so the estimate is within a second). Without one (a proxy that drops
/// it), the local clock.
#[derive(Debug, Clone, Copy)]
struct ServerClock {
    offset: SignedDuration,
}

impl ServerClock {
    fn from_date(date: Option<&str>) -> ServerClock {
        let local = local_now();
        let offset = date
            .and_then(|d| {
                k8s_openapi::jiff::fmt::rfc2822::DateTimeParser::new()
                    .parse_timestamp(d)
                    .ok()
            })
            // The header truncates to the second: the server's time is on average half a
            // second later than it says.
            .map(|server| server.duration_since(local) + SignedDuration::from_millis(500))
            .unwrap_or(SignedDuration::ZERO);
        ServerClock { offset }
    }

    fn now(&self) -> Timestamp {
        let local = local_now();
        local.checked_add(self.offset).unwrap_or(local)
    }
}

fn api_error(code: u16, body: &[u8]) -> kube::Error {
    let status = serde_json::from_slice::<Status>(body)
        .unwrap_or_else(|_| Status::failure(&String::from_utf8_lossy(body), "").with_code(code));
    kube::Error::Api(status.boxed())
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// The lease (`None`: there is none) and the server's clock, from one GET: its `Date` is read
/// from the same response, which is why this is a raw request and not `Api::get_opt`.
async fn read(
    client: &kube::Client,
    namespace: &str,
) -> Result<(Option<Lease>, ServerClock), kube::Error> {
    let url = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases");
    let request = kube::core::Request::new(url)
        .get(LEASE_NAME, &kube::api::GetParams::default())
        .map_err(kube::Error::BuildRequest)?;
    let response = client.send(request.map(kube::client::Body::from)).await?;
    let clock =
        ServerClock::from_date(response.headers().get("date").and_then(|v| v.to_str().ok()));
    let code = response.status().as_u16();
    let body = response.into_body().collect_bytes().await?;
    match code {
        200 => Ok((
            Some(serde_json::from_slice(&body).map_err(kube::Error::SerdeError)?),
            clock,
        )),
        404 => Ok((None, clock)),
        _ => Err(api_error(code, &body)),
    }
}

/// Takes the namespace's lease for `taker`, or says who holds it. `force`: take it from a
/// holder whose lease has not run out (`--force-unlock`).
pub async fn acquire(
    client: &kube::Client,
    namespace: &str,
    taker: &Taker,
    force: bool,
) -> Result<Acquired, LeaseError> {
    let api: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let error = |verb, source| LeaseError {
        verb,
        namespace: namespace.to_owned(),
        source,
    };
    let post = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let mut force = force;
    // Each lost race means another run wrote the lease in between: read again and decide
    // again. A few rounds settle it; more would mean runs taking it from each other.
    let mut attempts = 0;
    loop {
        attempts += 1;
        // Each request rides out transient failures (429, 5xx, a dropped connection) as every
        // other request does. A create or replace whose answer was lost but which took effect
        // comes back as a 409 on its retry: read again, and the lease is found to be ours.
        let (found, clock) = read_riding_out(client, namespace).await?;
        let now = clock.now();
        let (result, verb, from) =
            match uyuni_core::lock::decide(found.as_ref(), namespace, taker, now, force) {
                Decision::Refuse(holder) => return Ok(Acquired::Refused { holder, now }),
                Decision::Create(lease) => (
                    crate::retry::quietly(|| api.create(&post, &lease)).await,
                    "create",
                    None,
                ),
                Decision::Take { lease, from } => (
                    crate::retry::quietly(|| api.replace(LEASE_NAME, &post, &lease)).await,
                    "update",
                    from,
                ),
            };
        match result {
            Ok(lease) => {
                return Ok(Acquired::Held {
                    held: Held::start(client.clone(), namespace, lease, clock, taker),
                    from,
                    now,
                });
            }
            // A create in a namespace that does not exist: 404 NotFound (of the namespace).
            Err(e) if verb == "create" && status_code(&e) == Some(404) => {
                return Ok(Acquired::NamespaceMissing);
            }
            Err(e) if status_code(&e) == Some(409) && attempts < 4 => {
                // Someone else wrote it since it was read: --force-unlock was about the holder
                // seen then, not about whoever just took it.
                force = false;
            }
            Err(e) => return Err(error(verb, e)),
        }
    }
}

/// The namespace's lease as it is (`None`: there is none) and the API server's time, for
/// `status`: whether a run that has not ended still holds it.
pub async fn current(
    client: &kube::Client,
    namespace: &str,
) -> Result<(Option<Lease>, Timestamp), LeaseError> {
    let (found, clock) = read_riding_out(client, namespace).await?;
    Ok((found, clock.now()))
}

/// [`read`], riding out transient failures (429, 5xx, a dropped connection) as every other
/// request does.
async fn read_riding_out(
    client: &kube::Client,
    namespace: &str,
) -> Result<(Option<Lease>, ServerClock), LeaseError> {
    crate::retry::quietly(|| read(client, namespace))
        .await
        .map_err(|source| LeaseError {
            verb: "get",
            namespace: namespace.to_owned(),
            source,
        })
}

/// Why a held lease was lost; set by the renewal task.
#[derive(Debug, Default)]
struct State {
    /// The lease as last written by this run (its resourceVersion is what the next write and
    /// the release are conditional on).
    lease: Option<Lease>,
    lost: Option<String>,
}

/// The lease as this run holds it, renewed in the background until [`Held::release`].
pub struct Held {
    client: kube::Client,
    namespace: String,
    state: Arc<Mutex<State>>,
    stop: tokio::sync::watch::Sender<bool>,
    renewal: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held")
            .field("namespace", &self.namespace)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Held {
    fn start(
        client: kube::Client,
        namespace: &str,
        lease: Lease,
        clock: ServerClock,
        taker: &Taker,
    ) -> Held {
        let state = Arc::new(Mutex::new(State {
            lease: Some(lease),
            lost: None,
        }));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        // A third of the duration, as upstream's components renew (kube-controller-manager's
        // leader election: 15 s lease, renewed every 2 s within a 10 s deadline; the kubelet's
        // node lease: 40 s, renewed every 10 s): two renewals may fail before it runs out.
        let period =
            Duration::from_millis(u64::try_from(taker.duration_seconds).unwrap_or(60) * 1000 / 3);
        let renewal = tokio::spawn(renew(
            Api::namespaced(client.clone(), namespace),
            state.clone(),
            clock,
            period,
            stopped,
        ));
        Held {
            client,
            namespace: namespace.to_owned(),
            state,
            stop,
            renewal,
        }
    }

    /// `Err(why)` once the lease is lost: the run must not write again.
    pub fn check(&self) -> Result<(), String> {
        match &lock(&self.state).lost {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }

    /// Stops renewing and deletes the lease, on condition that it is still the version this run
    /// wrote last (a lease another run took over meanwhile is left to it). A lease that cannot
    /// be deleted runs out by itself after its duration.
    pub async fn release(self) -> Result<(), LeaseError> {
        let _ = self.stop.send(true);
        // Wait for a renewal in flight: its write changes the resourceVersion the delete is
        // conditional on.
        let _ = self.renewal.await;
        let (lease, lost) = {
            let state = lock(&self.state);
            (state.lease.clone(), state.lost.is_some())
        };
        let Some(lease) = lease.filter(|_| !lost) else {
            return Ok(());
        };
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: lease.metadata.resource_version.clone(),
                uid: lease.metadata.uid.clone(),
            }),
            ..DeleteParams::default()
        };
        // Retried: a lease left behind would refuse the next command until it runs out. A
        // delete whose answer was lost comes back as a 404 on its retry.
        match crate::retry::quietly(|| api.delete(LEASE_NAME, &params)).await {
            Ok(_) => Ok(()),
            // Gone already, or someone else's now.
            Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(()),
            Err(source) => Err(LeaseError {
                verb: "delete",
                namespace: self.namespace.clone(),
                source,
            }),
        }
    }
}

/// Renews the lease every `period` until told to stop or until it is lost.
async fn renew(
    api: Api<Lease>,
    state: Arc<Mutex<State>>,
    clock: ServerClock,
    period: Duration,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let post = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    loop {
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            _ = stopped.changed() => return,
        }
        let Some(current) = lock(&state).lease.clone() else {
            return;
        };
        let now = clock.now();
        let next = uyuni_core::lock::renewed(&current, now);
        let outcome = api.replace(LEASE_NAME, &post, &next).await;
        let mut state = lock(&state);
        match outcome {
            Ok(lease) => state.lease = Some(lease),
            Err(e) if status_code(&e) == Some(409) => {
                state.lost = Some(
                    "another run took it over: it was changed since this run renewed it last"
                        .to_owned(),
                );
                return;
            }
            Err(e) if status_code(&e) == Some(404) => {
                state.lost = Some("it was deleted while this run held it".to_owned());
                return;
            }
            Err(e) => {
                // A failed renewal is tried again at the next period; once the lease has run
                // out, another run may have taken it.
                if uyuni_core::lock::expires(&current).is_none_or(|end| now >= end) {
                    state.lost = Some(format!(
                        "it could not be renewed before it ran out: {}",
                        crate::error::api_reason(&e)
                    ));
                    return;
                }
                tracing::warn!(
                    "cannot renew Lease {LEASE_NAME} (tried again in {} s): {}",
                    period.as_secs(),
                    crate::error::api_reason(&e)
                );
            }
        }
    }
}
