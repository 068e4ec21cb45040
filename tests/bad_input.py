"""The bad-input rule, checked one way for every CLI command (tests/test_bad_inputs.py and the instructor's
tests/instructor/test_bad_inputs_grade.py): exit status non-zero, one line (at most 3, progress lines aside) naming
the path or key and its real cause, never "internal error", and nothing the user had is gone."""
import os
import subprocess
import sys


def nmtkit(cwd, *args, timeout=120):
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run([sys.executable, "-m", "nmtkit.cli", *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=timeout)
    return out.returncode, (out.stdout + out.stderr).strip()


def assert_one_line(tmp_path, make, words):
    """Runs the command `make(tmp_path)` sets up; its output must hold every one of `words`."""
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
