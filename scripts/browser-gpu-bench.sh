#!/usr/bin/env bash
# The page on a GPU next to the native CLI on the same GPU, in one run: per model, the npm package
# as it ships (pkg/, release wasm, backend 'webgpu') in headless Chromium with WebGPU on the
# machine's Vulkan driver, and `runahead bench --backends gpu` on the same model, prompts and
# token counts. Decode tokens/s (plain, on the native bench's prompts), host time per forward
# (encode+submit and wait, 1 row and the verification block), and the speculative speedup on the
# grounded suites (per suite: plain, each drafter, plain again; geometric mean over the suites).
# The page's adapter is recorded: a SwiftShader (CPU) fallback is flagged in the table, and the
# script exits 3 after writing it unless BENCH_SWIFTSHADER=1 asked for one.
#
#   scripts/browser-gpu-bench.sh [OUT]     # OUT default bench-out/browser-gpu
#
# Writes OUT/summary.md and OUT/summary.json, and per model OUT/NAME/: native-plain.{md,json},
# native-suites/ (report.md, rows.json), prompts.json, page.json, page-chromium-FLAGS.log (Chromium's log).
#
# Environment:
#   BENCH_MODELS      space-separated TARGET[:DRAFT] paths under the repository (default
#                     models/SmolLM2-135M-Instruct.Q4_1.gguf, and the Qwen pair
#                     models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf:models/Qwen2.5-Coder-0.5B-Instruct.gguf
#                     when both files are there)
#   BENCH_SWIFTSHADER=1  WebGPU on Chromium's SwiftShader (the native side then runs on whatever
#                     Vulkan device wgpu finds, lavapipe on a machine without a GPU)
#   RUNAHEAD_BIN      default target/release/runahead;  CHROMIUM  default /usr/bin/chromium
#   PROMPTS_DIR       default data/prompts (scripts/fetch-prompts.sh), else tests/fixtures/prompts-sample
#   SUITES            default grounded (needs ShareGPT; without it edit-code,mtbench-extraction)
#   N                 prompts a suite (default 2);  PROMPTS  plain prompts, 1-4 (default 4)
#   MAX_TOKENS        tokens a generation (default 64)
#   DRAFTERS          the page's drafters (default suffix,auto; with a draft model suffix,model,auto;
#                     natively model and auto take the draft's path)
#   REPS, VERIFY      host-cost forwards a size (default 20) and verification rows (default 8)
#   CHROMIUM_FLAGS    more Chromium flags;  BENCH_TIMEOUT  seconds for one page (default 1800)
#
# Needs bash, python3 (standard library only), Chromium and the release CLI; no Node, no registry
# (bench/browser/gpu-page.py serves the page and drives Chromium). The layout it reads (scripts/,
# bench/browser/, pkg/, models/) is also what scripts/device-bundle.sh's BROWSER=1 parts unpack to.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
die() { echo "browser-gpu-bench.sh: $*" >&2; exit 1; }
out=${1:-bench-out/browser-gpu}
bin=${RUNAHEAD_BIN:-target/release/runahead}
chromium=${CHROMIUM:-/usr/bin/chromium}
n=${N:-2}
plain_prompts=${PROMPTS:-4}
max_tokens=${MAX_TOKENS:-64}
reps=${REPS:-20}
verify=${VERIFY:-8}
prompts_dir=${PROMPTS_DIR:-data/prompts}
[ -d "$prompts_dir" ] || prompts_dir=tests/fixtures/prompts-sample
[ -d "$prompts_dir" ] || die "no prompt sets at $prompts_dir (PROMPTS_DIR; scripts/fetch-prompts.sh)"
if [ -z "${SUITES:-}" ]; then
  if [ -f "$prompts_dir/ShareGPT_V3_unfiltered_cleaned_split.json" ]; then suites=grounded
  else
    suites=edit-code,mtbench-extraction
    echo "browser-gpu-bench.sh: no ShareGPT in $prompts_dir: grounded suites $suites only" >&2
  fi
else suites=$SUITES; fi
if [ -z "${BENCH_MODELS:-}" ]; then
  BENCH_MODELS=models/SmolLM2-135M-Instruct.Q4_1.gguf
  qt=models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf qd=models/Qwen2.5-Coder-0.5B-Instruct.gguf
  [ -f "$qt" ] && [ -f "$qd" ] && BENCH_MODELS="$BENCH_MODELS $qt:$qd"
fi
[ -x "$bin" ] || die "$bin is not an executable (cargo build --release -p runahead-cli, or RUNAHEAD_BIN)"
[ -x "$chromium" ] || die "no Chromium at $chromium (CHROMIUM)"
[ -f pkg/wasm/runahead_bg.wasm ] || die "pkg/wasm is not built (scripts/wasm.sh pkg)"
page_flags=()
[ -n "${BENCH_SWIFTSHADER:-}" ] && page_flags=(--swiftshader)
# wgpu/Vulkan warns without a writable XDG_RUNTIME_DIR.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -w "${XDG_RUNTIME_DIR}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/runahead-xdg.XXXXXX")
  chmod 700 "$XDG_RUNTIME_DIR"
  export XDG_RUNTIME_DIR
  trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
