#!/usr/bin/env bash
# Idempotent set-up of the kit's virtualenv on a fresh Debian/Ubuntu machine (no conda needed).
#
# Order matters: TensorFlow first, then Horovod compiled against it (--no-build-isolation so the build sees it),
# then nmtkit with its extras. Pins come from pyproject.toml only. A second run takes seconds.
set -euo pipefail

VENV=${VENV:-.venv}
HERE=$(cd "$(dirname "$0")/.." && pwd)
cd "$HERE"
say() { echo "[setup] $*"; }
die() { echo "[setup] ERROR: $*" >&2; exit 1; }

# --- prerequisites the kit cannot install itself -------------------------------------------------------
find_python() {
  for c in ${PYTHON:-} python3.11 python3.12 python3.10 python3; do
    if command -v "$c" >/dev/null 2>&1 &&
       "$c" -c 'import sys; sys.exit(0 if (3,10) <= sys.version_info[:2] <= (3,12) else 1)' 2>/dev/null; then
      echo "$c"; return 0
    fi
  done
  return 1
}
if [ ! -x "$VENV/bin/python" ]; then
  PY=$(find_python) || die "no Python 3.10-3.12 found (TensorFlow 2.18 has no wheels for 3.13). Install one:
  Ubuntu 22.04: sudo apt-get install -y python3.11 python3.11-venv python3.11-dev
  Ubuntu 24.04 (its Python is 3.12): sudo apt-get install -y python3.12-venv python3.12-dev
  (or set PYTHON=/path/to/python3.X)"
  # the venv package is named for the interpreter found: python3.12-venv on Ubuntu 24.04, python3.11-venv on 22.04
  PYV=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || echo 3.11)
  "$PY" -c 'import venv, ensurepip' 2>/dev/null ||
    die "$PY (Python $PYV) lacks venv/ensurepip: sudo apt-get install -y python$PYV-venv python$PYV-dev"
fi
# Wheel given (the image's final stage, Dockerfile): NMTKIT_HOROVOD_WHEEL names a Horovod wheel built for this
# TensorFlow pin and Python (the builder stage's); it is installed as it is, so no compiler or make is needed.
HVD_WHEEL=${NMTKIT_HOROVOD_WHEEL:-}
if [ -n "$HVD_WHEEL" ]; then
  [ -f "$HVD_WHEEL" ] || die "NMTKIT_HOROVOD_WHEEL=$HVD_WHEEL: no such wheel (unset it to compile Horovod here)"
else
  command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 ||
    die "no C++ compiler (Horovod is compiled at install time): sudo apt-get install -y g++ make"
  command -v make >/dev/null 2>&1 || die "make not found: sudo apt-get install -y make"
fi

