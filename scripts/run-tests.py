#!/usr/bin/env python3
"""Runs the workspace's test binaries a few at a time, longest first, and sums them up.

`cargo test` runs one test binary after the other. Ours spend most of their time waiting — on
the simulated cluster, on the real control plane's controllers, on Jobs played by the node
agent — so on the 2-core machines the suite took twice the time its CPU needs. This builds the
binaries with cargo (`cargo test --no-run`), then runs them in `--jobs` lanes, each binary whole
(tests inside a binary keep sharing what they share), printing each binary's output when it
ends and one closing line for all: `tests: N passed, N failed, N skipped`.

cargo-nextest does the same per test, but it is not preinstalled and building it costs CI
minutes on every fresh machine; this needs only Python and cargo.

Usage: scripts/run-tests.py [--jobs N] [-- ARGS FOR EVERY TEST BINARY]
The order: binaries known to be long start first (LONG below, measured on 2 cores); the rest
follow in name order. Exit status 1 when any test failed or any binary ended without a result.
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

# Longest first, so that the long ones do not start last and stretch the run (seconds of one
# run-tests.py run, 3 lanes on 2 cores shared with other builds, load 8 to 15; only the order
# matters). The doc tests are one item: cargo builds and runs them, a build of its own.
LONG = [
    "properties",  # 212 s, CPU-bound
    "data_sync_script",  # 135 s
    "doc",  # 134 s, most of it building
    "e2e_migration",  # 3 shards of ~115 s
    "e2e_safety",  # 115 s
    "e2e_real_migration",  # 3 shards of ~105 s
    "e2e_real_admission",  # 102 s
    "node_agent",  # 84 s
    "dry_run",  # 63 s
    "cluster_addons",  # 60 s
    "e2e_rerun",  # 56 s
    "e2e",  # 56 s
    "differential",  # 54 s
    "kubectl",  # 46 s
    "node_agent_exec",  # 42 s
    "real_control_plane",  # 39 s
    "uyuni_core",  # 33 s, the core's unit tests
    "database_scripts",  # 25 s
    "sim_cluster",  # 24 s
    "registry",  # 19 s
    "safety_checks",  # 18 s
    "tftp_plan",  # 14 s
    "tls",  # 14 s
    "e2e_requests",  # 11 s
    "sim",  # 11 s
]

# Binaries whose tests are independent of each other and long enough together to be the run's
# long pole: their tests are dealt into this many shards, each a process of its own. Each test
# of e2e_real_migration starts a control plane of its own (free ports, its own directory).
SHARDS = {"e2e_migration": 3, "e2e_real_migration": 3}

RESULT = re.compile(
    r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored", re.M
)


def test_binaries(cargo_args):
    """Builds every test target of the workspace and returns (name, package dir, executable)."""
    cmd = ["cargo", "test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"]
    cmd += cargo_args
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit("run-tests: building the tests failed (cargo's messages above); fix the build and run again")
    found = []
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if not msg.get("profile", {}).get("test"):
            continue
        target = msg["target"]
        kind = target["kind"][0]
        pkg_dir = os.path.dirname(msg["manifest_path"])
        pkg = os.path.basename(pkg_dir)
        label = f"{pkg}/{target['name']}" if kind == "test" else f"{pkg}/{kind}:{target['name']}"
        found.append((target["name"], label, pkg_dir, msg["executable"]))
    return found


def order(binaries):
    def key(b):
        name = b[0]
        return (LONG.index(name) if name in LONG else len(LONG), b[1])

    return sorted(binaries, key=key)


def shard(binaries):
    """Splits the binaries named in SHARDS into shards of their tests (libtest's `--exact` with
    several names); a binary whose tests cannot be listed runs whole."""
    out = []
    for name, label, pkg_dir, exe in binaries:
        n = SHARDS.get(name, 1)
        if n < 2:
            out.append((name, label, pkg_dir, exe, []))
            continue
        listed = subprocess.run([exe, "--list", "--format", "terse"], cwd=pkg_dir,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        tests = [line[: -len(": test")] for line in listed.stdout.splitlines()
                 if line.endswith(": test")]
        if listed.returncode != 0 or len(tests) < n:
            out.append((name, label, pkg_dir, exe, []))
            continue
        for i in range(n):
            part = tests[i::n]
            out.append((name, f"{label}[{i + 1}/{n}]", pkg_dir, exe, ["--exact"] + part))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("UYUNI_TEST_JOBS", "3")))
    parser.add_argument("rest", nargs="*", help="arguments for every test binary (after --)")
    args = parser.parse_args()

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    # Doc tests have no binary of their own: cargo compiles and runs them in one go.
    doc = ("doc", "workspace/doc-tests", root, None)
    queue = shard(order(test_binaries([]) + [doc]))

    lock = threading.Lock()
    results = []
    outdir = tempfile.mkdtemp(prefix="uyuni-tests-")
    started = time.monotonic()

    def run(item):
        name, label, pkg_dir, exe, filters = item
        if exe is None:
            cmd = ["cargo", "test", "--workspace", "--doc", "--quiet"]
        else:
            cmd = [exe] + filters + args.rest
        env = dict(os.environ)
        # What cargo sets for a test binary at run time; tests read files beside their package.
        env["CARGO_MANIFEST_DIR"] = pkg_dir
        log_path = os.path.join(outdir, re.sub(r"[^A-Za-z0-9_.-]", "_", label) + ".log")
        t0 = time.monotonic()
        with open(log_path, "w+") as log:
            code = subprocess.call(cmd, cwd=pkg_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
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
            print(f"\n==> {label} ({took:.0f} s, {'ok' if ok else 'FAILED, exit ' + str(code)})", flush=True)
            sys.stdout.write(out)
            if not found:
                print(f"run-tests: {label} printed no test result (exit {code})")
            sys.stdout.flush()
            results.append((label, took, ok, counts))

    pending = list(queue)
    pending_lock = threading.Lock()

    def lane():
        while True:
            with pending_lock:
                if not pending:
                    return
                item = pending.pop(0)
            run(item)

    lanes = [threading.Thread(target=lane) for _ in range(max(1, args.jobs))]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()

    wall = time.monotonic() - started
    passed = sum(r[3][0] for r in results)
    failed = sum(r[3][1] for r in results)
    ignored = sum(r[3][2] for r in results)
    print(f"\n==> test binaries by time ({args.jobs} at once, {wall:.0f} s in all)")
    for label, took, ok, _ in sorted(results, key=lambda r: -r[1]):
        print(f"  {took:6.0f} s  {label}{'' if ok else '  FAILED'}")
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
