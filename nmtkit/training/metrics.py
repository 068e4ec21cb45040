"""What a step costs and how it is reported: peak FLOP/s and model FLOPs (MFU), the step window that the log
line averages over, and the scalar writer (TensorBoard events + scalars.jsonl on rank 0)."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nmtkit import runs
from nmtkit.files import append_jsonl
from nmtkit.keras2 import import_tf
from nmtkit.model.flops import train_flops  # noqa: F401  the one count; re-exported for the loop
from nmtkit.training import peaks
from nmtkit.training.dist import compute_threads, towers

tf = import_tf()

_PEAK: dict = {}


def peak_flops(precision: str = "float32") -> tuple[float, str]:
    """(peak FLOP/s, where the figure comes from) of one device in the compute dtype `precision` uses, cached per
    process: MFU of a mixed_bfloat16 run is measured against bf16, of a float32 run on an A100 against TF32.

    GPU: the vendor's dense figure for the device model (nmtkit.training.peaks). CPU, or a GPU not in the table:
    a matmul in that dtype timed once on this machine (nanoGPT uses a spec sheet; a laptop has none we trust).
    """
    if precision in _PEAK:
        return _PEAK[precision]
    gpus = tf.config.list_physical_devices("GPU")
    found = None
    if gpus:
        name = tf.config.experimental.get_device_details(gpus[0]).get("device_name", "")
        found = peaks.gpu_peak(name, precision, tf.config.experimental.tensor_float_32_execution_enabled())
    if found is None:
        found = peaks.measured_peak(tf, precision, compute_threads(tf.config) if not gpus else 0,
                                    parts=towers(tf.config))
    _PEAK[precision] = found
    return found


def peak_at_least(precision: str, achieved: float) -> tuple[float, str]:
    """The peak, raised when a run achieved `achieved` FLOP/s per device above it (its MFU would pass 100%: the
    peak was timed while load held the cores): re-timed on a CPU (nmtkit.training.peaks.retimed), at least the
    achieved rate anywhere. No log line, run.json or check then shows an MFU above 100%."""
    peak = peak_flops(precision)
    if achieved <= peak[0]:
        return peak
    if "spec sheet" in peak[1]:
        found = (achieved, f"{peak[1]}, raised to a run's achieved rate")
    else:
        found = peaks.retimed(tf, precision, compute_threads(tf.config), achieved, parts=towers(tf.config))
    _PEAK[precision] = found
    return found


@dataclass
class Window:
    """The steps since the last log line: what the line averages over."""

    losses: list[float] = field(default_factory=list)
    time: float = 0.0
    tokens: int = 0
    flops: float = 0.0

    def add(self, loss: float, seconds: float, tokens: int, flops: float) -> None:
        self.losses.append(loss)
        self.time += seconds
        self.tokens += tokens
        self.flops += flops

    def record(self, dist, peak: float) -> dict:
        """loss, step_time, steps_per_sec, tokens_per_sec (all ranks) and mfu of this window."""
        tokens, flops = dist.sum(self.tokens), dist.sum(self.flops)
        sec = self.time / len(self.losses)
        return {"loss": float(np.mean(self.losses)), "step_time": sec, "steps_per_sec": 1.0 / sec,
                "tokens_per_sec": tokens / self.time, "mfu": flops / self.time / (peak * dist.size)}


class Scalars:
    """TensorBoard event file + scalars.jsonl mirror (rank 0); a no-op on other ranks. A context manager."""

    def __init__(self, run: Path, enabled: bool):
        self.enabled = enabled
        self.path = run / runs.SCALARS
        self.writer = tf.summary.create_file_writer(str(run)) if enabled else None

    def write(self, step: int, values: dict) -> None:
        if not self.enabled:
            return
        now = time.time()
        with self.writer.as_default():
            for tag, value in values.items():
                if value is None:
                    continue
                tf.summary.scalar(tag, float(value), step=step)
                append_jsonl(self.path, {"step": step, "wall_time": now, "tag": tag, "value": float(value)})
        self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

