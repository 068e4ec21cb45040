"""The marks of the written answers and the hand-graded checks: a SQLite store (WAL) beside the class's grades.

`nmtkit grade --class DIR --out OUT` leaves every written verdict and every hand-graded check without points
("manual"). `fill(OUT)` makes each of them an answer to grade in OUT/marks.sqlite (unanswered ones marked), with the
question's rubric items (the instructor's book; a verdict cell of a question without one gets one item: a verdict
that follows from the student's own figures, the cell's points). A grader's mark is one row (grader, time, the
rubric items given, comment), never changed nor deleted; an answer's mark is its newest row. Points are computed
when read, from the items' points now (`set_points` appends an override), so changing an item regrades everyone
who got it. A write names the mark the grader saw; when another landed since, the write still lands (last write
wins) and returns the other's mark as the conflict. `merge(OUT)` puts the marks into grades.csv and
class-report.md (per question: check points, written points, total).
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

from nmtkit.errors import CourseError

DB = "marks.sqlite"
SCHEMA = """
CREATE TABLE IF NOT EXISTS answers(student TEXT, grade_id TEXT, question TEXT, kind TEXT, notebook TEXT,
    variant TEXT, text TEXT, answered INTEGER, figures TEXT, check_status TEXT, check_message TEXT,
    check_points REAL, check_max REAL, flags TEXT, model TEXT, PRIMARY KEY(student, grade_id));
CREATE TABLE IF NOT EXISTS items(grade_id TEXT, item INTEGER, text TEXT, points REAL, misconception TEXT,
    PRIMARY KEY(grade_id, item));
CREATE TABLE IF NOT EXISTS overrides(id INTEGER PRIMARY KEY AUTOINCREMENT, grade_id TEXT, item INTEGER,
    points REAL, grader TEXT, time TEXT);
CREATE TABLE IF NOT EXISTS marks(id INTEGER PRIMARY KEY AUTOINCREMENT, student TEXT, grade_id TEXT, grader TEXT,
    time TEXT, items TEXT, comment TEXT, seen INTEGER);
"""
DEFAULT_ITEM = "a verdict that follows from the student's own figures"
HAND_ITEMS = ("the figures right for the student's own run", "the method right, a figure off")


@dataclass(frozen=True)
class Mark:
    id: int
    student: str
    grade_id: str
    grader: str
    time: str
    items: tuple[int, ...]
    comment: str


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def connect(out_dir: str | Path) -> sqlite3.Connection:
    """The class's store, OUT/marks.sqlite, in WAL mode (graders read while another writes)."""
    path = Path(out_dir) / DB
    if not Path(out_dir).is_dir():
        raise CourseError(f"{out_dir}: no such directory; grade the class first: nmtkit grade --class DIR --out OUT")
    db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(SCHEMA)
    return db


# --- what there is to grade, from the instructor's notebooks ---------------------------------------------------

@lru_cache(maxsize=None)
def instructor_cells(notebook: str) -> dict:
    """grade id -> (cell type, points, source, the check's figure names, the question it asks) of the instructor's
    copy of `notebook`."""
    from nmtkit.course.instructor import scoring
    from nmtkit.course.student import NOTEBOOKS_DIR, cell_source, grade_id, read_notebook
    path = NOTEBOOKS_DIR / notebook
    if not path.is_file():
        return {}
    out = {}
    for cell in read_notebook(path).cells:
        gid = grade_id(cell)
        if not gid:
            continue
        points = (cell.metadata.get("nbgrader") or {}).get("points", 0)
        names, question = (), None
        if gid.endswith("-check") and cell.cell_type == "code":
            call = scoring.parse(gid, cell_source(cell))
            names, question = tuple(call.exprs), call.question
        out[gid] = (cell.cell_type, points, cell_source(cell), names, question)
    return out


def check_of(grade_id: str) -> str:
    """The check cell a verdict answers: the same prefix (05-q5-verdict -> 05-q5-check)."""
    return grade_id.rsplit("-", 1)[0] + "-check"


def question_of(notebook: str, grade_id: str) -> str:
    """The book's key a cell is about (q5, lab_fit), else the cell's prefix (01-size)."""
    cells = instructor_cells(notebook)
    got = cells.get(check_of(grade_id))
    return (got[4] if got else None) or grade_id.rsplit("-", 1)[0]


