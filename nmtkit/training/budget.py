"""What a run will cost, and when to stop it: the projection from measured step times, the budget
(train.max_hours, train.max_cost), the allocation's time limit (a plain deadline: `outlives`) and early stopping
on dev BLEU (eval.early_stopping). TensorFlow-free.

The loop asks two questions. `Budget.exhausted(now, step)`: would training on to the next checkpoint (plus the
final evaluation) cross the budget? Then it stops here, at a checkpoint, with a clean finish. `Plateau.add(step,
bleu)`: has dev BLEU not improved by eval.min_improvement for eval.early_stopping evaluations?
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from nmtkit.config import Config
from nmtkit.errors import ConfigError

SKIP_STEPS = 2  # each session's first steps trace the graph: their times are no guide to the rest
DEADLINE_MARGIN_S = 15.0  # after the stop: the last checkpoint written and the results home before the allocation ends


def _duration(hours: float) -> str:
    s = hours * 3600
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min" if s < 7200 else f"{hours:.1f} h"


@dataclass
class Projection:
    """Where the run stands and where its measured pace takes it: hours so far, to the end, and the cost."""

    step: int
    total: int
    step_s: float            # median step time of this session's measured steps (tracing left out)
    spent_h: float           # training hours of every session so far (evaluations included)
    nodes: int
    price: float             # USD per node-hour; 0 = unknown, and then no cost is shown (never "free")

    @property
    def remaining_h(self) -> float:
        return max(0, self.total - self.step) * self.step_s / 3600

    @property
    def total_h(self) -> float:
        return self.spent_h + self.remaining_h

    def cost(self, hours: float) -> float | None:
        return hours * self.price * self.nodes if self.price > 0 else None

    def line(self, budget: "Budget | None" = None) -> str:
        cost = self.cost(self.total_h)
        money = (f", ${cost:,.2f} at ${self.price:g}/node-hour x {self.nodes} node(s)" if cost is not None
                 else " (no cost shown: monitor.price_per_node_hour is 0)")
        out = (f"projection: {self.step_s * 1000:.1f} ms/step -> step {self.total} after {_duration(self.total_h)} "
               f"in all ({_duration(self.remaining_h)} to go){money}")
        if budget is not None and budget.limit_h is not None and self.total_h > budget.limit_h:
            out += (f"; the budget ({budget.describe()}) buys about {budget.steps_left(self)} more steps, to step "
                    f"{min(self.total, self.step + budget.steps_left(self))} of {self.total}")
        return out

    def fields(self) -> dict:
        """The run.json record of the projection (nmtkit report and the live panel read it)."""
        return {"projection": {"step": self.step, "step_s": self.step_s, "spent_hours": self.spent_h,
                               "total_hours": self.total_h, "total_cost": self.cost(self.total_h),
                               "nodes": self.nodes, "price_per_node_hour": self.price}}


def measured_step_s(step_times: list[float]) -> float | None:
    """The session's typical step time: the median after the tracing steps (None before there are any)."""
    steady = step_times[SKIP_STEPS:]
    return statistics.median(steady) if steady else None


