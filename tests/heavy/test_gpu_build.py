"""Horovod 0.28.1's GPU code (HOROVOD_GPU_OPERATIONS=NCCL) compiled against the installed TensorFlow 2.18.1 with the
nvcc at /usr/local/cuda (CUDA 13 on the CI machines: compute capabilities 80 and 90) and the nvidia-nccl-cu12 wheel,
by scripts/gpu-build-check.sh. A proof that the code under `#if HAVE_GPU` compiles against TensorFlow 2.18.1's
headers; not the shipped configuration (CUDA 12.5, 70/80/90). About 10 minutes on 2 cores."""
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
