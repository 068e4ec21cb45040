"""Each variant's answers: the instructor's figures for the questions graded on shipped runs (notebook 05's q4, q5,
q6, q11; notebook 04's lab), computed from the variant's own runs (variant.json names them). The pairwise test
(tests/instructor/test_variants_differ.py), the practice variant's expected figures (nmtkit.course.expected) and
the class report's copy flag read them here. TensorFlow-free.
"""
from __future__ import annotations

from nmtkit.analysis import variants
from nmtkit.analysis.evidence import Options
from nmtkit.analysis.logs import load_run
from nmtkit.course.instructor import decisions
from nmtkit.course.instructor.book import book, decide
from nmtkit.errors import AnalysisError


def on_shipped() -> list[str]:
    """The questions graded on the shipped runs (their records say so)."""
    return [k for k, m in book.items() if m.on_shipped]


def answers(name: str, o: Options | None = None) -> dict:
    """q -> the instructor's figures for variant `name` (the questions graded on shipped runs that its
    runs decide)."""
    o, meta = o or Options(), variants.info(name)
    ref = load_run(variants.run_dir(meta["reference"], name))
    shipped = on_shipped()
    got = {q: v for q, v in decide(ref, o).items() if q in shipped}
    short = load_run(variants.run_dir(meta["ablation"][-1], name))
    try:
        got["q6"] = decisions.q6(short, o)
    except AnalysisError:
        pass
    labs = sorted(p for p in variants.directory(name).glob("lab-*") if p.is_dir())
    got.update({q: v for q, v in decisions.lab(labs, o).items() if q in shipped and q != "lab_nic"})
    nic = decisions.lab([ref.path], o).get("lab_nic")
    if nic:
        got["lab_nic"] = nic
    return got


def write_practice_expected(dest=None):
    """The practice variant's answers into the file a student's kit carries (nmtkit.course.expected): there its
    checks say right or wrong. Never a graded variant's."""
    import time

    from nmtkit.course import expected
    return expected.write(answers(variants.PRACTICE), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                          dest or expected.PATH)
