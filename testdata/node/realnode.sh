# shellcheck shell=bash disable=SC2154
# The real node of `scripts/cluster.sh up --real-node` (sourced by cluster.sh, which defines
# die, log, start, host_start, running, alive_or_die, kubeconfig and $bin): upstream's kubelet,
# containerd with containerd-shim-runc-v2, Debian's runc and the CNI plugins, as Node `realnode`,
# running the images testdata/images builds. The facts each setting rests on were measured on
# these machines: ../shared/reference/real-node-notes.md.
#
# Everything of such a cluster runs in a private network namespace, DIR/netns: the control plane
# on that namespace's loopback, the kubelet on 10.200.0.1 (a veth pair, both ends inside: the
# machines have no `dummy` link type), the pods on a bridge, 10.244.0.0/24, with no route out
# and no masquerading, so no packet of theirs can leave the machine. Processes enter it with
# `nsenter --net=`, never `ip netns exec`, which remounts /sys and hides the cgroup v1 mounts.
# netns-forward.py makes the API server reachable from this side at the same 127.0.0.1:PORT.

realnode_ip=10.200.0.1
realnode_name=realnode
pod_subnet=10.244.0.0/24

# Settings of the host's kernel that the kubelet sets at start (pkg/kubelet/cm/
# container_manager_linux.go, setupKernelTunables, with protectKernelDefaults false: it refuses
# to start when they differ and it may not change them). Saved at `up` and put back at `down`.
kubelet_sysctls="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"

# The cgroup v1 hierarchies (and the hybrid unified one, where runc also makes each container's
# cgroup), one mount point per line.
cgroup_mounts() {
  awk '$9 == "cgroup" || $9 == "cgroup2" { print $5 }' /proc/self/mountinfo
}

# The cgroup under which the kubelet puts kubepods (its cgroupRoot): one per cluster, so that
# two clusters never share pods' cgroups and `down` removes exactly this one.
realnode_cgroup() {
  echo "uyuni-$(basename "$1")"
}

# What a real node needs of the machine, checked before anything starts. Each failure says what
# to install or why the machine cannot.
realnode_check() {
  [ "$(id -u)" = 0 ] || die "--real-node needs root (containerd, runc, network namespaces and cgroups)"
  local b
  for b in kubelet containerd containerd-shim-runc-v2 ctr cni/bridge cni/host-local cni/loopback; do
    [ -x "$bin/$b" ] || die "no $bin/$b: run \`scripts/cluster.sh build\`"
  done
  [ -x /usr/sbin/runc ] || die "no /usr/sbin/runc: install Debian's runc (apt-get install runc)"
  if ! command -v unshare >/dev/null 2>&1 || ! command -v nsenter >/dev/null 2>&1; then
    die "no unshare or nsenter: install util-linux"
  fi
  command -v ip >/dev/null 2>&1 || die "no ip: install iproute2"
  [ -d /sys/fs/cgroup/memory ] || die "no cgroup v1 memory hierarchy at /sys/fs/cgroup/memory: the real node is set up for cgroup v1 (failCgroupV1: false, cgroupfs)"
}

