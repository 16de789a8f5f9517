#!/usr/bin/env bash
# What a GPU machine with no Rust toolchain and no registry needs to run the GPU benchmark, the
# GPU crate's tests and the CPU engine next to llama.cpp, in parts of at most PART_MB each (for
# copies of limited size): the release CLI, `forward_cost`, llama-bench (when built) and the GPU
# test binaries, stripped and gzipped; the model split in pieces; the prompt sets (ShareGPT cut
# to its first 6 MB: the suites take the first eligible records in file order, so the cut gives
# the same prompts); the Vulkan loader and glvnd packages (what the NVIDIA driver's Vulkan needed
# on the H200 machines it has run on); and `run.sh`, which puts it together there.
#
#   scripts/device-bundle.sh OUT [MODEL]     # MODEL: default models/SmolLM2-135M-Instruct.Q4_1.gguf
#
# Then, on the GPU machine, as root, with every part copied over (one copy each, any order):
#   bash partK/gather.sh DIR        # for each part: its files into DIR (default /tmp/runahead-dev)
#   bash DIR/run.sh RESULTS         # tests, scripts/gpu-bench.sh, CPU vs llama.cpp; then a tarball
#
# `run.sh` needs the repository's scripts/gpu-bench.sh beside it (the last part carries a copy),
# bash, python3, dpkg and gzip. Environment here: PART_MB (default 60), DEBS (default the seven
# packages below; empty: none), NO_TESTS=1 (no test binaries), ONLY=... (run.sh there: any of
# "tests gpu cpu", default all three).
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
cat > "$stage/run.sh" <<EOF
#!/usr/bin/env bash
# Runs on the GPU machine from the folder gather.sh filled (written by scripts/device-bundle.sh).
set -uo pipefail
here=\$(cd "\$(dirname "\$0")" && pwd)
res=\${1:-\$here/results}
only=\${ONLY:-tests gpu cpu}
mkdir -p "\$res"
cd "\$here"
for f in debs/*.deb; do [ -f "\$f" ] && dpkg -x "\$f" /; done
command -v ldconfig >/dev/null && ldconfig
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
tar czf "\$here/results.tgz" -C "\$(dirname "\$res")" "\$(basename "\$res")" && echo "run.sh: \$here/results.tgz"
EOF

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
