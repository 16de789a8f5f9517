#!/usr/bin/env bash
# The GPU benchmark in one command, for a machine with a real GPU and no registry access: it
# runs a prebuilt release binary on a model file (both carried to the machine, see
# BENCHMARKS.md, "GPU engine") and writes JSON and a markdown table of plain
# and speculative tokens/s per suite and kernel shape, the host cost per forward, and the
# per-kernel profile of a decoding forward.
#
#   scripts/gpu-bench.sh BIN MODEL [OUT]
#
#   BIN     the `runahead` release binary (cargo build --release -p runahead-cli)
#   MODEL   a GGUF file (e.g. SmolLM2-135M-Instruct.Q4_1.gguf)
#   OUT     output directory (default gpu-bench-out): summary.md, summary.json, and per shape
#           plain-SHAPE.{md,json} and suites-SHAPE/{report.md,rows.json}
#
# Environment: SHAPES (default "gpu emulated": --gpu-kernels of each run), PROMPTS_DIR (the
# prompt suites, scripts/fetch-prompts.sh; default data/prompts; without it the suites are
# skipped), SUITES (default all), N (prompts per suite, default 2), MAX_TOKENS (tokens per
# prompt, plain and suites, default 64). Needs bash and python3 (standard library only) for the
# summary.
set -euo pipefail

if [ $# -lt 2 ]; then
  sed -n '2,21p' "$0" >&2
  exit 2
fi
bin=$1
model=$2
out=${3:-gpu-bench-out}
shapes=${SHAPES:-gpu emulated}
prompts_dir=${PROMPTS_DIR:-data/prompts}
suites=${SUITES:-all}
n=${N:-2}
max_tokens=${MAX_TOKENS:-64}

[ -x "$bin" ] || { echo "gpu-bench.sh: $bin is not an executable" >&2; exit 1; }
[ -f "$model" ] || { echo "gpu-bench.sh: no model file at $model" >&2; exit 1; }
mkdir -p "$out"
# wgpu/Vulkan warns without a writable XDG_RUNTIME_DIR.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -w "${XDG_RUNTIME_DIR}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/runahead-xdg.XXXXXX")
  chmod 700 "$XDG_RUNTIME_DIR"
  export XDG_RUNTIME_DIR
  trap 'rm -rf "$XDG_RUNTIME_DIR"' EXIT
fi

for shape in $shapes; do
  echo "== $shape kernels: plain decoding, host cost, profile" >&2
  "$bin" bench --model "$model" --backends gpu --gpu-kernels "$shape" --prompts 4 \
    --max-tokens "$max_tokens" --block-sizes 1,2,4,8,16 --host-reps 20 --profile \
    --json "$out/plain-$shape.json" | tee "$out/plain-$shape.md"
  if [ -d "$prompts_dir" ]; then
    echo "== $shape kernels: speculative vs plain on the suites ($suites)" >&2
    "$bin" bench --model "$model" --backends gpu --gpu-kernels "$shape" --suites "$suites" \
      --n "$n" --max-tokens "$max_tokens" --prompts-dir "$prompts_dir" --out "$out/suites-$shape" \
      | tee "$out/suites-$shape.md"
  else
    echo "gpu-bench.sh: no prompt suites at $prompts_dir (PROMPTS_DIR): suites skipped" >&2
  fi
done

python3 - "$out" "$model" $shapes <<'PY'
import json, os, sys

out, model, shapes = sys.argv[1], os.path.basename(sys.argv[2]), sys.argv[3:]
summary = {"model": model, "shapes": {}}
md = [f"# GPU benchmark: `{model}`", ""]
for shape in shapes:
    plain = json.load(open(os.path.join(out, f"plain-{shape}.json")))
    row = plain["rows"][0]
    rows_path = os.path.join(out, f"suites-{shape}", "rows.json")
    suites = json.load(open(rows_path)) if os.path.exists(rows_path) else []
    summary["shapes"][shape] = {"plain": row, "suites": suites}
    md += [f"## `{shape}` kernels on {row['device']}", ""]
    md += [f"Plain decoding: {row['tokens_per_second']:.2f} tok/s, "
           f"{row['dispatches_per_forward']} dispatches per forward.", ""]
    md += ["| rows | dispatches | encode+submit ms | wait ms |", "| ---: | ---: | ---: | ---: |"]
    for h in row.get("host_cost", []):
        md.append(f"| {h['rows']} | {h['dispatches']} | {h['encode_submit_ms']:.3f} | {h['wait_ms']:.2f} |")
    md.append("")
    if row.get("block_ms"):
        md += ["| block rows | " + " | ".join(map(str, row["block_sizes"])) + " |",
               "| --- |" + " ---: |" * len(row["block_sizes"]),
               "| ms per forward | " + " | ".join(f"{x:.2f}" for x in row["block_ms"]) + " |", ""]
    if suites:
        md += ["| suite | drafter | plain tok/s | speculative tok/s | speedup | acceptance |",
               "| --- | --- | ---: | ---: | ---: | ---: |"]
        for s in suites:
            md.append(f"| {s['suite']} | {s['drafter']} | {s['plain_tps']:.2f} | {s['spec_tps']:.2f} "
                      f"| {s['speedup']:.2f}x | {s['acceptance_rate']:.2f} |")
        md.append("")
    prof = row.get("profile", [])
    if prof:
        # Device timestamps where the GPU has them, else the host clock around each submit.
        timed = all(k.get("device_ms") is not None for k in prof)
        ms = lambda k: k["device_ms"] if timed else k["ms"]
        total = sum(ms(k) for k in prof) or 1e-12
        clock = "device timestamps" if timed else "host clock: no timestamp queries"
        md += [f"Decoding forward by kernel (each dispatch timed alone; {clock}):", "",
               "| kernel | dispatches | ms total | host ms total | share |",
               "| --- | ---: | ---: | ---: | ---: |"]
        for k in prof:
            md.append(f"| {k['kernel']} | {k['dispatches']} | {ms(k):.3f} | {k['ms']:.3f} "
                      f"| {100 * ms(k) / total:.1f}% |")
        md.append("")
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
open(os.path.join(out, "summary.md"), "w").write("\n".join(md))
print("\n".join(md))
PY
echo "[wrote $out/summary.md and $out/summary.json]" >&2
