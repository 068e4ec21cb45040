"""The peak table by device name and precision (exact model matching, TF32 under float32, bf16/fp16 peaks), and
the measured CPU peak per precision, cached per machine."""
from __future__ import annotations

import json

import pytest

from nmtkit.training import peaks


@pytest.mark.parametrize("name, model", [
    ("NVIDIA L4", "L4"), ("NVIDIA L40", "L40"), ("NVIDIA L40S", "L40S"),
    ("Tesla V100-PCIE-32GB", "V100 PCIe"), ("Tesla V100-SXM2-16GB", "V100 SXM2"), ("Tesla V100S-PCIE-32GB",
                                                                                   "V100S PCIe"),
    ("NVIDIA A100-SXM4-80GB", "A100"), ("NVIDIA A100-PCIE-40GB", "A100"), ("NVIDIA A10", "A10"), ("NVIDIA A10G",
                                                                                                  "A10G"),
    ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 80GB HBM3", "H100 SXM"), ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200 SXM"), ("NVIDIA H200 NVL", "H200 NVL"), ("NVIDIA GH200 480GB", "GH200"),
    ("NVIDIA B200", "B200"), ("Tesla T4", "T4"), ("NVIDIA A40", "A40"), ("NVIDIA GeForce RTX 4090", "RTX 4090"),
])
def test_device_names_match_their_own_row(name, model):
    assert peaks.match_gpu(name).name == model


def test_unknown_devices_match_nothing():
    for name in ("NVIDIA GeForce GTX 1080", "Quadro P4000", "", "NVIDIA L4000"):
        assert peaks.match_gpu(name) is None
        assert peaks.gpu_peak(name, "float32") is None


def test_float32_counts_tf32_where_tensorflow_uses_it():
    assert peaks.gpu_peak("NVIDIA A100-SXM4-40GB", "float32")[0] == 156e12
    assert peaks.gpu_peak("NVIDIA A100-SXM4-40GB", "float32", tf32=False)[0] == 19.5e12
    assert peaks.gpu_peak("NVIDIA H100 PCIe", "float32")[0] == 378e12
    assert peaks.gpu_peak("Tesla V100-SXM2-16GB", "float32")[0] == 15.7e12  # no TF32 before Ampere


def test_mixed_precision_uses_the_half_precision_peak():
    assert peaks.gpu_peak("NVIDIA H100 80GB HBM3", "mixed_float16")[0] == 989.5e12
    assert peaks.gpu_peak("NVIDIA H100 PCIe", "mixed_bfloat16")[0] == 756.5e12
    assert peaks.gpu_peak("NVIDIA L4", "mixed_float16")[0] == 121e12
    assert peaks.gpu_peak("NVIDIA L40", "mixed_float16")[0] == 181e12
    assert peaks.gpu_peak("Tesla T4", "mixed_float16")[0] == 65e12
    value, source = peaks.gpu_peak("Tesla T4", "mixed_bfloat16")  # no bf16 units
    assert value == 8.1e12 and "no bf16" in source


def test_cpu_peak_is_the_best_of_the_first_timings_then_fixed(tmp_path, monkeypatch):
    rates = {"float32": [2e11, 1e11, 3e11, 9e11], "bfloat16": [4e11] * 4}
    calls = []
    monkeypatch.setattr(peaks, "timed_matmul", lambda tf, dtype, **kw: calls.append(dtype) or rates[dtype][
        calls.count(dtype) - 1])
    path = tmp_path / "peaks.json"
    got = [peaks.measured_peak(None, "float32", 2, path)[0] for _ in range(5)]
    assert got == [2e11, 2e11, 3e11, 3e11, 3e11]  # a busy second timing does not lower it; fixed after 3
    assert calls == ["float32"] * peaks.MEASUREMENTS
    value, source = peaks.measured_peak(None, "mixed_bfloat16", 2, path)
    assert value == 4e11 and "bfloat16 matmul" in source
    assert len(json.loads(path.read_text())) == 2
    peaks.measured_peak(None, "float32", 1, path)  # another thread count: another figure
    assert calls.count("float32") == peaks.MEASUREMENTS + 1


def test_timed_matmul_on_this_cpu_is_positive():
    from nmtkit.keras2 import import_tf
    assert peaks.timed_matmul(import_tf(), "bfloat16", n=256, reps=1, trials=1) > 0
