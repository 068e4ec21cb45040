"""The hub's exchange on the instructor's side (docs/hub.md): collecting each student's own inbound box into
nbgrader's collected layout, and `nmtkit grade --class` reading that layout directly.

The hub mounts into each student's container only their own box, `<exchange>/<course>/inbound/<user>/`, where
nbgrader's `submit` writes `<student>+<assignment>+<timestamp>+<random>/`. The student id in that name comes from the
student's environment, which they control; the box's owner does not. So a submission counts only for the owner of
the box it is in, and one whose name claims another student is refused (reported, never credited to anyone).

nbgrader's collected layout, what `nbgrader collect` makes and `--class` reads:
    <course>/submitted/<student>/<assignment>/<notebooks>, timestamp.txt

Releasing (`release`) lays an assignment out as nbgrader's `release_assignment` does, `outbound/<assignment>/`
(directories 0755, files 0644: students read it as other uids through a read-only mount), and records it beside,
in `outbound/.<assignment>.nmtkit.json` (the kit's marker and the due date; this module writes and reads it).
"""
from __future__ import annotations

import ctypes
import hashlib
import html
import os
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from nmtkit.errors import CourseError
from nmtkit.files import atomic_write_json, atomic_write_text, read_json

SUBMITTED = "submitted"
TIMESTAMP = "timestamp.txt"  # nbgrader's: when the student submitted, in their submission's folder
STAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f %Z"  # nbgrader's timestamp.txt format
RECORD = ".{}.nmtkit.json"  # beside outbound/<assignment>; a dotfile, which nbgrader's `list` (glob *) never shows
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # an assignment's
DUE_FORMATS = ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d")


@dataclass(frozen=True)
class Collected:
    student: str
    assignment: str
    submitted_at: datetime
    late: bool


@dataclass(frozen=True)
class Refused:
    box: str  # whose box it was found in
    name: str  # the submission's folder name
    why: str


def _parse(name: str) -> tuple[str, str, datetime] | None:
    """nbgrader's inbound name `<student>+<assignment>+<timestamp>+<random>`; None if it is not one."""
    parts = name.split("+")
    if len(parts) != 4:
        return None
    try:
        stamp = datetime.strptime(parts[2].strip(), STAMP_FORMAT.replace(" %Z", "")).replace(tzinfo=timezone.utc)
    except ValueError:
        try:
            stamp = datetime.strptime(parts[2].strip(), STAMP_FORMAT).replace(tzinfo=timezone.utc)
        except ValueError:
            return None
    return parts[0], parts[1], stamp


def collect(exchange_course: Path, course_dir: Path, assignment: str,
            due: datetime | None = None) -> tuple[list[Collected], list[Refused]]:
    """Each box's latest submission of `assignment`, copied to `course_dir/submitted/<box owner>/<assignment>/`
    (replacing the kit's copy of an older one; the same one collected again is left as it is); a submission after
    `due` is marked late."""
    inbound = Path(exchange_course) / "inbound"
    if not inbound.is_dir():
        raise CourseError(f"{inbound}: no inbound boxes; is {exchange_course} the hub's exchange/<course> directory?")
    got, refused = [], []
    for box in sorted(p for p in inbound.iterdir() if p.is_dir()):
        latest = None
        for sub in sorted(p for p in box.iterdir() if p.is_dir()):
            parsed = _parse(sub.name)
            if parsed is None:
                refused.append(Refused(box.name, sub.name, "not an nbgrader submission name"))
            elif parsed[0] != box.name:
                refused.append(Refused(box.name, sub.name, f"claims to be {parsed[0]!r} but is in {box.name!r}'s box"))
            elif parsed[1] == assignment and (latest is None or parsed[2] > latest[1]):
                latest = (sub, parsed[2])
        if latest is None:
            continue
        sub, stamp = latest
        target = Path(course_dir) / SUBMITTED / box.name / assignment
        got.append(Collected(box.name, assignment, stamp, due is not None and stamp > due))
        if (target / TIMESTAMP).is_file() and (target / TIMESTAMP).read_text() == stamp.strftime(STAMP_FORMAT):
            continue  # collected before, left as it is: its timestamp.txt's mtime says when (feedback reads it)
        tmp = target.with_name(f".{assignment}.collecting")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(sub, tmp, symlinks=True)  # a link stays a link: nothing outside the box is read
        atomic_write_text(tmp / TIMESTAMP, stamp.strftime(STAMP_FORMAT))
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    return got, refused


