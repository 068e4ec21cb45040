"""The student's variant in the notebooks: `nk.variant()` says which shipped runs this student's figures come from,
and asks for the student id once where nothing else gives it (nmtkit.analysis.variants chooses; this module asks,
stores and tells).

    v = nk.variant()                      # notebooks 04 and 05's set-up cells: prints the variant and its source
    v = nk.variant(student_id="s1234")    # give (and store) the id without being asked
    v.reference                           # the variant's reference run (notebook 04's last part, notebook 05)
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from nmtkit.analysis import variants


@dataclass(frozen=True)
class Variant:
    name: str                  # "practice" or "variant-<k>"
    student_id: str | None     # None: no id known (the practice variant)
    source: str                # where the choice came from, in words
    reference: Path = field(repr=False)   # the variant's reference run
    graded: bool = False       # False: the practice variant, whose checks say right or wrong in a student's kit


def _ask() -> str | None:
    """The id typed in answer to one prompt, or None where nobody can answer (nbval, a script without a terminal)."""
    try:
        return input("Your student id, as your course gave it (Enter alone: the practice variant): ").strip() or None
    except (NotImplementedError, EOFError, OSError):  # ipykernel's StdinNotImplementedError is a NotImplementedError
        return None


def variant(student_id: str | None = None, ask: bool = True, ws: Path | None = None) -> Variant:
    """The variant this notebook's graded figures come from, printed in one line. Chosen by $NMTKIT_VARIANT (a name,
    for instructors), else the student id: `student_id` (stored beside the work), $NMTKIT_STUDENT_ID (the grader),
    $JUPYTERHUB_USER (a hub), the id stored in the workspace, else asked once (and stored); no id: practice.

    Introduced in notebook 04_bottleneck_lab."""
    if student_id:
        where = variants.store_id(student_id, ws)
        source = f"student id {student_id!r}, stored in {where.name} beside your work"
    elif os.environ.get(variants.ENV_VARIANT, "").strip():
        source = f"${variants.ENV_VARIANT}"
    elif os.environ.get(variants.ENV_STUDENT):
        source = f"student id {os.environ[variants.ENV_STUDENT]!r} (${variants.ENV_STUDENT})"
    elif os.environ.get(variants.HUB_USER):
        source = f"student id {os.environ[variants.HUB_USER]!r} (your hub user name)"
    elif variants.stored_id(ws):
        source = f"student id {variants.stored_id(ws)!r}, stored in the workspace"
    else:
        asked = _ask() if ask else None
        if asked:
            variants.store_id(asked, ws)
            source = f"student id {asked!r}, stored in the workspace"
        else:
            source = ("no student id: give yours with nk.variant(student_id=\"...\") (or set "
                      f"${variants.ENV_STUDENT}) before you answer for a grade")
    name = variants.active(ws)
    from nmtkit.analysis.reference import reference_run
    v = Variant(name, variants.student_id(ws), source, reference_run(), name != variants.PRACTICE)
    from nmtkit.course import INSTRUCTOR_KIT
    kind = ("practice: its checks say right or wrong" if not v.graded else "graded" if INSTRUCTOR_KIT else
            "graded: your figures are your own; the checks here check their form, the grader their values")
    print(f"variant {v.name} ({kind}); from {v.source}")
    return v
