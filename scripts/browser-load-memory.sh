#!/usr/bin/env bash
# What loading a model costs a page's memory in headless Chromium (WebGPU on SwiftShader, and the
# CPU engine): renderer and GPU process resident memory, the engine's WebAssembly memory, the
# page's JS heap peak. Writes bench-out/load-memory/load-memory.{json,md} (BENCHMARKS.md, "In the
# browser vs wllama", records the results).
#
#   scripts/wasm.sh pkg                      # the package's wasm (release)
#   scripts/browser-load-memory.sh           # BENCH_MODELS, BENCH_BACKENDS, BENCH_CONTEXT, BENCH_OUT
#
# playwright-core comes from tests/e2e (scripts/setup.sh installs it); nothing is downloaded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -d tests/e2e/node_modules/playwright-core ] ||
  { echo "browser-load-memory.sh: run scripts/setup.sh first (tests/e2e packages)" >&2; exit 1; }
[ -f pkg/wasm/runahead_bg.wasm ] ||
  { echo "browser-load-memory.sh: run scripts/wasm.sh pkg first" >&2; exit 1; }
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
exec node bench/browser/load-memory.mjs
