"""Exercise checks: the student computes a number from the loaded logs; `check` compares it with nmtkit's own
evidence for the same run and prints a tick, or raises with a hint (so a wrong answer fails nbval grading).

    check(rep, 10, my_mean_ms)            # notebook 04, after the student's cell
    check_lr(my_lr, cfg)                  # notebook 02: the schedule written as a function
    check_plan(my_ranks)                  # notebook 03: local and cross ranks of mpirun -n 4 -H vm1:2,vm2:2

Each question names the evidence key it is checked against, the tolerance (relative, with an absolute floor) and a
hint that points at the mistake students make most often. TensorFlow-free.
"""
from __future__ import annotations

from nmtkit.errors import NmtkitError

import math
from dataclasses import dataclass


class ExerciseError(NmtkitError, AssertionError):
    """A wrong exercise answer; the message says what nmtkit measured and gives a hint."""


@dataclass(frozen=True)
class Target:
    key: str | tuple             # evidence key (or a function of the evidence dict)
    rel: float                   # relative tolerance
    hint: str
    abs_tol: float = 0.0
    scale: float = 1.0           # evidence value x scale = the unit the exercise asks for


def _q1(ev):
    return ev["elapsed_s"] / 60


def _q5(ev):
    return ev["allreduce_bytes_per_rank_per_step"] / 1e6


def _q9(ev):
    return ev["total_mb"] / ev["weights_mb"]


TARGETS = {
    1: Target(_q1, 0.15, "elapsed minutes: from the first step (ranks' wall_time minus its step_time) to the last "
                         "scalar record (the final evaluation), divided by 60", abs_tol=0.2),
    2: Target("bleu_best", 0.0, "the highest Eval_BLEU_Score over all evaluations (not the last one)", abs_tol=1e-6),
    3: Target("gap_last", 0.0, "eval_loss minus train_loss at the last evaluation step (signed: negative when eval "
                               "loss is lower)", abs_tol=0.02),
    4: Target(("devices", "mean"), 0.0, "the mean of gpu0_util (or cpu_percent without GPUs) over the samples taken "
                                         "while training ran, on the first host (one sampler per node)", abs_tol=10.0),
    5: Target(_q5, 0.01, "2 (n - 1) / n x parameters x 4 bytes, in MB (10^6 bytes); n = ranks, parameters from "
                         "run.status['params']"),
    6: Target("predicted_peak_lr", 0.01, "lr_scale x d_model^-0.5 x warmup_steps^-0.5: at step = warmup both terms "
                                         "of the min() are equal"),
    7: Target("bytes", 0.01, "the bytes of train.en plus train.de, in MB (10^6 bytes)", scale=1e-6),
    8: Target(lambda ev: len(ev["files"]), 0.0, "the 'checkpoint' state file, the .index and every .data shard of "
                                                "the latest prefix", abs_tol=0.0),
    9: Target(_q9, 0.05, "total checkpoint bytes / weight bytes (parameters x 4): Adam adds two values per weight"),
    10: Target("mean_ms", 0.02, "the mean step_time of ranks/rank<R>.jsonl in ms, leaving out each rank's first 3 "
                                "steps (tracing)"),
    11: Target("pearson_r", 0.0, "pairs.net_Bps.corr(pairs.step_time) over the aligned pairs", abs_tol=0.01),
}


def reference(rep, number: int, run: int = -1) -> float:
    """nmtkit's own value for exercise `number` on the report's run (default: the last, the distributed run)."""
    t = TARGETS[number]
    answer = rep.answers[rep.runs[run].name][number - 1]
    if not answer.answered:
        raise ExerciseError(f"Q{number}: nmtkit could not answer this from the logs ({answer.missing}); train the "
                            f"runs first")
    ev = answer.evidence
    if callable(t.key):
        return float(t.key(ev))
    if isinstance(t.key, tuple):  # the first device of the first host
        return float(ev[t.key[0]][0][t.key[1]])
    return float(ev[t.key]) * t.scale


def _close(value: float, ref: float, rel: float, abs_tol: float) -> bool:
    return math.isfinite(value) and abs(value - ref) <= max(rel * abs(ref), abs_tol)


def _verdict(label: str, value: float, ref: float, rel: float, abs_tol: float, hint: str) -> str:
    if _close(value, ref, rel, abs_tol):
        return f"✓ {label}: {value:.4g} (nmtkit: {ref:.4g})"
    raise ExerciseError(f"✗ {label}: you have {value:.4g}, nmtkit measured {ref:.4g}. Hint: {hint}")


def check(rep, number: int, value, run: int = -1) -> None:
    """Compare the student's answer to question `number` with nmtkit's evidence; print ✓ or raise ✗ + hint."""
    if rep is None:
        print("no runs to check against: run notebooks 02 and 03 first")
        return
    t = TARGETS[number]
    print(_verdict(f"Q{number}", float(value), reference(rep, number, run), t.rel, t.abs_tol, t.hint))


def check_lr(fn, cfg, steps=(1, 10, 100, 1000, 10_000)) -> None:
    """The student's learning-rate function against nmtkit.lr at a few steps (warmup and decay both)."""
    from nmtkit import lr
    for step in (*steps, cfg.train.warmup_steps):
        want = lr.lr_for(cfg, step)
        got = float(fn(step))
        _verdict(f"lr({step})", got, want, 1e-6, 0.0,
                 "lr_scale x d_model^-0.5 x min(step^-0.5, step x warmup_steps^-1.5), with the config's values")
    print(f"✓ your schedule matches nmtkit.lr at steps {', '.join(map(str, steps))} and at warmup "
          f"({cfg.train.warmup_steps})")


def check_plan(answer: dict, hosts: str = "vm1:2,vm2:2") -> None:
    """answer = {rank: (local_rank, cross_rank)} for every rank of `hosts`, checked against Horovod's own plan."""
    from nmtkit.cluster.plan import assign_slots, parse_hosts
    slots = assign_slots([h.hostname for h in parse_hosts(hosts) for _ in range(h.slots)])
    want = {s.rank: (s.local_rank, s.cross_rank) for s in slots}
    got = {int(k): tuple(v) for k, v in answer.items()}
    if got != want:
        wrong = sorted(r for r in want if got.get(r) != want[r])
        raise ExerciseError(f"✗ ranks {wrong}: expected (local_rank, cross_rank) {[want[r] for r in wrong]}, you have "
                            f"{[got.get(r) for r in wrong]}. Hint: ranks fill a host before the next; local_rank counts "
                            f"within a host, cross_rank counts hosts among the ranks with the same local_rank")
    print(f"✓ the plan of {hosts}: " + ", ".join(f"rank {r} -> local {l}, cross {c}" for r, (l, c) in want.items()))
