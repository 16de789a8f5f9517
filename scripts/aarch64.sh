#!/usr/bin/env bash
# Builds the CPU engine's tests for aarch64 Linux and runs them under qemu-user, so the NEON
# kernels (crates/cpu/src/kernels/neon) are compiled, linted and checked bit for bit against the
# scalar kernels on an x86-64 machine. Installed by scripts/setup.sh: Debian's rustc-web and
# rust-web-src (std is built for the target with -Zbuild-std, as scripts/wasm.sh does for
# wasm32), gcc-aarch64-linux-gnu + libc6-dev-arm64-cross (the linker and the C library) and
# qemu-user.
#
#   scripts/aarch64.sh test          # the kernel and product tests and the crate's unit tests
#                                    # (about a minute under emulation)
#   scripts/aarch64.sh test --engine # and the engine on generated models (2 more minutes)
#   scripts/aarch64.sh test --full   # every test of the crate, the real models' too (~9 minutes)
#   scripts/aarch64.sh build [args]  # cargo build for the target (args passed on)
#
# Lints with Debian's clippy-driver (-D warnings) while it compiles. Output in target-aarch64/
# (AARCH64_TARGET_DIR overrides).
set -euo pipefail

TARGET=aarch64-unknown-linux-gnu
DEB_BIN=${DEB_RUST_BIN:-/usr/bin}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

die() { echo "aarch64.sh: $*" >&2; exit 1; }
for tool in "$DEB_BIN/rustc" "$DEB_BIN/cargo" "$DEB_BIN/clippy-driver"; do
  [ -x "$tool" ] || die "$tool not found: install Debian's rustc-web, cargo-web, rust-web-clippy (scripts/setup.sh does)"
done
[ -d /usr/lib/rustlib/src/rust/library ] || die "std sources missing: install rust-web-src (scripts/setup.sh does)"
command -v aarch64-linux-gnu-gcc >/dev/null || die "aarch64-linux-gnu-gcc not found: install gcc-aarch64-linux-gnu and libc6-dev-arm64-cross (scripts/setup.sh does)"
command -v qemu-aarch64 >/dev/null || die "qemu-aarch64 not found: install qemu-user (scripts/setup.sh does)"

export CARGO_TARGET_DIR=${AARCH64_TARGET_DIR:-$root/target-aarch64}
export RUSTC=$DEB_BIN/rustc CARGO=$DEB_BIN/cargo RUSTC_BOOTSTRAP=1
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
export RUSTC_WORKSPACE_WRAPPER=$DEB_BIN/clippy-driver
export CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
unset RUSTC_WRAPPER RUSTDOC
export PATH=$DEB_BIN:$PATH

common=(--target "$TARGET" -Zbuild-std -p runahead-cpu)
cmd=${1:-}
[ $# -gt 0 ] && shift
case "$cmd" in
  test)
    # CI runs the NEON kernels bit for bit against the scalar ones; the engine above them is
    # the same code on every instruction set (tested natively on each x86-64 one).
    case "${1:-}" in
      # --tests: every test target, not the doc tests (rustdoc is rustup's, another compiler).
      --full) "$CARGO" test "${common[@]}" --tests ;;
      --engine) "$CARGO" test "${common[@]}" --lib --test kernels --test products --test engine ;;
      *) "$CARGO" test "${common[@]}" --lib --test kernels --test products ;;
    esac
    ;;
  build) "$CARGO" build "${common[@]}" "$@" ;;
  *) die "usage: scripts/aarch64.sh test [--engine | --full] | build [cargo args]" ;;
esac
