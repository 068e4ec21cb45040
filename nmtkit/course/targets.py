"""What notebooks 04 and 05's exercises ask for: per question, the figures by name, each with the tolerance it is graded
at and a hint in words (units, the idea; never a value or a direction). Shared by the formative checks of a
student's release (nmtkit.course.exercises) and the instructor's graded ones (nmtkit.course.instructor.hidden).

Each figure's tolerance is set by what it decides: exact for a yes/no or a list of files, 1% for a formula
evaluated on exact inputs, 2% for a mean the student may compute over slightly different steps, 10% for bytes
counted from one-second network samples (the decision, the measured bytes against the ring's bound, needs no more).
"""
from __future__ import annotations

import math

EXACT, FORMULA, MEAN, COUNTED = (0.0, 0.0), (0.01, 0.0), (0.02, 0.0), (0.10, 0.0)
FRACTIONS = ("mfu", "share_near_rate")  # figures whose form is a fraction, not a percentage
YES_NO = ("trained", "overfitting")
NAMES = ("iface",)  # figures that are a name (text), compared exactly
# q -> {figure: ((relative, absolute) tolerance, hint)}
TARGETS = {
    "q1": {"step_s": (MEAN, "seconds per step of the steady steps of every rank: the first steps of each rank "
                            "trace the graph and are no guide to the rest"),
           "hours_to_target": (MEAN, "the homework's step count times this run's own seconds per step, in hours; "
                                     "nothing scaled to another model")},
    "q2": {"bleu_gain": ((0, 0.01), "BLEU points: the best evaluation inside the window minus the best before it"),
           "loss_drop": ((0, 0.001), "eval loss: the best before the window minus the best inside it"),
           "trained": (EXACT, "both curves must be shown to pass the stated rule, BLEU by the paired bootstrap's "
                              "interval; a curve still improving, or one the dev set cannot decide, is not shown "
                              "trained")},
    "q3": {"loss_up": ((0, 0.001), "the last eval loss minus the lowest eval loss of the run"),
           "overfitting": (EXACT, "decided on the held-out loss: did it turn up while the train loss kept falling?")},
    "q4": {"flops_per_step": (MEAN, "model FLOPs of one rank's step from the shape: 2 per weight per token forward, "
                                    "3x that with the backward pass, each side's weights with its own side's "
                                    "tokens, plus attention over the padded lengths"),
           "tokens_per_s": (MEAN, "source + target tokens one rank processes per second of steady step"),
           "mfu": (MEAN, "FLOPs per step over seconds per step over the peak the run measured; a fraction, not a "
                         "percentage")},
    "q5": {"bytes_per_param": (EXACT,
                               "what one gradient value costs on the wire depends on the run's gradient compression "
                               "setting"),
           "bound_mb": (FORMULA, "the flat ring's bound for N ranks, in MB of 10^6 bytes"),
           "measured_over_bound": (COUNTED, "bytes counted on the link between two step ends, per step, over the "
                                            "bound; busier direction of the inter-node interface"),
           "link_s_1g": (FORMULA, "the bound in bits over the link's bits per second"),
           "link_s_10g": (FORMULA, "the bound in bits over the link's bits per second")},
    "q6": {"peak_step": (EXACT, "the logged step where the short warm-up run's learning rate is highest, read off "
                                "its curve"),
           "loss_gap_100": ((0, 0.001), "the short warm-up run's train loss minus the default run's, each as logged "
                                        "at the step where the longer warm-up ends"),
           "final_gap": ((0, 0.001), "the short warm-up run's eval loss minus the default run's, each at its last "
                                     "evaluation")},
    "q7": {"train_mb": (FORMULA, "both sides of the training split, the cleaned text only, in 10^6 bytes"),
           "train_mib": (FORMULA, "the same bytes in mebibytes, 2^20 bytes each"),
           "train_lines": (EXACT, "the sentence pairs of the training split: a pair is one line in each side's "
                                  "file, so count it once")},
    "q8": {"files": (EXACT, "only the newest checkpoint's files, and the small state file that names it; no "
                            "directories, no older checkpoints")},
    "q9": {"predicted_mb": (FORMULA, "float32 weights plus Adam's two slots of the same shape, from the parameter "
                                     "count alone, in 10^6 bytes")},
    "q10": {"mean_ms": (MEAN, "milliseconds over the steady steps of every rank"),
            "tokens_per_step": (MEAN, "one step is one update of all ranks together: add the ranks' tokens")},
    "q11": {"bytes_per_step_mb": (COUNTED, "bytes counted on the link between two step ends, per step"),
            "link_share": (COUNTED, "the time those bytes need on the measured link, over the mean step time")},
    # the bottleneck lab (notebook 04): checked on the lab's table (nk.lab_runs()), not on one run
    "lab_predict": {"predicted_s": (MEAN, "for the slowest link's run without compression: the baseline run's "
                                          "step (the run whose link costs least) plus the flat ring's bytes per step "
                                          "for N ranks, in bits over the link's bits per "
                                          "second measured by preflight"),
                    "compute_s": (MEAN, "the baseline run's step less its own exchange, timed alone right after "
                                        "training: what a step costs without the link")},
    "lab_fit": {"k": ((0.05, 0.0), "the slope of a straight line through (link time from the ring's bytes and the "
                                   "measured rate, measured step) of the shaped runs"),
                "intercept_s": ((0.05, 0.01), "the same line's step at zero link time, in seconds"),
                "eff_mbit_s": ((0.05, 0.0), "for the slowest link's run without compression: the ring's bytes per "
                                            "step over the part of its step the compute does not explain, in Mbit/s")},
    "lab_fp16": {"bytes_ratio": (COUNTED, "bytes the link carried per step (its mean rate over the steps times the "
                                          "step), with fp16 over without, at the same rate"),
                 "step_ratio": (MEAN, "the measured steps, with fp16 over without, at the same rate"),
                 "fp16_mb": (COUNTED, "the bytes the link carried per step with fp16, in MB of 10^6 bytes")},
    "lab_bursts": {"share_near_rate": ((0, 0.03), "the fraction of the link's samples while steps ran that reach "
                                                  "within 20% of the rate preflight measured; a fraction"),
                   "mean_over_rate": ((0.05, 0.0), "the mean of the same samples over that rate"),
                   "mb_per_step": (COUNTED, "what that mean carries in one mean step, in MB of 10^6 bytes (Mbit/s "
                                            "times seconds is Mbit, not MB)")},
    "lab_scaling": {"base_tokens_per_s": (MEAN, "tokens per second of the one-rank run: what both speedups divide "
                                                "by"),
                    "speedup_2": (MEAN, "tokens per second of the whole run over the one-rank run's"),
                    "speedup_4": (MEAN, "tokens per second of the whole run over the one-rank run's")},
    "lab_nic": {"iface": (EXACT, "the interface that carried the gradients between the hosts: one that leaves the "
                                 "host, whose bytes per step meet the ring's bound"),
                "over_bound": (COUNTED, "that interface's bytes per step (its busier direction's mean rate while "
                                        "steps ran, times the mean step) over the flat ring's bound for N ranks")},
}


