"""The marks store (nmtkit.course.instructor.marks): filled from a graded class, points from the rubric when read,
two graders at once (last write wins, visibly; no mark lost), merged into grades.csv and class-report.md and into
each student's own feedback."""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import marking_class as mc

from nmtkit.course.instructor import exchange, marks
from nmtkit.errors import CourseError


@pytest.fixture
def out(tmp_path):
    out = mc.make(tmp_path / "grades", mc.THREE)
    marks.fill(out)
    return out


def rows(out, table="marks") -> int:
    return sqlite3.connect(out / marks.DB).execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]


def test_every_verdict_and_hand_graded_check_becomes_an_answer_with_its_rubric(out):
    db = marks.connect(out)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    got = {(a["student"], a["grade_id"]): a for a in marks.answer_rows(db)}
    assert len(got) == 3 * 5  # three verdicts and two hand-graded checks (q5, q11) each
    assert got[("right", "05-q3-verdict")]["answered"] == 1 and got[("blank", "05-q3-verdict")]["answered"] == 0
    assert got[("wrong", "05-q5-verdict")]["text"].startswith("GPU memory was at 100%")
    assert {c for c, _ in got[("wrong", "05-q5-verdict")]["flags"]} == {"gpu_memory", "average", "not_in_run"}
    assert got[("right", "05-q5-verdict")]["flags"] == [] and got[("wrong", "05-q3-verdict")]["flags"][0][0] == \
        "contradicts"
    assert got[("right", "05-q5-check")]["kind"] == "hand" and ("right", "05-q3-check") not in got
    assert got[("right", "05-q5-verdict")]["figures"] == {"bytes_per_param": 4, "bound_mb": 365.2}
    assert [i["points"] for i in marks.items(db, "05-q5-verdict")] == [2, 1, 1]  # the book's q5 rubric
    assert marks.fill(out) == 15 and rows(out, "items") == 2 + 3 + 2 + 2 * 2  # q3, q5, q11 and two checks: not doubled


def test_a_verdict_without_a_book_entry_gets_the_default_rubric():
    got = marks.rubric("01_data_prep_bpe.ipynb", "01-size-verdict")
    assert len(got) == 1 and got[0][0].startswith(marks.DEFAULT_ITEM) and got[0][1] == 1


def test_changing_an_items_points_regrades_everyone_who_got_it(out):
    db = marks.connect(out)
    a, _ = marks.write(db, "right", "05-q5-verdict", "g1", [0, 1, 2])
    b, _ = marks.write(db, "wrong", "05-q5-verdict", "g1", [0])
    c, _ = marks.write(db, "blank", "05-q5-verdict", "g1", [2])
    assert [marks.points(db, m) for m in (a, b, c)] == [4, 2, 1]
    marks.set_points(db, "05-q5-verdict", 0, 3, "g1")
    assert [marks.points(db, m) for m in (a, b, c)] == [5, 3, 1]
    with pytest.raises(CourseError, match="no rubric item"):
        marks.write(db, "right", "05-q5-verdict", "g1", [7])


def test_two_graders_at_once_last_write_wins_visibly_and_no_mark_is_lost(out):
    one, two = marks.connect(out), marks.connect(out)
    seen = marks.current(one, "wrong", "05-q3-verdict")
    assert seen is None and marks.current(two, "wrong", "05-q3-verdict") is None
    first, conflict = marks.write(one, "wrong", "05-q3-verdict", "g1", [1], "the gap is not the verdict", seen=None)
    assert conflict is None
    second, conflict = marks.write(two, "wrong", "05-q3-verdict", "g2", [], "no", seen=None)  # g2 saw no mark
    assert conflict == first and conflict.grader == "g1"  # g2 is shown g1's mark
    assert marks.current(one, "wrong", "05-q3-verdict") == second  # the last write stands, for both
    third, conflict = marks.write(one, "wrong", "05-q3-verdict", "g1", [1], "again", seen=second.id)
    assert conflict is None and rows(out) == 3  # every write kept


def test_merge_puts_check_written_and_total_per_question_into_grades_csv_and_the_report(out):
    before = pd.read_csv(out / "grades.csv", index_col="student")
    db = marks.connect(out)
    marks.write(db, "right", "05-q3-verdict", "g1", [0, 1])
    marks.write(db, "right", "05-q5-check", "g1", [0])
    marks.merge(out)
    marks.merge(out)  # again after more marking: the same columns, not doubled
    after = pd.read_csv(out / "grades.csv", index_col="student")
    assert "05-q3-written" not in before and pd.isna(before.loc["right", "05-q5"])
    assert after.loc["right", "05-q3"] == 2 and after.loc["right", "05-q3-written"] == 4
    assert after.loc["right", "05-q3-total"] == 6 and after.loc["right", "05-q5"] == 2
    assert after.loc["right", "total_points"] == 2 + 4 + 2 and after.loc["wrong", "total_points"] == 2
    assert list(after.columns).count("05-q3-written") == 1
    report = (out / "class-report.md").read_text()
    assert report.startswith("# Class report") and report.count(marks.REPORT_MARK) == 1
    assert "| 05-q3-verdict | 1 | 1 | 1 |" in report


def test_each_students_feedback_holds_their_own_marks_and_comment_only(out):
    from nmtkit.course.instructor.classgrade import results_of
    from nmtkit.course.instructor.hub_commands import marks_of
    db = marks.connect(out)
    marks.write(db, "right", "05-q3-verdict", "g1", [0, 1], "RIGHT-COMMENT")
    marks.write(db, "wrong", "05-q3-verdict", "g1", [1], "WRONG-COMMENT")
    pages = {s: exchange.feedback_html(results_of(out, s)[0], marks_of(out, s)) for s in ("right", "wrong", "blank")}
    assert "RIGHT-COMMENT" in pages["right"] and "WRONG-COMMENT" not in pages["right"]
    assert "WRONG-COMMENT" in pages["wrong"] and "RIGHT-COMMENT" not in pages["wrong"]
    assert "decided on the held-out loss" in pages["right"] and "4 / 4" in pages["right"]
    assert "overfitting = False" in pages["wrong"] and "Model verdict: Decided on the held-out loss" in pages["wrong"]
    assert "unanswered" in pages["blank"] and "COMMENT" not in pages["blank"]
