"""The practice variant's expected figures: the one file of answers a student's kit carries, so that there, on the
practice variant's shipped runs, `nk.check` says right or wrong and how far off (graded variants' checks stay
form-only; their answers never leave the instructor's kit).

    nmtkit/reference/practice-expected.json   {"variant": "practice", "made": ..., "figures": {q: {name: value}}}

Written by the instructor's `nmtkit variant expected` (and by `nmtkit release`, into the release) from the
instructor's decisions on the practice runs (nmtkit.course.instructor.variant_answers); read here. TensorFlow-free.
"""
from __future__ import annotations

from pathlib import Path

from nmtkit.analysis import variants
from nmtkit.analysis.questions import book
from nmtkit.course.targets import targets, within
from nmtkit.errors import ExerciseError
from nmtkit.files import atomic_write_json, read_json

NAME = "practice-expected.json"
PATH = variants.ROOT / NAME


def write(figures: dict, made: str, dest: Path = PATH) -> Path:
    """The expected figures ({q: {name: value}}, only the registry's figures) into `dest`, atomically."""
    def plain(v):  # numpy's numbers as JSON's
        return v if isinstance(v, (str, bool)) else int(v) if float(v).is_integer() and not isinstance(v, float) \
            else float(v)
    keep = {q: {k: plain(v) for k, v in vals.items() if q in book and k in book[q].targets}
            for q, vals in figures.items()}
    return atomic_write_json(dest, {"variant": variants.PRACTICE, "made": made, "figures": keep})


def read(path: Path = PATH) -> dict:
    """{q: {name: value}}; empty where the kit carries no such file."""
    return (read_json(path, ExerciseError, missing={}) or {}).get("figures", {})


def _on_practice_runs(rep, question: str, run) -> bool:
    """Whether the figures are taken on the practice variant's own shipped runs (not the student's, not a graded
    variant's): only there does the practice answer apply."""
    root = variants.ROOT.resolve()
    if question.startswith("lab_"):
        paths = [Path(p).resolve() for p in (getattr(rep, "attrs", {}).get("paths") or ())]
        return bool(paths) and all(p.parent == root for p in paths)
    path = getattr(run, "path", None)
    return path is not None and Path(path).resolve().parent == root


def distance(value, want) -> str:
    """How far `value` (of the right form: check() tested that first) is from `want`, in words: the relative gap
    with its sign, or "not it" for a name or a yes/no."""
    if isinstance(want, (str, bool)) or not isinstance(want, (int, float)):
        return "not it"
    gap = float(value) - want
    return f"{gap / abs(want):+.1%} off" if want else f"{gap:+.3g} off"


def practice_check(rep, question: str, run, values: dict) -> bool:
    """In a student's kit: check `values` against the practice variant's expected figures when the practice variant
    is active and the figures are on its runs; print ✓ or raise ExerciseError naming each wrong figure, how far off
    it is and the hint. False where this does not apply (the caller then checks the form only)."""
    want = read().get(question)
    if not want or variants.active() != variants.PRACTICE or not _on_practice_runs(rep, question, run):
        return False
    off = []
    for name, (tol, hint) in targets(question).items():
        if name not in want:
            continue
        got, w = values.get(name), want[name]
        ok = (str(got).strip() == w) if isinstance(w, str) else \
            (got is not None and bool(got) == w) if isinstance(w, bool) else within(got, w, *tol)
        if not ok:
            off.append(f"{name}: {distance(got, w)} (allowed: {tol[0]:.0%} or {tol[1]:g}). Hint: {hint}")
    if off:
        raise ExerciseError(f"✗ {question} on the practice variant, wrong: " + "; ".join(off))
    print(f"✓ {question} on the practice variant: right ({', '.join(want)} within their tolerances)")
    return True
