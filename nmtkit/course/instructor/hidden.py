"""The instructor's half of notebook 05's checks: the student's figures against the kit's own
(nmtkit.course.instructor.book.decide) for the same run, with "too high"/"too low" and the hint. A student's release
leaves this module out, so its checks are formative only (nmtkit.course.exercises); `nmtkit grade`, which runs in
the instructor's kit, puts these back. TensorFlow-free.
"""
from __future__ import annotations

import math

from nmtkit.course.instructor.book import decide, hand_graded
from nmtkit.course.targets import runs_of, targets, within
from nmtkit.errors import ExerciseError


def expected(rep, question: str, run) -> tuple[dict | None, str, str | None]:
    """(the kit's decision figures for `question` on `run`, or None; the run's name; why there are none). `run`: a
    Run, a run's name, or None (the report's last run)."""
    runs = runs_of(rep)
    if run is None or isinstance(run, str):
        found = [r for r in runs if run is None or r.name == run]
        if not found:
            raise ExerciseError(f"{question}: no run {run!r} in this analysis (runs: {[r.name for r in runs]})")
        run = found[-1]
    cache = run.__dict__.setdefault("_decisions", {})  # one computation per run and kernel
    if "all" not in cache:
        cache["all"] = decide(run)
    got = cache["all"]
    return got.get(question), run.name, got["missing"].get(question)


def wrong(value, want, tol) -> str | None:
    """Why `value` is not `want` (None when it is): "missing", "too high", "too low" or "not it"."""
    if value is None:
        return "missing"
    if isinstance(want, str):  # a name (an interface): exactly it, as text
        return None if isinstance(value, str) and value.strip() == want else "not it"
    if isinstance(value, (str, bytes)):  # text is no number and no yes/no ("0.514", "False"): its form is wrong
        return "not a number" if not isinstance(want, (bool, list, tuple, set)) else "not it"
    if isinstance(want, bool) or isinstance(want, (list, tuple, set)):
        norm = (lambda v: sorted(str(x).rsplit("/", 1)[-1] for x in v)) if not isinstance(want, bool) else bool
        try:
            return None if norm(value) == norm(want) else "not it"
        except TypeError:
            return "not it"
    try:
        value = float(value)
    except (TypeError, ValueError):
        return "not a number"
    if within(value, want, *tol):
        return None
    return "not a number" if not math.isfinite(value) else "too high" if value > want else "too low"


def expected_lab(table, question: str) -> tuple[dict | None, str | None]:
    """The kit's lab figures for `question` on the runs of the student's lab table (its attrs["paths"])."""
    from nmtkit.course.instructor.decisions import lab
    paths = tuple(table.attrs.get("paths") or ())
    if not paths:
        raise ExerciseError(f"{question}: give the table nk.lab_runs() returned (it knows its runs)")
    if paths not in _LAB:
        _LAB[paths] = lab(list(paths))
    got = _LAB[paths]
    return got.get(question), got["missing"].get(question)


_LAB: dict = {}  # one computation per set of runs and kernel


def compared(want: dict, question: str, values: dict) -> list[tuple[str, str | None, str]]:
    """(figure, why it is off or None, hint) for each figure of `question`: the comparison, never the value."""
    return [(name, wrong(values.get(name), want[name], tol), hint) for name, (tol, hint) in targets(question).items()]


def graded(rep, question: str, run, values: dict) -> None:
    """Compare the student's figures for `question` with the kit's; print ✓ or raise ExerciseError naming the first
    wrong figure, whether it is too high or too low, and a hint. A question graded by hand for now
    (book.hand_graded) never raises: it prints the same comparison marked as graded by hand, for the grader."""
    figures = targets(question)
    if question.startswith("lab_"):
        want, why = expected_lab(rep, question)
        name = "these runs"
    else:
        want, name, why = expected(rep, question, run)
    if want is None:  # nothing to hold the student to: the honest answer is that these logs cannot tell
        print(f"– {question}: the logs of {name} cannot decide it ({why}); say so in your answer")
        return
    found = compared(want, question, values)
    why = hand_graded(question)
    if why:
        print(f"✎ {question}: graded by hand for now ({why}); the check's comparison: "
              + ", ".join(f"{n} {w or 'agrees'}" for n, w, _ in found))
        return
    for name, why, hint in found:
        if why:
            raise ExerciseError(f"✗ {question} {name}: {why}. Hint: {hint}")
    # the names, not the values: a value measured on this machine (an MFU's peak) would differ on the grader's
    print(f"✓ {question}: " + ", ".join(figures) + " agree with the logs")


PLAN_HINT = ("ranks fill a host before the next; local_rank counts within a host, cross_rank counts hosts among the "
             "ranks with the same local_rank")


def graded_plan(answer: dict, hosts: str) -> None:
    """Notebook 03's rank plan (of the right form: nmtkit.course.exercises.check_plan) against Horovod's own: print
    ✓ with the student's plan, or raise ExerciseError naming the wrong ranks and the hint, never the expected pairs."""
    from nmtkit.cluster.plan import assign_slots, parse_hosts
    slots = assign_slots([h.hostname for h in parse_hosts(hosts) for _ in range(h.slots)])
    want = {s.rank: (s.local_rank, s.cross_rank) for s in slots}
    got = {int(k): tuple(int(x) for x in v) for k, v in answer.items()}
    wrong_ranks = sorted(r for r in want if got.get(r) != want[r])
    if wrong_ranks:
        raise ExerciseError(f"✗ the plan of {hosts}: ranks {wrong_ranks} are not it. Hint: {PLAN_HINT}")
    plan = ", ".join(f"rank {r} -> local {local}, cross {cross}" for r, (local, cross) in sorted(got.items()))
    print(f"✓ the plan of {hosts}: {plan}")
