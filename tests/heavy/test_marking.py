"""Marking the written answers with the real parts: `nmtkit grade serve` (the standalone page) driven by two
headless Chromiums (the kit's DevTools harness, tests/test_browser.py), two graders marking one question for a class
of three (one right, one with a seed's misconception, one unanswered): a rubric item applied to two at once with the
keyboard, a conflict shown, a comment; then the marks merged into grades.csv (rows printed before and after) and each
student's feedback returned by `nmtkit hub feedback` into the hub's exchange: their own marks and comment, nobody
else's. The screenshot goes to .test-logs/marking.png. The same steps through a running hub's `marking` service
(the page behind the hub's login): tests/heavy/test_marking_hub.py, which reuses this file's helpers."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "instructor"))
import marking_class as mc  # noqa: E402
from test_browser import CHROMIUM, Chromium  # noqa: E402

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed: apt-get install chromium")
NMTKIT = str(Path(sys.executable).with_name("nmtkit"))
GID = "05-q5-verdict"
ANSWERS_JS = """JSON.stringify(state.data ? {q: state.data.grade_id, cur: state.cur,
  progress: document.getElementById('progress').textContent,
  conflict: document.getElementById('conflict').hidden ? '' : document.getElementById('conflict').textContent,
  marks: Object.fromEntries(state.data.answers.map(a => [a.student, a.mark]))} : null)"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def key(browser: Chromium, k: str) -> None:
    extra = {"windowsVirtualKeyCode": 13, "code": "Enter"} if k == "Enter" else {"text": k}
    browser.call("Input.dispatchKeyEvent", type="keyDown", key=k, **extra)
    browser.call("Input.dispatchKeyEvent", type="keyUp", key=k)


def page(browser: Chromium, port: int, grader: str) -> dict:
    browser.navigate(f"http://127.0.0.1:{port}/?grader={grader}#q={GID}")
    return browser.poll(ANSWERS_JS, lambda v: v["q"] == GID, 60)


def handed_in(state: Path, course: Path, out: Path, students: dict = mc.THREE, course_id: str = "nmtkit") -> None:
    """The students' submissions (name -> answers) in the hub's inbound boxes, collected as `nmtkit hub collect`
    does, and the grading's view of them (what `nmtkit grade --class` links), graded by marking_class."""
    from nmtkit.course.instructor import exchange
    for s in students:
        sub = state / "exchange" / course_id / "inbound" / s / f"{s}+hw1+2026-12-05 23:00:00.000000 UTC+r1"
        sub.mkdir(parents=True)
        (sub / mc.NB05).write_text("{}")
        (sub / "submission_secret.txt").write_text(f"secret-of-{s}")
    run(NMTKIT, "hub", "collect", "--assignment", "hw1", "--course-dir", str(course), "--state", str(state),
        "--course", course_id)
    exchange.class_view(course, out, "hw1")
    time.sleep(0.05)  # the grading is newer than the collected submission
    mc.make(out, students)


def screenshot(browser: Chromium, name: str) -> Path:
    import base64
    shot = ROOT / ".test-logs" / name
    shot.parent.mkdir(exist_ok=True)
    shot.write_bytes(base64.b64decode(browser.call("Page.captureScreenshot", format="png")["data"]))
    print(f"screenshot: {shot}")
    return shot


def run(*cmd) -> str:
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stdout + got.stderr
    return got.stdout


COMMENT = "The average was below the link's rate: the exchange runs in bursts."


def two_graders_mark(one: Chromium, two: Chromium, seen: dict, first: dict, names: dict, graders: tuple) -> dict:
    """On one question's page open in both (`seen`: two's view, loaded before one marks), grader one gives rubric
    item 1 to 'right' and 'wrong' at once (4 keys), grader two, on the stale page, item 2 to 'wrong' (the conflict
    shown, the last write wins) and a comment. `names`: role -> the student's name."""
    right, wrong, blank = (names[r] for r in ("right", "wrong", "blank"))
    assert first["progress"].startswith("graded 0 / to grade 2 / unanswered 1"), first
    for k in "xjx1":  # select right, move to wrong, select it, item 1 to both: 4 keys for two students
        key(one, k)
    got = one.poll(ANSWERS_JS, lambda v: v["marks"][wrong] is not None, 30)
    assert got["marks"][right]["items"] == [0] == got["marks"][wrong]["items"], got
    assert got["marks"][blank] is None and got["progress"].startswith("graded 2 / to grade 0 / unanswered 1")
    assert seen["marks"][wrong] is None
    key(two, "j")  # two moves to 'wrong' (unanswered 'blank' is skipped) and gives item 2 on the stale page
    key(two, "2")
    got = two.poll(ANSWERS_JS, lambda v: v["conflict"], 30)
    assert f"{wrong}: {graders[0]} had marked this" in got["conflict"], got
    assert got["marks"][wrong]["grader"] == graders[1], got
    key(two, "c")
    two.call("Input.insertText", text=COMMENT)
    key(two, "Enter")
    got = two.poll(ANSWERS_JS, lambda v: (v["marks"][wrong] or {}).get("comment"), 30)
    assert got["marks"][wrong]["items"] == [1]  # two's write, on two's page, replaced one's: the last one wins
    return got


def feedback_pages(state: Path, course: Path, out: Path, names: dict, course_id: str = "nmtkit") -> dict:
    """`nmtkit hub feedback` into the hub's feedback boxes; each student's pages (role -> text), checked: their own
    marks, comment and figures, nobody else's."""
    print(run(NMTKIT, "hub", "feedback", "--assignment", "hw1", "--course-dir", str(course), "--grades", str(out),
              "--state", str(state), "--course", course_id))
    box = state / "exchange" / course_id / "feedback"
    pages = {r: "".join(p.read_text() for p in (box / s).glob("*.html")) for r, s in names.items()}
    assert COMMENT.split(": ")[1] in pages["wrong"] and "runs in bursts" not in pages["right"] + pages["blank"]
    assert "1 / 4" in pages["wrong"] and "2 / 4" in pages["right"] and "unanswered" in pages["blank"]
    assert json.dumps(mc.FIGURES["bound_mb"]) in pages["right"]  # their own figures beside their marks
    for r, s in names.items():  # no other student's name in anyone's pages (names other than the roles' words)
        assert s == r or not [o for o in names.values() if o != s and o in pages[r]], r
    return pages


def test_two_graders_mark_one_question_and_each_student_gets_only_their_own(tmp_path):
    state, course, out = tmp_path / "state", tmp_path / "course", tmp_path / "grades"
    handed_in(state, course, out)
    print("grades.csv before:\n" + (out / "grades.csv").read_text())
    port = free_port()
    server = subprocess.Popen([NMTKIT, "grade", "serve", "--class", str(course), "--out", str(out), "--port",
                               str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    one, two = Chromium(tmp_path / "one"), Chromium(tmp_path / "two")
    try:
        assert "marking page" in server.stdout.readline()
        seen = page(two, port, "g2")  # g2 has the page open before g1 marks
        two_graders_mark(one, two, seen, page(one, port, "g1"), {r: r for r in mc.THREE}, ("g1", "g2"))
        screenshot(two, "marking.png")
    finally:
        one.close()
        two.close()
        server.terminate()
        server.wait(10)
    run(NMTKIT, "grade", "serve", "--class", str(course), "--out", str(out), "--merge")
    after = (out / "grades.csv").read_text()
    print("grades.csv after:\n" + after)
    assert "05-q5-written" in after
    feedback_pages(state, course, out, {r: r for r in mc.THREE})
