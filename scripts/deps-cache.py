#!/usr/bin/env python3
"""Keeps the build of the third-party crates outside the work tree, as the control plane's
binaries and the Python tools' venv are, so that a fresh clone does not build them again.

    scripts/deps-cache.py restore   before the test build: a target directory without a build
                                    (a fresh clone) gets the cached one for this key, if any
    scripts/deps-cache.py save      after a test build that succeeded: caches its third-party
                                    part under this key, when the key has none yet

A fresh clone's test build compiled some 300 crates, of which four are this workspace's: the
others took about 120 s of the run's 3 minutes of build on the 2-core machines, and they change
only with Cargo.lock, the toolchain or the build's settings. The cache holds what cargo wrote for
them in target/debug (deps/, build/ and .fingerprint/), never the workspace's own crates: a clone
always builds and lints those (its files are newer than any build of them).

The key is a hash of Cargo.lock, the root Cargo.toml (profiles, features), `rustc -vV`,
`cargo -V` and the variables that change how cargo builds a crate (CARGO_INCREMENTAL,
CARGO_PROFILE_DEV_DEBUG, RUSTFLAGS, ...). Cargo checks every restored crate as it checks its own
builds (fingerprints: version, features, flags, the build scripts' inputs): one that does not
match is built again, so a stale or foreign entry costs time, never a wrong build. The build
scripts' outputs name their old directory, and cargo maps it to the new one (their root-output).

The cache is $UYUNI_DEPS_CACHE (default ~/.cache/kubectl-uyuni/deps), one directory per key,
written beside its final name and renamed into place, so that a run stopped midway or two runs
at once never leave half an entry under a key. The three most recently used keys are kept
(about 750 MB each); older ones are removed by `save`.
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

KEEP = 3
PARTS = ("deps", "build", ".fingerprint")
# What changes the crates cargo builds, besides the files hashed (cargo's own documentation
# of the environment it reads: doc.rust-lang.org/cargo/reference/environment-variables.html).
ENV = ("CARGO_INCREMENTAL", "CARGO_PROFILE_DEV_DEBUG", "CARGO_PROFILE_DEV_OPT_LEVEL",
       "CARGO_PROFILE_TEST_DEBUG", "RUSTFLAGS", "CARGO_ENCODED_RUSTFLAGS",
       "CARGO_BUILD_RUSTFLAGS", "RUSTC_WRAPPER", "CARGO_BUILD_TARGET")


def out(cmd):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout


def key(root):
    h = hashlib.sha256()
    for name in ("Cargo.lock", "Cargo.toml"):
        with open(os.path.join(root, name), "rb") as f:
            h.update(f.read())
    h.update(out(["rustc", "-vV"]).encode())
    h.update(out(["cargo", "-V"]).encode())
    for var in ENV:
        h.update(f"{var}={os.environ.get(var, '')}\n".encode())
    return h.hexdigest()[:16]


def workspace_names(root):
    """Patterns of what cargo writes for the workspace's own crates: `.fingerprint/` and
    `build/` entries are `PACKAGE-HASH`, `deps/` files `[lib]TARGET-HASH[.EXT]` (dashes of a
    target name as underscores)."""
    meta = json.loads(out(["cargo", "metadata", "--no-deps", "--format-version", "1",
                           "--offline", "--manifest-path", os.path.join(root, "Cargo.toml")]))
    packages = {p["name"] for p in meta["packages"]}
    targets = {t["name"].replace("-", "_") for p in meta["packages"] for t in p["targets"]}

    def pattern(names, lib_prefix):
        alt = "|".join(re.escape(n) for n in sorted(names))
        prefix = "(?:lib)?" if lib_prefix else ""
        return re.compile(rf"^{prefix}(?:{alt})-[0-9a-f]{{16}}(?:\..*)?$")

    return {"deps": pattern(targets, True), "build": pattern(packages, False),
            ".fingerprint": pattern(packages, False)}


def cache_dir():
    return os.environ.get("UYUNI_DEPS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "kubectl-uyuni", "deps")


def debug_dir(root):
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(root, "target")
    return os.path.join(target, "debug")


def copy(src, dst):
    """`cp -a`: modes and modification times kept (cargo compares the build scripts' times)."""
    subprocess.run(["cp", "-a", "--", src, dst], check=True)


def restore(root):
    debug = debug_dir(root)
    if os.path.isdir(os.path.join(debug, "deps")):
        print(f"deps-cache: {debug} has a build: cargo reuses it", flush=True)
        return 0
    entry = os.path.join(cache_dir(), key(root))
    if not os.path.isdir(entry):
        print(f"deps-cache: no cached build of the dependencies for this Cargo.lock, toolchain "
              f"and settings ({entry}): cargo builds them, and `save` caches them", flush=True)
        return 0
    started = time.monotonic()
    os.makedirs(debug, exist_ok=True)
    for part in PARTS:
        if os.path.isdir(os.path.join(entry, part)):
            copy(os.path.join(entry, part), debug)
    os.utime(entry)  # most recently used: evicted last
    crates = len(os.listdir(os.path.join(entry, ".fingerprint")))
    print(f"deps-cache: restored the build of {crates} dependency units from {entry} "
          f"({time.monotonic() - started:.1f} s)", flush=True)
    return 0


def save(root):
    cache = cache_dir()
    k = key(root)
    entry = os.path.join(cache, k)
    if os.path.isdir(entry):
        os.utime(entry)
        return 0
    debug = debug_dir(root)
    if not os.path.isdir(os.path.join(debug, "deps")):
        sys.exit(f"deps-cache: {debug} has no build to cache; run it after the test build")
    own = workspace_names(root)
    os.makedirs(cache, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f"{k}.", dir=cache)
    try:
        for part in PARTS:
            src = os.path.join(debug, part)
            if not os.path.isdir(src):
                continue
            dst = os.path.join(staging, part)
            os.mkdir(dst)
            names = [n for n in os.listdir(src) if not own[part].match(n)]
            if names:
                subprocess.run(["cp", "-a", "--"] + [os.path.join(src, n) for n in names] + [dst],
                               check=True)
        os.chmod(staging, 0o755)
        try:
            os.rename(staging, entry)
        except OSError:
            # Another run saved the same key first: its entry is as good as this one.
            shutil.rmtree(staging, ignore_errors=True)
            return 0
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    print(f"deps-cache: cached the dependencies' build in {entry}", flush=True)
    evict(cache)
    return 0


def evict(cache):
    """Keeps the KEEP most recently used entries; removes the others, and staging directories
    of runs that ended before renaming theirs (older than an hour)."""
    entries, now = [], time.time()
    for name in os.listdir(cache):
        path = os.path.join(cache, name)
        if re.fullmatch(r"[0-9a-f]{16}", name):
            entries.append((os.path.getmtime(path), path))
        elif re.fullmatch(r"[0-9a-f]{16}\..+", name) and now - os.path.getmtime(path) > 3600:
            shutil.rmtree(path, ignore_errors=True)
    for _, path in sorted(entries, reverse=True)[KEEP:]:
        shutil.rmtree(path, ignore_errors=True)


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("restore", "save"):
        sys.exit("usage: scripts/deps-cache.py restore|save")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return restore(root) if sys.argv[1] == "restore" else save(root)


if __name__ == "__main__":
    sys.exit(main())
