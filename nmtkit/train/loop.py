"""The training loop (nanoGPT's train.py, in TensorFlow): set-up, steps, finish.

    summary = train(cfg, "runs/baseline")                          # one process
    summary = train(cfg, run, dist=Horovod(), on_log=publish)     # every Horovod rank (nmtkit.cluster)

Single process and Horovod differ only in `dist` (nmtkit.train.dist). Rank 0 ("chief") writes checkpoints,
TensorBoard events, scalars.jsonl, translations and evaluates BLEU; every rank writes its own ranks/rank<R>.jsonl
step times. The files are described in nmtkit/runs.py. The pieces: trainer.py (the step), checkpoints.py,
evaluate.py, metrics.py (MFU, log window, scalars), signals.py (stop at the next step).
"""
from __future__ import annotations

import contextlib
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
from nmtkit.model.transformer import count_params
from nmtkit.runlock import TOKEN_ENV, RunLock, describe, read_owner, still_ours
from nmtkit.train.checkpoints import (CheckpointError, Checkpoints, DataPosition, TrainError, _check_resumable,
                                      checkpoint_files, copy_data_files, finished_summary, load_model, tokenizer_for)
from nmtkit.train.dist import Single, set_threads
from nmtkit.train.evaluate import Evaluator, evaluate_translations
from nmtkit.train.metrics import Scalars, Window, peak_flops, train_flops
from nmtkit.train.signals import stop_on_signals
from nmtkit.train.trainer import Trainer, tf

__all__ = ["train", "TrainError", "CheckpointError", "checkpoint_files", "load_model", "tokenizer_for",
           "evaluate_translations", "Trainer"]


def _interactive() -> bool:
    return sys.stdout.isatty() or "ipykernel" in sys.modules


def _tokenizer(data_dir: Path):
    from nmtkit.data.bpe import Tokenizer
    if not (data_dir / "spm.model").exists():
        raise TrainError(f"{data_dir}/spm.model: no prepared data here; run `nmtkit prepare` "
                         f"(or nmtkit.data.prepare.prepare(cfg)) first, or pass the right --data")
    return Tokenizer.from_data_dir(data_dir)


def _start_run(run: Path, cfg: Config, data_dir: Path, dist, trainer: Trainer, start: int, params: int) -> None:
    """Rank 0: config.json, the BPE model and data stats, run.json "running", and the opening line."""
    run.mkdir(parents=True, exist_ok=True)
    cfg.save(run / runs.CONFIG)
    copy_data_files(data_dir, run)
    runs.update_status(run, status="running", step=start, total_steps=cfg.train.steps, ranks=dist.size,
                       host=dist.host, pid=os.getpid(), started=time.time(), precision=trainer.precision,
                       dist=dist.describe(), params=params, resumed_from=start or None, error=None)
    print(f"{dist.describe()} | {trainer.precision} | {params:,} parameters | "
          f"{'resuming at step ' + str(start) if start else 'fresh start'} -> {cfg.train.steps} steps", flush=True)


def _start_sampler(stack: contextlib.ExitStack, cfg: Config, run: Path, dist) -> None:
    if not cfg.monitor.enabled:
        return
    try:
        from nmtkit.monitor import Sampler
    except ImportError:
        return
    sampler = Sampler(runs.monitor_log(run, dist.host, dist.rank), interval=cfg.monitor.interval, rank=dist.rank,
                      host=dist.host, tb_dir=run / runs.MONITOR_DIR / "tb" if dist.is_chief else None).start()
    stack.callback(sampler.stop)


def _progress_bar(stack: contextlib.ExitStack, enabled: bool, total: int, start: int):
    if not enabled:
        return None
    from tqdm.auto import tqdm
    return stack.enter_context(tqdm(total=total, initial=start, desc="train", unit="step", dynamic_ncols=True))