@dataclass
class Budget:
    """train.max_hours and train.max_cost as one limit in hours (the smaller); None when neither is set."""

    max_hours: float
    max_cost: float
    price: float
    nodes: int

    @classmethod
    def of(cls, cfg: Config, nodes: int) -> "Budget":
        b = cls(cfg.train.max_hours, cfg.train.max_cost, cfg.monitor.price_per_node_hour, nodes)
        if b.max_cost and not b.price:
            raise ConfigError("train.max_cost needs a price: set monitor.price_per_node_hour (USD per node-hour, "
                              "e.g. --set monitor.price_per_node_hour=3.06), or give --max-hours instead")
        return b

    @property
    def limit_h(self) -> float | None:
        limits = [self.max_hours] if self.max_hours else []
        if self.max_cost:
            limits.append(self.max_cost / (self.price * self.nodes))
        return min(limits) if limits else None

    def describe(self) -> str:
        parts = ([_duration(self.max_hours)] if self.max_hours else [])
        parts += [f"${self.max_cost:g}"] if self.max_cost else []
        return " / ".join(parts)

    def steps_left(self, p: Projection) -> int:
        return max(0, int((self.limit_h - p.spent_h) * 3600 / p.step_s)) if self.limit_h is not None else p.total

    def check_affordable(self, spent_h: float, step_s: float | None) -> None:
        """At launch: refuse a budget already spent, or one that cannot buy a single step at the run's pace."""
        if self.limit_h is None:
            return
        left_s = (self.limit_h - spent_h) * 3600
        if left_s <= 0 or (step_s is not None and left_s < step_s):
            pace = f"; a step takes {step_s * 1000:.0f} ms" if step_s is not None else ""
            raise ConfigError(f"the budget ({self.describe()}) buys no step: {spent_h * 3600:.0f} s of "
                              f"{self.limit_h * 3600:.0f} s already spent{pace}; raise --max-hours/--max-cost "
                              f"(train.max_hours/max_cost) to continue")

    def exhausted(self, spent_h: float, step: int, step_s: float | None, ckpt_every: int, total: int,
                  reserve_s: float = 0.0) -> bool:
        """Stop now? True when training on to the next checkpoint (or the end), plus `reserve_s` for the final
        evaluation, would cross the budget, so that the run ends at a checkpoint inside it."""
        if self.limit_h is None:
            return False
        return spent_h * 3600 + _ahead_s(step, step_s, ckpt_every, total, reserve_s) > self.limit_h * 3600


def _ahead_s(step: int, step_s: float | None, ckpt_every: int, total: int, reserve_s: float) -> float:
    """Seconds from here to the next checkpoint (or the end) at the measured pace, plus the reserve."""
    to_next = (ckpt_every - step % ckpt_every) if ckpt_every else (total - step)
    return min(to_next, total - step) * (step_s or 0.0) + reserve_s


def outlives(deadline: float | None, now: float, step: int, step_s: float | None, ckpt_every: int, total: int,
             reserve_s: float = 0.0) -> bool:
    """The allocation's time limit as a budget in wall-clock time: True when training on to the next checkpoint
    (or the end), plus `reserve_s` (a dev evaluation that may fall due) and DEADLINE_MARGIN_S, would pass `deadline`
    (epoch seconds; None: no limit). The run then stops here, at a checkpoint, before the allocation ends."""
    if deadline is None:
        return False
    return now + _ahead_s(step, step_s, ckpt_every, total, reserve_s) + DEADLINE_MARGIN_S > deadline


@dataclass
class Plateau:
    """Early stopping on dev BLEU: stop after `patience` evaluations that do not beat the best so far (starting
    from 0 BLEU) by `min_improvement` points. `evaluations` is the record that decided it."""

    patience: int
    min_improvement: float
    best: float = 0.0
    flat: int = 0
    evaluations: list = field(default_factory=list)

    @classmethod
    def of(cls, cfg: Config, status: dict) -> "Plateau":
        """From the config, continuing the record a previous session left in run.json."""
        p = cls(cfg.eval.early_stopping, cfg.eval.min_improvement)
        for step, bleu in (status.get("plateau") or {}).get("evaluations", []):
            p.add(step, bleu)
        return p

    def add(self, step: int, bleu: float) -> bool:
        """Record an evaluation; True when the run should stop on it."""
        self.evaluations.append([step, bleu])
        improved = bleu >= self.best + self.min_improvement if self.min_improvement else bleu > self.best
        self.best, self.flat = (bleu, 0) if improved else (self.best, self.flat + 1)
        return self.reached

    @property
    def reached(self) -> bool:
        return self.patience > 0 and self.flat >= self.patience

    def fields(self) -> dict:
        return {"plateau": {"patience": self.patience, "min_improvement": self.min_improvement, "best": self.best,
                            "flat": self.flat, "evaluations": self.evaluations}}
