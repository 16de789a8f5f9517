#!/usr/bin/env bash
# Builds / lints the browser crates for wasm32-unknown-unknown with Debian's rustc-web toolchain
# (see docs/toolchain.md: rustup here has no wasm32 std, so std is built from rust-web-src with
# -Zbuild-std). Installed by scripts/setup.sh: rustc-web cargo-web rust-web-src rust-web-clippy
# lld-22 (the wasm linker).
#
#   scripts/wasm.sh clippy [cargo args...]   # cargo clippy ... -- -D warnings
#   scripts/wasm.sh build  [cargo args...]   # cargo build --release
#   scripts/wasm.sh check  [cargo args...]   # cargo check (quick)
#   scripts/wasm.sh test [--no-run]          # browser tests: wasm-bindgen-test in headless Chromium
#   scripts/wasm.sh pkg                      # the npm package's wasm: runahead-web's .wasm from the
#                                            # browser tests' build, then wasm-bindgen --target web
#                                            # into pkg/wasm/
#   scripts/wasm.sh pkg-threads              # the package's threaded wasm (shared memory, atomics):
#                                            # runahead-web built again in target-wasm-threads/,
#                                            # wasm-bindgen --target web into pkg/wasm-threads/
#
# WASM_RELAXED=1: the same with WebAssembly relaxed SIMD as well (its integer dot product in the
# CPU engine's kernels), in target-wasm-relaxed/ and target-wasm-threads-relaxed/; `pkg` and
# `pkg-threads` then add only runahead_relaxed_bg.wasm beside runahead_bg.wasm (wasm-bindgen's
# JavaScript for the two builds is the same file, checked), which the package loads where the
# browser validates relaxed SIMD. Without WASM_RELAXED, `pkg` and `pkg-threads` build both;
# WASM_RELAXED=0 builds the plain one alone.
#
# One wasm32 build serves the browser tests, the wasm32 lint pass and the package: `test` and
# `pkg` run the same cargo invocation in the release profile (`--profile release`), and `pkg`
# takes the runahead_web .wasm that build made. So the e2e tests (scripts/test.sh e2e) run the
# very .wasm that `npm pack` ships, at no second build (a separate release build cost ~9 minutes
# of CI's 2 cores). The price: the browser tests run without debug assertions and overflow
# checks; the native tests (cargo's test profile) keep both over the same engine code.
#
# Output goes to target-wasm/ (override with WASM_TARGET_DIR) so the native rustup builds in
# target/ and the wasm builds never invalidate each other. CARGO_BUILD_JOBS limits parallelism.
set -euo pipefail

# The crates that must compile for the browser. Add new browser crates here
# (WASM_CRATES="a b" in the environment overrides the list for one run).
DEFAULT_WASM_CRATES="runahead-gguf runahead-model runahead-speculate runahead-cpu runahead-gpu runahead-web"
read -r -a WASM_CRATES <<< "${WASM_CRATES:-$DEFAULT_WASM_CRATES}"

TARGET=wasm32-unknown-unknown
DEB_BIN=${DEB_RUST_BIN:-/usr/bin}   # where rustc-web / cargo-web / rust-web-clippy put their binaries

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

die() { echo "wasm.sh: $*" >&2; exit 1; }

need() {
  [ -x "$DEB_BIN/$1" ] || die "$DEB_BIN/$1 not found: install Debian's $2 (scripts/setup.sh does)"
}
need rustc rustc-web
need cargo cargo-web
[ -d /usr/lib/rustlib/src/rust/library ] || die "std sources missing: install rust-web-src (scripts/setup.sh does)"

