//! `scripts/deps-cache.py`, the test command's cache of the third-party crates' build: run on a
//! made-up checkout (its own copy of the script, Cargo.toml, Cargo.lock and a target directory
//! of empty units), so that what it copies, restores, falls back to and evicts is checked
//! without a build.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const DEP: &str = "0123456789abcdef"; // a third-party library the build used
const SCRIPT_RUN: &str = "fedcba9876543210"; // a third-party build script's run
const STALE: &str = "1111111111111111"; // a third-party unit the build did not use
const OWN: &str = "2222222222222222"; // a workspace crate (never listed as used)

struct Checkout {
    root: PathBuf,
    cache: PathBuf,
}

/// A checkout under `base` named `name`, its Cargo.lock saying `lock` and its dev profile
/// `profile`; the cache is `base/cache`, shared by the checkouts of one test.
fn checkout(base: &Path, name: &str, lock: &str, profile: &str) -> Checkout {
    let root = base.join(name);
    fs::create_dir_all(root.join("scripts")).expect("mkdir");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/deps-cache.py");
    fs::copy(&script, root.join("scripts/deps-cache.py")).expect("copy the script");
    fs::write(
        root.join("Cargo.toml"),
        format!("[workspace]\n\n[profile.dev]\n{profile}\n"),
    )
    .expect("write Cargo.toml");
    fs::write(root.join("Cargo.lock"), lock).expect("write Cargo.lock");
    Checkout {
        root,
        cache: base.join("cache"),
    }
}

impl Checkout {
    fn run(&self, verb: &str) -> Output {
        Command::new("python3")
            .arg(self.root.join("scripts/deps-cache.py"))
            .arg(verb)
            .env("UYUNI_DEPS_CACHE", &self.cache)
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .expect("python3 runs")
    }

    fn ok(&self, verb: &str) -> String {
        let out = self.run(verb);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "deps-cache.py {verb}: {text}");
        text
    }

    fn debug(&self) -> PathBuf {
        self.root.join("target/debug")
    }

    /// A target directory as a test build leaves it: units of both kinds, and the list of the
    /// third-party ones it used.
    fn build(&self) {
        let d = self.debug();
        for (path, text) in [
            (format!("deps/libdep-{DEP}.rlib"), "dep's library"),
            (format!("deps/dep-{DEP}.d"), "dep's dep-info"),
            (format!(".fingerprint/dep-{DEP}/lib-dep"), "fingerprint"),
            (
                format!("build/ring-{SCRIPT_RUN}/out/libring_core.a"),
                "native",
            ),
            (format!(".fingerprint/ring-{SCRIPT_RUN}/run"), "fingerprint"),
            (format!("deps/libold-{STALE}.rlib"), "unused"),
            (format!(".fingerprint/old-{STALE}/lib-old"), "unused"),
            (format!("deps/libuyuni_core-{OWN}.rlib"), "ours"),
            (format!(".fingerprint/kubectl-uyuni-core-{OWN}/lib"), "ours"),
            ("kubectl-uyuni".to_string(), "an uplifted binary"),
        ] {
            let file = d.join(path);
            fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            fs::write(file, text).expect("write a unit");
        }
        fs::write(d.join(".deps-used"), format!("{DEP}\n{SCRIPT_RUN}\n")).expect("write");
    }

    fn entries(&self) -> Vec<PathBuf> {
        let mut entries: Vec<PathBuf> = fs::read_dir(&self.cache)
            .expect("the cache exists")
            .map(|e| e.expect("entry").path())
            .collect();
        entries.sort();
        entries
    }
}