fi
mkdir -p "$out"
"$chromium" --version 2>/dev/null | tee "$out/chromium-version.txt" >&2 || true
failed=0
for spec in $BENCH_MODELS; do
  model=${spec%%:*}
  draft=; [ "$spec" != "$model" ] && draft=${spec#*:}
  for f in "$model" $draft; do
    [ -f "$f" ] || die "no model file at $f"
    case $f in /*) die "$f: give models as paths under $root (the page fetches them from there)";; esac
  done
  name=$(basename "$model" .gguf)
  d=$out/$name
  mkdir -p "$d"
  if [ -n "$draft" ]; then page_drafters=${DRAFTERS:-suffix,model,auto}; else page_drafters=${DRAFTERS:-suffix,auto}; fi
  native_drafters=$(echo "$page_drafters" | tr , '\n' | while read -r x; do
    case $x in model|auto) [ -n "$draft" ] && echo "$x:$draft" || echo "$x";; *) echo "$x";; esac
  done | paste -sd,)
  echo "== $name${draft:+ (draft $(basename "$draft"))}: native plain decoding and host cost" >&2
  "$bin" bench --model "$model" --backends gpu --prompts "$plain_prompts" --max-tokens "$max_tokens" \
    --host-reps "$reps" --verify-block "$verify" --json "$d/native-plain.json" > "$d/native-plain.md" ||
    { echo "browser-gpu-bench.sh: native plain run failed for $name" >&2; failed=1; }
  echo "== $name: native suites $suites ($native_drafters)" >&2
  "$bin" bench --model "$model" --suites "$suites" --n "$n" --prompts-dir "$prompts_dir" \
    --dump-prompts "$d/prompts.json" >&2
  "$bin" bench --model "$model" --backends gpu --suites "$suites" --n "$n" --max-tokens "$max_tokens" \
    --prompts-dir "$prompts_dir" --drafters "$native_drafters" --out "$d/native-suites" > "$d/native-suites.md" ||
    { echo "browser-gpu-bench.sh: native suites failed for $name" >&2; failed=1; }
  python3 - "$d" "$model" "$draft" "$page_drafters" "$native_drafters" "$plain_prompts" "$max_tokens" \
    "$reps" "$verify" <<'PY'
import json, sys
d, model, draft, page_drafters, native_drafters, prompts, tokens, reps, verify = sys.argv[1:]
# `runahead bench`'s plain-decoding prompts (crates/cli/src/bench.rs), completions without a
# chat template; the host cost runs behind the first.
plain = ["Once upon a time, in a small village by the sea,", "def quicksort(xs):\n",
         "Here is a list of the planets of the solar system:\n1.",
         "Question: Why do leaves change color in autumn?\nAnswer:"][:max(1, min(4, int(prompts)))]
suites = [{"name": s["name"], "prompts": [{"text": p["text"], "chat": p["chat"]} for p in s["prompts"]]}
          for s in json.load(open(f"{d}/prompts.json")) if s["prompts"]]
cfg = {"model": f"/{model}", "draft": f"/{draft}" if draft else None, "plainPrompts": plain,
       "tokens": int(tokens), "suites": suites, "drafters": page_drafters.split(","),
       "reps": int(reps), "verify": int(verify), "costPrompt": plain[0]}
json.dump(cfg, open(f"{d}/page-config.json", "w"), indent=2)
json.dump({"model": model, "draft": draft or None, "plain_prompts": len(plain), "tokens": int(tokens), "verify": int(verify),
           "suites": [s["name"] for s in suites], "page_drafters": page_drafters.split(","),
           "native_drafters": native_drafters.split(",")}, open(f"{d}/meta.json", "w"), indent=2)
PY
  echo "== $name: the page on WebGPU${BENCH_SWIFTSHADER:+ (SwiftShader)}" >&2
  python3 bench/browser/gpu-page.py page --root "$root" --config "$d/page-config.json" \
    --out "$d/page.json" --chromium "$chromium" "${page_flags[@]}" ||
    { echo "browser-gpu-bench.sh: the page failed for $name (see $d/page-chromium-*.log)" >&2; failed=1; }
done
python3 bench/browser/gpu-page.py summary "$out"
echo "[wrote $out/summary.md and $out/summary.json]" >&2
[ "$failed" = 0 ] || exit 1
if [ -z "${BENCH_SWIFTSHADER:-}" ] && python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["software_adapter"] else 1)' "$out/summary.json"; then
  echo "browser-gpu-bench.sh: the page ran WebGPU on a CPU fallback, not the GPU (see summary.md)" >&2
  exit 3
fi
