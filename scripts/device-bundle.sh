#!/usr/bin/env bash
# What a GPU machine with no Rust toolchain and no registry needs to run the GPU benchmark, the
# GPU crate's tests and the CPU engine next to llama.cpp, in parts of at most PART_MB each (for
# copies of limited size): the release CLI, `forward_cost`, llama-bench (when built) and the GPU
# test binaries, stripped and gzipped; the model split in pieces; the prompt sets (ShareGPT cut
# to its first 6 MB: the suites take the first eligible records in file order, so the cut gives
# the same prompts); the Vulkan loader and glvnd packages (what the NVIDIA driver's Vulkan needed
# on the H200 machines it has run on); and `run.sh`, which puts it together there. With
# BROWSER=1 also the page next to the CLI (scripts/browser-gpu-bench.sh): the npm package (pkg/,
# its wasm), the page bench's files, the models it runs, and Debian's Chromium with the packages
# that hold the libraries it links (apt-get download here, `dpkg -x` into a folder of its own
# there, run with LD_LIBRARY_PATH: nothing of it enters /; the machine's glibc and libstdc++ must
# be at least Debian 12's). Chromium's debs are about 130 MB, so BROWSER=1 adds three parts.
#
#   scripts/device-bundle.sh OUT [MODEL]     # MODEL: default models/SmolLM2-135M-Instruct.Q4_1.gguf
#
# Then, on the GPU machine, as root, with every part copied over (one copy each, any order):
#   bash partK/gather.sh DIR        # for each part: its files into DIR (default /tmp/runahead-dev)
#   bash DIR/run.sh RESULTS         # tests, scripts/gpu-bench.sh, CPU vs llama.cpp; then a tarball
#
# `run.sh` needs the repository's scripts/gpu-bench.sh beside it (the last part carries a copy),
# bash, python3, dpkg and gzip. Environment here: PART_MB (default 60), DEBS (default the seven
# packages below; empty: none), NO_TESTS=1 (no test binaries), BROWSER=1 (the page too),
# BROWSER_MODELS (with BROWSER=1: the page bench's BENCH_MODELS, TARGET[:DRAFT] paths under the
# repository, each file packed; default MODEL, and the Qwen pair when both files are in models/),
# ONLY=... (run.sh there: any of "tests gpu cpu browser", default all four; without BROWSER=1
# the browser step has nothing to run). A file larger than a part travels in pieces, joined there.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
die() { echo "device-bundle: $*" >&2; exit 1; }
[ $# -ge 1 ] || { sed -n '2,20p' "$0" >&2; exit 2; }
out=$1
model=${2:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
part_mb=${PART_MB:-60}
debs=${DEBS-libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2}
[ -f "$model" ] || die "no model at $model (scripts/fetch-models.sh)"
mkdir -p "$out"
[ -z "$(ls -A "$out")" ] || die "$out is not empty"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

echo "device-bundle: building the release CLI, forward_cost and the GPU tests" >&2
cargo build --release -p runahead-cli
cargo build --release -p runahead-cpu --example forward_cost
pack() { strip -o "$stage/$2" "$1" && gzip -9 "$stage/$2"; }
pack target/release/runahead runahead
pack target/release/examples/forward_cost forward_cost
llama=.peers/llama.cpp/build/bin/llama-bench
if [ -x "$llama" ]; then pack "$llama" llama-bench; else echo "device-bundle: no $llama (scripts/bench-llama-cpp.sh builds it): CPU runs without llama.cpp" >&2; fi
if [ -z "${NO_TESTS:-}" ]; then
  mkdir -p "$stage/tests"
  cargo test --release -p runahead-gpu --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])
' | while read -r name exe; do pack "$exe" "tests/$name"; done
fi

