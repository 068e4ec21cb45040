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
  PY=$(find_python) || die "python3.11 not found (Python 3.10-3.12 needed; TensorFlow 2.18 has no wheels for 3.13).
  Install it: sudo apt-get install -y python3.11 python3.11-venv python3.11-dev   (or set PYTHON=/path/to/python3.11)"
  "$PY" -c 'import venv, ensurepip' 2>/dev/null || die "$PY lacks venv/ensurepip: sudo apt-get install -y python3.11-venv"
fi
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 ||
  die "no C++ compiler (Horovod is compiled at install time): sudo apt-get install -y g++ make"
command -v make >/dev/null 2>&1 || die "make not found: sudo apt-get install -y make"

# GPU nodes (the real homework): TensorFlow with its CUDA libraries and Horovod with NCCL operations.
# NMTKIT_GPU=auto (default) means: a GPU node when nvidia-smi lists a GPU.
GPU=${NMTKIT_GPU:-auto}
if [ "$GPU" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q GPU; then GPU=1; else GPU=0; fi
fi
if [ "$GPU" = 1 ]; then
  command -v nvcc >/dev/null 2>&1 || [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ] ||
    die "GPU mode (NMTKIT_GPU=1 or nvidia-smi found) needs the CUDA toolkit to compile Horovod's NCCL operations:
  install cuda-toolkit-12 (nvcc) and set CUDA_HOME, or use NVIDIA's NGC TensorFlow container, which ships Horovod.
  To install the CPU-only stack instead: NMTKIT_GPU=0 make setup"
fi

# --- fast path: already set up for this pyproject/setup script -----------------------------------------
STAMP="$VENV/.nmtkit-setup"
want=$( (cat pyproject.toml scripts/setup.sh; echo "gpu=$GPU") | sha256sum | cut -c1-16)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] &&
   "$VENV/bin/python" -c 'import nmtkit, horovod.tensorflow' >/dev/null 2>&1; then
  say "already set up ($VENV); \`rm $STAMP\` to force"
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $PY"
  "$PY" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
"$VPY" -c 'import sys; sys.exit(0 if (3,10) <= sys.version_info[:2] <= (3,12) else 1)' ||
  die "$VENV uses $("$VPY" --version); Python 3.10-3.12 is needed: rm -rf $VENV and rerun with PYTHON=python3.11"
PIP=("$VPY" -m pip --disable-pip-version-check -q)

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
TF_PIN=$(pin tensorflow); TFK_PIN=$(pin tf-keras); HVD_PIN=$(pin horovod); CMAKE_PIN=$(pin cmake)
ST_PIN=$(pin setuptools)   # below 81: TensorBoard 2.18 imports pkg_resources
HVD_GPU_ENV=()
if [ "$GPU" = 1 ]; then
  TF_PIN="tensorflow[and-cuda]==${TF_PIN#tensorflow==}"     # the same TensorFlow plus its CUDA/cuDNN/NCCL wheels
  HVD_GPU_ENV=(HOROVOD_GPU_OPERATIONS=NCCL)
fi

say "pip, wheel, $ST_PIN, $CMAKE_PIN"
"${PIP[@]}" install --upgrade pip wheel "$ST_PIN" "$CMAKE_PIN"
say "$TF_PIN $TFK_PIN (first: Horovod compiles against it)"
"${PIP[@]}" install "$TF_PIN" "$TFK_PIN"

