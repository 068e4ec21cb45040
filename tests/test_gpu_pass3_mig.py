"""Issue 69, item 7: MIG slices. NVML gives a GPU in MIG mode the whole card's memory, so the kit planned 1 x 256
on a 10 GB slice; doctor did not name MIG mode. With a faked NVML: an A100 40GB cut in a 2g.10gb and a 3g.20gb."""
import sys
import types

import pytest

from nmtkit import doctor, gpus
from nmtkit.config import profile
from nmtkit.model.memory import GIB, fit

SLICES = {"MIG-aaaa": ("2g.10gb", 9.75), "MIG-bbbb": ("3g.20gb", 19.5)}


def fake_nvml() -> types.ModuleType:
    m = types.ModuleType("pynvml")
    m.NVML_DEVICE_MIG_ENABLE = 1
    m.nvmlInit = m.nvmlShutdown = lambda: None
    m.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    m.nvmlDeviceGetCount = lambda: 1
    m.nvmlDeviceGetHandleByIndex = lambda i: "gpu0"
    name = "NVIDIA A100-SXM4-40GB"
    m.nvmlDeviceGetName = lambda h: name if h == "gpu0" else f"{name} MIG {SLICES[h][0]}"
    m.nvmlDeviceGetUUID = lambda h: "GPU-0000" if h == "gpu0" else h
    gib = {"gpu0": 40.0, **{k: v[1] for k, v in SLICES.items()}}
    m.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=gib[h] * 2**30, used=0, free=gib[h] * 2**30)
    m.nvmlDeviceGetCudaComputeCapability = lambda h: (8, 0)
    m.nvmlDeviceGetMigMode = lambda h: (1, 1)
    m.nvmlDeviceGetMaxMigDeviceCount = lambda h: 7

    def by_index(h, i):
        if i >= len(SLICES):
            raise RuntimeError("NVMLError_NotFound")  # the empty slots of the seven
        return list(SLICES)[i]
    m.nvmlDeviceGetMigDeviceHandleByIndex = by_index
    return m


@pytest.fixture
def mig(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_the_batch_is_planned_for_the_slice_not_the_whole_gpu(mig, monkeypatch):
    assert gpus.gpu_memory() == 9.8 * 2**30  # the smallest slice, not the card's 40
    cfg = profile("wmt16-base")
    plan = fit(cfg, cfg.data.vocab_size, gpus.gpu_memory(), "mixed_float16")
    assert plan.count > 1 and plan.projection.total <= 9.8 * GIB  # not 1 x 256 (the whole card's plan) on a 10 GB slice
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "MIG-bbbb")  # the slice this process was given
    [given] = gpus.nvml_gpus()[0]
    assert given["name"].endswith("MIG 3g.20gb") and given["memory_gb"] == 19.5


def test_doctor_names_mig_mode(mig):
    found, _ = gpus.nvml_gpus()
    f = doctor.Facts(python=(3, 11, 7), tensorflow=doctor.TENSORFLOW_VERSION, keras_flavour="tf_keras",
                     tf_keras="2.18.0", horovod=doctor.HOROVOD_VERSION, horovod_tf_built=True, horovod_gloo=True,
                     horovod_nccl=True, horovod_cuda=True, disk_free_gb=50.0, nvml_gpus=found,
                     tf_gpus=["/physical_device:GPU:0"])  # CUDA shows a process one slice
    rows = {r.name: r for r in doctor.judge(f)}
    assert "MIG mode" in rows, list(rows)
    assert "2g.10gb" in rows["MIG mode"].value and "9.8 GB" in rows["MIG mode"].value
    assert all(r.ok for r in rows.values()), [r for r in rows.values() if not r.ok]
    assert "on 10 GiB" in rows["homework step (projected)"].value
