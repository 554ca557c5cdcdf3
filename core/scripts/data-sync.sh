#!/usr/bin/env bash
# The data-sync Job: copies the source server's data into the volumes over SSH and hands what it
# learned to the tool through the Secret named by DATA_SECRET (core/src/scripts/data_sync.rs
# documents the steps, after the reference's migration script, uyuni-k8s-behaviour.md §3.5).
#
# Parameters, all set by the Job spec (DataSyncScript::env); none of them is a secret:
#   SOURCE_FQDN, SSH_USER      where to copy from, as whom (not root: through `sudo -n`)
#   SYNC_MODE                  prepare (the source keeps serving) or final (it is stopped)
#   COMPRESS                   true: rsync compresses on the wire (-z)
#   COPY_PARALLEL              how many volumes are copied at once (at least 1)
#   SYNC_VOLUMES               one volume a line, tab-separated: name, path, -L (follow
#                              symlinks) or -l, required or optional, how rsync compares while
#                              the source serves and once it is stopped (quick or checksum),
#                              and alone (an rsync of its own) or batch (one rsync for all)
#   DATA_SECRET                the Secret that receives the extracted data
#   DB_HOST, REPORT_DB_HOST    what rhn.conf's database hosts become
#   SSH_KEY_FILE, SSH_CONFIG_FILE, SSH_KNOWN_HOSTS_FILE
#                              the mounted SSH material (the config may be missing)
#   SCRATCH_DIR                in-memory emptyDir where secrets are staged; never a PVC
#   SA_DIR                     the ServiceAccount's token and ca.crt
#   LOCAL_ROOT                 prefix of every local path: empty in a Job, a directory in tests
# and, from the pod: NAMESPACE, JOB_NAME, KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT.
#
# Values learned at run time (distribution paths, snippet directories) are quoted by `shq`
# before they reach the source's shell; no value is ever run as code.
# shellcheck source-path=SCRIPTDIR

# In a Job, lib.sh comes first in the same text; run as a file, the script loads it.
if ! declare -F conf_set >/dev/null; then
  # shellcheck source=lib.sh
  . "${BASH_SOURCE[0]%/*}/lib.sh"
fi

# No `set -x`, ever: values of the Secret pass through variables.
set -euo pipefail
shopt -s inherit_errexit
# Secrets are staged in files: only root may read what the script creates.
umask 077

: "${SOURCE_FQDN:?SOURCE_FQDN is not set}"
: "${SSH_USER:?SSH_USER is not set}"
: "${SYNC_MODE:?SYNC_MODE is not set}"
: "${SYNC_VOLUMES:?SYNC_VOLUMES is not set}"
: "${DATA_SECRET:?DATA_SECRET is not set}"
: "${DB_HOST:?DB_HOST is not set}"
: "${REPORT_DB_HOST:?REPORT_DB_HOST is not set}"
: "${SSH_KEY_FILE:?SSH_KEY_FILE is not set}"
: "${SSH_CONFIG_FILE:?SSH_CONFIG_FILE is not set}"
: "${SSH_KNOWN_HOSTS_FILE:?SSH_KNOWN_HOSTS_FILE is not set}"
: "${SCRATCH_DIR:?SCRATCH_DIR is not set}"
: "${SA_DIR:?SA_DIR is not set}"
: "${NAMESPACE:?NAMESPACE is not set}"
: "${JOB_NAME:?JOB_NAME is not set}"
: "${KUBERNETES_SERVICE_HOST:?KUBERNETES_SERVICE_HOST is not set}"
: "${KUBERNETES_SERVICE_PORT:?KUBERNETES_SERVICE_PORT is not set}"
LOCAL_ROOT=${LOCAL_ROOT-}
LOCAL_ROOT=${LOCAL_ROOT%/}
case $SYNC_MODE in
  prepare | final) ;;
  *) fail "SYNC_MODE is $SYNC_MODE: prepare or final expected" ;;
esac
COPY_PARALLEL=${COPY_PARALLEL:-1}
case $COPY_PARALLEL in
  '' | *[!0-9]* | 0) fail "COPY_PARALLEL is $COPY_PARALLEL: a number of at least 1 expected" ;;
esac

SOURCE=$SSH_USER@$SOURCE_FQDN
WORK_DIR=$LOCAL_ROOT/var/lib/uyuni-tools
SCRATCH=${SCRATCH_DIR%/}
# rhn.conf is rewritten through the scratch dir (conf_set): it holds passwords.
CONF_SCRATCH=$SCRATCH
SSH_SOCKET=$SCRATCH/ssh-master
SSL_BUILD=$LOCAL_ROOT/root/ssl-build
# A file that vanishes on the source during a copy is expected while it serves.
VANISHED_OK=0
if [ "$SYNC_MODE" = prepare ]; then VANISHED_OK=1; fi
# 1 while a pass only measures what a copy would transfer (rsync --dry-run): the prepare
# run's estimate of the final copy.
MEASURE=0
# Not root: every source command goes through sudo, which must not ask for a password.
SUDO=''
if [ "$SSH_USER" != root ]; then SUDO='sudo -n '; fi

# The volumes, parsed once (a path may hold spaces and quotes, never a tab or a newline).
VOLUME_NAMES=() VOLUME_PATHS=() VOLUME_LINKS=() VOLUME_NEEDS=() VOLUME_SERVING=() VOLUME_STOPPED=()
VOLUME_COPY=()
while IFS=$'\t' read -r name path links need serving stopped copy; do
  [ -n "$name" ] || continue
  case $links/$need/$serving/$stopped/$copy in
    -[Ll]/required/*/*/alone | -[Ll]/optional/*/*/alone | -[Ll]/optional/*/*/batch) ;;
    *) fail "SYNC_VOLUMES: unusable record for volume $name" ;;
  esac
  for mode in "$serving" "$stopped"; do
    case $mode in quick | checksum) ;; *) fail "SYNC_VOLUMES: unknown compare mode $mode of volume $name" ;; esac
  done
  VOLUME_NAMES+=("$name")
  VOLUME_PATHS+=("${path%/}")
  VOLUME_LINKS+=("$links")
  VOLUME_NEEDS+=("$need")
  VOLUME_SERVING+=("$serving")
  VOLUME_STOPPED+=("$stopped")
  VOLUME_COPY+=("$copy")
done <<<"$SYNC_VOLUMES"

