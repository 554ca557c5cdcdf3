//! The time zone names the server image knows, for `--tz`.
//!
//! The image links `/etc/localtime` to `/usr/share/zoneinfo/$TZ` at its start, and its
//! `timezone_alignment.sh` refuses a `TZ` without such a file ("Invalid timezone", exit 1;
//! uyuni-project/uyuni `containers/server-image/root/usr/bin/timezone_alignment.sh` and
//! `root/docker-entrypoint-init.d/10-setup-timezone.sh`): a name outside the tz database would
//! fail the server's start after every object was written. So the names are checked here,
//! against the tz database's zones and links carried in `timezones.txt` (generated from
//! tzdata 2025b's `tzdata.zi`; the file's header says how), before any write.

/// The tz database's names, one a line, sorted (`#` lines are the header).
const NAMES: &str = include_str!("timezones.txt");

/// Every name of the tz database, sorted.
pub fn names() -> impl Iterator<Item = &'static str> {
    NAMES
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// Whether `name` is a zone or link of the tz database (case-sensitive, as the image's
/// `/usr/share/zoneinfo/` paths are).
pub fn is_known(name: &str) -> bool {
    names().any(|n| n == name)
}

/// A known name that differs from `name` only in case, to suggest.
pub fn suggestion(name: &str) -> Option<&'static str> {
    names().find(|n| n.eq_ignore_ascii_case(name))
}