# --- Horovod, compiled against this TensorFlow with Gloo; the wheel is cached per TensorFlow version -----
hvd_ok() { "$VPY" - <<'PY' 2>/dev/null
import os; os.environ["TF_USE_LEGACY_KERAS"] = "1"
import horovod.tensorflow as hvd
raise SystemExit(0 if hvd.gloo_built() else 1)
PY
}
TF_VER=$("$VPY" -c 'import importlib.metadata as m; print(m.version("tensorflow"))')
PY_TAG=$("$VPY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
HVD_VER=${HVD_PIN#horovod==}
CACHE=${NMTKIT_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nmtkit/wheels}/horovod-$HVD_VER-tf-$TF_VER-$PY_TAG$([ "$GPU" = 1 ] && echo -nccl || true)
if [ "$GPU" = 1 ] && [ -z "${HOROVOD_NCCL_HOME:-}" ]; then
  # tensorflow[and-cuda] brings NCCL as a wheel; point Horovod's build at it
  nccl=$("$VPY" -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__))' 2>/dev/null || true)
  [ -n "$nccl" ] && HVD_GPU_ENV+=(HOROVOD_NCCL_HOME="$nccl")
fi
if hvd_ok && [ -f "$VENV/.horovod-tf" ] && [ "$(cat "$VENV/.horovod-tf")" = "$TF_VER-gpu$GPU" ]; then
  say "Horovod $HVD_VER already built against TensorFlow $TF_VER"
else
  if ! ls "$CACHE"/horovod-*.whl >/dev/null 2>&1; then
    say "compiling $HVD_PIN against TensorFlow $TF_VER with Gloo${HVD_GPU_ENV:+ and NCCL} (2-4 minutes on 2 cores)"
    mkdir -p "$CACHE.tmp"
    # CMAKE_POLICY_VERSION_MINIMUM: Horovod's bundled gloo predates CMake 4 (harmless with CMake 3).
    env "${HVD_GPU_ENV[@]}" HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
    HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=${MAKEFLAGS:--j2} CMAKE_POLICY_VERSION_MINIMUM=3.5 \
    PATH="$HERE/$VENV/bin:$PATH" \
      "${PIP[@]}" wheel --no-build-isolation --no-deps --no-cache-dir -w "$CACHE.tmp" "$HVD_PIN" ||
      die "the Horovod build failed (see above). Needs a C++ compiler (g++), python3.11-dev headers and
  cmake (installed into $VENV by this script). Nothing was left half-installed; rerun \`make setup\`."
    rm -rf "$CACHE"; mv "$CACHE.tmp" "$CACHE"   # the cache holds only complete wheels
  else
    say "Horovod wheel for TensorFlow $TF_VER found in $CACHE"
  fi
  "${PIP[@]}" install --force-reinstall --no-deps "$CACHE"/horovod-*.whl
  echo "$TF_VER-gpu$GPU" > "$VENV/.horovod-tf"
fi

say "nmtkit and its pinned dependencies (pyproject.toml [dev])"
# The horovod extra is satisfied by the wheel installed above (--no-deps); naming it here brings in Horovod's
# own dependencies (cloudpickle, pyyaml, ...) without rebuilding it.
"${PIP[@]}" install -e ".[dev,build,horovod]"

# --- verify the build: TensorFlow and Gloo present, else a clear error ------------------------------------
"$VPY" - <<'PY' || die "Horovod is installed but not usable (see above). Force a rebuild: rm -rf $CACHE $VENV/.horovod-tf; make setup"
import nmtkit, sys
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
print("[setup] Horovod build verified: TensorFlow [X], Gloo [X]")
PY

# The 'nmtkit' Jupyter kernel sets TF_USE_LEGACY_KERAS=1 before any cell imports TensorFlow.
"$VPY" -m ipykernel install --sys-prefix --name nmtkit --display-name "Python 3 (nmtkit)" \
  --env TF_USE_LEGACY_KERAS 1 >/dev/null
say "Jupyter kernel 'nmtkit' installed in $VENV"
# Trust the shipped notebooks (a signature per content, in the user's Jupyter data dir): untrusted, JupyterLab shows
# their saved widgets as text (`HTML(value=...)`). `make lab` trusts them again after they change.
"$VENV/bin/jupyter" trust notebooks/[0-9][0-9]_*.ipynb >/dev/null ||
  say "could not trust the notebooks; \`make lab\` tries again"

echo "$want" > "$STAMP"
say "done"
