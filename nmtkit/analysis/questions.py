"""The homework's 11 questions: for each, the run's measurements and its figure (the evidence), no verdict.

`measured(number, run, fig_dir, o) -> (evidence, figure)` and `evidence_all(run, fig_dir, o) -> [Answer]` (the
answers' text left empty). The worded verdicts, and the decisions they rest on, are the course's
(nmtkit.course.instructor.verdicts), which builds on these; the plain report and a student see only this.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import nmtkit.analysis.figures as figures
from nmtkit.analysis.evidence import (  # noqa: F401  Options: part of the API
    Options,
    bytes_per_param,
    measure_checkpoint_files,
    measure_checkpoint_size,
    measure_learning_rate,
    measure_overfitting,
    measure_plateau,
    measure_step_time,
    measure_time_and_cost,
    measure_training_set,
)
from nmtkit.analysis.logs import Run
from nmtkit.analysis.machines import measure_correlation, measure_network, measure_utilisation
from nmtkit.errors import AnalysisError

TITLES = {
    1: "How long did the run take, and how long would the homework's step count take at this run's pace?",
    2: "Is the model fully trained?",
    3: "Is the model overfitting?",
    4: "Were the GPUs fully utilised?",
    5: "Was the network the bottleneck?",
    6: "What does the learning-rate plot show, and why?",
    7: "How big is the training set?",
    8: "Which files make up a TensorFlow checkpoint?",
    9: "How big is a checkpoint, and how much of it is weights vs optimizer state?",
    10: "What is the average step time?",
    11: "Is step time correlated with inter-node network throughput?",
}


@dataclass
class Answer:
    number: int
    title: str
    answer: str = ""
    evidence: dict = field(default_factory=dict)
    figure: Path | None = None
    answered: bool = True
    missing: str = ""
    run: str = ""


def missing(number: int, what: str, run: Run, evidence: dict | None = None, answer: str = "") -> Answer:
    return Answer(number, TITLES[number], answer=answer or f"Cannot answer from these logs: {what}.",
                  evidence=evidence or {}, answered=False, missing=what, run=run.name)


def _drawn(fig_dir, run: Run, number: int, name: str, draw) -> Path | None:
    """draw(path) into <fig_dir>/<run>-q<NN>-<name>.png; None when no figures are wanted."""
    return None if fig_dir is None else draw(Path(fig_dir) / f"{run.name}-q{number:02d}-{name}.png")


def _q1(run, fig_dir, o):
    ev, curve = measure_time_and_cost(run, o)
    ev = {k: v for k, v in ev.items() if k not in ("projected_hours", "projected_cost", "price_per_node_hour",
                                                   "lower_bound", "target_source")}
    return ev, _drawn(fig_dir, run, 1, "progress", lambda p: figures.progress(
        curve["hours"].to_numpy(), curve["step"].to_numpy(), ev["step"], ev["steps_per_s"] * 3600, p))


def _q2(run, fig_dir, o):
    ev, bleu, loss = measure_plateau(run, o)
    return ev, _drawn(fig_dir, run, 2, "plateau", lambda p: figures.plateau(bleu, loss, o.plateau_k, p))


def _q3(run, fig_dir, o):
    ev, g = measure_overfitting(run, o)
    return ev, _drawn(fig_dir, run, 3, "gap", lambda p: figures.loss_gap(g["step"], g["train"], g["eval"], p))


def _q4(run, fig_dir, o):
    return (measure_utilisation(run, o),
            _drawn(fig_dir, run, 4, "utilisation", lambda p: figures.device_utilisation([run], p)))


def _q5(run, fig_dir, o):
    return (measure_network(run, replace(o, bytes_per_param=bytes_per_param(run))),
            _drawn(fig_dir, run, 5, "network", lambda p: figures.network([run], p)))


def _q6(run, fig_dir, o):
    ev = measure_learning_rate(run)
    return ev, _drawn(fig_dir, run, 6, "lr", lambda p: figures.learning_rate([run], p, ev.get("warmup_steps")))


def _q7(run, fig_dir, o):
    return measure_training_set(run), None


def _q8(run, fig_dir, o):
    ev = measure_checkpoint_files(run)
    name, files = Path(ev["prefix"]).name, ev["files"]
    return ev, _drawn(fig_dir, run, 8, "files", lambda p: figures.bars(
        [Path(f["file"]).name for f in files], [f["bytes"] / 1e6 for f in files], p, f"Files of {name}", "MB"))


def _q9(run, fig_dir, o):
    ev = measure_checkpoint_size(run)
    if "problem" in ev:
        return ev, None
    return ev, _drawn(fig_dir, run, 9, "split", lambda p: figures.bars(
        ["weights", "optimizer (Adam m, v, ...)", "other"], [ev["weights_mb"], ev["optimizer_mb"], ev["other_mb"]],
        p, "Checkpoint contents", "MB"))


def _q10(run, fig_dir, o):
    ev, x = measure_step_time(run, o)
    return ev, _drawn(fig_dir, run, 10, "steptime", lambda p: figures.histogram(
        x * 1000, p, "Step time", "ms/step", {}))


def _q11(run, fig_dir, o):
    ev, pairs = measure_correlation(run, o)
    r, iface = ev["pearson_r"], ev["iface"]
    return ev, _drawn(fig_dir, run, 11, "scatter", lambda p: figures.scatter(
        pairs["net_Bps"].to_numpy() / 1e6, pairs["step_time"].to_numpy() * 1000, p,
        f"Step time vs {iface} throughput (r = {r:+.2f})", f"{iface} MB/s, busier direction (one way, as the link's "
        f"rate)", "step time (ms)"))


MEASURES = (_q1, _q2, _q3, _q4, _q5, _q6, _q7, _q8, _q9, _q10, _q11)


def measured(number: int, run: Run, fig_dir=None, o: Options | None = None) -> tuple[dict, Path | None]:
    """(the measurements behind question `number`, its figure or None); AnalysisError when the logs cannot say."""
    return MEASURES[number - 1](run, fig_dir, o or Options())


def guarded(number: int, run: Run, answer) -> Answer:
    """answer() -> Answer, or the Answer that says what is missing; a failure says so instead of sinking a report."""
    try:
        return answer()
    except AnalysisError as e:
        return missing(number, str(e), run)
    except Exception as e:  # noqa: BLE001
        return missing(number, f"the logs could not be analysed ({type(e).__name__}: {e})", run)


def evidence_all(run: Run, fig_dir: str | Path | None = None, options: Options | None = None,
                 numbers=range(1, 12)) -> list[Answer]:
    """The questions' evidence and figures for one run (all 11, or `numbers`), no verdicts (each answer's text
    left empty)."""
    o = options or Options()

    def one(n):
        ev, fig = measured(n, run, fig_dir, o)
        if n == 9 and "problem" in ev:
            return missing(9, ev["problem"], run, ev)
        return Answer(n, TITLES[n], "", ev, fig, run=run.name)
    return [guarded(n, run, lambda n=n: one(n)) for n in numbers]
