"""The closing summaries of notebooks 04 and 05: a few bullets (what was measured, what it showed, what would change
it), each naming the heading whose figure it rests on, worded here from the figures the notebook computed, so a
bullet cannot state a figure its run did not print.

    lab_summary(lab)                                  notebook 04: from the lab table alone (no graded figure)
    monitoring_summary(run, ref, step_s=..., ...)     notebook 05: from the student's own figures of Q1, Q4, Q5, Q11
    memory_readings(device_mib, batches)              notebook 05, Q4: the homework model's projected peak memory
                                                      against a card's, beside what "memory 100%" would read

Neither holds an expected figure: each only rewords what it is given. TensorFlow-free.
"""
from __future__ import annotations

import math

from nmtkit.errors import CourseError


def _ring_bytes(lab):
    return 2 * (lab.ranks - 1) / lab.ranks * lab.params * lab.bytes_per_value


def _lab_rows(lab):
    """The runs of the widest shape without compression that measured their link, slowest link first."""
    need = {"ranks", "params", "bytes_per_value", "compression", "link_mbit_s", "step_s", "exchange_s",
            "link_peak_mbit_s", "cpu_percent"}
    missing = sorted(need - set(getattr(lab, "columns", ())))
    if missing:
        raise CourseError(f"lab_summary needs nk.lab_runs()'s table; this one lacks {', '.join(missing)}")
    same = lab[(lab.ranks == lab.ranks.max()) & (lab.compression == "none") & lab.link_mbit_s.notna()]
    if len(same) < 2:
        raise CourseError("lab_summary needs two runs of one shape without compression, on different links")
    return same.sort_values("link_mbit_s")


def lab_summary(lab, interval_s: float = 0.1) -> str:
    """Notebook 04's closing bullets from `nk.lab_runs()`'s table: the step against the link, the allreduce's achieved
    rate, a sample's ceiling 8B/interval, the CPU's utilisation against the link. `interval_s`: the monitor's sample.

    Introduced in notebook 04_bottleneck_lab."""
    same = _lab_rows(lab)
    slow, fast = same.iloc[0], same.iloc[-1]
    ring = _ring_bytes(lab)[fast.name]
    achieved = ring * 8 / fast.exchange_s / 1e6 if fast.exchange_s == fast.exchange_s else float("nan")
    return "\n".join([
        f"- The step follows the link ((b) Measure, and (c) fit; the table `lab`). Measured: the same work took "
        f"{slow.step_s:.2f} s a step on the slowest link ({slow.link_mbit_s:,.1f} Mbit/s) and {fast.step_s:.2f} s on "
        f"the fastest ({fast.link_mbit_s:,.1f} Mbit/s). Showed: where 8B/R is a large part of the step, the link "
        "sets it. Would change it: fewer bytes (fp16, a smaller model) or a faster link.",
        f"- The allreduce has a rate of its own (A link's rate is not the allreduce's; the achieved-rate table). "
        f"Measured: {fast.name}'s exchange, timed alone, moved the ring's bytes at {achieved:,.0f} Mbit/s on a "
        f"{fast.link_mbit_s:,.0f} Mbit/s link. Showed: there the ranks' CPUs bound the exchange, not the wire. "
        "Would change it: ranks with cores of their own, or GPUs under NCCL.",
        f"- A sample is a ceiling, not a rate (the same heading; the check of the relation). Measured: "
        f"{fast.name}'s busiest {interval_s} s sample read {fast.link_peak_mbit_s:,.0f} Mbit/s, against 8B over the "
        f"interval = {ring * 8 / interval_s / 1e6:,.0f} Mbit/s. Showed: a peak sample reads one step's bytes over "
        "the sample's own length (a little under the interval, hence a peak a little over), whatever the link. "
        "Would change it: a shorter interval or a larger model, not the link.",
        f"- Utilisation shows a wait as idle (Busy or waiting; the CPU table). Measured: the machine's CPU "
        f"{fast.cpu_percent:.0f}% on the fastest link, {slow.cpu_percent:.0f}% on the slowest, for the same work. "
        "Showed: utilisation says how long a processor ran, not what held the step. Would change it: GPUs under "
        "NCCL, whose wait reads as busy.",
    ])


def _pct(x) -> str:
    return "(not computed)" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.0%}"


def monitoring_summary(run, ref, step_s=None, hours_to_target=None, mfu=None, measured_over_bound=None,
                       link_share=None) -> str:
    """Notebook 05's closing bullets from the student's own figures: Q1's steady step and hours to the target, Q4's
    MFU (against one rank's float32 matmul peak), Q5's bytes per step over the ring's bound, Q11's link share.
    A figure not computed (None) is said so, never filled in.

    Introduced in notebook 05_monitoring_analysis."""
    def num(x, fmt):
        return "(not computed)" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)
    link = ref.status.get("link_measured_mbit_s") if hasattr(ref, "status") else None
    return "\n".join([
        f"- Time (Q1). Measured: {run.name}'s steady step, {num(step_s * 1000 if step_s else None, '.0f')} ms on "
        f"{run.n_ranks} rank(s). Showed: 300,000 such steps take {num(hours_to_target, '.1f')} h, at this model, "
        "batch and hardware only. Would change it: another model, batch or machine: measure a few hundred steps there.",
        f"- Busy is not useful (Q4). Measured: MFU {num(mfu, '.1%')} per rank, against one rank's float32 matmul "
        "peak timed on its own core. Showed: how much of that peak the busy cores turned into the model's "
        "arithmetic. Would change it: GPUs, where NVML's utilisation counts NCCL's wait as busy.",
        f"- The link carries the gradients (Q5). Measured: {ref.name}'s bytes per step on its data link, "
        f"{num(measured_over_bound, '.3f')} of the ring's bound. Showed: the traffic is the gradient exchange, the "
        "same every step. Would change it: fp16 compression halves it; a hierarchical allreduce sends less between "
        "nodes.",
        f"- The link's share of a step (Q11). Measured: those bytes need {_pct(link_share)} of a mean step on the "
        f"link preflight measured ({num(link, ',.1f')} Mbit/s). Showed: how much of each step waits on the link. "
        "Would change it: a faster link, only up to the exchange's achieved rate (notebook 04).",
    ])


def memory_readings(device_mib: float, batches=(32, 128, 256), profile_name: str = "wmt16-base"):
    """The homework model's projected peak memory per GPU (nmtkit.model.memory.project: weights, gradients, Adam,
    activations, logits) at `batches` sentences of the profile's longest length, float32 and mixed precision, as
    GiB and as a share of a card of `device_mib` MiB (what nvidia-smi reports as memory.total). A share over 1 does
    not fit whole: the kit would split it into micro-batches.

    Introduced in notebook 05_monitoring_analysis."""
    import pandas as pd

    from nmtkit import config
    from nmtkit.model import memory
    if not device_mib or device_mib <= 0:
        raise CourseError(f"memory_readings: device_mib must be a card's memory in MiB, not {device_mib!r}")
    cfg = config.profile(profile_name)
    rows = []
    for batch in batches:
        for precision in ("float32", "mixed_float16"):
            est = memory.project(cfg, cfg.data.vocab_size, batch=batch, precision=precision)
            rows.append({"sentences": batch, "precision": precision, "length": est.length,
                         "projected_gib": est.total / memory.GIB,
                         "share_of_card": est.total / (device_mib * 2 ** 20)})
    return pd.DataFrame(rows).set_index(["sentences", "precision"])