# The model in pieces, with its sha256 to check the joined file against.
split -b "$(( (part_mb - 8) * 1000 * 1000 ))" -d "$model" "$stage/model.part"
(cd "$(dirname "$model")" && sha256sum "$(basename "$model")") > "$stage/model.sha256"
models_dir=$root/models # where the smollm2 test binary looks (its crate's path, compiled in)
if [ -d data/prompts ]; then
  mkdir -p "$stage/prompts"
  cp data/prompts/HumanEval.jsonl.gz data/prompts/mt_bench_question.jsonl "$stage/prompts/"
  head -c 6000000 data/prompts/ShareGPT_V3_unfiltered_cleaned_split.json > "$stage/prompts/ShareGPT_V3_unfiltered_cleaned_split.json"
  gzip -9 "$stage/prompts/ShareGPT_V3_unfiltered_cleaned_split.json"
fi
if [ -n "$debs" ]; then
  mkdir -p "$stage/debs"
  lists=$(mktemp -d)
  o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$lists"
  mkdir -p "$lists/partial"
  # shellcheck disable=SC2086
  apt-get $o update >/dev/null 2>&1 && (cd "$stage/debs" && apt-get $o download $debs >/dev/null 2>&1) ||
    die "apt-get download of $debs failed"
  rm -rf "$lists"
