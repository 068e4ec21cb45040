"""`nmtkit hub release|collect|feedback` (nmtkit.course.instructor.hub_commands) in temp dirs, no Docker: a release
lands in outbound as nbgrader's `release_assignment` lays it out (nbgrader's own fetch reads it), with its due date
beside it; collect marks late ones and refuses a submission in another student's name; each student's feedback holds
their own checks only, under the name nbgrader 0.9's fetch_feedback looks for."""
from __future__ import annotations

import csv
import json
import os
import stat
from pathlib import Path

import nbformat
import pytest

from nmtkit.cli import main
from nmtkit.course.instructor import exchange
from nmtkit.course.student import NOTEBOOKS_DIR, grade_id, is_instructor, student_notebook

pytestmark = pytest.mark.long  # the long tier (tests/conftest.py): make test leaves it out

NB05 = "05_monitoring_analysis.ipynb"


def make_release(root: Path) -> Path:
    """A student release as `nmtkit release --out DIR` lays it out: RELEASE.md, notebooks/NN_*.ipynb (student
    copies made by the kit's own student_notebook)."""
    (root / "notebooks").mkdir(parents=True)
    copy_, *_ = student_notebook(nbformat.read(NOTEBOOKS_DIR / NB05, as_version=4), NB05)
    nbformat.write(copy_, root / "notebooks" / NB05)
    (root / "RELEASE.md").write_text("# The student release of nmtkit\n")
    return root


def hub(*argv: str) -> int:
    return main(["hub", *argv])


def nbgrader_as(cls_name: str, state: Path, user: str, home: Path, assignment: str = "hw1") -> None:
    """nbgrader 0.9's own exchange step run as `user` sees the exchange in their container (docs/hub.md): outbound
    shared, inbound and feedback their own boxes only."""
    nbx = pytest.importorskip("nbgrader.exchange.default", reason="nbgrader is absent: pip install nbgrader==0.9.6")
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config
    host, view = state / "exchange" / "nmtkit", home.parent / f".{user}-exchange-view"
    for name, src in (("outbound", host / "outbound"), ("inbound", host / "inbound" / user),
                      ("feedback", host / "feedback" / user)):
        src.mkdir(parents=True, exist_ok=True)
        (view / "nmtkit").mkdir(parents=True, exist_ok=True)
        if not (view / "nmtkit" / name).exists():
            (view / "nmtkit" / name).symlink_to(src, target_is_directory=True)
    c = Config()
    c.Exchange.root, c.Exchange.cache, c.Exchange.assignment_dir = str(view), str(home / ".cache"), str(home)
    c.CourseDirectory.course_id, c.CourseDirectory.assignment_id, c.CourseDirectory.student_id = \
        "nmtkit", assignment, user
    home.mkdir(parents=True, exist_ok=True)
    getattr(nbx, cls_name)(coursedir=CourseDirectory(config=c), authenticator=Authenticator(config=c),
                           config=c).start()


def test_release_lays_out_outbound_as_nbgrader_with_the_due_date_and_a_student_fetches_it(tmp_path, capsys):
    state = tmp_path / "state"
    assert hub("release", "--release", str(make_release(tmp_path / "rel")), "--assignment", "hw1",
               "--due", "2026-12-05 23:59", "--state", str(state)) == 0
    outbound = state / "exchange" / "nmtkit" / "outbound"
    assert sorted(p.name for p in (outbound / "hw1").iterdir()) == [NB05]
    assert (outbound / "hw1" / NB05).read_bytes() == (tmp_path / "rel" / "notebooks" / NB05).read_bytes()
    # world-readable: students read it as other uids through a read-only mount
    for d in (outbound.parent, outbound, outbound / "hw1"):
        assert stat.S_IMODE(d.stat().st_mode) & 0o755 == 0o755, d
    assert stat.S_IMODE((outbound / "hw1" / NB05).stat().st_mode) == 0o644
    record = json.loads((outbound / ".hw1.nmtkit.json").read_text())
    assert record["due"] == "2026-12-05T23:59:00+00:00" and record["notebooks"] == [NB05]
    assert not [p for p in outbound.iterdir() if p.name.endswith((".releasing", ".replaced"))]
    assert "due 2026-12-05 23:59 UTC" in capsys.readouterr().out
    nbgrader_as("ExchangeFetchAssignment", state, "alice", tmp_path / "alice")
    assert (tmp_path / "alice" / "hw1" / NB05).read_bytes() == (outbound / "hw1" / NB05).read_bytes()


