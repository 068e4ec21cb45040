"""Exercise checks: the student computes the figures that decide a question from the loaded logs. In the
instructor's kit `check` compares them with the kit's own (nmtkit.course.instructor.hidden, on
nmtkit.course.instructor.decisions) and raises with a hint that points at the mistake, so a wrong answer fails
grading; in a student's release (nmtkit release), which carries neither, it checks their form only and never a
direction or a value.

    nk.check(rep, "q5", bound_mb=..., link_s_1g=..., run=ref)   # notebook 05, after the student's cell
    nk.check_plan(my_ranks)                                      # notebook 03: local and cross ranks of vm1:2,vm2:2

Neither ever prints an expected figure or plan.

The figures, their tolerances and hints are the questions' registry's (nmtkit.course.targets reads it).
TensorFlow-free.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from nmtkit.course import INSTRUCTOR_KIT
from nmtkit.course.targets import (  # noqa: F401
    EXACT,
    FORMULA,
    FRACTIONS,
    MEAN,
    NAMES,
    PLAN_FORM,
    YES_NO,
    runs_of,
)
from nmtkit.course.targets import (
    question as registered,
)
from nmtkit.errors import ExerciseError


def _hidden():
    """The instructor's graded comparison (nmtkit.course.instructor.hidden), or None in a student's release."""
    if not INSTRUCTOR_KIT:
        return None
    from nmtkit.course.instructor import hidden
    return hidden


def form_problem(name: str, value, tol) -> str | None:
    """What is wrong with the form of a figure (missing, not a number, a percentage for a fraction, a yes/no
    or a list given as something else), never with its value: the same reply for any value of the right form."""
    if value is None:
        return "missing"
    if name in YES_NO:
        return None if isinstance(value, (bool, np.bool_)) else "a yes/no (True or False)"
    if name in NAMES:
        return None if isinstance(value, str) and value.strip() else "a name (text), such as an interface's"
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
    the idea to revisit: the same reply for any value of the right form, so it cannot be searched.

    Introduced in notebook 04_bottleneck_lab."""
    if not registered(question).lab and not runs_of(rep):
        print("no runs to check against: the reference run ships with the kit; reinstall it (pip install -e .)")
        return
    targets = registered(question).targets  # one line naming the known questions when it is not one
    hidden = _hidden()
    if hidden is not None:
        return hidden.graded(rep, question, run, values)
    for name, (tol, hint) in targets.items():
        why = form_problem(name, values.get(name), tol)
        if why:
            raise ExerciseError(f"✗ {question} {name}: {why}. Revisit: {hint}")
    from nmtkit.course.expected import practice_check
    if practice_check(rep, question, run, values):  # the practice variant's runs: right or wrong, and how far
        return
    print(f"✓ {question}: " + ", ".join(targets) + " have the right form. Whether they are right is for the "
          "grader's checks; before you write your answer, revisit what each one means:\n"
          + "\n".join(f"  {name}: {hint}" for name, (_, hint) in targets.items()))


def plan_form_problem(answer, ranks: int) -> str | None:
    """What is wrong with the form of a rank plan for `ranks` ranks (not a mapping, ranks missing or extra, an entry
    that is no pair of whole numbers), never with its values: the same reply for any plan of the right form."""
    if not isinstance(answer, Mapping):
        return "not a dict {rank: (local_rank, cross_rank)}"
    try:
        keys = {int(k) for k in answer if not isinstance(k, (bool, np.bool_))}
    except (TypeError, ValueError):
        return "a rank that is no whole number"
    if keys != set(range(ranks)) or len(answer) != ranks:
        return f"not every rank 0..{ranks - 1} once ({len(answer)} entries)"
    for v in answer.values():
        if not (isinstance(v, (tuple, list)) and len(v) == 2
                and all(isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) for x in v)):
            return "an entry that is no pair (local_rank, cross_rank) of whole numbers"
    return None


def check_plan(answer: dict, hosts: str = "vm1:2,vm2:2") -> None:
    """answer = {rank: (local_rank, cross_rank)} for every rank of `hosts`. In the instructor's kit (and in `nmtkit
    grade`) compared with Horovod's own plan; in a student's release on its form only: the same reply for any plan
    of the right form, and never the expected plan.

    Introduced in notebook 03_horovod_multinode."""
    from nmtkit.cluster.plan import parse_hosts
    why = plan_form_problem(answer, sum(h.slots for h in parse_hosts(hosts)))
    if why:
        raise ExerciseError(f"✗ the plan of {hosts}: {why}. Give {PLAN_FORM}")
    hidden = _hidden()
    if hidden is not None:
        return hidden.graded_plan(answer, hosts)
    print(f"✓ the plan of {hosts} has the right form. Whether it is right is for the grader's checks; before you "
          f"write your rule, revisit how the ranks are placed on the hosts of -H and what each of the two numbers "
          f"counts")
