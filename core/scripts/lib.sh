#!/usr/bin/env bash
# Helpers shared by the Job scripts. A Job runs this text and its script as one `bash -c`
# (core/src/scripts/mod.rs), so the Job needs nothing but its own spec; run from the repository,
# a script loads this file from beside it. Functions only: nothing runs here, and no value of a
# Job (let alone a secret) is written into this file.

fail() {
  echo "ERROR: $*" >&2
  exit 1
}

# Trims the leading and trailing whitespace of the variable named $1.
trim_var() {
  local -n ref=$1
  ref=${ref#"${ref%%[![:space:]]*}"}
  ref=${ref%"${ref##*[![:space:]]}"}
}

# Prints the value of key $1 in the rhn.conf-style file $2, or fails when the key is absent.
# As the rhn.conf parser does, only the whitespace around "=" and at the line ends is trimmed:
# spaces, "#", quotes and "$" inside the value are kept (D30). The last occurrence wins.
conf_get() {
  local key=$1 file=$2 line k v value='' found=1
  [ -f "$file" ] || return 1
  while IFS= read -r line || [ -n "$line" ]; do
    [[ $line == *=* ]] || continue
    k=${line%%=*}
    trim_var k
    [ "$k" = "$key" ] || continue
    v=${line#*=}
    trim_var v
    value=$v
    found=0
  done <"$file"
  if [ "$found" -eq 0 ]; then
    printf '%s' "$value"
  fi
  return "$found"
}

# Sets key $1 to $2 in the `key = value` file $3 (rhn.conf, postgresql.conf): every active line
# of that key is replaced (commented lines are left alone); with $4 = append (the default) the
# line is added when there is none, with $4 = existing it is not. A second run changes nothing
# (D50). Rewritten in place, which keeps the owner and mode of the file (rhn.conf is root:www
# 0640). The copy being written goes to $CONF_SCRATCH when set: rhn.conf holds passwords, and
# the data-sync Job keeps them on its in-memory scratch dir.
conf_set() {
  local key=$1 value=$2 file=$3 mode=${4:-append} line k found=0 tmp
  tmp=$(mktemp "${CONF_SCRATCH:-${TMPDIR:-/tmp}}/conf.XXXXXX")
  while IFS= read -r line || [ -n "$line" ]; do
    if [[ $line == *=* ]]; then
      k=${line%%=*}
      trim_var k
      if [ "$k" = "$key" ]; then
        printf '%s = %s\n' "$key" "$value"
        found=1
        continue
      fi
    fi
    printf '%s\n' "$line"
  done <"$file" >"$tmp"
  if [ "$found" -eq 0 ] && [ "$mode" = append ]; then
    printf '%s = %s\n' "$key" "$value" >>"$tmp"
  fi
  cat "$tmp" >"$file"
  rm -f -- "$tmp"
}

b64() {
  printf '%s' "$1" | base64 -w0
}

# Merge-patches Secret $1 of the Job's namespace with the JSON in file $2 through the API
# server, as the pod's ServiceAccount (allowed get and patch on that one Secret), whose token
# and CA are in directory $SA_DIR. Output goes to /dev/null: the answer would echo the
# Secret's data.
patch_secret() {
  local secret=$1 body=$2 host=$KUBERNETES_SERVICE_HOST
  case $host in *:*) host="[$host]" ;; esac
  curl -sS --fail --cacert "$SA_DIR/ca.crt" \
    -H "Authorization: Bearer $(cat "$SA_DIR/token")" \
    -H 'Content-Type: application/merge-patch+json' \
    -X PATCH --data-binary "@$body" -o /dev/null \
    "https://$host:$KUBERNETES_SERVICE_PORT/api/v1/namespaces/$NAMESPACE/secrets/$secret" ||
    fail "could not update Secret $secret"
}

# What clears a fault in the synced data itself: a new final sync. A sync that succeeded is never
# repeated by itself, so "run again" alone would retry this Job on the same data (issue 18: every
# advice to run again must be one a re-run can clear). The Jobs carry the sync's name.
resync_advice() {
  printf '%s' "running again alone does not clear this: delete the final data-sync Job ${UYUNI_DATA_SYNC_JOB:-(kubectl get jobs -l kubectl-uyuni.io/step=data-sync)} (kubectl delete job, in the migration's namespace), then run the migration again; the final data sync runs anew and stops the source's services"
}

# The first line of PG_VERSION in directory $1, trimmed.
pg_major() {
  local v=''
  [ -f "$1/PG_VERSION" ] || return 1
  read -r v <"$1/PG_VERSION" || true
  trim_var v
  printf '%s' "$v"
}

# The image checks' verdict: one line, and the Job fails with it.
unsupported() {
  printf 'UNSUPPORTED: %s\n' "$*"
  exit 1
}

# What image $1 says it is (its os-release under $2): helps the user read a check's verdict,
# and is no part of it.
describe_image() {
  local pretty
  if [ -r "$2/etc/os-release" ]; then
    pretty=$(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$2/etc/os-release")
    printf 'Image %s is based on %s\n' "$1" "${pretty:-an unnamed system}"
  fi
}
