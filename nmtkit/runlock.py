"""The lock file of a run directory, `<run>/.lock`: the primitive under nmtkit.runs.RunDir's session.

Two jobs on one run directory interleave their rank logs, delete each other's checkpoints and mix their status,
so a second launch must fail at once, naming who holds the directory (RunDirError: "run directory ... in use by
pid P on host H since T"). The lock is `fcntl.flock` on `.lock` (released by the kernel when its process dies,
however it dies), and the file's content says who holds it, with a token. A dead owner's lock is therefore free:
the next job takes it over and says whose it was. Only RunDir takes it (RunDir.take, RunDir.session); ranks of a
distributed job hold the token, given as an argument, and `still_ours()` tells them whether a newer job took the
directory over (an orphan from a killed driver then stops instead of writing over the new job's files).
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from datetime import datetime
from pathlib import Path

import psutil

from nmtkit.errors import RunDirError
from nmtkit.files import with_path

LOCK_FILE = ".lock"


def describe(owner: dict) -> str:
    since = owner.get("since")
    when = datetime.fromtimestamp(since).strftime("%Y-%m-%d %H:%M:%S") if isinstance(since, (int, float)) else "?"
    return f"pid {owner.get('pid', '?')} on host {owner.get('host', '?')} since {when}"


def read_owner(run: str | os.PathLike) -> dict:
    """Who holds (or last held) the lock: {"pid", "host", "since", "token"}; {} when nobody ever did."""
    try:
        return json.loads((Path(run) / LOCK_FILE).read_text() or "{}")
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return {}


class RunLock:
    """Exclusive lock on a run directory for this process; a context manager. `message` says what happened
    (taken, or taken over from a dead owner) for the caller to print."""

    def __init__(self, run: str | os.PathLike):
        self.run = Path(run)
        self.path = self.run / LOCK_FILE
        self._fd: int | None = None
        self.token = ""
        self.message = ""

    def acquire(self) -> "RunLock":
        self.run.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            owner = read_owner(self.run)
            raise RunDirError(f"run directory {self.run} in use by {describe(owner)}; stop that job first "
                               f"(Ctrl-C or `kill {owner.get('pid', '<pid>')}` on {owner.get('host', 'its host')}),"
                               f" or train into another --logdir") from None
        previous = read_owner(self.run)
        now = time.time()
        self.token = f"{socket.gethostname()}:{os.getpid()}:{now:.6f}"
        record = {"pid": os.getpid(), "host": socket.gethostname(), "since": now, "token": self.token}
        # Written in place (not renamed): the flock belongs to this inode.
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
            os.fsync(fd)
        except OSError as e:  # a full disk: the message names the lock file (os.pwrite's error names none)
            os.close(fd)
            raise with_path(e, self.path)
        self._fd = fd
        self.message = (f"took over the lock of {self.run} from {describe(previous)}, which is no longer running"
                        if previous.get("pid") else f"locked {self.run}")
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)  # an empty lock file: nobody holds it, nobody was taken over
        except OSError:
            pass
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> "RunLock":
        return self.acquire() if self._fd is None else self

    def __exit__(self, *exc) -> None:
        self.release()


def still_ours(run: str | os.PathLike, token: str) -> bool:
    """For ranks of a driver-held job: False once another job has taken the run directory over."""
    return read_owner(run).get("token") == token


def pid_alive(pid: int) -> bool:
    """False for a process that is gone or a zombie (dead for our purposes)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