realnode_up() {
  local dir=$1 server=$2 pki=$3
  local node="$dir/node" sock="$dir/node/containerd/containerd.sock" cg
  cg=$(realnode_cgroup "$dir")
  # A start tried again (a port taken, see cluster.sh) finds the earlier attempt's node, its
  # mounts already removed by `down`: it starts from nothing, but never deletes through a mount.
  if awk -v d="$node/" 'index($5, d) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
    die "$node still has mounts (/proc/self/mountinfo): run \`scripts/cluster.sh down $dir\` first"
  fi
  rm -rf "$node"
  mkdir -p "$node"/{containerd,cni/net.d,cni/ipam,kubelet,pods-logs,runc}

  # The sysctls the kubelet will set, as they are before it does.
  local s
  for s in $kubelet_sysctls; do
    printf '%s %s\n' "$s" "$(sysctl -n "$s")"
  done >"$node/sysctls.saved"
  # containerd's shims put their sockets under /run/containerd/s whatever the configuration
  # (pkg/shim/util_unix.go, SocketAddress: defaults.DefaultStateDir); `down` removes the
  # directories it made there, and only when empty.
  [ -e /run/containerd ] || touch "$node/made-run-containerd"
  [ -e /var/log/containers ] || touch "$node/made-var-log-containers"

  # The kubelet's cgroupRoot must exist in every hierarchy (container_manager_linux.go:
  # "invalid configuration: cgroup-root … doesn't exist"); a new cpuset cgroup has no CPUs or
  # memory nodes until given its parent's.
  local m
  while read -r m; do
    mkdir -p "$m/$cg"
    if [ -f "$m/cpuset.cpus" ]; then
      cat "$m/cpuset.cpus" >"$m/$cg/cpuset.cpus"
      cat "$m/cpuset.mems" >"$m/$cg/cpuset.mems"
    fi
  done < <(cgroup_mounts)

  # containerd 2.4 (config version 3). Every path under DIR: the default ones (/var/lib/containerd,
  # /run/containerd, /opt/containerd) are the machine's.
  cat >"$node/containerd.toml" <<TOML
version = 3
root = "$node/containerd/root"
state = "$node/containerd/state"

[grpc]
  address = "$sock"

[plugins.'io.containerd.internal.v1.opt']
  path = "$node/containerd/opt"

# NRI opens a socket under /var/run/nri; nothing here uses it.
[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  # The pause image built here (testdata/images), never pulled.
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "registry.k8s.io/pause:3.10.1"

[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  # These machines' capability bounding set lacks CAP_SYS_RESOURCE, so runc cannot lower
  # oom_score_adj to the kubelet's -998 for sandboxes and fails every one ("can't get final
  # child's PID from pipe: EOF"; real-node-notes.md, Blocker). With this, containerd never asks
  # for less than its own score.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        Root = "$node/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$bin/cni"]
    conf_dir = "$node/cni/net.d"

[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
TOML

  # The pods' network: a bridge with the gateway address, no masquerading (these machines have
  # no iptables) and no route beyond the namespace. containerd adds the loopback itself.
  cat >"$node/cni/net.d/10-uyuni.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "uyuni",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "uyunicni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$pod_subnet" }]],
        "dataDir": "$node/cni/ipam"
      }
    }
  ]
}
JSON

  # The shim must be on containerd's PATH (it starts containerd-shim-runc-v2 by name).
  start "$dir" containerd env PATH="$bin:$PATH" "$bin/containerd" --config "$node/containerd.toml"
  ready_within "$dir" containerd "containerd did not answer on $sock" "its log: $dir/logs/containerd.log" \
    containerd_answers "$sock"
  local archive ref _digest
  while read -r archive ref _digest; do
    "${ns[@]}" "$bin/ctr" --address "$sock" -n k8s.io images import "$bin/images/$archive" >"$dir/logs/image-import.log" 2>&1 \
      || die "importing $ref into containerd failed ($dir/logs/image-import.log): rebuild the images (rm -r $bin/images; scripts/cluster.sh build)"
  done <"$bin/images/images"
  # What the tests compare the pods' image IDs with.
  cp "$bin/images/images" "$node/images"

  printf 'nameserver 127.0.0.1\n' >"$node/resolv.conf"
  kubeconfig "$dir/$realnode_name.kubeconfig" "$realnode_name" "$pki" "$server"
  cat >"$node/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 only on these machines: the kubelet refuses it unless told (KEP-5573).
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$cg
containerRuntimeEndpoint: unix://$sock
address: $realnode_ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: false }
  x509: { clientCAFile: $pki/ca.crt }
authorization: { mode: AlwaysAllow }
tlsCertFile: $pki/$realnode_name-serving.crt
tlsPrivateKeyFile: $pki/$realnode_name-serving.key
podLogsDir: $node/pods-logs
resolvConf: $node/resolv.conf
clusterDomain: cluster.local
failSwapOn: false
imageGCHighThresholdPercent: 99
imageGCLowThresholdPercent: 98
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
YAML
  start "$dir" kubelet "$bin/kubelet" --config="$node/kubelet.yaml" \
    --kubeconfig="$dir/$realnode_name.kubeconfig" --root-dir="$node/kubelet" \
    --cert-dir="$node/kubelet/pki" --hostname-override="$realnode_name" --node-ip="$realnode_ip"
}

containerd_answers() {
  "${ns[@]}" "$bin/ctr" --address "$1" version >/dev/null 2>&1
}

# The kubelet decodes its configuration leniently when strict decoding fails, so a misspelt
# field is ignored but for one line of its log (`podLogsDirectory` for `podLogsDir` put the
# pods' logs in /var/log/pods). Refused here instead.
realnode_config_strict() {
  local dir=$1 line
  line=$(grep -m1 'strict decoding error' "$dir/logs/kubelet.log" || true)
  [ -z "$line" ] || { down "$dir"; die "the kubelet ignored part of $dir/node/kubelet.yaml: $line"; }
}

