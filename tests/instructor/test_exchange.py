"""The hub's exchange, instructor's side (nmtkit.course.instructor.exchange): a box's submission counts only for
the box's owner (one claiming another student is refused), the latest wins, late ones are marked, and `--class`
reads nbgrader's collected layout as one folder per student."""
from datetime import datetime, timezone
from pathlib import Path

import pytest

from nmtkit.course.instructor import exchange
from nmtkit.course.instructor.classgrade import submissions
from nmtkit.errors import CourseError


def submit(box: Path, student: str, assignment: str, stamp: str, text: str) -> Path:
    sub = box / f"{student}+{assignment}+{stamp} UTC+abc{len(text)}"
    sub.mkdir(parents=True)
    (sub / "01_intro.ipynb").write_text(text)
    return sub


def test_collect_credits_the_box_owner_only_latest_and_late(tmp_path):
    ex = tmp_path / "exchange" / "nmtkit"
    submit(ex / "inbound" / "alice", "alice", "course", "2026-11-20 10:00:00.000000", "first")
    submit(ex / "inbound" / "alice", "alice", "course", "2026-11-21 09:00:00.000000", "second")
    submit(ex / "inbound" / "bob", "bob", "course", "2026-11-23 12:00:00.000000", "bob's")
    submit(ex / "inbound" / "mallory", "alice", "course", "2026-11-21 11:00:00.000000", "forged")
    due = datetime(2026, 11, 22, tzinfo=timezone.utc)
    got, refused = exchange.collect(ex, tmp_path / "course", "course", due=due)
    assert [(g.student, g.late) for g in got] == [("alice", False), ("bob", True)]
    assert [(r.box, r.why) for r in refused] == [("mallory", "claims to be 'alice' but is in 'mallory''s box")]
    alice = tmp_path / "course" / "submitted" / "alice" / "course"
    assert (alice / "01_intro.ipynb").read_text() == "second"
    assert (alice / "timestamp.txt").read_text().startswith("2026-11-21 09:00:00")
    assert not (tmp_path / "course" / "submitted" / "mallory").exists()


def test_class_reads_the_collected_layout_one_folder_per_student(tmp_path):
    for student in ("alice", "bob"):
        (tmp_path / "course" / "submitted" / student / "course").mkdir(parents=True)
    view = exchange.class_view(tmp_path / "course", tmp_path / "out")
    subs = submissions(view)
    assert [s.name for s in subs] == ["alice", "bob"]
    assert subs[0].resolve() == (tmp_path / "course" / "submitted" / "alice" / "course").resolve()
    plain = tmp_path / "plain"
    (plain / "carol").mkdir(parents=True)
    assert exchange.class_view(plain, tmp_path / "out") == plain  # the kit's own layout is read as before


def test_two_assignments_need_a_name(tmp_path):
    for assignment in ("course", "extra"):
        (tmp_path / "course" / "submitted" / "alice" / assignment).mkdir(parents=True)
    with pytest.raises(CourseError, match="2 assignments .course, extra.; name the one to grade"):
        exchange.class_view(tmp_path / "course", tmp_path / "out")
    view = exchange.class_view(tmp_path / "course", tmp_path / "out", assignment="extra")
    assert [p.name for p in view.iterdir()] == ["alice"]


def test_no_inbound_is_one_clear_line(tmp_path):
    with pytest.raises(CourseError, match="no inbound boxes"):
        exchange.collect(tmp_path, tmp_path / "course", "course")


def test_feedback_lands_where_nbgraders_fetch_feedback_finds_it_in_the_students_own_box(tmp_path):
    notebook_hash = pytest.importorskip("nbgrader.utils", reason="nbgrader is absent: pip install nbgrader==0.9.6"
                                        ).notebook_hash
    sub = tmp_path / "course" / "submitted" / "alice" / "course"
    sub.mkdir(parents=True)
    (sub / "submission_secret.txt").write_text("s3cret")
    results = [{"notebook": "01_intro.ipynb", "points": 1, "max_points": 2, "cells": [
        {"grade_id": "q1-check", "points": 1, "status": "passed", "message": ""},
        {"grade_id": "q2-check", "points": 0, "status": "failed", "message": "MFU <off by 2x>"}]}]
    ex = tmp_path / "exchange" / "nmtkit"
    [written] = exchange.return_feedback(tmp_path / "course", ex, "alice", "course", results)
    assert written == ex / "feedback" / "alice" / f"{notebook_hash(secret='s3cret', notebook_id='01_intro')}.html"
    text = written.read_text()
    assert "01_intro.ipynb: 1 / 2" in text and "MFU &lt;off by 2x&gt;" in text
    assert not (ex / "feedback" / "bob").exists()
    with pytest.raises(CourseError, match="submission_secret.txt: missing"):
        exchange.return_feedback(tmp_path / "course", ex, "bob", "course", results)
