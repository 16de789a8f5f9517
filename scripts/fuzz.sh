#!/usr/bin/env bash
# Coverage-guided fuzzing of what reads untrusted input (docs/fuzzing.md): builds the cargo-fuzz
# targets in fuzz/, writes their seed corpora, runs each target for a bounded time or number of
# executions, and prints executions, coverage and the result of each.
#
#   scripts/fuzz.sh                                  # every target, 60 s each
#   scripts/fuzz.sh gguf_load --seconds 600          # one target, 10 minutes
#   scripts/fuzz.sh tokenizer --runs 10000000        # a fixed number of executions
#   scripts/fuzz.sh --sanitizer address              # with ASan (needs a nightly toolchain)
#   scripts/fuzz.sh chat_template --runs 10000000 --no-trace-compares   # a long run, faster
#
# Targets: gguf_load, tokenizer, chat_template. Exit status: 0 when no target found anything, 1
# when one crashed, hung (-timeout) or ran out of memory (-rss_limit_mb / -malloc_limit_mb), 2 on
# a usage or build error. A finding is written to fuzz/artifacts/TARGET/ and reproduced with
# `fuzz/target/x86_64-unknown-linux-gnu/release/TARGET fuzz/artifacts/TARGET/crash-...`.
#
# The default build has no sanitizer: the fuzzed crates are safe Rust, panics and overflow
# checks (debug assertions are on) are what the targets detect, and without ASan it runs on
# rustup's stable toolchain at 2-8x the speed. The tokenizer target reads SmolLM2 from
# RUNAHEAD_MODELS or models/ (scripts/fetch-models.sh smollm2); the seeds use both real models
# when present.
#
# --no-trace-compares builds without the comparison tracing that steers mutations towards the
# operands of comparisons: about half of chat_template's time goes to those callbacks, so a long
# run on a grown corpus gets about twice the executions (docs/fuzzing.md).
#
# Environment: FUZZ_TARGET_DIR (build directory, default fuzz/target), FUZZ_RSS_MB (memory limit,
# default 2048), FUZZ_TIMEOUT (seconds one input may take, default 10), FUZZ_ARGS (more libFuzzer
# flags). The corpora in fuzz/corpus/TARGET grow across runs; delete them to start over.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

CARGO_FUZZ_VERSION=0.13.1
ALL_TARGETS=(gguf_load tokenizer chat_template)

usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

targets=()
seconds=60
runs=
sanitizer=none
build_flags=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=${2:?}; runs=; shift 2 ;;
    --runs) runs=${2:?}; shift 2 ;;
    --sanitizer) sanitizer=${2:?}; shift 2 ;;
    --no-trace-compares) build_flags+=(--no-trace-compares); shift ;;
    -h|--help) usage ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; usage ;;
    *)
      case " ${ALL_TARGETS[*]} " in
        *" $1 "*) targets+=("$1") ;;
        *) echo "fuzz.sh: unknown target $1 (targets: ${ALL_TARGETS[*]})" >&2; exit 2 ;;
      esac
      shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")

# ASan instruments through -Zsanitizer, which only a nightly compiler accepts.
toolchain=+stable
[ "$sanitizer" = none ] || toolchain=+nightly

if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  echo "fuzz.sh: installing cargo-fuzz $CARGO_FUZZ_VERSION" >&2
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

target_dir=${FUZZ_TARGET_DIR:-$root/fuzz/target}
start=$SECONDS
# Debug assertions on: integer overflow panics instead of wrapping, as in the test profile.
# `cargo fuzz build` takes one target or none (every target).
build_target=()
[ ${#targets[@]} -ne 1 ] || build_target=("${targets[0]}")
cargo "$toolchain" fuzz build --debug-assertions --sanitizer "$sanitizer" "${build_flags[@]}" \
  --target-dir "$target_dir" "${build_target[@]}" || exit 2
bin_dir=$target_dir/x86_64-unknown-linux-gnu/release
echo "fuzz.sh: built ${targets[*]} in $((SECONDS - start)) s"

# Seeds: written fresh each time (they are a few files), next to what earlier runs found.
cargo "$toolchain" run --quiet --manifest-path fuzz/Cargo.toml --target-dir "$target_dir" \
  -p runahead-fuzz-common --bin seeds -- "$root/fuzz/corpus" || exit 2

status=0
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
  limit=(-max_total_time="$seconds")
  [ -z "$runs" ] || limit=(-runs="$runs")
  dict=()
  [ ! -f "fuzz/dict/$t.dict" ] || dict=(-dict="fuzz/dict/$t.dict")
  # Headers are what gguf_load explores: the 1 MB generated models would make every input up
  # to 1 MB (read truncated to 64 KB; the small_llama seed covers a complete model).
  max_len=()
  [ "$t" != gguf_load ] || max_len=(-max_len=65536)
  log=fuzz/artifacts/$t/last-run.log
  echo "fuzz.sh: $t: ${limit[*]}"
  # libFuzzer's own limits make a hang or a runaway allocation a finding: -timeout per input,
  # -rss_limit_mb for the process (and -malloc_limit_mb, the same by default, per allocation
  # where a sanitizer provides the hooks).
  # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
  if "$bin_dir/$t" "fuzz/corpus/$t" "${dict[@]}" "${max_len[@]}" "${limit[@]}" \
    -rss_limit_mb="${FUZZ_RSS_MB:-2048}" -timeout="${FUZZ_TIMEOUT:-10}" \
    -artifact_prefix="fuzz/artifacts/$t/" -print_final_stats=1 ${FUZZ_ARGS:-} > "$log" 2>&1; then
    result=ok
  else
    code=$?
    # 72: libFuzzer's exit code when the run was interrupted (SIGINT/SIGTERM), no finding.
    if [ "$code" = 72 ] && grep -q 'libFuzzer: run interrupted' "$log"; then
      result="interrupted (no finding)"
    else
      result="FINDING (exit $code): see $log and fuzz/artifacts/$t/"
    fi
    status=1
  fi
  # The last status line carries coverage (cov: edges, ft: features) and the corpus size.
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  echo "fuzz.sh: $t: ${execs:-?} executions, ${rate:-?}/s; ${last:-no status line}"
  echo "fuzz.sh: $t: $result"
  if [ "$result" != ok ]; then
    grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written' "$log" | head -n 8 >&2 || true
  fi
done
exit "$status"