# The pids of the processes in the cluster's cgroup tree: the pods' containers and their pause
# processes, whatever their pid namespace.
realnode_cgroup_pids() {
  local cg=$1
  [ -d "/sys/fs/cgroup/pids/$cg" ] || return 0
  find "/sys/fs/cgroup/pids/$cg" -name cgroup.procs -exec cat {} + 2>/dev/null
}

# The pids of the shims serving this cluster's containerd (`-address SOCK` in their arguments).
realnode_shims() {
  local sock=$1 p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/exe" 2>/dev/null)" = "$bin/containerd-shim-runc-v2" ] || continue
    tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "-address $sock " && echo "${p#/proc/}"
  done
}

# The sockets a shim of ours made under /run/containerd/s: named by the SHA-256 of
# SOCK/NAMESPACE/ID (and …/debug; containerd's pkg/shim/util_unix.go, CreateSocketAddress).
# A shim killed leaves them.
realnode_shim_sockets() {
  local sock=$1 pid id
  for pid in $(realnode_shims "$sock"); do
    id=$(tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | sed -n '/^-id$/{n;p;q}')
    [ -n "$id" ] || continue
    printf '%s' "$sock/k8s.io/$id" | sha256sum | cut -d' ' -f1
    printf '%s' "$sock/k8s.io/$id/debug" | sha256sum | cut -d' ' -f1
  done
}

realnode_down() {
  local dir=$1
  local node="$dir/node" cg pids _ m s
  cg=$(realnode_cgroup "$dir")
  # The kubelet first, so that it restarts nothing; then every process of the pods; then
  # containerd and its shims.
  stop_all "$dir" TERM kubelet
  for _ in $(seq 1 50); do
    pids=$(realnode_cgroup_pids "$cg")
    [ -n "$pids" ] || break
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
    sleep 0.1
  done
  stop_all "$dir" TERM containerd
  local sockets
  sockets=$(realnode_shim_sockets "$node/containerd/containerd.sock")
  for _ in $(seq 1 50); do
    pids=$(realnode_shims "$node/containerd/containerd.sock")
    [ -n "$pids" ] || break
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null || true
    sleep 0.1
  done
  # Mounts under DIR (containers' root filesystems, their shm, the pods' volumes, the kubelet's
  # rshared bind of its root directory, the network namespaces of the pods and DIR/netns),
  # deepest first. /proc/self/mountinfo escapes blanks as \040.
  while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done < <(awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | uniq)
  while read -r m; do
    [ -d "$m/$cg" ] || continue
    find "$m/$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done < <(cgroup_mounts)
  # The kubelet's links to the containers' logs (/var/log/containers, a fixed path in the
  # kubelet) that point into this cluster.
  local link
  for link in /var/log/containers/*.log; do
    [ -L "$link" ] || continue
    case "$(readlink "$link")" in "$node"/*) rm -f "$link" ;; esac
  done
  if [ -f "$node/sysctls.saved" ]; then
    local name value
    while read -r name value; do
      sysctl -qw "$name=$value" >/dev/null 2>&1 || true
    done <"$node/sysctls.saved"
    rm -f "$node/sysctls.saved"
  fi
  for s in $sockets; do
    rm -f "/run/containerd/s/$s"
  done
  # Their directory too, when `up` made it and it is empty.
  [ ! -f "$node/made-var-log-containers" ] || rmdir /var/log/containers 2>/dev/null || true
  if [ -f "$node/made-run-containerd" ]; then
    rmdir /run/containerd/s /run/containerd 2>/dev/null || true
  fi
  rm -f "$dir/netns"
}

# A private network namespace bound at DIR/netns: its loopback, and a veth pair for the
# kubelet's address (both ends inside). ip_forward is the namespace's own, for the bridge.
netns_up() {
  local dir=$1
  touch "$dir/netns"
  unshare --net="$dir/netns" true || die "cannot create a network namespace at $dir/netns (unshare --net): the real node needs root"
  local n=(nsenter --net="$dir/netns")
  "${n[@]}" ip link set lo up
  "${n[@]}" ip link add rn0 type veth peer name rn0p
  "${n[@]}" ip addr add "$realnode_ip/24" dev rn0
  "${n[@]}" ip link set rn0 up
  "${n[@]}" ip link set rn0p up
  "${n[@]}" sysctl -qw net.ipv4.ip_forward=1
}
