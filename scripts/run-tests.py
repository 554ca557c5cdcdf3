#!/usr/bin/env python3
"""Runs the workspace's tests a few processes at a time, longest first, and sums them up.

`cargo test` runs one test binary after the other. Ours spend most of their time waiting — on
the simulated cluster, on the real control plane's controllers, on Jobs played by the node
agent — so on the 2-core machines the suite took twice the time its CPU needs. This builds the
binaries with cargo (`cargo test --no-run`), then runs them in `--jobs` lanes, printing each
item's output when it ends and one closing line for all: `tests: N passed, N failed, N skipped`.

Each crate's integration tests are one binary (`integration`, tests/main.rs; one link instead
of one per file), whose modules are the files under tests/. An item is one module of it, run
as a process of its own with `--exact` and the module's test names (from `--list`); the long
modules in SHARDS are dealt into several items. The unit-test binaries run whole, and the doc
tests are one `cargo test --doc` item.

The doc tests are a cargo command: they run in a lane of their own beside the test lanes
(cargo holds the target directory's lock while it builds; a test lane waiting on it would be a
lane lost).

With `--clippy` the test build is the lint: the workspace's crates are compiled by clippy-driver
(`RUSTC_WORKSPACE_WRAPPER`, what `cargo clippy` itself sets, with `-D warnings` in `CLIPPY_ARGS`,
the variable `cargo clippy` passes its arguments in) and `--tests --benches --examples`, so
every target `cargo clippy --all-targets` checks is linted while it is built, and a lint fails
the build. A target declared `test = false` has no test harness built (the library of effects
and testdata, whose unit tests are modules of their integration tests, and binaries without
tests); a test under one fails the run (`tests_in_untested_targets`).
`cargo clippy` apart from the test build checked every dependency again (metadata only, its own
artifacts): about 144 s of CPU on a clean clone, the run's longest item (288 s in its lane beside
the tests on 2 cores). The lints themselves add about 12 s of CPU to the test build. The doc
tests get the same wrapper, so that they reuse the test build's libraries.

cargo-nextest does the same per test, but it is not preinstalled and building it costs CI
minutes on every fresh machine; this needs only Python and cargo.

Usage: scripts/run-tests.py [--jobs N] [--clippy] [--build-only] [-- ARGS FOR EVERY TEST BINARY]
The order: items known to be long start first (LONG below); the rest follow in name order.
Exit status 1 when the build (with `--clippy`, a lint) or any test failed, or an item ended
without a result.

Measured on the shared 2-core machine (other builds running, load 7 to 15, so the figures
move by a third between runs), the workspace's crates rebuilt over built dependencies: with
one binary per test file, 7 min 11 s building the tests and 775 s running them (20 min 16 s in
all); with one binary per crate, 3 min 0 s and 523 s (11 min 44 s in all). In both runs the
doc tests took 133 s, rebuilding ring, rustls and kube because CARGO_MANIFEST_DIR was in
cargo's environment (and the next test build rebuilt them back); without it they take 2 s
after the test build.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import tomllib

# Longest first, so that the long ones do not start last and stretch the run: test modules
# (`package/module`, the file under tests/) and the other items by their label (seconds of one
# run-tests.py run, 3 lanes on 2 cores shared with other builds, load 7 to 9; only the order
# matters). The doc tests (133 s in that run, rebuilding ring, rustls and kube, see run(); about
# 30 s without the rebuild) are not listed: they run in the cargo lane (see the docstring).
LONG = [
    "plugin/e2e_real_migration",  # 26 tests at once (install's, upgrade's, uninstall's, status' and rbac's too), 3 shared control planes
    "plugin/e2e_migration",  # 3 shards of ~90 s
    "plugin/e2e_safety",  # 79 s
    # 6 shards (migrate, install, upgrade; SIGKILL, SIGINT): every write boundary and every
    # Job, killed and run again; 356 cases, ~1.4 s of CPU each, two at once in each shard (a
    # case's runs wait half of their time), migrate's 90 per signal the longest.
    "plugin/e2e_interrupt",
    "plugin/e2e_faults",  # 3 shards (migrate, install: 21 runs each; upgrade: 11), ~100 s
    "testdata/node_agent",  # 59 s; node_agent_exec's commands run in it, on one cluster
    # 4 shards, one property each: 2 s to ~35 s of CPU each (194 s as one item, sharing 2 cores
    # with other items; 105 s of CPU then, ~80 s with SHA-256 optimized, see Cargo.toml).
    "core/properties",
    # 3 shards of ~35 s (124 s as one item): every test runs the script under bash, no sleeps.
    "core/data_sync_script",
    "plugin/e2e_rerun",  # 46 s
    "testdata/real_node",  # ~50 s: two real-node clusters, one after the other (a lock)
    "core/real_postgres",  # ~60 s: initdb, pg_upgrade 16 -> 18 and servers started, for real
    "testdata/real_control_plane",  # 44 s
    "plugin/dry_run",  # 42 s
    "testdata/cluster_addons",  # 46 s with two fixed 6 s waits; now it counts resync passes
    "testdata/differential",  # 31 s
    "testdata/kubectl",  # 29 s
    "plugin/e2e",  # 28 s
    "effects/sim_cluster",  # 20 s
    "core/schemas",  # 13 s
    "core/lib:uyuni_core",  # 10 s, the core's unit tests
    "plugin/e2e_requests",  # 8 s
    "testdata/sim",  # 7 s
]

# Test modules whose tests are independent of each other and long enough together to be the
# run's long pole: their tests are dealt into this many shards, each a process of its own.
# The two CPU-bound core modules (properties, the data-sync script under bash) were the run's
# two longest items, each keeping one lane busy for two to three minutes.
SHARDS = {
    "plugin/e2e_migration": 3,
    "plugin/e2e_faults": 3,
    "plugin/e2e_interrupt": 6,
    "core/properties": 4,
    "core/data_sync_script": 3,
}

# Test modules whose tests run all at once in their process (`--test-threads`; the harness's
# default is one thread per core). e2e_real_migration's six tests share one control plane per
# configuration in their process (three in all, `RealCluster::shared`), so the module is one
# item: in shards, each process started the clusters its tests needed (six starts, about 7 s of
# CPU each). Its tests mostly wait on their clusters, so they wait together.
THREADS = {
    # All its tests at once: the migration's, and those of its modules (install, upgrade,
    # uninstall, status, rbac, security); count them when adding one.
    "plugin/e2e_real_migration": 30,
}

# What `cargo clippy -- -D warnings` passes clippy-driver (its arguments, joined this way).
CLIPPY_ARGS = "__CLIPPY_HACKERY__".join(["-D", "warnings"]) + "__CLIPPY_HACKERY__"
DOC_TESTS = ("workspace/doc-tests", ["cargo", "test", "--workspace", "--doc", "--quiet"])

RESULT = re.compile(
    r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored", re.M
)


def clippy_env():
    """The environment that makes cargo build the workspace's crates with clippy's lints."""
    driver = shutil.which("clippy-driver")
    if driver is None:
        sys.exit("run-tests: --clippy needs clippy-driver on PATH; install it with "
                 "`rustup component add clippy` and run again")
    env = dict(os.environ)
    env["RUSTC_WORKSPACE_WRAPPER"] = driver
    env["CLIPPY_ARGS"] = CLIPPY_ARGS
    return env


def test_binaries(cargo_args, env, clippy):
    """Builds every test target of the workspace and returns (name, package dir, executable);
    with `clippy`, every target, linted (see the docstring)."""
    cmd = ["cargo", "test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"]
    if clippy:
        # What `--all-targets` lints, without its test-mode builds of the targets declared
        # `test = false` (`--all-targets` selects them all the same; `--tests` only the targets
        # with tests): the library and binaries are built, and linted, for the integration
        # tests that run them.
        cmd += ["--tests", "--benches", "--examples"]
    cmd += cargo_args
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=env)
    if proc.returncode != 0:
        what = "building the tests with clippy's lints (-D warnings)" if clippy else "building the tests"
        sys.exit(f"run-tests: {what} failed (cargo's messages above); fix them and run again")
    found = []
    used = set()
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        used.update(third_party_units(msg))
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        kind = target["kind"][0]
        if kind in ("bench", "example"):
            # Built (and linted) with --benches and --examples; benchmarks are run by hand,
            # never as tests.
            continue
        pkg_dir = os.path.dirname(msg["manifest_path"])
        pkg = os.path.basename(pkg_dir)
        label = f"{pkg}/{target['name']}" if kind == "test" else f"{pkg}/{kind}:{target['name']}"
        found.append((target["name"], label, pkg_dir, msg["executable"]))
    write_units_used(used)
    return found


# The hash in a unit's file and directory names; scripts/deps-cache.py matches them by it.
UNIT_HASH = re.compile(r"-([0-9a-f]{16})(?=\.|$)")


def third_party_units(msg):
    """The units of a cargo message that are no workspace crate's, by the hash cargo names
    their files and directories with (deps/libNAME-HASH.rlib, build/NAME-HASH/,
    .fingerprint/NAME-HASH/): every unit of the build is reported, built or fresh."""
    if msg.get("package_id", "").startswith("path+"):
        return []
    paths = []
    if msg.get("reason") == "compiler-artifact":
        paths = msg.get("filenames", [])
    elif msg.get("reason") == "build-script-executed":
        paths = [msg.get("out_dir", "")]
    # The last component of the path that carries a hash (`libNAME-HASH.rlib`, or
    # `build/NAME-HASH` above `build-script-build` and `out`): a directory above the target
    # may have a name of that shape too.
    units = []
    for p in paths:
        for part in reversed(p.split("/")):
            m = UNIT_HASH.search(part)
            if m:
                units.append(m.group(1))
                break
    return units


def write_units_used(used):
    """Lists the third-party units of the last test build for scripts/deps-cache.py `save`,
    which caches those and no other (target/debug/.deps-used)."""
    target = os.environ.get("CARGO_TARGET_DIR") or "target"
    path = os.path.join(target, "debug", ".deps-used")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        f.write("".join(f"{h}\n" for h in sorted(used)))
    os.replace(path + ".tmp", path)


def list_tests(exe, pkg_dir):
    """The names of a binary's tests (`--list`), or None when it cannot list them."""
    listed = subprocess.run([exe, "--list", "--format", "terse"], cwd=pkg_dir,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if listed.returncode != 0:
        return None
    return [line[: -len(": test")] for line in listed.stdout.splitlines()
            if line.endswith(": test")]


def work_items(binaries):
    """Splits each crate's integration-test binary (`integration`, tests/main.rs) into one item
    per test module (the file under tests/ it came from: the first component of a test's name),
    and the modules named in SHARDS into that many items; each item runs as a process of its own
    with `--exact` and its test names, so that the lanes stay busy and one slow module does not
    hold the others back. Other binaries (unit tests, effects' one test file), and a binary that
    cannot list its tests, run whole."""
    out = []
    for name, label, pkg_dir, exe in binaries:
        tests = list_tests(exe, pkg_dir) if name == "integration" else None
        if not tests:
            out.append((label, pkg_dir, exe, []))
            continue
        pkg = label.split("/")[0]
        modules = {}
        for test in tests:
            modules.setdefault(test.split("::")[0], []).append(test)
        for module, names in modules.items():
            key = f"{pkg}/{module}"
            n = min(SHARDS.get(key, 1), len(names))
            threads = [f"--test-threads={THREADS[key]}"] if key in THREADS else []
            for i in range(n):
                part = names[i::n]
                item = key if n < 2 else f"{key}[{i + 1}/{n}]"
                out.append((item, pkg_dir, exe, threads + ["--exact"] + part))
    return out


def order(items):
    def key(item):
        label = item[0].split("[")[0]
        return (LONG.index(label) if label in LONG else len(LONG), item[0])

    return sorted(items, key=key)


def undeclared_test_files(root):
    """Files under a crate's tests/ that its tests/main.rs does not declare as a module: with
    `autotests = false` cargo would silently never build them."""
    missing = []
    for crate in sorted(os.listdir(root)):
        tests = os.path.join(root, crate, "tests")
        main_rs = os.path.join(tests, "main.rs")
        if not os.path.isfile(main_rs):
            continue
        with open(main_rs) as f:
            declared = set(re.findall(r"^\s*(?:pub\s+)?mod\s+(\w+)\s*;", f.read(), re.M))
        for entry in sorted(os.listdir(tests)):
            path = os.path.join(tests, entry)
            if entry.endswith(".rs") and entry != "main.rs":
                name = entry[:-3]
            elif os.path.isdir(path) and os.path.isfile(os.path.join(path, "mod.rs")):
                name = entry
            else:
                continue
            if name not in declared:
                missing.append(os.path.join(crate, "tests", entry))
    return missing


def bin_files(crate_dir, b):
    """A binary's source files: its file, or its directory when it is a `main.rs` with modules
    beside it (plugin/src/release/)."""
    path = os.path.join(crate_dir, b["path"])
    if os.path.basename(path) != "main.rs" or os.path.dirname(path) == os.path.join(crate_dir, "src"):
        return [path]
    return [os.path.join(dp, n) for dp, _, ns in os.walk(os.path.dirname(path))
            for n in ns if n.endswith(".rs")]


def tests_in_untested_targets(root):
    """Files of a target declared `test = false` (no test harness is built for it, see
    test_binaries) that hold a test anyway, which would silently never run: under src/ when
    the library is `test = false` (but for the files of binaries that are tested), or a
    binary's own files when it is."""
    found = []
    for crate in sorted(os.listdir(root)):
        crate_dir = os.path.join(root, crate)
        manifest = os.path.join(crate_dir, "Cargo.toml")
        if not os.path.isfile(manifest):
            continue
        with open(manifest, "rb") as f:
            cargo = tomllib.load(f)
        bins = [b for b in cargo.get("bin", []) if "path" in b]
        untested, tested = set(), set()
        for b in bins:
            (tested if b.get("test", True) else untested).update(bin_files(crate_dir, b))
        if not cargo.get("lib", {}).get("test", True):
            for dp, _, names in os.walk(os.path.join(crate_dir, "src")):
                untested.update(os.path.join(dp, n) for n in names if n.endswith(".rs"))
        for file in sorted(untested - tested):
            with open(file) as f:
                if re.search(r"#\[(cfg\(test\)|test\b|tokio::test\b)", f.read()):
                    found.append(os.path.relpath(file, root))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("UYUNI_TEST_JOBS", "3")))
    parser.add_argument("--clippy", action="store_true",
                        help="build the tests with clippy's lints (-D warnings), every target")
    parser.add_argument("--build-only", action="store_true",
                        help="build (with --clippy, lint) the tests and run none: scripts/test.sh "
                        "builds while it installs the tests' tools, then runs this again")
    parser.add_argument("rest", nargs="*", help="arguments for every test binary (after --)")
    args = parser.parse_args()

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    missing = undeclared_test_files(root)
    if missing:
        sys.exit(
            "run-tests: these test files are no module of their crate's tests/main.rs, so they "
            "would never run: " + ", ".join(missing) + "; add `mod NAME;` to tests/main.rs"
        )
    untested = tests_in_untested_targets(root)
    if untested:
        sys.exit(
            "run-tests: these files belong to a target declared `test = false` (no test "
            "harness is built for it) and hold tests, which would never run: "
            + ", ".join(untested) + "; move the tests to the crate's tests/ (tests/unit/), or "
            "remove `test = false` from the target in its Cargo.toml"
        )
    cargo_env = clippy_env() if args.clippy else dict(os.environ)
    queue = order(work_items(test_binaries([], cargo_env, args.clippy)))
    if args.build_only:
        print(f"run-tests: built {len(queue)} items; none run (--build-only)", flush=True)
        return 0
    # Doc tests have no binary of their own: cargo compiles and runs them in one go, once the
    # test build has released cargo's lock.
    cargo_items = [(label, root, None, cmd) for label, cmd in [DOC_TESTS]]

    lock = threading.Lock()
    results = []
    outdir = tempfile.mkdtemp(prefix="uyuni-tests-")
    started = time.monotonic()

    def run(item):
        label, pkg_dir, exe, filters = item
        if exe is None:
            cmd = filters
        else:
            cmd = [exe] + filters + args.rest
        # The cargo items build with the test build's wrapper, to reuse its libraries.
        env = dict(cargo_env) if exe is None else dict(os.environ)
        if exe is not None:
            # What cargo sets for a test binary at run time; tests read files beside their
            # package. Never for cargo itself: a CARGO_MANIFEST_DIR in cargo's environment makes
            # it rebuild ring, rustls and kube (and back again at the next build without it).
            env["CARGO_MANIFEST_DIR"] = pkg_dir
        log_path = os.path.join(outdir, re.sub(r"[^A-Za-z0-9_.-]", "_", label) + ".log")
        t0 = time.monotonic()
        cpu = 0.0
        with open(log_path, "w+") as log:
            try:
                proc = subprocess.Popen(cmd, cwd=pkg_dir, env=env, stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                # wait4: the item's CPU time, its own and that of the processes it waited for
                # (the plugin, kubectl, the control planes it started), for the summary.
                _, status, usage = os.wait4(proc.pid, 0)
                code = os.waitstatus_to_exitcode(status)
                proc.returncode = code
                cpu = usage.ru_utime + usage.ru_stime
            except OSError as e:
                # Counted as a failed item: an exception would end the lane and lose the item.
                log.write(f"run-tests: cannot run {cmd[0]}: {e}\n")
                code = 127
            log.seek(0)
            out = log.read()
        took = time.monotonic() - t0
        counts = [0, 0, 0]
        found = False
        for m in RESULT.finditer(out):
            found = True
            counts[0] += int(m.group(2))
            counts[1] += int(m.group(3))
            counts[2] += int(m.group(4))
        ok = code == 0 and found
        with lock:
            print(f"\n==> {label} ({took:.0f} s, {cpu:.0f} s of CPU, {'ok' if ok else 'FAILED, exit ' + str(code)})", flush=True)
            sys.stdout.write(out)
            if not found:
                print(f"run-tests: {label} printed no test result (exit {code})")
            sys.stdout.flush()
            results.append((label, took, ok, counts, cpu))

    # One lane (`--jobs 1`): the cargo items first, then the binaries, one after the other.
    pending = list(queue) if args.jobs > 1 else cargo_items + list(queue)
    pending_lock = threading.Lock()

    def lane():
        while True:
            with pending_lock:
                if not pending:
                    return
                item = pending.pop(0)
            run(item)

    def cargo_lane():
        for item in cargo_items:
            run(item)

    lanes = [threading.Thread(target=lane) for _ in range(max(1, args.jobs))]
    if args.jobs > 1:
        lanes.append(threading.Thread(target=cargo_lane))
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()

    wall = time.monotonic() - started
    passed = sum(r[3][0] for r in results)
    failed = sum(r[3][1] for r in results)
    ignored = sum(r[3][2] for r in results)
    print(f"\n==> test binaries by time ({args.jobs} at once and the cargo items beside them, "
          f"{wall:.0f} s in all)")
    print(f"  {'wall':>6}    {'CPU':>6}")
    for label, took, ok, _, cpu in sorted(results, key=lambda r: -r[1]):
        print(f"  {took:6.0f} s  {cpu:6.0f} s  {label}{'' if ok else '  FAILED'}")
    print(f"  {wall:6.0f} s  {sum(r[4] for r in results):6.0f} s  in all")
    broken = [r[0] for r in results if not r[2]]
    if broken:
        print("failed: " + ", ".join(broken))
    # Every binary's output was printed above; its copy goes.
    shutil.rmtree(outdir, ignore_errors=True)
    # cargo's "ignored" are skipped tests; the closing line in the plain form.
    print(f"tests: {passed} passed, {failed} failed, {ignored} skipped")
    return 1 if broken or failed else 0


if __name__ == "__main__":
    sys.exit(main())