@dataclass
class Reporter:
    """Every step: keep the step's stats tensor and times (no host sync). Every train.log_every steps (and the
    last): read them all at once, append their records to the rank log, then the log line (rank 0), the scalars
    and `on_log` with the record the cluster publishes. `flush()` also runs before a checkpoint and at the end,
    so the rank log is complete wherever a run can stop or resume.

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

    def step(self, step: int, micro: list, stats, seconds: float) -> None:
        src_len, tgt_len = (max(int(b[i].shape[1]) for b in micro) for i in (0, 1))  # static shapes: no sync
        self.pending.append((step, time.time(), seconds, stats, src_len, tgt_len))
        if self.bar is not None:
            self.bar.update(1)
        if step % self.cfg.train.log_every == 0 or step == self.cfg.train.steps:
            self.log(step)

    def flush(self) -> None:
        """Read the pending steps' [loss, source tokens, target tokens] (the one host sync) and write their
        rank-log records ({"step","wall_time","step_time","loss","tokens","rank","host"}, see nmtkit.runs)."""
        if not self.pending:
            return
        t0 = time.perf_counter()
        values = tf.stack([p[3] for p in self.pending]).numpy()
        wait = time.perf_counter() - t0
        for i, ((step, wall, seconds, _, src_len, tgt_len), (loss, src, tgt)) in enumerate(zip(self.pending, values)):
            seconds += wait if i == len(self.pending) - 1 else 0.0
            self.step_times.append(seconds)
            append_jsonl(runs.rank_log(self.run, self.dist.rank),
                         {"step": step, "wall_time": wall, "step_time": seconds, "loss": float(loss),
                          "tokens": int(src + tgt), "rank": self.dist.rank, "host": self.dist.host})
            self.window.add(float(loss), seconds, int(src + tgt),
                            train_flops(self.cfg.model, self.vocab_size, src, tgt, src_len, tgt_len))
        self.pending = []

    def log(self, step: int) -> None:
        self.flush()
        w, total = self.window.record(self.dist, self.peak[0]), self.cfg.train.steps
        rec = {"step": step, "total_steps": total, "rank": self.dist.rank, "host": self.dist.host,
               "loss": w["loss"], "lr": self.trainer.learning_rate(), "step_time": w["step_time"],
               "steps_per_sec": w["steps_per_sec"], "tokens_per_sec": w["tokens_per_sec"], "mfu": w["mfu"],
               "elapsed": time.time() - self.t_start}
        self.history.append(rec)
        if self.dist.is_chief:
            self.scalars.write(step, {"train_loss": rec["loss"], "learning_rate": rec["lr"],
                                      "global_step/sec": rec["steps_per_sec"],
                                      "tokens_per_sec": rec["tokens_per_sec"], "step_time": rec["step_time"]})
            line = (f"step {step}/{total} | loss {rec['loss']:.3f} | lr {rec['lr']:.1e} | "
                    f"{rec['step_time'] * 1000:.1f} ms/step | {rec['tokens_per_sec']:,.0f} tok/s | "
                    f"MFU {rec['mfu'] * 100:.1f}%")
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
            out.update(tokens_per_sec=last["tokens_per_sec"], mfu=last["mfu"])
        return out


@dataclass
class Progress:
    """Where the loop is: the step, the last checkpointed step and the status it will end with."""

    step: int
    last_saved: int
    status: str = "running"


def _still_ours(run: Path) -> None:
    """A rank whose driver died must not write over the job that has since taken its run directory over."""
    if not still_ours(run):
        raise TrainError(f"{run}: another job has taken this run directory over ({describe(read_owner(run))}); "
                         f"this one stops without writing")


def _after_step(p: Progress, cfg: Config, run: Path, ckpts: Checkpoints, evaluator: Evaluator) -> None:
    """Rank 0, after each step: the periodic checkpoint and dev evaluation."""
    if p.step % cfg.train.log_every == 0:
        _still_ours(run)
    if cfg.train.ckpt_every and p.step % cfg.train.ckpt_every == 0:
        ckpts.save(p.step)
        p.last_saved = p.step
        runs.update_status(run, step=p.step)
    if cfg.eval.every and p.step % cfg.eval.every == 0 and p.step < cfg.train.steps:
        evaluator.dev(p.step)


def _finish(p: Progress, run: Path, ckpts: Checkpoints, evaluator: Evaluator, summary: dict,
            signal_name: str | None) -> dict:
    """Rank 0, after the loop: the last checkpoint, final dev and test evaluation, run.json with the summary."""
    _still_ours(run)
    if p.step != p.last_saved or not ckpts.latest.latest_checkpoint:
        ckpts.save(p.step)
    if p.status == "stopped":
        print(f"stopped at step {p.step} ({signal_name or 'interrupt'}); checkpoint saved, "
              f"train again with the same run directory to resume", flush=True)
    if p.status == "finished":
        evaluator.dev(p.step)
        summary.update(evaluator.test(p.step))
    summary.update(evaluator.summary())
    runs.update_status(run, status=p.status, step=p.step,
                       summary={k: v for k, v in summary.items() if isinstance(v, (int, float, str, type(None)))})
    return summary


def _failure_recorder(run: Path, dist, p: Progress):
    """An ExitStack exit callback: an exception on its way out marks run.json "failed" (rank 0)."""
    def record(exc_type, exc, tb):
        if exc is not None and dist.is_chief:
            runs.update_status(run, status="failed", step=p.step, error=f"{exc_type.__name__}: {exc}"[:500])
        return False
    return record


def train(cfg: Config, run_dir: str | os.PathLike, *, data_dir: str | os.PathLike | None = None, dist=None,
          on_log: Callable[[dict], None] | None = None, resume: bool = True, progress: bool | None = None) -> dict:
    """Train (or resume) a run; returns a summary dict (status, step, losses, BLEU, timing).

    `progress`: a tqdm bar on rank 0 (default: when interactive, single process and no on_log publisher).
    One process holds the run directory's lock itself; ranks of a cluster job run under their driver's lock.
    """
    dist = dist or Single()
    own = dist.size == 1 and not os.environ.get(TOKEN_ENV)
    with RunLock(run_dir) if own else contextlib.nullcontext() as lock:
        if lock is not None and lock.message.startswith("took over"):
            print(lock.message, flush=True)
        return _train(cfg, run_dir, data_dir, dist, on_log, resume, progress)


def _train(cfg: Config, run_dir, data_dir, dist, on_log, resume: bool, progress: bool | None) -> dict:
    from nmtkit.data.pipeline import make_dataset
    set_threads(dist)  # before TensorFlow's first op: the thread pools are fixed from then on
    run, data_dir = Path(run_dir), Path(data_dir or cfg.data.dir)
    cfg = cfg.with_overrides({"data.dir": str(data_dir)})  # config.json records the data this run used
    tok, chief = _tokenizer(data_dir), dist.is_chief
    _check_resumable(run, cfg, resume)
    trainer = Trainer(cfg, tok.vocab_size, dist)
    ckpts = Checkpoints(trainer.checkpoint, run, cfg.train.keep_checkpoints, trainer.state_bytes())
    if chief:
        ckpts.clean_interrupted_saves()
    ckpts.restore()
    trainer.sync_variables()
    start, total = int(trainer.step.numpy()), cfg.train.steps
    done = finished_summary(run, start, total)
    if done is not None:  # nothing to train: don't re-evaluate or overwrite the finished run's record
        if chief:
            print(f"run already finished at step {start} (train.steps={total}); raise train.steps to continue",
                  flush=True)
        return done
    params = count_params(trainer.model)
    if chief:
        _start_run(run, cfg, data_dir, dist, trainer, start, params)
    peak = peak_flops(trainer.precision)  # before the input pipeline's threads start
    ds = make_dataset(data_dir, "train", cfg.data, rank=dist.rank, size=dist.size, seed=cfg.train.seed,
                      shuffle=True, repeat=True, pad_to_bucket=trainer.xla)  # XLA: one program per bucket
    data = DataPosition.open(ds, run, dist.rank, start, trainer.accum, cfg.train.keep_checkpoints)
    p = Progress(step=start, last_saved=start)
    if progress is None:
        progress = _interactive() and dist.size == 1 and on_log is None

    with contextlib.ExitStack() as stack:
        _start_sampler(stack, cfg, run, dist)
        scalars = stack.enter_context(Scalars(run, chief))
        bar = _progress_bar(stack, chief and progress, total, start)
        flag = stop_on_signals(stack)
        stack.push(_failure_recorder(run, dist, p))
        evaluator = Evaluator(cfg, run, data_dir, trainer, tok, scalars, ckpts) if chief else None
        reporter = Reporter(cfg, dist, run, trainer, tok.vocab_size, peak, scalars, bar, on_log)
        stack.callback(reporter.flush)  # a failing run still leaves its finished steps in the rank log
        try:
            while p.step < total:
                if dist.any(flag.requested):
                    p.status = "stopped"
                    break
                t0 = time.perf_counter()
                micro = [next(data.iterator) for _ in range(trainer.accum)]
                stats = trainer.run_step(micro)
                p.step += 1
                reporter.step(p.step, micro, stats, time.perf_counter() - t0)
                if cfg.train.ckpt_every and p.step % cfg.train.ckpt_every == 0:
                    reporter.flush()  # the rank log holds every step a checkpoint covers
                    data.save(p.step)  # every rank: its own position
                if chief:
                    _after_step(p, cfg, run, ckpts, evaluator)
            else:
                p.status = "finished"
        except KeyboardInterrupt:  # a second Ctrl-C, or no handler (not the main thread): still leave a checkpoint
            p.status = "stopped"
        if bar is not None:
            bar.close()  # before the closing lines
        reporter.flush()
        data.save(p.step)
        summary = {"status": p.status, "step": p.step, "total_steps": total, "params": params,
                   "precision": trainer.precision, "ranks": dist.size, **reporter.summary()}
        return _finish(p, run, ckpts, evaluator, summary, flag.signal) if chief else summary
