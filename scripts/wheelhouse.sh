#!/usr/bin/env bash
# Fills wheelhouse/ on the host for the image build (`make image`): every pinned Python package the kit installs
# (pyproject.toml, the same pins scripts/setup.sh uses) as wheels for Linux, CPython 3.11 (Debian bookworm's python3)
# and the image's architecture, the Horovod source, and set-up's Horovod wheel where this host built one for the
# same Python and architecture. The build installs from it with --no-index: fast, offline, no CA in the image.
# Idempotent: pip skips what is already there.
#   WHEELHOUSE=wheelhouse  ARCH=amd64|arm64  PY=python used for pip (the kit's venv)
set -euo pipefail
cd "$(dirname "$0")/.."
WH=${WHEELHOUSE:-wheelhouse}
ARCH=${ARCH:-$(dpkg --print-architecture 2>/dev/null || echo amd64)}
PY=${PY:-.venv/bin/python}
case $ARCH in amd64) M=x86_64;; arm64) M=aarch64;; *) echo "[wheelhouse] unsupported ARCH=$ARCH (amd64, arm64)" >&2; exit 1;; esac
mkdir -p "$WH"
reqs=$("$PY" - <<'PY'
import re, tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
opt = p["optional-dependencies"]
names = p["dependencies"] + opt["dev"] + opt["build"] + ["pip", "wheel", "jupyterhub>=5,<6"]
print("\n".join(r for r in names if not r.startswith("horovod")))
PY
)
# jupyterhub: the image's `jupyterhub-singleuser` (a class hub starts it); installed beside the kit, not a kit pin
printf '%s\n' "$reqs" > "$WH/requirements.txt"
echo "[wheelhouse] $(wc -l < "$WH/requirements.txt") requirements for cp311 manylinux $M into $WH/"
PIP=("$PY" -m pip --disable-pip-version-check -q)
"${PIP[@]}" download -d "$WH" --only-binary :all: --implementation cp --python-version 3.11 --abi cp311 \
  --platform "manylinux2014_$M" --platform "manylinux_2_17_$M" --platform "manylinux_2_28_$M" -r "$WH/requirements.txt"
# the Horovod source (PyPI has no wheel) and its pure-Python dependencies
HVD=$(grep -o '"horovod==[^"]*"' pyproject.toml | tr -d '"')
"${PIP[@]}" download -d "$WH" --no-deps --no-binary :all: "$HVD"
"${PIP[@]}" download -d "$WH" --only-binary :all: --python-version 3.11 cloudpickle pyyaml packaging psutil cffi \
  --platform "manylinux2014_$M" --implementation cp --abi cp311 2>/dev/null || true
# set-up's own Horovod wheel cache (built against this TensorFlow pin for Python 3.11 on this architecture): the
# builder stage reuses a wheel whose configuration matches, else compiles one. arm64 from an x86-64 host: the wheel
# is built first where the cache has none (scripts/horovod-arm64.sh: minutes with distcc; hours if the builder stage
# compiled it under QEMU)
CACHE=${NMTKIT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nmtkit/wheels}
if [ "$M" = aarch64 ] && [ "$(uname -m)" != aarch64 ]; then
  WHEELHOUSE=$WH bash scripts/horovod-arm64.sh
fi
for d in "$CACHE"/horovod-*-tf-*-cp311-*/; do
  [ -f "$d/configuration.txt" ] && grep -q 'gpu=0' "$d/configuration.txt" && ls "$d"/*"linux_$M.whl" >/dev/null 2>&1 ||
    continue
  mkdir -p "$WH/nmtkit-wheels" && cp -ru "${d%/}" "$WH/nmtkit-wheels/" && echo "[wheelhouse] set-up's wheel: $(basename "$d")"
done
echo "[wheelhouse] $(ls "$WH" | wc -l) files, $(du -sh "$WH" | cut -f1)"
