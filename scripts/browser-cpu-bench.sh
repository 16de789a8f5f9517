#!/usr/bin/env bash
# Decode tokens/s of runahead's CPU engine in headless Chromium (WebGPU off; one thread, or
# BENCH_THREADS=N for 1 and N threads on a cross-origin isolated page)
# against wllama on the same GGUF, runs alternating in one session; prints JSON with the
# medians and their ratio (BENCHMARKS.md, "In the browser vs wllama", records the results).
#
#   scripts/fetch-browser-bench.sh        # once: wllama + playwright-core (bench/browser)
#   scripts/wasm.sh pkg                   # the package's wasm (release)
#   scripts/wasm.sh pkg-threads           # its threaded wasm (for BENCH_THREADS > 1)
#   scripts/browser-cpu-bench.sh          # BENCH_MODEL, BENCH_TOKENS, BENCH_RUNS, BENCH_THREADS,
#                                         # BENCH_PROMPT_REPEAT (a long prompt)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -d bench/browser/node_modules/@wllama/wllama ] ||
  { echo "browser-cpu-bench.sh: run scripts/fetch-browser-bench.sh first" >&2; exit 1; }
[ -f pkg/wasm/runahead_bg.wasm ] ||
  { echo "browser-cpu-bench.sh: run scripts/wasm.sh pkg first" >&2; exit 1; }
if [ "${BENCH_THREADS:-1}" -gt 1 ] && [ ! -f pkg/wasm-threads/runahead_bg.wasm ]; then
  echo "browser-cpu-bench.sh: run scripts/wasm.sh pkg-threads first (BENCH_THREADS > 1)" >&2
  exit 1
fi
exec node bench/browser/cpu-bench.mjs