#[test]
fn save_keeps_the_units_the_build_used_and_a_fresh_clone_gets_them_back() {
    let base = tempfile::tempdir().expect("tempdir");
    let first = checkout(base.path(), "first", "lock 1", "debug = false");
    first.build();
    let said = first.ok("save");
    assert!(said.contains("cached the 2 dependency units"), "{said}");
    let entries = first.entries();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    assert!(entry.join(format!("deps/libdep-{DEP}.rlib")).is_file());
    assert!(entry.join(format!("deps/dep-{DEP}.d")).is_file());
    assert!(
        entry
            .join(format!(".fingerprint/dep-{DEP}/lib-dep"))
            .is_file()
    );
    assert!(
        entry
            .join(format!("build/ring-{SCRIPT_RUN}/out/libring_core.a"))
            .is_file()
    );
    for never in [
        format!("deps/libold-{STALE}.rlib"),
        format!(".fingerprint/old-{STALE}"),
        format!("deps/libuyuni_core-{OWN}.rlib"),
        format!(".fingerprint/kubectl-uyuni-core-{OWN}"),
        "kubectl-uyuni".to_string(),
    ] {
        assert!(!entry.join(&never).exists(), "{never} was cached");
    }
    // Saving again under the same Cargo.lock changes nothing.
    first.ok("save");
    assert_eq!(first.entries(), entries);

    let clone = checkout(base.path(), "clone", "lock 1", "debug = false");
    let said = clone.ok("restore");
    assert!(said.contains("for this Cargo.lock"), "{said}");
    let restored = clone.debug().join(format!("deps/libdep-{DEP}.rlib"));
    assert_eq!(
        fs::read_to_string(&restored).expect("restored"),
        "dep's library"
    );
    // Modification times are kept: cargo compares the build scripts' inputs by time.
    let time = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).expect("mtime");
    assert_eq!(
        time(&restored),
        time(&first.debug().join(format!("deps/libdep-{DEP}.rlib")))
    );
    assert!(
        clone
            .debug()
            .join(format!("build/ring-{SCRIPT_RUN}/out/libring_core.a"))
            .is_file()
    );
    assert!(
        !clone
            .debug()
            .join(format!("deps/libold-{STALE}.rlib"))
            .exists()
    );

    // A target that has a build is left as it is.
    fs::write(&restored, "rebuilt here").expect("write");
    let said = clone.ok("restore");
    assert!(said.contains("has a build"), "{said}");
    assert_eq!(fs::read_to_string(&restored).expect("kept"), "rebuilt here");
}

#[test]
fn another_cargo_lock_starts_from_the_newest_entry_and_other_settings_from_none() {
    let base = tempfile::tempdir().expect("tempdir");
    let first = checkout(base.path(), "first", "lock 1", "debug = false");
    first.build();
    first.ok("save");

    let bumped = checkout(base.path(), "bumped", "lock 2", "debug = false");
    let said = bumped.ok("restore");
    assert!(said.contains("for another Cargo.lock"), "{said}");
    assert!(
        bumped
            .debug()
            .join(format!("deps/libdep-{DEP}.rlib"))
            .is_file()
    );

    // Other profiles build every unit differently: nothing to start from.
    let optimized = checkout(base.path(), "optimized", "lock 1", "opt-level = 1");
    let said = optimized.ok("restore");
    assert!(said.contains("no cached build"), "{said}");
    assert!(!optimized.debug().join("deps").exists());
}

#[test]
fn the_three_newest_entries_are_kept() {
    let base = tempfile::tempdir().expect("tempdir");
    let mut saved = Vec::new();
    for n in 1..=4 {
        let c = checkout(base.path(), &format!("c{n}"), &format!("lock {n}"), "");
        c.build();
        c.ok("save");
        let new: Vec<PathBuf> = c
            .entries()
            .into_iter()
            .filter(|e| !saved.contains(e))
            .collect();
        assert_eq!(new.len(), 1, "one new entry per Cargo.lock: {new:?}");
        saved.push(new[0].clone());
    }
    let left = checkout(base.path(), "c4", "lock 4", "").entries();
    assert_eq!(left.len(), 3, "{left:?}");
    assert!(
        !left.contains(&saved[0]),
        "the oldest entry stays: {left:?}"
    );
}

#[test]
fn save_without_the_builds_list_of_units_says_what_to_run() {
    let base = tempfile::tempdir().expect("tempdir");
    let c = checkout(base.path(), "c", "lock", "");
    c.build();
    fs::remove_file(c.debug().join(".deps-used")).expect("rm");
    let out = c.run("save");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run-tests.py --build-only"), "{err}");
    assert!(!c.cache.exists() || c.entries().is_empty());
}

#[test]
fn a_cache_that_cannot_be_written_or_read_costs_a_full_build_never_the_run() {
    let base = tempfile::tempdir().expect("tempdir");
    // Where the cache should be, a file: nothing can be saved there.
    let blocked = checkout(base.path(), "blocked", "lock", "");
    fs::write(&blocked.cache, "not a directory").expect("write");
    blocked.build();
    let said = blocked.ok("save");
    assert!(
        said.contains("cannot cache the dependencies' build"),
        "{said}"
    );

    // An entry that breaks halfway through a restore: the clone is left with no build at all
    // (cargo starts from nothing), not with units missing their files.
    let good = checkout(base.path(), "good", "lock", "");
    fs::remove_file(&good.cache).expect("rm");
    good.build();
    good.ok("save");
    let entry = good.entries().remove(0);
    fs::remove_dir_all(entry.join(".fingerprint")).expect("rm");
    fs::write(entry.join(".fingerprint"), "not a directory").expect("write");
    let clone = checkout(base.path(), "clone", "lock", "");
    let said = clone.ok("restore");
    assert!(
        said.contains("cannot restore the dependencies' build"),
        "{said}"
    );
    assert!(!clone.debug().exists(), "a half restore was left behind");
}
