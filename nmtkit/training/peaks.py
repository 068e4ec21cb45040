"""Peak FLOP/s by device and precision, the denominator of MFU.

GPUs: the vendor's dense figures (no sparsity), matched on the whole model name (L4 is not L40, H100 PCIe is not
H100 SXM). Under float32 TensorFlow runs matmuls on TF32 tensor cores on Ampere and newer (its default,
`tf.config.experimental.enable_tensor_float_32_execution`), so float32 counts the TF32 peak there. CPUs and GPUs
missing from the table: a matmul in the run's compute dtype, timed on this machine once and cached per machine.
"""
from __future__ import annotations

import json
import os
import platform
import re
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from nmtkit.files import atomic_write_text

# compute dtype of each train.precision (what the matmuls run in)
COMPUTE_DTYPE = {"float32": "float32", "mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}


@dataclass(frozen=True)
class GpuPeak:
    """Dense TFLOP/s of one GPU model; 0 where the hardware has no such unit (TF32 before Ampere, bf16 before
    Ampere: TensorFlow then runs the op in plain float32 or emulates it)."""
    name: str
    fp32: float
    tf32: float
    fp16: float
    bf16: float


# Most specific first: the first pattern that matches the normalised device name wins.
GPU_PEAKS: tuple[tuple[str, GpuPeak], ...] = tuple((p, GpuPeak(*v)) for p, v in (
    (r"\bGH200\b", ("GH200", 67, 494.5, 989.5, 989.5)),
    (r"\bH200\b.*\bNVL\b", ("H200 NVL", 60, 417.5, 835.5, 835.5)),
    (r"\bH200\b", ("H200 SXM", 67, 494.5, 989.5, 989.5)),
    (r"\bH100\b.*\bNVL\b", ("H100 NVL", 60, 417.5, 835.5, 835.5)),
    (r"\bH100\b.*\bPCIE\b", ("H100 PCIe", 51, 378, 756.5, 756.5)),
    (r"\bH100\b", ("H100 SXM", 67, 494.5, 989.5, 989.5)),
    (r"\bB200\b", ("B200", 80, 1100, 2250, 2250)),
    (r"\bA100\b", ("A100", 19.5, 156, 312, 312)),
    (r"\bV100S\b", ("V100S PCIe", 16.4, 0, 130, 0)),
    (r"\bV100\b.*\bPCIE\b", ("V100 PCIe", 14, 0, 112, 0)),
    (r"\bV100\b", ("V100 SXM2", 15.7, 0, 125, 0)),
    (r"\bL40S\b", ("L40S", 91.6, 183, 362, 362)),
    (r"\bL40\b", ("L40", 90.5, 90.5, 181, 181)),
    (r"\bL4\b", ("L4", 30.3, 60, 121, 121)),
    (r"\bA10G\b", ("A10G", 31.2, 35, 70, 70)),
    (r"\bA10\b", ("A10", 31.2, 62.5, 125, 125)),
    (r"\bA40\b", ("A40", 37.4, 74.8, 149.7, 149.7)),
    (r"\bT4\b", ("T4", 8.1, 0, 65, 0)),
    (r"\bRTX 4090\b", ("RTX 4090", 82.6, 82.6, 165.2, 165.2)),
    (r"\bRTX 3090\b", ("RTX 3090", 35.6, 35.6, 71, 71)),
))


def match_gpu(device_name: str) -> GpuPeak | None:
    """The table row of a device name as TensorFlow or NVML report it ('NVIDIA H100 PCIe', 'Tesla V100-SXM2-16GB',
    'NVIDIA A100-SXM4-80GB'), or None."""
    name = re.sub(r"[-_]", " ", device_name.upper())
    return next((peak for pattern, peak in GPU_PEAKS if re.search(pattern, name)), None)


def gpu_peak(device_name: str, precision: str, tf32: bool = True) -> tuple[float, str] | None:
    """(FLOP/s, source) from the table for `precision` (a train.precision other than auto), or None when the
    device is not in the table. `tf32`: whether TensorFlow runs float32 matmuls on TF32 tensor cores."""
    row = match_gpu(device_name)
    if row is None:
        return None
    if precision == "float32":
        if tf32 and row.tf32:
            return row.tf32 * 1e12, f"{row.name} TF32 tensor cores (float32 runs on them), spec sheet"
        return row.fp32 * 1e12, f"{row.name} fp32, spec sheet"
    unit = {"mixed_float16": "fp16", "mixed_bfloat16": "bf16"}[precision]
    tflops = getattr(row, unit)
    if not tflops:  # no bf16 units (V100, T4): TensorFlow runs these ops at fp32 speed at best
        return row.fp32 * 1e12, f"{row.name} has no {unit} tensor cores: fp32 peak, spec sheet"
    return tflops * 1e12, f"{row.name} {unit} tensor cores, spec sheet"


def cpu_key(precision: str, threads: int) -> str:
    """What a measured CPU peak depends on: the machine, its CPU model, the threads TensorFlow uses, the dtype."""
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{socket.gethostname()}|{model}|threads={threads}|{COMPUTE_DTYPE[precision]}"


def cache_path() -> Path:
    return Path(os.environ.get("NMTKIT_PEAK_CACHE")
                or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nmtkit" / "peaks.json")


def timed_matmul(tf, dtype: str, n: int | None = None, reps: int = 3, trials: int = 4, parts: int = 1) -> float:
    """Best FLOP/s of an n x n matmul in `dtype` (a tf.function), best of a few trials: the machine may be busy.
    Without n: the largest of 512/1024/2048 whose matmul stays under ~0.1 s (fp16 is emulated, slow, on CPUs).
    `parts` matmuls side by side, as a step of that many towers runs (nmtkit.training.dist.towers): with one thread
    an op, one matmul would time one core of the cores the step uses."""
    mm = tf.function(lambda ab: tf.add_n([tf.reduce_sum(tf.cast(tf.matmul(a, b), tf.float32)) for a, b in ab]))

    def operands(k):
        return [(tf.cast(tf.random.normal([k, k]), dtype), tf.cast(tf.random.normal([k, k]), dtype))
                for _ in range(parts)]

    if n is None:
        for n in (512, 1024, 2048):
            ab = operands(n)
            mm(ab).numpy()  # trace and warm up
            t0 = time.perf_counter()
            mm(ab).numpy()
            if time.perf_counter() - t0 > 0.012:  # the next size takes 8x as long
                break
    else:
        ab = operands(n)
        mm(ab).numpy()
    best = 0.0
    for _ in range(trials):
        t0 = time.perf_counter()
        for _ in range(reps):
            mm(ab).numpy()
        best = max(best, parts * reps * 2 * n ** 3 / (time.perf_counter() - t0))
    return best


MEASUREMENTS = 3  # a shared machine can be busy during one: the peak is the best of the first few, then fixed


def _load() -> float | None:
    """The machine's 1-minute load average per core when a peak is timed, recorded beside it (None: unknown)."""
    try:
        return round(os.getloadavg()[0] / (os.cpu_count() or 1), 2)
    except OSError:
        return None


def _cached(path: Path, key: str) -> tuple[dict, dict]:
    try:
        cache = json.loads(path.read_text())
    except (OSError, ValueError):
        cache = {}
    return cache, (cache.get(key) if isinstance(cache.get(key), dict) else {})


def _store(path: Path, cache: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(cache, indent=1, sort_keys=True))
    except OSError:  # a read-only home: the figure is still right for this run
        pass


def measured_peak(tf, precision: str, threads: int, path: Path | None = None, parts: int = 1) -> tuple[float, str]:
    """This machine's matmul peak in the precision's compute dtype: the best of the first MEASUREMENTS runs'
    timings (cached per machine, each with the load it was timed at), then read from the cache, so every later run
    divides by the same figure; a timing that load lowered is raised again by `retimed` when a run's MFU would pass
    100%. `rm ~/.cache/nmtkit/peaks.json` measures again."""
    path = path or cache_path()
    key = cpu_key(precision, threads)
    cache, hit = _cached(path, key)
    best, runs = float(hit.get("flops", 0.0)), int(hit.get("runs", 0))
    what = f"{COMPUTE_DTYPE[precision]} matmul, best of {max(runs, 1)} timing(s) on this machine"
    if best > 0 and runs >= MEASUREMENTS:
        return best, f"{what} (since {hit.get('when', '?')})"
    now, load = timed_matmul(tf, COMPUTE_DTYPE[precision], parts=parts), _load()
    cache[key] = {**hit, "flops": max(best, now), "runs": runs + 1,
                  "when": hit.get("when") or time.strftime("%Y-%m-%d"),
                  "timings": [*hit.get("timings", []), {"flops": now, "load_per_core": load}]}
    _store(path, cache)
    return max(best, now), f"{COMPUTE_DTYPE[precision]} matmul, best of {runs + 1} timing(s) on this machine"


def retimed(tf, precision: str, threads: int, achieved: float, path: Path | None = None,
            parts: int = 1) -> tuple[float, str]:
    """The peak again when a run achieved `achieved` FLOP/s per device, more than the cached peak (so its MFU would
    pass 100%: the cached timing was lowered by load): a fresh timing, and at least the achieved rate itself (what
    ran is possible), stored with the load it was timed at."""
    path = path or cache_path()
    key = cpu_key(precision, threads)
    cache, hit = _cached(path, key)
    now, load = timed_matmul(tf, COMPUTE_DTYPE[precision], parts=parts), _load()
    best = max(float(hit.get("flops", 0.0)), now, achieved)
    cache[key] = {**hit, "flops": best, "runs": max(int(hit.get("runs", 0)), MEASUREMENTS),
                  "when": hit.get("when") or time.strftime("%Y-%m-%d"),
                  "timings": [*hit.get("timings", []), {"flops": now, "load_per_core": load,
                                                         "retimed_at_achieved": achieved}]}
    _store(path, cache)
    why = "a run's achieved rate" if achieved >= now else "a fresh timing"
    return best, (f"{COMPUTE_DTYPE[precision]} matmul, re-timed when a run's MFU would pass 100% (raised to {why}; "
                  f"load {load} per core)")
