"""The reference run shipped with the kit: 2 hosts x 2 ranks over a tc-shaped 200 Mbit/s link (rehearsal).

    from nmtkit.analysis import reference_run, load_run
    ref = load_run(reference_run())          # analyse it beside the student's own run

Made and frozen by `python -m tools.rehearsal.reference` (its manifest.json says how, when and on what).
Importable without TensorFlow; it only names the directory.
"""
from __future__ import annotations

from pathlib import Path

from nmtkit.files import read_json

NAME = "rehearsal-200mbit"
MANIFEST = "manifest.json"
# No shipped file may name a directory of the machine that made it under one of these (written as names, not as
# paths, so that this file itself names none).
FORBIDDEN = tuple(f"/{d}/" for d in ("work", "tmp", "root", "home"))


def default_dir(name: str = NAME) -> Path:
    """Where the package keeps the frozen run (nmtkit/reference/<name>/)."""
    return Path(__file__).resolve().parents[1] / "reference" / name


def reference_run(name: str | None = None) -> Path:
    """The shipped reference run's directory: the active variant's (nmtkit.analysis.variants: the practice variant's
    rehearsal-200mbit, or a graded variant's ~200 Mbit/s run), or the run `name` at the top of nmtkit/reference/;
    AnalysisError when the install lacks it."""
    import nmtkit.analysis.variants as variants
    from nmtkit.errors import AnalysisError
    if name is None:
        v = variants.active()
        d = variants.run_dir(variants.info(v)["reference"], v)
    else:
        d = default_dir(name)
    if not (d / MANIFEST).is_file():
        raise AnalysisError(f"{d}: the reference run {d.name!r} is not installed (no {MANIFEST}); reinstall nmtkit "
                            f"with its package data (pip install -e .)")
    return d


def manifest(name: str | None = None) -> dict:
    """How, when, on what machine and at which rate the reference run was made (its manifest.json)."""
    from nmtkit.errors import AnalysisError
    return read_json(reference_run(name) / MANIFEST, AnalysisError, hint="written by tools.rehearsal")
