#!/usr/bin/env bash
# Horovod's aarch64 wheel for the arm64 image, built in minutes on an x86-64 host. Emulation alone takes hours (every
# compile under QEMU), so set-up's own build (scripts/setup.sh) runs inside the arm64 base image under QEMU, where
# Python, TensorFlow's import and CMake are genuinely aarch64 (the flags Horovod's CMake asks TensorFlow for are
# aarch64's), and every compile goes through distcc to this host's native cross compiler aarch64-linux-gnu-g++-12
# (Debian's crossbuild-essential-arm64: the same g++ 12.2 as bookworm's arm64 g++, under the same name, so distccd
# runs it). Only preprocessing and the link run emulated.
# The wheel lands in set-up's cache on the host (NMTKIT_WHEEL_CACHE, else ~/.cache/nmtkit/wheels) under set-up's key
# (Horovod, Python, the TensorFlow build's RECORD hash: aarch64's files, the system, the compiler), the key the
# image's builder stage computes and so reuses. Idempotent: a cached aarch64 wheel is kept (FORCE=1 rebuilds).
#   BASE=debian:bookworm-slim-arm64  WHEELHOUSE=wheelhouse-arm64 (scripts/wheelhouse.sh ARCH=arm64 fills it)
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-debian:bookworm-slim-arm64}
WH=$(cd "${WHEELHOUSE:-wheelhouse-arm64}" && pwd)
DOCKER=${DOCKER:-/usr/bin/docker}
CXX_CROSS=aarch64-linux-gnu-g++-12
CACHE_ROOT=${NMTKIT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nmtkit/wheels}
PORT=${DISTCC_PORT:-3642}   # not distcc's 3632: a distccd the host runs for itself is left alone
say() { echo "[horovod-arm64] $*"; }
die() { echo "[horovod-arm64] ERROR: $*" >&2; exit 1; }

HVD=$(grep -o '"horovod==[^"]*"' pyproject.toml | tr -d '"'); HVD=${HVD#horovod==}
TF=$(grep -o '"tensorflow==[^"]*"' pyproject.toml | tr -d '"'); TF=${TF#tensorflow==}
cached() {  # the cached aarch64 wheel(s) of this Horovod and TensorFlow
  ls "$CACHE_ROOT"/horovod-"$HVD"-tf-"$TF"-cp311-*/horovod-"$HVD"-*linux_aarch64.whl 2>/dev/null || true
}
if [ "${FORCE:-0}" != 1 ] && [ -n "$(cached)" ]; then
  say "cached: $(cached | head -1) (FORCE=1 rebuilds)"; exit 0
fi
command -v distccd >/dev/null || die "no distccd: sudo apt-get install -y distcc"
command -v "$CXX_CROSS" >/dev/null || die "no $CXX_CROSS: sudo apt-get install -y crossbuild-essential-arm64"
[ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || die "no QEMU for aarch64: sudo apt-get install -y qemu-user-static binfmt-support"
ls "$WH"/tensorflow-"$TF"-*aarch64*.whl >/dev/null 2>&1 ||
  die "$WH has no aarch64 TensorFlow $TF: make image ARCH=arm64 fills it (scripts/wheelhouse.sh ARCH=arm64)"
DOCKER=$DOCKER BASE=$BASE ARCH=arm64 bash scripts/base-image.sh

# distccd for this build only, on the loopback (the container shares the host's network), stopped at the end
pidfile=$(mktemp /tmp/nmtkit-distccd.XXXXXX); logf=$pidfile.log
chmod 666 "$pidfile"; : > "$logf"; chmod 666 "$logf"   # distccd writes both after dropping root (user distcc)
distccd --daemon --listen 127.0.0.1 --port "$PORT" --allow 127.0.0.1 --jobs "$(nproc)" --pid-file "$pidfile" \
  --log-file "$logf" || die "distccd did not start (log: $logf)"
trap 'kill "$(cat "$pidfile" 2>/dev/null)" 2>/dev/null || true; rm -f "$pidfile"' EXIT
mkdir -p "$CACHE_ROOT"
# The container's own set-up: its compiler (the preprocessor and the link), distcc, Python's headers. CMake's
# launcher variables put distcc before each compile; -j 2x cores keeps the host's compilers busy while the emulated
# preprocessor works on the next files.
say "set-up's Horovod build in $BASE under QEMU, compiles sent to this host's $CXX_CROSS over distcc"
start=$(date +%s)
"$DOCKER" run --rm --network host --platform linux/arm64 -v "$PWD/pyproject.toml:/src/pyproject.toml:ro" \
  -v "$PWD/scripts/setup.sh:/src/scripts/setup.sh:ro" -v "$WH:/wheelhouse:ro" -v "$CACHE_ROOT:/cache" \
  -e DISTCC_HOSTS="127.0.0.1:$PORT/$(( 2 * $(nproc) ))" -e CMAKE_C_COMPILER_LAUNCHER=distcc \
  -e CMAKE_CXX_COMPILER_LAUNCHER=distcc -e CC=aarch64-linux-gnu-gcc-12 -e CXX="$CXX_CROSS" \
  -e MAKEFLAGS="-j$(( 2 * $(nproc) ))" -e DISTCC_FALLBACK=0 "$BASE" bash -euc '
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-venv python3-dev g++ make distcc >/dev/null && rm -rf /var/lib/apt/lists/*
    cp -r /src /tmp/kit && cd /tmp/kit
    PIP_NO_INDEX=1 PIP_FIND_LINKS=/wheelhouse NMTKIT_WHEEL_CACHE=/cache NMTKIT_GPU=0 VENV=/opt/venv \
      bash scripts/setup.sh --horovod-wheel-only /tmp/out
    chown -R '"$(id -u):$(id -g)"' /cache'
[ -n "$(cached)" ] || die "the build ended without an aarch64 wheel in $CACHE_ROOT (distccd log: $logf)"
jobs=$(grep -c 'COMPILE_OK' "$logf" 2>/dev/null || echo 0)
say "built in $(( $(date +%s) - start )) s ($jobs compiles on the host): $(cached | head -1)"
