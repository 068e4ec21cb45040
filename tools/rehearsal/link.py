"""The rehearsal's measured link: nmtkit.cluster.link (the transfer, the counters; preflight uses them too), plus
the same timed transfer between two network namespaces, each end a process started by `ip netns exec`."""
from __future__ import annotations

import json
import subprocess
import sys

import nmtkit.cluster.link as _link
from nmtkit.cluster.link import (  # noqa: F401
    NBYTES,
    NicCounters,
    best_of,
    counter_at,
    listen,
    measure_engines,
    receive,
    send,
    steady_traffic,
)

LINK_PY = _link.__file__  # run by path: the ends import only the standard library


def _netns_once(recv_ns: str, send_ns: str, addr: str, nbytes: int = NBYTES, python: str = sys.executable) -> dict:
    rx = subprocess.Popen(["ip", "netns", "exec", recv_ns, python, LINK_PY, "recv", addr, str(nbytes)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = rx.stdout.readline().strip()
        if not port.isdigit():
            raise RuntimeError(f"receiver in {recv_ns} did not start: {port} {rx.stderr.read()}")
        subprocess.run(["ip", "netns", "exec", send_ns, python, LINK_PY, "send", addr, port, str(nbytes)],
                       check=True, capture_output=True, timeout=120)
        out, err = rx.communicate(timeout=60)
        if rx.returncode != 0:
            raise RuntimeError(f"receiver in {recv_ns} failed: {err.strip()}")
        return json.loads(out)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()


def measure_netns(recv_ns: str, send_ns: str, addr: str, nbytes: int = NBYTES, python: str = sys.executable, *,
                  tries: int = 5, expect_mbit: float | None = None) -> dict:
    """The transfer between two network namespaces: `python nmtkit/cluster/link.py recv|send` in each."""
    return best_of(lambda: _netns_once(recv_ns, send_ns, addr, nbytes, python), tries, expect_mbit)
