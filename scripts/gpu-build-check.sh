#!/usr/bin/env bash
# Compiles Horovod 0.28.1's GPU code (HOROVOD_GPU_OPERATIONS=NCCL) against the installed TensorFlow, as a proof that
# the code under `#if HAVE_GPU` builds against its headers. NOT the shipped configuration (that is CUDA 12.5 for
# compute capabilities 70/80/90): this uses whatever nvcc is at $CUDA_HOME (CUDA 13 on the CI machines, which refuses
# compute_70, hence 80,90) and NCCL from the `nvidia-nccl-cu12` wheel at the version TensorFlow 2.18.1 pins. Builds a
# wheel into OUT, then proves the link: the wheel installed into a scratch --target (OUT/site; the project's venv is
# never changed) imports as `horovod.tensorflow` under the venv's Python with only what `make setup` installed beside
# it and no LD_LIBRARY_PATH, and `ldd -r` finds no undefined tensorflow:: symbol in its library.
# Usage: scripts/gpu-build-check.sh [OUT]   (env: PY, CUDA_HOME, CC_LIST). Exit 0 only when every check holds.
set -euo pipefail
PY=${PY:-.venv/bin/python}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CC_LIST=${CC_LIST:-80,90}
NCCL_REQ=nvidia-nccl-cu12==2.21.5  # what TensorFlow 2.18.1 requires under its and-cuda extra (checked below)
OUT=$(realpath -m "${1:-.test-logs/gpu-build}")
mkdir -p "$OUT/dl" "$OUT/wheel" "$OUT/nccl"
log="$OUT/build.log"
say() { echo "[gpu-build] $*" | tee -a "$log"; }
: >"$log"

[ -x "$CUDA_HOME/bin/nvcc" ] || { say "no nvcc at $CUDA_HOME/bin/nvcc: set CUDA_HOME"; exit 2; }
say "nvcc: $("$CUDA_HOME/bin/nvcc" --version | grep -E 'release' )"
say "TensorFlow: $("$PY" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)"

# NCCL: the wheel ships lib/libnccl.so.2 only; FindNCCL.cmake looks for `nccl` (libnccl.so), so link to it in a
# scratch dir; the built library then records the soname libnccl.so.2.
"$PY" -m pip download -q --no-deps -d "$OUT/dl" "$NCCL_REQ" horovod==0.28.1 >>"$log" 2>&1
"$PY" -m zipfile -e "$(ls "$OUT"/dl/nvidia_nccl_cu12-*.whl | head -1)" "$OUT/nccl" >>"$log" 2>&1
nccl="$OUT/nccl/nvidia/nccl"
ln -sf libnccl.so.2 "$nccl/lib/libnccl.so"
say "NCCL: $(ls "$OUT"/dl/nvidia_nccl_cu12-*.whl | head -1 | xargs basename)"

# cuobjdump does not come with every CUDA install; its PyPI wheel carries the binary.
cuobjdump=$(command -v cuobjdump || true)
[ -x "$CUDA_HOME/bin/cuobjdump" ] && cuobjdump="$CUDA_HOME/bin/cuobjdump"
if [ -z "$cuobjdump" ]; then
  "$PY" -m pip download -q --no-deps -d "$OUT/dl" nvidia-cuda-cuobjdump >>"$log" 2>&1
  "$PY" -m zipfile -e "$(ls "$OUT"/dl/nvidia_cuda_cuobjdump-*.whl | head -1)" "$OUT/cuobjdump" >>"$log" 2>&1
  cuobjdump=$(find "$OUT/cuobjdump" -type f -name cuobjdump | head -1)
  chmod +x "$cuobjdump"
fi

if [ -z "${SKIP_BUILD:-}" ] || ! ls "$OUT"/wheel/horovod-*.whl >/dev/null 2>&1; then
  rm -f "$OUT"/wheel/horovod-*.whl
  say "building (log: $log)"
  start=$(date +%s)
  PATH="$CUDA_HOME/bin:$PATH" HOROVOD_CUDA_HOME="$CUDA_HOME" HOROVOD_GPU_OPERATIONS=NCCL \
    HOROVOD_NCCL_HOME="$nccl" HOROVOD_NCCL_INCLUDE="$nccl/include" HOROVOD_NCCL_LIB="$nccl/lib" \
    HOROVOD_NCCL_LINK=SHARED HOROVOD_BUILD_CUDA_CC_LIST="$CC_LIST" \
    HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 HOROVOD_WITHOUT_PYTORCH=1 \
    HOROVOD_WITHOUT_MXNET=1 MAKEFLAGS=${MAKEFLAGS:--j2} \
    "$PY" -m pip wheel -v --no-deps --no-build-isolation --no-cache-dir -w "$OUT/wheel" "$OUT/dl/horovod-0.28.1.tar.gz" \
    >>"$log" 2>&1 || { say "BUILD FAILED after $(( $(date +%s) - start )) s; the first errors:";
                       grep -m 10 -E 'error|Error' "$log" | tee -a "$log"; exit 1; }
  say "built in $(( $(date +%s) - start )) s"
