#!/usr/bin/env bash
# Takes screenshots of the demo page (www/) in headless Chromium: desktop and phone widths,
# light and dark, empty / model loaded / after a chat / after a compare. Loads SmolLM2 on the
# page's default backend (the CPU engine where WebGPU is a software adapter) and generates a
# few dozen tokens, so it takes a minute or two.
#
#   scripts/demo-screenshots.sh [OUT]    # default tests/e2e/out/screenshots (ignored by git)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

wasm=pkg/wasm/runahead_bg.wasm
if [ ! -f "$wasm" ] || [ -n "$(find crates shaders Cargo.toml Cargo.lock -newer "$wasm" -print -quit)" ]; then
  scripts/wasm.sh pkg
fi
if [ ! -d tests/e2e/node_modules/playwright-core ]; then
  (cd tests/e2e && npm ci --no-audit --no-fund)
fi
[ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ] || scripts/fetch-models.sh smollm2

SHOTS_OUT=${1:-$root/tests/e2e/out/screenshots} exec node tests/e2e/demo-screenshots.mjs
