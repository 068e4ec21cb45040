"""The training log: each step's figures kept without a host sync, read once per log interval into the rank
log (ranks/rank<R>.jsonl), the one log line (step, loss, lr, ms/step, tokens/s, MFU), the scalars and on_log."""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from nmtkit import runs
from nmtkit.config import Config
from nmtkit.files import append_jsonl
from nmtkit.model.flops import SKIP_STEPS, train_flops
from nmtkit.training.dist import pool_sizes
from nmtkit.training.metrics import Scalars, Window, peak_at_least
from nmtkit.training.peaks import COMPUTE_DTYPE
from nmtkit.training.trainer import Trainer, tf


@dataclass
class Reporter:
    """`step()` every step: keep the step's stats tensor and times (no host sync). `log()` every train.log_every
    steps (and the last; the loop decides): read them all at once, append their records to the rank log, then the log
    line (rank 0), the scalars and `on_log` with the record the cluster publishes. `flush()` also runs before a
    checkpoint and at the end, so the rank log is complete wherever a run can stop or resume.

    Times: TensorFlow runs ops synchronously on a CPU, so a step's host time is its compute time; on a GPU it is
    the time to queue the work, and what the device still owes shows up as the wait for the stats at the flush.
    That wait is added to the window's last step, so the records (and the log line) sum to the real wall time.
    """

    cfg: Config
    dist: object
    run: Path
    trainer: Trainer
    vocab_size: int
    peak: tuple[float, str]
    scalars: Scalars
    bar: object = None
    on_log: Callable[[dict], None] | None = None
    window: Window = field(default_factory=Window)
    history: list = field(default_factory=list)
    step_times: list = field(default_factory=list)
    pending: list = field(default_factory=list)
    t_start: float = field(default_factory=time.time)
    steady: tuple = (None, None, 0.0, 0.0)  # first step, last step, model FLOPs, seconds
    loss_scale: float | None = None  # mixed_float16: the dynamic loss scale after the last step read
    # the cores this process may run on and TensorFlow's pools (intra, inter): which hardware its step times had
    affinity: list = field(default_factory=lambda: sorted(os.sched_getaffinity(0)))
    threads: list = field(default_factory=lambda: pool_sizes())

    def step(self, step: int, micro: list, stats, seconds: float) -> None:
        src_len, tgt_len = (max(int(b[i].shape[1]) for b in micro) for i in (0, 1))  # static shapes: no sync
        self.pending.append((step, time.time(), seconds, stats, src_len, tgt_len))
        if self.bar is not None:
            self.bar.update(1)

    def flush(self) -> None:
        """Read the pending steps' [loss, source tokens, target tokens] (the one host sync) and write their
        rank-log records ({"step", "loss", "tokens", ..., "affinity", "threads"}: nmtkit.runs)."""
        if not self.pending:
            return
        t0 = time.perf_counter()
        values = tf.stack([p[3] for p in self.pending]).numpy()
        wait = time.perf_counter() - t0
        for i, ((step, wall, seconds, _, src_len, tgt_len), row) in enumerate(zip(self.pending, values)):
            loss, src, tgt = row[:3]
            seconds += wait if i == len(self.pending) - 1 else 0.0
            self.step_times.append(seconds)
            rec = {"step": step, "wall_time": wall, "step_time": seconds, "loss": float(loss),
                   "tokens": int(src + tgt), "src_tokens": int(src), "tgt_tokens": int(tgt), "src_len": src_len,
                   "tgt_len": tgt_len, "rank": self.dist.rank, "host": self.dist.host,
                   "affinity": self.affinity, "threads": self.threads}
            if len(row) > 3:  # mixed_float16: the loss scale this step used; a lower one after it: skipped
                rec.update(loss_scale=float(row[3]), overflow=bool(row[4] < row[3]))
                self.loss_scale = float(row[4])
            append_jsonl(runs.rank_log(self.run, self.dist.rank), rec)
            flops = train_flops(self.cfg.model, self.vocab_size, int(src), int(tgt), src_len, tgt_len)
            self.window.add(float(loss), seconds, int(src + tgt), flops)
            if len(self.step_times) > SKIP_STEPS:  # the summary's MFU: this session's steady steps (run.json)
                self.steady = (self.steady[0] or step, step, self.steady[2] + flops, self.steady[3] + seconds)
        self.pending = []

    @property
    def peak_dtype(self) -> str:
        return COMPUTE_DTYPE.get(self.trainer.precision, self.trainer.precision)

    def log(self, step: int) -> None:
        self.flush()
        w, total = self.window.record(self.dist, self.peak[0]), self.cfg.train.steps
        if w["mfu"] > 1:  # the peak was timed under load: time it again (every rank alike: the MFU sums them all)
            w["mfu"] = self.raise_peak(w["mfu"])
        rec = {"step": step, "total_steps": total, "rank": self.dist.rank, "host": self.dist.host,
               "loss": w["loss"], "lr": self.trainer.learning_rate(), "step_time": w["step_time"],
               "steps_per_sec": w["steps_per_sec"], "tokens_per_sec": w["tokens_per_sec"], "mfu": w["mfu"],
               "elapsed": time.time() - self.t_start}
        self.history.append(rec)
        if self.dist.is_chief:
            values = {"train_loss": rec["loss"], "learning_rate": rec["lr"], "global_step/sec": rec["steps_per_sec"],
                      "tokens_per_sec": rec["tokens_per_sec"], "step_time": rec["step_time"], "mfu": rec["mfu"]}
            if self.loss_scale is not None:  # mixed_float16 only: notebook 02 plots its trace
                values["loss_scale"] = self.loss_scale
            self.scalars.write(step, values)
            line = (f"step {step}/{total} | loss {rec['loss']:.3f} | lr {rec['lr']:.1e} | "
                    f"{rec['step_time'] * 1000:.1f} ms/step | {rec['tokens_per_sec']:,.0f} tok/s | "
                    f"MFU {rec['mfu'] * 100:.1f}% of the {self.peak_dtype} peak")  # each precision against its own
            if self.bar is not None:
                self.bar.set_postfix(loss=f"{rec['loss']:.3f}", refresh=False)
            (self.bar.write if self.bar is not None else print)(line)
            sys.stdout.flush()
        if self.on_log is not None:
            self.on_log(rec)
        self.window = Window()

    def summary(self) -> dict:
        last = self.history[-1] if self.history else {}
        out = {"train_loss": last.get("loss"), "wall_time": time.time() - self.t_start,
               "avg_step_time": float(np.mean(self.step_times[1:])) if len(self.step_times) > 1 else None,
               "peak_flops": self.peak[0], "peak_source": self.peak[1]}
        if last:
            out.update(tokens_per_sec=last["tokens_per_sec"])
        first, end, flops, seconds = self.steady
        flops, seconds = self.dist.sum(flops), self.dist.sum(seconds)  # every rank reaches the end together
        if seconds > 0:  # one figure over named steps of every rank, so anyone can recompute it from the rank logs
            mfu = flops / seconds / self.peak[0]
            out.update(mfu=self.raise_peak(mfu) if mfu > 1 else mfu, mfu_first_step=first, mfu_last_step=end,
                       vocab_size=self.vocab_size, peak_flops=self.peak[0], peak_source=self.peak[1])
        return out

    def raise_peak(self, mfu: float) -> float:
        """The MFU against the peak raised to at least what ran (metrics.peak_at_least): at most 100%."""
        old = self.peak[0]
        self.peak = peak_at_least(self.trainer.precision, mfu * old)
        return mfu * old / self.peak[0]
