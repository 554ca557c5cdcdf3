//! The upgrade's scripts, run under bash on temporary directories standing in for the image and
//! the volumes: the image inspection's report, and the database copy (backup and restore).

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use proptest::prelude::*;
use uyuni_core::inspect::{Inspection, Product};
use uyuni_core::scripts::JobScript;
use uyuni_core::scripts::database::{BACKUP_MARKER, Copy, render_copy};
use uyuni_core::scripts::image_inspect::{TERMINATION_LOG, render};

fn write(root: &Path, path: &str, content: &str) {
    let p = root.join(path.trim_start_matches('/'));
    fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    fs::write(&p, content).expect("write");
}

fn run(script: &JobScript, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(&script.text)
        .envs(script.env.iter().map(|(k, v)| (*k, v)))
        .env("PATH", "/usr/bin:/bin")
        .env_remove("PG_MAJOR")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("bash runs")
}

fn inspect(files: &[(&str, &str)], env: &[(&str, &str)]) -> (Inspection, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "/etc/os-release", "NAME=\"SLES\"\n");
    write(root, TERMINATION_LOG, "");
    for (path, content) in files {
        write(root, path, content);
    }
    let out = run(
        &render(
            "registry.example.com/uyuni/server:x",
            &root.display().to_string(),
        ),
        env,
    );
    assert!(out.status.success(), "{out:?}");
    let report =
        fs::read_to_string(root.join(TERMINATION_LOG.trim_start_matches('/'))).expect("report");
    (Inspection::parse(&report), report)
}

#[test]
fn the_inspection_reports_the_release_file_of_each_product() {
    let (uyuni, _) = inspect(
        &[("/etc/uyuni-release", "Uyuni release 2025.10 (Fun)\n")],
        &[],
    );
    assert_eq!(uyuni.product, Some(Product::Uyuni));
    assert_eq!(uyuni.release.as_deref(), Some("2025.10"));
    assert_eq!(uyuni.pg_major, None);
    let (manager, _) = inspect(
        &[(
            "/etc/susemanager-release",
            "SUSE Multi-Linux Manager release 5.1 (5.1.0 Beta2)\n",
        )],
        &[],
    );
    assert_eq!(manager.product, Some(Product::SuseManager));
    assert_eq!(manager.release.as_deref(), Some("5.1.0"));
    let (db, report) = inspect(&[], &[("PG_MAJOR", "18")]);
    assert_eq!(db.pg_major, Some(18));
    assert_eq!(db.product, None);
    assert_eq!(report, "pg_major=18\n");
    // An image that tells nothing: an empty report, and the planner names what is missing.
    let (nothing, report) = inspect(&[], &[]);
    assert_eq!(nothing.release, None);
    assert_eq!(report, "");
}

proptest! {
    #[test]
    fn reading_a_report_never_panics(text in ".{0,300}") {
        let report = Inspection::parse(&text);
        prop_assert!(!report.placeholder || text.contains("placeholder=true"));
    }
}

/// A database directory with `files`.
fn database(root: &Path, dir: &str, files: &[(&str, &str)]) {
    fs::create_dir_all(root.join(dir)).expect("mkdir");
    for (path, content) in files {
        write(&root.join(dir), path, content);
    }
}

fn copy(root: &Path, mode: Copy) -> Output {
    run(
        &render_copy(
            mode,
            "server:2025.10 and server-postgresql:2025.10",
            &root.display().to_string(),
        ),
        &[],
    )
}

#[test]
fn the_backup_copies_the_database_and_marks_it_last_and_the_restore_needs_the_mark() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    database(
        root,
        "migration/source",
        &[
            ("PG_VERSION", "18\n"),
            ("base/1/1259", "table"),
            ("postmaster.pid", "42"),
        ],
    );
    database(
        root,
        "migration/target",
        &[("stale", "from an interrupted copy")],
    );
    let out = copy(root, Copy::Backup);
    assert!(out.status.success(), "{out:?}");
    let target = root.join("migration/target");
    assert_eq!(
        fs::read_to_string(target.join("base/1/1259")).expect("copied"),
        "table"
    );
    assert!(
        !target.join("stale").exists(),
        "the target is emptied first"
    );
    assert!(!target.join("postmaster.pid").exists());
    assert!(
        fs::read_to_string(target.join(BACKUP_MARKER))
            .expect("marked")
            .contains("2025.10")
    );
    assert!(
        root.join("migration/source/postmaster.pid").exists(),
        "the source is only read"
    );

    // A restore from a volume without the mark (an interrupted backup) changes nothing.
    let dir = tempfile::tempdir().expect("tempdir");
    let other = dir.path();
    database(other, "migration/source", &[("PG_VERSION", "18\n")]);
    database(
        other,
        "migration/target",
        &[("PG_VERSION", "18\n"), ("base/1/1259", "newer")],
    );
    let out = copy(other, Copy::Restore);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(BACKUP_MARKER),
        "{out:?}"
    );
    assert_eq!(
        fs::read_to_string(other.join("migration/target/base/1/1259")).expect("kept"),
        "newer"
    );

    // With the mark, the restore puts the backup back, without the mark.
    fs::rename(root.join("migration/target"), other.join("backup")).expect("move");
    fs::remove_dir_all(other.join("migration/source")).expect("rm");
    fs::rename(other.join("backup"), other.join("migration/source")).expect("move");
    let out = copy(other, Copy::Restore);
    assert!(out.status.success(), "{out:?}");
    let restored = other.join("migration/target");
    assert_eq!(
        fs::read_to_string(restored.join("base/1/1259")).expect("restored"),
        "table"
    );
    assert!(!restored.join(BACKUP_MARKER).exists());
}

#[test]
fn the_copy_refuses_a_source_without_a_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    database(root, "migration/source", &[]);
    database(root, "migration/target", &[("keep", "x")]);
    let out = copy(root, Copy::Backup);
    assert!(!out.status.success());
    assert!(root.join("migration/target/keep").exists());
}
