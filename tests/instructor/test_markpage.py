"""The grade-by-question page's API (nmtkit.course.instructor.markpage) over a class of three, in-process."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tornado.testing import AsyncHTTPTestCase

sys.path.insert(0, str(Path(__file__).parent))
import marking_class as mc

from nmtkit.course.instructor import markpage, marks


class PageTest(AsyncHTTPTestCase):
    def get_app(self):
        import tempfile
        self.out = mc.make(Path(tempfile.mkdtemp()) / "grades", mc.THREE)
        marks.fill(self.out)
        staff = {"g1", "g2"}
        return markpage.app(self.out, lambda h: h.get_argument("grader", None) if h.get_argument(
            "grader", None) in staff else None)

    def call(self, path, body=None, grader="g1"):
        r = self.fetch(f"/api/{path}?grader={grader}", method="POST" if body is not None else "GET",
                       body=json.dumps(body) if body is not None else None, raise_error=False)
        return r.code, json.loads(r.body)

    def test_a_question_shows_each_students_answer_figures_kit_flags_and_progress(self):
        code, q = self.call("question/05-q5-verdict")
        assert code == 200 and q["question"] == "q5" and len(q["items"]) == 3
        by = {a["student"]: a for a in q["answers"]}
        assert by["wrong"]["text"].startswith("GPU memory") and "gpu_memory" in {c for c, _ in by["wrong"]["flags"]}
        assert by["right"]["figures"]["bound_mb"] == 365.2 and by["right"]["model"].startswith("The measured bytes")
        assert by["blank"]["answered"] == 0 and q["progress"] == {"grade_id": "05-q5-verdict", "marked": 0,
                                                                   "to_grade": 2, "unanswered": 1}
        code, qs = self.call("questions")
        assert {x["grade_id"] for x in qs["questions"]} >= {"05-q5-check", "05-q11-check", "05-q3-verdict"}

    def test_one_item_to_two_students_at_once_then_a_conflict_is_shown_and_nothing_lost(self):
        code, got = self.call("mark", {"grade_id": "05-q5-verdict", "students": ["right", "wrong"], "items": [0],
                                       "comment": "", "seen": {}})
        assert code == 200 and set(got["marks"]) == {"right", "wrong"} and got["conflicts"] == {}
        assert got["progress"]["marked"] == 2 and got["progress"]["to_grade"] == 0
        # g2 loaded the page before g1's marks: its write lands and shows g1's mark
        code, got = self.call("mark", {"grade_id": "05-q5-verdict", "students": ["wrong"], "items": [1],
                                       "comment": "average", "seen": {"wrong": None}}, grader="g2")
        assert got["conflicts"]["wrong"]["grader"] == "g1" and got["marks"]["wrong"]["points"] == 1
        import sqlite3
        assert sqlite3.connect(self.out / marks.DB).execute("SELECT COUNT(*) FROM marks").fetchone()[0] == 3

    def test_who_is_not_staff_gets_403_and_a_bad_item_one_line(self):
        assert self.call("questions", grader="student")[0] == 403
        code, got = self.call("mark", {"grade_id": "05-q5-verdict", "students": ["right"], "items": [9]})
        assert code == 400 and "no rubric item" in got["error"]
        assert self.fetch("/?grader=g1").code == 200 and b"mark.js" in self.fetch("/?grader=g1").body

    def test_an_items_points_changed_on_the_page_regrade_the_marks(self):
        self.call("mark", {"grade_id": "05-q3-verdict", "students": ["right"], "items": [0]})
        self.call("points", {"grade_id": "05-q3-verdict", "item": 0, "points": 5})
        code, q = self.call("question/05-q3-verdict")
        assert {a["student"]: a["mark"] for a in q["answers"]}["right"]["points"] == 5