# GPU nodes (the real homework): TensorFlow with its CUDA libraries and Horovod with NCCL operations.
# NMTKIT_GPU=auto (default) means: a GPU node when nvidia-smi lists a GPU.
GPU=${NMTKIT_GPU:-auto}
if [ "$GPU" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then GPU=1; else GPU=0; fi
fi
CUDA_FOR_TF=12.5   # the CUDA TensorFlow 2.18's wheels are built against; nvcc compiles Horovod's GPU kernels
# The TA's default: NVIDIA's apt repository (its keyring first), then nvcc and the CUDA runtime headers only, not the
# 4-6 GB cuda-toolkit-12-5 (Horovod's GPU build compiles with nvcc against the runtime's headers and library).
# NVIDIA's repositories are named by distribution and release (ubuntu2204, ubuntu2404, debian12): this machine's,
# from os-release (NMTKIT_OS_RELEASE: another file, for the tests).
cuda_repo() {
  local file=${NMTKIT_OS_RELEASE:-/etc/os-release} id="" ver=""
  if [ -r "$file" ]; then
    id=$(sed -n 's/^ID=//p' "$file" | tr -d "\"'"); ver=$(sed -n 's/^VERSION_ID=//p' "$file" | tr -d "\"'")
  fi
  case $id in
    ubuntu|debian) echo "$id${ver//./}";;
    *) echo "ubuntu2204 (this is ${id:-an unknown system}: pick yours at https://developer.download.nvidia.com/compute/cuda/repos/)";;
  esac
}
cuda_apt() {  # $1: the CUDA release to install (12.5: TensorFlow's; newer where a GPU needs it)
  local repo
  repo=$(cuda_repo)
  echo "add NVIDIA's apt repository (its keyring, for ${repo%% *}):
      wget https://developer.download.nvidia.com/compute/cuda/repos/${repo%% *}/x86_64/cuda-keyring_1.1-1_all.deb${repo#"${repo%% *}"}
      sudo dpkg -i cuda-keyring_1.1-1_all.deb && sudo apt-get update
  then nvcc and the runtime headers (not the 4-6 GB cuda-toolkit-${1/./-}):
      sudo apt-get install -y cuda-nvcc-${1/./-} cuda-cudart-dev-${1/./-}
  and rerun with CUDA_HOME=/usr/local/cuda-$1"
}
CUDA_APT=$(cuda_apt "$CUDA_FOR_TF")
if [ "$GPU" = 1 ]; then
  # CUDA 12's pip wheels (tensorflow[and-cuda]) carry no nvcc: a VM with only a driver needs the toolkit.
  CUDA_HOME=${CUDA_HOME:-${HOROVOD_CUDA_HOME:-}}
  if [ -z "$CUDA_HOME" ]; then
    if command -v nvcc >/dev/null 2>&1; then CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    else CUDA_HOME=/usr/local/cuda; fi
  fi
  [ -x "$CUDA_HOME/bin/nvcc" ] ||
    die "GPU mode (NMTKIT_GPU=1 or nvidia-smi found) needs nvcc, CUDA $CUDA_FOR_TF's compiler, to build Horovod's
  NCCL operations, and $CUDA_HOME/bin/nvcc does not exist (TensorFlow 2.18 is built against CUDA $CUDA_FOR_TF; the
  driver alone and the pip wheels have no nvcc). On Ubuntu, $CUDA_APT
  Or use NVIDIA's NGC TensorFlow container, which ships Horovod.
  To install the CPU-only stack instead: NMTKIT_GPU=0 make setup"
fi

# --- the Horovod build's configuration (functions used below) ----------------------------------------------
# Pins, read from pyproject.toml (one place).
pin() { "$VPY" - "$1" <<'PY'
import re, sys
text = open("pyproject.toml").read()
m = re.search(r'"' + re.escape(sys.argv[1]) + r'([=<>!~][^"]*)"', text)
if not m:
    sys.exit(f"pyproject.toml has no pin for {sys.argv[1]}")
print(sys.argv[1] + m.group(1))
PY
}
hvd_ok() { "$VPY" - <<'PY' 2>/dev/null
import os; os.environ["TF_USE_LEGACY_KERAS"] = "1"
import horovod.tensorflow as hvd
raise SystemExit(0 if hvd.gloo_built() else 1)
PY
}
# The CUDA each compute capability first compiled with (nvcc's -arch=sm_XY), and the last that still does.
min_cuda_for() { case $1 in 1[0-9][0-9]) echo 12.8;; 90|89) echo 11.8;; 87) echo 11.4;; 86) echo 11.1;; 80) echo 11.0;;
                 75) echo 10.0;; 7[0-2]) echo 9.0;; *) echo 0;; esac; }