# SSH without agent (R of §3.4): key, config and known_hosts mounted outside every synced
# path (D33), host key checked strictly, never a prompt.
# One connection for the whole run (cutover downtime): every ssh, rsync's included, goes
# through a master connection whose socket is in the scratch dir; the first use opens it
# (ControlMaster=auto) and it outlives each session (ControlPersist, seconds idle) for the next
# ones; `close_ssh` ends it on exit. A session costs a round trip instead of a handshake.
# Without the master (it failed or timed out) a session connects on its own.
# https://man.openbsd.org/ssh_config#ControlMaster
SSH_MULTIPLEX=(-o ControlMaster=auto -o ControlPersist=600 -o "ControlPath=$SSH_SOCKET")
# The ConfigMap's `config` key is optional (R of §3.2).
SSH_CONFIG=/dev/null
if [ -f "$SSH_CONFIG_FILE" ]; then SSH_CONFIG=$SSH_CONFIG_FILE; fi
SSH=(ssh -i "$SSH_KEY_FILE" -F "$SSH_CONFIG" -o "UserKnownHostsFile=$SSH_KNOWN_HOSTS_FILE"
  -o StrictHostKeyChecking=yes -o BatchMode=yes "${SSH_MULTIPLEX[@]}")

# Quotes $1 as one argument of rsync's -e command, which rsync splits itself: single quotes, a
# doubled quote standing for itself (rsync does not honour backslashes there).
rsh_quote() {
  printf "'%s'" "${1//\'/\'\'}"
}
RSYNC_RSH="ssh -i $(rsh_quote "$SSH_KEY_FILE") -F $(rsh_quote "$SSH_CONFIG")"
RSYNC_RSH+=" -o $(rsh_quote "UserKnownHostsFile=$SSH_KNOWN_HOSTS_FILE")"
RSYNC_RSH+=" -o StrictHostKeyChecking=yes -o BatchMode=yes -o ControlMaster=auto"
RSYNC_RSH+=" -o ControlPersist=600 -o $(rsh_quote "ControlPath=$SSH_SOCKET")"
RSYNC=(rsync -a)
# No compression unless asked: on a LAN, -z makes rsync CPU-bound (issue 15 measured a
# 300 MB database at 0.7 s with plain `rsync -a`).
if [ "${COMPRESS:-false}" = true ]; then RSYNC+=(-z); fi
RSYNC+=(--trust-sender -e "$RSYNC_RSH")
if [ "$SSH_USER" != root ]; then RSYNC+=(--rsync-path='sudo -n rsync'); fi

# Quotes a value the script learned at run time for the source's shell (single quotes).
shq() {
  printf "'%s'" "${1//\'/\'\\\'\'}"
}

# Runs a command line on the source, as root (through `sudo -n` for another user). Stdin is
# passed through. An SSH failure (255) ends the script even where the caller tests the result,
# so "cannot connect" never reads as "file missing".
ssh_source() {
  local rc=0
  "${SSH[@]}" "$SOURCE" "$SUDO$1" || rc=$?
  if [ "$rc" -eq 255 ]; then
    echo "ERROR: ssh to $SOURCE_FQDN failed" >&2
    exit 255
  fi
  return "$rc"
}

# The same without stdin, so that loops reading files keep their input.
on_source() {
  ssh_source "$1" </dev/null
}

# Directories and files the server reads as non-root users get the usual modes, not the
# script's umask 077.
mkdir_pub() {
  (umask 022 && mkdir -p -- "$@")
}

rsync_run() {
  local rc=0
  "${RSYNC[@]}" "$@" || rc=$?
  if [ "$rc" -eq 24 ] && [ "$VANISHED_OK" = 1 ]; then
    echo "Warning: some files vanished on the source during the copy (the source is serving)"
  elif [ "$rc" -ne 0 ]; then
    echo "ERROR: rsync failed with exit code $rc" >&2
    exit "$rc"
  fi
}

# What each volume's path is on the source, asked in one remote command for all of them before
# a pass: one session instead of two per volume, which counts inside the outage. Fills
# SOURCE_KIND[path] with stat's file type ("directory", "regular file", ...); a path that does
# not exist gets no entry (stat lists the others and fails; that failure is expected).
declare -A SOURCE_KIND=()
probe_volumes() {
  local args=() line listing p
  for p in "$@"; do
    args+=("$(shq "$p")")
  done
  SOURCE_KIND=()
  listing=$(on_source "stat -L -c '%n:%F' -- ${args[*]} 2>/dev/null") || true
  while IFS= read -r line; do
    if [ -n "$line" ]; then
      SOURCE_KIND[${line%%:*}]=${line#*:}
    fi
  done <<<"$listing"
}

# Copies the source's directory $2 into the same local path (volume $1, reference step 7).
# $3 is -L (follow symlinks) or -l (keep them); $4 is how rsync tells a file it copied before
# is unchanged: quick (size and modification time) or checksum (the content); $5 is required
# or optional. A missing optional directory is skipped before rsync sees it: rsync's
# --ignore-missing-args does not cover a source given as DIR/ (it fails with "change_dir ...
# failed", code 23). Each volume's mode is recorded for the summary at the end. What the path
# is comes from the last probe_volumes.
sync_volume() {
  local name=$1 path=$2 links=$3 mode=$4 need=$5 compare=() label
  local kind=${SOURCE_KIND[$path]-}
  if [ "$kind" != directory ]; then
    if [ -n "$kind" ]; then
      fail "$path on $SOURCE_FQDN is not a directory: it cannot be copied into volume $name"
    fi
    if [ "$need" = required ]; then
      fail "$path does not exist on $SOURCE_FQDN: volume $name cannot be filled without it"
    fi
    echo "uyuni-sync: volume=$name state=skipped"
    if [ "$MEASURE" = 0 ]; then
      echo "Not on the source, skipping $path"
      COPY_MODES+=("$name: skipped (not on the source)")
    fi
    return 0
  fi
  case $mode in
    checksum)
      compare=(--checksum)
      label='checksum'
      ;;
    *) label='quick (size+mtime)' ;;
  esac
  if [ "$MEASURE" = 1 ]; then
    rsync_volume "$name" "$links" "${compare[@]}" --delete --dry-run \
      -f "merge $WORK_DIR/exclude_list" "$SOURCE:$path/" "$LOCAL_ROOT$path/"
    return 0
  fi
  echo "Synchronizing $path ($name: $label)"
  mkdir_pub "$LOCAL_ROOT$path"
  rsync_volume "$name" "$links" "${compare[@]}" --delete -f "merge $WORK_DIR/exclude_list" \
    "$SOURCE:$path/" "$LOCAL_ROOT$path/"
  COPY_MODES+=("$name: $label")
}

# Milliseconds since the epoch, for the figures of the status lines: bash's clock, so that a
# volume's copy starts no program for it (the decimal point is the locale's).
now_ms() {
  local t=${EPOCHREALTIME/[.,]/}
  echo "$((t / 1000))"
}

