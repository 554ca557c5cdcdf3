//! The image checks' scripts (images-today §E.4): each runs inside one target image, for a few
//! seconds, before anything else of the migration is written, and says whether the image is one
//! the migration supports. A check reads files and the environment only; it changes nothing.
//!
//! What is checked, per image:
//! - server: the image sets the server up by itself at start the way the migration relies on —
//!   `/usr/lib/entrypoint-lib.sh` (sourced by `00-mgrSetup.sh`) exists and reads the setup
//!   marker where the fix-up Job writes it, and `/usr/bin/startup-check.sh`, which the server's
//!   startup probe runs, exists (server-image 5.2.9 and later, see [`FIRST_SERVER_IMAGE`]).
//!   A supported server image is also reported ([`crate::inspect::Inspection::ca_copy`]):
//!   whether one of its start scripts copies the CA into the Salt file root ([`SALT_CA_FILE`]);
//! - database: `PG_MAJOR` (or `postgres --version`) is [`pg::TARGET_MAJOR`] (for a new server:
//!   that or newer), reported as `pg_major` like an inspection, and the image has
//!   its own start-up and upgrade hooks, `/uyuni-entrypoint.sh` and `/docker-entrypoint-upgdb.d`
//!   (server-postgresql 5.2.3 and later);
//! - database upgrade: `pg_upgrade` of the target major and the binaries of at least one
//!   supported source major.
//!
//! Each prints one line starting with `SUPPORTED:` or `UNSUPPORTED:`; the latter says why and
//! what to use instead, and the script exits 1, which fails the Job and shows that line.
//! Like the other scripts, each takes a `local_root` prefixing every path, for tests, and its
//! parameters reach it as environment variables ([`JobScript`]).

use super::{JobScript, database};
use crate::pg;

/// The first server image the migration supports. Upstream's history
/// (`containers/server-image/` in uyuni-project/uyuni):
/// - 5.2.7 ("Move server setup to the server container image") and 5.2.8 already set the server
///   up at start, but their `/docker-entrypoint-init.d/00-mgrSetup.sh` (stored version
///   `@927a5945`) skips the setup only when `/root/.MANAGER_SETUP_COMPLETE` exists, and has no
///   `/usr/bin/startup-check.sh`;
/// - 5.2.9 ("Implement startup check script", `server-image.changes`) adds
///   `/usr/bin/startup-check.sh` and `/usr/lib/entrypoint-lib.sh` (both `@18abb310`), whose
///   `check_current_installation` reads `/var/spacewalk/.MANAGER_SETUP_COMPLETE` and moves the
///   legacy marker there.
///
/// The fix-up Job puts the marker in `/var/spacewalk` ([`database::SETUP_MARKER`]), and the
/// server's startup probe runs `startup-check.sh`: on 5.2.7 or 5.2.8 the probe could never pass,
/// and the image would run its first-start setup (`spacewalk-setup --clear-db`) on the migrated
/// database. So 5.2.9 is the first, not 5.2.7.
pub const FIRST_SERVER_IMAGE: &str = "5.2.9";

/// Files whose presence marks a server image that runs its own setup (images-today §E.4).
pub const SERVER_MARKERS: &[&str] = &["/usr/lib/entrypoint-lib.sh", "/usr/bin/startup-check.sh"];
/// The library of the setup that must read the marker where the fix-up Job writes it.
pub const SERVER_SETUP_LIBRARY: &str = "/usr/lib/entrypoint-lib.sh";
/// Files whose presence marks a database image with its own start-up and upgrade hooks.
pub const DATABASE_MARKERS: &[&str] = &["/uyuni-entrypoint.sh", "/docker-entrypoint-upgdb.d"];

/// The directory of the scripts the server image runs at every start
/// (`containers/server-image/root/docker-entrypoint-init.d/` in uyuni-project/uyuni).
pub const SERVER_INIT_DIR: &str = "/docker-entrypoint-init.d";
/// The CA's place in the Salt file root, which Salt serves to the clients as
/// `salt://certs/RHN-ORG-TRUSTED-SSL-CERT` (`susemanager-utils/susemanager-sls/salt/certs/*.sls`).
/// The server image's `15-setup-trust-store.sh` copies the trust anchor there at every start
/// (stored versions `@4d6fcfde` and `@2ca715b5`); the check reports whether a start script of the
/// image names this file (`core/src/builders/server.rs` says what that means for the mount).
pub const SALT_CA_FILE: &str = "/usr/share/susemanager/salt/certs/RHN-ORG-TRUSTED-SSL-CERT";

