"""The grade-by-question page: one view per written question (and hand-graded check) for the whole class, served
standalone (`nmtkit grade serve --class DIR --out OUT`) or as the hub's `marking` service (hub/jupyterhub_config.py:
the hub's login, instructors only). Per student: the written answer, the figures their own notebook recorded, the
kit on those figures, the model verdict and the flags as hints; the question's rubric items to click or type (a
digit toggles an item and saves; j/k move; x selects; with a selection the digit marks every selected answer).

The page is static HTML/JS (markpage_static/, no build); the JSON API below it reads and writes the marks store
(nmtkit.course.instructor.marks), which needs only SQLite: the hub's own Python serves it with the kit on its path.

    GET  api/questions            [{grade_id, marked, to_grade, unanswered}]
    GET  api/question/<grade_id>  {items, answers: [...], progress}
    POST api/mark                 {grade_id, students, items, comment, seen: {student: mark id}} -> marks, conflicts
    POST api/points               {grade_id, item, points}: an item's points changed (everyone who got it regraded)
    POST api/merge                grades.csv and class-report.md re-merged
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import tornado.httputil
import tornado.ioloop
import tornado.web

from nmtkit.course.instructor import marks
from nmtkit.errors import CourseError

STATIC = Path(__file__).with_name("markpage_static")


def progress(db, grade_id: str | None = None) -> list[dict]:
    where, args = ("WHERE a.grade_id=?", (grade_id,)) if grade_id else ("", ())
    rows = db.execute(
        "SELECT a.grade_id, a.answered, (SELECT COUNT(*) FROM marks m WHERE m.student=a.student AND "
        f"m.grade_id=a.grade_id) > 0 FROM answers a {where}", args).fetchall()
    out: dict[str, dict] = {}
    for gid, answered, has in rows:
        p = out.setdefault(gid, {"grade_id": gid, "marked": 0, "to_grade": 0, "unanswered": 0})
        p["marked" if has else "to_grade" if answered else "unanswered"] += 1
    return [out[g] for g in sorted(out)]


def mark_json(db, m) -> dict | None:
    return None if m is None else {"id": m.id, "grader": m.grader, "time": m.time, "items": list(m.items),
                                   "comment": m.comment, "points": marks.points(db, m)}


def question(db, grade_id: str) -> dict:
    answers = marks.answer_rows(db, "grade_id=?", (grade_id,))
    if not answers:
        raise tornado.web.HTTPError(404, f"no answers to {grade_id}")
    out = []
    for a in answers:
        out.append({k: a[k] for k in ("student", "variant", "text", "answered", "figures", "check_status",
                                      "check_message", "flags", "model", "kind")}
                   | {"mark": mark_json(db, marks.current(db, a["student"], grade_id))})
    return {"grade_id": grade_id, "question": answers[0]["question"], "items": marks.items(db, grade_id),
            "answers": out, "progress": progress(db, grade_id)[0]}


class Base(tornado.web.RequestHandler):
    def initialize(self, out_dir: Path, who):
        self.out_dir, self.who = out_dir, who
        self.db = marks.connect(out_dir)

    def on_finish(self):
        self.db.close()

    def grader(self) -> str:
        name = self.who(self)
        if not name:
            raise tornado.web.HTTPError(403, "instructors only")
        return name

    def send(self, obj) -> None:
        self.set_header("Content-Type", "application/json")
        self.set_header("Cache-Control", "no-store")
        self.finish(json.dumps(obj, default=str))

    def body(self) -> dict:
        try:
            return json.loads(self.request.body or b"{}")
        except ValueError:
            raise tornado.web.HTTPError(400, "the body is not JSON") from None

    def write_error(self, status_code, **kw):
        reason = self._reason
        if "exc_info" in kw and isinstance(kw["exc_info"][1], (tornado.web.HTTPError, CourseError)):
            e = kw["exc_info"][1]
            reason = getattr(e, "log_message", None) or str(e)
        self.finish({"error": reason})


class Page(Base):
    def get(self, name="index.html"):
        self.grader()
        path = STATIC / (name or "index.html")
        if path.parent != STATIC or not path.is_file():
            raise tornado.web.HTTPError(404)
        self.set_header("Content-Type", "text/html" if path.suffix == ".html" else "application/javascript"
                        if path.suffix == ".js" else "text/css")
        self.finish(path.read_bytes())


class Questions(Base):
    def get(self):
        self.send({"grader": self.grader(), "questions": progress(self.db)})


class Question(Base):
    def get(self, grade_id):
        self.grader()
        self.send(question(self.db, grade_id))


class Mark(Base):
    def post(self):
        grader, b = self.grader(), self.body()
        gid, seen, done, conflicts = b.get("grade_id", ""), b.get("seen") or {}, {}, {}
        try:
            for s in b.get("students") or []:
                m, other = marks.write(self.db, s, gid, grader, b.get("items") or [], b.get("comment") or "",
                                       seen.get(s))
                done[s] = mark_json(self.db, m)
                if other is not None:
                    conflicts[s] = mark_json(self.db, other)
        except CourseError as e:
            raise tornado.web.HTTPError(400, str(e)) from None
        self.send({"marks": done, "conflicts": conflicts, "progress": progress(self.db, gid)[0]})


class Points(Base):
    def post(self):
        grader, b = self.grader(), self.body()
        marks.set_points(self.db, b["grade_id"], int(b["item"]), float(b["points"]), grader)
        self.send({"items": marks.items(self.db, b["grade_id"])})


class Merge(Base):
    def post(self):
        self.grader()
        report = marks.merge(self.out_dir)
        self.send({"grades": str(self.out_dir / "grades.csv"), "report": str(report)})


def app(out_dir: str | Path, who, prefix: str = "/", **settings) -> tornado.web.Application:
    """The page's routes under `prefix`; `who(handler)` names the grader, or None for one who may not grade."""
    kw = {"out_dir": Path(out_dir), "who": who}
    p = prefix.rstrip("/") + "/"
    return tornado.web.Application([
        (p + r"api/questions", Questions, kw), (p + r"api/question/([\w.-]+)", Question, kw),
        (p + r"api/mark", Mark, kw), (p + r"api/points", Points, kw), (p + r"api/merge", Merge, kw),
        (p + r"(index\.html|mark\.js|mark\.css)?", Page, kw)], **settings)


