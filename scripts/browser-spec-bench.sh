#!/usr/bin/env bash
# Speculative vs plain decoding in headless Chromium through the npm package (release wasm,
# worker engine), per prompt and drafter; prints JSON (BENCHMARKS.md records the results).
#
#   scripts/wasm.sh pkg                   # the package's wasm (release), if not built
#   scripts/browser-spec-bench.sh         # BENCH_MODEL, BENCH_TOKENS, BENCH_BACKEND, BENCH_DRAFTERS
#
# playwright-core comes from tests/e2e (scripts/setup.sh installs it); nothing is downloaded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -d tests/e2e/node_modules/playwright-core ] ||
  { echo "browser-spec-bench.sh: run scripts/setup.sh first (tests/e2e packages)" >&2; exit 1; }
[ -f pkg/wasm/runahead_bg.wasm ] ||
  { echo "browser-spec-bench.sh: run scripts/wasm.sh pkg first" >&2; exit 1; }
exec node bench/browser/spec-bench.mjs
