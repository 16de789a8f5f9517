#!/usr/bin/env bash
# The whole check: what CI runs after scripts/setup.sh, and what to run before pushing.
#
#   scripts/test.sh              # all steps, in order, stopping at the first failure
#   scripts/test.sh quick        # the edit-test loop: under 5 minutes after a build
#   scripts/test.sh fmt clippy   # only the named steps
#
# The quick tier runs models, fmt, history, unit (every crate's unit tests), kernels (the CPU
# engine's kernels against the scalar reference, the GPU kernels on lavapipe) and smoke (greedy
# generation on SmolLM2 through the CLI: the reference, the CPU engine and speculative decoding
# against llama.cpp's fixture). Everything it runs is also in the full run.
#
# Steps: models (the model files exist), fmt, history (no work-session or tracker references in
# the tree: scripts/check-history.sh), clippy (native: builds every test target of the
# workspace with clippy's lints, -D warnings), wasm-clippy (wasm32: builds the browser tests and
# the package's threaded wasm with clippy's lints, scripts/wasm.sh), browser (wasm-bindgen-test in headless Chromium on WebGPU,
# scripts/wasm.sh test), e2e (the demo page and the npm package in headless Chromium through
# playwright-core, against the native CLI, tests/e2e, the package's threaded wasm included;
# then the packed package in a Vite app, scripts/vite-app.sh), test (cargo test --workspace),
# aarch64 (the CPU engine's kernel tests built for aarch64 and run under qemu-user:
# the NEON kernels, scripts/aarch64.sh), fuzz (each
# fuzz target of fuzz/ for FUZZ_SECONDS, default 30: scripts/fuzz.sh; the long runs are
# documented in docs/fuzzing.md).
#
# One build per target, linted while it compiles: clippy-driver (the compiler plus clippy's lints)
# is cargo's RUSTC_WORKSPACE_WRAPPER for the workspace's own crates, so the clippy steps produce
# the very artifacts the browser, e2e and test steps run, and no separate `cargo clippy` pass
# checks every dependency a second time (on a fresh machine those passes cost 26 of 83 minutes).
# Every cargo call below sees the same wrapper and flags, so none of them rebuilds.
#
# Tests run in cargo's test profile (no --release): Cargo.toml already builds it at opt-level 3,
# it keeps debug assertions and overflow checks on, and it shares target/debug with a
# developer's plain `cargo test`.
#
# Build caches: target/ (native), target-wasm/ (wasm32, scripts/wasm.sh) and target-wasm-threads/
# (the threaded wasm32 build), and the relaxed SIMD builds' target-wasm-relaxed/ and
# target-wasm-threads-relaxed/; CARGO_TARGET_DIR, WASM_TARGET_DIR, WASM_THREADS_TARGET_DIR,
# WASM_RELAXED_TARGET_DIR and WASM_THREADS_RELAXED_TARGET_DIR override them. RUNAHEAD_MODELS
# overrides the model directory (default models/). With CI set, a build directory is deleted once
# no later step of the run reads it.
# Each step prints its time; a fresh machine's figures are in BENCHMARKS.md ("Test suite time").
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
export WASM_TARGET_DIR=${WASM_TARGET_DIR:-$root/target-wasm}
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
# Lints during the builds (see above): native with rustup's clippy-driver, wasm32 with Debian's
# (scripts/wasm.sh reads WASM_LINT).
clippy_driver=$(command -v clippy-driver) || {
  echo "test.sh: clippy-driver not found: rustup component add clippy" >&2
  exit 1
}
export RUSTC_WORKSPACE_WRAPPER=$clippy_driver
export CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
export WASM_LINT=1
# A CI run builds from scratch once: incremental compilation would only add work to it.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi
# wgpu/Vulkan (lavapipe) warns without a writable XDG_RUNTIME_DIR.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -w "${XDG_RUNTIME_DIR}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/runahead-xdg.XXXXXX")
  chmod 700 "$XDG_RUNTIME_DIR"
  export XDG_RUNTIME_DIR
  trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
fi

# The models the test suite loads, with the scripts/fetch-models.sh set that fetches each.
MODELS=("SmolLM2-135M-Instruct.Q4_1.gguf smollm2" "Qwen2.5-Coder-0.5B-Instruct.gguf qwen-draft"
  "gemma-3-270m-q4_k_m.gguf gemma3")

