"""The marking page's cost: keystrokes per rubric-item mark, and the server's p95 latency per action with a class of
100 students' submissions loaded (synthetic results: tests/instructor/marking_class.py, a third each right, a seed's
misconception, unanswered; 3 verdicts and 2 hand-graded checks each, 500 answers).

    .venv/bin/python bench/marking.py [--students 100] [--repeat 50]

Prints one line per action (n, median, p95 in ms) and the keystrokes; figures go to bench/README.md.
"""
from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "instructor"))
import marking_class as mc  # noqa: E402

GID = "05-q5-verdict"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(url: str, body: dict | None = None) -> float:
    data = None if body is None else json.dumps(body).encode()
    t = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=60) as r:
        r.read()
    return (time.perf_counter() - t) * 1e3


def keystrokes(answered: int, selected: int) -> tuple[float, float]:
    """Keys per mark, as the page takes them: one student at a time a digit then j (2 a student); a group, x and j
    per student then one digit for all (2 + 1/n a student)."""
    one = (answered * 2) / answered
    group = (selected * 2 + 1) / selected
    return one, group


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--students", type=int, default=100)
    p.add_argument("--repeat", type=int, default=50)
    a = p.parse_args()
    out = Path(tempfile.mkdtemp(prefix="nmtkit-bench-marking-")) / "grades"
    kinds = list(mc.THREE.values())
    mc.make(out, {f"s{i:03d}": kinds[i % 3] for i in range(a.students)})
    port = free_port()
    server = subprocess.Popen([str(Path(sys.executable).with_name("nmtkit")), "grade", "serve", "--class", str(out),
                               "--out", str(out), "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()
        base, students = f"http://127.0.0.1:{port}/api/", [f"s{i:03d}" for i in range(a.students)]
        actions = {
            "GET question (100 answers)": lambda i: timed(f"{base}question/{GID}?grader=b"),
            "POST mark, one student": lambda i: timed(f"{base}mark?grader=b", {
                "grade_id": GID, "students": [students[i % a.students]], "items": [i % 3], "comment": "c"}),
            "POST mark, 10 selected": lambda i: timed(f"{base}mark?grader=b", {
                "grade_id": GID, "students": students[:10], "items": [0], "comment": ""}),
            "POST item points (regrade)": lambda i: timed(f"{base}points?grader=b", {
                "grade_id": GID, "item": 0, "points": 2 + i % 2}),
            "GET questions (progress)": lambda i: timed(f"{base}questions?grader=b"),
        }
        print(f"{a.students} students, {a.repeat} calls per action, one grader, 127.0.0.1")
        for name, act in actions.items():
            ms = sorted(act(i) for i in range(a.repeat))
            p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
            print(f"  {name:30s} median {statistics.median(ms):7.1f} ms   p95 {p95:7.1f} ms")
        merge = [timed(f"{base}merge?grader=b", {}) for _ in range(5)]
        print(f"  {'POST merge (grades.csv, report)':30s} median {statistics.median(merge):7.1f} ms   "
              f"max {max(merge):7.1f} ms (5 calls)")
    finally:
        server.terminate()
        server.wait(10)
    one, group = keystrokes(a.students * 2 // 3, 10)
    print(f"keystrokes per rubric-item mark: {one:.1f} one student at a time (digit, j); {group:.1f} in a group of 10 "
          f"(x and j each, one digit)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
