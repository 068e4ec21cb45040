"""The run-directory lock: a second job fails at once naming the holder; a dead holder's lock is taken over."""
import os
import signal
import subprocess
import sys
import time

import pytest

from nmtkit.errors import RunDirError
from nmtkit.runlock import RunLock, read_owner, still_ours

HOLD = """
import sys, time
from nmtkit.runlock import RunLock
lock = RunLock(sys.argv[1]).acquire()
print("held", flush=True)
time.sleep(60)
"""


def _holder(run):
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_second_lock_fails_at_once_naming_pid_and_host(tmp_path):
    p = _holder(tmp_path)
    try:
        t0 = time.time()
        with pytest.raises(RunDirError) as err:
            RunLock(tmp_path).acquire()
        assert time.time() - t0 < 1.0
        msg = str(err.value)
        assert f"in use by pid {p.pid} on host" in msg and "since" in msg and "\n" not in msg
    finally:
        p.kill()
        p.wait()


def test_dead_owner_is_taken_over_with_a_message(tmp_path):
    p = _holder(tmp_path)
    old = read_owner(tmp_path)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    with RunLock(tmp_path) as lock:
        assert f"pid {p.pid}" in lock.message and "no longer running" in lock.message
        assert read_owner(tmp_path)["pid"] == os.getpid()
        assert not still_ours(tmp_path, old["token"])  # the orphan's token no longer matches
        assert still_ours(tmp_path, lock.token)
    assert read_owner(tmp_path) == {}  # released: empty, so the next job is not told of a takeover
    with RunLock(tmp_path) as again:
        assert again.message.startswith("locked")
