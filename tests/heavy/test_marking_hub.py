"""Marking the written answers through the class's real hub (`make hub`, hub/jupyterhub_config.py's `marking`
service): headless Chromium (the kit's DevTools harness) opens /services/marking/, follows the service's OAuth
redirects to the hub's login page, logs in there and comes back through the hub's authorization and the service's
callback, as a browser does. Two instructors, each in a browser of their own, grade one question for a class of three
(one right, one with a seed's misconception, one unanswered): a rubric item to two at once, a conflict shown, a
comment; the page's merge button merges the marks into grades.csv on the hub's own Python (no pandas there). A
student logged in to the same hub is refused the service (403). `nmtkit hub feedback` then fills each student's
feedback box, the directory the hub mounts into that student's server alone: their own marks and comment, nobody
else's. No student server is started (the image is not needed). The screenshot goes to .test-logs/marking-hub.png."""
from __future__ import annotations

import json
import time

import pytest
from dockertools import why_not
from hubtools import Hub, free_port
from hubtools import why_not as hub_why_not
from test_marking import (
    ANSWERS_JS,
    CHROMIUM,
    GID,
    NMTKIT,
    Chromium,
    feedback_pages,
    handed_in,
    mc,
    run,
    screenshot,
    two_graders_mark,
)

WHY = why_not() or hub_why_not() or (None if CHROMIUM else "headless Chromium not installed: apt-get install chromium")
pytestmark = pytest.mark.skipif(bool(WHY), reason=str(WHY))
WHERE = """JSON.stringify({path: location.pathname, ready: document.readyState,
  status: (performance.getEntriesByType('navigation')[0] || {}).responseStatus,
  text: document.body ? document.body.innerText.slice(0, 400) : ''})"""


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    """One hub serving the marking service over a graded class of three (its students are hub users)."""
    tmp = tmp_path_factory.mktemp("markhub")
    h = Hub(tmp / "state", "nmtkit-not-spawned:none", "nmtkit-not-spawned:none", tmp / "hub.log")
    sfx = h.course[1:]
    h.instructors = [h.instructor, f"prof2{sfx}"]
    h.names = {r: f"{r}{sfx}" for r in mc.THREE}  # role (right, wrong, blank) -> the student's hub name
    h.students = list(h.names.values())
    h.course_dir, h.out = tmp / "course", tmp / "grades"
    handed_in(h.state, h.course_dir, h.out, {h.names[r]: a for r, a in mc.THREE.items()}, h.course)
    h.before = (h.out / "grades.csv").read_text()
    # the store filled on the host, in the instructor's kit, before the hub starts (docs/hub.md)
    run(NMTKIT, "grade", "serve", "--class", str(h.course_dir), "--out", str(h.out), "--merge")
    h.extra_env = {"NMTKIT_HUB_GRADES": str(h.out), "NMTKIT_HUB_MARKING_PORT": str(free_port())}
    try:
        start = time.time()
        h.start()
        h.roster(tmp / "roster.csv")
        print(f"[marking hub] hub up with its roster in {time.time() - start:.0f} s")
        yield h
    finally:
        h.remove_all()


def log_in(browser: Chromium, hub: Hub, user: str, url: str) -> dict:
    """`url` in a fresh browser: the hub's login page comes up on the way; `user` logs in there; where it ends."""
    browser.navigate(url)
    form = browser.poll("JSON.stringify(!!document.querySelector('input[name=password]'))", bool, timeout=60)
    assert form, (browser.evaluate("location.href"), hub.log.read_text()[-2000:])
    browser.evaluate(f"""(() => {{ document.querySelector('input[name=username]').value = {json.dumps(user)};
        document.querySelector('input[name=password]').value = {json.dumps(hub.passwords[user])};
        document.querySelector('form').submit(); return 'sent'; }})()""")
    return browser.poll(WHERE, lambda v: "/hub/login" not in v["path"] and v["ready"] == "complete", 60)


def open_question(browser: Chromium, hub: Hub, user: str) -> dict:
    """An instructor logs in on the way to the marking page and picks the question in its menu."""
    where = log_in(browser, hub, user, f"{hub.url}/services/marking/")
    assert where["path"] == "/services/marking/" and where["status"] == 200, (where, hub.log.read_text()[-3000:])
    got = browser.poll(ANSWERS_JS, lambda v: v["q"], 60)
    assert got, browser.evaluate("document.getElementById('progress').textContent")
    browser.evaluate(f"""(() => {{ const s = document.getElementById('question'); s.value = {json.dumps(GID)};
        s.dispatchEvent(new Event('change')); return 'picked'; }})()""")
    return browser.poll(ANSWERS_JS, lambda v: v["q"] == GID and v["progress"].startswith("graded"), 60)


def test_two_instructors_mark_through_the_hub_a_student_is_refused_and_feedback_is_each_ones_own(hub, tmp_path):
    print("grades.csv before:\n" + hub.before)
    one, two = Chromium(tmp_path / "one"), Chromium(tmp_path / "two")
    start = time.time()
    try:
        seen = open_question(two, hub, hub.instructors[1])  # the second grader has the page open first
        two_graders_mark(one, two, seen, open_question(one, hub, hub.instructors[0]), hub.names,
                         tuple(hub.instructors))
        one.evaluate("document.getElementById('merge').click()")  # merged by the service, on the hub's Python
        merged = one.poll("JSON.stringify(document.getElementById('merged').textContent)",
                          lambda t: t.startswith("merge"), 60)
        assert merged == f"merged: {hub.out / 'grades.csv'}", merged
        screenshot(two, "marking-hub.png")
    finally:
        one.close()
        two.close()
    print(f"[marking hub] two graders through the hub's login: {time.time() - start:.0f} s")
    after = (hub.out / "grades.csv").read_text()
    print("grades.csv after:\n" + after)
    rows = {line.split(",")[0]: line for line in after.splitlines()}
    head = rows["student"].split(",")
    for role, want in (("right", "2"), ("wrong", "1"), ("blank", "")):  # item 1 (2 pts), g2's item 2 (1 pt), none
        assert rows[hub.names[role]].split(",")[head.index("05-q5-written")] == want, (role, rows)
    feedback_pages(hub.state, hub.course_dir, hub.out, hub.names, hub.course)


def test_a_student_is_refused_the_marking_service(hub, tmp_path):
    browser = Chromium(tmp_path / "student")
    try:
        where = log_in(browser, hub, hub.names["right"], f"{hub.url}/services/marking/")
        assert where["status"] == 403 and "/services/marking/" not in where["path"], where
        api = browser.call("Runtime.evaluate", awaitPromise=True, returnByValue=True, expression=(
            "fetch('/services/marking/api/question/" + GID + "').then(r => r.status)"))["result"]["value"]
        assert api == 403, api  # the API behind the page: the same refusal, no answers
    finally:
        browser.close()
