#!/usr/bin/env python3
"""Keeps the build of the third-party crates outside the work tree, as the control plane's
binaries and the Python tools' venv are, so that a fresh clone does not build them again.

    scripts/deps-cache.py restore   before the test build: a target directory without a build
                                    (a fresh clone) gets the cached one for this Cargo.lock, or
                                    else the newest one for this toolchain and these settings
    scripts/deps-cache.py save      after a test build that succeeded: caches the third-party
                                    units it used (run-tests.py lists them in
                                    target/debug/.deps-used) when this Cargo.lock has no entry

A fresh clone's test build compiled some 300 crates, of which four are this workspace's: the
others took about 120 s of the run's 3 minutes of build on the 2-core machines, and they change
only with Cargo.lock, the toolchain or the build's settings. The cache holds what cargo wrote for
them in target/debug (deps/, build/ and .fingerprint/), never the workspace's own crates: a clone
always builds and lints those (its files are newer than any build of them).

An entry is named SETTINGS-LOCK: SETTINGS hashes `rustc -vV`, `cargo -V`, the root Cargo.toml's
profiles and the variables that change how cargo builds every crate (CARGO_INCREMENTAL,
CARGO_PROFILE_DEV_DEBUG, RUSTFLAGS, ...); LOCK hashes Cargo.lock and the root Cargo.toml. With
no entry for this Cargo.lock, the newest one of the same settings is restored: cargo then
builds only the crates that changed. Cargo checks every restored unit as it checks its own
builds (fingerprints: version, features, flags, the build scripts' inputs): one that does not
match is built again, so a stale entry costs time, never a wrong build. The build scripts'
outputs name their old directory, and cargo maps it to the new one (their root-output).

The cache is $UYUNI_DEPS_CACHE (default ~/.cache/kubectl-uyuni/deps). An entry is written beside
its final name and renamed into place, so that a run stopped midway or two runs at once never
leave half an entry. The three most recently used entries are kept (about 600 MB each); older
ones are removed by `save`.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib

KEEP = 3
PARTS = ("deps", "build", ".fingerprint")
# What changes the crates cargo builds, besides the files hashed (cargo's own documentation
# of the environment it reads: doc.rust-lang.org/cargo/reference/environment-variables.html).
ENV = ("CARGO_INCREMENTAL", "CARGO_PROFILE_DEV_DEBUG", "CARGO_PROFILE_DEV_OPT_LEVEL",
       "CARGO_PROFILE_TEST_DEBUG", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS",
       "CARGO_BUILD_RUSTFLAGS", "RUSTC_WRAPPER", "CARGO_BUILD_TARGET")


def out(cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout


def settings_key(root):
    """What every unit's build depends on: the toolchain, the profiles, the environment."""
    h = hashlib.sha256()
    h.update(out(["rustc", "-vV"]).encode())
    h.update(out(["cargo", "-V"]).encode())
    with open(os.path.join(root, "Cargo.toml"), "rb") as f:
        profiles = tomllib.load(f).get("profile", {})
    h.update(json.dumps(profiles, sort_keys=True).encode())
    for var in ENV:
        h.update(f"{var}={os.environ.get(var, '')}\n".encode())
    return h.hexdigest()[:16]


