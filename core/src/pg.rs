//! PostgreSQL majors: what today's DB image runs, which synced data it can take, and whether the
//! data needs a major upgrade first (images-today §B.4, §B.6, §E.4).
//!
//! The one place these facts live; change them here when the images move on.

use serde::Serialize;

/// The PostgreSQL major of today's `server-postgresql` image (`PG_MAJOR`).
pub const TARGET_MAJOR: u32 = 18;

/// Majors the `server-database-migration` image can upgrade from: it ships the binaries of these
/// (and of the target) only. PostgreSQL 17 was never used by Uyuni.
pub const SUPPORTED_SOURCE_MAJORS: &[u32] = &[14, 16];

/// What to do with the synced data before the DB image may start on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "decision")]
pub enum Upgrade {
    /// The data already has the target major.
    NotNeeded,
    /// `pg_upgrade` from `from` to [`TARGET_MAJOR`] into a new volume.
    Needed { from: u32 },
    /// Before the data sync the major is not known; plans show the upgrade as it would run for
    /// a supported older source, and the decision is taken at the first plan after the sync.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error(
        "the synced database has PostgreSQL version {0:?}, which is not a PostgreSQL major version number"
    )]
    NotAVersion(String),
    #[error(
        "the synced database is PostgreSQL {found}, newer than the PostgreSQL {target} of the database image: a downgrade is not possible; use a database image of PostgreSQL {found} or newer (--db-image/--pgsql-tag)",
        target = TARGET_MAJOR
    )]
    Downgrade { found: u32 },
    #[error(
        "the synced database is PostgreSQL {found}: the upgrade to PostgreSQL {target} supports PostgreSQL {supported} only; upgrade the source server's database to one of those first, then run the migration again",
        target = TARGET_MAJOR,
        supported = supported_list()
    )]
    UnsupportedSource { found: u32 },
}

fn supported_list() -> String {
    SUPPORTED_SOURCE_MAJORS
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The major of a `PG_VERSION` text: `16`, or `9.6` style for very old clusters (then `9`).
pub fn parse_major(pg_version: &str) -> Result<u32, VersionError> {
    let text = pg_version.trim();
    let major = text.split('.').next().unwrap_or_default();
    if major.is_empty() || !major.chars().all(|c| c.is_ascii_digit()) || major.len() > 4 {
        return Err(VersionError::NotAVersion(text.to_owned()));
    }
    major
        .parse()
        .map_err(|_| VersionError::NotAVersion(text.to_owned()))
}

/// The decision for a synced major; `None` when it is not known yet (before the sync).
pub fn decide(pg_version: Option<&str>) -> Result<Upgrade, VersionError> {
    let Some(text) = pg_version else {
        return Ok(Upgrade::Unknown);
    };
    let found = parse_major(text)?;
    if found == TARGET_MAJOR {
        Ok(Upgrade::NotNeeded)
    } else if found > TARGET_MAJOR {
        Err(VersionError::Downgrade { found })
    } else if SUPPORTED_SOURCE_MAJORS.contains(&found) {
        Ok(Upgrade::Needed { from: found })
    } else {
        Err(VersionError::UnsupportedSource { found })
    }
}
