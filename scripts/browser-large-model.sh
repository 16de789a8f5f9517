#!/usr/bin/env bash
# A model past 4 GiB loaded on WebGPU in a page (headless Chromium, SwiftShader) next to the
# native engine on the same file: writes the 4.6 GB random-weight model once
# (crates/model/examples/large_gguf.rs) into bench-out/large-model/, then runs
# bench/browser/large-model.mjs. Needs about 10 GB of free memory and 5 GB of disk; takes
# minutes (every token reads 4.6 GB of weights on a software GPU). Recorded in BENCHMARKS.md
# ("In the browser vs wllama"); not part of CI.
#
#   scripts/wasm.sh pkg && cargo build --release -p runahead-cli
#   scripts/browser-large-model.sh           # BENCH_TOKENS, BENCH_OUT
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -d tests/e2e/node_modules/playwright-core ] ||
  { echo "browser-large-model.sh: run scripts/setup.sh first (tests/e2e packages)" >&2; exit 1; }
[ -f pkg/wasm/runahead_bg.wasm ] ||
  { echo "browser-large-model.sh: run scripts/wasm.sh pkg first" >&2; exit 1; }
out=${BENCH_OUT:-$root/bench-out/large-model}
model=$out/large.gguf
mkdir -p "$out"
[ -f "$model" ] || cargo run --release -q -p runahead-model --example large_gguf -- "$model"
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
BENCH_LARGE_MODEL=$model BENCH_OUT=$out exec node bench/browser/large-model.mjs
