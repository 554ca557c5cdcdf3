//! The image checks' scripts (images-today §E.4): each runs inside one target image, for a few
//! seconds, before anything else of the migration is written, and says whether the image is one
//! the migration supports. A check reads files and the environment only; it changes nothing.
//!
//! What is checked, per image:
//! - server: the image sets the server up by itself at start the way the migration relies on —
//!   `/usr/lib/entrypoint-lib.sh` (sourced by `00-mgrSetup.sh`) exists and reads the setup
//!   marker where the fix-up Job writes it, and `/usr/bin/startup-check.sh`, which the server's
//!   startup probe runs, exists (server-image 5.2.9 and later, see [`FIRST_SERVER_IMAGE`]);
//! - database: `PG_MAJOR` (or `postgres --version`) is [`pg::TARGET_MAJOR`], and the image has
//!   its own start-up and upgrade hooks, `/uyuni-entrypoint.sh` and `/docker-entrypoint-upgdb.d`
//!   (server-postgresql 5.2.3 and later);
//! - database upgrade: `pg_upgrade` of the target major and the binaries of at least one
//!   supported source major.
//!
//! Each prints one line starting with `SUPPORTED:` or `UNSUPPORTED:`; the latter says why and
//! what to use instead, and the script exits 1, which fails the Job and shows that line.
//! Like the other scripts, each takes a `local_root` prefixing every path, for tests.

use super::data_sync::shell_quote;
use super::database;
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

struct Out(String);

impl Out {
    fn line(&mut self, s: &str) {
        self.0.push_str(s);
        self.0.push('\n');
    }
}

fn prelude(o: &mut Out, title: &str, image: &str, local_root: &str) {
    o.line(&format!("# kubectl-uyuni: {title}. Rendered for bash."));
    o.line("set -uo pipefail");
    o.line(&format!(
        "ROOT={}",
        shell_quote(local_root.trim_end_matches('/'))
    ));
    o.line(&format!("IMAGE={}", shell_quote(image)));
    o.line("unsupported() {");
    o.line("  printf 'UNSUPPORTED: %s\\n' \"$*\"");
    o.line("  exit 1");
    o.line("}");
    // What the image says it is helps the user read the verdict; it is not part of it.
    o.line("if [ -r \"$ROOT/etc/os-release\" ]; then");
    o.line("  pretty=$(sed -n 's/^PRETTY_NAME=\"\\{0,1\\}\\([^\"]*\\)\"\\{0,1\\}$/\\1/p' \"$ROOT/etc/os-release\")");
    o.line("  printf 'Image %s is based on %s\\n' \"$IMAGE\" \"${pretty:-an unnamed system}\"");
    o.line("fi");
}

