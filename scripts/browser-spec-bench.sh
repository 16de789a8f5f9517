#!/usr/bin/env bash
# Speculative vs plain decoding in headless Chromium through the npm package (release wasm,
# worker engine), per prompt and drafter; prints JSON (BENCHMARKS.md,
# "Speculative decoding by suite", records the results).
#
#   scripts/wasm.sh pkg                   # the package's wasm (release), if not built
#   scripts/browser-spec-bench.sh         # BENCH_MODEL, BENCH_TOKENS, BENCH_BACKEND, BENCH_DRAFTERS
#   SUITES=grounded N=2 scripts/browser-spec-bench.sh
#       # the native bench's suites (`runahead bench --suites`, same names; PROMPTS_DIR, default
#       # data/prompts from scripts/fetch-prompts.sh, or tests/fixtures/prompts-sample), through
#       # target/release/runahead --dump-prompts
#
# playwright-core comes from tests/e2e (scripts/setup.sh installs it); nothing is downloaded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -d tests/e2e/node_modules/playwright-core ] ||
  { echo "browser-spec-bench.sh: run scripts/setup.sh first (tests/e2e packages)" >&2; exit 1; }
[ -f pkg/wasm/runahead_bg.wasm ] ||
  { echo "browser-spec-bench.sh: run scripts/wasm.sh pkg first" >&2; exit 1; }
if [ -n "${SUITES:-}" ]; then
  [ -x target/release/runahead ] ||
    { echo "browser-spec-bench.sh: SUITES needs target/release/runahead (cargo build --release -p runahead-cli)" >&2; exit 1; }
  mkdir -p bench-out
  target/release/runahead bench --model "${BENCH_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}" \
    --suites "$SUITES" --n "${N:-2}" --prompts-dir "${PROMPTS_DIR:-data/prompts}" \
    --dump-prompts bench-out/browser-suites.json
  export BENCH_PROMPTS=bench-out/browser-suites.json
fi
exec node bench/browser/spec-bench.mjs
