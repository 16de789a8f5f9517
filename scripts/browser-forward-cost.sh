#!/usr/bin/env bash
# The GPU engine's cost per forward in headless Chromium (SwiftShader WebGPU, the package's
# release wasm) next to the native engine (`runahead bench --backends gpu`, lavapipe) in one run:
# dispatches, encode+submit and wait ms, wasm -> JS calls. Writes bench-out/forward-cost/
# forward-cost.{json,md} (BENCHMARKS.md, "Host cost per forward", records the results).
#
#   scripts/wasm.sh pkg                                # the package's wasm (release)
#   cargo build --release -p runahead-cli              # the native engine
#   scripts/browser-forward-cost.sh                    # BENCH_MODEL, BENCH_REPS, BENCH_VERIFY, BENCH_OUT
#
# playwright-core comes from tests/e2e (scripts/setup.sh installs it); nothing is downloaded.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -d tests/e2e/node_modules/playwright-core ] ||
  { echo "browser-forward-cost.sh: run scripts/setup.sh first (tests/e2e packages)" >&2; exit 1; }
[ -f pkg/wasm/runahead_bg.wasm ] ||
  { echo "browser-forward-cost.sh: run scripts/wasm.sh pkg first" >&2; exit 1; }
bin=${RUNAHEAD_BIN:-target/release/runahead}
[ -x "$bin" ] ||
  { echo "browser-forward-cost.sh: $bin missing: cargo build --release -p runahead-cli" >&2; exit 1; }
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
exec node bench/browser/forward-cost.mjs
