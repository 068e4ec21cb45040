"""`nmtkit grade --class`: twelve generated submissions (right, wrong, a deleted work cell, not a notebook, no
notebooks, a notebook the course does not have) graded in parallel; grades.csv and class-report.md hold every
student, the right one full marks, the broken ones one line each."""
from __future__ import annotations

import csv
import subprocess
import sys

import nbformat
import pytest

from nmtkit.course.student import NOTEBOOKS_DIR, grade_id

pytestmark = pytest.mark.long  # the long tier (tests/conftest.py): make test leaves it out

NB05 = "05_monitoring_analysis.ipynb"


@pytest.mark.slow
def test_a_class_is_graded_in_parallel_into_a_table_and_a_report(tmp_path):
    ins = nbformat.read(NOTEBOOKS_DIR / NB05, as_version=4)
    cls = tmp_path / "class"
    (cls / "right").mkdir(parents=True)
    nbformat.write(ins, cls / "right" / NB05)
    wrong = nbformat.read(NOTEBOOKS_DIR / NB05, as_version=4)
    for c in wrong.cells:
        if grade_id(c) == "05-q10-work":
            c.source += "\nmean_ms = mean_ms * 1.5"  # a misconception: the tracing steps kept in the mean
    (cls / "wrong").mkdir()
    nbformat.write(wrong, cls / "wrong" / NB05)
    gap = nbformat.read(NOTEBOOKS_DIR / NB05, as_version=4)
    gap.cells = [c for c in gap.cells if grade_id(c) != "05-q7-work"]
    (cls / "gap").mkdir()
    nbformat.write(gap, cls / "gap" / NB05)
    for i in range(3):
        (cls / f"notjson{i}").mkdir()
        (cls / f"notjson{i}" / NB05).write_text("this is not a notebook {")
        (cls / f"empty{i}").mkdir()
        (cls / f"stranger{i}").mkdir()
        nbformat.write(nbformat.v4.new_notebook(), cls / f"stranger{i}" / "07_extra.ipynb")
    assert len([p for p in cls.iterdir()]) == 12
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "nmtkit.cli", "grade", "--class", str(cls), "--out", str(out),
                        "--jobs", "2", "--only", "05", "07", "--trust-submissions"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 1, p.stderr[-2000:]  # nine hand-ins could not be graded
    rows = {r["student"]: r for r in csv.DictReader((out / "grades.csv").open())}
    assert len(rows) == 12
    right, wrong_, gap_ = rows["right"], rows["wrong"], rows["gap"]
    assert right["points"] == right["max_points"] and float(right["max_points"]) == 16 and not right["error"]
    assert float(wrong_["05-q10"]) == 0 and float(wrong_["points"]) == 14
    assert float(gap_["05-q7"]) == 0 and not gap_["error"]
    # why a check scored nothing is in the student's row; where they were graded too
    assert "05-q7: train_mb: NameError" in gap_["notes"] and "05-q10: ExerciseError" in wrong_["notes"]
    assert right["graded_in"] == "this kit (trusted)" and not right["stopped"]
    assert all("graded by hand" in n for n in right["notes"].split(" | "))  # the right one: only those
    broken = [s for s, r in rows.items() if r["error"]]
    assert sorted(broken) == sorted(f"{k}{i}" for k in ("notjson", "empty", "stranger") for i in range(3))
    assert all("\n" not in rows[s]["error"] and rows[s]["error"] for s in broken)
    assert "not a notebook" in rows["notjson0"]["error"]
    assert "not a notebook of the course" in rows["stranger0"]["error"]
    report = (out / "class-report.md").read_text()
    assert "12 submissions, 3 graded" in report and "Graded with --trust-submissions" in report
    assert "| 05-q10 | 2/3 | ExerciseError: ✗ q10 mean_ms: too high |" in report.splitlines()
    assert (out / "figures" / "q10.png").is_file() and "![q10](figures/q10.png)" in report
    printed = p.stdout.splitlines()
    assert printed[0].startswith("12 submissions, 3 graded") and sum(1 for ln in printed if ln.startswith("  ")) == 9
