"""The class's roster for `nmtkit grade --roster FILE`: the student ids a submission may be graded as. A submission's
id is its folder's name (or --student), never anything its notebooks set; with a roster, an id not on it is refused
in one line, so a misnamed folder is never graded as a variant nobody was given.

The file: the hub's roster (hub/roster.py: a CSV whose header names `username`), or one id a line (blank lines and
lines starting with # aside).
"""
from __future__ import annotations

import csv
from pathlib import Path

from nmtkit.analysis import variants
from nmtkit.errors import AnalysisError, CourseError


def read(path: str | Path) -> set[str]:
    """The ids of the roster `path`; CourseError naming the file and line if it is not one."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CourseError(f"{path}: cannot read the roster ({e}); give a CSV with a `username` column or one id "
                          f"a line") from None
    if lines and "username" in [h.strip() for h in next(csv.reader([lines[0]]))]:
        rows = [(n, (r.get("username") or "").strip()) for n, r in enumerate(csv.DictReader(lines), start=2)]
    else:
        rows = [(n, line.strip()) for n, line in enumerate(lines, start=1)
                if line.strip() and not line.lstrip().startswith("#")]
    ids = set()
    for n, sid in rows:
        try:
            ids.add(variants.check_id(sid))
        except AnalysisError as e:
            raise CourseError(f"{path}:{n}: {e}; fix that line of the roster") from None
    if not ids:
        raise CourseError(f"{path}: no student ids in the roster; give a CSV with a `username` column or one id a line")
    return ids


def check(student: str, roster: str | Path | None, where) -> None:
    """Refuse in one line to grade `where` as `student` if a roster is given and `student` is not on it."""
    if roster is not None and student not in read(roster):
        raise CourseError(f"{where}: student id {student!r} is not on the roster {roster}; name the submission's "
                          f"folder by the student's id as the roster spells it, or give --student ID")
