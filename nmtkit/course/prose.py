"""Figures the notebooks' prose states, computed here, so a sentence cannot contradict the table beside it.

    wmt16_facts()                    notebook 01: the download, the disk need and the BPE size of wmt16-base
    measured_link()                  notebook 03: the link preflight measured between the reference run's hosts
    compute_estimates(trials)        notebook 03: the step's compute two ways (exchange timed alone, fp16's saving)
    link_figures(trials, gbps)       per compression, the measured bytes and step, the compute and its error, the
                                     break-even link rate with its band, and the exchange on `gbps`; pace(): the
                                     verdict, network / compute / cannot tell (exercise 03-link's check uses both)
    link_table(trials, gbps)         notebook 03's instructor cell: link_figures with the verdict, the frame in
                                     words (nmtkit.course.instructor.linkverdict); the instructor's kit only
    homework_exchange(params, ...)   the flat ring's bound for transformer-base per step (fp32, fp16), at 1, 10 Gbit/s
    ring_derivation(trials), draw_ring(trials)
                                     the ring allreduce derived from the measured bytes, and drawn

TensorFlow-free: parameter counts come from the caller (notebook 02/03 build the model and count).
"""
from __future__ import annotations

from nmtkit.course import INSTRUCTOR_KIT
from nmtkit.errors import CourseError
from nmtkit.ring import ring_bytes


def wmt16_facts() -> str:
    """One line with the WMT16 figures notebook 01 and docs/instructors.md quote (pins and profile, no guess).

    Introduced in notebook 01_data_prep_bpe."""
    from nmtkit import config
    from nmtkit.data import wmt
    base = config.profile("wmt16-base")
    training = [s for s in wmt.SOURCES if any(k.startswith("train.") for k in s.members)]
    return (f"wmt16-base: {len(wmt.SOURCES)} archives ({len(training)} of training text), {wmt.DOWNLOAD_GB} GB of "
            f"downloads (nmtkit.data.wmt.DOWNLOAD_GB); {wmt.DISK_NEED_GB} GB of free disk while preparing "
            f"(DISK_NEED_GB); joint BPE of {base.data.vocab_size:,} pieces (data.vocab_size)")


def measured_link(run_dir=None) -> tuple[float, str]:
    """(Gbit/s, where it was measured) of the link preflight timed between the shipped reference run's hosts
    (its run.json), or of `run_dir`'s run: a measured link, never an assumed one.

    Introduced in notebook 03_horovod_multinode."""
    from pathlib import Path

    from nmtkit.analysis.reference import reference_run
    from nmtkit.files import read_json
    status = read_json(Path(run_dir or reference_run()) / "run.json", CourseError)
    mbit, m = status.get("link_measured_mbit_s"), status.get("link_measured") or {}
    if not mbit:
        raise CourseError(f"{run_dir or reference_run()}/run.json: no link_measured_mbit_s (preflight measured no "
                          f"link for this run); use a run whose hosts were on different machines")
    return mbit / 1000, f"measured by preflight from {m.get('from', '?')} to {m.get('to', '?')}"


SENT = "bytes/step sent"  # compression_trials' column, counted on the row's "interface"


def rank_share(trials):
    """Each row's bytes one rank sent a step: loopback carries every rank's sends, a node's own NIC one ring edge."""
    return trials[SENT] / trials["ranks"].where(trials["interface"] == "lo", 1)


ALONE = "exchange alone (ms)"  # compression_trials' column: an allreduce of the gradient timed on the idle ranks


def compute_estimates(trials):
    """Per compression, the step's compute (ms) two ways, both from the trials: (i) the step less its exchange timed
    alone (ALONE, as notebook 04's lab does), (ii) the step less the exchange fp16's saving implies (fp16 halves the
    bytes, so it saves half of none's exchange; no saving: the whole step). Their mean is the compute, half their
    gap the method's error."""
    import pandas as pd
    for col in (SENT, "interface", "step time (ms)", "ranks", ALONE):
        if col not in trials:
            raise CourseError(f"the trials table has no column {col!r}: pass what nk.compression_trials returned")
    step = trials["step time (ms)"]
    saved = max(step["none"] - step["fp16"], 0.0) if {"none", "fp16"} <= set(trials.index) else 0.0
    halves = pd.Series({c: (2 if c == "none" else 1) for c in trials.index})  # none's exchange = 2 x the saving
    # floored at 1% of the step: a saving above half the step would leave no compute, which no step has
    timed, saving = (step - trials[ALONE]).clip(lower=0.01 * step), (step - halves * saved).clip(lower=0.01 * step)
    return pd.DataFrame({"compute, exchange timed (ms)": timed, "compute, fp16's saving (ms)": saving,
                         "compute (ms)": (timed + saving) / 2, "error (ms)": (timed - saving).abs() / 2})


def link_figures(trials, gbps: float):
    """compression_trials' table -> per compression: the step time measured here, its compute estimated two ways
    (compute_estimates) and that error, the bytes each rank sent (measured), the link rate at which sending them
    takes as long as the compute (at the estimate, and at its two ends), and on a `gbps` link the exchange's time and
    its share of a step of compute + exchange. Exercise 03-link's answer: the check's reference
    (nmtkit.course.practice), not on the front door."""
    import pandas as pd
    est = compute_estimates(trials)
    bits = rank_share(trials) * 8
    exchange_ms = bits / (gbps * 1e9) * 1000
    return pd.DataFrame({"step time here (ms)": trials["step time (ms)"], "compute (ms)": est["compute (ms)"],
                         "error (ms)": est["error (ms)"], "bytes per rank (MB)": bits / 8e6,
                         "break-even link (Gbit/s)": bits / est["compute (ms)"] / 1e6,
                         "break-even, low (Gbit/s)": bits / (est["compute (ms)"] + est["error (ms)"]) / 1e6,
                         "break-even, high (Gbit/s)": bits / (est["compute (ms)"] - est["error (ms)"]) / 1e6,
                         f"exchange on {gbps:g} Gbit/s (ms)": exchange_ms,
                         SHARE: exchange_ms / (est["compute (ms)"] + exchange_ms)}).round(3)


