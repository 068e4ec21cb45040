"""RunDir is the session: the process that holds the lock, or a rank given its token as an argument, writes
run.json; any other process is refused, and two writers at one moment are refused, never interleaved."""
import json
import os
import subprocess
import sys
import time

import pytest

from nmtkit.errors import RunDirError
from nmtkit.runs import RunDir, RunHandle

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_transition_from_a_process_without_the_session_raises(tmp_path):
    with pytest.raises(RunDirError, match="holds neither its lock nor its token"):
        RunDir(tmp_path / "r").started(step=0)
    assert not (tmp_path / "r" / "run.json").exists()


def test_the_holder_and_its_ranks_write_and_a_stale_token_is_refused(tmp_path):
    rd = RunDir(tmp_path / "r")
    with rd.session():
        rd.started(step=0)
        rank = rd.handle().open()            # what a rank on an engine gets: path and token, as an argument
        assert not rank.holds and rank.token == rd.token
        rank.progress(3)
        stale = RunHandle(str(rd.path), "someone:1:0.0").open()
        with pytest.raises(RunDirError, match="taken this run directory over"):
            stale.progress(4)
    assert rd.status()["step"] == 3 and not rd.holds
    with pytest.raises(RunDirError):         # the session ended: its rank can no longer write
        rank.progress(5)


WRITER = """
import sys, time
import nmtkit.files as files
from nmtkit.runs import RunDir
real = files.atomic_write_json
def slow(path, obj):                          # a delay inside the write, after run.json was read
    print("writing", flush=True); time.sleep(3); return real(path, obj)
import nmtkit.runs as runs
runs.atomic_write_json = slow
rd = RunDir(sys.argv[1]).take()
print(rd.token, flush=True)
rd.record(writer="first")
print("done", flush=True)
"""


def test_two_writers_at_once_the_second_is_refused_not_interleaved(tmp_path):
    run = tmp_path / "r"
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(run)], stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=ROOT))
    token = p.stdout.readline().strip()
    assert p.stdout.readline().strip() == "writing"   # the first writer is inside its write now
    second = RunHandle(str(run), token).open()        # a member of the same job, so only the overlap stops it
    t0 = time.time()
    with pytest.raises(RunDirError, match="writing it right now"):
        second.record(writer="second")
    assert time.time() - t0 < 1.0                     # refused at once, not queued behind the first
    assert p.stdout.readline().strip() == "done" and p.wait(timeout=30) == 0
    state = json.loads((run / "run.json").read_text())
    assert state["writer"] == "first"
