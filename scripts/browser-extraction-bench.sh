#!/usr/bin/env bash
# The JSON extraction suite (bench/extraction-tasks.json) in headless Chromium through the npm
# package: constrained plain vs constrained speculative decoding (ngram, suffix), greedy, outputs
# checked equal, on the CPU engine (1 thread, and 2 with the threaded build) and on WebGPU
# (SwiftShader), with the mean grammar mask time per token. Prints progress on stderr and the
# JSON on stdout, and writes it to BENCH_OUT (default docs/benchmarks/extraction-page.json).
# Not part of CI. The native suite: cargo run --release -p runahead-grammar --example extraction
#
#   scripts/wasm.sh pkg                      # the package's wasm (release), if not built
#   scripts/wasm.sh pkg-threads              # its threaded wasm, for the 2-thread runs
#   scripts/browser-extraction-bench.sh      # BENCH_MODELS, BENCH_CONFIGS, BENCH_WEBGPU_MODELS,
#                                            # BENCH_TOKENS, BENCH_DRAFTERS, BENCH_TASKS
#                                            # (bench/browser/extraction.mjs)
#
# playwright-core comes from tests/e2e (scripts/setup.sh installs it); nothing is downloaded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -d tests/e2e/node_modules/playwright-core ] ||
  { echo "browser-extraction-bench.sh: run scripts/setup.sh first (tests/e2e packages)" >&2; exit 1; }
[ -f pkg/wasm/runahead_bg.wasm ] ||
  { echo "browser-extraction-bench.sh: run scripts/wasm.sh pkg first" >&2; exit 1; }
out=${BENCH_OUT:-docs/benchmarks/extraction-page.json}
mkdir -p "$(dirname "$out")"
# A drafter whose output differs from plain decoding fails the run; its JSON is written anyway.
status=0
node bench/browser/extraction.mjs > "$out.tmp" || status=$?
mv "$out.tmp" "$out"
cat "$out"
exit "$status"
