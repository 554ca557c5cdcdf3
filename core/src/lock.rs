//! One writer at a time: the `coordination.k8s.io/v1` Lease a run holds in its namespace from its
//! first write to its end, and the pure decisions about it — whether a lease found there is
//! free, ours, held by a live run or left behind by a dead one, what to write to take it, and
//! what the user is told when it is held. `effects::lease` reads and writes it and passes the
//! time in.
//!
//! Two runs in one namespace would each copy the data into the same volumes and each stop the
//! source; the lease makes the second one refuse before its first write.
//!
//! The lease follows the fields' meaning in upstream's leader election
//! (`staging/src/k8s.io/client-go/tools/leaderelection/resourcelock/leaselock.go`):
//! `holderIdentity` names the holder, `acquireTime` when it took it, `renewTime` its last
//! renewal, `leaseDurationSeconds` how long after that renewal the lease still counts as held,
//! `leaseTransitions` how often it changed hands. What a person needs to recognise the holder
//! (its command line, user and host) is in annotations.
//!
//! Time is judged on the API server's clock (see [`expires`]): the caller passes "now" as the
//! server's `Date` of the response that carried the lease, and the holder writes `renewTime` on
//! the same clock, so two hosts whose clocks disagree still agree on when a lease ran out.

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::kubectl::Kubectl;
use crate::permission::Access;

/// The lease's name, one per namespace.
pub const LEASE_NAME: &str = "kubectl-uyuni";
/// Its `app.kubernetes.io/component` label.
pub const COMPONENT: &str = "lock";
/// How long a lease counts as held after its last renewal, unless a (hidden, for tests) flag
/// says otherwise. The holder renews at a third of it, so two renewals may fail in a row (a
/// slow or briefly unreachable API server) before another run may take over.
pub const DEFAULT_DURATION_SECONDS: i32 = 60;
/// The precision of the server's clock as the caller reads it (an HTTP `Date` has whole
/// seconds): a lease expires only once it is this much past its end on that reading.
pub const CLOCK_PRECISION_SECONDS: i64 = 1;

/// Annotation: the holder's command line, as typed.
pub const COMMAND_ANNOTATION: &str = "kubectl-uyuni.io/command";
/// Annotation: the local user who ran it, and the cluster user it connected as.
pub const USER_ANNOTATION: &str = "kubectl-uyuni.io/user";
/// Annotation: the host it runs on.
pub const HOST_ANNOTATION: &str = "kubectl-uyuni.io/host";
/// Annotation: its process id on that host.
pub const PID_ANNOTATION: &str = "kubectl-uyuni.io/pid";

/// This run, as it writes itself into the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taker {
    /// Unique among runs: `user@host/pid/run id`.
    pub identity: String,
    pub command: String,
    pub user: String,
    pub host: String,
    pub pid: u32,
    pub duration_seconds: i32,
}

impl Taker {
    /// `user@host/pid/run_id` is the identity: the run id alone is a second, and two runs may
    /// start in one second.
    pub fn new(command: &str, user: &str, host: &str, pid: u32, run_id: &str) -> Taker {
        Taker {
            identity: format!("{user}@{host}/{pid}/{run_id}"),
            command: command.to_owned(),
            user: user.to_owned(),
            host: host.to_owned(),
            pid,
            duration_seconds: DEFAULT_DURATION_SECONDS,
        }
    }

    pub fn with_duration(self, duration_seconds: i32) -> Taker {
        Taker {
            duration_seconds: duration_seconds.max(1),
            ..self
        }
    }
}

/// Who holds (or last held) a lease, as far as it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub identity: String,
    pub command: Option<String>,
    pub user: Option<String>,
    pub host: Option<String>,
    pub pid: Option<u32>,
    pub since: Option<Timestamp>,
    pub renewed: Option<Timestamp>,
    pub duration_seconds: Option<i32>,
    /// When it stops counting as held unless renewed; `None`: it says too little to tell.
    pub expires: Option<Timestamp>,
}

/// How a run came to hold the lease another run held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeOver {
    /// The previous holder did not renew it in time: it ended without releasing it.
    Expired(Holder),
    /// `--force-unlock`, from a holder whose lease had not run out.
    Forced(Holder),
}

/// What to do about the lease found (or not) in the namespace.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// None there: create this one (a 409 means another run created one first).
    Create(Lease),
    /// Replace it with this one, at the resourceVersion read (a 409 means another run wrote it
    /// since); `from`: whose it was, `None` when it was released.
    Take {
        lease: Lease,
        from: Option<TakeOver>,
    },
    /// Held by a live run: refuse before writing.
    Refuse(Holder),
}

fn micro(t: Timestamp) -> MicroTime {
    MicroTime(t)
}