def pace(figures, gbps: float) -> str:
    """What sets the pace with no compression on a `gbps` link: "network" below the break-even band, "compute"
    above it, "cannot tell" inside it (the link rate within the method's error)."""
    none = figures.loc["none"]
    if gbps < none["break-even, low (Gbit/s)"]:
        return "network"
    return "compute" if gbps > none["break-even, high (Gbit/s)"] else "cannot tell"


def link_table(trials, gbps: float):
    """link_figures with the verdict worded from that very frame (nmtkit.course.instructor): notebook 03's instructor
    cell, after the student's exercise 03-link. The instructor's kit only (a student's release has no verdicts, and
    the frame is the exercise's answer).

    Introduced in notebook 03_horovod_multinode."""
    if not INSTRUCTOR_KIT:
        raise CourseError("nk.link_table is the instructor's (its table and verdict answer exercise 03-link): work out "
                          "the break-even rates from `trials` yourself and check them with nk.check_link_share")
    from nmtkit.course.instructor.linkverdict import with_verdict
    figures = link_figures(trials, gbps)
    figures.attrs["pace"] = pace(figures, gbps)
    return with_verdict(figures)


SHARE = "exchange's share of a step"


def homework_exchange(params: int, ranks: int = 4) -> str:
    """The flat ring's bound on what each of `ranks` sends per step for `params` fp32 gradients, and with fp16
    compression, and its time on a 1 and a 10 Gbit/s link (no link is assumed to be the homework's).

    Introduced in notebook 03_horovod_multinode."""
    lines = []
    for name, width in (("fp32 gradients", 4), ("fp16 compression", 2)):
        b = ring_bytes(params, ranks, width)
        lines.append(f"{name}: 2({ranks}-1)/{ranks} x {params:,} x {width} B = {b / 1e6:,.1f} MB per rank per step "
                     f"at most, {b * 8 / 1e9:.2f} s on 1 Gbit/s, {b * 8 / 1e10:.3f} s on 10 Gbit/s")
    return "\n".join(lines)


def ring_derivation(trials, compression: str = "none") -> dict:
    """From the bytes measured on loopback (every rank's sends): each rank's share, the gradient it implies
    (share x N / (2(N-1))), and the model's gradient (parameters x bytes per value)."""
    row = trials.loc[compression]
    if SENT not in trials or "interface" not in trials:
        raise CourseError(f"the trials table has no {SENT!r} or 'interface' column: pass nk.compression_trials' table")
    n, params = int(row["ranks"]), int(row["params"])
    if n < 2:
        raise CourseError(f"a ring needs 2 ranks or more; the trials ran {n}")
    per_rank = rank_share(trials)[compression]
    width = 2 if compression == "fp16" else 4
    return {"ranks": n, "params": params, "bytes_per_rank": per_rank, "chunk": per_rank / (2 * (n - 1)),
            "gradient_measured": per_rank * n / (2 * (n - 1)), "gradient_model": params * width,
            "transfers": 2 * (n - 1)}


def draw_ring(trials, compression: str = "none"):
    """The ring of the trials' ranks: each sends its right neighbour 2(N-1) chunks of G/N per step (N-1 in the
    reduce-scatter, N-1 in the allgather), labelled with the figures ring_derivation reads from the measurement.

    Introduced in notebook 03_horovod_multinode."""
    import math

    import matplotlib.pyplot as plt
    d = ring_derivation(trials, compression)
    n = d["ranks"]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    pos = [(math.cos(math.pi / 2 - 2 * math.pi * r / n), math.sin(math.pi / 2 - 2 * math.pi * r / n)) for r in range(n)]
    for r, (x, y) in enumerate(pos):
        ax.add_patch(plt.Circle((x, y), 0.3, color="#4c72b0"))
        ax.text(x, y, f"rank {r}", ha="center", va="center", color="white", fontsize=8)
        nx, ny = pos[(r + 1) % n]
        bend = 0.3 if n == 2 else 0.15  # two ranks: two arcs, one each way, not one line drawn twice
        ax.annotate("", xy=(nx, ny), xytext=(x, y), arrowprops=dict(arrowstyle="->", lw=1.5, shrinkA=22, shrinkB=22,
                                                                      connectionstyle=f"arc3,rad={bend}"))
    ax.set(xlim=(-1.4, 4.6), ylim=(-1.5, 1.5), aspect="equal")
    ax.axis("off")
    ax.set_title(f"ring allreduce, {n} ranks, {compression}: {d['transfers']} transfers of G/N per rank per step",
                 fontsize=9)
    ax.text(1.45, 0, f"measured per rank: {d['bytes_per_rank'] / 1e6:.2f} MB/step = {d['transfers']} x "
            f"{d['chunk'] / 1e6:.2f} MB\nimplied gradient G = {d['gradient_measured'] / 1e6:.2f} MB\nmodel: "
            f"{d['params']:,} x {d['gradient_model'] // d['params']} B = {d['gradient_model'] / 1e6:.2f} MB",
            fontsize=8, va="center")
    return fig
