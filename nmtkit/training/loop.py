"""The training loop (nanoGPT's train.py, in TensorFlow): set-up, steps, finish.

    summary = train(cfg, "runs/baseline")                          # one process
    summary = train(cfg, run, dist=Horovod(), on_log=publish)     # every Horovod rank (nmtkit.cluster)

Single process and Horovod differ only in `dist` (nmtkit.training.dist). Rank 0 ("chief") writes checkpoints,
TensorBoard events, scalars.jsonl, translations and BLEU; every rank decodes its share of each evaluation and
writes its own ranks/rank<R>.jsonl step times. The run directory and its run.json belong to nmtkit.runs.RunDir.
The pieces: trainer.py (the step), reporter.py (the log line and rank log), checkpoints.py, evaluate.py,
metrics.py, signals.py (stop at the next step).
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from nmtkit.config import Config
from nmtkit.errors import RunDirError, TrainError
from nmtkit.model.transformer import count_params
from nmtkit.runs import MONITOR_DIR, RunDir
from nmtkit.training.budget import Budget, Plateau, Projection, measured_step_s, outlives
from nmtkit.training.checkpoints import Checkpoints, DataPosition, _check_resumable, copy_data_files, finished_summary
from nmtkit.training.dist import Single, set_threads
from nmtkit.training.evaluate import Evaluator
from nmtkit.training.metrics import Scalars, peak_flops
from nmtkit.training.reporter import Reporter
from nmtkit.training.signals import stop_on_signals
from nmtkit.training.trainer import Trainer, trainer_for


def train(cfg: Config, run_dir: str | os.PathLike | RunDir, *, data_dir: str | os.PathLike | None = None, dist=None,
          on_log: Callable[[dict], None] | None = None, resume: bool = True, progress: bool | None = None,
          deadline: float | None = None) -> dict:
    """Train (or resume) a run; returns a summary dict (status, step, losses, BLEU, timing).

    `progress`: a tqdm bar on rank 0 (default: when interactive, single process and no on_log publisher).
    `run_dir`: a path or a RunDir. One process takes the run directory's session itself; a rank of a cluster job
    gets its driver's as an argument (a RunDir opened from the driver's RunHandle, which holds the token).
    `deadline`: when the allocation running this ends (epoch seconds; nmtkit.allocation), else None.
    """
    dist = dist or Single()
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    # the config as this run uses it, frozen from here on (a copy: the caller's stays theirs); config.json
    # records the data this run used
    cfg = cfg.with_overrides({"data.dir": str(Path(data_dir or cfg.data.dir))}).freeze()
    if rd.token:  # the driver's session (a rank of a cluster job), or the caller's own
        return _train(cfg, rd, dist, on_log, resume, progress, deadline)
    if dist.size > 1:
        raise RunDirError(f"{rd.path}: {dist.size} ranks need their driver's session: start them with "
                          f"Cluster.launch or `nmtkit train --np N`, which lock the run directory for them")
    with rd.session():  # the lock's owner for a lone run (docs/architecture.md, "Who holds the lock")
        if rd.message.startswith("took over"):
            print(rd.message, flush=True)
        return _train(cfg, rd, dist, on_log, resume, progress, deadline)


@dataclass
class Progress:
    """Where the loop is: the step, the last checkpointed and evaluated steps, the status it will end with and why."""

    step: int
    last_saved: int
    status: str = "running"
    reason: str | None = None
    evaluated: int = -1


@dataclass
class Spend:
    """Rank 0's account of the run's time (all sessions) and pace, against its budget and plateau rule."""

    budget: Budget
    plateau: Plateau
    prior_h: float                 # hours the run's earlier sessions trained
    step_s: float | None = None    # this session's measured pace (or the last session's, until measured)
    eval_s: float = 0.0            # the last dev evaluation's wall time: reserved twice (dev + test) for the finish
    first_s: float = 0.0           # this session's first step, tracing included: the reserve's stand-in until an
                                   # evaluation is timed (the final one traces its graphs too)
    t0: float = 0.0
    projected: bool = False
    deadline: float | None = None  # the allocation's end (epoch seconds), when it has one

    def hours(self) -> float:
        return self.prior_h + (time.time() - self.t0) / 3600

    def stop_reason(self, p: Progress, t) -> str | None:
        if self.plateau.reached:
            return "plateau"
        one_eval = self.eval_s or self.first_s
        if self.budget.exhausted(self.hours(), p.step, self.step_s, t.ckpt_every, t.steps, 2 * one_eval):
            return "budget"  # room kept for the final dev and test evaluation
        # a time-limit stop has no final evaluation (the run resumes in the next job); one evaluation's room is
        # kept for a dev evaluation falling due before the checkpoint
        if outlives(self.deadline, time.time(), p.step, self.step_s, t.ckpt_every, t.steps, one_eval):
            return "time limit"
        return None


def _train(cfg: Config, rd: RunDir, dist, on_log, resume: bool, progress: bool | None,
           deadline: float | None) -> dict:
    from nmtkit.data.pipeline import make_dataset
    set_threads(dist)  # before TensorFlow's first op: the thread pools are fixed from then on
    data_dir = Path(cfg.data.dir)
    tok, chief, t = _tokenizer(data_dir), dist.is_chief, cfg.train
    # the model, its optimizer and the last checkpoint
    _check_resumable(rd.path, cfg, resume)
    trainer = trainer_for(cfg, tok.vocab_size, dist)  # this process's last one when the graph is the same
    ckpts = Checkpoints(trainer.checkpoint, rd.path, t.keep_checkpoints, trainer.state_bytes())
    if chief:
        ckpts.clean_interrupted_saves()
    ckpts.restore()
    trainer.sync_variables()
    start = int(trainer.step.numpy())
    done = finished_summary(rd.path, start, t.steps)
    if done is not None:  # nothing to train: don't re-evaluate or overwrite the finished run's record
        if chief:
            print(f"run already finished at step {start} (train.steps={t.steps}); raise train.steps to continue",
                  flush=True)
        return done
    # the run's record and its budget (rank 0)
    params = count_params(trainer.model)
    spend = _spend(cfg, rd, dist, deadline) if chief else None
    if chief:
        _start_run(rd, cfg, data_dir, dist, trainer, start, params)
    # the input, from where the last session stopped
    peak = peak_flops(trainer.precision)  # before the input pipeline's threads start
    ds = make_dataset(data_dir, "train", micro_batches(cfg.data, trainer.accum), rank=dist.rank, size=dist.size,
                      seed=t.seed, shuffle=True, repeat=True, pad_to_bucket=trainer.xla)  # XLA: one program per bucket
    data = DataPosition.open(ds, rd.path, dist.rank, start, trainer.accum, t.keep_checkpoints)
    p = Progress(step=start, last_saved=start)
    if progress is None:
        progress = _interactive() and dist.size == 1 and on_log is None

    # the loop, with everything it must close whatever happens
    with contextlib.ExitStack() as stack:
        _start_sampler(stack, cfg, rd, dist)
        scalars = stack.enter_context(Scalars(rd.path, chief))
        bar = _progress_bar(stack, chief and progress, t.steps, start)
        flag = stop_on_signals(stack)
        stack.push(_failure_recorder(rd, dist, p))
        evaluator = Evaluator(cfg, rd.path, data_dir, trainer, tok, scalars, ckpts, dist)  # every rank decodes a share
        reporter = Reporter(cfg, dist, rd.path, trainer, tok.vocab_size, peak, scalars, bar, on_log)
        stack.callback(reporter.flush)  # a failing run still leaves its finished steps in the rank log
        if spend is not None:
            spend.t0 = time.time()
        _steps(p, cfg, dist, data, trainer, reporter, flag, spend, rd, ckpts, evaluator)
        # the end: the last steps logged, the input position and (rank 0) the last checkpoint and evaluation
        if bar is not None:
            bar.close()  # before the closing lines
        reporter.flush()
        data.save(p.step)
        summary = {"status": p.status, "step": p.step, "total_steps": t.steps, "params": params,
                   "precision": trainer.precision, "ranks": dist.size, **reporter.summary()}
        if spend is not None:
            summary.update(reason=p.reason, spent_hours=spend.hours())
        if not chief:
            return _share(p, evaluator, summary, dist)
        return _finish(p, t, rd, ckpts, evaluator, summary, spend, dist)


def _steps(p: Progress, cfg: Config, dist, data: DataPosition, trainer: Trainer, reporter: Reporter, flag,
           spend: Spend | None, rd: RunDir, ckpts: Checkpoints, evaluator: Evaluator) -> None:
    """The training loop: one `if` per cadence, top-down. Ends with p.status set (finished, or stopped and why)."""
    t, chief = cfg.train, dist.is_chief
    try:
        while p.step < t.steps:
            # stop? every rank agrees to stop at the same step (a signal, maybe another rank's; rank 0's budget)
            why = spend.stop_reason(p, t) if spend is not None else None
            if dist.any(flag.requested or why is not None):
                p.status, p.reason = "stopped", why or flag.signal or "interrupt"
                break
            # one optimizer step over the micro-batches
            t0 = time.perf_counter()
            micro = [next(data.iterator) for _ in range(trainer.accum)]
            stats = trainer.run_step(micro)
            p.step += 1
            reporter.step(p.step, micro, stats, time.perf_counter() - t0)
            # log: the one host sync of the interval
            if p.step % t.log_every == 0 or p.step == t.steps:
                reporter.log(p.step)
                if chief:
                    rd.check_ours()
                    _project(spend, rd, p, t, reporter)
            # checkpoint: every rank its input position, rank 0 the model
            if t.ckpt_every and p.step % t.ckpt_every == 0:
                reporter.flush()  # the rank log holds every step a checkpoint covers
                data.save(p.step)
                if chief:
                    ckpts.save(p.step)
                    p.last_saved = p.step
                    rd.progress(p.step)
            # evaluate on dev (every rank decodes a share; rank 0 writes)
            if cfg.eval.every and p.step % cfg.eval.every == 0 and p.step < t.steps:
                _evaluate(evaluator, spend, rd, p)
        else:
            p.status = "finished"
    except KeyboardInterrupt:  # a second Ctrl-C, or no handler (not the main thread): still leave a checkpoint
        p.status, p.reason = "stopped", "interrupt"


def _finish(p: Progress, t, rd: RunDir, ckpts: Checkpoints, evaluator: Evaluator, summary: dict, spend: Spend,
            dist) -> dict:
    """Rank 0, after the loop: the last checkpoint; a finished run, or one its budget or plateau stopped, gets its
    final dev and test evaluation (unless eval.at_end is off), not one stopped before its allocation's time limit
    (it resumes in the next job, and a busy host's evaluation once outlasted the reserve); run.json records how it
    ended."""
    rd.check_ours()
    if p.step != p.last_saved or not ckpts.latest.latest_checkpoint:
        ckpts.save(p.step)
    if p.status == "stopped":
        nxt = min(t.steps, p.step + t.ckpt_every - p.step % t.ckpt_every) if t.ckpt_every else t.steps
        more = {"budget": f" by its budget ({spend.budget.describe()}: going on to the next checkpoint, step {nxt}, "
                          f"and the final evaluation would pass it)",
                "time limit": f" before its allocation's time limit (going on to the next checkpoint, step {nxt}, "
                              f"would pass it; the final evaluation waits for the run's end)",
                "plateau": f": dev BLEU did not improve by {spend.plateau.min_improvement:g} for "
                           f"{spend.plateau.patience} evaluations"}.get(p.reason, f" ({p.reason})")
        print(f"stopped at step {p.step} of {summary['total_steps']}{more}; checkpoint saved, train again with the "
              f"same run directory to resume", flush=True)
    final = evaluator.cfg.eval.at_end and (p.status == "finished" or p.reason in ("budget", "plateau"))
    if dist.any(final):  # the other ranks wait here to hear whether they decode their share
        summary.update(_final_evaluation(p, evaluator))
    summary.update(evaluator.summary())
    rd.ended(p.status, p.step, reason=p.reason, summary=summary, spent_hours=spend.hours())  # the next session's start
    return summary


def _spend(cfg: Config, rd: RunDir, dist, deadline: float | None) -> Spend:
    """Rank 0 at the start: the budget (refused here when it cannot buy a step at the last session's pace) and the
    plateau record, continuing what earlier sessions left in run.json."""
    status = rd.status()
    budget = Budget.of(cfg, nodes=max(1, dist.size // getattr(dist, "local_size", 1)))
    prior_h, step_s = status.get("spent_hours") or 0.0, (status.get("projection") or {}).get("step_s")
    budget.check_affordable(prior_h, step_s)
    return Spend(budget, Plateau.of(cfg, status), prior_h, step_s, deadline=deadline)


def _project(spend: Spend, rd: RunDir, p: Progress, t, reporter: Reporter) -> None:
    """Rank 0 at each log interval: the measured pace, and where it takes the run (a line the first time)."""
    step_s = measured_step_s(reporter.step_times[-1000:] if len(reporter.step_times) > 1000 else reporter.step_times)
    spend.first_s = spend.first_s or (reporter.step_times[0] if reporter.step_times else 0.0)
    if step_s is None:
        rd.progress(p.step, spent_hours=spend.hours())
        return
    spend.step_s = step_s
    proj = Projection(p.step, t.steps, step_s, spend.hours(), spend.budget.nodes, spend.budget.price)
    if not spend.projected:
        micro = reporter.trainer.micro  # the time's projection beside the memory's (nmtkit.model.memory)
        print(f"{proj.line(spend.budget)}; memory {micro.projection.total / 2**30:.1f} GiB a step per device in "
              f"{micro.count} micro-batch(es)", flush=True)
        spend.projected = True
    rd.progress(p.step, spent_hours=proj.spent_h, **proj.fields())


def _share(p: Progress, evaluator: Evaluator, summary: dict, dist) -> dict:
    """A rank other than 0, after the loop: its share of the final evaluation, when rank 0 (who knows why the run
    ended) has one."""
    if dist.any(False):
        _final_evaluation(p, evaluator)
    return summary


def _final_evaluation(p: Progress, evaluator: Evaluator) -> dict:
    """The end's dev evaluation (unless the last step had one) and test score; every rank, its share."""
    if p.evaluated != p.step:
        evaluator.dev(p.step)
    return evaluator.test(p.step)


def _evaluate(evaluator: Evaluator, spend: Spend | None, rd: RunDir, p: Progress) -> None:
    """A dev evaluation; on rank 0 (spend) timed (the budget keeps room for the final one) and fed to the plateau
    rule."""
    t0 = time.time()
    ev = evaluator.dev(p.step)
    p.evaluated = p.step
    if spend is None:
        return
    spend.eval_s = time.time() - t0
    if spend.plateau.patience:
        spend.plateau.add(p.step, ev["bleu"])
        rd.record(**spend.plateau.fields())


def _interactive() -> bool:
    """A terminal, or a notebook's kernel: a running kernel app, not merely ipykernel imported (the CLI's cluster
    code imports it through ipyparallel)."""
    app = getattr(sys.modules.get("ipykernel.kernelapp"), "IPKernelApp", None)
    return sys.stdout.isatty() or (app is not None and app.initialized())


def _tokenizer(data_dir: Path):
    from nmtkit.data.bpe import Tokenizer
    if not (data_dir / "spm.model").exists():
        raise TrainError(f"{data_dir}/spm.model: no prepared data here; run `nmtkit prepare` "
                         f"(or nk.prepare(cfg)) first, or pass the right --data")
    return Tokenizer.from_data_dir(data_dir)


def micro_batches(dc, n: int):
    """The data config whose batches are the per-device batch split in `n` equal parts, rounded up (3 x 86 = 258
    where the config says 256: nmtkit.model.memory.fit says so when it plans them)."""
    if n == 1:
        return dc
    return replace(dc, batch_sentences=-(-dc.batch_sentences // n),
                   batch_tokens=-(-dc.batch_tokens // n) if dc.batch_tokens else 0)


def _start_run(rd: RunDir, cfg: Config, data_dir: Path, dist, trainer: Trainer, start: int, params: int) -> None:
    """Rank 0: config.json, the BPE model and data stats, run.json "running", and the opening line."""
    rd.save_config(cfg)
    copy_data_files(data_dir, rd.path)
    rd.started(step=start, total_steps=cfg.train.steps, ranks=dist.size, host=dist.host,
               precision=trainer.precision, precision_reason=trainer.precision_reason, dist=dist.describe(),
               params=params, resumed_from=start or None, **trainer.micro.fields())
    print(f"{dist.describe()} | {trainer.precision} ({trainer.precision_reason}) | {params:,} parameters | "
          f"{'resuming at step ' + str(start) if start else 'fresh start'} -> {cfg.train.steps} steps"
          + (f" | {trainer.towers} towers side by side, one thread an op" if trainer.towers > 1 else "")
          + (" | reusing this process's traced step (its last run had the same graph)"
             if getattr(trainer, "reused", False) else ""), flush=True)
    print(trainer.micro.line(), flush=True)


def _start_sampler(stack: contextlib.ExitStack, cfg: Config, rd: RunDir, dist) -> None:
    if not cfg.monitor.enabled:
        return
    try:
        from nmtkit.monitor import Sampler
    except ImportError:
        return
    sampler = Sampler(rd.monitor_log(dist.host, dist.rank), interval=cfg.monitor.interval, rank=dist.rank,
                      host=dist.host, tb_dir=rd.path / MONITOR_DIR / "tb" if dist.is_chief else None).start()
    stack.callback(sampler.stop)


def _progress_bar(stack: contextlib.ExitStack, enabled: bool, total: int, start: int):
    if not enabled:
        return None
    from tqdm.auto import tqdm
    return stack.enter_context(tqdm(total=total, initial=start, desc="train", unit="step", dynamic_ncols=True))


def _failure_recorder(rd: RunDir, dist, p: Progress):
    """An ExitStack exit callback: an exception on its way out marks run.json "failed" (rank 0)."""
    def record(exc_type, exc, tb):
        if exc is not None and dist.is_chief:
            rd.failed(f"{exc_type.__name__}: {exc}", step=p.step)
        return False
    return record