cmd=${1:-}
[ $# -gt 0 ] && shift

relaxed=${WASM_RELAXED:-}
export CARGO_TARGET_DIR=${WASM_TARGET_DIR:-$root/target-wasm}
if [ "$relaxed" = 1 ]; then
  CARGO_TARGET_DIR=${WASM_RELAXED_TARGET_DIR:-$root/target-wasm-relaxed}
fi
# Every wasm32 build (std included, through -Zbuild-std) uses WebAssembly SIMD: the CPU
# engine's simd128 kernels, and LLVM vectorizes the rest. Every browser with WebGPU, and every
# current one without, runs it. One set of flags for every command below, so `test` and `pkg`
# share one build (a change here rebuilds everything, std included).
WASM_RUSTFLAGS="-C target-feature=+simd128"
# The threaded build (`pkg-threads`): std and every crate with atomics, so the CPU engine's pool
# runs on Web Workers that share one WebAssembly.Memory. The memory is imported (the first
# thread creates it, every worker instantiates the module on it) and shared, up to 4 GiB (wasm32's
# whole address space: the model's bytes live in it); wasm-bindgen's thread support needs the
# TLS exports (each worker sets up its own thread-locals and stack). Its own target dir: other
# flags rebuild everything, std included, and must not invalidate the single-threaded build.
if [ "$cmd" = pkg-threads ]; then
  export CARGO_TARGET_DIR=${WASM_THREADS_TARGET_DIR:-$root/target-wasm-threads}
  if [ "$relaxed" = 1 ]; then
    CARGO_TARGET_DIR=${WASM_THREADS_RELAXED_TARGET_DIR:-$root/target-wasm-threads-relaxed}
  fi
  WASM_RUSTFLAGS="-C target-feature=+simd128,+atomics,+bulk-memory,+mutable-globals"
  WASM_RUSTFLAGS+=" -C link-arg=--shared-memory -C link-arg=--import-memory"
  WASM_RUSTFLAGS+=" -C link-arg=--max-memory=4294967296"
  for sym in __wasm_init_tls __tls_size __tls_align __tls_base; do
    WASM_RUSTFLAGS+=" -C link-arg=--export=$sym"
  done
fi
# Relaxed SIMD (Chrome 114 on): for runahead-cpu alone, whose kernels are the only code that
# uses it, through a profile override of that package's flags (cargo's unstable
# profile-rustflags). Every other crate, std included, compiles as in the build without it, so
# a relaxed build starts from a copy of that build and recompiles runahead-cpu and the crates
# above it, not std and every dependency again (minutes on 2 cores). Its own target dir still:
# the two builds' runahead_web .wasm have the same name.
relaxed_args=()
if [ "$relaxed" = 1 ]; then
  relaxed_args=(-Zprofile-rustflags
    --config 'profile.release.package.runahead-cpu.rustflags=["-Ctarget-feature=+relaxed-simd"]')
  # The CPU crate's browser tests check that the override took (option_env! at compile time).
  export RUNAHEAD_WASM_RELAXED=1
else
  unset RUNAHEAD_WASM_RELAXED
fi
# The caller's own flags, kept for the relaxed build `pkg` runs after the plain one (inheriting
# the plain build's would make its flags differ from the relaxed browser tests' and rebuild it).
caller_rustflags=${CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS:-}
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="$WASM_RUSTFLAGS $caller_rustflags"
# Use Debian's compiler and cargo, never rustup's proxies in ~/.cargo/bin (same version for the
# build-std'd std, the dependencies and the workspace crates). RUSTC_BOOTSTRAP allows -Zbuild-std
# on this stable compiler.
export RUSTC=$DEB_BIN/rustc
export CARGO=$DEB_BIN/cargo
export RUSTC_BOOTSTRAP=1
unset RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER RUSTDOC
# WASM_LINT=1 (scripts/test.sh sets it): compile the workspace's crates with Debian's
# clippy-driver (this compiler plus clippy's lints, -D warnings), so the browser tests' build is
# also the wasm32 lint pass. `test` and `pkg` both see it and reuse each other's artifacts.
if [ "${WASM_LINT:-0}" = 1 ]; then
  need clippy-driver rust-web-clippy
  export RUSTC_WORKSPACE_WRAPPER=$DEB_BIN/clippy-driver
  export CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
fi
# cargo looks subcommands and tools up on PATH: put Debian's bin first for anything it spawns.
export PATH=$DEB_BIN:$PATH

# rustc links wasm32 with `rust-lld`, which Debian's rustc-web does not always put on PATH
# (1.96.0+dfsg1-1~deb12u2 does not): then point it at LLVM's wasm-ld from lld-22 (rustc infers
# the wasm-ld flavor from the name).
if [ -z "${CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER:-}" ] && ! command -v rust-lld >/dev/null; then
  for ld in /usr/lib/llvm-22/bin/wasm-ld /usr/lib/llvm-*/bin/wasm-ld; do
    if [ -x "$ld" ]; then
      export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=$ld
      break
    fi
  done
  [ -n "${CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER:-}" ] ||
    die "no wasm linker: neither rust-lld nor LLVM's wasm-ld found (install lld-22; scripts/setup.sh does)"
fi

# A first relaxed build starts from a copy of the same build without relaxed SIMD (a copy: cargo
# may rewrite files in place), where only runahead-cpu and the crates above it differ. A first
# threaded build starts from the single-threaded one: the host half of a build (build scripts,
# proc macros: syn, serde_derive, wasm-bindgen's macros) does not see the wasm32 flags.
seed_from_plain_build() {
  local plain=${WASM_TARGET_DIR:-$root/target-wasm} dir
  if [ "$cmd" = pkg-threads ] && [ "$relaxed" = 1 ] &&
    [ -d "${WASM_THREADS_TARGET_DIR:-$root/target-wasm-threads}/release" ]; then
    plain=${WASM_THREADS_TARGET_DIR:-$root/target-wasm-threads}
  fi
  [ "$CARGO_TARGET_DIR" != "$plain" ] && [ ! -d "$CARGO_TARGET_DIR/release" ] &&
    [ -d "$plain/release" ] || return 0
  # The host half (release/), and for a relaxed build the wasm32 half too.
  local dirs=(release)
  if [ "$relaxed" = 1 ]; then dirs+=("$TARGET/release"); fi
  for dir in "${dirs[@]}"; do
    if [ -d "$plain/$dir" ]; then
      mkdir -p "$(dirname "$CARGO_TARGET_DIR/$dir")"
      cp -a "$plain/$dir" "$CARGO_TARGET_DIR/$dir"
    fi
  done
}

# This script's command again for the relaxed SIMD build, with the caller's environment.
relaxed_too() {
  CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS=$caller_rustflags WASM_RELAXED=1 bash "$0" "$@"
}

# wasm-bindgen's output for `wasm` into the package directory `out`: the whole of it for the
# plain build; for the relaxed one (WASM_RELAXED=1) only its .wasm, as runahead_relaxed_bg.wasm,
# once its JavaScript is found to be the plain build's (the same exports and imports; comments
# that number functions aside).
bindgen_into() {
  local out=$1 wasm=$2
  if [ "$relaxed" = 1 ]; then
    [ -f "$out/runahead.js" ] || die "$cmd: WASM_RELAXED=1 adds to $out: build it without first"
    local tmp
    tmp=$(mktemp -d)
    wasm-bindgen --target web --out-dir "$tmp" --out-name runahead "$wasm"
    # wasm-bindgen's "Cast intrinsic" comments name closure shims by their function index,
    # which moves when the builds' kernels differ in their number of functions; the code does
    # not refer to those indices.
    local shim_note='// Cast intrinsic for'
    cmp -s <(grep -v "$shim_note" "$tmp/runahead.js") <(grep -v "$shim_note" "$out/runahead.js") ||
      die "$cmd: the relaxed build's JavaScript differs from $out/runahead.js (rebuild both)"
    cp "$tmp/runahead_bg.wasm" "$out/runahead_relaxed_bg.wasm"
    rm -rf "$tmp"
    echo "wasm.sh: $cmd: wrote $out/runahead_relaxed_bg.wasm ($(du -h "$out/runahead_relaxed_bg.wasm" | cut -f1))"
  else
    rm -rf "$out"
    wasm-bindgen --target web --out-dir "$out" --out-name runahead "$wasm"
    echo "wasm.sh: $cmd: wrote $out ($(du -h "$out/runahead_bg.wasm" | cut -f1) of wasm)"
  fi
}

pkgs=()
for c in "${WASM_CRATES[@]}"; do pkgs+=(-p "$c"); done
common=(--target "$TARGET" "-Zbuild-std=std,panic_abort" "${relaxed_args[@]}" "${pkgs[@]}")

# The browser tests' build, which is also the package's (see the top). The relaxed build
# selects the same crates and tests: cargo's feature resolution, and so the dependencies' crate
# hashes that wasm-bindgen's JavaScript names closures by, must be the plain build's for the
# two builds to share one runahead.js.
browser_tests=(--profile release --target "$TARGET" "-Zbuild-std=std,panic_abort" "${relaxed_args[@]}"
  -p runahead-cpu -p runahead-gpu -p runahead-web --test browser --test forward_cost)

case "$cmd" in
  clippy)
    need cargo-clippy rust-web-clippy
    need clippy-driver rust-web-clippy
    # Call Debian's cargo-clippy directly rather than `cargo clippy`: cargo would search
    # $CARGO_HOME/bin (rustup's cargo-clippy proxy) before PATH unless it is on PATH already.
    # cargo-clippy runs $CARGO check with RUSTC_WORKSPACE_WRAPPER=<its own dir>/clippy-driver,
    # i.e. /usr/bin/clippy-driver, which links the same librustc_driver as /usr/bin/rustc.
    echo "wasm.sh: clippy ($TARGET) ${WASM_CRATES[*]}"
    "$DEB_BIN/cargo-clippy" clippy "${common[@]}" "$@" -- -D warnings
    ;;
  build)
    echo "wasm.sh: build --release ($TARGET) ${WASM_CRATES[*]}"
    "$CARGO" build --release "${common[@]}" "$@"
    ;;
  test)
    # wasm-bindgen-test-runner (cargo install wasm-bindgen-cli, scripts/setup.sh) drives
    # Debian's chromium through chromedriver with the flags in crates/gpu/webdriver.json
    # (crates/web/webdriver.json links to it; WebGPU on SwiftShader, no network).
    command -v wasm-bindgen-test-runner >/dev/null || die "wasm-bindgen-test-runner not found: scripts/setup.sh installs it"
    export CHROMEDRIVER=${CHROMEDRIVER:-/usr/bin/chromedriver}
    export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
    export WASM_BINDGEN_TEST_TIMEOUT=${WASM_BINDGEN_TEST_TIMEOUT:-600}
    echo "wasm.sh: browser tests ($TARGET${relaxed:+, relaxed SIMD}): ${browser_tests[*]}"
    seed_from_plain_build
    if [ "$relaxed" != 1 ] || [[ " $* " == *" --no-run "* ]]; then
      "$CARGO" test "${browser_tests[@]}" "$@"
    else
      # Of the relaxed build, the tests of the crates whose code relaxed SIMD changes: the CPU
      # engine's kernels and the page API over them (the GPU engine's would run the same WGSL
      # again). Each runs as cargo would run it: the runner, from its package's directory.
      runs=$("$CARGO" test --no-run --message-format=json "${browser_tests[@]}" "$@" |
        python3 -c '
import json, os, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-message":
        sys.stderr.write(m["message"].get("rendered") or "")
    if m.get("reason") == "compiler-artifact" and m.get("executable") \
            and m["target"]["name"] == "browser" \
            and os.path.basename(os.path.dirname(m["manifest_path"])) in ("cpu", "web"):
        print(os.path.dirname(m["manifest_path"]) + "\t" + m["executable"])
')
      [ "$(printf '%s\n' "$runs" | grep -c .)" = 2 ] || die "test: expected the cpu and web browser tests, got: $runs"
      while IFS=$'\t' read -r dir exe; do
        echo "wasm.sh: running $exe"
        (cd "$dir" && wasm-bindgen-test-runner "$exe")
      done <<< "$runs"
    fi
    ;;
  pkg)
    # wasm-bindgen refuses a .wasm made with another version of the wasm-bindgen crate, with
    # a message naming both; scripts/setup.sh installs the one Cargo.lock asks for.
    # The .wasm of the browser tests' build (see the top): the same cargo invocation as `test`,
    # so nothing is rebuilt when the tests were built; cargo names the artifact in its JSON.
    command -v wasm-bindgen >/dev/null || die "wasm-bindgen not found: scripts/setup.sh installs it"
    echo "wasm.sh: pkg: runahead-web from the browser tests' release build ($TARGET${relaxed:+, relaxed SIMD})"
    seed_from_plain_build
    wasm=$("$CARGO" test --no-run --message-format=json "${browser_tests[@]}" "$@" |
      python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "runahead_web" \
            and "cdylib" in m["target"]["kind"]:
        print(next(f for f in m["filenames"] if f.endswith(".wasm")))
')
    [ -n "$wasm" ] || die "pkg: cargo named no runahead_web .wasm"
    bindgen_into "$root/pkg/wasm" "$wasm"
    if [ -z "$relaxed" ]; then relaxed_too pkg "$@"; fi
    ;;
  pkg-threads)
    # Only the cdylib: the browser tests run on the single-threaded build; the threaded one is
    # tested through the package (tests/e2e/threads.test.mjs).
    command -v wasm-bindgen >/dev/null || die "wasm-bindgen not found: scripts/setup.sh installs it"
    echo "wasm.sh: pkg-threads: runahead-web with atomics and shared memory ($TARGET${relaxed:+, relaxed SIMD})"
    seed_from_plain_build
    threaded=(--profile release --target "$TARGET" "-Zbuild-std=std,panic_abort" "${relaxed_args[@]}"
      -p runahead-web --lib)
    wasm=$("$CARGO" build --message-format=json "${threaded[@]}" "$@" |
      python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-message":
        sys.stderr.write(m["message"].get("rendered") or "")
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "runahead_web" \
            and "cdylib" in m["target"]["kind"]:
        print(next(f for f in m["filenames"] if f.endswith(".wasm")))
')
    [ -n "$wasm" ] || die "pkg-threads: cargo named no runahead_web .wasm"
    bindgen_into "$root/pkg/wasm-threads" "$wasm"
    # wasm-bindgen switches to its thread support only for a module with shared memory.
    grep -q 'shared:true' "$root/pkg/wasm-threads/runahead.js" ||
      die "pkg-threads: wasm-bindgen emitted no shared memory"
    if [ -z "$relaxed" ]; then relaxed_too pkg-threads "$@"; fi
    ;;
  check)
    echo "wasm.sh: check ($TARGET) ${WASM_CRATES[*]}"
    "$CARGO" check "${common[@]}" "$@"
    ;;
  *)
    die "usage: scripts/wasm.sh {clippy|build|check|test|pkg|pkg-threads} [cargo args...]"
    ;;
esac
