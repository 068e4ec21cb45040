"""The class report's copy flag: a submission whose graded figures pass another variant's checks while failing its
own (each variant's answers: nmtkit.course.instructor.variant_answers). TensorFlow-free."""
from __future__ import annotations

from nmtkit.analysis import variants
from nmtkit.course.instructor.hidden import wrong
from nmtkit.course.instructor.variant_answers import answers, on_shipped
from nmtkit.course.targets import targets


def passes(figures: dict, want: dict, q: str) -> bool:
    """Whether every recorded figure of `q` is within its tolerance of `want`'s."""
    return all(not wrong(v, want[n], targets(q)[n].tol) for n, v in figures.items() if n in want)


def flags(rows: list[dict]) -> list[tuple[str, str, str, list[str]]]:
    """(student, their variant, the other variant, the questions) for each submission with figures that pass another
    variant's checks and fail their own."""
    table = {}
    out = []
    for r in rows:
        own = r.get("variant")
        if not own:
            continue
        by_q = {}  # the figures each check cell recorded (numbers; a notebook's, by name: names are unique)
        for nb in r["results"]:
            recorded = nb.get("figures") or {}
            for q in on_shipped():
                got = {n: recorded[n] for n in targets(q) if n in recorded}
                if got:
                    by_q[q] = got
        for other in variants.names():
            if other == own:
                continue
            for name in (own, other):
                table.setdefault(name, answers(name))
            hits = [q for q, figs in sorted(by_q.items()) if q in table[other] and q in table[own]
                    and passes(figs, table[other][q], q) and not passes(figs, table[own][q], q)]
            if hits:
                out.append((r["student"], own, other, hits))
    return out
