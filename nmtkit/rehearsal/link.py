"""Node-to-node throughput: a timed TCP transfer between two hosts' data addresses, timed on the receiver.

On engines (what preflight can run between nodes): `port = listen(addr)` on the receiving node's engine, then at
once `receive(port)` there (async) and `send(addr, port)` on the other node's engine; `receive` returns Mbit/s.
`measure_engines(client, recv_engine, send_engine, addr)` does the three calls. From a shell (what the rehearsal
runs through `ip netns exec`): `python -m nmtkit.rehearsal.link recv ADDR` prints its port, then a JSON result;
`python -m nmtkit.rehearsal.link send ADDR PORT`. `measure_netns(recv_ns, send_ns, addr)` runs both.

Each figure is the best of up to 5 transfers (see best_of). The clock starts at the first byte
received and stops at the last, so connection set-up and process start-up do
not count; TCP and IP headers are not counted either (goodput), so a link limited to R by tc shows about
0.95 x R with 1500-byte frames.
"""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

NBYTES = 64 << 20
CHUNK = 1 << 20
_listeners: dict[int, socket.socket] = {}


def listen(addr: str, port: int = 0) -> int:
    """Runs on the receiving node: open a listener on `addr`; returns its port (receive() accepts on it)."""
    s = socket.create_server((addr, port))
    s.settimeout(60)
    port = s.getsockname()[1]
    _listeners[port] = s
    return port


def receive(port: int, nbytes: int = NBYTES) -> dict:
    """Runs on the receiving node: accept one sender on listen()'s port, read nbytes, time them."""
    server = _listeners.pop(port)
    try:
        conn, peer = server.accept()
    finally:
        server.close()
    with conn:
        conn.settimeout(60)
        buf = bytearray(CHUNK)
        got = conn.recv_into(buf)
        t0 = time.perf_counter()
        first = got
        while got < nbytes:
            n = conn.recv_into(buf)
            if n == 0:
                raise ConnectionError(f"sender {peer[0]} closed after {got} of {nbytes} bytes")
            got += n
        seconds = time.perf_counter() - t0
        conn.sendall(b"k")  # the sender waits for this, so it never closes before we have everything
    timed = got - first
    return {"bytes": got, "seconds": seconds, "mbit_s": 8 * timed / seconds / 1e6, "from": peer[0],
            "host": socket.gethostname()}


def send(addr: str, port: int, nbytes: int = NBYTES) -> int:
    """Runs on the sending node: send nbytes to addr:port; returns the bytes sent."""
    block = b"\0" * CHUNK
    with socket.create_connection((addr, port), timeout=60) as s:
        sent = 0
        while sent < nbytes:
            n = min(CHUNK, nbytes - sent)
            s.sendall(block[:n])
            sent += n
        s.recv(1)
    return sent


def _engines_once(client, recv_engine: int, send_engine: int, addr: str, nbytes: int = NBYTES) -> dict:
    port = client[recv_engine].apply_sync(listen, addr)
    rx = client[recv_engine].apply_async(receive, port, nbytes)
    client[send_engine].apply_sync(send, addr, port, nbytes)
    return rx.get(timeout=120)


def _netns_once(recv_ns: str, send_ns: str, addr: str, nbytes: int = NBYTES, python: str = sys.executable) -> dict:
    rx = subprocess.Popen(["ip", "netns", "exec", recv_ns, python, "-m", __name__, "recv", addr, str(nbytes)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = rx.stdout.readline().strip()
        if not port.isdigit():
            raise RuntimeError(f"receiver in {recv_ns} did not start: {port} {rx.stderr.read()}")
        subprocess.run(["ip", "netns", "exec", send_ns, python, "-m", __name__, "send", addr, port, str(nbytes)],
                       check=True, capture_output=True, timeout=120)
        out, err = rx.communicate(timeout=60)
        if rx.returncode != 0:
            raise RuntimeError(f"receiver in {recv_ns} failed: {err.strip()}")
        return json.loads(out)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()


def best_of(once, tries: int, expect_mbit: float | None) -> dict:
    """The fastest of up to `tries` transfers (stopping once one reaches 90% of `expect_mbit`): on a busy machine
    a descheduled sender or receiver makes one transfer slow, never fast, so the best is the link's figure."""
    runs = []
    for _ in range(tries):
        runs.append(once())
        if expect_mbit and runs[-1]["mbit_s"] >= 0.9 * expect_mbit:
            break
    best = max(runs, key=lambda r: r["mbit_s"])
    return dict(best, tries=[round(r["mbit_s"], 1) for r in runs])


def measure_engines(client, recv_engine: int, send_engine: int, addr: str, nbytes: int = NBYTES, *,
                    tries: int = 5, expect_mbit: float | None = None) -> dict:
    """A timed transfer between two ipyparallel engines (on two nodes); `addr` is the receiver's data address."""
    return best_of(lambda: _engines_once(client, recv_engine, send_engine, addr, nbytes), tries, expect_mbit)


def measure_netns(recv_ns: str, send_ns: str, addr: str, nbytes: int = NBYTES, python: str = sys.executable, *,
                  tries: int = 5, expect_mbit: float | None = None) -> dict:
    """The same transfer between two network namespaces, each end a `python -m nmtkit.rehearsal.link` process."""
    return best_of(lambda: _netns_once(recv_ns, send_ns, addr, nbytes, python), tries, expect_mbit)


def main(argv: list[str]) -> int:
    if argv[:1] == ["recv"] and len(argv) in (2, 3):
        port = listen(argv[1])
        print(port, flush=True)
        print(json.dumps(receive(port, int(argv[2]) if len(argv) == 3 else NBYTES)), flush=True)
        return 0
    if argv[:1] == ["send"] and len(argv) in (3, 4):
        send(argv[1], int(argv[2]), int(argv[3]) if len(argv) == 4 else NBYTES)
        return 0
    print("usage: python -m nmtkit.rehearsal.link recv ADDR [BYTES] | send ADDR PORT [BYTES]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