def test_release_again_replaces_the_kits_own_and_refuses_a_folder_it_did_not_make(tmp_path, capsys):
    state, rel = tmp_path / "state", make_release(tmp_path / "rel")
    outbound = state / "exchange" / "nmtkit" / "outbound"
    args = ["--release", str(rel), "--state", str(state)]
    assert hub("release", *args, "--assignment", "hw1", "--due", "2026-12-05 23:59") == 0
    (outbound / "hw1" / "stale.txt").write_text("from the first release")
    (outbound / "README.txt").write_text("the instructor's own note")
    assert hub("release", *args, "--assignment", "hw1", "--due", "2026-12-07T12:00+01:00") == 0
    assert sorted(p.name for p in (outbound / "hw1").iterdir()) == [NB05]
    assert json.loads((outbound / ".hw1.nmtkit.json").read_text())["due"] == "2026-12-07T12:00:00+01:00"
    assert sorted(p.name for p in outbound.iterdir()) == [".hw1.nmtkit.json", "README.txt", "hw1"]  # no temp left
    (outbound / "ps0").mkdir()  # released by nbgrader itself, not the kit
    (outbound / "ps0" / "theirs.ipynb").write_text("{}")
    capsys.readouterr()
    assert hub("release", *args, "--assignment", "ps0", "--due", "2026-12-05 23:59") == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ps0: exists and the kit did not release it" in err and "--assignment" in err
    assert [p.name for p in (outbound / "ps0").iterdir()] == ["theirs.ipynb"]
    assert not (outbound / ".ps0.nmtkit.json").exists()
    assert (outbound / "README.txt").read_text() == "the instructor's own note"


def inbound(state: Path, box: str, student: str, stamp: str) -> Path:
    sub = state / "exchange" / "nmtkit" / "inbound" / box / f"{student}+hw1+{stamp} UTC+r{len(box)}"
    sub.mkdir(parents=True)
    (sub / NB05).write_text(f"{box}'s notebook")
    (sub / "submission_secret.txt").write_text(f"secret-of-{box}")
    return sub


def test_collect_marks_the_late_and_refuses_a_submission_as_another_student(tmp_path, capsys):
    state, course = tmp_path / "state", tmp_path / "course"
    assert hub("release", "--release", str(make_release(tmp_path / "rel")), "--assignment", "hw1",
               "--due", "2026-12-05 23:59", "--state", str(state)) == 0
    inbound(state, "alice", "alice", "2026-12-05 23:58:00.000000")
    inbound(state, "bob", "bob", "2026-12-06 00:01:30.000000")
    inbound(state, "mallory", "alice", "2026-12-05 22:00:00.000000")
    capsys.readouterr()
    assert hub("collect", "--assignment", "hw1", "--course-dir", str(course), "--state", str(state)) == 0
    out = capsys.readouterr().out.splitlines()
    assert "  alice  2026-12-05 23:58:00 UTC" in out and "  bob  2026-12-06 00:01:30 UTC  late" in out
    [refused] = [ln for ln in out if "refused" in ln]
    assert "in mallory's box: claims to be 'alice'" in refused
    rows = list(csv.DictReader((course / "submitted" / "hw1-collected.csv").open()))
    assert [(r["student"], r["late"]) for r in rows] == [("alice", ""), ("bob", "late")]
    assert rows[1]["submitted_at"] == "2026-12-06T00:01:30+00:00"
    assert (course / "submitted" / "alice" / "hw1" / NB05).read_text() == "alice's notebook"
    assert not (course / "submitted" / "mallory").exists()


def test_collect_from_a_state_without_the_hubs_exchange_is_one_line_naming_the_options(tmp_path, capsys):
    assert hub("collect", "--assignment", "hw1", "--course-dir", str(tmp_path / "c"), "--state", str(tmp_path)) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"--state {tmp_path} --course nmtkit" in err and "does not exist" in err
    assert not (tmp_path / "c").exists()


def cells_of(failing: str) -> list[dict]:
    return [{"notebook": NB05, "points": 1, "max_points": 2, "cells": [
        {"grade_id": "05-q1-check", "points": 1, "status": "passed", "message": ""},
        {"grade_id": "05-q2-check", "points": 0, "status": "failed", "message": failing}]}]


def test_feedback_holds_each_students_own_checks_under_nbgraders_name(tmp_path, capsys):
    notebook_hash = pytest.importorskip("nbgrader.utils", reason="nbgrader is absent: pip install nbgrader==0.9.6"
                                        ).notebook_hash
    from nmtkit.course.instructor.classgrade import results_file
    from nmtkit.files import atomic_write_json
    state, course, grades = tmp_path / "state", tmp_path / "course", tmp_path / "grades"
    inbound(state, "alice", "alice", "2026-12-05 23:58:00.000000")
    inbound(state, "bob", "bob", "2026-12-05 23:59:00.000000")
    hub("collect", "--assignment", "hw1", "--course-dir", str(course), "--state", str(state))
    args = ["--assignment", "hw1", "--course-dir", str(course), "--grades", str(grades), "--state", str(state)]
    capsys.readouterr()
    assert hub("feedback", *args) == 1  # not graded yet: one line saying how
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--grades" in err and "nmtkit grade --class" in err
    (grades).mkdir()
    (grades / "grades.csv").write_text("student\nalice\nbob\n")
    assert hub("feedback", *args) == 1  # grades from no grading of these submissions: none returned
    assert "no feedback: alice:" in capsys.readouterr().out
    assert not (state / "exchange" / "nmtkit" / "feedback").exists()
    exchange.class_view(course, grades, "hw1")  # what `nmtkit grade --class course --out grades` makes first
    atomic_write_json(results_file(grades, "alice"), cells_of("bleu_gain: too low (alice)"))
    atomic_write_json(results_file(grades, "bob"), cells_of("bleu_gain: NameError (bob)"))
    assert hub("feedback", *args) == 0
    fb = state / "exchange" / "nmtkit" / "feedback"
    for me, other in (("alice", "bob"), ("bob", "alice")):
        name = notebook_hash(secret=f"secret-of-{me}", notebook_id=Path(NB05).stem)
        assert [p.name for p in (fb / me).iterdir()] == [f"{name}.html"]
        text = (fb / me / f"{name}.html").read_text()
        assert f"({me})" in text and f"({other})" not in text and "05-q2-check" in text
        assert stat.S_IMODE((fb / me / f"{name}.html").stat().st_mode) == 0o644  # read by the student's own uid
    # grades older than the submission collected since are never returned as its feedback
    (state / "exchange" / "nmtkit" / "inbound" / "bob").rename(tmp_path / "old-bob")
    inbound(state, "bob", "bob", "2026-12-05 23:59:30.000000")
    os.utime(results_file(grades, "bob"), (0, 0))
    hub("collect", "--assignment", "hw1", "--course-dir", str(course), "--state", str(state))
    capsys.readouterr()
    assert hub("feedback", *args) == 1
    out = capsys.readouterr().out
    assert "no feedback: bob:" in out and "grade the class again" in out and "1 of 2 students" in out