fn missing_files(o: &mut Out, files: &[&str]) {
    o.line("missing=()");
    o.line(&format!(
        "for f in {}; do",
        files
            .iter()
            .map(|f| shell_quote(f))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    o.line("  [ -e \"$ROOT$f\" ] || missing+=(\"$f\")");
    o.line("done");
}

/// The check of the server image.
pub fn render_server(image: &str, local_root: &str) -> String {
    let mut o = Out(String::new());
    prelude(&mut o, "check the server image", image, local_root);
    missing_files(&mut o, SERVER_MARKERS);
    o.line(&format!("FIRST={}", shell_quote(FIRST_SERVER_IMAGE)));
    o.line(&format!("MARKER={}", shell_quote(database::SETUP_MARKER)));
    o.line(&format!("SETUP_LIB={}", shell_quote(SERVER_SETUP_LIBRARY)));
    o.line("if [ \"${#missing[@]}\" -gt 0 ]; then");
    o.line("  unsupported \"server image $IMAGE lacks ${missing[*]}: it does not set the server up at start the way the migration relies on (server images before $FIRST; 5.2.7 and 5.2.8 read their setup marker in /root and have no startup check). Use a server image of $FIRST or later, or the default latest (--image/--tag)\"");
    o.line("fi");
    o.line("# The fix-up Job writes the marker there: an image that looks elsewhere would set the");
    o.line("# server up again on the migrated database.");
    o.line("if ! grep -qF -- \"$MARKER\" \"$ROOT$SETUP_LIB\"; then");
    o.line("  unsupported \"server image $IMAGE does not read its setup marker at $MARKER ($SETUP_LIB does not name it): it would set the server up again on the migrated data. Use a server image of $FIRST or later, or the default latest (--image/--tag)\"");
    o.line("fi");
    o.line("echo \"SUPPORTED: server image $IMAGE sets the server up by itself at start\"");
    o.0
}

/// The check of the database image.
pub fn render_database(image: &str, local_root: &str) -> String {
    let mut o = Out(String::new());
    prelude(&mut o, "check the database image", image, local_root);
    o.line(&format!("WANT={}", pg::TARGET_MAJOR));
    o.line("major=${PG_MAJOR:-}");
    o.line("if [ -z \"$major\" ] && command -v postgres >/dev/null 2>&1; then");
    o.line("  version=$(postgres --version 2>/dev/null || true)");
    o.line("  if [[ $version =~ \\)\\ ([0-9]+) ]]; then major=${BASH_REMATCH[1]}; fi");
    o.line("fi");
    o.line("major=${major%%.*}");
    o.line("if [ -z \"$major\" ]; then");
    o.line("  unsupported \"database image $IMAGE tells no PostgreSQL version (no PG_MAJOR, no postgres binary): it is not a server-postgresql image. Use server-postgresql of the same release as the server (--db-image/--pgsql-tag)\"");
    o.line("fi");
    o.line("if [ \"$major\" != \"$WANT\" ]; then");
    o.line("  unsupported \"database image $IMAGE runs PostgreSQL $major; the migration targets PostgreSQL $WANT (server-postgresql 5.2.3 or later). Use such an image (--db-image/--pgsql-tag)\"");
    o.line("fi");
    missing_files(&mut o, DATABASE_MARKERS);
    o.line("if [ \"${#missing[@]}\" -gt 0 ]; then");
    o.line("  unsupported \"database image $IMAGE runs PostgreSQL $major but lacks ${missing[*]}: it does not prepare migrated data at start (server-postgresql before 5.2.3). Use server-postgresql 5.2.3 or later (--db-image/--pgsql-tag)\"");
    o.line("fi");
    o.line(
        "echo \"SUPPORTED: database image $IMAGE runs PostgreSQL $major with its start-up hooks\"",
    );
    o.0
}

fn source_majors(separator: &str) -> String {
    pg::SUPPORTED_SOURCE_MAJORS
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}

/// The check of the database upgrade image.
pub fn render_database_upgrade(image: &str, local_root: &str) -> String {
    let mut o = Out(String::new());
    prelude(
        &mut o,
        "check the database upgrade image",
        image,
        local_root,
    );
    o.line(&format!("TO={}", pg::TARGET_MAJOR));
    o.line("if [ ! -x \"$ROOT/usr/lib/postgresql$TO/bin/pg_upgrade\" ]; then");
    o.line("  unsupported \"database upgrade image $IMAGE has no /usr/lib/postgresql$TO/bin/pg_upgrade: it cannot upgrade to PostgreSQL $TO. Use server-database-migration of the same release as the server (--dbupgrade-image/--dbupgrade-tag)\"");
    o.line("fi");
    o.line("from=()");
    o.line(&format!("for v in {}; do", source_majors(" ")));
    o.line("  [ -x \"$ROOT/usr/lib/postgresql$v/bin/postgres\" ] && from+=(\"$v\")");
    o.line("done");
    o.line("if [ \"${#from[@]}\" -eq 0 ]; then");
    o.line(&format!(
        "  unsupported \"database upgrade image $IMAGE has the binaries of none of PostgreSQL {}: it cannot upgrade a migrated database. Use server-database-migration of the same release as the server (--dbupgrade-image/--dbupgrade-tag)\"",
        source_majors(" or ")
    ));
    o.line("fi");
    o.line(
        "echo \"SUPPORTED: database upgrade image $IMAGE upgrades PostgreSQL ${from[*]} to $TO\"",
    );
    o.0
}