/// The scripts (`core/scripts/image-check-*.sh`), run after [`super::LIB`].
pub const SERVER_SCRIPT: &str = include_str!("../../scripts/image-check-server.sh");
pub const DATABASE_SCRIPT: &str = include_str!("../../scripts/image-check-db.sh");
pub const DATABASE_UPGRADE_SCRIPT: &str = include_str!("../../scripts/image-check-db-upgrade.sh");

/// The check of the server image.
pub fn render_server(image: &str, local_root: &str) -> JobScript {
    JobScript::new(
        SERVER_SCRIPT,
        vec![
            ("IMAGE", image.to_owned()),
            ("SERVER_MARKERS", SERVER_MARKERS.join("\n")),
            ("SETUP_MARKER", database::SETUP_MARKER.to_owned()),
            ("SETUP_LIBRARY", SERVER_SETUP_LIBRARY.to_owned()),
            ("FIRST_SERVER_IMAGE", FIRST_SERVER_IMAGE.to_owned()),
            ("INIT_DIR", SERVER_INIT_DIR.to_owned()),
            ("SALT_CA_FILE", SALT_CA_FILE.to_owned()),
            (
                "TERMINATION_LOG",
                super::image_inspect::TERMINATION_LOG.to_owned(),
            ),
        ],
        local_root,
    )
}

/// The check of a migration's database image: PostgreSQL [`pg::TARGET_MAJOR`] exactly, the
/// major its PostgreSQL upgrade (`db-upgrade.sh`, `image-check-db-upgrade.sh`) and its password
/// step (`db-passwords.sh`) go to.
pub fn render_database(image: &str, local_root: &str) -> JobScript {
    database_check(image, local_root, "exactly")
}

/// The check of a new server's database image: PostgreSQL [`pg::TARGET_MAJOR`] or newer, as
/// the image reports it (nothing of a new server upgrades data between majors).
pub fn render_database_for_install(image: &str, local_root: &str) -> JobScript {
    database_check(image, local_root, "at-least")
}

fn database_check(image: &str, local_root: &str, rule: &str) -> JobScript {
    JobScript::new(
        DATABASE_SCRIPT,
        vec![
            ("IMAGE", image.to_owned()),
            ("TARGET_MAJOR", pg::TARGET_MAJOR.to_string()),
            ("MAJOR_RULE", rule.to_owned()),
            ("DATABASE_MARKERS", DATABASE_MARKERS.join("\n")),
            (
                "TERMINATION_LOG",
                super::image_inspect::TERMINATION_LOG.to_owned(),
            ),
        ],
        local_root,
    )
}

/// The check of the database upgrade image.
pub fn render_database_upgrade(image: &str, local_root: &str) -> JobScript {
    let majors: Vec<String> = pg::SUPPORTED_SOURCE_MAJORS
        .iter()
        .map(u32::to_string)
        .collect();
    render_database_upgrade_of(image, &majors.join(" "), pg::TARGET_MAJOR, local_root)
}

/// The check of the database upgrade image for an upgrade's PostgreSQL major upgrade: the same
/// script, from the major the database runs to the one its new image runs.
pub fn render_database_upgrade_between(
    image: &str,
    from: u32,
    to: u32,
    local_root: &str,
) -> JobScript {
    render_database_upgrade_of(image, &from.to_string(), to, local_root)
}

fn render_database_upgrade_of(
    image: &str,
    source_majors: &str,
    target: u32,
    local_root: &str,
) -> JobScript {
    JobScript::new(
        DATABASE_UPGRADE_SCRIPT,
        vec![
            ("IMAGE", image.to_owned()),
            ("TARGET_MAJOR", target.to_string()),
            ("SOURCE_MAJORS", source_majors.to_owned()),
        ],
        local_root,
    )
}