def is_collected_layout(class_dir: Path) -> bool:
    return (Path(class_dir) / SUBMITTED).is_dir()


def class_view(class_dir: Path, out_dir: Path, assignment: str | None = None) -> Path:
    """The directory `--class` grades: `class_dir` itself, or for nbgrader's collected layout a view in `out_dir`
    with one link per student, `<student>` -> `submitted/<student>/<assignment>` (the folder's name is the student)."""
    class_dir = Path(class_dir)
    if not is_collected_layout(class_dir):
        return class_dir
    students = sorted(p for p in (class_dir / SUBMITTED).iterdir() if p.is_dir() and not p.name.startswith("."))
    if assignment is None:
        found = {a.name for s in students for a in s.iterdir() if a.is_dir() and not a.name.startswith(".")}
        if len(found) != 1:
            raise CourseError(f"{class_dir / SUBMITTED}: {len(found)} assignments ({', '.join(sorted(found))}); "
                              "name the one to grade: collect each assignment into a course directory of its own "
                              "(nmtkit hub collect --course-dir) and grade that")
        assignment = found.pop()
    view = view_dir(out_dir, assignment)
    if view.exists():
        shutil.rmtree(view)  # only links the kit made in its own output
    view.mkdir(parents=True)
    for s in students:
        if (s / assignment).is_dir():
            (view / s.name).symlink_to((s / assignment).resolve(), target_is_directory=True)
    return view


def view_dir(out_dir: Path, assignment: str) -> Path:
    """Where `class_view` puts its links in the grading's output: `<student>` -> the collected folder it graded."""
    return Path(out_dir) / ".submissions" / assignment


def feedback_html(notebook: dict, marks: list[dict] = ()) -> str:
    """One notebook's feedback: this student's own points and message per check and, when marked, their written
    answers' and hand-graded checks' marks (nmtkit.course.instructor.marks.marked), nothing of anyone else's."""
    rows = "".join(
        f"<tr><td>{html.escape(c['grade_id'])}</td><td>{c['points']}</td><td>{html.escape(c['status'])}</td>"
        f"<td>{html.escape(c.get('message') or '')}</td></tr>" for c in notebook["cells"])
    return (f"<html><body><h1>{html.escape(notebook['notebook'])}: {notebook['points']} / {notebook['max_points']}"
            f"</h1><table><tr><th>check</th><th>points</th><th>status</th><th>message</th></tr>{rows}</table>"
            f"{marks_html(marks)}</body></html>\n")


def marks_html(marks: list[dict]) -> str:
    """The marks section: per answer the rubric items given, the comment, the student's own figures and the model
    verdict for their figures (the kit's check on them, the instructor's model answer)."""
    if not marks:
        return ""
    out = ["<h2>Written answers and hand-graded parts</h2>"]
    for a in marks:
        m, e = a["mark"], html.escape
        got = "not marked yet" if m is None else f"{a['points']:g} / {a['max_points']:g}"
        if not a["answered"]:
            got = "unanswered" + ("" if m is None else f": {a['points']:g} / {a['max_points']:g}")
        given = "".join(f"<li>{e(i['text'])} ({i['points']:g})</li>" for i in a["given"]) or "<li>none</li>"
        figures = ", ".join(f"{e(str(k))} = {e(str(v))}" for k, v in a["figures"].items()) or "none recorded"
        out.append(f"<h3>{e(a['grade_id'])}: {got}</h3><p>Rubric items given:</p><ul>{given}</ul>"
                   f"<p>Comment: {e(m.comment) if m is not None and m.comment else '(none)'}</p>"
                   f"<p>Your figures: {figures}</p><p>The kit on your figures: {e(a['check_status'] or '-')}"
                   f" {e(a['check_message'] or '')}</p><p>Model verdict: {e(a['model'] or '-')}</p>")
    return "".join(out)


def return_feedback(course_dir: Path, exchange_course: Path, student: str, assignment: str,
                    results: list[dict], marks: list[dict] = ()) -> list[Path]:
    """The kit's feedback where nbgrader's `fetch_feedback` looks for it, in this student's own feedback box:
    `feedback/<student>/<md5(submission secret + notebook id)>.html` (nbgrader 0.9's naming), one per notebook."""
    secret_file = Path(course_dir) / SUBMITTED / student / assignment / "submission_secret.txt"
    if not secret_file.exists():
        raise CourseError(f"{secret_file}: missing; feedback needs the submission nbgrader's `submit` made "
                          "(collect it with exchange.collect)")
    secret = secret_file.read_text()
    box = Path(exchange_course) / "feedback" / student
    written = []
    for nb in results:
        notebook_id = Path(nb["notebook"]).stem
        name = hashlib.md5((secret + notebook_id).encode()).hexdigest()
        own = [a for a in marks if a["notebook"] == nb["notebook"]]
        written.append(atomic_write_text(box / f"{name}.html", feedback_html(nb, own)))
        os.chmod(written[-1], 0o644)  # the student's uid reads it, whatever the instructor's umask
    return written