ver_lt() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ] && [ "$1" != "$2" ]; }
check_nvcc() {  # nvcc's release against every GPU's compute capability: an old toolkit fails late, in the build
  local ver=$1 cc need want
  [ -n "$ver" ] || die "$CUDA_HOME/bin/nvcc --version names no release: reinstall nvcc $CUDA_FOR_TF: $CUDA_APT"
  for cc in ${2//,/ }; do
    need=$(min_cuda_for "$cc")
    if ver_lt "$ver" "$need"; then
      want=$CUDA_FOR_TF; ver_lt "$want" "$need" && want=$need  # Blackwell (10.0+) needs 12.8, past TensorFlow's
      die "nvcc $ver ($CUDA_HOME) cannot compile for compute capability ${cc:0:-1}.${cc: -1} (needs CUDA $need or newer): install nvcc $want: $(cuda_apt "$want")"
    fi
    if ! ver_lt "$ver" 13.0 && [ "$cc" -le 72 ]; then
      die "nvcc $ver ($CUDA_HOME) dropped compute capability ${cc:0:-1}.${cc: -1} (CUDA 13 builds for 7.5 and newer): install nvcc $CUDA_FOR_TF: $CUDA_APT"
    fi
  done
}
# The pinned Horovod (the last release) does not compile with gcc 13 (two headers lack an include; fixed on Horovod's master only, commit
# ff4ca09, "Fix build on gcc 13: add missing headers"). gcc 12 builds it as it is (verified on gcc 12.2).
compiler_plan() {  # sets HVD_CC_ENV (CC/CXX for the build), HVD_PATCH (1: apply that fix), COMPILER_DESC
  HVD_CC_ENV=(); HVD_PATCH=0; COMPILER_DESC=""
  local cxx=${CXX:-g++} major
  major=$( { "$cxx" -dumpversion 2>/dev/null || true; } | cut -d. -f1)
  { "$cxx" --version 2>/dev/null || true; } | grep -qi clang && return 0
  [ -n "$major" ] && [ "$major" -ge 13 ] 2>/dev/null || return 0
  local alt=${NMTKIT_GCC_FALLBACK:-12}  # the gcc version to build with instead (tests name one that is absent)
  if command -v "gcc-$alt" >/dev/null 2>&1 && command -v "g++-$alt" >/dev/null 2>&1; then
    HVD_CC_ENV=(CC="gcc-$alt" CXX="g++-$alt"); COMPILER_DESC="cxx=g++-$alt"
    say "$cxx is gcc $major, which Horovod ${HVD_PIN#horovod==} does not compile with: building it with gcc-12/g++-12"
  else
    HVD_PATCH=1; COMPILER_DESC="cxx=gcc$major+headers-fix"
    say "$cxx is gcc $major and gcc-12 is not installed: applying Horovod's upstream gcc 13 header fix (commit ff4ca09) to the ${HVD_PIN#horovod==} source. That path has not been compiled by the kit's CI (no gcc 13 there); gcc 12 is the verified route: sudo apt-get install -y gcc-12 g++-12 (Ubuntu 24.04 has them), then rerun"
  fi
}
patch_horovod_source() {  # $1: an unpacked Horovod source tree (the pinned release); adds the two includes of commit ff4ca09
  local common=$1/horovod/common/common.h table=$1/horovod/common/group_table.h
  [ -f "$common" ] && [ -f "$table" ] || die "$1 is no Horovod source tree (no horovod/common/common.h): sudo apt-get install -y gcc-12 g++-12 and rerun"
  grep -q '#include <stdexcept>' "$common" || sed -i 's|^#include <memory>$|#include <memory>\n#include <stdexcept>|' "$common"
  grep -q '#include <string>' "$table" || sed -i 's|^#include <queue>$|#include <queue>\n#include <string>|' "$table"
  grep -q '#include <stdexcept>' "$common" && grep -q '#include <string>' "$table" ||
    die "could not apply the gcc 13 header fix to $1: sudo apt-get install -y gcc-12 g++-12 and rerun"
}

horovod_plan() {  # sets HVD_GPU_ENV, HVD_CC_ENV, HVD_PATCH, HVD_KEY, CACHE; GPU: makes NCCL's unversioned link
  TF_VER=$("$VPY" -c 'import importlib.metadata as m; print(m.version("tensorflow"))')
  PY_TAG=$("$VPY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
  local tf_build
  # the TensorFlow build: its RECORD's package files, sorted, without the venv's scripts (../../../bin/, whose hashes
  # hold the venv's path) or pip's own notes (.dist-info/): a wheel built in one venv serves another of the same
  # system (the image's build reuses the host's)
  tf_build=$("$VPY" -c 'import importlib.metadata as m, hashlib
d = m.distribution("tensorflow"); rows = (d.read_text("RECORD") or "").splitlines()
rows = sorted(x for x in rows if not x.startswith("../") and ".dist-info/" not in x.split(",")[0])
print(hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16])')
  # the system it is built on (glibc and libstdc++ differ between releases): never reused on another
  local system; system=$( { . /etc/os-release 2>/dev/null && echo "${ID:-}-${VERSION_ID:-}"; } || echo unknown)
  HVD_VER=${HVD_PIN#horovod==}
  HVD_GPU_ENV=()
  local desc="horovod=$HVD_VER python=$PY_TAG tensorflow=$TF_VER build=$tf_build system=$system gpu=$GPU"
  if [ "$GPU" = 1 ]; then
    local nccl=${HOROVOD_NCCL_HOME:-}
    # tensorflow[and-cuda] brings NCCL as the nvidia-nccl-cu12 wheel: include/nccl.h and lib/libnccl.so.2 only.
    [ -n "$nccl" ] || nccl=$("$VPY" -c 'import nvidia.nccl as n, os; print(os.path.dirname(n.__file__) if n.__file__ else list(n.__path__)[0])' 2>/dev/null || true)
    [ -n "$nccl" ] && [ -f "$nccl/include/nccl.h" ] ||
      die "no NCCL found (the nvidia-nccl-cu12 wheel of tensorflow[and-cuda], or HOROVOD_NCCL_HOME): reinstall with
  NMTKIT_GPU=1 make setup, or point HOROVOD_NCCL_HOME at a directory with include/nccl.h and lib/libnccl.so*"
    local so2
    so2=$( { ls "$nccl"/lib/libnccl.so.[0-9]* 2>/dev/null || true; } | head -1)  # none: the message below, not rc 2
    [ -n "$so2" ] || [ -e "$nccl/lib/libnccl.so" ] || die "$nccl/lib holds no libnccl.so.N (NCCL's library): reinstall the wheel (NMTKIT_GPU=1 NMTKIT_REBUILD_HOROVOD=1 make setup), or point HOROVOD_NCCL_HOME at a directory with include/nccl.h and lib/libnccl.so.2"
    # Horovod's FindNCCL asks for libnccl_static.a, then for libnccl.so: link the wheel's library under that name
    # and link it shared; the rpath makes libnccl.so.2 resolve at run time without LD_LIBRARY_PATH.
    [ -e "$nccl/lib/libnccl.so" ] || ln -s "$(basename "$so2")" "$nccl/lib/libnccl.so"
    local ccs=${HOROVOD_BUILD_CUDA_CC_LIST:-}
    if [ -z "$ccs" ]; then  # `|| true`: a failing query must reach the message below, not end set -e's script
      ccs=$( { nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null || true; } | tr -d ' .' |
             { grep -E '^[0-9]+$' || true; } | sort -un | paste -sd, -)
    fi
    [ -n "$ccs" ] || die "nvidia-smi --query-gpu=compute_cap gave no compute capability (driver too old, or no GPU): set HOROVOD_BUILD_CUDA_CC_LIST yourself, e.g. HOROVOD_BUILD_CUDA_CC_LIST=80 for A100s, 70 for V100s"
    local nvcc_ver
    nvcc_ver=$( { "$CUDA_HOME/bin/nvcc" --version 2>/dev/null || true; } | { grep -Eo 'release [0-9.]+' || true; } | head -1)
    check_nvcc "${nvcc_ver#release }" "$ccs"
    HVD_GPU_ENV=(HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_HOME="$nccl" HOROVOD_NCCL_INCLUDE="$nccl/include"
                 HOROVOD_NCCL_LIB="$nccl/lib" HOROVOD_NCCL_LINK=SHARED HOROVOD_CUDA_HOME="$CUDA_HOME"
                 HOROVOD_BUILD_CUDA_CC_LIST="$ccs" LDFLAGS="${LDFLAGS:-} -Wl,-rpath,$nccl/lib")
    desc="$desc nccl=$nccl/$(basename "${so2:-libnccl.so}") cuda=$CUDA_HOME ($nvcc_ver) cc=$ccs"
  fi
  compiler_plan
  [ -z "$COMPILER_DESC" ] || desc="$desc $COMPILER_DESC"   # only a non-default compiler changes the cache key
  HVD_KEY=$(echo "$desc" | sha256sum | cut -c1-12)
  HVD_DESC=$desc
  CACHE_ROOT=${NMTKIT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nmtkit/wheels}
  CACHE=$CACHE_ROOT/horovod-$HVD_VER-tf-$TF_VER-$PY_TAG-$HVD_KEY
}
build_horovod() {  # the wheel into $CACHE; a failure names its cause (the CMake or compiler line)
  mkdir -p "$CACHE_ROOT/sdist"
  local sdist
  sdist=$(ls "$CACHE_ROOT"/sdist/horovod-"$HVD_VER".tar.gz 2>/dev/null || true)
  if [ -z "$sdist" ]; then  # kept: rebuilds and the FindNCCL test work offline
    "${PIP[@]}" download --no-deps --no-binary :all: -d "$CACHE_ROOT/sdist" "$HVD_PIN" ||
      die "could not download the $HVD_PIN source (PyPI has only its sdist)"
    sdist=$CACHE_ROOT/sdist/horovod-$HVD_VER.tar.gz
  fi
  say "compiling $HVD_PIN against TensorFlow $TF_VER with Gloo${HVD_GPU_ENV:+ and NCCL} (2-4 minutes on 2 cores)"
  rm -rf "$CACHE.tmp"; mkdir -p "$CACHE.tmp"
  if [ "$HVD_PATCH" = 1 ]; then
    tar -xzf "$sdist" -C "$CACHE.tmp"
    patch_horovod_source "$CACHE.tmp/horovod-$HVD_VER"
    sdist=$CACHE.tmp/horovod-$HVD_VER
  fi
  # CMAKE_POLICY_VERSION_MINIMUM: Horovod's bundled gloo predates CMake 4 (harmless with CMake 3). The venv's bin
  # (its pinned cmake) first on PATH, absolute whether VENV is relative (.venv) or not (the image's /opt/venv): else
  # Horovod fetches a "temporary CMake" from the index, which an offline build (PIP_NO_INDEX) cannot.
  local vbin; vbin=$(cd "$VENV/bin" && pwd)
  if ! env "${HVD_GPU_ENV[@]}" "${HVD_CC_ENV[@]}" HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
       HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=${MAKEFLAGS:--j2} CMAKE_POLICY_VERSION_MINIMUM=3.5 \
       PATH="$vbin:$PATH" \
       "${PIP[@]}" wheel -v --no-build-isolation --no-deps --no-cache-dir -w "$CACHE.tmp" "$sdist" \
       > "$CACHE_ROOT/build-$HVD_KEY.log" 2>&1; then
    echo "[setup] the Horovod build failed; its first errors (whole log: $CACHE_ROOT/build-$HVD_KEY.log):" >&2
    grep -E "CMake Error|Could NOT find|fatal error|error:|Cannot find|RuntimeError|No CMAKE_CUDA_COMPILER" \
      "$CACHE_ROOT/build-$HVD_KEY.log" | grep -v "^\s*$" | head -8 | sed 's/^/    /' >&2
    [ -z "$COMPILER_DESC" ] || echo "[setup] the compiler is gcc 13 or newer: sudo apt-get install -y gcc-12 g++-12, then rerun" >&2
    die "fix the cause above (configuration: $HVD_DESC); nothing was left half-installed; rerun \`make setup\`"
  fi
  echo "$HVD_DESC" > "$CACHE.tmp/configuration.txt"
  rm -rf "$CACHE.tmp/horovod-$HVD_VER"
  rm -rf "$CACHE"; mv "$CACHE.tmp" "$CACHE"   # the cache holds only complete wheels
}

VPY="$VENV/bin/python"
tf_installed() { [ -x "$VPY" ] && "$VPY" -c 'import importlib.metadata as m; m.version("tensorflow")' >/dev/null 2>&1; }
if [ "${1:-}" = --horovod-plan ]; then  # what the Horovod build would use, without building (tests, troubleshooting)
  tf_installed || die "--horovod-plan needs $VENV with TensorFlow installed"
  HVD_PIN=$(pin horovod); horovod_plan
  printf '%s\n' "${HVD_GPU_ENV[@]}" "${HVD_CC_ENV[@]}" "patch=$HVD_PATCH" "cache=$CACHE" "configuration=$HVD_DESC"
  exit 0
fi
if [ "${1:-}" = --patch-horovod-source ]; then  # the gcc 13 header fix on an unpacked source tree (tests)
  patch_horovod_source "$2"; say "patched $2"; exit 0
fi

# --- fast path: already set up for this pyproject/setup script and this Horovod configuration -------------------
STAMP="$VENV/.nmtkit-setup"
want=$( (cat pyproject.toml scripts/setup.sh; echo "gpu=$GPU") | sha256sum | cut -c1-16)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ "${NMTKIT_REBUILD_HOROVOD:-0}" != 1 ] && tf_installed &&
   HVD_PIN=$(pin horovod) && horovod_plan && [ "$(cat "$VENV/.horovod-tf" 2>/dev/null)" = "$HVD_KEY" ] &&
   "$VPY" -c 'import nmtkit, horovod.tensorflow' >/dev/null 2>&1; then
  say "already set up ($VENV); \`rm $STAMP\` to force"
  exit 0
fi
# --check: only say whether the fast path applies; never installs (tests run it against a shared venv)
[ "${1:-}" = --check ] && { say "not set up for this checkout ($VENV): run \`make setup\`"; exit 1; }

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
"$VPY" -c 'import sys; sys.exit(0 if (3,10) <= sys.version_info[:2] <= (3,12) else 1)' ||
  die "$VENV uses $("$VPY" --version); Python 3.10-3.12 is needed: rm -rf $VENV and rerun with PYTHON=python3.11"
PIP=("$VPY" -m pip --disable-pip-version-check -q)

TF_PIN=$(pin tensorflow); TFK_PIN=$(pin tf-keras); HVD_PIN=$(pin horovod); CMAKE_PIN=$(pin cmake)
ST_PIN=$(pin setuptools)   # below 81: TensorBoard 2.18 imports pkg_resources
if [ "$GPU" = 1 ]; then
  TF_PIN="tensorflow[and-cuda]==${TF_PIN#tensorflow==}"     # the same TensorFlow plus its CUDA/cuDNN/NCCL wheels
fi

say "pip, wheel, $ST_PIN, $CMAKE_PIN"
"${PIP[@]}" install --upgrade pip wheel "$ST_PIN" "$CMAKE_PIN"
say "$TF_PIN $TFK_PIN (first: Horovod compiles against it)"
"${PIP[@]}" install "$TF_PIN" "$TFK_PIN"

# --- Horovod, compiled against this TensorFlow with Gloo (and NCCL on GPU nodes) ------------------------------
# The wheel cache is keyed by everything the build depends on: Horovod, Python, the exact TensorFlow build (its
# RECORD, not only its version), and on GPU nodes the NCCL files, the CUDA toolkit and the GPUs' architectures.
# A wheel built under any other configuration is never reused; the venv's stamp holds the key it was built for.
horovod_plan
if [ -n "$HVD_WHEEL" ]; then  # wheel given: installed as it is (the caller built it for this configuration)
  say "Horovod from the given wheel $(basename "$HVD_WHEEL") (no compiler needed)"
  "${PIP[@]}" install --force-reinstall --no-deps "$HVD_WHEEL"
  echo "$HVD_KEY" > "$VENV/.horovod-tf"
elif [ "${NMTKIT_REBUILD_HOROVOD:-0}" = 1 ]; then
  say "NMTKIT_REBUILD_HOROVOD=1: dropping the cached wheel $CACHE"
  rm -rf "$CACHE" "$VENV/.horovod-tf"
fi
if [ -n "$HVD_WHEEL" ]; then
  :
elif hvd_ok && [ -f "$VENV/.horovod-tf" ] && [ "$(cat "$VENV/.horovod-tf")" = "$HVD_KEY" ]; then
  say "Horovod $HVD_VER already built for this configuration ($HVD_KEY)"
else
  if ls "$CACHE"/horovod-*.whl >/dev/null 2>&1 && [ "$(cat "$CACHE/configuration.txt" 2>/dev/null)" = "$HVD_DESC" ]; then
    say "Horovod wheel for this configuration found in $CACHE"
  else
    build_horovod
  fi
  "${PIP[@]}" install --force-reinstall --no-deps "$CACHE"/horovod-*.whl
  echo "$HVD_KEY" > "$VENV/.horovod-tf"
fi

# --horovod-wheel-only DIR (the image's builder stage): the wheel of this configuration copied into DIR; the kit
# itself is installed by the final stage, so the builder depends on pyproject.toml and this script only (a change to
# the kit never recompiles Horovod)
if [ "${1:-}" = --horovod-wheel-only ]; then
  mkdir -p "${2:?--horovod-wheel-only DIR}" && cp "$CACHE"/horovod-*.whl "$2"/
  say "Horovod wheel ($HVD_DESC) in $2; the kit itself not installed"; exit 0
fi

say "nmtkit and its pinned dependencies (pyproject.toml [dev])"
# The horovod extra is satisfied by the wheel installed above (--no-deps); naming it here brings in Horovod's
# own dependencies (cloudpickle, pyyaml, ...) without rebuilding it.
# NMTKIT_EXTRAS adds extras of pyproject.toml (the image: hub, for jupyterhub-singleuser)
"${PIP[@]}" install -e ".[dev,build,horovod${NMTKIT_EXTRAS:+,$NMTKIT_EXTRAS}]"

# --- verify the build: TensorFlow and Gloo present, else a clear error ------------------------------------
NMTKIT_GPU=$GPU "$VPY" - <<'PY' || die "Horovod is installed but not usable (see above). Force a rebuild: NMTKIT_REBUILD_HOROVOD=1 make setup"
import nmtkit, os, sys
from nmtkit.keras2 import import_tf
import_tf()
try:
    import horovod.tensorflow as hvd
except Exception as e:
    if "has not been built" in str(e):
        sys.exit(f"Horovod was built without TensorFlow support ({e}).")
    sys.exit(f"import horovod.tensorflow failed: {type(e).__name__}: {e}")
if not hvd.gloo_built():
    sys.exit("Horovod was built without Gloo.")
if os.environ["NMTKIT_GPU"] == "1" and not (hvd.nccl_built() and hvd.cuda_built()):
    sys.exit("GPU mode, but Horovod was built without NCCL/CUDA operations.")
print("[setup] Horovod build verified: TensorFlow [X], Gloo [X]")
PY

# The 'nmtkit' Jupyter kernel sets TF_USE_LEGACY_KERAS=1 before any cell imports TensorFlow, and memory growth:
# a kernel that trained on a GPU then holds what it uses, not the whole GPU until it shuts down.
"$VPY" -m ipykernel install --sys-prefix --name nmtkit --display-name "Python 3 (nmtkit)" \
  --env TF_USE_LEGACY_KERAS 1 --env TF_FORCE_GPU_ALLOW_GROWTH true >/dev/null
say "Jupyter kernel 'nmtkit' installed in $VENV"
# Trust the shipped notebooks (a signature per content, in the user's Jupyter data dir): untrusted, JupyterLab shows
# their saved widgets as text (`HTML(value=...)`). `make lab` trusts them again after they change.
"$VENV/bin/jupyter" trust notebooks/[0-9][0-9]_*.ipynb >/dev/null ||
  say "could not trust the notebooks; \`make lab\` tries again"

echo "$want" > "$STAMP"
say "done"