@pytest.mark.parametrize("case", ["missing-release", "not-a-release", "instructor-notebooks", "bad-due", "bad-name"])
def test_bad_release_input_is_one_line_naming_the_option_and_what_to_do(tmp_path, capsys, case):
    rel = make_release(tmp_path / "rel")
    argv = {"--release": str(rel), "--assignment": "hw1", "--due": "2026-12-05 23:59", "--state": str(tmp_path / "s")}
    if case == "missing-release":
        argv["--release"] = str(tmp_path / "nowhere")
    elif case == "not-a-release":
        (rel / "RELEASE.md").unlink()
    elif case == "instructor-notebooks":
        nbformat.write(nbformat.read(NOTEBOOKS_DIR / NB05, as_version=4), rel / "notebooks" / NB05)
    elif case == "bad-due":
        argv["--due"] = "5 December"
    else:
        argv["--assignment"] = "hw+1"
    assert hub("release", *[x for kv in argv.items() for x in kv]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("nmtkit: ")
    want = {"missing-release": ("--release", "nmtkit release --out"), "not-a-release": ("--release", "never the "
            "instructor's kit"), "instructor-notebooks": (NB05, "holds instructor cells"),
            "bad-due": ("--due '5 December'", "YYYY-MM-DD HH:MM"), "bad-name": ("--assignment 'hw+1'", "use letters")}
    assert all(w in err for w in want[case]), err
    assert not (tmp_path / "s" / "exchange" / "nmtkit" / "outbound" / "hw1").exists()


@pytest.mark.slow
def test_a_round_trip_fetch_submit_collect_grade_feedback_with_nbgrader_and_a_real_grading(tmp_path, capsys):
    """Two students fetch with nbgrader, solve (bob gets q10 wrong), submit with nbgrader; collect, `nmtkit grade
    --class` on the collected layout (trusted: no Docker), feedback; each fetches their own feedback with nbgrader."""
    state, course, grades = tmp_path / "state", tmp_path / "course", tmp_path / "grades"
    assert hub("release", "--release", str(make_release(tmp_path / "rel")), "--assignment", "hw1",
               "--due", "2099-01-01 00:00", "--state", str(state)) == 0
    solved = nbformat.read(NOTEBOOKS_DIR / NB05, as_version=4)
    solved.cells = [c for c in solved.cells if not is_instructor(c)]
    for user in ("alice", "bob"):
        nbgrader_as("ExchangeFetchAssignment", state, user, tmp_path / user)
        if user == "bob":
            work = next(c for c in solved.cells if grade_id(c) == "05-q10-work")
            work.source += "\nmean_ms = mean_ms * 1.5"  # a misconception: the tracing steps kept in the mean
        nbformat.write(solved, tmp_path / user / "hw1" / NB05)
        nbgrader_as("ExchangeSubmit", state, user, tmp_path / user)
    assert hub("collect", "--assignment", "hw1", "--course-dir", str(course), "--state", str(state)) == 0
    assert main(["grade", "--class", str(course), "--out", str(grades), "--only", "05", "--jobs", "1",
                 "--trust-submissions"]) == 0
    assert hub("feedback", "--assignment", "hw1", "--course-dir", str(course), "--grades", str(grades),
               "--state", str(state)) == 0
    got = {}
    for user in ("alice", "bob"):
        nbgrader_as("ExchangeFetchFeedback", state, user, tmp_path / user)
        [html] = (tmp_path / user / "hw1" / "feedback").glob("*/05_monitoring_analysis.html")
        got[user] = html.read_text()
    assert "q10 mean_ms: too high" in got["bob"] and "too high" not in got["alice"]
    assert got["alice"].count("<td>passed</td>") == got["bob"].count("<td>passed</td>") + 1
