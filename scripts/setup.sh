#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine needs to build and test runahead (see
# docs/toolchain.md). Assumes rustup stable with clippy + rustfmt, python3 + pip.
# Idempotent: every step checks first and skips what is already there.
#
#   scripts/setup.sh
#
# Skip parts with environment variables (default: do everything):
#   SETUP_SKIP_APT=1            Debian packages (wasm toolchain, lld, chromium, lavapipe, node)
#   SETUP_SKIP_WASM_BINDGEN=1   cargo install wasm-bindgen-cli
#   SETUP_SKIP_MODELS=1         scripts/fetch-models.sh (SmolLM2-135M, Qwen2.5-Coder-0.5B) and
#                               scripts/fetch-vocab-tests.sh (llama.cpp's tokenizer suite)
#   SETUP_SKIP_NPM=1            npm install in tests/e2e (playwright-core) and tests/vite-app (vite,
#                               typescript), pinned by their lock files
#   SETUP_SKIP_FUZZ=1           cargo install cargo-fuzz (scripts/fuzz.sh, the test step `fuzz`)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

say() { echo "setup: $*"; }
die() { echo "setup: error: $*" >&2; exit 1; }

# Debian's rustc-web 1.96 + std sources build wasm32 std with -Zbuild-std (scripts/wasm.sh);
# rust-web-clippy is its clippy; lld-22 provides the wasm linker (rust-lld or wasm-ld, see
# scripts/wasm.sh); chromium(-driver) + mesa-vulkan-drivers
# (lavapipe) run WebGPU / Vulkan on the CPU; pkg-config for crates with system libraries;
# gcc-aarch64-linux-gnu + libc6-dev-arm64-cross link, and qemu-user runs, the CPU engine's
# tests built for aarch64 (the NEON kernels, scripts/aarch64.sh; std built the same way).
APT_PACKAGES=(rustc-web cargo-web rust-web-src rust-web-clippy lld-22 chromium chromium-driver
  mesa-vulkan-drivers pkg-config gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
# Node.js and npm run the page-level tests (tests/e2e, playwright-core; node >= 18). Only when
# missing: a NodeSource nodejs bundles npm and conflicts with Debian's npm package.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  APT_PACKAGES+=(nodejs npm)
fi

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "need root (or sudo) for: $*"; fi
}

