"""Issue #68, Deliver 1: a submission's student id is its folder's name (or --student) and, with `nmtkit grade
--roster FILE`, must be on the class's roster; an unknown id is refused in one line before anything runs."""
from __future__ import annotations

import pytest

from nmtkit import cli
from nmtkit.course.instructor.roster import read
from nmtkit.errors import CourseError

NB05 = "05_monitoring_analysis.ipynb"


def test_the_roster_is_the_hubs_csv_or_one_id_a_line(tmp_path):
    (tmp_path / "hub.csv").write_text("username,email\nada,ada@x.org\nbob-2,\n")
    (tmp_path / "ids.txt").write_text("# class of 2026\nada\n\nbob-2\n")
    assert read(tmp_path / "hub.csv") == read(tmp_path / "ids.txt") == {"ada", "bob-2"}
    (tmp_path / "bad.txt").write_text("ada\nbob smith\n")
    with pytest.raises(CourseError) as e:
        read(tmp_path / "bad.txt")
    assert str(e.value).startswith(f"{tmp_path / 'bad.txt'}:2: ") and "\n" not in str(e.value)


@pytest.mark.parametrize("student", [None, "carol"])
def test_an_id_not_on_the_roster_is_refused_in_one_line(tmp_path, capsys, student):
    from nmtkit.course.student import NOTEBOOKS_DIR
    sub = tmp_path / "carol" if student is None else tmp_path / "ada-copy"
    sub.mkdir()
    (sub / NB05).write_text((NOTEBOOKS_DIR / NB05).read_text())
    (tmp_path / "roster.txt").write_text("ada\nbob\n")
    args = ["grade", "--submission", str(sub), "--roster", str(tmp_path / "roster.txt"), "--trust-submissions",
            "--out", str(tmp_path / "out.json")]
    rc = cli.main(args + (["--student", student] if student else []))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and "student id 'carol' is not on the roster" in err[0], err
    assert not (tmp_path / "out.json").exists()


def test_an_id_on_the_roster_passes_it(tmp_path):
    """On the roster, grading goes on to the submission itself (here: a folder with no notebook, its own line)."""
    from nmtkit.course.instructor.container import Sandbox
    from nmtkit.course.instructor.grade import grade
    (tmp_path / "ada").mkdir()
    (tmp_path / "roster.csv").write_text("username\nada\n")
    with pytest.raises(CourseError, match="no notebooks"):
        grade(tmp_path / "ada", roster=tmp_path / "roster.csv", sandbox=Sandbox(trusted=True))
    with pytest.raises(CourseError, match="not on the roster"):
        grade(tmp_path / "ada", roster=tmp_path / "roster.csv", sandbox=Sandbox(trusted=True), student="bob")


def test_a_class_with_a_roster_grades_no_one_off_it(tmp_path):
    from nmtkit.course.instructor.classgrade import grade_one
    (tmp_path / "mallory").mkdir()
    (tmp_path / "roster.csv").write_text("username\nada\n")
    row = grade_one(tmp_path / "mallory", tmp_path / "out", roster=tmp_path / "roster.csv")
    assert row["results"] == [] and "student id 'mallory' is not on the roster" in row["error"], row
