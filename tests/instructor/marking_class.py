"""A graded class as `nmtkit grade --class DIR --out OUT` leaves it, written directly (no sandbox, no notebook run):
OUT/students/<name>.json with notebook 05's results and the executed notebook holding each student's written
answers, and OUT/grades.csv from classgrade.table. The marking's tests, the browser test and bench/marking.py read
it. A student's answers: {grade id: text}; a verdict left out stays the nbgrader stub (unanswered)."""
from __future__ import annotations

import json
from pathlib import Path

from nmtkit.course.instructor import classgrade
from nmtkit.course.student import MARKDOWN_STUB
from nmtkit.files import atomic_write_bytes, atomic_write_json, atomic_write_text

NB05 = "05_monitoring_analysis.ipynb"
VERDICTS = ("05-q3-verdict", "05-q5-verdict", "05-q11-verdict")
# the figures each check records (names of the instructor's check cells' arguments)
FIGURES = {"loss_up": False, "overfitting": False, "bytes_per_param": 4, "bound_mb": 365.2, "measured_mb": 366.0,
           "bytes_per_step_mb": 366.0, "link_share": 0.52}
RIGHT = {"05-q3-verdict": "Not overfitting: the eval loss has not turned up from its best at step 1800 while the "
                          "train loss kept falling, so the run is not overfitting.",
         "05-q5-verdict": "The measured 366.0 MB a step sits at the ring's bound of 365.2 MB, and on the measured "
                          "link the exchange takes about half of each step: the network is the bottleneck."}
# a seed's misconception in its words (as the book's rubric and the issues quote them)
WRONG = {"05-q3-verdict": "The model is overfitting: the eval loss is above the train loss.",
         "05-q5-verdict": "GPU memory was at 100% so the GPU was busy, and the average rate was below the link's "
                          "capacity, so the network was not the bottleneck."}


def executed(answers: dict) -> dict:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "## Q5\nThe ring moves 2(N-1)/N of the weights."},
             {"cell_type": "code", "metadata": {}, "source": "print(bound_mb)", "outputs": [
                 {"output_type": "stream", "name": "stdout", "text": "bound 365.2 MB, measured 366.0 MB\n"}]}]
    for gid in VERDICTS:
        cells.append({"cell_type": "markdown", "source": answers.get(gid, MARKDOWN_STUB),
                      "metadata": {"nbgrader": {"grade_id": gid, "solution": True, "grade": True, "points": 3}}})
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def result(student: str, answers: dict, out: Path) -> dict:
    path = atomic_write_text(out / "students" / f"{student}-executed" / NB05, json.dumps(executed(answers)))
    cells = [{"grade_id": "05-q3-check", "points": 2, "max_points": 2, "status": "passed", "message": "q3: right"},
             {"grade_id": "05-q5-check", "points": None, "max_points": 2, "status": "manual",
              "message": "graded by hand"},
             {"grade_id": "05-q11-check", "points": None, "max_points": 2, "status": "manual",
              "message": "graded by hand"}]
    cells += [{"grade_id": g, "points": None, "max_points": 3, "message": "",
               "status": "manual" if g in answers else "unanswered"} for g in VERDICTS]
    return {"notebook": NB05, "points": 2, "max_points": 2, "manual": 2 + len(answers), "cells": cells,
            "figures": dict(FIGURES), "graded_in": "sandbox test", "stopped": "", "student": student,
            "variant": "practice", "executed": str(path)}


def make(out: Path, students: dict[str, dict]) -> Path:
    """OUT with the grading of `students` (name -> {verdict grade id: text}); returns OUT."""
    out = Path(out)
    rows = []
    for name, answers in students.items():
        results = [result(name, answers, out)]
        atomic_write_json(classgrade.results_file(out, name), results)
        rows.append({"student": name, "variant": "practice", "results": results, "error": ""})
    atomic_write_bytes(out / "grades.csv", classgrade.table(rows).to_csv().encode())
    atomic_write_text(out / "class-report.md", f"# Class report: {len(rows)} submissions\n")
    return out


THREE = {"right": RIGHT, "wrong": WRONG, "blank": {}}
