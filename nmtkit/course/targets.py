"""What notebooks 04 and 05's exercises ask for, read from the questions' registry (nmtkit.analysis.questions.book:
per question, the figures by name, each with the tolerance it is graded at and a hint in words), and the one
tolerance test. Shared by the formative checks of a student's release (nmtkit.course.exercises) and the instructor's
graded ones (nmtkit.course.instructor.hidden).
"""
from __future__ import annotations

import math

from nmtkit.errors import ExerciseError
from nmtkit.question import COUNTED, EXACT, FORMULA, MEAN, Question, Target  # noqa: F401  part of the API

FRACTIONS = ("mfu", "share_near_rate")  # figures whose form is a fraction, not a percentage
YES_NO = ("trained", "overfitting")
NAMES = ("iface",)  # figures that are a name (text), compared exactly


def question(key: str) -> Question:
    """The registry's record of `key` (nmtkit.analysis.questions.book); ExerciseError naming the known ones."""
    from nmtkit.analysis.questions import book
    if key not in book:
        raise ExerciseError(f"no exercise {key!r}: choose one of {', '.join(book)}")
    return book[key]


def targets(key: str) -> dict[str, Target]:
    """figure -> Target (tolerance, hint) of question `key`."""
    return question(key).targets


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
