"""One record per question, the students' side: what a question asks and how a student's figures are held to it.

A `Question` carries its key (the `question` argument of `nk.check`, e.g. "q5" or "lab_nic"), its number in the
homework (None for the bottleneck lab's parts), its title, the measurement behind it (nmtkit.analysis.questions),
its targets (figure -> `Target`: tolerance and hint) and, when its check is graded by hand for now, why.
`Registry` holds them keyed by question, the way nmtkit.cluster.launchers makes launchers from one factory: every
reader (the report, `nk.check`, `nmtkit grade`, the class's grades) asks the registry, so adding or retiring a
question is one record. The instructor's extension (decider, verdict, rubric) is nmtkit.course.instructor.book.

The lowest layer both nmtkit.analysis and nmtkit.course import: it imports nothing of the kit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

Tolerance = tuple[float, float]  # (relative, absolute): within max(rel x |want|, abs)
# each tolerance is set by what the figure decides: exact for a yes/no or a list of files, 1% for a formula evaluated
# on exact inputs, 2% for a mean the student may compute over slightly different steps, 10% for bytes counted from
# network samples (the decision, the measured bytes against the ring's bound, needs no more)
EXACT, FORMULA, MEAN, COUNTED = (0.0, 0.0), (0.01, 0.0), (0.02, 0.0), (0.10, 0.0)


class Target(NamedTuple):
    tol: Tolerance
    hint: str  # units and the idea in words; never a value or a direction


@dataclass(frozen=True)
class Question:
    key: str                          # nk.check's question: "q1".."q11", "lab_predict", ...
    title: str
    number: int | None = None         # the homework's number; None for a part of notebook 04's lab
    measure: Callable | None = None   # (run, fig_dir, Options) -> (evidence, figure); None: decided on a lab table
    targets: dict[str, Target] = field(default_factory=dict)
    hand_graded: str = ""             # why its check is graded by hand for now ("" : the check grades it)

    @property
    def lab(self) -> bool:
        return self.number is None


class Registry(dict):
    """key -> Question, in the order registered (the homework's by number, then the lab's parts)."""

    def add(self, q: Question) -> Question:
        self[q.key] = q
        return q

    def homework(self) -> list[Question]:
        """The numbered questions, by number."""
        return sorted((q for q in self.values() if q.number is not None), key=lambda q: q.number)

    def hand_graded(self) -> dict[str, str]:
        """key -> why, for the questions whose checks are graded by hand for now."""
        return {k: q.hand_graded for k, q in self.items() if q.hand_graded}

    def numbered(self, number: int) -> Question:
        found = [q for q in self.values() if q.number == number]
        if not found:
            raise KeyError(number)
        return found[0]
