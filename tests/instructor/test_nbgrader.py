"""nbgrader sees notebook 05's exercises: `nbgrader generate_assignment` strips the solutions from the kit's source
version (`nmtkit student --nbgrader`), and `nbgrader autograde` scores a submission, restoring a locked check cell the
student edited. nbgrader 0.9.6 installs beside the pinned JupyterLab 4 without changing any installed version."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nmtkit.course.student import NOTEBOOKS_DIR, grade_id, nbgrader_source

nbgrader = pytest.importorskip("nbgrader", reason="nbgrader is not installed (pip install -e .[dev] brings it)")
NB05 = "05_monitoring_analysis.ipynb"
ROOT = Path(__file__).resolve().parents[2]


def nbgrader_cmd(course: Path, *args, env=None):
    bin_dir = str(Path(sys.executable).parent)  # nbgrader runs `alembic` from the same environment
    env = {**os.environ, **(env or {}), "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--force"], cwd=course, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stderr


@pytest.mark.slow
def test_nbgrader_generates_and_autogrades_notebook_05(tmp_path):
    course = tmp_path / "course"
    (course / "source" / "ps05").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.root = {str(course)!r}\n")
    source, exercises = nbgrader_source(nbformat.read(NOTEBOOKS_DIR / NB05, as_version=4), NB05)
    assert exercises == 11  # the 11 questions (the lab is notebook 04)
    nbformat.write(source, course / "source" / "ps05" / NB05)
    nbgrader_cmd(course, "generate_assignment", "ps05")
    release = (course / "release" / "ps05" / NB05).read_text()
    assert "BEGIN SOLUTION" not in release and "YOUR ANSWER HERE" in release and "rep.verdict(" not in release
    # a submission: every exercise solved, except Q10 (the tracing steps kept in the mean) and Q3, whose check was
    # replaced by `pass` to hide a wrong answer
    sub = nbformat.read(course / "source" / "ps05" / NB05, as_version=4)
    for cell in sub.cells:
        if grade_id(cell) == "05-q10-work":
            cell.source = cell.source.replace("cumcount() >= 3]", "cumcount() >= 0]")
        elif grade_id(cell) == "05-q3-work":
            cell.source += "\nloss_up = loss_up + 0.5"
        elif grade_id(cell) == "05-q3-check":
            cell.source = "pass"
    (course / "submitted" / "student1" / "ps05").mkdir(parents=True)
    nbformat.write(sub, course / "submitted" / "student1" / "ps05" / NB05)
    workspace = tmp_path / "workspace"  # no runs of the student's own: notebook 05 reads the reference run
    workspace.mkdir()
    log = nbgrader_cmd(course, "autograde", "ps05", env={"NMTKIT_WORKDIR": str(workspace)})
    assert "05-q3-check has changed" in log
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grades = {g.name: g.auto_score for g in gb.find_submission("ps05", "student1").notebooks[0].grades}
    checks = {k: v for k, v in grades.items() if k.endswith("-check")}
    assert len(checks) == 11 and {k for k, v in checks.items() if v == 0} == {"05-q10-check", "05-q3-check"}
    assert all(v == 2 for k, v in checks.items() if k not in ("05-q3-check", "05-q10-check"))
    assert all(grades[f"05-q{i}-verdict"] is None for i in range(1, 12))  # graded by hand
    shutil.rmtree(course / "autograded", ignore_errors=True)
