"""The report's figures, as PNG files (matplotlib's object API with the Agg canvas: no display needed).

Every function takes runs (nmtkit.analysis.logs.Run) and a PNG path, draws what the logs hold and returns the
path, or None when the logs have nothing to draw (notebooks show the PNGs through nmtkit.notebook).
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from nmtkit.analysis.logs import Run
from nmtkit.analysis.machines import busy_interfaces, device_columns, net_busiest_direction, per_host
from nmtkit.files import atomic_write_bytes


def _figure(nrows: int = 1, ncols: int = 1, size=(7.0, 3.6)):
    fig = Figure(figsize=(size[0] * (1 if ncols == 1 else 0.75 * ncols), size[1] * nrows))
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    # Fixed margins, not tight_layout: its extra layout pass is paid on every figure of a report (bench/README.md).
    fig.subplots_adjust(left=0.12 / (1 if ncols == 1 else 0.75 * ncols) * 1.2, right=0.97, bottom=0.14 / nrows ** 0.5,
                        top=1 - 0.1 / nrows ** 0.5, hspace=0.35, wspace=0.3)
    return fig, axes


def _save(fig: Figure, path: str | Path) -> Path:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return atomic_write_bytes(path, buf.getvalue())  # a half-written PNG never carries the final name


def scalar_plot(runs: list[Run], tags: list[str], path, title: str, ylabel: str, logy: bool = False) -> Path | None:
    """One line per (run, tag) against the step."""
    fig, axes = _figure()
    ax = axes[0, 0]
    drawn = 0
    for run in runs:
        for tag in tags:
            s = run.series(tag)
            if s.empty:
                continue
            style = "o-" if len(s) < 30 else "-"
            label = f"{run.name}: {tag}" if len(runs) > 1 or len(tags) > 1 else tag
            ax.plot(s["step"], s["value"], style, ms=3, label=label)
            drawn += 1
    if not drawn:
        return None
    ax.set(title=title, xlabel="step", ylabel=ylabel)
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def bleu(runs, path):
    return scalar_plot(runs, ["Eval_BLEU_Score"], path, "Dev BLEU", "BLEU")


def losses(runs, path):
    return scalar_plot(runs, ["train_loss", "eval_loss"], path, "Train vs eval loss", "cross-entropy (nats/token)")


def learning_rate(runs, path, warmup_steps: int | None = None):
    """The learning rate per run, with the configured warmup_steps marked."""
    fig, axes = _figure()
    ax = axes[0, 0]
    drawn = 0
    for run in runs:
        s = run.series("learning_rate")
        if not s.empty:
            ax.plot(s["step"], s["value"], "-", label=run.name)
            drawn += 1
    if not drawn:
        return None
    if warmup_steps is not None:
        ax.axvline(warmup_steps, color="grey", ls="--", label=f"warmup_steps = {warmup_steps}")
    ax.set(title="Learning rate", xlabel="step", ylabel="learning rate")  # its shape is question 6's to read
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def step_time(runs: list[Run], path) -> Path | None:
    """Per-rank step time (ms) and tokens/s, from ranks/rank<R>.jsonl (or the scalars when those are missing)."""
    fig, axes = _figure(1, 2)
    drawn = 0
    for run in runs:
        if not run.ranks.empty and "step_time" in run.ranks:
            for rank, df in run.ranks.groupby("rank"):
                label = f"{run.name} r{rank}"
                axes[0, 0].plot(df["step"], df["step_time"] * 1000, ".", ms=2, alpha=0.6, label=label)
                if "tokens" in df:
                    axes[0, 1].plot(df["step"], df["tokens"] / df["step_time"], ".", ms=2, alpha=0.6, label=label)
                drawn += 1
        else:
            for tag, ax, scale in (("step_time", axes[0, 0], 1000), ("tokens_per_sec", axes[0, 1], 1)):
                s = run.series(tag)
                if not s.empty:
                    ax.plot(s["step"], s["value"] * scale, "-", label=run.name)
                    drawn += 1
    if not drawn:
        return None
    _clip_outliers(axes[0, 0])
    axes[0, 0].set(title="Step time", xlabel="step", ylabel="ms/step")
    axes[0, 1].set(title="Throughput (per rank)", xlabel="step", ylabel="tokens/s")
    for ax in axes[0]:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, markerscale=3)
    return _save(fig, path)


def _clip_outliers(ax, factor: float = 3.0) -> None:
    """Keep the y-axis on the steady steps: at most factor x the 90th percentile; the few steps above it (tracing,
    evaluation, checkpoints) are drawn as markers on the top edge and counted in the legend."""
    ys = np.concatenate([line.get_ydata() for line in ax.get_lines()] or [np.zeros(0)]).astype(float)
    if ys.size < 10:
        return
    top = factor * float(np.percentile(ys, 90))
    if ys.max() <= top:
        return
    for line in list(ax.get_lines()):
        x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
        out = y > top
        if out.any():
            ax.plot(x[out], np.full(out.sum(), top * 0.98), "^", color="red", ms=4)
    n = int((ys > top).sum())
    ax.plot([], [], "^", color="red", label=f"{n} steps above {top:,.0f} ms (max {ys.max():,.0f})")
    ax.set_ylim(0, top)


def device_utilisation(runs: list[Run], path) -> Path | None:
    """GPU utilisation per GPU per node; CPU utilisation per node when the run had no GPU."""
    fig, axes = _figure()
    ax = axes[0, 0]
    drawn, kinds = 0, set()
    for run, host, df, t0 in _node_timelines(runs):
        cols = device_columns(df)
        kinds.add("CPU" if cols == ["cpu_percent"] else "GPU")
        for c in cols:
            ax.plot(df["time"] - t0, df[c], "-", lw=1, label=f"{run.name} {host} {c.split('_')[0]}")
            drawn += 1
    if not drawn:
        return None
    ax.axhline(80, color="grey", ls="--", lw=1)
    ax.set(title=f"{'/'.join(sorted(kinds))} utilisation", xlabel="seconds since training started",
           ylabel="utilisation (%)", ylim=(0, 105))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def network(runs: list[Run], path) -> Path | None:
    """Bytes/s of the busier direction per node and interface (interfaces that carried nothing are left out), against
    each run's link rate as preflight measured it: a full-duplex link carries its rate each way, so one direction,
    not sent + received, is what meets it."""
    fig, axes = _figure()
    ax = axes[0, 0]
    drawn = 0
    for run, host, df, t0 in _node_timelines(runs):
        for iface in busy_interfaces(df):
            ax.plot(df["time"] - t0, net_busiest_direction(df, iface) / 1e6, "-", lw=1,
                    label=f"{run.name} {host} {iface}")
            drawn += 1
    if not drawn:
        return None
    for i, run in enumerate(runs):
        mbit = run.status.get("link_measured_mbit_s")
        if isinstance(mbit, (int, float)) and mbit > 0:
            ax.axhline(mbit / 8, ls="--", lw=1, color=f"C{i}",
                       label=f"{run.name}: its link, {mbit:g} Mbit/s each way (preflight)")
    ax.set(title="Network throughput, busier direction (a link's rate holds each way)",
           xlabel="seconds since training started", ylabel="MB/s one way (max of sent, received)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def scatter(x, y, path, title: str, xlabel: str, ylabel: str, fit: bool = True) -> Path | None:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if len(x) == 0:
        return None
    fig, axes = _figure()
    ax = axes[0, 0]
    ax.plot(x, y, "o", ms=3, alpha=0.6)
    if fit and len(x) >= 2 and np.ptp(x) > 0:
        a, b = np.polyfit(x, y, 1)
        xs = np.linspace(x.min(), x.max(), 10)
        ax.plot(xs, a * xs + b, "-", color="C1", label=f"least squares: y = {a:.3g} x + {b:.3g}")
        ax.legend(fontsize=8)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def bars(labels: list[str], values: list[float], path, title: str, ylabel: str) -> Path | None:
    if not labels:
        return None
    fig, axes = _figure()
    ax = axes[0, 0]
    ax.bar(range(len(labels)), values, color=[f"C{i}" for i in range(len(labels))])
    ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
    ax.set(title=title, ylabel=ylabel)
    ax.grid(alpha=0.3, axis="y")
    return _save(fig, path)


# --- helpers ----------------------------------------------------------------------------------------------

def _node_timelines(runs: list[Run]):
    """(run, host, that node's monitor samples, the run's time zero) for every node of every run."""
    for run in runs:
        mon = per_host(run.monitor)
        if mon.empty:
            continue
        t0 = _origin(run, mon)
        for host, df in mon.groupby("host"):
            yield run, host, df, t0


def _origin(run: Run, mon: pd.DataFrame) -> float:
    """Time zero of a run's timeline: its first step's start (so runs line up), else its first sample."""
    start, _ = run.wall_clock()
    return start if start is not None else float(mon["time"].min())


def histogram(values, path, title: str, xlabel: str, marks: dict | None = None) -> Path | None:
    values = np.asarray(values, float)
    if len(values) == 0:
        return None
    fig, axes = _figure()
    ax = axes[0, 0]
    ax.hist(values, bins=min(40, max(5, len(values) // 5)), color="C0", alpha=0.8)
    for i, (label, x) in enumerate((marks or {}).items()):
        ax.axvline(x, color=f"C{i + 1}", ls="--", label=f"{label} {x:.3g}")
    if marks:
        ax.legend(fontsize=8)
    ax.set(title=title, xlabel=xlabel, ylabel="count")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def loss_gap(steps, train, evals, path) -> Path | None:
    """Train and eval loss at the evaluation steps (top) and their gap (bottom)."""
    if len(steps) == 0:
        return None
    fig, axes = _figure(2, 1, size=(7.0, 2.6))
    axes[0, 0].plot(steps, train, "o-", ms=3, label="train loss (last logged before the eval)")
    axes[0, 0].plot(steps, evals, "o-", ms=3, label="eval loss")
    axes[0, 0].set(title="Train vs eval loss at each evaluation", ylabel="loss")
    axes[0, 0].legend(fontsize=8)
    axes[1, 0].plot(steps, np.asarray(evals) - np.asarray(train), "o-", ms=3, color="C3")
    axes[1, 0].axhline(0, color="grey", lw=1)
    axes[1, 0].set(xlabel="step", ylabel="eval - train")
    for ax in axes[:, 0]:
        ax.grid(alpha=0.3)
    return _save(fig, path)


def plateau(bleu_s: pd.DataFrame, loss_s: pd.DataFrame, k: int, path) -> Path | None:
    """Dev BLEU and eval loss per evaluation, the span from the evaluation k before the last to the last (the pair
    the plateau rule compares) shaded."""
    panels = [(s, name) for s, name in ((bleu_s, "dev BLEU"), (loss_s, "eval loss")) if not s.empty]
    if not panels:
        return None
    fig, axes = _figure(len(panels), 1, size=(7.0, 2.6))
    for ax, (s, name) in zip(axes[:, 0], panels):
        ax.plot(s["step"], s["value"], "o-", ms=3)
        if len(s) > k:
            ax.axvspan(s["step"].iloc[-k - 1], s["step"].iloc[-1], color="C1", alpha=0.15,
                       label=f"the last evaluation and the one {k} before")
            ax.legend(fontsize=8)
        ax.set(ylabel=name)
        ax.grid(alpha=0.3)
    axes[-1, 0].set(xlabel="step")
    return _save(fig, path)


def progress(elapsed_h, steps, target_steps: int, rate_steps_per_h: float, path) -> Path | None:
    """Steps against wall-clock hours, extrapolated at the measured rate to target_steps."""
    if len(steps) == 0 or not rate_steps_per_h > 0:
        return None
    fig, axes = _figure()
    ax = axes[0, 0]
    ax.plot(elapsed_h, steps, "-", label="measured")
    t_end, s_end = float(elapsed_h[-1]), float(steps[-1])
    t_target = t_end + (target_steps - s_end) / rate_steps_per_h
    ax.plot([t_end, t_target], [s_end, target_steps], "--", label=f"projected to {target_steps:,} steps")
    ax.set(title="Progress and projection", xlabel="hours since start", ylabel="step")
    if t_target / max(t_end, 1e-9) > 50:  # a short run against a long projection: log axes show both
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)