# The status lines of the copies, one a line and never rewritten in place (a Job's log is cut
# into lines at newlines only), for the live view and for people reading the Job's log; the
# tool parses them (core/src/sync_progress.rs documents the format):
#   uyuni-sync: pass=P volumes=A,B,...          a pass over these volumes starts (all waiting)
#   uyuni-sync: volume=V state=copying [bytes=N percent=N]
#   uyuni-sync: volume=V state=done bytes=N ms=N   (bytes: what rsync transferred, or would)
#   uyuni-sync: volume=V state=skipped | state=failed code=N
#   uyuni-sync: estimate delta_bytes=N scan_ms=N copied_bytes=N copy_ms=N rest_ms=N
# This awk turns rsync's --info=progress2 figures (after tr made its carriage returns
# newlines) into copying lines, one per percent so that a large volume does not flood the log,
# keeps rsync's --stats for the done line (in the file named by `bytes`) and passes every
# other line through. A batch (no `volume`) prints no figures: rsync's --out-format lines
# ("uyuni-file ITEMIZE LENGTH NAME") give each file to the batch volume whose path (in
# ENVIRON UYUNI_BATCH: "path<TAB>name" lines, the paths without their leading slash, as
# rsync -R names the files) is the longest prefix of its name, and the file named by `bytes`
# gets "name bytes" lines: the regular files rsync transferred (or would), as --stats counts
# them. ($ is awk's here: the text is awk's, not the shell's.)
# shellcheck disable=SC2016
PROGRESS_AWK='
BEGIN {
  last = -1; total = ""; n = split(ENVIRON["UYUNI_BATCH"], rows, "\n")
  for (i = 1; i <= n; i++) {
    if (split(rows[i], f, "\t") == 2) { members++; mpath[members] = f[1]; mname[members] = f[2]; sum[members] = 0 }
  }
}
index($0, "uyuni-file ") {
  line = substr($0, index($0, "uyuni-file ") + 11)
  it = line; sub(/ .*/, "", it); line = substr(line, length(it) + 2)
  len = line; sub(/ .*/, "", len); name = substr(line, length(len) + 2); gsub(/,/, "", len)
  if (it ~ /^[<>]f/) {
    best = 0
    for (m = 1; m <= members; m++) {
      if (index(name, mpath[m] "/") == 1 && (best == 0 || length(mpath[m]) > length(mpath[best]))) best = m
    }
    if (best > 0) sum[best] += len
  }
  next
}
/^ *[0-9][0-9,]* +[0-9]+% +[^ ]+\/s +[0-9]+:[0-9:]+/ {
  pct = $2; sub(/%/, "", pct); b = $1; gsub(/,/, "", b)
  if (volume != "" && pct != last) {
    print "uyuni-sync: volume=" volume " state=copying bytes=" b " percent=" pct
    fflush()
    last = pct
  }
  next
}
/^Total transferred file size: / { b = $5; gsub(/,/, "", b); total = b; next }
/^(Number of |Total |Literal data|Matched data|File list |sent |total size is )/ { next }
/^ *$/ { next }
{ print; fflush() }
END {
  if (bytes == "") exit
  if (members > 0) {
    for (m = 1; m <= members; m++) print mname[m] " " sum[m] > bytes
  } else {
    print (total == "" ? 0 : total) > bytes
  }
}
'

# rsync for volume $1 (the rest: rsync's arguments), with its status lines: copying, then done
# with what rsync transferred and how long it took, or failed with rsync's code. Each done
# volume's bytes are added up in $SCRATCH/pass.bytes for the estimate.
rsync_volume() {
  local name=$1 rc=0 started bytes_file bytes ms
  shift
  bytes_file=$SCRATCH/bytes.$name
  echo "uyuni-sync: volume=$name state=copying"
  started=$(now_ms)
  "${RSYNC[@]}" --info=progress2 --stats "$@" | tr '\r' '\n' |
    UYUNI_BATCH='' awk -v volume="$name" -v bytes="$bytes_file" "$PROGRESS_AWK" || rc=$?
  ms=$(($(now_ms) - started))
  if [ "$rc" -eq 24 ] && [ "$VANISHED_OK" = 1 ]; then
    echo "Warning: some files vanished on the source during the copy (the source is serving)"
  elif [ "$rc" -ne 0 ]; then
    echo "uyuni-sync: volume=$name state=failed code=$rc"
    : >"$SCRATCH/failed.$name"
    echo "ERROR: rsync failed with exit code $rc" >&2
    exit "$rc"
  fi
  bytes=0
  if [ -f "$bytes_file" ]; then read -r bytes <"$bytes_file" || true; fi
  case $bytes in '' | *[!0-9]*) bytes=0 ;; esac
  echo "$bytes" >>"$SCRATCH/pass.bytes"
  echo "uyuni-sync: volume=$name state=done bytes=$bytes ms=$ms"
}

# Copies the volumes of indices $2... (batch volumes whose source is a directory, all with the
# same links and compare mode in pass $1) with one rsync: -R keeps each one's path under the
# local root, --no-implied-dirs leaves the directories above them (/etc, /srv) as they are,
# and --delete, the filter and the compare mode act inside each volume as in a copy of its
# own. Each volume gets its status lines and its mode in the summary, as with sync_volume.
sync_batch() {
  local pass=$1 i name path links mode compare=() label dry=() sources=() dirs=() members=''
  local rc=0 started ms line bytes_file=$SCRATCH/bytes.batch.$BASHPID
  shift
  links=${VOLUME_LINKS[$1]}
  mode=$(volume_mode "$pass" "$1")
  case $mode in
    checksum)
      compare=(--checksum)
      label='checksum'
      ;;
    *) label='quick (size+mtime)' ;;
  esac
  if [ "$MEASURE" = 1 ]; then dry=(--dry-run); fi
  for i in "$@"; do
    name=${VOLUME_NAMES[i]} path=${VOLUME_PATHS[i]}
    echo "uyuni-sync: volume=$name state=copying"
    if [ "$MEASURE" = 0 ]; then
      echo "Synchronizing $path ($name: $label)"
      dirs+=("$LOCAL_ROOT$path")
    fi
    # rsync's short form for another path of the same host: ":PATH". "PATH/." and not "PATH/":
    # with -R, a volume whose path is a symlink to a directory would arrive empty.
    sources+=(":$path/.")
    members+=${path#/}$'\t'$name$'\n'
  done
  sources[0]=$SOURCE${sources[0]}
  if [ "${#dirs[@]}" -gt 0 ]; then mkdir_pub "${dirs[@]}"; fi
  started=$(now_ms)
  "${RSYNC[@]}" --info=progress2 --stats -R --no-implied-dirs --out-format='uyuni-file %i %l %n' \
    "$links" "${compare[@]}" --delete "${dry[@]}" -f "merge $WORK_DIR/exclude_list" \
    "${sources[@]}" "$LOCAL_ROOT/" | tr '\r' '\n' |
    UYUNI_BATCH=$members awk -v volume='' -v bytes="$bytes_file" "$PROGRESS_AWK" || rc=$?
  ms=$(($(now_ms) - started))
  if [ "$rc" -eq 24 ] && [ "$VANISHED_OK" = 1 ]; then
    echo "Warning: some files vanished on the source during the copy (the source is serving)"
  elif [ "$rc" -ne 0 ]; then
    for i in "$@"; do
      echo "uyuni-sync: volume=${VOLUME_NAMES[i]} state=failed code=$rc"
      : >"$SCRATCH/failed.${VOLUME_NAMES[i]}"
    done
    echo "ERROR: rsync failed with exit code $rc" >&2
    exit "$rc"
  fi
  declare -A got=()
  if [ -f "$bytes_file" ]; then
    while read -r name line; do
      case $line in '' | *[!0-9]*) line=0 ;; esac
      got[$name]=$line
    done <"$bytes_file"
  fi
  for i in "$@"; do
    name=${VOLUME_NAMES[i]}
    echo "${got[$name]-0}" >>"$SCRATCH/pass.bytes"
    echo "uyuni-sync: volume=$name state=done bytes=${got[$name]-0} ms=$ms"
    if [ "$MEASURE" = 0 ]; then COPY_MODES+=("$name: $label"); fi
  done
}