step_models() {
  local dir=${RUNAHEAD_MODELS:-$root/models} m file set missing=0
  for m in "${MODELS[@]}"; do
    read -r file set <<< "$m"
    if [ ! -s "$dir/$file" ]; then
      echo "test.sh: missing model $dir/$file: run scripts/fetch-models.sh $set" >&2
      missing=1
    fi
  done
  local vocab=${RUNAHEAD_VOCAB_DIR:-$root/data/vocab}
  if [ ! -s "$vocab/SHA256SUMS" ] && [ "${RUNAHEAD_SKIP_VOCAB_SUITE:-0}" != 1 ]; then
    echo "test.sh: missing llama.cpp's tokenizer suite in $vocab: run scripts/fetch-vocab-tests.sh" >&2
    missing=1
  fi
  if [ "$missing" = 1 ]; then
    echo "test.sh: (scripts/setup.sh fetches all of them)" >&2
    return 1
  fi
}
step_fmt() { cargo fmt --all -- --check; }
step_history() { "$root/scripts/check-history.sh"; }
# The quick tier's own steps (the full run covers them in `test`).
step_unit() { cargo test --workspace --lib --bins; }
# Selected with --workspace, as the full run builds them: `-p CRATE` resolves features per
# crate and would build the crates again.
step_kernels() { cargo test --workspace --test kernels --test products; }
step_smoke() {
  cargo test --workspace --test cli -- --exact generate_json_follows_the_contract_and_llama_cpp \
    speculative_generate_reports_provenance_and_matches_plain
}
step_clippy() { cargo test --workspace --no-run; }
# The wasm32 builds, linted as they compile: the browser tests' (which is also the package's
# single-threaded wasm), with and without relaxed SIMD (its kernels compile only there), and the
# package's threaded ones (its atomics-only code compiles there; pkg-threads builds both).
step_wasm_clippy() {
  "$root/scripts/wasm.sh" test --no-run
  WASM_RELAXED=1 "$root/scripts/wasm.sh" test --no-run
  "$root/scripts/wasm.sh" pkg-threads
}
# The browser tests on both single-threaded builds: every kernel against the scalar one, with
# plain SIMD and with relaxed SIMD (there the CPU crate's and the page API's tests, the code it
# changes).
step_browser() {
  "$root/scripts/wasm.sh" test
  WASM_RELAXED=1 "$root/scripts/wasm.sh" test
}
step_e2e() {
  # The reference: the native CLI of the clippy step's build (the cli crate's tests put it in
  # target/debug). Then the npm package's wasm: the release-profile .wasm the browser step built
  # (scripts/wasm.sh pkg rebuilds nothing after it), so these tests run what `npm pack` ships;
  # playwright-core, vite and typescript come from the lock files scripts/setup.sh installs.
  local dir
  for dir in e2e/node_modules/playwright-core vite-app/node_modules/vite openai-types/node_modules/openai; do
    if [ ! -d "$root/tests/$dir" ]; then
      echo "test.sh: tests/$dir is missing: run scripts/setup.sh" >&2
      return 1
    fi
  done
  cargo test --workspace --no-run
  "$root/scripts/wasm.sh" pkg
  # The package's threaded wasm (its own build of runahead-web with atomics: README, "Threads
  # in the browser"), which threads.test.mjs and the Vite app load; built by the wasm-clippy
  # step, so only wasm-bindgen runs here when that step ran.
  "$root/scripts/wasm.sh" pkg-threads
  # npm pack, the tarball in a Vite app, tsc --noEmit, vite build (seconds); vite-app.test.mjs
  # then runs that build.
  "$root/scripts/vite-app.sh"
  # The OpenAI SDK's types (pinned in tests/openai-types) against the package's (seconds).
  (cd "$root/tests/openai-types" && node_modules/.bin/tsc --noEmit -p .)
  RUNAHEAD_BIN="$CARGO_TARGET_DIR/debug/runahead" node --test --test-concurrency=1 \
    "$root/tests/e2e/sha256.test.mjs" "$root/tests/e2e/demo.test.mjs" \
    "$root/tests/e2e/demo-structured.test.mjs" "$root/tests/e2e/memory.test.mjs" \
    "$root/tests/e2e/package.test.mjs" \
    "$root/tests/e2e/vite-app.test.mjs" "$root/tests/e2e/chat.test.mjs" \
    "$root/tests/e2e/cpu-fallback.test.mjs" "$root/tests/e2e/draft-model.test.mjs" \
    "$root/tests/e2e/forward-cost.test.mjs" "$root/tests/e2e/threads.test.mjs" \
    "$root/tests/e2e/openai.test.mjs" "$root/tests/e2e/structured.test.mjs" \
    "$root/tests/e2e/probe.test.mjs" "$root/tests/e2e/webgpu-stream.test.mjs" \
    "$root/tests/e2e/gemma.test.mjs"
}
step_test() { cargo test --workspace; }
step_aarch64() { "$root/scripts/aarch64.sh" test; }
step_fuzz() {
  # Its own build (libFuzzer's instrumentation flags) in fuzz/target, without the lint wrapper.
  env -u CARGO_TARGET_DIR -u RUSTC_WORKSPACE_WRAPPER -u CLIPPY_ARGS \
    "$root/scripts/fuzz.sh" --seconds "${FUZZ_SECONDS:-30}"
}

