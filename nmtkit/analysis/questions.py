"""The homework's questions: for each, the run's measurements and its figure (the evidence), no verdict; and the
students' registry of questions, `book` (nmtkit.question: key -> Question, with its title and targets from
nmtkit.analysis.questiontargets).

`measured(number, run, fig_dir, o) -> (evidence, figure)` and `evidence_all(run, fig_dir, o) -> [Answer]` (the
answers' text left empty). The worded verdicts, and the decisions they rest on, are the course's
(nmtkit.course.instructor.verdicts), which builds on these; the plain report and a student see only this.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import nmtkit.analysis.figures as figures
from nmtkit.analysis.evidence import (
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
from nmtkit.question import COUNTED, EXACT, FORMULA, MEAN, Question, Registry, Target


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
    return Answer(number, book.numbered(number).title, answer=answer or f"Cannot answer from these logs: {what}.",
                  evidence=evidence or {}, answered=False, missing=what, run=run.name)


def title(number: int) -> str:
    return book.numbered(number).title


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


book = Registry()  # key -> Question: the students' side of every question (nmtkit.question)
T = Target
# One record per question: its key, title, number, measurement and targets (figure -> tolerance and hint: units, the
# idea; never a value or a direction), and why its check is graded by hand for now, if it is. Graded by hand: a
# question whose check a figure taken from theory alone (no logs) passes on the shipped runs, because those runs
# measure it within their own noise of the theory (tests/instructor/test_theory_only.py finds them; the figures are
# in docs/instructors.md): `nmtkit grade` scores it "manual" and the instructor's check prints its comparison marked
# as graded by hand. The lab's parts (notebook 04) are checked on the lab's table (nk.lab_runs()), not on one run.
book.add(Question(
    "q1", "How long did the run take, and how long would the homework's step count take at this run's pace?", 1, _q1,
    {
        "step_s": T(MEAN, "seconds per step of the steady steps of every rank: the first steps of each rank "
                "trace the graph and are no guide to the rest"),
        "hours_to_target": T(MEAN, "the homework's step count times this run's own seconds per step, in hours; "
                "nothing scaled to another model"),
    }))

book.add(Question(
    "q2", 'Is the model fully trained?', 2, _q2,
    {
        "bleu_gain": T((0, 0.01), "BLEU points: the last evaluation minus the one k evaluations earlier (k as the "
                                  "rule states it), steps fixed before looking, no best-of"),
        "loss_drop": T((0, 0.001), "eval loss: the one k evaluations before the last minus the last"),
        "trained": T(EXACT, "both curves must be shown to pass the stated rule, BLEU's difference by the paired "
                            "bootstrap's whole interval within the equivalence margin in BLEU; a curve still "
                            "improving, or one the dev set cannot decide, is not shown trained"),
    }))

book.add(Question(
    "q3", 'Is the model overfitting?', 3, _q3,
    {
        "loss_up": T((0, 0.001), "the last eval loss minus the lowest eval loss of the run"),
        "overfitting": T(EXACT, "decided on the held-out loss: did it turn up while the train loss kept falling?"),
    }))

book.add(Question(
    "q4", 'Were the GPUs fully utilised?', 4, _q4,
    {
        "flops_per_step": T(MEAN, "model FLOPs of one rank's step from the shape: 2 per weight per token forward, "
                "3x that with the backward pass, each side's weights with its own side's "
                "tokens, plus attention over the padded lengths"),
        "tokens_per_s": T(MEAN, "source + target tokens one rank processes per second of steady step"),
        "mfu": T(MEAN, "FLOPs per step over seconds per step over the peak the run measured; a fraction, not a "
                "percentage"),
    }))

book.add(Question(
    "q5", 'Was the network the bottleneck?', 5, _q5,
    {
        "bytes_per_param": T(EXACT, "what one gradient value costs on the wire depends on the run's gradient "
                                    "compression setting"),
        "bound_mb": T(FORMULA, "the flat ring's bound for N ranks, in MB of 10^6 bytes"),
        "measured_over_bound": T(COUNTED, "bytes counted on the link between two step ends, per step, over the "
                "bound; busier direction of the inter-node interface"),
        "link_s_1g": T(FORMULA, "the bound in bits over the link's bits per second"),
        "link_s_10g": T(FORMULA, "the bound in bits over the link's bits per second"),
    },
    hand_graded='measured_over_bound: on the reference run a figure written without the logs passes this check'))

book.add(Question(
    "q6", 'What does the learning-rate plot show, and why?', 6, _q6,
    {
        "peak_step": T(EXACT, "the logged step where the short warm-up run's learning rate is highest, read off "
                "its curve"),
        "loss_gap_100": T((0, 0.001), "the short warm-up run's train loss minus the default run's, each as logged "
                "at the step where the longer warm-up ends"),
        "final_gap": T((0, 0.001), "the short warm-up run's eval loss minus the default run's, each at its last "
                "evaluation"),
    }))

book.add(Question(
    "q7", 'How big is the training set?', 7, _q7,
    {
        "train_mb": T(FORMULA, "both sides of the training split, the cleaned text only, in 10^6 bytes"),
        "train_mib": T(FORMULA, "the same bytes in mebibytes, 2^20 bytes each"),
        "train_lines": T(EXACT, "the sentence pairs of the training split: a pair is one line in each side's "
                "file, so count it once"),
    }))

book.add(Question(
    "q8", 'Which files make up a TensorFlow checkpoint?', 8, _q8,
    {
        "files": T(EXACT, "only the newest checkpoint's files, and the small state file that names it; no "
                "directories, no older checkpoints"),
    }))

book.add(Question(
    "q9", 'How big is a checkpoint, and how much of it is weights vs optimizer state?', 9, _q9,
    {
        "predicted_mb": T(FORMULA, "float32 weights plus Adam's two slots of the same shape, from the parameter "
                "count alone, in 10^6 bytes"),
    },
    hand_graded="predicted_mb is theory by design, and the measured split rep.evidence(9) shows adds up to it: a "
                "copied measurement passes this check"))

book.add(Question(
    "q10", 'What is the average step time?', 10, _q10,
    {
        "mean_ms": T(MEAN, "milliseconds over the steady steps of every rank"),
        "tokens_per_step": T(MEAN, "one step is one update of all ranks together: add the ranks' tokens"),
    }))

book.add(Question(
    "q11", 'Is step time correlated with inter-node network throughput?', 11, _q11,
    {
        "bytes_per_step_mb": T(COUNTED, "bytes counted on the link between two step ends, per step"),
        "link_share": T(COUNTED, "the time those bytes need on the measured link, over the mean step time"),
    },
    hand_graded='bytes_per_step_mb: on the reference run a figure written without the logs passes this check'))

book.add(Question(
    "lab_predict", "Lab (a): each run's step predicted from the baseline and the ring's bytes over the link",
    None, None,
    {
        "predicted_s": T(MEAN, "for the slowest link's run without compression: the baseline run's "
                "step (the run whose link costs least) plus the flat ring's bytes per step "
                "for N ranks, in bits over the link's bits per "
                "second measured by preflight"),
        "compute_s": T(MEAN, "the baseline run's step less its own exchange, timed alone right after "
                "training: what a step costs without the link"),
    }))

book.add(Question(
    "lab_fit", "Lab (c): does step = compute + link time hold (the fit's slope and intercept)?", None, None,
    {
        "k": T((0.05, 0.0), "the slope of a straight line through (link time from the ring's bytes and the "
                "measured rate, measured step) of the shaped runs"),
        "intercept_s": T((0.05, 0.01), "the same line's step at zero link time, in seconds"),
        "eff_mbit_s": T((0.05, 0.0), "for the slowest link's run without compression: the ring's bytes per "
                "step over the part of its step the compute does not explain, in Mbit/s"),
    },
    hand_graded="k, intercept_s and eff_mbit_s: on the lab's runs figures written without the logs pass this check"))

book.add(Question(
    "lab_fp16", 'Lab: what did fp16 compression cut, and where did it shorten the step?', None, None,
    {
        "bytes_ratio": T(COUNTED, "bytes the link carried per step (counted between step ends, as question 5 "
                                  "counts them), with fp16 over without, at the same rate"),
        "step_ratio": T(MEAN, "the measured steps, with fp16 over without, at the same rate"),
        "fp16_mb": T(COUNTED, "the bytes the link carried per step with fp16, in MB of 10^6 bytes"),
    },
    hand_graded="bytes_ratio: on the lab's runs a figure written without the logs passes this check"))

book.add(Question(
    "lab_bursts", 'Lab: peaks against means: does a mean below capacity clear the network?', None, None,
    {
        "share_near_rate": T((0, 0.03), "the fraction of the link's samples while steps ran that reach "
                "within 20% of the rate preflight measured; a fraction"),
        "mean_over_rate": T((0.05, 0.0), "the mean of the same samples over that rate"),
        "mb_per_step": T(COUNTED, "what that mean carries in one mean step, in MB of 10^6 bytes (Mbit/s "
                "times seconds is Mbit, not MB)"),
    }))

book.add(Question(
    "lab_scaling", 'Lab: where does adding ranks stop paying?', None, None,
    {
        "base_tokens_per_s": T(MEAN, "tokens per second of the one-rank run: what both speedups divide "
                "by"),
        "speedup_2": T(MEAN, "tokens per second of the whole run over the one-rank run's"),
        "speedup_4": T(MEAN, "tokens per second of the whole run over the one-rank run's"),
    }))

book.add(Question(
    "lab_nic", 'Lab: which interface carried the gradients between the hosts?', None, None,
    {
        "iface": T(EXACT, "the interface that carried the gradients between the hosts: one that leaves the "
                "host, whose bytes per step meet the ring's bound"),
        "over_bound": T(COUNTED, "that interface's bytes per step (its busier direction, counted between step "
                                 "ends, as question 5 counts them) over the flat ring's bound for N ranks"),
    }))


def measured(number: int, run: Run, fig_dir=None, o: Options | None = None) -> tuple[dict, Path | None]:
    """(the measurements behind question `number`, its figure or None); AnalysisError when the logs cannot say."""
    return book.numbered(number).measure(run, fig_dir, o or Options())


def guarded(number: int, run: Run, answer) -> Answer:
    """answer() -> Answer, or the Answer that says what is missing; a failure says so instead of sinking a report."""
    try:
        return answer()
    except AnalysisError as e:
        return missing(number, str(e), run)
    except Exception as e:  # noqa: BLE001
        return missing(number, f"the logs could not be analysed ({type(e).__name__}: {e})", run)


def evidence_all(run: Run, fig_dir: str | Path | None = None, options: Options | None = None,
                 numbers=None) -> list[Answer]:
    """The questions' evidence and figures for one run (every numbered question of the registry, or `numbers`), no
    verdicts (each answer's text left empty)."""
    o = options or Options()
    numbers = [q.number for q in book.homework()] if numbers is None else numbers

    def one(n):
        ev, fig = measured(n, run, fig_dir, o)
        if n == 9 and "problem" in ev:
            return missing(9, ev["problem"], run, ev)
        return Answer(n, book.numbered(n).title, "", ev, fig, run=run.name)
    return [guarded(n, run, lambda n=n: one(n)) for n in numbers]
