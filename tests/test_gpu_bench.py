"""bench/gpu.py, what course staff run first on a GPU VM, run here on a CPU: a passing case exits 0 and leaves
gpu-report.md/.json; a failing case exits non-zero and the report says which and why."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bench(out: Path, *extra: str):
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py"), "--allow-cpu", "--shape", "tiny",
                           "--steps", "2", "--warmup", "1", "--batch", "4", "--cases", "one process", "--out", str(out),
                           *extra], env=env, capture_output=True, text=True, timeout=300)


def test_a_passing_case_exits_0_and_leaves_the_report(tmp_path):
    p = bench(tmp_path)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    data = json.loads((tmp_path / "gpu-report.json").read_text())
    assert data["ok"] and [c["name"] for c in data["cases"]] == ["one process"]
    r = data["cases"][0]["results"][0]
    assert r["ms_per_step"] > 0 and r["projected_gb"] > 0 and r["micro_batches"] == 1
    assert {"tensorflow", "cuda", "cudnn", "horovod", "gpus"} <= set(data["facts"]) and data["doctor"]
    md = (tmp_path / "gpu-report.md").read_text()
    assert "all cases passed" in md and "| one process | ok |" in md


def test_a_failing_case_exits_non_zero_and_the_report_says_so(tmp_path):
    p = bench(tmp_path, "--fail", "one process")
    assert p.returncode == 1
    assert "one process: FAILED" in p.stdout and "forced failure" in p.stdout
    data = json.loads((tmp_path / "gpu-report.json").read_text())
    assert not data["ok"] and "forced failure" in data["cases"][0]["error"]
    assert "FAILED" in (tmp_path / "gpu-report.md").read_text()


FAKE_NVML = '''
import types
nvmlInit = nvmlShutdown = lambda: None
nvmlSystemGetDriverVersion = lambda: "550.54.15"
nvmlDeviceGetCount = lambda: 1
nvmlDeviceGetHandleByIndex = lambda i: i
nvmlDeviceGetName = lambda h: "NVIDIA H100 80GB HBM3"
nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=80 * 2**30, used=0, free=80 * 2**30)
nvmlDeviceGetCudaComputeCapability = lambda h: (9, 0)
nvmlDeviceGetComputeRunningProcesses = lambda h: []
'''


def test_gpu_check_fails_when_nvml_sees_gpus_tensorflow_does_not(tmp_path):
    # the broken-CUDA first run: NVML (faked) lists an H100, TensorFlow on this CPU machine lists no GPU
    (tmp_path / "pynvml.py").write_text(FAKE_NVML)
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2",
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(ROOT)]))
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu.py"), "--out", str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode != 0, p.stdout[-2000:]
    assert "NVML sees 1 GPU(s)" in p.stdout and "TensorFlow lists none" in p.stdout
    assert "driver 550.54.15" in p.stdout and "CUDA 12.5" in p.stdout  # the likely cause, named


def test_the_likely_cause_is_named():
    from nmtkit.gpus import tensorflow_blind
    gpu = [{"name": "NVIDIA A10", "driver": "560.35.03"}]
    assert "CUDA_VISIBLE_DEVICES=''" in tensorflow_blind(gpu, True, "")
    assert "tensorflow[and-cuda]==2.18.1" in tensorflow_blind(gpu, False, None)
    assert "too old" not in tensorflow_blind(gpu, True, None) and "nvidia-smi" in tensorflow_blind(gpu, True, None)


def test_the_first_gpu_run_refits_the_memory_constant(tmp_path):
    # a recorded TensorFlow log line and a fake peak: the implied KEEP, and the one command that adopts it
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_fit

    from nmtkit import config
    from nmtkit.model import memory
    log = ("2026-11-30 10:01:02.345678: I tensorflow/core/common_runtime/gpu/gpu_device.cc:2021] Created device "
           "/job:localhost/replica:0/task:0/device:GPU:0 with 78643 MB memory:  -> device: 0, name: NVIDIA H100 "
           "80GB HBM3, pci bus id: 0000:00:05.0, compute capability: 9.0\n")
    cfg = config.profile("wmt16-base")
    vocab, length = cfg.data.vocab_size, cfg.data.max_tokens + 1
    peaks = {b: memory.project(cfg, vocab, b, length, "mixed_float16") for b in (128, 256)}
    half = {b: p.states + p.loss + p.activations / 2 for b, p in peaks.items()}  # a GPU keeping half the activations
    result = {"gpu_mem_gb": half[256] / memory.GIB, "projected_gb": peaks[256].total / memory.GIB, "micro_batch": 256,
              "gpu_mem_gb_half": half[128] / memory.GIB, "micro_batch_half": 128, "precision": "mixed_float16",
              "dropout": cfg.model.dropout}
    fit = gpu_fit.refit(cfg, vocab, length, result, log)
    assert fit["device_limit_mb"] == 78643 and fit["keep_shipped"] == memory.KEEP
    assert abs(fit["keep_implied"] - memory.KEEP / 2) < 0.01
    assert "implied" in gpu_fit.refit_line(fit) and "78,643 MB" in gpu_fit.refit_line(fit)
    # the command adopts it: run on a copy of the checkout's memory.py
    (tmp_path / "nmtkit" / "model").mkdir(parents=True)
    (tmp_path / gpu_fit.MEMORY_FILE).write_text((ROOT / gpu_fit.MEMORY_FILE).read_text())
    subprocess.run(fit["adopt"], shell=True, cwd=tmp_path, check=True)
    assert f"\nKEEP = {memory.KEEP / 2:.2f} " in (tmp_path / gpu_fit.MEMORY_FILE).read_text()