ALL_STEPS=(models fmt history clippy wasm-clippy browser e2e test aarch64 fuzz)
QUICK_STEPS=(models fmt history unit kernels smoke)
steps=()
for s in "$@"; do
  if [ "$s" = quick ]; then steps+=("${QUICK_STEPS[@]}"); else steps+=("$s"); fi
done
[ ${#steps[@]} -gt 0 ] || steps=("${ALL_STEPS[@]}")

for s in "${steps[@]}"; do
  case "$s" in
    models | fmt | history | clippy | wasm-clippy | browser | e2e | test | aarch64 | fuzz) ;;
    unit | kernels | smoke) ;;
    *) echo "test.sh: unknown step '$s' (steps: ${ALL_STEPS[*]}; quick: ${QUICK_STEPS[*]})" >&2; exit 2 ;;
  esac
done

# A CI run starts from a clean checkout and its disk is small (the builds together take about
# 11 GB): once no step left in the run reads a build directory, CI deletes it.
declare -A STEP_DIRS=(
  [clippy]=native [unit]=native [kernels]=native [smoke]=native [test]=native
  [wasm-clippy]=wasm [browser]=wasm [e2e]="native wasm" [aarch64]=aarch64
)
prune_unused_builds() {
  local done_index=$1 group later needed
  for group in native wasm aarch64; do
    # Only a group the finished step read, and that no later step reads.
    case " ${STEP_DIRS[${steps[$done_index]}]:-} " in *" $group "*) ;; *) continue ;; esac
    needed=0
    for later in "${steps[@]:done_index+1}"; do
      case " ${STEP_DIRS[$later]:-} " in *" $group "*) needed=1 ;; esac
    done
    [ "$needed" = 0 ] || continue
    case $group in
      native) rm -rf "$CARGO_TARGET_DIR" ;;
      wasm) rm -rf "$WASM_TARGET_DIR" "${WASM_RELAXED_TARGET_DIR:-$root/target-wasm-relaxed}" \
        "${WASM_THREADS_TARGET_DIR:-$root/target-wasm-threads}" \
        "${WASM_THREADS_RELAXED_TARGET_DIR:-$root/target-wasm-threads-relaxed}" ;;
      aarch64) rm -rf "${AARCH64_TARGET_DIR:-$root/target-aarch64}" ;;
    esac
    echo "== test.sh: CI: removed the $group build (no later step uses it)"
  done
}

total_start=$SECONDS
for i in "${!steps[@]}"; do
  s=${steps[$i]}
  echo "== test.sh: $s"
  start=$SECONDS
  # Each step in a subshell of its own, outside any condition: bash ignores `set -e` inside a
  # function called from `if` or `!`, where a step would fail only on its last command.
  set +e
  (set -e; "step_${s//-/_}")
  rc=$?
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "== test.sh: FAILED at step '$s' after $((SECONDS - start))s" >&2
    exit 1
  fi
  echo "== test.sh: $s ok ($((SECONDS - start))s)"
  if [ -n "${CI:-}" ]; then prune_unused_builds "$i"; fi
done
echo "== test.sh: all ok (${steps[*]}) in $((SECONDS - total_start))s"
