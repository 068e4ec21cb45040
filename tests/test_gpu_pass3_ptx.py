"""Issue 69, item 2: the driver an H100/H200 needs is the one that compiles the PTX TensorFlow 2.18.1 embeds,
read off the installed libtensorflow_cc.so.2, not a guess from the CUDA release its wheels name."""
import mmap
import re
from pathlib import Path

import pytest

from nmtkit import doctor, gpus

# PTX ISA -> the CUDA release that introduced it -> the oldest driver series whose JIT compiles it (CUDA's
# release notes, table 3: "CUDA Toolkit and Corresponding Driver Versions").
ISA_DRIVER = {"7.8": 520, "8.0": 525, "8.1": 530, "8.2": 535, "8.3": 545, "8.4": 550, "8.5": 555, "8.6": 560,
              "8.7": 570, "8.8": 575}


def embedded_ptx_isas() -> set[str]:
    """The PTX ISA versions of libtensorflow_cc.so.2's PTX for compute_90 (`.version 8.3` then `.target sm_90`)."""
    import tensorflow as tf
    lib = Path(tf.__file__).parent / "libtensorflow_cc.so.2"
    if not lib.exists():
        pytest.skip(f"no {lib.name} in this TensorFlow")
    with open(lib, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as m:
        return {v.decode() for v in re.findall(rb"\.version (\d+\.\d+)\s*\n\s*\.target sm_9\d", m)}


def test_ptx_driver_is_the_one_the_embedded_ptx_needs():
    isas = embedded_ptx_isas()
    assert isas, "no PTX for compute_90 found in libtensorflow_cc.so.2"
    newest = max(isas, key=lambda v: tuple(map(int, v.split("."))))
    assert newest in ISA_DRIVER, f"PTX ISA {newest}: add it to ISA_DRIVER"
    assert gpus.PTX_DRIVER == ISA_DRIVER[newest], (
        f"TensorFlow embeds PTX ISA {newest} (driver {ISA_DRIVER[newest]}+), the kit asks for {gpus.PTX_DRIVER}")
    assert gpus.PTX_ISA == newest  # what the refusal names


def run_on(driver: str) -> dict:
    h100 = [{"name": "NVIDIA H200", "memory_gb": 139.8, "driver": driver, "capability": (9, 0)}]
    f = doctor.Facts(python=(3, 11, 7), tensorflow=doctor.TENSORFLOW_VERSION, keras_flavour="tf_keras",
                     tf_keras="2.18.0", horovod=doctor.HOROVOD_VERSION, horovod_tf_built=True, horovod_gloo=True,
                     horovod_nccl=True, horovod_cuda=True, versions={"ipyparallel": "9.0.1"}, disk_free_gb=50.0,
                     nvml_gpus=h100, tf_gpus=["/physical_device:GPU:0"])
    return {r.name: r.fix for r in doctor.judge(f) if not r.ok}


def test_h200_on_driver_550_passes_and_535_is_refused_naming_545():
    assert run_on("550.54.15") == {} and run_on("545.23.08") == {}
    [fix] = run_on("535.183.01").values()
    assert "545" in fix and "driver 535.183.01" in fix and "ISA 8.3" in fix
