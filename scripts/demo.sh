#!/usr/bin/env bash
# Serves the demo page (www/) and the npm package (pkg/) from the repository root, building the
# package's wasm first when it is missing or older than the Rust sources.
#
#   scripts/demo.sh [PORT]     # default 8000; DEMO_BIND=0.0.0.0 to serve beyond this machine
#
# WebGPU needs a secure context: http://localhost is one, a plain-http LAN address is not.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

port=${1:-8000}
bind=${DEMO_BIND:-127.0.0.1}
wasm=pkg/wasm/runahead_bg.wasm

if [ ! -f "$wasm" ] || [ -n "$(find crates shaders Cargo.toml Cargo.lock -newer "$wasm" -print -quit)" ]; then
  "$root/scripts/wasm.sh" pkg
fi

echo "demo: open http://localhost:$port/www/"
echo "demo: the URL field's default loads models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-models.sh)"
exec python3 -m http.server "$port" --bind "$bind" --directory "$root"