def parse_due(text: str) -> datetime:
    """A due date as the instructor writes it, "2026-12-05 23:59" (UTC unless it carries an offset, ISO 8601)."""
    for fmt in DUE_FORMATS:
        try:
            return datetime.strptime(text.strip(), fmt).replace(tzinfo=timezone.utc)
        except ValueError:
            pass
    try:
        due = datetime.fromisoformat(text.strip())
    except ValueError:
        raise CourseError(f"--due {text!r}: not a date; give it as \"YYYY-MM-DD HH:MM\" in UTC "
                          "(or ISO 8601 with an offset, 2026-12-05T23:59+01:00)") from None
    return due if due.tzinfo else due.replace(tzinfo=timezone.utc)


def check_name(assignment: str) -> str:
    """An assignment name nbgrader can carry in `<student>+<assignment>+<time>` and use as a folder's name."""
    if not NAME.fullmatch(assignment or ""):
        raise CourseError(f"--assignment {assignment!r}: not a usable name; use letters, digits, '.', '-' or '_', "
                          "starting with a letter or digit (nbgrader puts it in file and folder names)")
    return assignment


def record_of(exchange_course: Path, assignment: str) -> dict | None:
    """What `release` recorded of `assignment` (due date, notebooks), or None if the kit did not release it."""
    path = Path(exchange_course) / "outbound" / RECORD.format(assignment)
    rec = read_json(path, CourseError, missing=None, hint="the kit's release record; release the assignment again")
    if rec is not None and rec.get("due"):
        rec["due"] = datetime.fromisoformat(rec["due"])
    return rec


def _readable_dir(path: Path) -> None:
    """`path` made if missing, and readable by everyone (students read outbound as other uids)."""
    path.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o7777
    if mode & 0o755 != 0o755:
        try:
            os.chmod(path, mode | 0o755)
        except PermissionError:
            raise CourseError(f"{path}: students cannot read it (mode {mode:o}) and it is not yours to change; "
                              "make it readable by all (chmod a+rx) or use another --state") from None


def release(exchange_course: Path, notebooks: list[Path], assignment: str, due: datetime) -> Path:
    """The notebooks as nbgrader's `release_assignment` lays them out, `outbound/<assignment>/`, world-readable,
    put in place by renaming a finished temp folder (a student never fetches half of it); the record (marker and
    due date) beside it. Replaces only a release the kit made."""
    check_name(assignment)
    outbound = Path(exchange_course) / "outbound"
    _readable_dir(Path(exchange_course))
    _readable_dir(outbound)
    target, record = outbound / assignment, outbound / RECORD.format(assignment)
    if target.exists() and not record.exists():
        raise CourseError(f"{target}: exists and the kit did not release it (no {record.name} beside it); "
                          "release under another --assignment, or move that folder away yourself")
    tmp, old = outbound / f".{assignment}.releasing", outbound / f".{assignment}.replaced"
    for leftover in (tmp, old):  # the kit's own, from an interrupted release
        shutil.rmtree(leftover, ignore_errors=True)
    tmp.mkdir()
    for nb in notebooks:
        shutil.copyfile(nb, tmp / nb.name)
        os.chmod(tmp / nb.name, 0o644)
    os.chmod(tmp, 0o755)
    # the record first: a folder in place without its marker would refuse the next release
    atomic_write_json(record, {"assignment": assignment, "due": due.isoformat(), "by": "nmtkit hub release",
                               "released_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                               "notebooks": [nb.name for nb in notebooks]})
    os.chmod(record, 0o644)
    if not target.exists():
        tmp.rename(target)
    elif _swap(tmp, target):
        shutil.rmtree(tmp)  # now the previous release
    else:  # two renames: for a moment there is no outbound/<assignment> (a fetch then says "not found")
        target.rename(old)
        tmp.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    return target


def _swap(a: Path, b: Path) -> bool:
    """`a` and `b` exchanged in one step (Linux's renameat2 RENAME_EXCHANGE); False where the system cannot."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0