installed() { # pkg: true if dpkg has it installed
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

setup_apt() {
  local missing=() p
  for p in "${APT_PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
  if [ ${#missing[@]} -eq 0 ]; then
    say "apt: all ${#APT_PACKAGES[@]} packages already installed"
    return
  fi
  say "apt: installing ${missing[*]}"
  as_root apt-get update -qq
  local avail=()
  for p in "${missing[@]}"; do
    # apt-cache show fails for names with no candidate in the configured sources.
    if apt-cache show "$p" >/dev/null 2>&1; then avail+=("$p")
    else echo "setup: warning: apt package '$p' not found in the apt sources, skipped" >&2; fi
  done
  if [ ${#avail[@]} -eq 0 ]; then return; fi
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends \
    "${avail[@]}" >/dev/null
  say "apt: done"
}

# Version of the wasm-bindgen crate in Cargo.lock (empty when not there).
lock_wasm_bindgen_version() {
  [ -f Cargo.lock ] || return 0
  awk '/^\[\[package\]\]/ { name = "" }
       /^name = "wasm-bindgen"$/ { name = "wasm-bindgen" }
       name == "wasm-bindgen" && /^version = / { gsub(/"/, "", $3); print $3; exit }' Cargo.lock
}

setup_wasm_bindgen() {
  local want have=""
  want=$(lock_wasm_bindgen_version)
  if [ -z "$want" ]; then
    say "wasm-bindgen-cli: Cargo.lock has no wasm-bindgen crate yet, skipped"
    return
  fi
  if command -v wasm-bindgen >/dev/null; then
    have=$(wasm-bindgen --version 2>/dev/null | awk '{print $2}') || true
  fi
  if [ "$have" = "$want" ]; then
    say "wasm-bindgen-cli: $want already installed"
    return
  fi
  say "wasm-bindgen-cli: installing $want${have:+ (found $have)} (takes a few minutes)"
  # Own temporary target dir: do not mix with the workspace's target/.
  # --locked first (the versions its authors tested). If a locked dependency is missing from the
  # registry mirror (seen here: webpki-roots 1.0.11 for 0.2.130), resolve afresh instead.
  if ! env -u CARGO_TARGET_DIR cargo install wasm-bindgen-cli --version "$want" --locked --quiet; then
    say "wasm-bindgen-cli: --locked install failed, retrying without --locked"
    env -u CARGO_TARGET_DIR cargo install wasm-bindgen-cli --version "$want" --quiet
  fi
  command -v wasm-bindgen >/dev/null || say "warning: wasm-bindgen not on PATH (add ~/.cargo/bin)"
  say "wasm-bindgen-cli: done"
}

setup_rust_components() {
  cargo fmt --version >/dev/null 2>&1 || die "cargo fmt missing: rustup component add rustfmt"
  cargo clippy --version >/dev/null 2>&1 || die "cargo clippy missing: rustup component add clippy"
  say "rust: $(rustc --version), $(cargo clippy --version)"
}

# cargo-fuzz for the fuzz step (scripts/fuzz.sh pins the version; the test step reaches no
# registry for it).
setup_cargo_fuzz() {
  local want
  want=$(sed -n 's/^CARGO_FUZZ_VERSION=//p' "$root/scripts/fuzz.sh")
  if cargo fuzz --version 2>/dev/null | grep -q " $want\b"; then
    say "cargo-fuzz: $want already installed"
    return
  fi
  say "cargo-fuzz: installing $want"
  env -u CARGO_TARGET_DIR cargo install cargo-fuzz --version "$want" --locked --quiet
}

# The node packages of the page-level tests (tests/e2e: playwright-core) and of the Vite app
# that builds on the packed package (tests/vite-app: vite, typescript), each from its lock file.
# Reinstalled when the lock file is newer than the install, so the test command itself never
# reaches the registry.
setup_npm() {
  local name dir stamp
  command -v npm >/dev/null || die "npm missing (apt package npm)"
  for name in e2e vite-app openai-types; do
    dir=$root/tests/$name
    stamp=$dir/node_modules/.package-lock.json
    if [ -f "$stamp" ] && [ "$stamp" -nt "$dir/package-lock.json" ]; then
      say "npm: tests/$name packages already installed"
      continue
    fi
    say "npm: installing tests/$name packages (from the lock file)"
    # `npm install --no-save` installs the lock file's versions (integrity-checked) and leaves
    # it as it is. Not `npm ci`: it refuses a lock file without every platform's optional
    # packages, and the registry mirror these machines use lacks most of rollup's (Vite's
    # bundler) native builds for other platforms, so no lock file made here has them.
    npm install --prefix "$dir" --no-save --no-audit --no-fund --loglevel=error
  done
}

setup_models() {
  say "models: SmolLM2-135M-Instruct, Qwen2.5-Coder-0.5B-Instruct, Gemma-3-270M"
  "$root/scripts/fetch-models.sh" smollm2
  "$root/scripts/fetch-models.sh" qwen-draft
  "$root/scripts/fetch-models.sh" gemma3
  say "tokenizer suite: llama.cpp's ggml-vocab files (crates/model/tests/llama_cpp_vocab.rs)"
  "$root/scripts/fetch-vocab-tests.sh"
}

if [ "${SETUP_SKIP_APT:-0}" = 1 ]; then say "apt: skipped (SETUP_SKIP_APT=1)"; else setup_apt; fi
setup_rust_components
if [ "${SETUP_SKIP_WASM_BINDGEN:-0}" = 1 ]; then
  say "wasm-bindgen-cli: skipped (SETUP_SKIP_WASM_BINDGEN=1)"
else
  setup_wasm_bindgen
fi
if [ "${SETUP_SKIP_NPM:-0}" = 1 ]; then say "npm: skipped (SETUP_SKIP_NPM=1)"; else setup_npm; fi
if [ "${SETUP_SKIP_FUZZ:-0}" = 1 ]; then say "cargo-fuzz: skipped (SETUP_SKIP_FUZZ=1)"; else setup_cargo_fuzz; fi
if [ "${SETUP_SKIP_MODELS:-0}" = 1 ]; then say "models: skipped (SETUP_SKIP_MODELS=1)"; else setup_models; fi
say "ok"
