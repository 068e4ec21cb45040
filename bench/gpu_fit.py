"""The first GPU run refits the memory projection (nmtkit.model.memory): from each case of bench/gpu.py, the memory
TensorFlow gave the device ("Created device ... with N MB memory" in its log) and the step's measured peak, the
activation constant (KEEP) that peak implies beside the shipped one, and the one command that adopts it.

The shipped KEEP was fitted on CPU peak resident memory in float32; two references (PyTorch on an H100, a
first-principles count, docs/instructors.md) say the projection errs high on a GPU, by a factor only a GPU can
measure."""
from __future__ import annotations

import re

from nmtkit.model import memory

DEVICE_LINE = re.compile(r"Created device (\S+) with (\d+) MB memory")
MEMORY_FILE = "nmtkit/model/memory.py"


def device_limits(log: str) -> dict:
    """{device: MB} from TensorFlow's 'Created device /job:.../device:GPU:0 with 14785 MB memory' lines."""
    return {m.group(1): int(m.group(2)) for m in DEVICE_LINE.finditer(log)}


def implied_keep(cfg, vocab: int, batch: int, length: int, precision: str, peak_bytes: float) -> float:
    """The KEEP at which the projection of one micro-batch of `batch` sentences equals `peak_bytes`: the part of
    the peak left after the weights, Adam and the loss, over the activations the paper counts."""
    p = memory.project(cfg, vocab, batch, length, precision)
    paper = p.activations / memory.KEEP
    return (peak_bytes - p.states - p.loss) / paper


def adopt_command(keep: float) -> str:
    """The one command that makes `keep` the shipped constant (run from the checkout's root; commit the change with
    the gpu-report.json it came from)."""
    return f"sed -i 's/^KEEP = [0-9.]*/KEEP = {keep:.2f}/' {MEMORY_FILE}"


def refit(cfg, vocab: int, length: int, result: dict, log: str) -> dict:
    """For one case's RESULT record and its log: the device's memory limit, the measured and projected peaks (GiB),
    the implied KEEP beside the shipped one and the command that adopts it; {} without a measured peak."""
    if result.get("gpu_mem_gb") is None:
        return {}
    peak = result["gpu_mem_gb"] * memory.GIB
    keep = implied_keep(cfg, vocab, result["micro_batch"], length, result["precision"], peak)
    limits = device_limits(log)
    return {"device_limit_mb": next(iter(limits.values()), None), "measured_gib": round(result["gpu_mem_gb"], 2),
            "projected_gib": round(result["projected_gb"], 2), "keep_shipped": memory.KEEP,
            "keep_implied": round(keep, 2), "adopt": adopt_command(keep)}


def refit_line(fit: dict) -> str:
    limit = f"TensorFlow's device limit {fit['device_limit_mb']:,} MB; " if fit.get("device_limit_mb") else ""
    return (f"  memory: {limit}peak {fit['measured_gib']:.2f} GiB measured, {fit['projected_gib']:.2f} projected: "
            f"KEEP {fit['keep_implied']:.2f} implied (shipped {fit['keep_shipped']}); adopt: {fit['adopt']}")
