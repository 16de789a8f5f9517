#!/usr/bin/env bash
# The npm package as a web developer gets it: `npm pack` in pkg/, that tarball installed into
# the Vite app of tests/vite-app (its devDependencies, vite and typescript, come from its lock
# file through scripts/setup.sh), then `tsc --noEmit` over an example that uses every call and
# `vite build`. Offline: nothing here reaches a registry. Takes seconds.
#
#   scripts/vite-app.sh       (scripts/test.sh e2e runs it; needs pkg/wasm: scripts/wasm.sh pkg)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
app=$root/tests/vite-app
die() { echo "vite-app.sh: $*" >&2; exit 1; }

[ -f "$root/pkg/wasm/runahead_bg.wasm" ] || die "pkg/wasm is missing: scripts/wasm.sh pkg"
[ -f "$root/pkg/wasm-threads/runahead_bg.wasm" ] ||
  die "pkg/wasm-threads is missing: scripts/wasm.sh pkg-threads"
[ -x "$app/node_modules/.bin/vite" ] || die "tests/vite-app has no vite: run scripts/setup.sh"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/runahead-pack.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tarball=$(cd "$root/pkg" && npm pack --silent --pack-destination "$tmp" 2>/dev/null | tail -1)
echo "vite-app.sh: packed $tarball ($(du -h "$tmp/$tarball" | cut -f1))"
tar -tzf "$tmp/$tarball" > "$tmp/contents"
for f in index.js index.d.ts worker.js pool-worker.js wasm/runahead.js wasm/runahead_bg.wasm \
  wasm-threads/runahead.js wasm-threads/runahead_bg.wasm package.json; do
  grep -qx "package/$f" "$tmp/contents" || die "the tarball lacks $f"
done
# The package has no dependencies: installing its tarball is unpacking it where npm would
# (npm install of a tarball path would also ask the registry about the app's other packages).
rm -rf "$app/node_modules/runahead"
mkdir -p "$app/node_modules/runahead"
tar -xzf "$tmp/$tarball" -C "$app/node_modules/runahead" --strip-components=1

cd "$app"
node_modules/.bin/tsc --noEmit -p .
echo "vite-app.sh: tsc --noEmit ok"
rm -rf dist
node_modules/.bin/vite build --logLevel warn
node check-build.mjs
