"""The first GPU run refits the memory projection (nmtkit.model.memory): from each case of bench/gpu.py, the memory
TensorFlow gave the device ("Created device ... with N MB memory" in its log) and the step's measured peak at two
micro-batch sizes, the activation constant (KEEP) the measured slope implies beside the shipped one, and the one
command that adopts it, printed only when the fit can be trusted.

Why two sizes: one peak holds what does not grow with the batch (the weights and Adam's slots, cuDNN and cuBLAS
workspaces, the allocator's rounding) beside what does, so one point loads the fixed part's error onto KEEP. The
slope between two sizes is the per-sentence cost alone: its loss part is the projection's (the logits in the compute
precision and three float32 tensors of their size), the rest is the activations', over the paper's count. Why the
profile's dropout: the paper's count includes the dropout masks, so a peak measured without them (dropout 0) implies
a KEEP too low by their share. An implied KEEP below 1 says the activations keep less than the paper's minimum,
which they cannot: the loss term (or the slope) is off, so no command is printed, only the ratio.

The shipped KEEP was fitted on CPU peak resident memory in float32; two references (PyTorch on an H100, a
first-principles count, docs/instructors.md) say the projection errs high on a GPU, by a factor only a GPU can
measure."""
from __future__ import annotations

import re

from nmtkit.model import memory

DEVICE_LINE = re.compile(r"Created device (\S+) with (\d+) MB memory")
MEMORY_FILE = "nmtkit/model/memory.py"
KEEP_FLOOR = 1.0  # the paper's count is the least a backward pass keeps
# the shapes bench/gpu.py and bench/gpu_probe.py measure: the homework's, and a tiny one that checks the machinery
SHAPES = {"wmt16-base": {}, "tiny": {"model.d_model": 64, "model.d_ff": 128, "model.encoder_layers": 1,
                                     "model.decoder_layers": 1, "model.num_heads": 2}}


def device_limits(log: str) -> dict:
    """{device: MB} from TensorFlow's 'Created device /job:.../device:GPU:0 with 14785 MB memory' lines."""
    return {m.group(1): int(m.group(2)) for m in DEVICE_LINE.finditer(log)}


def slope_fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(bytes a sentence, fixed bytes) of the line through two (micro-batch sentences, peak bytes) points."""
    (b1, p1), (b2, p2) = sorted(points)
    slope = (p2 - p1) / (b2 - b1)
    return slope, p1 - slope * b1


def implied_keep(cfg, vocab: int, length: int, precision: str, slope: float) -> float:
    """The KEEP at which the projection's per-sentence cost equals the measured `slope` (bytes a sentence): what is
    left of it after the loss's part, over the activations the paper counts for one sentence."""
    one = memory.project(cfg, vocab, 1, length, precision)
    return (slope - one.loss) / (one.activations / memory.KEEP)


def adopt_command(keep: float) -> str:
    """The one command that makes `keep` the shipped constant (run from the checkout's root; commit the change with
    the gpu-report.json it came from)."""
    return f"sed -i 's/^KEEP = [0-9.]*/KEEP = {keep:.2f}/' {MEMORY_FILE}"


def refit(cfg, vocab: int, length: int, result: dict, log: str) -> dict:
    """For one case's RESULT record and its log: the device's memory limit, the measured and projected peaks (GiB),
    the slope and the implied KEEP beside the shipped one, and the command that adopts it, or why there is none
    ("adopt": None, "why_not"); {} without a measured peak."""
    if result.get("gpu_mem_gb") is None:
        return {}
    proj = memory.project(cfg, vocab, 1, length, result["precision"])
    out = {"device_limit_mb": next(iter(device_limits(log).values()), None),
           "measured_gib": round(result["gpu_mem_gb"], 2), "projected_gib": round(result["projected_gb"], 2),
           "keep_shipped": memory.KEEP, "keep_implied": None, "adopt": None}
    points = [(result["micro_batch"], result["gpu_mem_gb"] * memory.GIB)]
    if result.get("gpu_mem_gb_half") is not None and result.get("micro_batch_half") not in (None, points[0][0]):
        points.append((result["micro_batch_half"], result["gpu_mem_gb_half"] * memory.GIB))
    dropout = result.get("dropout")
    if len(points) < 2:
        out["why_not"] = "one micro-batch size measured: a slope needs two"
        return out
    slope, fixed = slope_fit(points)
    keep = implied_keep(cfg, vocab, length, result["precision"], slope)
    out.update(slope_mib=round(slope / 2**20, 2), slope_projected_mib=round(proj.per_sentence / 2**20, 2),
               slope_ratio=round(slope / proj.per_sentence, 3), fixed_gib=round(fixed / memory.GIB, 2),
               states_gib=round(proj.states / memory.GIB, 2), keep_implied=round(keep, 2))
    if dropout is None or abs(dropout - cfg.model.dropout) > 1e-9:
        out["why_not"] = (f"measured at dropout {dropout}, the profile trains at {cfg.model.dropout}: the paper's "
                          "count holds the dropout masks")
    elif keep < KEEP_FLOOR:
        out["why_not"] = (f"KEEP {keep:.2f} is below the paper's minimum ({KEEP_FLOOR:g}): the loss term over-counts "
                          f"on this GPU; the projection's slope is {1 / out['slope_ratio']:.2f}x the measured one")
    else:
        out["adopt"] = adopt_command(keep)
    return out


def refit_line(fit: dict) -> str:
    limit = f"TensorFlow's device limit {fit['device_limit_mb']:,} MB; " if fit.get("device_limit_mb") else ""
    head = f"  memory: {limit}peak {fit['measured_gib']:.2f} GiB measured, {fit['projected_gib']:.2f} projected"
    if fit.get("keep_implied") is None:
        return f"{head}; no KEEP fitted ({fit['why_not']})"
    slope = (f"; {fit['slope_mib']:.1f} MiB a sentence measured, {fit['slope_projected_mib']:.1f} projected "
             f"(x{fit['slope_ratio']:.2f}): KEEP {fit['keep_implied']:.2f} implied (shipped {fit['keep_shipped']})")
    return head + slope + (f"; adopt: {fit['adopt']}" if fit["adopt"] else f"; not adoptable: {fit['why_not']}")