fi
cp scripts/gpu-bench.sh "$stage/gpu-bench.sh"
browser_models=
if [ -n "${BROWSER:-}" ]; then
  echo "device-bundle: the page: pkg/, the page bench, its models, Chromium's debs" >&2
  chromium_bin=/usr/lib/chromium/chromium
  [ -x "$chromium_bin" ] || die "no Debian chromium here ($chromium_bin): apt-get install chromium"
  [ -f pkg/wasm/runahead_bg.wasm ] || die "pkg/wasm is not built (scripts/wasm.sh pkg)"
  b=$stage/browser
  mkdir -p "$b/scripts" "$b/bench/browser" "$b/pkg" "$b/models" "$b/debs"
  cp scripts/browser-gpu-bench.sh "$b/scripts/"
  cp bench/browser/gpu-page.html bench/browser/gpu-page.mjs bench/browser/gpu-page.py "$b/bench/browser/"
  cp pkg/*.js pkg/package.json "$b/pkg/"
  for w in wasm wasm-threads; do [ -d "pkg/$w" ] && cp -r "pkg/$w" "$b/pkg/"; done
  spec=${BROWSER_MODELS:-}
  if [ -z "$spec" ]; then
    spec=$model
    qt=models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf qd=models/Qwen2.5-Coder-0.5B-Instruct.gguf
    [ -f "$qt" ] && [ -f "$qd" ] && spec="$spec $qt:$qd"
  fi
  # Every model file under browser/models/ by its name (the bundle's MODEL is linked there).
  for s in $spec; do
    pair=
    for f in ${s//:/ }; do
      [ -f "$f" ] || die "BROWSER_MODELS: no model file at $f"
      name=$(basename "$f")
      if [ "$(realpath "$f")" != "$(realpath "$model")" ] && [ ! -f "$b/models/$name" ]; then
        cp "$f" "$b/models/$name"
        (cd "$b/models" && sha256sum "$name") >> "$b/models.sha256"
      fi
      pair=${pair:+$pair:}models/$name
    done
    browser_models="${browser_models:+$browser_models }$pair"
  done
  # Chromium, and the packages holding the libraries it links, but glibc's and GCC's (the
  # machine's own, newer ones, serve).
  pkgs=$(ldd "$chromium_bin" | awk '$3 ~ /^\// {print $3}' | xargs -n1 readlink -f | sort -u |
    while read -r l; do dpkg -S "$l" 2>/dev/null || dpkg -S "${l/\/usr\/lib/\/lib}" 2>/dev/null || true; done |
    cut -d: -f1 | sort -u | grep -vx -e libc6 -e libgcc-s1 -e libstdc++6 | tr '\n' ' ')
  lists=$(mktemp -d)
  o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$lists"
  mkdir -p "$lists/partial"
  # shellcheck disable=SC2086
  apt-get $o update >/dev/null 2>&1 && (cd "$b/debs" && apt-get $o download chromium chromium-common $pkgs >/dev/null 2>&1) ||
    die "apt-get download of chromium and its libraries failed"
  rm -rf "$lists"
  echo "device-bundle: Chromium: $(ls "$b/debs" | wc -l) debs, $(du -sh "$b/debs" | cut -f1)" >&2
fi
cat > "$stage/run.sh" <<EOF
#!/usr/bin/env bash
# Runs on the GPU machine from the folder gather.sh filled (written by scripts/device-bundle.sh).
set -uo pipefail
here=\$(cd "\$(dirname "\$0")" && pwd)
res=\${1:-\$here/results}
only=\${ONLY:-tests gpu cpu browser}
mkdir -p "\$res"
cd "\$here"
for f in debs/*.deb; do [ -f "\$f" ] && dpkg -x "\$f" /; done
command -v ldconfig >/dev/null && ldconfig
find . -name '*.piece000' | while read -r f; do b=\${f%.piece000}; cat "\$b".piece??? > "\$b" && rm -f "\$b".piece???; done
find . -name '*.gz' ! -path './prompts/HumanEval.jsonl.gz' -exec gunzip -f {} +
cat model.part* > model.gguf && sha256sum model.gguf | cut -d' ' -f1 | grep -qx "\$(cut -d' ' -f1 model.sha256)" ||
  { echo "run.sh: the joined model's sha256 differs from model.sha256" >&2; exit 1; }
chmod +x runahead forward_cost llama-bench tests/* 2>/dev/null
# The smollm2 test's model, where its build looked for it (left alone where a file is there).
link="$models_dir/\$(cut -d' ' -f3 model.sha256)"
[ -e "\$link" ] || { mkdir -p "$models_dir" && ln -s "\$here/model.gguf" "\$link"; }
export XDG_RUNTIME_DIR=\${XDG_RUNTIME_DIR:-/tmp/runahead-xdg}; mkdir -p -m 700 "\$XDG_RUNTIME_DIR"
nvidia-smi -L 2>/dev/null; nproc
if [[ " \$only " == *" tests "* ]] && [ -d tests ]; then
  for t in tests/*; do
    echo "== test \$(basename "\$t")"
    (cd /tmp && timeout 300 "\$here/\$t" 2>&1) > "\$res/test-\$(basename "\$t").log"
    grep -E "test result|FAILED|panicked" "\$res/test-\$(basename "\$t").log" | head -5
  done
fi
if [[ " \$only " == *" gpu "* ]]; then
  echo "== scripts/gpu-bench.sh (SHAPES=\${SHAPES:-gpu})"
  SHAPES=\${SHAPES:-gpu} PROMPTS_DIR=\$here/prompts bash gpu-bench.sh ./runahead model.gguf "\$res/gpu" > "\$res/gpu-bench.log" 2>&1
  echo "rc=\$?"; grep -A4 "| backend | drafter" "\$res/gpu/suites-gpu/report.md" 2>/dev/null
  grep -E "^\| gpu" "\$res/gpu/plain-gpu.md" 2>/dev/null | head -2
fi
if [[ " \$only " == *" cpu "* ]]; then
  threads=\$(nproc); counts=1; t=2; while [ \$t -le "\$threads" ]; do counts="\$counts \$t"; t=\$((t * 2)); done
  for t in \$counts; do
    echo "-- \$t threads"; FORWARD_COST_PROMPT=64 FORWARD_COST_REPS=10 timeout 120 ./forward_cost model.gguf \$t
  done 2>&1 | tee "\$res/forward-cost.log"
  if [ -x llama-bench ]; then
    timeout 300 ./llama-bench -m model.gguf -p 64 -n 32 -t "\$(echo \$counts | tr ' ' ,)" -r 2 2>&1 | tee "\$res/llama-bench.log"
  fi
fi
if [[ " \$only " == *" browser "* ]] && [ -d browser ]; then
  echo "== the page on WebGPU next to the CLI (scripts/browser-gpu-bench.sh)"
  mkdir -p browser/models
  (cd browser/models && { [ ! -f ../models.sha256 ] || sha256sum -c --quiet ../models.sha256; }) ||
    { echo "run.sh: a page model's sha256 differs from browser/models.sha256" >&2; exit 1; }
  ln -sf "\$here/model.gguf" "browser/models/\$(cut -d' ' -f3 model.sha256)"
  # Chromium in a folder of its own, its libraries found through LD_LIBRARY_PATH.
  croot=\$here/chromium-root
  mkdir -p "\$croot" && for f in browser/debs/*.deb; do dpkg -x "\$f" "\$croot"; done
  libs=\$croot/usr/lib/x86_64-linux-gnu:\$croot/lib/x86_64-linux-gnu
  printf '#!/bin/sh\nexport LD_LIBRARY_PATH=%s\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\nexec %s/usr/lib/chromium/chromium "\$@"\n' "\$libs" "\$croot" > "\$croot/chromium"
  chmod +x "\$croot/chromium"
  LD_LIBRARY_PATH=\$libs ldd "\$croot/usr/lib/chromium/chromium" | grep "not found"
  [ -e /usr/share/vulkan/icd.d/nvidia_icd.json ] || [ -n "\${VK_DRIVER_FILES:-}" ] || [ ! -e /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] ||
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  mkdir -p "\$res/browser"
  CHROMIUM=\$croot/chromium RUNAHEAD_BIN=\$here/runahead PROMPTS_DIR=\${PROMPTS_DIR:-\$here/prompts} BENCH_MODELS="\${BENCH_MODELS:-$browser_models}" \\
    bash browser/scripts/browser-gpu-bench.sh "\$res/browser" > "\$res/browser-gpu-bench.log" 2>&1
  echo "rc=\$?"; grep -E "^\| (decode|grounded)|adapter|CPU fallback" "\$res/browser/summary.md" 2>/dev/null
fi
tar czf "\$here/results.tgz" -C "\$(dirname "\$res")" "\$(basename "\$res")" && echo "run.sh: \$here/results.tgz"
EOF

# A file larger than a part goes in pieces (NAME.piece000, ...), which run.sh joins.
find "$stage" -type f -size +$(( (part_mb - 8) * 1000 * 1000 ))c | while read -r f; do
  split -b "$(( (part_mb - 8) * 1000 * 1000 ))" -d -a 3 "$f" "$f.piece" && rm "$f"
done

# Deal the staged files into parts of at most PART_MB, largest first; the last part gets the
# small files and run.sh.
limit=$(( part_mb * 1000 * 1000 ))
n=0
(cd "$stage" && find . -type f -printf '%s %P\n' | sort -rn) | while read -r size path; do
  placed=
  for p in $(seq 1 "$n"); do
    used=$(du -sb "$out/part$p" | cut -f1)
    if [ $(( used + size )) -le "$limit" ]; then placed=$p; break; fi
  done
  if [ -z "$placed" ]; then
    n=$(( n + 1 )); placed=$n
    mkdir -p "$out/part$n"
    printf '#!/usr/bin/env bash\n# Copies this part of a device bundle into DIR (default /tmp/runahead-dev).\nset -e\nd=${1:-/tmp/runahead-dev}\nmkdir -p "$d"\ncp -r "$(dirname "$0")"/. "$d"/\nrm -f "$d/gather.sh"\n' > "$out/part$n/gather.sh"
  fi
  mkdir -p "$out/part$placed/$(dirname "$path")"
  cp "$stage/$path" "$out/part$placed/$path"
done
du -sh "$out"/part* >&2
echo "device-bundle: copy each of $out/part* over, run partK/gather.sh DIR for each, then bash DIR/run.sh" >&2
