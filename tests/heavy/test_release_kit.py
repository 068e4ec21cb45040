"""A fresh release (`nmtkit release --out DIR`) tried as a student would: every command its README names works there.

`make demo` (the README's first command) runs the notebooks as delivered, each to its first unanswered exercise
(`COURSE_ARGS=--until-first`), exits 0 and lists every unanswered exercise by notebook and heading; with the
instructor's solutions put in, every notebook runs green (the one whole course run of a CI run, made in the students'
image of a release and shared with test_image_course.py: conftest's solved_course); `make test` is green;
`make lab` serves the notebooks; `make doctor` passes. The release uses this checkout's
environment (VENV=, its set-up's fast path) with the release's own package first on the path (PYTHONPATH), so what
runs is the release's code, not the kit's: a fresh venv in the release would recompile Horovod for every run.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from solutions import stubs

from nmtkit.course import INSTRUCTOR_KIT

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parents[1]
pytestmark = pytest.mark.skipif(not INSTRUCTOR_KIT, reason="a release is made from the instructor's kit only")
# every command the README names, and the test below that runs it (a new one fails here until it is tested)
TESTED = {"make demo", "make setup", "make lab", "make test", "make doctor", "nmtkit course", "nmtkit variant"}


@pytest.fixture(scope="module")
def rel(tmp_path_factory):
    if not INSTRUCTOR_KIT:
        pytest.skip("a release is made from the instructor's kit only")
    from nmtkit.course.instructor import release
    return release.build(tmp_path_factory.mktemp("release") / "kit")


def _env(rel: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "NMTKIT_WORKDIR"))}
    return {**env, "PYTHONPATH": str(rel), "NMTKIT_PROFILE": "tiny"}


def make(rel: Path, *targets: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    """`make TARGETS` in the release on this checkout's environment, its set-up step taken as done (-o setup): set-up
    is tried on its own below, and only where it is the fast path (never reinstalling a shared environment)."""
    return subprocess.run(["make", "-C", str(rel), "-o", "setup", *targets, f"VENV={VENV}"], capture_output=True,
                          text=True, env=_env(rel), timeout=timeout)


def test_the_readme_names_only_commands_tested_here(rel):
    readme = (rel / "README.md").read_text()
    # commands in inline code or at a line's start in a code block (not prose such as "make the corpus")
    named = set(re.findall(r"(?:`|^\s*)(make [a-z][a-z-]*|nmtkit [a-z][a-z-]*)\b", readme, re.M))
    assert named - TESTED == set(), f"README commands no test runs: {sorted(named - TESTED)}"
    first = re.search(r"```bash\n(.*?)\n", readme).group(1)
    assert first.split("#")[0].strip() == "make demo", first


def test_make_demo_runs_each_notebook_to_its_first_exercise_and_lists_the_rest(rel):
    # The whole course runs once per CI run, with the solutions, in the image (test_image_course.py): what this adds
    # is the release's own `make demo` wiring and the to-do list, which needs no cell past a first exercise
    out = make(rel, "demo", "COURSE_ARGS=--until-first")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    left = stubs(rel / "notebooks")
    assert left, "the release's notebooks carry no unanswered exercise"
    listing = out.stdout.split("exercises are still unanswered")[1]
    assert [tuple(line.strip().split(": ", 1)) for line in listing.splitlines()[1:len(left) + 1]] == left
    every = len(list((rel / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    assert "FAILED" not in out.stdout and out.stdout.count(" ok (") == every, out.stdout[-2000:]


def test_with_the_solutions_put_in_every_notebook_runs_green(solved_course):
    # the image's one whole run of this release's notebooks with the solutions (conftest's solved_course: the image
    # holds the release's code and runs `nmtkit course`, what `make demo` runs), not a second course run on the host
    out, _, _, solved = solved_course
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert not stubs(solved)
    every = len(list(solved.glob("[0-9][0-9]_*.ipynb")))  # the course's notebooks, each said ok
    assert every == 6 and "unanswered" not in out.stdout and out.stdout.count(" ok (") == every, out.stdout[-2000:]


def test_make_test_is_green(rel):
    out = make(rel, "test", timeout=3000)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_nmtkit_variant_stores_the_id_and_says_which_in_the_release(rel, tmp_path):
    """The students' README's `nmtkit variant --id ID`: the release's CLI (no course staff's actions) stores the id
    beside the work and names the variant; `list` names every variant shipped."""
    env = {**_env(rel), "NMTKIT_WORKDIR": str(tmp_path)}
    env.pop("NMTKIT_VARIANT", None)
    env.pop("NMTKIT_STUDENT_ID", None)

    def nmtkit(*args):
        return subprocess.run([sys.executable, "-m", "nmtkit.cli", "variant", *args], cwd=rel, env=env,
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    out = nmtkit("--id", "s0042")
    assert out.returncode == 0, out.stderr[-2000:]
    assert re.search(r"variant variant-\d+ \(graded", out.stdout) and "'s0042'" in out.stdout, out.stdout
    assert (tmp_path / ".nmtkit-student-id").read_text().strip() == "s0042"
    listed = nmtkit("list")
    assert listed.returncode == 0 and "practice:" in listed.stdout and "variant-8:" in listed.stdout, listed.stdout
    staff = nmtkit("expected")  # the instructor's action: not in a student's CLI
    assert staff.returncode == 2 and "invalid choice" in staff.stderr


def test_make_doctor_passes(rel):
    out = make(rel, "doctor", timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]


def test_make_setup_is_the_fast_path_on_a_set_up_environment(rel):
    check = subprocess.run(["bash", "scripts/setup.sh", "--check"], cwd=rel, capture_output=True, text=True,
                           env={**_env(rel), "VENV": str(VENV)})
    if check.returncode != 0:  # a shared environment set up by another checkout's setup.sh: never reinstall it
        pytest.skip(f"{VENV} was set up by another set-up script or pins ({check.stdout.strip()}); from a fresh "
                    "clone `make test-all` sets it up with this one")
    out = subprocess.run(["make", "-C", str(rel), "setup", f"VENV={VENV}"], capture_output=True, text=True,
                         env=_env(rel), timeout=600)
    assert out.returncode == 0 and "already set up" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]


def test_make_lab_serves_the_notebooks(rel):
    proc = subprocess.Popen(["make", "-C", str(rel), "lab", f"VENV={VENV}"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=_env(rel), start_new_session=True)
    seen, deadline = "", time.time() + 180
    try:
        while time.time() < deadline and "token=" not in seen:
            line = proc.stdout.readline()
            if not line and proc.poll() is not None:
                break
            seen += line
        assert re.search(r"http://127\.0\.0\.1:\d+/lab\?token=", seen), seen[-2000:]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
