"""Horovod 0.28.1's GPU code (HOROVOD_GPU_OPERATIONS=NCCL) compiled against the installed TensorFlow 2.18.1 with the
nvcc at /usr/local/cuda (CUDA 13 on the CI machines: compute capabilities 80 and 90) and the nvidia-nccl-cu12 wheel,
by scripts/gpu-build-check.sh. A proof that the code under `#if HAVE_GPU` compiles against TensorFlow 2.18.1's
headers, with the NCCL TensorFlow 2.18.1 pins (nvidia-nccl-cu12==2.21.5), and that the built wheel's library loads:
`import horovod.tensorflow` from it (installed into a scratch --target, imported by the venv's Python with nothing
else added: no LD_LIBRARY_PATH) and `ldd -r` with no undefined tensorflow:: symbol. Not proven here (no GPU): that
NCCL's and CUDA's kernels run; the import does not need the driver (CUDA's runtime is static and opens libcuda.so.1
at its first call). Not the shipped configuration (CUDA 12.5, 70/80/90). About 10 minutes on 2 cores."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CUDA = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))


@pytest.mark.skipif(not (CUDA / "bin" / "nvcc").is_file(),
                    reason=f"no nvcc at {CUDA}/bin/nvcc: install NVIDIA's keyring (cuda-keyring .deb from "
                           "developer.download.nvidia.com), then `sudo apt-get install cuda-nvcc-12-5 "
                           "cuda-cudart-dev-12-5`, or set CUDA_HOME")
def test_horovod_gpu_code_compiles_against_tensorflow(tmp_path):
    out = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-build-check.sh"), str(tmp_path)], cwd=ROOT,
                         env=dict(os.environ, PY=sys.executable), capture_output=True, text=True, timeout=3600)
    log = (tmp_path / "build.log").read_text()
    assert out.returncode == 0, out.stdout + out.stderr + log[-3000:]
    assert re.search(r"\[gpu-build\] nvcc: Cuda compilation tools, release \d+\.\d+", log)  # nvcc's version, in the log
    archs = re.search(r"\[gpu-build\] cuobjdump --list-elf: (.*)", log).group(1).split()
    assert {"sm_80", "sm_90"} <= set(archs), archs
    assert "libnccl.so.2" in re.search(r"\[gpu-build\] links: (.*)", log).group(1)
    lib = next((tmp_path / "unpacked").rglob("mpi_lib*.so"))
    dynamic = subprocess.run(["readelf", "-d", str(lib)], capture_output=True, text=True).stdout
    assert "[libnccl.so.2]" in dynamic
    # the NCCL TensorFlow pins, checked against TensorFlow's own metadata, and the wheel built with it
    assert "TensorFlow pins: nvidia-nccl-cu12==2.21.5 (this check: nvidia-nccl-cu12==2.21.5)" in log
    assert re.search(r"NCCL: nvidia_nccl_cu12-2\.21\.5-", log)
    # import horovod.tensorflow from the built wheel, not the venv's own (CPU) Horovod: its library and NCCL loaded
    imported = re.search(r"\[gpu-build\] import horovod.tensorflow: (.*)", log).group(1)
    site = tmp_path / "site"
    assert imported.startswith(f"from {site}/horovod/tensorflow/__init__.py; nccl_built 2.21.5, cuda_built True, "
                               "allreduce 3.0; loaded "), imported
    loaded = imported.split("; loaded ")[1].split()
    assert any(p.startswith(str(site)) and "mpi_lib" in p for p in loaded) and any("libnccl.so.2" in p for p in loaded)
    # ldd -r: every tensorflow:: symbol the library needs is defined (and the count can fail: without TensorFlow's
    # libraries it finds them undefined)
    said = re.search(r"ldd -r: (\d+) undefined tensorflow:: symbols .*\((\d+) without", log)
    undefined, without = int(said[1]), int(said[2])
    assert undefined == 0 and without > 0
    installed = next(site.rglob("mpi_lib*.so"))
    tflib = Path(subprocess.run([sys.executable, "-c", "import importlib.util, os; print(os.path.dirname("
                                 "importlib.util.find_spec('tensorflow').origin))"], capture_output=True,
                                text=True).stdout.strip())
    ldd = subprocess.run(["ldd", "-r", str(installed)], capture_output=True, text=True,
                         env=dict(os.environ, LD_LIBRARY_PATH=str(tflib)))
    assert "undefined symbol" not in ldd.stdout + ldd.stderr and "not found" not in ldd.stdout, ldd.stdout[-2000:]
