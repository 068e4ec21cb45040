"""Graded variants in `nmtkit grade --class` (issue #55): each submission runs as its student (the folder's name), so
it reads and is graded against that student's variant; grades.csv and class-report.md name each one's variant; a
submission carrying another variant's right figures fails its own checks and is flagged; a folder name that is no
student id is one line."""
from __future__ import annotations

import csv
import subprocess
import sys

import nbformat
import pytest

from nmtkit.analysis import variants
from nmtkit.course.instructor.variant_answers import answers
from nmtkit.course.student import NOTEBOOKS_DIR, grade_id

pytestmark = pytest.mark.long  # the long tier (tests/conftest.py): make test leaves it out

NB04 = "04_bottleneck_lab.ipynb"


def two_ids() -> tuple[str, str]:
    """Two student ids whose variants differ."""
    first = "s0001"
    other = next(f"s{n:04d}" for n in range(2, 200) if variants.variant_of(f"s{n:04d}") != variants.variant_of(first))
    return first, other


@pytest.mark.slow
def test_each_student_is_graded_on_their_variant_and_anothers_figures_are_flagged(tmp_path):
    honest, copier = two_ids()
    theirs = answers(variants.variant_of(honest))["lab_predict"]  # the honest student's right figures
    cls = tmp_path / "class"
    ins = nbformat.read(NOTEBOOKS_DIR / NB04, as_version=4)
    (cls / honest).mkdir(parents=True)
    nbformat.write(ins, cls / honest / NB04)
    copied = nbformat.read(NOTEBOOKS_DIR / NB04, as_version=4)
    for c in copied.cells:
        if grade_id(c) == "04-lab1-work":  # the copier's lab (a) holds the honest student's figures
            c.source += f"\npredicted_s, compute_s = {theirs['predicted_s']!r}, {theirs['compute_s']!r}"
    (cls / copier).mkdir()
    nbformat.write(copied, cls / copier / NB04)
    (cls / "no id here").mkdir()
    nbformat.write(ins, cls / "no id here" / NB04)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "nmtkit.cli", "grade", "--class", str(cls), "--out", str(out),
                        "--jobs", "2", "--only", "04", "--trust-submissions"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stderr[-2000:]  # the folder that names no student
    rows = {r["student"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert rows[honest]["variant"] == variants.variant_of(honest) != rows[copier]["variant"]
    assert rows[copier]["variant"] == variants.variant_of(copier)
    assert float(rows[honest]["04-lab1"]) > 0 and not rows[honest]["error"]  # right on their own variant
    assert float(rows[copier]["04-lab1"]) == 0 and "04-lab1" in rows[copier]["notes"]  # wrong on theirs
    assert rows["no id here"]["error"].count("\n") == 0 and "is no student id" in rows["no id here"]["error"]
    report = (out / "class-report.md").read_text()
    assert "## Variants" in report and f"{variants.variant_of(honest)} 1" in report
    assert (f"**{copier}** ({variants.variant_of(copier)}): the figures of lab_predict match "
            f"{variants.variant_of(honest)}'s answers") in report
    assert f"**{honest}**" not in report.split("## Variants")[1].split("##")[0]  # the honest one is not flagged
