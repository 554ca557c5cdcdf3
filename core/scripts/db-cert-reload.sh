#!/bin/bash
# The `cert-reload` container of the `db` pod: PostgreSQL reads its certificate and key only at
# start and on a reload (SIGHUP), so a certificate cert-manager renews in Secret `db-cert`
# would otherwise only be served after the next restart. The kubelet replaces the files of the
# Secret volume in place (no subPath); this loop notices the new content and reloads.
#
# Environment: UYUNI_CERT_FILES (space-separated paths to watch), PGDATA (the data directory,
# whose postmaster.pid pg_ctl reads; the pod shares its process namespace, so the PID is ours
# to signal), UYUNI_CERT_POLL_SECONDS (default 60; the kubelet itself takes up to a minute or
# two to update a Secret volume).
set -u
interval=${UYUNI_CERT_POLL_SECONDS:-60}
read -r -a files <<<"${UYUNI_CERT_FILES:?UYUNI_CERT_FILES names no file}"
: "${PGDATA:?PGDATA is not set}"

fingerprint() {
  # A missing file counts as content too: its absence changes the sum.
  cat -- "${files[@]}" 2>/dev/null | cksum
}

# `sleep` in the background and `wait`, so that a TERM ends the loop at once.
trap 'exit 0' TERM INT
loaded=$(fingerprint)
echo "Watching ${files[*]} every ${interval}s; PostgreSQL is reloaded when they change"
while :; do
  sleep "$interval" &
  wait $!
  current=$(fingerprint)
  [ "$current" = "$loaded" ] && continue
  echo "The certificate files changed: reloading PostgreSQL (pg_ctl reload)"
  if pg_ctl reload -D "$PGDATA"; then
    loaded=$current
  else
    echo "pg_ctl reload failed (is PostgreSQL running?); trying again in ${interval}s" >&2
  fi
done