# Copies one unit of pass $1: a volume of its own (one index) or a batch (several).
copy_unit() {
  local pass=$1 i
  shift
  if [ "$#" -gt 1 ]; then
    sync_batch "$pass" "$@"
    return 0
  fi
  i=$1
  sync_volume "${VOLUME_NAMES[i]}" "${VOLUME_PATHS[i]}" "${VOLUME_LINKS[i]}" \
    "$(volume_mode "$pass" "$i")" "${VOLUME_NEEDS[i]}"
}

# One pass over every volume of SYNC_VOLUMES: $1 is serving (the copy made while the source
# serves) or stopped (the copy once it is stopped), which picks each volume's compare mode.
# The required volume (the database) starts first: it is the largest copy, and once the source
# is stopped the longest by far (compared by content), so the others' copies run beside it
# instead of before it (the profile of issue 15: last in the catalogue, it started after the
# small copies). Then the batch volumes that are directories on the source, as one rsync (one
# per links and compare mode); then every other volume in SYNC_VOLUMES' order, an rsync each
# (a volume missing on the source is skipped, or fails when required, without one). Up to COPY_PARALLEL
# copies run at once: a server's volumes differ in size by orders of magnitude, so the small
# ones finish beside the large ones instead of after them, and each rsync waits on the network
# and the disks, not on this pod's CPU. A copy running beside others is a subshell: its output
# lines carry its volume's name (the batch's: "small volumes"; its status lines name each
# volume), and its modes and exit status come back through files; the first failure (in the
# order the copies started) ends the run with its code once every copy has ended.
copy_volumes() {
  local i k key rc running=0 dir=$SCRATCH/copies names units=() labels=() keys=()
  declare -A groups=()
  if [ "$MEASURE" = 0 ]; then
    probe_volumes "${VOLUME_PATHS[@]}"
  fi
  names=$(IFS=, && echo "${VOLUME_NAMES[*]}")
  echo "uyuni-sync: pass=$1 volumes=$names"
  rm -f -- "$SCRATCH/pass.bytes"
  for i in "${!VOLUME_NAMES[@]}"; do
    if [ "${VOLUME_COPY[i]}" = batch ] && [ "${SOURCE_KIND[${VOLUME_PATHS[i]}]-}" = directory ]; then
      key="${VOLUME_LINKS[i]} $(volume_mode "$1" "$i")"
      if [ -z "${groups[$key]+set}" ]; then keys+=("$key"); fi
      groups[$key]+=" $i"
    fi
  done
  for i in "${!VOLUME_NAMES[@]}"; do
    if [ "${VOLUME_NEEDS[i]}" = required ]; then
      units+=("$i")
      labels+=("${VOLUME_NAMES[i]}")
    fi
  done
  for key in "${keys[@]}"; do
    units+=("${groups[$key]# }")
    labels+=('small volumes')
  done
  for i in "${!VOLUME_NAMES[@]}"; do
    if [ "${VOLUME_NEEDS[i]}" = required ] ||
      { [ "${VOLUME_COPY[i]}" = batch ] && [ "${SOURCE_KIND[${VOLUME_PATHS[i]}]-}" = directory ]; }; then
      continue
    fi
    units+=("$i")
    labels+=("${VOLUME_NAMES[i]}")
  done
  if [ "$COPY_PARALLEL" -eq 1 ]; then
    for k in "${!units[@]}"; do
      # Word splitting is the point: a unit is a list of indices.
      # shellcheck disable=SC2086
      copy_unit "$1" ${units[k]}
    done
    return 0
  fi
  rm -rf -- "$dir"
  mkdir -p -- "$dir"
  for k in "${!units[@]}"; do
    if [ "$running" -ge "$COPY_PARALLEL" ]; then
      wait -n || true
      running=$((running - 1))
    fi
    {
      rc=0
      (
        # This subshell's own list, handed back through the .mode file.
        # shellcheck disable=SC2030
        COPY_MODES=()
        # shellcheck disable=SC2086
        copy_unit "$1" ${units[k]}
        printf '%s\n' "${COPY_MODES[@]}" >"$dir/$k.mode"
      ) | sed -u "s/^/[${labels[k]}] /" || rc=$?
      echo "$rc" >"$dir/$k.rc"
    } &
    running=$((running + 1))
  done
  wait
  for k in "${!units[@]}"; do
    rc=1
    if [ -f "$dir/$k.rc" ]; then rc=$(<"$dir/$k.rc"); fi
    if [ "$rc" -ne 0 ]; then
      # A copy that failed before its rsync (a required directory missing) printed no
      # status line of its own.
      for i in ${units[k]}; do
        if [ ! -e "$SCRATCH/failed.${VOLUME_NAMES[i]}" ]; then
          echo "uyuni-sync: volume=${VOLUME_NAMES[i]} state=failed code=$rc"
        fi
      done
      if [ "${labels[k]}" = 'small volumes' ]; then
        echo "ERROR: the copy of the small volumes failed (its lines above)" >&2
      else
        echo "ERROR: the copy of volume ${labels[k]} failed (its lines above)" >&2
      fi
      exit "$rc"
    fi
    # The main shell's list: what the subshells wrote comes back here.
    # shellcheck disable=SC2031
    mapfile -t -O "${#COPY_MODES[@]}" COPY_MODES <"$dir/$k.mode"
  done
  rm -rf -- "$dir"
}