/// The lease this run writes at `now` (server clock).
pub fn lease(namespace: &str, taker: &Taker, now: Timestamp, transitions: i32) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(LEASE_NAME.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(crate::labels::labels(COMPONENT)),
            annotations: Some(BTreeMap::from([
                (COMMAND_ANNOTATION.to_owned(), taker.command.clone()),
                (USER_ANNOTATION.to_owned(), taker.user.clone()),
                (HOST_ANNOTATION.to_owned(), taker.host.clone()),
                (PID_ANNOTATION.to_owned(), taker.pid.to_string()),
            ])),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(taker.identity.clone()),
            lease_duration_seconds: Some(taker.duration_seconds),
            acquire_time: Some(micro(now)),
            renew_time: Some(micro(now)),
            lease_transitions: Some(transitions),
            ..Default::default()
        }),
    }
}

/// `held` renewed at `now` (server clock), everything else as it was (its resourceVersion
/// too, so that a lease taken over meanwhile is not overwritten: the update gets a 409).
pub fn renewed(held: &Lease, now: Timestamp) -> Lease {
    let mut lease = held.clone();
    if let Some(spec) = lease.spec.as_mut() {
        spec.renew_time = Some(micro(now));
    }
    lease
}

fn holder_identity(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

/// When `lease` stops counting as held: its last renewal (or its acquisition, if never
/// renewed) plus its duration, plus the clock's precision. Both times are the API server's:
/// the holder writes `renewTime` from the server's clock as its responses' `Date` tells it,
/// and the caller compares with the same reading. Upstream's leader election instead waits a
/// whole duration without seeing a renewal, on its own clock, because it cannot trust the
/// holder's clock (`leaderelection.go`, `tryAcquireOrRenew`); a run that refuses at once cannot
/// wait, so both sides read the server's clock instead. `None` when the lease has neither time
/// or no duration: written by something else, and treated as run out.
pub fn expires(lease: &Lease) -> Option<Timestamp> {
    let spec = lease.spec.as_ref()?;
    let last = spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?.0;
    let duration = i64::from(spec.lease_duration_seconds?);
    last.checked_add(SignedDuration::from_secs(
        duration + CLOCK_PRECISION_SECONDS,
    ))
    .ok()
}

/// Who holds `lease`; `None` when nobody does (released, or never held).
pub fn holder(lease: &Lease) -> Option<Holder> {
    let identity = holder_identity(lease)?;
    let annotation = |key: &str| {
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .filter(|v| !v.is_empty())
            .cloned()
    };
    let spec = lease.spec.as_ref();
    Some(Holder {
        identity: identity.to_owned(),
        command: annotation(COMMAND_ANNOTATION),
        user: annotation(USER_ANNOTATION),
        host: annotation(HOST_ANNOTATION),
        pid: annotation(PID_ANNOTATION).and_then(|p| p.parse().ok()),
        since: spec.and_then(|s| s.acquire_time.as_ref()).map(|t| t.0),
        renewed: spec.and_then(|s| s.renew_time.as_ref()).map(|t| t.0),
        duration_seconds: spec.and_then(|s| s.lease_duration_seconds),
        expires: expires(lease),
    })
}

/// Whether the run `run_id` still holds `lease` at `now` (server clock): the lease is held and
/// its holder's identity (`user@host/pid/run id`, [`Taker::new`]) ends with that run id. A
/// record whose run no longer holds it was left by a run that is gone (killed, or cut off
/// longer than the lease lasts).
pub fn held_by_run(lease: Option<&Lease>, run_id: &str, now: Timestamp) -> bool {
    lease.is_some_and(|lease| {
        held_at(lease, now)
            && holder_identity(lease).is_some_and(|id| id.ends_with(&format!("/{run_id}")))
    })
}

/// Whether `lease` still counts as held at `now` (server clock) by someone.
pub fn held_at(lease: &Lease, now: Timestamp) -> bool {
    holder_identity(lease).is_some() && expires(lease).is_some_and(|end| now < end)
}

/// What to do to hold the lease, given the one found in `namespace` (`None`: there is none) at
/// `now` on the server's clock. `force`: take it from a live holder too (`--force-unlock`).
pub fn decide(
    found: Option<&Lease>,
    namespace: &str,
    taker: &Taker,
    now: Timestamp,
    force: bool,
) -> Decision {
    let Some(found) = found else {
        return Decision::Create(lease(namespace, taker, now, 0));
    };
    let transitions = found
        .spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0);
    let previous = holder(found);
    let ours = previous
        .as_ref()
        .is_some_and(|h| h.identity == taker.identity);
    let from = match previous {
        None => None,
        Some(_) if ours => None,
        Some(h) if !held_at(found, now) => Some(TakeOver::Expired(h)),
        Some(h) if force => Some(TakeOver::Forced(h)),
        Some(h) => return Decision::Refuse(h),
    };
    let mut lease = lease(
        namespace,
        taker,
        now,
        if ours { transitions } else { transitions + 1 },
    );
    // The update must be of the version read: another run that took it meanwhile makes it
    // fail with a 409 instead of being overwritten.
    lease.metadata.resource_version = found.metadata.resource_version.clone();
    lease.metadata.uid = found.metadata.uid.clone();
    Decision::Take { lease, from }
}

