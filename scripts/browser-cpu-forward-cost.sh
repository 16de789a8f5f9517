#!/usr/bin/env bash
# The CPU engine's cost per forward of each block size in headless Chromium (WebGPU off, the
# package's release wasm): what a verification block costs next to a decoding step in the page.
# Prints JSON and a markdown table (BENCHMARKS.md, "Host cost per forward",
# records the results).
#
#   scripts/wasm.sh pkg                           # the package's wasm (both builds)
#   scripts/browser-cpu-forward-cost.sh           # BENCH_MODEL, BENCH_ROWS, BENCH_REPS,
#                                                 # BENCH_PROMPT_REPEAT, BENCH_ROUNDS, BENCH_WASM
#
# playwright-core comes from tests/e2e (scripts/setup.sh installs it); nothing is downloaded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -d tests/e2e/node_modules/playwright-core ] ||
  { echo "browser-cpu-forward-cost.sh: run scripts/setup.sh first (tests/e2e packages)" >&2; exit 1; }
[ -f pkg/wasm/runahead_bg.wasm ] ||
  { echo "browser-cpu-forward-cost.sh: run scripts/wasm.sh pkg first" >&2; exit 1; }
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
exec node bench/browser/cpu-forward-cost.mjs
