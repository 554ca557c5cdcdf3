//! The volume catalogue: every PersistentVolumeClaim the server, the database and the migration
//! use, named as the official `server-helm` chart names them, with their mount paths and default
//! sizes (reference §10.1, images-today §A.6).
//!
//! Choices kept here, in one place:
//! - `ca-cert(s)` is not a volume any more: today's chart refuses to install while a `ca-certs`
//!   PVC exists, and today's images keep custom CAs in `/etc/rhn/ca` on `etc-rhn`. The data-sync
//!   copies the source's custom CAs there.
//! - The database is synced into `var-pgsql`, the unversioned claim of the reference and of the
//!   older chart. Its PostgreSQL major is only known after the sync (from the synced
//!   `PG_VERSION`); a major upgrade writes a new versioned claim and leaves this one as the backup.

use serde::Serialize;

/// What a volume is for; decides which workloads mount it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum VolumeRole {
    /// Mounted by the server container.
    Server,
    /// The PostgreSQL data directory.
    Database,
    /// Scratch space of the migration Jobs.
    Migration,
}

/// One entry of the catalogue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VolumeDef {
    pub name: &'static str,
    pub mount_path: &'static str,
    pub default_size: &'static str,
    pub role: VolumeRole,
}

impl VolumeDef {
    /// Sized for bulk data (a default claim of a gibibyte or more: packages, the database, the
    /// web tree, caches, logs, the search index) rather than for a few configuration files. The
    /// data-sync copies each such volume with an rsync of its own, and the others together
    /// ([`crate::scripts::data_sync::SyncVolume::bulk`]).
    pub fn holds_bulk_data(&self) -> bool {
        self.default_size.ends_with("Gi") || self.default_size.ends_with("Ti")
    }
}

const fn server(name: &'static str, mount_path: &'static str, size: &'static str) -> VolumeDef {
    VolumeDef {
        name,
        mount_path,
        default_size: size,
        role: VolumeRole::Server,
    }
}

/// The claim of the synced PostgreSQL data.
pub const DATABASE_VOLUME: &str = "var-pgsql";
/// The suffix of an upgrade's backup of the database volume, after that volume's name.
pub const BACKUP_SUFFIX: &str = "-backup";
/// The claim of the migration Jobs' working directory.
pub const MIGRATION_VOLUME: &str = "migration-data";

/// Every claim, in the order the reference lists (and syncs) them.
pub const CATALOGUE: &[VolumeDef] = &[
    server("var-cobbler", "/var/lib/cobbler", "10Mi"),
    server("var-search", "/var/lib/rhn/search", "10Gi"),
    server("var-salt", "/var/lib/salt", "10Mi"),
    server("var-cache", "/var/cache", "10Gi"),
    server("var-spacewalk", "/var/spacewalk", "100Gi"),
    server("var-log", "/var/log", "2Gi"),
    server("srv-salt", "/srv/salt", "10Mi"),
    server("srv-www", "/srv/www", "100Gi"),
    server("srv-tftpboot", "/srv/tftpboot", "300Mi"),
    server("srv-formulametadata", "/srv/formula_metadata", "10Mi"),
    server("srv-pillar", "/srv/pillar", "10Mi"),
    server("srv-susemanager", "/srv/susemanager", "1Mi"),
    server("srv-spacewalk", "/srv/spacewalk", "10Mi"),
    server("root", "/root", "1Mi"),
    server("run-salt-master", "/run/salt/master", "10Mi"),
    server("etc-apache2", "/etc/apache2", "1Mi"),
    server(
        "etc-systemd-multi",
        "/etc/systemd/system/multi-user.target.wants",
        "1Mi",
    ),
    server(
        "etc-systemd-sockets",
        "/etc/systemd/system/sockets.target.wants",
        "1Mi",
    ),
    server("etc-salt", "/etc/salt", "1Mi"),
    server("etc-tomcat", "/etc/tomcat", "1Mi"),
    server("etc-cobbler", "/etc/cobbler", "1Mi"),
    server("etc-sysconfig", "/etc/sysconfig", "20Mi"),
    server("etc-postfix", "/etc/postfix", "1Mi"),
    server("etc-sssd", "/etc/sssd", "1Mi"),
    server("etc-rhn", "/etc/rhn", "1Mi"),
    VolumeDef {
        name: DATABASE_VOLUME,
        mount_path: "/var/lib/pgsql/data",
        default_size: "50Gi",
        role: VolumeRole::Database,
    },
    VolumeDef {
        name: MIGRATION_VOLUME,
        mount_path: "/var/lib/uyuni-tools",
        default_size: "10Mi",
        role: VolumeRole::Migration,
    },
];

/// mgradm's named size flags and the claim each one sizes.
pub const SIZE_FLAGS: &[(&str, &str)] = &[
    ("volumes-database-size", DATABASE_VOLUME),
    ("volumes-packages-size", "var-spacewalk"),
    ("volumes-www-size", "srv-www"),
    ("volumes-cache-size", "var-cache"),
];

/// The claim the PostgreSQL major upgrade writes, named per major as the chart names it
/// (`var-pgsql18`, images-today §C.2).
pub fn upgraded_database_volume() -> String {
    format!("{DATABASE_VOLUME}{}", crate::pg::TARGET_MAJOR)
}

/// The StorageClass of the upgraded database's claim: the synced database claim's (`None`: the
/// cluster's default). Both the claim's builder and the StorageClass preflight read it.
pub fn upgraded_database_class(claims: &[VolumeClaim]) -> Option<&str> {
    claims
        .iter()
        .find(|v| v.name == DATABASE_VOLUME)
        .and_then(|v| v.storage_class.as_deref())
}

pub fn find(name: &str) -> Option<&'static VolumeDef> {
    CATALOGUE.iter().find(|v| v.name == name)
}

/// A claim as it will be requested: the catalogue entry with the user's size and class applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VolumeClaim {
    pub name: String,
    pub mount_path: String,
    pub size: String,
    /// `None`: the cluster's default StorageClass.
    pub storage_class: Option<String>,
    pub role: VolumeRole,
}
