//! The one place the plugin reads the clock: the core gets time as a value.

use std::time::{SystemTime, UNIX_EPOCH};

/// Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `YYYYMMDDhhmmss` in UTC for a number of seconds since the epoch.
pub fn timestamp(secs: u64) -> String {
    let secs = i64::try_from(secs).unwrap_or(i64::MAX);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}{:02}{:02}{:02}",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Now, as a run id (before anything is observed: what the flags are validated with).
pub fn run_id() -> String {
    timestamp(now_secs())
}

/// The run id of a run starting at `secs`: that second, or the first later one that no Job
/// already in the namespace carries (`taken`). A run id says which Jobs are this run's own —
/// the copy a `--prepare` run makes anew, the copy a final run starts with — so a second run
/// started within the same second as the one before it (a quick failure, then a retry) must not
/// inherit that run's Jobs as its own.
pub fn unused_run_id(secs: u64, taken: impl Fn(&str) -> bool) -> String {
    (secs..)
        .map(timestamp)
        .find(|id| !taken(id))
        .unwrap_or_else(|| timestamp(secs))
}

/// [`unused_run_id`] for now, against the run ids of the Jobs in `observed`.
pub fn run_id_unused_in(observed: &uyuni_core::Observed) -> String {
    let taken: std::collections::BTreeSet<&str> = observed
        .objects
        .values()
        .filter_map(|o| match o {
            uyuni_core::Object::Job(job) => job
                .metadata
                .annotations
                .as_ref()?
                .get(uyuni_core::labels::RUN_ANNOTATION)
                .map(String::as_str),
            _ => None,
        })
        .collect();
    unused_run_id(now_secs(), |id| taken.contains(id))
}