def lock_key(root):
    h = hashlib.sha256()
    for name in ("Cargo.lock", "Cargo.toml"):
        with open(os.path.join(root, name), "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:16]


ENTRY = re.compile(r"[0-9a-f]{16}-[0-9a-f]{16}")
# The hash cargo names a unit's files and directories by (libNAME-HASH.rlib, NAME-HASH/), as
# run-tests.py reads it from cargo's messages into .deps-used.
UNIT_HASH = re.compile(r"-([0-9a-f]{16})(?=\.|$)")


def cache_dir():
    return os.environ.get("UYUNI_DEPS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "kubectl-uyuni", "deps")


def debug_dir(root):
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(root, "target")
    return os.path.join(target, "debug")


def copy(srcs, dst):
    """`cp -a` into directory `dst`: modes and modification times kept (cargo compares the
    build scripts' inputs by time)."""
    subprocess.run(["cp", "-a", "--", *srcs, dst], check=True)


def restore(root):
    debug = debug_dir(root)
    if os.path.isdir(os.path.join(debug, "deps")):
        print(f"deps-cache: {debug} has a build: cargo reuses it", flush=True)
        return 0
    cache, settings = cache_dir(), settings_key(root)
    entry = os.path.join(cache, f"{settings}-{lock_key(root)}")
    how = "for this Cargo.lock"
    if not os.path.isdir(entry):
        # The newest entry of the same toolchain and settings: cargo builds what changed.
        names = os.listdir(cache) if os.path.isdir(cache) else []
        same = [os.path.join(cache, n) for n in names
                if ENTRY.fullmatch(n) and n.startswith(settings + "-")]
        if not same:
            print(f"deps-cache: no cached build of the dependencies for this toolchain and these "
                  f"settings in {cache}: cargo builds them all, and `save` caches them",
                  flush=True)
            return 0
        entry = max(same, key=os.path.getmtime)
        how = "for another Cargo.lock (cargo builds the crates that changed)"
    started = time.monotonic()
    os.makedirs(debug, exist_ok=True)
    copy([os.path.join(entry, p) for p in PARTS if os.path.isdir(os.path.join(entry, p))], debug)
    os.utime(entry)  # most recently used: evicted last
    units = len(os.listdir(os.path.join(entry, ".fingerprint")))
    print(f"deps-cache: restored the build of {units} dependency units from {entry}, {how} "
          f"({time.monotonic() - started:.1f} s)", flush=True)
    return 0


def save(root):
    cache = cache_dir()
    name = f"{settings_key(root)}-{lock_key(root)}"
    entry = os.path.join(cache, name)
    if os.path.isdir(entry):
        os.utime(entry)
        return 0
    debug = debug_dir(root)
    try:
        with open(os.path.join(debug, ".deps-used")) as f:
            used = set(f.read().split())
    except OSError as e:
        sys.exit(f"deps-cache: cannot read the units of the last test build ({e}): run "
                 f"`scripts/run-tests.py --build-only` first, which lists them")
    os.makedirs(cache, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f"{name}.", dir=cache)
    try:
        for part in PARTS:
            src = os.path.join(debug, part)
            if not os.path.isdir(src):
                continue
            dst = os.path.join(staging, part)
            os.mkdir(dst)
            names = [n for n in os.listdir(src)
                     for m in [UNIT_HASH.search(n)] if m and m.group(1) in used]
            if names:
                copy([os.path.join(src, n) for n in names], dst)
        os.chmod(staging, 0o755)
        try:
            os.rename(staging, entry)
        except OSError:
            # Another run saved the same entry first: it is as good as this one.
            shutil.rmtree(staging, ignore_errors=True)
            return 0
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    print(f"deps-cache: cached the {len(used)} dependency units of this build in {entry}",
          flush=True)
    evict(cache)
    return 0


def evict(cache):
    """Keeps the KEEP most recently used entries; removes the others, and staging directories
    of runs that ended before renaming theirs (older than an hour)."""
    entries, now = [], time.time()
    for name in os.listdir(cache):
        path = os.path.join(cache, name)
        if ENTRY.fullmatch(name):
            entries.append((os.path.getmtime(path), path))
        elif re.fullmatch(ENTRY.pattern + r"\..+", name) and now - os.path.getmtime(path) > 3600:
            shutil.rmtree(path, ignore_errors=True)
    for _, path in sorted(entries, reverse=True)[KEEP:]:
        shutil.rmtree(path, ignore_errors=True)


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("restore", "save"):
        sys.exit("usage: scripts/deps-cache.py restore|save")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1] == "save":
        try:
            return save(root)
        except (OSError, subprocess.CalledProcessError) as e:
            # The build it would have cached succeeded: the run goes on without the entry.
            print(f"deps-cache: warning: cannot cache the dependencies' build in {cache_dir()} "
                  f"({e}); the next fresh clone builds them again. Free some space there (or "
                  f"set UYUNI_DEPS_CACHE to another directory) to cache them.", file=sys.stderr)
            return 0
    try:
        return restore(root)
    except (OSError, subprocess.CalledProcessError) as e:
        # Half a restore would leave units without their files: what it copied goes, and
        # cargo starts from nothing (restore copies only into a target without a build).
        debug = debug_dir(root)
        for part in PARTS:
            shutil.rmtree(os.path.join(debug, part), ignore_errors=True)
        try:
            os.rmdir(debug)  # made by the restore, when nothing else is in it
        except OSError:
            pass
        print(f"deps-cache: warning: cannot restore the dependencies' build from "
              f"{cache_dir()} ({e}); cargo builds them all. Remove that directory if the "
              f"error persists.", file=sys.stderr)
        return 0


if __name__ == "__main__":
    sys.exit(main())
