"""No orphans: whatever a driver starts exits soon after the driver dies, however it dies (SIGTERM, SIGKILL, a
Jupyter kernel restart).

ipyparallel starts the controller and the engines in sessions of their own (so Ctrl-C in the notebook does not
reach them), and an engine busy training never runs the heartbeat check that would end it when the controller
goes away (`IPEngine.max_heartbeat_misses` acts only on an idle engine). So the driver holds a *lifeline*, a TCP
connection to every engine and a pipe to a small reaper process, and the kernel closes both when the driver dies:

- on an engine, `hold()` starts a thread that waits on the connection; when it closes, the engine sends itself
  SIGTERM (a training rank stops at the next step, all ranks agree, rank 0 checkpoints) and exits for good
  after `grace` seconds whatever happens (a rank stuck in a collective with a dead peer included);
- on the driver's host, the reaper (`python -m nmtkit.cluster.lifeline <grace> <pid>... [-- <command>]`) waits on
  its stdin; at EOF without a "done" line it runs the command (a Slurm job's `scancel <id>`: the scheduler, not
  the driver, holds those engines), SIGTERMs the controller and local engines, then SIGKILLs what is left.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

GRACE = 40.0  # seconds from the driver's death to the hard exit: a checkpoint of wmt16-base takes a few


class Lifeline:
    """The driver's end: a listener on the cluster's address whose connections stay open while the driver lives."""

    def __init__(self, addr: str):
        self.server = socket.create_server((addr, 0))
        self.addr, self.port = addr, self.server.getsockname()[1]
        self._conns: list[socket.socket] = []
        self._reaper: subprocess.Popen | None = None
        self.on_death: list[str] = []  # a command the reaper runs when the driver dies (e.g. scancel <job>)
        threading.Thread(target=self._accept, name="nmtkit-lifeline", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:  # closed
                return
            self._conns.append(conn)

    def reap(self, pids: list[int], grace: float = GRACE) -> None:
        """Start (or restart) the reaper for these local pids (the controller, local engines)."""
        self.disarm()
        cmd = ["--", *self.on_death] if self.on_death else []
        self._reaper = subprocess.Popen([sys.executable, "-m", "nmtkit.cluster.lifeline", str(grace),
                                         *map(str, pids), *cmd], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)

    def disarm(self) -> None:
        """A clean stop: tell the reaper its work is done."""
        if self._reaper is not None and self._reaper.poll() is None:
            try:
                self._reaper.stdin.write(b"done\n")
                self._reaper.stdin.close()
            except OSError:
                pass
            self._reaper.wait(timeout=10)
        self._reaper = None

    def close(self) -> None:
        self.disarm()
        self.server.close()
        for c in self._conns:
            c.close()


# --- the engine's end (module level, so ipyparallel sends it by reference) -----------------------------------

_held: dict = {}


def hold(addr: str, port: int, grace: float = GRACE) -> int:
    """Runs on an engine: tie this engine's life to the driver's. Returns the engine's pid. Idempotent."""
    if _held.get("port") == (addr, port):
        return os.getpid()
    conn = socket.create_connection((addr, port), timeout=30)
    conn.settimeout(None)
    _held["port"] = (addr, port)
    threading.Thread(target=_watch, args=(conn, grace), name="nmtkit-lifeline", daemon=True).start()
    return os.getpid()


def _watch(conn: socket.socket, grace: float) -> None:
    try:
        while conn.recv(64):
            pass
    except OSError:
        pass
    # The driver is gone: stop training gracefully, then leave whatever happens.
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace)
    os._exit(1)


# --- the reaper --------------------------------------------------------------------------------------------

def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _with_descendants(pids: list[int]) -> list[int]:
    """The processes and everything they started (the controller forks its schedulers; engines their nannies)."""
    import psutil
    out = list(pids)
    for pid in pids:
        try:
            out += [c.pid for c in psutil.Process(pid).children(recursive=True)]
        except psutil.Error:
            continue
    return list(dict.fromkeys(out))


def reaper_main(grace: float, pids: list[int], command: list[str] = ()) -> int:
    if sys.stdin.buffer.read().startswith(b"done"):
        return 0
    if command:
        try:
            subprocess.run(list(command), stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            pass  # the pids below still get their signals
    pids = _with_descendants(pids)
    for pid in pids:  # engines first get their own lifeline's SIGTERM; this covers the controller and stragglers
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.time() + grace
    while time.time() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.5)
    for pid in pids:
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    return 0


if __name__ == "__main__":
    args = sys.argv[2:]
    cut = args.index("--") if "--" in args else len(args)
    sys.exit(reaper_main(float(sys.argv[1]), [int(p) for p in args[:cut]], args[cut + 1:]))
