"""One record per question: both registries (the students' nmtkit.analysis.questions.book, the instructor's
nmtkit.course.instructor.book) hold exactly the questions the notebooks' check cells (their grade ids) ask, and a
question added or retired in a record alone reaches nk.check, the grading, the verdicts, the rubric and grades.csv
with no other edit."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from nmtkit.analysis import load_run, reference_run
from nmtkit.analysis import questions as students
from nmtkit.analysis.questions import Answer
from nmtkit.course import exercises
from nmtkit.course.instructor import book as instructors
from nmtkit.course.instructor import classgrade, grade, scoring
from nmtkit.course.instructor.rubric import Item
from nmtkit.course.student import grade_id
from nmtkit.errors import ExerciseError
from nmtkit.question import EXACT, Question, Target

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def asked_by_notebooks() -> dict[str, str]:
    """question -> the grade id of the instructor's check cell that asks it (`nk.check(..., "<question>", ...)`)."""
    out = {}
    for path in sorted(NOTEBOOKS.glob("0*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            gid = grade_id(cell)
            if gid and gid.endswith("-check") and cell.cell_type == "code":
                call = scoring.parse(gid, cell.source)
                if call.function == "check":
                    out[call.question] = gid
    return out


def mismatch() -> dict:
    """What the two registries and the notebooks' grade ids disagree on (empty: they agree)."""
    asked, mine, theirs = set(asked_by_notebooks()), set(students.book), set(instructors.book)
    return {k: v for k, v in {"not in the students' registry": asked - mine, "not in the instructor's": asked - theirs,
                              "asked by no notebook": (mine | theirs) - asked}.items() if v}


def test_both_registries_hold_exactly_the_questions_of_the_notebooks_grade_ids(monkeypatch):
    asked = asked_by_notebooks()
    assert len(asked) == 17 and asked["q5"] == "05-q5-check" and asked["lab_nic"] == "04-lab6-check"
    assert mismatch() == {}
    # the check bites: a registry that loses a key the notebooks have is found
    monkeypatch.delitem(instructors.book, "q7")
    assert mismatch() == {"not in the instructor's": {"q7"}}
    monkeypatch.delitem(students.book, "lab_fit")
    assert mismatch()["not in the students' registry"] == {"lab_fit"}


def steps_logged(run) -> int:
    return int(run.series("train_loss")["step"].nunique())


def twelfth() -> tuple[Question, instructors.Marking]:
    """Question 12, written here alone: its students' record and its instructor's extension."""
    q = Question("q12", "How many steps were logged?", 12,
                 lambda run, fig_dir, o: ({"steps_logged": steps_logged(run)}, None),
                 {"steps_logged": Target(EXACT, "count the train-loss records, one per logged step")})
    m = instructors.Marking(
        q, decide=lambda run, o: {"steps_logged": steps_logged(run)},
        verdict=lambda run, fig_dir, o: Answer(12, q.title, f"{steps_logged(run)} logged steps.",
                                               {"steps_logged": steps_logged(run)}, run=run.name),
        rubric=(Item("the train-loss records counted, one per logged step", 2, "every scalar counted as a step"),))
    return q, m


def graded_row(source: str, figures: dict, ref) -> dict:
    """One student's grading of a notebook holding the check cell `source`, through nmtkit grade's scoring."""
    gid = "05-q12-check"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
        "grade": True, "grade_id": gid, "points": 2, "locked": True, "solution": False}})])
    call = scoring.parse(gid, source)
    text = json.dumps({"args": {"rep": {"runs": [{"run": str(ref.path), "name": ref.name}]}, **figures}})
    cells = grade.score(nb, {gid: call}, {gid: text}, scoring.Decoder({str(ref.path): ref.path}))
    result = {"notebook": "05_monitoring_analysis.ipynb", "cells": cells, "graded_in": "test", "stopped": "",
              "points": sum(c["points"] or 0 for c in cells), "max_points": 2,
              "manual": sum(c["status"] == "manual" for c in cells)}
    return {"student": "s1", "variant": "practice", "results": [result], "error": ""}


def test_a_twelfth_question_added_in_its_records_alone_is_handled_everywhere(monkeypatch, capsys):
    ref = load_run(reference_run())
    rep, n = SimpleNamespace(runs=[ref]), steps_logged(ref)
    q, m = twelfth()
    monkeypatch.setitem(students.book, "q12", q)
    monkeypatch.setitem(instructors.book, "q12", m)
    # nk.check, graded (the instructor's kit): right passes, wrong fails with the record's hint
    exercises.check(rep, "q12", steps_logged=n)
    assert "✓ q12: steps_logged agree with the logs" in capsys.readouterr().out
    with pytest.raises(ExerciseError, match="✗ q12 steps_logged: too high. Hint: count the train-loss records"):
        exercises.check(rep, "q12", steps_logged=n + 1)
    # nmtkit grade's scoring and grades.csv: a column 05-q12 with the check's points
    source = 'nk.check(rep, "q12", run=None, steps_logged=steps_logged)'
    row = graded_row(source.replace("run=None, ", ""), {"steps_logged": n}, ref)
    assert row["results"][0]["cells"][0]["status"] == "passed", row
    assert classgrade.table([row]).loc["s1", "05-q12"] == 2
    wrong = graded_row(source.replace("run=None, ", ""), {"steps_logged": n + 1}, ref)
    assert classgrade.table([wrong]).loc["s1", "05-q12"] == 0
    # the evidence, the verdict, the rubric, the variants' answers
    assert [a.number for a in students.evidence_all(ref)][-1] == 12
    assert instructors.answer(ref, 12).answer == f"{n} logged steps." and len(instructors.answer_all(ref)) == 12
    assert "every scalar counted as a step" in instructors.rubric_by_number()[12]
    assert instructors.decide(ref)["q12"] == {"steps_logged": n}
    # the release: its kit has no instructor's registry; nk.check there checks the form from the students' record
    monkeypatch.setattr(exercises, "_hidden", lambda: None)
    exercises.check(rep, "q12", steps_logged=n)
    assert "✓ q12: steps_logged have the right form" in capsys.readouterr().out


def test_a_retired_question_is_gone_everywhere(monkeypatch, capsys):
    ref = load_run(reference_run())
    rep = SimpleNamespace(runs=[ref])
    monkeypatch.delitem(students.book, "q10")
    monkeypatch.delitem(instructors.book, "q10")
    with pytest.raises(ExerciseError) as e:
        exercises.check(rep, "q10", mean_ms=1.0, tokens_per_step=1.0)
    assert str(e.value).startswith("no exercise 'q10': choose one of") and "\n" not in str(e.value)
    assert 10 not in [a.number for a in instructors.answer_all(ref)] and 10 not in instructors.rubric_by_number()
    assert "q10" not in instructors.decide(ref) and 10 not in [a.number for a in students.evidence_all(ref)]
    # a notebook that still asked it fails that check in one line; the class's notebooks without it have no column
    stale = graded_row('nk.check(rep, "q10", mean_ms=mean_ms)', {"mean_ms": 1.0}, ref)
    assert stale["results"][0]["cells"][0]["message"].startswith("ExerciseError: no exercise 'q10'")
    assert "05-q10" not in classgrade.table([dict(stale, results=[dict(stale["results"][0], cells=[])])]).columns