def local_grader(default: str):
    """Standalone, on this machine: the grader names themselves (?grader=NAME once, then a cookie), else `default`."""
    def who(h):
        name = h.get_argument("grader", None) or h.get_cookie("nmtkit_grader") or default
        if h.get_argument("grader", None):
            h.set_cookie("nmtkit_grader", name, httponly=True, samesite="Strict")
        return name
    return who


def hub_app(out_dir: Path) -> tornado.web.Application:
    """The hub's `marking` service: the hub's OAuth login; instructors ($NMTKIT_HUB_INSTRUCTORS) only."""
    from jupyterhub.services.auth import HubOAuth, HubOAuthCallbackHandler
    prefix = os.environ["JUPYTERHUB_SERVICE_PREFIX"]
    staff = {u for u in os.environ.get("NMTKIT_HUB_INSTRUCTORS", "instructor").split(",") if u}
    auth = HubOAuth(cache_max_age=60)

    def who(h):
        user = auth.get_user(h)
        if user is None and "/api/" in h.request.path:  # a fetch is not redirected to a login page
            raise tornado.web.HTTPError(403, "not logged in to the hub (or the login expired): reload the page")
        if user is None:  # to the hub's login, back here after (HubOAuthenticated's way: a state cookie)
            state = auth.set_state_cookie(h, next_url=h.request.uri)
            h.redirect(tornado.httputil.url_concat(auth.login_url, {"state": state}))
            raise tornado.web.Finish()
        return user["name"] if user["name"] in staff else None

    application = app(out_dir, who, prefix, cookie_secret=os.urandom(32))
    application.add_handlers(".*", [(prefix.rstrip("/") + "/oauth_callback", HubOAuthCallbackHandler,
                                     {})])
    application.settings["hub_auth"] = auth
    return application


def serve(out_dir: Path, port: int, host: str = "127.0.0.1", hub: bool = False, grader: str = "") -> None:
    marks.fill(out_dir) if not hub else marks.connect(out_dir).close()
    application = hub_app(out_dir) if hub else app(out_dir, local_grader(grader or os.environ.get("USER", "grader")))
    application.listen(port, host)
    print(f"marking page: http://{host}:{port}{os.environ.get('JUPYTERHUB_SERVICE_PREFIX', '/')} ({out_dir})",
          flush=True)
    tornado.ioloop.IOLoop.current().start()


def add_args(p) -> None:
    """`nmtkit grade serve --class DIR --out OUT [--port N] [--grader NAME] [--merge]` on `nmtkit grade`'s parser."""
    p.add_argument("action", nargs="?", choices=("serve",),
                   help="serve: the grade-by-question page for --class's grading in --out (docs/instructors.md)")
    p.add_argument("--port", type=int, default=8765, help="serve: the page's port on 127.0.0.1 (default 8765)")
    p.add_argument("--grader", default="", help="serve: your name on the marks (default $USER)")
    p.add_argument("--merge", action="store_true", help="serve: merge the marks into grades.csv and stop")


def cmd_serve(args) -> int:
    out = Path(args.out or "")
    if not args.out or not (out / "grades.csv").is_file():
        raise CourseError(f"--out {args.out}: no grades.csv there; grade the class first: nmtkit grade --class "
                          f"{args.class_dir} --out OUT, then nmtkit grade serve --class {args.class_dir} --out OUT")
    if args.merge:
        marks.fill(out)
        print(f"marks merged: {out / 'grades.csv'}, {marks.merge(out)}")
        return 0
    serve(out, args.port, grader=args.grader)
    return 0


def main(argv=None) -> int:
    """The hub's service: python -m nmtkit.course.instructor.markpage --hub --out GRADES (port from the hub)."""
    p = argparse.ArgumentParser(prog="python -m nmtkit.course.instructor.markpage")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--hub", action="store_true")
    p.add_argument("--port", type=int, default=8765)
    a = p.parse_args(argv)
    url = os.environ.get("JUPYTERHUB_SERVICE_URL", "")
    port = int(url.rsplit(":", 1)[1].split("/")[0]) if a.hub and url else a.port
    serve(a.out, port, hub=a.hub)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
