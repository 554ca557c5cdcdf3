#!/usr/bin/env bash
# The data-sync Job's init container: seeds every empty server volume from the image before the
# rsync, as the server's own init container would (reference D34). Files the rsync excludes so
# that the image's version wins must still exist in the volume. `lost+found` (ext4) does not
# make a volume non-empty.
#
# Parameters, set by the Job spec (builders/data_sync.rs):
#   SEED_VOLUMES   one volume a line, tab-separated: its name (mounted at /mnt/NAME) and its
#                  path in the image
#   LOCAL_ROOT     prefix of every path: empty in a Job, a directory in tests
set -euo pipefail

: "${SEED_VOLUMES:?SEED_VOLUMES is not set}"
LOCAL_ROOT=${LOCAL_ROOT-}
while IFS=$'\t' read -r name path; do
  [ -n "$name" ] || continue
  image_dir=$LOCAL_ROOT${path%/}
  volume=$LOCAL_ROOT/mnt/$name
  if [ -d "$image_dir" ] && [ -z "$(find "$volume" -mindepth 1 -maxdepth 1 ! -name lost+found -print -quit)" ]; then
    echo "Seeding volume $name from the image"
    cp -a "$image_dir/." "$volume/"
  fi
done <<<"$SEED_VOLUMES"