# The sum of the bytes the last pass's rsyncs transferred (or, measuring, would transfer).
pass_bytes() {
  local sum=0 n
  if [ -f "$SCRATCH/pass.bytes" ]; then
    while read -r n; do
      sum=$((sum + n))
    done <"$SCRATCH/pass.bytes"
  fi
  echo "$sum"
}

# The compare mode of volume $2 in pass $1 (serving or stopped).
volume_mode() {
  if [ "$1" = serving ]; then
    echo "${VOLUME_SERVING[$2]}"
  else
    echo "${VOLUME_STOPPED[$2]}"
  fi
}

# Copies the source file $1, if it exists, into the local directory $2.
copy_if_present() {
  if on_source "test -e $(shq "$1")"; then
    mkdir_pub "$LOCAL_ROOT$2"
    rsync_run -l "$SOURCE:$1" "$LOCAL_ROOT$2"
  fi
}

# Replaces every literal occurrence of $2 by $3 in file $1 (no regular expression: the paths
# come from the database).
replace_literal() {
  local content
  content=$(
    cat -- "$1"
    printf x
  )
  content=${content%x}
  printf '%s' "${content//"$2"/"$3"}" >"$1"
}

fingerprint() {
  openssl x509 -in "$1" -noout -fingerprint -sha256 2>/dev/null
}

# Ends the shared SSH connection, if one was opened: its socket is in the scratch dir.
close_ssh() {
  if [ -e "$SSH_SOCKET" ]; then
    "${SSH[@]}" -O exit "$SOURCE" >/dev/null 2>&1 || true
  fi
}

# The shared connection goes first: its socket is one of the scratch dir's files.
cleanup_scratch() {
  close_ssh
  find "$SCRATCH" -mindepth 1 -delete 2>/dev/null || true
}

# Also on failure: the synced CA key must not stay on the root volume (D31), and the staged
# secrets go with the scratch dir.
on_exit() {
  rm -rf -- "$SSL_BUILD" 2>/dev/null || true
  cleanup_scratch
}

