#!/usr/bin/env bash
# Builds the release archive of kubectl-uyuni for this platform into dist/ and renders the krew
# manifest plugins/uyuni.yaml from .krew.yaml with the sha256 of every archive in dist/
# (archives of other platforms, built elsewhere, can be copied there first).
#
#   scripts/release.sh [VERSION]        VERSION defaults to v + the crate's version
#
# Then: kubectl krew install --manifest=plugins/uyuni.yaml --archive=dist/kubectl-uyuni_VERSION_OS_ARCH.tar.gz
set -euo pipefail
cd "$(dirname "$0")/.."

version_args=()
if [ $# -gt 0 ]; then
  version_args=(--version "$1")
fi

cargo build --release --quiet -p kubectl-uyuni --bin kubectl-uyuni --bin uyuni-release
target_dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
"$target_dir/release/uyuni-release" "${version_args[@]}" \
  --binary "$target_dir/release/kubectl-uyuni" --root "$(pwd)"
