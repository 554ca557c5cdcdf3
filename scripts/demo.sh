#!/usr/bin/env bash
# Builds the plugin and the simulated cluster, starts the cluster, and runs
# `kubectl uyuni migrate` against it through the real kubectl: first --dry-run, then for real
# (data sync, database, TLS, networking, server), then once more to show that a finished run
# plans nothing.
#
#   scripts/demo.sh                        against uyuni-sim (starts in a second)
#   scripts/demo.sh --real-control-plane   against upstream's kube-apiserver, etcd and
#                                          controllers v1.37 with our node agent and add-ons
#                                          (scripts/cluster.sh; the first build takes minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

log() { printf '\n==> %s\n' "$*" >&2; }

real=0
case "${1:-}" in
"") ;;
--real-control-plane) real=1 ;;
*)
  echo "usage: scripts/demo.sh [--real-control-plane]" >&2
  exit 2
  ;;
esac

# The first build on a machine compiles some 300 crates (minutes on 2 cores; cargo shows its
# progress below); later ones take seconds.
if [ -x target/debug/kubectl-uyuni ] && [ -x target/debug/uyuni-sim ]; then
  log "building kubectl-uyuni, uyuni-sim, the node agent and the add-ons (what changed only)"
else
  log "building kubectl-uyuni, uyuni-sim, the node agent and the add-ons: the first build takes several minutes (about 300 crates)"
fi
cargo build -p kubectl-uyuni -p kubectl-uyuni-testdata

work=$(mktemp -d)
sim_pid=""
cleanup() {
  if [ "$real" = 1 ]; then
    bash "$root/scripts/cluster.sh" down "$work/cluster" || true
  elif [ -n "$sim_pid" ]; then
    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

if [ "$real" = 1 ]; then
  log "starting the real control plane (k3s flavour, the demo's migration scenario)"
  bash "$root/scripts/cluster.sh" up "$work/cluster"
  kubeconfig="$work/cluster/kubeconfig"
else
  log "starting the simulated cluster (k3s flavour, realistic data-sync Job)"
  "$root/target/debug/uyuni-sim" serve --flavour k3s --scenario builtin:migration --dir "$work" \
    >"$work/sim.out" 2>"$work/sim.log" &
  sim_pid=$!
  for _ in $(seq 1 100); do
    [ -s "$work/kubeconfig" ] && break
    sleep 0.1
  done
  [ -s "$work/kubeconfig" ] || { cat "$work/sim.log" >&2; echo "the simulated cluster did not start" >&2; exit 1; }
  kubeconfig="$work/kubeconfig"
fi

# A directory holding only the plugin: target/debug also holds kubectl-uyuni.d (cargo's
# dependency file), which `kubectl plugin list` would warn about.
mkdir -p "$work/bin"
ln -s "$root/target/debug/kubectl-uyuni" "$work/bin/kubectl-uyuni"
export PATH="$work/bin:$PATH"
export KUBECACHEDIR="$work/kube-cache"
kc=(--kubeconfig "$kubeconfig")
ssh_dir="$root/testdata/fixtures/ssh"
chmod 600 "$ssh_dir/id_ed25519"
flags=(--ssh-key-private "$ssh_dir/id_ed25519" --ssh-key-public "$ssh_dir/id_ed25519.pub"
       --ssh-knownhosts "$ssh_dir/known_hosts" --ssh-config "$ssh_dir/config")

# The source's CA key is encrypted; its password never goes on a command line. The simulated
# CA-key Job accepts any password; for a real migration use --ssl-password-file or the prompt.
export UYUNI_SSL_PASSWORD='demo CA password'

log "kubectl plugin list"
kubectl plugin list

log "kubectl uyuni migrate --dry-run (first lines)"
kubectl uyuni "${kc[@]}" -n uyuni migrate uyuni.example.com "${flags[@]}" --dry-run | head -n 45

# The final run stops the source's services: a script confirms that with --yes (on a terminal
# the run would ask just before).
log "kubectl uyuni migrate --yes"
kubectl uyuni "${kc[@]}" -n uyuni migrate uyuni.example.com --yes "${flags[@]}"

log "what is in the namespace now"
kubectl "${kc[@]}" -n uyuni get deployments,services,ingresses,jobs,pvc,secrets,configmaps

log "kubectl logs of the data-sync Job (tail)"
kubectl "${kc[@]}" -n uyuni logs "job/$(kubectl "${kc[@]}" -n uyuni get jobs -l kubectl-uyuni.io/step=data-sync -o name | head -n1 | cut -d/ -f2)" --tail 5

log "running migrate again: nothing to do"
kubectl uyuni "${kc[@]}" -n uyuni migrate uyuni.example.com