# Steps 10 (its copies) to 13: directories of the source's configuration copied to where the
# image reads them. They only read the source, and no later volume copy undoes them (the
# distributions and the Kerberos directory are protected by the rsync filter; the snippets
# and tomcat's conf.d are inside var-cobbler and etc-tomcat, whose stopped copy finds them equal
# to the source's): a final run makes them while the source still serves, outside the window.
# (Steps 14 to 16 write into volumes that the stopped copy would clean, /etc/sysconfig,
# /etc/rhn/ca and /srv/www: they stay after it.) The distributions copied are listed in
# $WORK_DIR/distros_copied for step 10's second half.
copy_source_configuration() {
  local target path dir
  # Step 10: distribution trees move to /srv/www/distributions/<org-label>.
  echo 'Migrating auto-installable distributions...'
  : >"$WORK_DIR/distros_copied"
  while IFS=, read -r target path; do
    case $path in /*) ;; *) continue ;; esac
    # The target becomes a directory name: no path separators, no dot names.
    case $target in '' | */* | . | ..) echo "Skipping distribution $path: unusable name"; continue ;; esac
    if on_source "test -e $(shq "$path")"; then
      echo "Copying distribution $target from $path"
      mkdir_pub "$LOCAL_ROOT/srv/www/distributions/$target"
      rsync_run -l --delete --info=progress2 "$SOURCE:$path/" "$LOCAL_ROOT/srv/www/distributions/$target/"
      printf '%s,%s\n' "$target" "$path" >>"$WORK_DIR/distros_copied"
    else
      echo "Skipping missing distribution $path"
    fi
  done <"$WORK_DIR/distros"

  # Step 11: auto-installation snippets.
  echo 'Migrating auto-installation snippets...'
  if on_source 'test -d /var/lib/cobbler/snippets/spacewalk'; then
    on_source 'find /var/lib/cobbler/snippets/spacewalk -mindepth 1 -maxdepth 1 -type d' >"$WORK_DIR/snippets_dirs"
    while IFS= read -r dir; do
      case $dir in /var/lib/cobbler/snippets/spacewalk/*) ;; *) continue ;; esac
      echo "Copying auto-installation snippets from $dir"
      mkdir_pub "$LOCAL_ROOT$dir"
      # Trailing slashes: the content into the directory, not the directory into itself (D50).
      rsync_run -l --delete "$SOURCE:$dir/" "$LOCAL_ROOT$dir/"
    done <"$WORK_DIR/snippets_dirs"
  fi

  # Step 12: tomcat configuration.
  if on_source 'test -d /etc/tomcat/conf.d'; then
    echo 'Copying the tomcat configuration...'
    mkdir_pub "$LOCAL_ROOT/etc/tomcat/conf.d"
    rsync_run -l --delete "$SOURCE:/etc/tomcat/conf.d/" "$LOCAL_ROOT/etc/tomcat/conf.d/"
  fi

  # Step 13: Kerberos configuration, kept on the etc-rhn volume.
  if on_source 'test -d /etc/krb5.conf.d'; then
    echo 'Copying the Kerberos configuration...'
    mkdir_pub "$LOCAL_ROOT/etc/rhn/krb5.conf.d"
    rsync_run -l --delete "$SOURCE:/etc/krb5.conf.d/" "$LOCAL_ROOT/etc/rhn/krb5.conf.d/"
  fi
}

# Start from nothing (D31): stale files of an earlier run must never be taken for
# this run's, and the Secret loses its data until this run writes it at the end.
mkdir -p -- "$WORK_DIR" "$SCRATCH"
find "$WORK_DIR" -mindepth 1 -delete
cleanup_scratch
trap on_exit EXIT
cd "$WORK_DIR"
printf '%s\n' '{"data":null}' >"$SCRATCH/clear.json"
patch_secret "$DATA_SECRET" "$SCRATCH/clear.json"

echo "Connecting to $SOURCE_FQDN..."
if ! on_source true; then
  if [ "$SSH_USER" = root ]; then
    fail "cannot run commands on $SOURCE_FQDN"
  fi
  fail "user $SSH_USER cannot run commands as root on $SOURCE_FQDN: it needs passwordless sudo"
fi

# Step 1: the source must be a classic (RPM-installed) server.
if ! on_source 'test -e /etc/susemanager-release' && ! on_source 'test -e /etc/uyuni-release'; then
  fail "neither /etc/susemanager-release nor /etc/uyuni-release exists on $SOURCE_FQDN: is it a non-containerized Uyuni or SUSE Manager server?"
fi
# What the migration cannot go on without, looked for before any service stops: the
# database directory and rhn.conf. Every other directory is optional.
for i in "${!VOLUME_NAMES[@]}"; do
  [ "${VOLUME_NEEDS[i]}" = required ] || continue
  path=${VOLUME_PATHS[i]}
  on_source "test -d $(shq "$path")" ||
    fail "the database directory $path does not exist on $SOURCE_FQDN: is PostgreSQL of this server elsewhere? The migration copies a local database only"
done
on_source 'test -f /etc/rhn/rhn.conf' ||
  fail "/etc/rhn/rhn.conf does not exist on $SOURCE_FQDN: is it an Uyuni or SUSE Manager server?"

# Asked before any service is stopped, and about the unit itself: the reference's
# quoting made it list all units instead (§3.6, D30).
has_hubxmlrpc=false
if on_source 'systemctl is-active --quiet hub-xmlrpc-api.service 2>/dev/null' ||
  on_source 'systemctl is-enabled --quiet hub-xmlrpc-api.service 2>/dev/null'; then
  has_hubxmlrpc=true
fi
# TFTP is a container of its own with today's images (server-image 5.2.5): whether the
# source served it is only recorded, for the tool to deploy that container; the
# reference enabled tftp.socket in the server instead (step 8).
tftp=false
if on_source 'systemctl is-enabled --quiet tftp.socket 2>/dev/null' ||
  on_source 'systemctl is-active --quiet tftp.socket 2>/dev/null'; then
  tftp=true
fi

# Step 2: the source keeps serving until everything that can be done before its
# stop is done (issue 15): the distribution query, the rsync filter and, in the final
# run, a catch-up copy of every volume and the copies of steps 10 to 13.
if [ "$SYNC_MODE" = prepare ]; then
  echo "Preparing the migration: $SOURCE_FQDN keeps serving"
fi
on_source 'systemctl start postgresql.service'

# Step 3: the auto-installable distributions.
printf '%s\n' 'COPY (SELECT MIN(CONCAT(org_id, '\''-'\'', label)) AS target, base_path FROM rhnKickstartableTree GROUP BY base_path) TO STDOUT WITH CSV;' | ssh_source 'spacewalk-sql --select-mode -' >"$WORK_DIR/distros"

# Step 5: the rsync filter.
{
  # 5.1: distribution trees are copied by step 10; protect what a prepare run copied.
  while IFS=, read -r target path; do
    case $path in /*) ;; *) continue ;; esac
    if on_source "test -e $(shq "$path")"; then
      printf -- '-/ %s\n' "$path"
      printf 'P/ /srv/www/distributions/%s\n' "$target"
    fi
  done <"$WORK_DIR/distros"
  # 5.2: files under /etc owned by the image's RPMs and not noreplace keep the image's
  # version (config(noreplace) is 1<<4 in lib/rpmlib.h).
  rpm -qa --qf '[%{fileflags},%{filenames}\n]' | while IFS=, read -r flags path; do
    case $path in /etc/*) ;; *) continue ;; esac
    # Checked as a number before the arithmetic, which would evaluate anything else.
    case $flags in '' | *[!0-9]*) continue ;; esac
    if [ $((flags & 16)) -eq 0 ] && [ -f "$LOCAL_ROOT$path" ]; then
      printf -- '-/ %s\n' "$path"
    fi
  done
  # 5.3: fixed exclusions.
  # zypper's cache is not worth migrating
  printf '%s\n' '-/ /var/cache/zypp/**'
  # brings nothing and holds dangling symlinks (bsc#1231769)
  printf '%s\n' '-/ /var/cache/rhn/reposync/**'
  # so that it is regenerated (bsc#1228685)
  printf '%s\n' '-/ /root/.mgr-sync'
  # tomcat defaults: settings belong in /etc/tomcat/conf.d
  printf '%s\n' '-/ /etc/sysconfig/tomcat'
  # tomcat defaults, as above
  printf '%s\n' '-/ /etc/tomcat/tomcat.conf'
  # copied into /etc/rhn/krb5.conf.d instead (step 13)
  printf '%s\n' '-/ /etc/krb5.conf.d'
  # filled from the source's /etc/krb5.conf.d (step 13)
  printf '%s\n' '-/ /etc/rhn/krb5.conf.d'
  # schema migration state of the old server
  printf '%s\n' '-/ /etc/sysconfig/rhn/reportdb-schema-upgrade'
  # schema migration state of the old server
  printf '%s\n' '-/ /etc/sysconfig/rhn/schema-upgrade'
  # not needed, and can be huge
  printf '%s\n' '-/ /var/log/lastlog'
  # units are recreated by the image
  printf '%s\n' '-/ /etc/systemd/**'
  # cannot work in the container
  printf '%s\n' '-/ /etc/salt/master.d/py2*-compat-salt.conf'
  # left on some old systems (uyuni#10055)
  printf '%s\n' '-/ /etc/apache2/vhosts.d/cobbler.conf'
} >"$WORK_DIR/exclude_list"

if [ "$SYNC_MODE" = final ]; then
  # The catch-up copy: what changed since the last copy moves while the source still
  # serves, so that the copy after the stop moves only the last moments' changes.
  echo "Catching up while $SOURCE_FQDN keeps serving..."
  VANISHED_OK=1
  COPY_MODES=()
  copy_volumes serving
  copy_source_configuration
  VANISHED_OK=0

  # When the outage began and when the services were down, as the Job's clock says;
  # the tool reports the outage from them (core::outage).
  outage_started_at=$(date +%s)
  echo "Stopping the services of $SOURCE_FQDN..."
  on_source 'spacewalk-service stop'
  # Step 4: the database is copied with PostgreSQL stopped.
  on_source 'systemctl stop postgresql.service'
  services_stopped_at=$(date +%s)
fi

# Step 6 of the reference (a -nolink CA copy written on the source) is gone: nothing
# is written on the source (D50); step 16 reads the CA with cat instead.

# Step 7: every volume, the database included.
COPY_MODES=()
if [ "$SYNC_MODE" = final ]; then
  copy_volumes stopped
else
  copy_started=$(now_ms)
  copy_volumes serving
  copy_ms=$(($(now_ms) - copy_started))
  copied_bytes=$(pass_bytes)
  # What the final run's copy would move if it started now, and how long its scan of every
  # volume takes (in the final run's compare modes: the database with checksums): rsync
  # --dry-run over every volume, while the source keeps serving. With this run's copy rate
  # and the time of the steps after the copy, the tool predicts the final run's window.
  # The summary lists the copy's modes, not the measure's.
  copy_modes=("${COPY_MODES[@]}")
  MEASURE=1
  scan_started=$(now_ms)
  copy_volumes measure
  scan_ms=$(($(now_ms) - scan_started))
  delta_bytes=$(pass_bytes)
  MEASURE=0
  COPY_MODES=("${copy_modes[@]}")
  # Before the later steps' clock: a final run makes these before the stop.
  copy_source_configuration
  rest_started=$(now_ms)
fi

# Step 8: enable the services in the (volume-backed) systemd wants directories.
spacewalk-service enable
# Not tftp.socket: TFTP runs in its own container. A link an earlier version of this
# script made would start a second, unreachable TFTP server in the server container.
rm -f -- "$LOCAL_ROOT/etc/systemd/system/sockets.target.wants/tftp.socket"

# Step 9: paths that moved into the image.
if [ -f "$LOCAL_ROOT/etc/tomcat/server.xml" ]; then
  sed -i -e 's|appBase="webapps"|appBase="/usr/share/susemanager/www/tomcat/webapps"|' "$LOCAL_ROOT/etc/tomcat/server.xml"
fi
if [ -f "$LOCAL_ROOT/etc/apache2/vhosts.d/vhost-ssl.conf" ]; then
  sed -i -e 's|DocumentRoot\s*"/srv/www/htdocs"|DocumentRoot "/usr/share/susemanager/www/htdocs"|' "$LOCAL_ROOT/etc/apache2/vhosts.d/vhost-ssl.conf"
fi

# Step 10, its second half: cobbler's distribution records name the new paths. After the last
# copy of var-cobbler, which brings back the source's records.
while IFS=, read -r target path; do
  while IFS= read -r -d '' config; do
    replace_literal "$config" "$path/" "/srv/www/distributions/$target/"
  done < <(grep -rlZF -- "$path/" "$LOCAL_ROOT/var/lib/cobbler/collections/distros/" 2>/dev/null || true)
done <"$WORK_DIR/distros_copied"

# Step 14: monitoring configuration.
echo 'Migrating the monitoring configuration...'
if [ -f "$LOCAL_ROOT/etc/sysconfig/prometheus-postgres_exporter" ]; then
  echo 'The monitoring configuration of the source is too old: apply it again after the migration'
  rm -f -- "$LOCAL_ROOT/etc/sysconfig/prometheus-postgres_exporter"
fi
copy_if_present '/usr/lib/systemd/system/tomcat.service.d/jmx.conf' '/etc/sysconfig/tomcat/systemd/'
copy_if_present '/usr/lib/systemd/system/taskomatic.service.d/jmx.conf' '/etc/sysconfig/taskomatic/systemd/'
copy_if_present '/etc/postgres_exporter/postgres_exporter_queries.yaml' '/etc/sysconfig/prometheus-postgres_exporter/'
copy_if_present '/etc/systemd/system/prometheus-postgres_exporter.service.d/60-server.conf' '/etc/sysconfig/prometheus-postgres_exporter/systemd/'
copy_if_present '/etc/postgres_exporter/pg_passwd' '/etc/sysconfig/prometheus-postgres_exporter/'
mkdir_pub "$LOCAL_ROOT/etc/systemd/system/multi-user.target.wants"
rm -f -- "$LOCAL_ROOT/etc/systemd/system/multi-user.target.wants/prometheus-postgres_exporter.service"
if on_source 'systemctl is-enabled --quiet prometheus-postgres_exporter.service 2>/dev/null'; then
  echo 'Enabling the prometheus-postgres_exporter service...'
  ln -s /usr/lib/systemd/system/prometheus-postgres_exporter.service "$LOCAL_ROOT/etc/systemd/system/multi-user.target.wants/prometheus-postgres_exporter.service"
fi

# Step 15: custom CAs go to /etc/rhn/ca on the etc-rhn volume, where today's image
# loads them from; the anchors are not a volume any more and nothing is wiped (D17).
# The exclusions are base names, so they match (the reference's absolute pattern did
# not, D50); -L copies the certificates that anchors link to.
echo 'Migrating custom CA certificates...'
# Each directory is looked for first: --ignore-missing-args does not cover DIR/ (D50).
mkdir_pub "$LOCAL_ROOT/etc/rhn/ca"
ca_dirs=()
for dir in '/usr/share/pki/trust/anchors' '/etc/pki/trust/anchors'; do
  if on_source "test -d $(shq "$dir")"; then
    ca_dirs+=("$SOURCE:$dir/")
  else
    echo "Not on the source, skipping $dir"
  fi
done
if [ "${#ca_dirs[@]}" -gt 0 ]; then
  rsync_run -L \
    --exclude=LOCAL-RHN-ORG-TRUSTED-SSL-CERT --exclude=RHN-ORG-TRUSTED-SSL-CERT \
    "${ca_dirs[@]}" "$LOCAL_ROOT/etc/rhn/ca/"
fi

# Step 16: the deployed CA, read dereferenced with cat: nothing is written on the
# source (D50). It is public, but staged in the scratch dir with the rest.
ca_file="$SCRATCH/ca.crt"
if ! on_source 'test -f /etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT'; then
  fail "no CA certificate /etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT on $SOURCE_FQDN"
fi
on_source 'cat /etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT' >"$ca_file"
mkdir_pub "$LOCAL_ROOT/srv/www/htdocs/pub"
rm -f -- "$LOCAL_ROOT/srv/www/htdocs/pub/RHN-ORG-TRUSTED-SSL-CERT"
ln -s /etc/pki/trust/anchors/LOCAL-RHN-ORG-TRUSTED-SSL-CERT "$LOCAL_ROOT/srv/www/htdocs/pub/RHN-ORG-TRUSTED-SSL-CERT"

RHN_CONF="$LOCAL_ROOT/etc/rhn/rhn.conf"
[ -f "$RHN_CONF" ] || fail "no /etc/rhn/rhn.conf was copied from $SOURCE_FQDN"

# Step 18: domain resolution. The hosts are never empty on Kubernetes (D15).
echo 'Altering the configuration for domain resolution...'
conf_set db_host "$DB_HOST" "$RHN_CONF" append
conf_set report_db_host "$REPORT_DB_HOST" "$RHN_CONF" append
# In-cluster DB connections run without SSL with today's images (images-today A.7, D.3).
conf_set db_ssl_enabled 0 "$RHN_CONF" append
conf_set report_db_ssl_enabled 0 "$RHN_CONF" append
# TLS ends at the ingress (reference step 21.1, made idempotent).
conf_set server.no_ssl 1 "$RHN_CONF" append
# The reference renamed server.jabber_server to java.hostname when the latter is
# missing; adding java.hostname with the same value is equivalent and idempotent.
if ! conf_get java.hostname "$RHN_CONF" >/dev/null &&
  jabber_server=$(conf_get server.jabber_server "$RHN_CONF"); then
  conf_set java.hostname "$jabber_server" "$RHN_CONF" append
fi
# Appended once, not on every run (D50).
mkdir_pub "$LOCAL_ROOT/etc/cobbler/settings.d"
if ! grep -qx 'client_use_localhost: true' "$LOCAL_ROOT/etc/cobbler/settings.d/zz-uyuni.settings" 2>/dev/null; then
  if [ -f "$LOCAL_ROOT/etc/cobbler/settings.d/zz-uyuni.settings" ]; then sed -i -e '/^client_use_localhost:/d' "$LOCAL_ROOT/etc/cobbler/settings.d/zz-uyuni.settings"; fi
  (umask 022 && echo 'client_use_localhost: true' >>"$LOCAL_ROOT/etc/cobbler/settings.d/zz-uyuni.settings")
fi

# Step 19: container changes (JDWP on all interfaces, obsolete JVM options).
echo 'Altering the configuration for the container environment...'
if [ -f "$LOCAL_ROOT/etc/rhn/taskomatic.conf" ]; then
  sed -i -e 's/address=[^:]*:/address=*:/' "$LOCAL_ROOT/etc/rhn/taskomatic.conf"
fi
for conf in "$LOCAL_ROOT/etc/tomcat/conf.d"/*; do
  [ -f "$conf" ] || continue
  sed -i -e 's/--add-modules java.annotation,com.sun.xml.bind://' -e 's/-XX:-UseConcMarkSweepGC//' "$conf"
done
if [ -f "$LOCAL_ROOT/etc/tomcat/conf.d/remote_debug.conf" ]; then
  sed -i -e 's/address=[^:]*:/address=*:/' "$LOCAL_ROOT/etc/tomcat/conf.d/remote_debug.conf"
fi

# Step 20: the mirror, if one is configured, is mounted at /mirror. The source's own
# directory is reported, so that the run can say when nothing is mounted there.
source_mirror=$(conf_get server.susemanager.fromdir "$RHN_CONF") || source_mirror=''
conf_set server.susemanager.fromdir /mirror "$RHN_CONF" existing

echo 'Extracting the migration data...'
# Values stay in variables and files of the scratch dir: never printed.
declare -A values=() files=()
values['timezone']=$(on_source 'timedatectl show -p Timezone --value')
# From the synced data: that is what the database will run on (R of §3.5, D01).
PG_VERSION_FILE="$LOCAL_ROOT/var/lib/pgsql/data/PG_VERSION"
[ -f "$PG_VERSION_FILE" ] || fail "the synced database has no PG_VERSION"
read -r pg_version <"$PG_VERSION_FILE" || true
trim_var pg_version
[ -n "$pg_version" ] || fail "the synced PG_VERSION is empty"
values['pg_version']=$pg_version
values['db_user']=$(conf_get 'db_user' "$RHN_CONF") || fail '/etc/rhn/rhn.conf has no db_user'
values['db_password']=$(conf_get 'db_password' "$RHN_CONF") || fail '/etc/rhn/rhn.conf has no db_password'
values['db_name']=$(conf_get 'db_name' "$RHN_CONF") || fail '/etc/rhn/rhn.conf has no db_name'
values['db_port']=$(conf_get 'db_port' "$RHN_CONF") || values['db_port']='5432'
values['report_db_user']=$(conf_get 'report_db_user' "$RHN_CONF") || values['report_db_user']=''
values['report_db_password']=$(conf_get 'report_db_password' "$RHN_CONF") || values['report_db_password']=''
values['has_hubxmlrpc']=$has_hubxmlrpc
values['tftp']=$tftp
if [ "$SYNC_MODE" = final ]; then
  values['outage_started_at']=$outage_started_at
  values['services_stopped_at']=$services_stopped_at
fi
values['mirror']=$source_mirror
if on_source 'grep -rqs jdwp /etc/tomcat/conf.d /etc/rhn/taskomatic.conf'; then values['debug']=true; else values['debug']=false; fi
if fqdn=$(conf_get java.hostname "$RHN_CONF") && [ -n "$fqdn" ]; then
  values['fqdn']=$fqdn
fi
files['ca.crt']=$ca_file

# The CA key only when ssl-build holds the deployed CA: the fingerprints are compared as
# variables (the reference compared a literal, D16). Otherwise the certificates are
# third-party ones: the server certificate and key, fetched into the scratch dir.
ca_fp=$(fingerprint "$ca_file") || ca_fp=''
build_fp=''
if [ -f "$SSL_BUILD/RHN-ORG-TRUSTED-SSL-CERT" ]; then
  build_fp=$(fingerprint "$SSL_BUILD/RHN-ORG-TRUSTED-SSL-CERT") || build_fp=''
fi
if [ -n "$ca_fp" ] && [ "$build_fp" = "$ca_fp" ] && [ -f "$SSL_BUILD/RHN-ORG-PRIVATE-SSL-KEY" ]; then
  echo 'found the Uyuni CA key'
  cat -- "$SSL_BUILD/RHN-ORG-PRIVATE-SSL-KEY" >"$SCRATCH/ca.key"
  files['ca.key']=$SCRATCH/ca.key
elif on_source 'test -f /etc/pki/tls/certs/spacewalk.crt' &&
  on_source 'test -f /etc/pki/tls/private/spacewalk.key'; then
  echo 'found a third-party server certificate'
  on_source 'cat /etc/pki/tls/certs/spacewalk.crt' >"$SCRATCH/server.crt"
  on_source 'cat /etc/pki/tls/private/spacewalk.key' >"$SCRATCH/server.key"
  files['server.crt']=$SCRATCH/server.crt
  files['server.key']=$SCRATCH/server.key
else
  echo 'found neither the Uyuni CA key nor a server certificate and key'
fi

if [ "$SYNC_MODE" = prepare ]; then
  rest_ms=$(($(now_ms) - rest_started))
  echo "uyuni-sync: estimate delta_bytes=$delta_bytes scan_ms=$scan_ms copied_bytes=$copied_bytes copy_ms=$copy_ms rest_ms=$rest_ms"
  values['delta_bytes']=$delta_bytes
  values['scan_ms']=$scan_ms
  values['copied_bytes']=$copied_bytes
  values['copy_ms']=$copy_ms
  values['rest_ms']=$rest_ms
fi

# One merge patch, every value base64-encoded: the JSON needs no escaping.
patch="$SCRATCH/data.json"
{
  printf '{"data":{"%s":"%s"' 'job' "$(b64 "$JOB_NAME")"
  for key in "${!values[@]}"; do
    printf ',"%s":"%s"' "$key" "$(b64 "${values[$key]}")"
  done
  for key in "${!files[@]}"; do
    printf ',"%s":"%s"' "$key" "$(base64 -w0 <"${files[$key]}")"
  done
  printf '}}\n'
} >"$patch"

# The CA key must not stay on a volume (D31): it is in the scratch dir now. Removed
# before the patch, so a failed patch leaves no copy behind either (on_exit too).
rm -rf -- "$SSL_BUILD"
patch_secret "$DATA_SECRET" "$patch"
cleanup_scratch
echo 'How each volume was copied (quick: size and modification time; checksum: content):'
printf '  %s\n' "${COPY_MODES[@]}"
echo DONE