# Graded by hand for now: questions whose check a figure taken from theory alone (no logs) passes on the shipped runs
# (the reference run and the lab's), because those runs measure it within their own noise of the theory; tightening
# the tolerance below that distance would fail honest measurements too (tests/instructor/test_theory_only.py
# finds them; the figures are in docs/instructors.md). `nmtkit grade` scores these checks "manual" (no points) and
# the instructor's check prints its comparison marked as graded by hand. Until runs where theory and measurement
# differ are shipped, the grader reads the student's work and verdict for these. question -> why.
HAND_GRADED: dict[str, str] = {
    "q5": "measured_over_bound: on the reference run a figure written without the logs passes this check",
    "q9": "predicted_mb is theory by design, and the measured split rep.evidence(9) shows adds up to it: a copied "
          "measurement passes this check",
    "q11": "bytes_per_step_mb: on the reference run a figure written without the logs passes this check",
    "lab_fit": "k, intercept_s and eff_mbit_s: on the lab's runs figures written without the logs pass this check",
    "lab_fp16": "bytes_ratio: on the lab's runs a figure written without the logs passes this check",
}
# notebook 03's rank plan: its form, and what to revisit (the rule itself, asked for in the answer, is the graded
# check's hint only: nmtkit.course.instructor.hidden)
PLAN_FORM = ("{rank: (local_rank, cross_rank)} for every rank of the launch, each a pair of whole numbers; revisit "
             "how the ranks are placed on the hosts of -H and what each of the two numbers counts")


def within(value, want: float, rel: float, abs_tol: float = 0.0) -> bool:
    """The one tolerance test of the course's checks: `value` is a finite number within max(rel x |want|, abs_tol)
    of `want` (a value that is no number is not within)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return False
    return math.isfinite(value) and abs(value - want) <= max(rel * abs(want), abs_tol)


def runs_of(rep) -> list:
    rep = getattr(rep, "report", rep)  # an nmtkit.notebook.Analysis or a Report
    return list(rep.runs) if rep is not None else []
