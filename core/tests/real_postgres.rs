//! The database Jobs' scripts against real PostgreSQL 16 and 18 (`servers` says where they come
//! from).

pub mod servers;

use std::process::Command;

use servers::{pg_user, text};

/// Every tool the upgrade, the re-hash and the tests use is in both wheels and runs as the
/// servers' user, with the major it claims.
#[test]
fn both_wheels_carry_every_tool_the_database_jobs_use() {
    let Some(installs) = servers::installs("the wheels' check") else {
        return;
    };
    let user = pg_user();
    for (major, version) in [(16, "16."), (18, "18.")] {
        for tool in [
            "postgres",
            "initdb",
            "pg_ctl",
            "pg_upgrade",
            "pg_checksums",
            "pg_controldata",
            "psql",
            "vacuumdb",
            "pg_dump",
        ] {
            let path = installs.bin(major).join(tool);
            let out = if servers::is_root() {
                Command::new("setpriv")
                    .arg(format!("--reuid={}", user.uid))
                    .arg(format!("--regid={}", user.gid))
                    .args(["--clear-groups", "--"])
                    .arg(&path)
                    .arg("--version")
                    .output()
            } else {
                Command::new(&path).arg("--version").output()
            }
            .expect("runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains(&format!("(PostgreSQL) {version}")),
                "{}: {}",
                path.display(),
                text(&out)
            );
        }
    }
    // vacuumdb 18 has the option the upgrade's statistics use.
    let help = Command::new(installs.bin(18).join("vacuumdb"))
        .arg("--help")
        .output()
        .expect("runs");
    assert!(String::from_utf8_lossy(&help.stdout).contains("--missing-stats-only"));
}
