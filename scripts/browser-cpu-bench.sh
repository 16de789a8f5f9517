#!/usr/bin/env bash
# Decode tokens/s of runahead's CPU engine in headless Chromium (WebGPU off, one thread)
# against wllama on the same GGUF, runs alternating in one session; prints JSON with the
# medians and their ratio (BENCHMARKS.md records the results).
#
#   scripts/fetch-browser-bench.sh        # once: wllama + playwright-core (bench/browser)
#   scripts/wasm.sh pkg                   # the package's wasm (release)
#   scripts/browser-cpu-bench.sh          # BENCH_MODEL, BENCH_TOKENS, BENCH_RUNS to change
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -d bench/browser/node_modules/@wllama/wllama ] ||
  { echo "browser-cpu-bench.sh: run scripts/fetch-browser-bench.sh first" >&2; exit 1; }
[ -f pkg/wasm/runahead_bg.wasm ] ||
  { echo "browser-cpu-bench.sh: run scripts/wasm.sh pkg first" >&2; exit 1; }
exec node bench/browser/cpu-bench.mjs
