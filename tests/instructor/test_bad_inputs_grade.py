"""`nmtkit grade` on bad input, tried as a new user would (the instructor's kit: moved as they were from
tests/test_bad_inputs.py, whose rules they follow): one line naming the path and its real cause, nothing lost."""
import errno
import os

import pytest
from bad_input import assert_one_line

from nmtkit import cli


def _bad_notebook(d):
    (d / "sub").mkdir()
    (d / "sub" / "05_monitoring_analysis.ipynb").write_text("{not json")
    return ["grade", "--submission", str(d / "sub")]


def _notebook_that_is_a_directory(d):
    (d / "sub" / "05_monitoring_analysis.ipynb").mkdir(parents=True)
    return ["grade", "--submission", str(d / "sub")]


CASES = {  # name -> (make the input in tmp dir d -> argv, words the one line must hold)
    "grade a non-JSON notebook": (_bad_notebook, ["05_monitoring_analysis.ipynb", "not a notebook"]),
    "grade a notebook that is a directory": (_notebook_that_is_a_directory, ["a directory where a file belongs"]),
    "grade --submission FILE": (lambda d: (d / "f").write_text("x") and ["grade", "--submission", str(d / "f")],
                                ["not a directory"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_grade_input_gets_one_line_naming_its_real_cause(tmp_path, case):
    assert_one_line(tmp_path, *CASES[case])


def test_an_unreadable_notebook_names_the_file(tmp_path, monkeypatch, capsys):
    from nmtkit.course.student import NOTEBOOKS_DIR
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "05_monitoring_analysis.ipynb").write_text((NOTEBOOKS_DIR / "05_monitoring_analysis.ipynb").read_text())
    import io
    real_open = io.open

    def no_permission(file, *a, **k):  # as root nothing is unreadable: a patched open stands in for chmod 000
        if str(file).startswith(str(sub)):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))
        return real_open(file, *a, **k)
    monkeypatch.setattr("builtins.open", no_permission)
    monkeypatch.setattr(io, "open", no_permission)
    rc = cli.main(["grade", "--submission", str(sub)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and "internal error" not in err[0], err
    assert "Permission denied" in err[0] and "05_monitoring_analysis.ipynb" in err[0]


@pytest.mark.parametrize("who", ["--submission", "--class"])
def test_without_docker_grading_refuses_in_one_line_unless_trusted(tmp_path, who):
    """No docker on PATH: one line naming the install and --trust-submissions; nothing graded, nothing written."""
    import shutil
    import subprocess
    import sys

    from nmtkit.course.student import NOTEBOOKS_DIR
    sub = tmp_path / "class" / "ada"
    sub.mkdir(parents=True)
    shutil.copy(NOTEBOOKS_DIR / "03_horovod_multinode.ipynb", sub)
    target = str(sub) if who == "--submission" else str(tmp_path / "class")
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}  # the venv's commands only: no docker
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "nmtkit.cli", "grade", who, target, "--out", str(out)],
                       capture_output=True, text=True, env=env, timeout=300)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 1 and len(err) == 1, p.stderr[-2000:]
    assert "no docker command" in err[0] and "apt-get install docker.io" in err[0] and "podman" in err[0]
    assert "--trust-submissions" in err[0] and not out.exists()
