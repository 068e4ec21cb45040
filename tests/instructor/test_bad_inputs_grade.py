"""`nmtkit grade` on bad input, tried as a new user would (the instructor's kit: moved as they were from
tests/test_bad_inputs.py, whose rules they follow): one line naming the path and its real cause, nothing lost."""
import errno
import os
import subprocess
import sys

import pytest

from nmtkit import cli


def nmtkit(cwd, *args, timeout=120):
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, "-m", "nmtkit.cli", *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=timeout)
    return out.returncode, (out.stdout + out.stderr).strip()


def _bad_notebook(d):
    (d / "sub").mkdir()
    (d / "sub" / "04_monitoring_analysis.ipynb").write_text("{not json")
    return ["grade", "--submission", str(d / "sub")]


def _notebook_that_is_a_directory(d):
    (d / "sub" / "04_monitoring_analysis.ipynb").mkdir(parents=True)
    return ["grade", "--submission", str(d / "sub")]


CASES = {  # name -> (make the input in tmp dir d -> argv, words the one line must hold)
    "grade a non-JSON notebook": (_bad_notebook, ["04_monitoring_analysis.ipynb", "not a notebook"]),
    "grade a notebook that is a directory": (_notebook_that_is_a_directory, ["a directory where a file belongs"]),
    "grade --submission FILE": (lambda d: (d / "f").write_text("x") and ["grade", "--submission", str(d / "f")],
                                ["not a directory"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_grade_input_gets_one_line_naming_its_real_cause(tmp_path, case):
    make, words = CASES[case]
    argv = make(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    rc, out = nmtkit(tmp_path, *argv)
    lines = [line for line in out.splitlines() if line.strip() and not line.startswith(("[", "  "))]
    assert rc != 0, out
    assert "internal error" not in out, out
    assert 1 <= len(lines) <= 3, out
    for w in words:
        assert w in out, out
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert set(before) <= set(after)  # nothing the user had is gone


def test_an_unreadable_notebook_names_the_file(tmp_path, monkeypatch, capsys):
    from nmtkit.course.student import NOTEBOOKS_DIR
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "04_monitoring_analysis.ipynb").write_text((NOTEBOOKS_DIR / "04_monitoring_analysis.ipynb").read_text())
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
    assert "Permission denied" in err[0] and "04_monitoring_analysis.ipynb" in err[0]