def rubric(notebook: str, grade_id: str) -> list[tuple[str, float, str]]:
    """(text, points, misconception) of the items a cell is marked with."""
    from nmtkit.course.instructor.book import book
    points = instructor_cells(notebook).get(grade_id, (None, 1))[1] or 1
    if grade_id.endswith("-check"):
        return [(HAND_ITEMS[0], points, ""), (HAND_ITEMS[1], points / 2, "")]
    m = book.get(question_of(notebook, grade_id))
    if m is not None and m.rubric:
        return [(i.text, i.points, i.misconception) for i in m.rubric]
    return [(DEFAULT_ITEM + " (the default rubric: this question has none in the instructor's book)", points, "")]


def model_answer(notebook: str, grade_id: str) -> str:
    """The instructor's solution text of a verdict cell (between nbgrader's solution markers)."""
    source = instructor_cells(notebook).get(grade_id, ("", 0, ""))[2]
    if "### BEGIN SOLUTION" not in source:
        return ""
    return source.split("### BEGIN SOLUTION", 1)[1].split("### END SOLUTION", 1)[0].strip()


def written_text(executed: str | None, grade_id: str) -> str:
    """The student's text of a markdown cell in their executed notebook."""
    if not executed or not Path(executed).is_file():
        return ""
    nb = json.loads(Path(executed).read_text())
    for cell in nb.get("cells", []):
        if (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id") == grade_id:
            src = cell.get("source", "")
            return "".join(src) if isinstance(src, list) else src
    return ""


# --- filling from nmtkit grade's results -------------------------------------------------------------------------

def answers_of(student: str, results: list[dict]) -> list[dict]:
    """Every written verdict and hand-graded check of one student's results, as rows of `answers`."""
    from nmtkit.course.instructor.book import hand_graded
    from nmtkit.course.instructor.flags import flags
    from nmtkit.course.student import MARKDOWN_STUB
    rows = []
    for nb in results:
        cells = {c["grade_id"]: c for c in nb["cells"]}
        ran = nb.get("executed")
        shown = context(json.loads(Path(ran).read_text())) if ran and Path(ran).is_file() else ""
        for gid, c in cells.items():
            question = question_of(nb["notebook"], gid)
            written = gid.endswith("-verdict")
            if not written and not (gid.endswith("-check") and hand_graded(question, grader=True)):
                continue
            check = cells.get(check_of(gid), {})
            names = instructor_cells(nb["notebook"]).get(check_of(gid), (None, 0, "", ()))[3]
            text = written_text(nb.get("executed"), gid) if written else ""
            answered = c["status"] != "unanswered" and (not written or (text.strip() and MARKDOWN_STUB not in text))
            figures = {n: nb.get("figures", {}).get(n) for n in names if n in nb.get("figures", {})}
            rows.append(dict(student=student, grade_id=gid, question=question, kind="written" if written else "hand",
                             notebook=nb["notebook"], variant=nb.get("variant", ""), text=text,
                             answered=int(bool(answered)), figures=json.dumps(figures, default=str),
                             check_status=check.get("status", ""), check_message=check.get("message", ""),
                             check_points=check.get("points"), check_max=check.get("max_points", 0),
                             flags=json.dumps(flags(text, figures, shown, nb["notebook"]) if answered and written
                                              else []), model=model_answer(nb["notebook"], gid)))
    return rows


def fill(out_dir: str | Path) -> int:
    """Every student's answers to grade from OUT/students/<name>.json; again after a regrade (marks are kept)."""
    from nmtkit.course.instructor.classgrade import results_of
    db, n = connect(out_dir), 0
    students = sorted(p.stem for p in (Path(out_dir) / "students").glob("*.json"))
    with db:
        for s in students:
            for row in answers_of(s, results_of(Path(out_dir), s)):
                db.execute(f"INSERT OR REPLACE INTO answers({','.join(row)}) VALUES ({','.join('?' * len(row))})",
                           tuple(row.values()))
                for i, (text, points, mis) in enumerate(rubric(row["notebook"], row["grade_id"])):
                    db.execute("INSERT OR IGNORE INTO items VALUES (?,?,?,?,?)", (row["grade_id"], i, text, points,
                                                                                 mis))
                n += 1
    db.close()
    return n


# --- marks -------------------------------------------------------------------------------------------------------

def items(db, grade_id: str) -> list[dict]:
    """The rubric items of a cell with their points now (the newest override, else the book's)."""
    rows = db.execute("SELECT item, text, points, misconception FROM items WHERE grade_id=? ORDER BY item",
                      (grade_id,)).fetchall()
    over = dict(db.execute("SELECT item, points FROM overrides WHERE grade_id=? ORDER BY id", (grade_id,)).fetchall())
    return [{"item": i, "text": t, "points": over.get(i, p), "misconception": m} for i, t, p, m in rows]


def _mark(row) -> Mark | None:
    return None if row is None else Mark(row[0], row[1], row[2], row[3], row[4], tuple(json.loads(row[5])), row[6])


def current(db, student: str, grade_id: str) -> Mark | None:
    return _mark(db.execute("SELECT id, student, grade_id, grader, time, items, comment FROM marks WHERE student=? "
                            "AND grade_id=? ORDER BY id DESC LIMIT 1", (student, grade_id)).fetchone())


def write(db, student: str, grade_id: str, grader: str, given, comment: str = "",
          seen: int | None = None) -> tuple[Mark, Mark | None]:
    """A new mark (always kept); and the mark another grader wrote since `seen` (the mark id this grader saw), if
    any: the conflict the grader is shown."""
    known = {i["item"] for i in items(db, grade_id)}
    if not known:
        raise CourseError(f"{grade_id}: no rubric for it in the store; fill the store first (marks.fill)")
    bad = set(given) - known
    if bad:
        raise CourseError(f"{grade_id}: no rubric item {sorted(bad)}; its items are {sorted(known)}")
    db.execute("BEGIN IMMEDIATE")
    try:
        before = current(db, student, grade_id)
        cur = db.execute("INSERT INTO marks(student, grade_id, grader, time, items, comment, seen) "
                         "VALUES (?,?,?,?,?,?,?)", (student, grade_id, grader, now(), json.dumps(sorted(set(given))),
                                                    comment, seen))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    conflict = before if before is not None and before.id != seen else None
    return current_by_id(db, cur.lastrowid), conflict


def current_by_id(db, mark_id: int) -> Mark:
    return _mark(db.execute("SELECT id, student, grade_id, grader, time, items, comment FROM marks WHERE id=?",
                            (mark_id,)).fetchone())


def set_points(db, grade_id: str, item: int, points: float, grader: str) -> None:
    """An item's points changed: every mark that gave it counts the new points when next read."""
    db.execute("INSERT INTO overrides(grade_id, item, points, grader, time) VALUES (?,?,?,?,?)",
               (grade_id, item, points, grader, now()))


def points(db, mark: Mark | None) -> float | None:
    if mark is None:
        return None
    by = {i["item"]: i["points"] for i in items(db, mark.grade_id)}
    return sum(by.get(i, 0) for i in mark.items)


def answer_rows(db, where: str = "1", args=()) -> list[dict]:
    cols = [d[1] for d in db.execute("PRAGMA table_info(answers)")]
    rows = db.execute(f"SELECT {','.join(cols)} FROM answers WHERE {where} ORDER BY student, grade_id", args)
    return [dict(zip(cols, r)) | {"figures": json.loads(r[cols.index("figures")] or "{}"),
                                  "flags": json.loads(r[cols.index("flags")] or "[]")} for r in rows]


def marked(db, student: str) -> list[dict]:
    """One student's answers, each with its mark (items given, their words and points now, comment)."""
    out = []
    for a in answer_rows(db, "student=?", (student,)):
        m = current(db, student, a["grade_id"])
        its = items(db, a["grade_id"])
        out.append(a | {"mark": m, "points": points(db, m), "max_points": sum(i["points"] for i in its if i["item"] == 0
                                                                                or a["kind"] == "written"),
                        "given": [i for i in its if m is not None and i["item"] in m.items]})
    return out


DERIVED = ("written_points", "to_grade", "total_points")


def _num(value) -> float:
    """A grades.csv cell as points: empty, "manual" or missing count 0."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _cell(value) -> str:
    return value if isinstance(value, str) else "" if value is None else f"{float(value):.10g}"


def merge(out_dir: str | Path) -> Path:
    """grades.csv with per question the check points, the written points and their total (marks as they stand
    now), and class-report.md with the marking's progress; both rewritten atomically, again after each marking.
    Plain csv, no pandas: the hub's `marking` service merges on the hub's own Python (hub/requirements.txt)."""
    import csv
    import io

    from nmtkit.files import atomic_write_text
    out_dir = Path(out_dir)
    path = out_dir / "grades.csv"
    if not path.is_file():
        raise CourseError(f"{path}: missing; grade the class first: nmtkit grade --class DIR --out {out_dir}")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        kept = [c for c in reader.fieldnames or [] if not c.endswith(("-written", "-total")) and c not in DERIVED]
        rows = [{c: r[c] for c in kept} for r in reader]
    if "student" not in kept or "variant" not in kept:
        raise CourseError(f"{path}: no 'student' or 'variant' column; grade the class again: nmtkit grade --class "
                          f"DIR --out {out_dir}")
    db = connect(out_dir)
    progress: dict[str, list[int]] = {}
    for row in rows:
        written = hand = 0.0
        left = 0
        for a in marked(db, row["student"]):
            q = a["grade_id"].rsplit("-", 1)[0]
            if a["kind"] == "hand":
                row[q] = a["points"]  # the grader's points replace the check's empty "manual" cell
                hand += a["points"] or 0.0
            else:
                row[f"{q}-written"] = a["points"]
                written += a["points"] or 0.0
            left += int(bool(a["answered"]) and a["mark"] is None)
            p = progress.setdefault(a["grade_id"], [0, 0, 0])
            p[0 if a["mark"] is not None else 1 if a["answered"] else 2] += 1
        for col in [c for c in row if c.endswith("-written")]:
            q = col[: -len("-written")]
            row[f"{q}-total"] = _num(row.get(q)) + _num(row[col])
        row.update(written_points=written, to_grade=left, total_points=_num(row["points"]) + written + hand)
    db.close()
    # classgrade.table writes the questions (<nb>-<q>) first, then its tail from `variant` on
    tail = kept[kept.index("variant"):]
    present = {c for r in rows for c in r} | set(kept)
    qs = sorted({c.rsplit("-", 1)[0] if c.endswith(("-written", "-total")) else c for c in present
                 if c not in tail and c not in DERIVED and c != "student"})
    cols = ["student"] + [c for q in qs for c in (q, f"{q}-written", f"{q}-total") if c in present] + tail
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols + list(DERIVED))
    w.writerows([_cell(r.get(c)) for c in cols + list(DERIVED)] for r in rows)
    atomic_write_text(path, buf.getvalue())
    return _report(out_dir, progress)


def progress_prefixes(progress: dict, end: str = "") -> list[str]:
    """The grades.csv columns (<nb>-<q>) of the answers marked here, those of `end` cells only if given."""
    return sorted({gid.rsplit("-", 1)[0] for gid in progress if gid.endswith(end)})


REPORT_MARK = "## Written answers and hand-graded checks"


def _report(out_dir: Path, progress: dict) -> Path:
    from nmtkit.files import atomic_write_text
    path = out_dir / "class-report.md"
    head = path.read_text().split(REPORT_MARK)[0].rstrip() + "\n\n" if path.is_file() else ""
    lines = [REPORT_MARK, "", "Marked in `nmtkit grade serve` (the marks in marks.sqlite); re-merged with "
             "`nmtkit grade serve --class DIR --out OUT --merge`.", "",
             "| answer | marked | to grade | unanswered |", "|---|---|---|---|"]
    lines += [f"| {gid} | {m} | {t} | {u} |" for gid, (m, t, u) in sorted(progress.items())]
    return atomic_write_text(path, head + "\n".join(lines) + "\n")


def context(nb: dict) -> str:
    """What a student's notebook showed them beside their answers: every output and the prose of the cells that
    are not answers (the course's own figures: 300,000 steps, the seeds' sizes). The flags' `not_in_run` reads it."""
    out = []
    for cell in nb.get("cells", []):
        gid = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id") or ""
        src = cell.get("source", "")
        if cell.get("cell_type") == "markdown" and not gid.endswith("-verdict"):
            out.append("".join(src) if isinstance(src, list) else src)
        for o in cell.get("outputs", []):
            for t in (o.get("text", ""), (o.get("data") or {}).get("text/plain", "")):
                out.append("".join(t) if isinstance(t, list) else t)
    return "\n".join(out)
