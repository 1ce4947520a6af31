#!/usr/bin/env bash
# Builds the Debian packages postgresql-15-docsync, docsync-worker and docsync-gateway from this
# checkout (packaging/debian/control):
#   packaging/build-debs.sh [OUTDIR]     the .deb files land in OUTDIR (default: build/debs)
# Works on a copy of the tree (without build/, .git and the browser tests' node_modules), so the
# checkout stays as it is. Needs the build dependencies of packaging/debian/control (all in
# packaging/deps.sh). A few minutes on two cores, most of it the C++ build.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$top/build/debs}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mkdir "$work/docsync"
tar -C "$top" --exclude=./build --exclude=./.git --exclude=./.dev-cluster --exclude=./tests/browser/node_modules --exclude=./tests/browser/.install.lock \
  -cf - . | tar -C "$work/docsync" -xf -
cp -r "$work/docsync/packaging/debian" "$work/docsync/debian"
(
  cd "$work/docsync"
  DEB_BUILD_OPTIONS="parallel=$(nproc) nocheck" dpkg-buildpackage -b -us -uc >"$work/build.log" 2>&1
) || { tail -n 60 "$work/build.log" >&2; echo "build-debs: dpkg-buildpackage failed" >&2; exit 1; }
mv "$work"/*.deb "$out"/
ls "$out"/*.deb