/// `t` as an RFC 3339 time to the second (the form `kubectl get -o yaml` shows).
fn when(t: Timestamp) -> String {
    t.round(k8s_openapi::jiff::Unit::Second)
        .unwrap_or(t)
        .to_string()
}

/// A span of time in words: `42 s`, `3 min 5 s`, `2 h 10 min`.
fn span(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// The holder in words: its command, user, host and process, and since when.
pub fn describe(holder: &Holder, now: Timestamp) -> String {
    let command = holder
        .command
        .as_deref()
        .map_or_else(|| "an unknown command".to_owned(), |c| format!("`{c}`"));
    let mut out = format!(
        "{command} run by {} on host {}",
        holder.user.as_deref().unwrap_or("an unknown user"),
        holder.host.as_deref().unwrap_or("unknown"),
    );
    if let Some(pid) = holder.pid {
        out.push_str(&format!(" (process {pid})"));
    }
    if let Some(since) = holder.since {
        out.push_str(&format!(
            ", since {} ({} ago)",
            when(since),
            span(now.duration_since(since).as_secs())
        ));
    }
    out
}

/// The refusal of a run that found the lease held: which run holds it, when it runs out, and
/// the two ways on. `repeat`: this run's own command line, for `--force-unlock`.
pub fn refusal(
    holder: &Holder,
    namespace: &str,
    now: Timestamp,
    kubectl: &Kubectl,
    repeat: &str,
) -> String {
    let expiry = match holder.expires {
        Some(end) => format!(
            "; its lease runs out at {} (in {}) unless that run renews it, as a live run does every {} s",
            when(end),
            span(end.duration_since(now).as_secs()),
            (holder.duration_seconds.unwrap_or(DEFAULT_DURATION_SECONDS) / 3).max(1)
        ),
        None => String::new(),
    };
    format!(
        "another run is writing to namespace {namespace}: {} holds Lease {LEASE_NAME}{expiry}. Nothing was written. Wait for it to finish and run this command again (`{}` shows the holder), or, only if that process is no longer running (killed, or its host gone), take the lease over with `{repeat} --force-unlock`",
        describe(holder, now),
        kubectl.cmd(Some(namespace), &format!("get lease {LEASE_NAME} -o yaml")),
    )
}

/// The warning of a run that takes the lease over from another holder.
pub fn take_over_warning(from: &TakeOver, namespace: &str, now: Timestamp) -> String {
    match from {
        TakeOver::Expired(h) => format!(
            "took over Lease {LEASE_NAME} in namespace {namespace}: its holder, {}, stopped renewing it{} (it ended without releasing it); this run goes on from what that run left",
            describe(h, now),
            h.expires
                .map(|end| format!(" and it ran out at {}", when(end)))
                .unwrap_or_default(),
        ),
        TakeOver::Forced(h) => format!(
            "--force-unlock: taking Lease {LEASE_NAME} in namespace {namespace} over from {}, last renewed {}. If that run is in fact still going, both now write the same objects: two data copies into the same volumes and two runs stopping the source's services, and both may fail half-way. Stop that process first if it is alive",
            describe(h, now),
            h.renewed
                .map(|r| format!("{} ago", span(now.duration_since(r).as_secs())))
                .unwrap_or_else(|| "at an unknown time".to_owned()),
        ),
    }
}

/// The error of a run that lost the lease while it ran (another run took it over, or it could
/// not renew it before it ran out): it stops before its next write.
pub fn lost(namespace: &str, why: &str, kubectl: &Kubectl, repeat: &str) -> String {
    format!(
        "this run no longer holds Lease {LEASE_NAME} in namespace {namespace} ({why}), so it stopped before its next write: another run may be writing there now. See who holds it with `{}`; once no other run writes there, run `{repeat}` again to resume",
        kubectl.cmd(Some(namespace), &format!("get lease {LEASE_NAME} -o yaml")),
    )
}

/// The permissions holding the lease needs: read it, create it, renew or take it over, and
/// delete it at the end.
pub fn needs(namespace: &str) -> Vec<Access> {
    ["get", "create", "update", "delete"]
        .into_iter()
        .map(|verb| Access::new(verb, "coordination.k8s.io", "leases", Some(namespace)))
        .collect()
}
