#!/bin/sh
# The entrypoint of docker.io/local/postgres:18, the real node's PostgreSQL 18 stand-in for
# Uyuni's server-postgresql image (uyuni-project/uyuni containers/server-postgresql-image/
# Dockerfile, as ../shared/reference/uyuni-images-today.md B.1–B.2 reads it: the openSUSE
# postgres:18 base with the Docker library's entrypoint semantics, postgres as uid/gid 999,
# PGDATA /var/lib/pgsql/data, PG_MAJOR in the environment).
#
# What it imitates: on a data directory without PG_VERSION, `initdb` with superuser
# $POSTGRES_USER (default postgres) and, when given, the password in $POSTGRES_PASSWORD (handed
# to initdb as a file, never as an argument), then `postgres` listening on every address with
# password authentication from the network and trust on the local socket; on an existing data
# directory, `postgres` on it.
# What it does not: /docker-entrypoint-initdb.d, the Uyuni tuning and upgrade scripts, TLS, and
# the drop from root to postgres (it runs as the pod's user, which must be 999: no gosu here).
set -eu
PGDATA=${PGDATA:-/var/lib/pgsql/data}
export PGDATA
if [ "$(id -u)" = 0 ]; then
  echo "postgres-entrypoint: running as root; this stand-in runs PostgreSQL as the pod's user: set runAsUser: 999" >&2
  exit 1
fi
if [ "${1:-postgres}" != postgres ]; then
  exec "$@"
fi
[ "$#" -eq 0 ] || shift
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  mkdir -p "$PGDATA"
  chmod 700 "$PGDATA"
  pwfile=""
  if [ -n "${POSTGRES_PASSWORD:-}" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  fi
  initdb -D "$PGDATA" -U "${POSTGRES_USER:-postgres}" --no-locale -E UTF8 \
    --auth-local=trust --auth-host=scram-sha-256 ${pwfile:+--pwfile="$pwfile"}
  [ -z "$pwfile" ] || rm -f "$pwfile"
  printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/tmp "$@"
