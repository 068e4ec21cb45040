"""A step's memory, projected before anything runs (nmtkit.model.memory): the micro-batches that make the homework's
batch fit a 16 GB GPU (NVML faked), a refusal naming both figures, the first log line; and the projection against
memory measured on this CPU at a small shape (bench/memory.py does the base shape)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nmtkit import config
from nmtkit.errors import ConfigError
from nmtkit.model.memory import GIB, fit, params_of, project

pytestmark = pytest.mark.long  # the long tier (tests/conftest.py): make test leaves it out

ROOT = Path(__file__).resolve().parents[1]

FAKE_NVML = """
class _Memory:
    total = {gib} * 2**30
    used = 0
def nvmlInit(): pass
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return "550.54.15"
def nvmlDeviceGetCount(): return 1
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetName(h): return "{name}"
def nvmlDeviceGetMemoryInfo(h): return _Memory()
"""


def nmtkit_with_gpu(tmp_path, *args, gib=16, name="Tesla V100-SXM2-16GB"):
    fake = tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    (fake / "pynvml.py").write_text(FAKE_NVML.format(gib=gib, name=name))
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", PYTHONPATH=os.pathsep.join([str(fake), str(ROOT)]))
    return subprocess.run([sys.executable, "-m", "nmtkit.cli", "train", "--profile", "wmt16-base", "--dry-run", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_the_homeworks_batch_is_split_to_fit_a_16_gb_gpu(tmp_path):
    p = nmtkit_with_gpu(tmp_path)
    assert p.returncode == 0, p.stderr
    assert "mixed_float16" in p.stdout and "16.0 GiB" in p.stdout
    assert "2 micro-batch(es) of 128 sentences a step" in p.stdout, p.stdout  # the same 256 sentences a step
    assert list(tmp_path.iterdir()) == [tmp_path / "fake"]  # nothing written, no data needed
    big = nmtkit_with_gpu(tmp_path, gib=80, name="NVIDIA H100 80GB HBM3")
    assert "1 micro-batch(es) of 256 sentences" in big.stdout


def test_a_grad_accum_that_cannot_fit_is_refused_naming_both_figures(tmp_path):
    p = nmtkit_with_gpu(tmp_path, "--set", "train.grad_accum=1")
    err = p.stderr.strip().splitlines()
    assert p.returncode != 0 and len(err) == 1, p.stderr
    assert "train.grad_accum=1" in err[0] and "GiB a step" in err[0] and "16.0 GiB" in err[0]


def test_the_parameter_count_is_the_models():
    from nmtkit.model.transformer import build, count_params
    cfg = config.profile("tiny")
    assert params_of(cfg.model, 300) == count_params(build(cfg.model, 300)) + 300  # + the output bias
    cfg = config.profile("wmt16-base")
    assert abs(params_of(cfg.model, 32768) / 60_880_896 - 1) < 0.001


def test_auto_picks_the_fewest_micro_batches_that_fit_and_a_set_value_is_kept():
    cfg = config.profile("wmt16-base")
    whole = project(cfg, 32768, 256, precision="mixed_float16").total
    assert fit(cfg, 32768, whole / 0.9 + 1, "mixed_float16").count == 1
    assert fit(cfg, 32768, whole / 0.9 / 1.5, "mixed_float16").count >= 2
    two = cfg.with_overrides({"train.grad_accum": 2})
    assert fit(two, 32768, 80 * GIB, "mixed_float16").count == 2
    with pytest.raises(ConfigError, match="train.grad_accum=2"):
        fit(two, 32768, 4 * GIB, "mixed_float16")


def _step(batch: int, accum: int = 1) -> dict:
    # without oneDNN, as bench/memory.py measures: its CPU-only copies were 1.26x the projection on an AMX host
    # (1.86x under load) and 1.0x on one without; a GPU has no such copies
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0",
               PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "memory.py"), "--worker-step", "small", str(batch),
                        str(accum)], env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.split("RESULT ", 1)[1])


def _peak(batch: int) -> float:
    return _step(batch)["peak_rss"]


def test_micro_batches_run_one_after_the_other():
    # the projection counts one micro-batch's activations at a time: 2 x 32 must not hold what 1 x 64 holds
    # (side by side they did: the executor runs independent branches at once)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as pool:  # a process each: their peaks are their own
        one, two = pool.map(lambda a: _step(48, a)["increment"], [1, 2])  # 0.48 quiet (64: 0.5x, 3x the time)
    assert two <= 0.6 * one, (two / 2**20, one / 2**20)


def test_the_projection_meets_the_memory_measured_on_this_cpu_at_a_small_shape():
    batches = [6, 18, 30]  # each the second step's peak (bench/memory.py resets VmHWM after the traced first)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(len(batches)) as pool:  # a process each: their peaks are their own, whatever runs beside
        peaks = list(pool.map(_peak, batches))
    slope = np.polyfit(batches, peaks, 1)[0]
    cfg = config.load("wmt16-base", {"model.d_model": 256, "model.encoder_layers": 3, "model.decoder_layers": 3,
                                     "model.num_heads": 4, "model.d_ff": 1024})
    projected = project(cfg, cfg.data.vocab_size, precision="float32").per_sentence
    # Above: within 25%, the side that matters (a projection under the real need runs a GPU out of memory). Below:
    # wider, as the measurement moves with the host's load: the executor overlaps fewer ops when other processes hold
    # the cores, so the peak falls (1.02x the projection quiet; 0.60x and 0.68x inside make test on 2 cores), and a
    # projection that errs high costs speed only (bench/README.md).
    assert 0.5 <= slope / projected <= 1.25, (slope / 2**20, projected / 2**20)


def test_preflight_names_the_process_holding_a_gpu_before_the_job_starts(monkeypatch):
    import types

    from nmtkit.cluster.preflight import held_gpu_memory, preflight_problems
    from nmtkit.gpus import gpu_holders

    def proc(pid, gib):
        return types.SimpleNamespace(pid=pid, usedGpuMemory=int(gib * 2**30))
    held = {0: [proc(4242, 14.2), proc(999, 0.3)], 1: []}  # GPU 0: notebook 02's idle kernel; 999: this engine
    fake = types.SimpleNamespace(
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=16 * 2**30, used=14.5 * 2**30 if h == 0 else 0),
        nvmlDeviceGetComputeRunningProcesses=lambda h: held[h])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    gpus = gpu_holders(engine_pids=[999])
    assert [p["pid"] for p in gpus[0]["held_by"]] == [4242] and gpus[1]["held_by"] == []
    [line] = held_gpu_memory(gpus)
    assert line.startswith("GPU 0: 14.2 of 16.0 GiB held by pid 4242") and "notebook 02" in line
    facts = {"rank": 0, "node": "vm1", "host": "vm1", "data_ok": True, "horovod": "0.28.1", "nccl_built": True,
             "horovod_build": "gloo,nccl", "gpus": 2, "gpu_memory": gpus}
    assert any("held by pid 4242" in p for p in preflight_problems([facts]))
    held[0] = [proc(4242, 1.0)]  # a little: not a problem
    assert held_gpu_memory(gpu_holders(engine_pids=[999])) == []
