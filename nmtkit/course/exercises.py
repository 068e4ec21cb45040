"""Exercise checks: the student computes the figures that decide a question from the loaded logs. In the
instructor's kit `check` compares them with the kit's own (nmtkit.course.hidden, on nmtkit.course.decisions) and
raises with a hint that points at the mistake, so a wrong answer fails grading; in a student's release (nmtkit
release), which carries neither, it checks their form only and never a direction or a value.

    nk.check(rep, "q5", bound_mb=..., link_s_1g=..., run=ref)   # notebook 04, after the student's cell
    nk.check_lr(my_lr, cfg)                                      # notebook 02: the schedule written as a function
    nk.check_plan(my_ranks)                                      # notebook 03: local and cross ranks of vm1:2,vm2:2

Each figure has a tolerance set by what it decides: exact for a yes/no or a list of files, 1% for a formula
evaluated on exact inputs, 2% for a mean the student may compute over slightly different steps, 10% for bytes
counted from one-second network samples (the decision, the measured bytes against the ring's bound, needs no
more). TensorFlow-free.
"""
from __future__ import annotations


import math

import numpy as np

from nmtkit.errors import ExerciseError


EXACT, FORMULA, MEAN, COUNTED = (0.0, 0.0), (0.01, 0.0), (0.02, 0.0), (0.10, 0.0)
FRACTIONS = ("mfu",)  # figures whose form is a fraction, not a percentage
YES_NO = ("trained", "overfitting")
# q -> {figure: ((relative, absolute) tolerance, hint)}
TARGETS = {
    "q1": {"step_s": (MEAN, "seconds per step of the steady steps of every rank: the first steps of each rank "
                            "trace the graph and are no guide to the rest"),
           "hours_to_target": (MEAN, "the homework's step count times this run's own seconds per step, in hours; "
                                     "nothing scaled to another model")},
    "q2": {"bleu_gain": ((0, 0.01), "BLEU points: the best evaluation inside the window minus the best before it"),
           "loss_drop": ((0, 0.001), "eval loss: the best before the window minus the best inside it"),
           "trained": (EXACT, "both curves must pass the stated rule; a curve still improving means not trained")},
    "q3": {"loss_up": ((0, 0.001), "the last eval loss minus the lowest eval loss of the run"),
           "overfitting": (EXACT, "decided on the held-out loss: did it turn up while the train loss kept falling?")},
    "q4": {"flops_per_step": (MEAN, "model FLOPs of one rank's step from the shape: 2 per weight per token forward, "
                                    "3x that with the backward pass, each side's weights with its own side's "
                                    "tokens, plus attention over the padded lengths"),
           "tokens_per_s": (MEAN, "source + target tokens one rank processes per second of steady step"),
           "mfu": (MEAN, "FLOPs per step over seconds per step over the peak the run measured; a fraction, not a "
                         "percentage")},
    "q5": {"bytes_per_param": (EXACT, "what one gradient value costs on the wire depends on the run's gradient compression setting"),
           "bound_mb": (FORMULA, "the flat ring's bound for N ranks, in MB of 10^6 bytes"),
           "measured_over_bound": (COUNTED, "bytes counted on the link between two step ends, per step, over the "
                                            "bound; busier direction of the inter-node interface"),
           "link_s_1g": (FORMULA, "the bound in bits over the link's bits per second"),
           "link_s_10g": (FORMULA, "the bound in bits over the link's bits per second")},
    "q6": {"lr_8k": (FORMULA, "the homework's own config, not this run's; step 8,000 is the end of the warm-up"),
           "lr_300k": (FORMULA, "the homework's own config, not this run's; after the warm-up the schedule decays")},
    "q7": {"train_mb": (FORMULA, "both sides of the training split, the cleaned text only, in 10^6 bytes"),
           "train_mib": (FORMULA, "the same bytes in mebibytes, 2^20 bytes each")},
    "q8": {"files": (EXACT, "only the newest checkpoint's files, and the small state file that names it; no "
                            "directories, no older checkpoints")},
    "q9": {"predicted_mb": (FORMULA, "float32 weights plus Adam's two slots of the same shape, from the parameter "
                                     "count alone, in 10^6 bytes")},
    "q10": {"mean_ms": (MEAN, "milliseconds over the steady steps of every rank"),
            "tokens_per_step": (MEAN, "one step is one update of all ranks together: add the ranks' tokens")},
    "q11": {"bytes_per_step_mb": (COUNTED, "bytes counted on the link between two step ends, per step"),
            "link_share": (COUNTED, "the time those bytes need on the measured link, over the mean step time")},
}