fi

whl=$(ls "$OUT"/wheel/horovod-*.whl | head -1)
rm -rf "$OUT/unpacked" && "$PY" -m zipfile -e "$whl" "$OUT/unpacked"
lib=$(find "$OUT/unpacked" -name 'mpi_lib*.so' -path '*tensorflow*' | head -1)
[ -n "$lib" ] || { say "no horovod/tensorflow/mpi_lib*.so in $whl"; exit 1; }
say "library: ${lib#"$OUT"/unpacked/}"
archs=$("$cuobjdump" --list-elf "$lib" | grep -oE 'sm_[0-9]+[a-z]?' | sort -u | tr '\n' ' ')
say "cuobjdump --list-elf: ${archs:-none}"
needed=$(readelf -d "$lib" | grep -oE 'lib(nccl|cudart)[^]]*' | sort -u | tr '\n' ' ')
say "links: $needed"
status=0
pinned=$("$PY" -c 'import importlib.metadata as m
print(*[r.split(";")[0].replace(" ", "") for r in m.requires("tensorflow") if r.startswith("nvidia-nccl-cu12")])')
say "TensorFlow pins: $pinned (this check: $NCCL_REQ)"
[ "$pinned" = "$NCCL_REQ" ] || { say "MISSING: TensorFlow's NCCL pin is not this check's"; status=1; }
for cc in ${CC_LIST//,/ }; do
  case " $archs" in *" sm_$cc "*) ;; *) say "MISSING: no sm_$cc machine code"; status=1 ;; esac
done
case " $needed" in *" libnccl.so.2 "*) ;; *) say "MISSING: the library does not link libnccl.so.2"; status=1 ;; esac

# The import: the venv's Python finds the scratch horovod first (PYTHONPATH) and TensorFlow in its own site-packages.
# libnccl.so.2 resolves through the library's RUNPATH (NCCL's lib directory, as in `make setup`'s build), TensorFlow's
# libraries are the ones `import tensorflow` loaded, CUDA's runtime is linked in statically and opens the driver
# (libcuda.so.1) only at its first call: so the import needs no GPU. Gloo's allreduce of a CPU tensor runs the library.
site="$OUT/site"; rm -rf "$site"
"$PY" -m pip install -q --no-deps --target "$site" "$whl" >>"$log" 2>&1
imported=$(env -u LD_LIBRARY_PATH PYTHONPATH="$site" TF_CPP_MIN_LOG_LEVEL=3 "$PY" - 2>>"$log" <<'EOF' || true
import tensorflow as tf
import horovod.tensorflow as hvd
hvd.init()
total = float(hvd.allreduce(tf.constant(3.0), op=hvd.Sum))
maps = open("/proc/self/maps").read().split()
loaded = sorted({p for p in maps if "mpi_lib" in p or "libnccl.so" in p})
v = hvd.nccl_built()
print(f"from {hvd.__file__}; nccl_built {v // 10000}.{v // 100 % 100}.{v % 100}, cuda_built {hvd.cuda_built()}, "
      f"allreduce {total}; loaded {' '.join(loaded)}")
EOF
)
say "import horovod.tensorflow: ${imported:-FAILED (the log has the traceback)}"
case "$imported" in "from $site/horovod/"*"nccl_built ${NCCL_REQ#*==}, cuda_built True, allreduce 3.0;"*) ;;
  *) say "MISSING: the built wheel did not import as built"; status=1 ;; esac
# ldd -r resolves every symbol; TensorFlow's two libraries, which the import found already loaded, it needs named
tflib=$("$PY" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("tensorflow").origin))')
inlib=$(find "$site" -name 'mpi_lib*.so' -path '*tensorflow*' | head -1)
undefined() { ldd -r "$inlib" 2>&1 | grep 'undefined symbol' | c++filt | grep -c 'tensorflow::' || true; }
without=$(undefined)
with=$(LD_LIBRARY_PATH="$tflib" undefined)
say "ldd -r: $with undefined tensorflow:: symbols beside $tflib ($without without TensorFlow's libraries)"
[ "$with" = 0 ] && [ "$without" -gt 0 ] || { say "MISSING: undefined tensorflow:: symbols"; status=1; }
say "$([ $status -eq 0 ] && echo 'all checks hold' || echo 'checks FAILED')"
exit $status