def runs_of(rep) -> list:
    rep = getattr(rep, "report", rep)  # an nmtkit.notebook.Analysis or a Report
    return list(rep.runs) if rep is not None else []


def _hidden():
    """The instructor's graded comparison (nmtkit.course.hidden), or None in a student's release."""
    try:
        from nmtkit.course import hidden
    except ImportError:
        return None
    return hidden


def form_problem(name: str, value, tol) -> str | None:
    """What is wrong with the form of a figure (missing, not a number, a percentage for a fraction, a yes/no
    or a list given as something else), never with its value: the same reply for any value of the right form."""
    if value is None:
        return "missing"
    if name in YES_NO:
        return None if isinstance(value, (bool, np.bool_)) else "a yes/no (True or False)"
    if name == "files":
        return None if isinstance(value, (list, tuple, set)) and all(isinstance(f, str) for f in value) else \
            "a list of file names"
    try:
        x = float(value)
    except (TypeError, ValueError):
        return "not a number"
    if not math.isfinite(x):
        return "not a finite number"
    if name in FRACTIONS and not 0 <= x <= 1:
        return "a fraction between 0 and 1 (not a percentage)"
    return None


def check(rep, question: str, run=None, **values) -> None:
    """Check the student's figures for `question` ("q1".."q11"), given by name. In the instructor's kit (and in
    `nmtkit grade`) against the kit's own figures; in a student's release on their form only (units, shape), with
    the idea to revisit: the same reply for any value of the right form, so it cannot be searched."""
    if not runs_of(rep):
        print("no runs to check against: the reference run ships with the kit; reinstall it (pip install -e .)")
        return
    targets = TARGETS.get(question)
    if targets is None:
        raise ExerciseError(f"no exercise {question!r}: choose one of {', '.join(TARGETS)}")
    hidden = _hidden()
    if hidden is not None:
        return hidden.graded(rep, question, run, values)
    for name, (tol, hint) in targets.items():
        why = form_problem(name, values.get(name), tol)
        if why:
            raise ExerciseError(f"✗ {question} {name}: {why}. Revisit: {hint}")
    print(f"✓ {question}: " + ", ".join(targets) + " have the right form. Whether they are right is for the "
          "grader's checks; before you write your answer, revisit what each one means:\n"
          + "\n".join(f"  {name}: {hint}" for name, (_, hint) in targets.items()))


def _verdict(label: str, value: float, ref: float, rel: float, abs_tol: float, hint: str) -> str:
    if math.isfinite(value) and abs(value - ref) <= max(rel * abs(ref), abs_tol):
        return f"✓ {label}: {value:.4g}"
    raise ExerciseError(f"✗ {label}: you have {value:.4g}, {'too high' if value > ref else 'too low'}. Hint: {hint}")


def check_lr(fn, cfg, steps=(1, 10, 100, 1000, 10_000)) -> None:
    """The student's learning-rate function against nmtkit.lr at a few steps (warmup and decay both)."""
    from nmtkit import lr
    for step in (*steps, cfg.train.warmup_steps):
        want = lr.lr_for(cfg, step)
        got = float(fn(step))
        _verdict(f"lr({step})", got, want, 1e-6, 0.0,
                 "the config's scale, model width and warm-up: a linear rise to the warm-up step, then the inverse "
                 "square root of the step")
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
