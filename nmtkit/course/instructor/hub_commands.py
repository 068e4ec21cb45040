"""`nmtkit hub release|collect|feedback`: the instructor's side of the class's hub (docs/hub.md), on the host.

    nmtkit hub release  --release DIR --assignment NAME --due "2026-12-05 23:59"   the student notebooks into outbound
    nmtkit hub collect  --assignment NAME --course-dir DIR                          each box's latest, late ones marked
    nmtkit hub feedback --assignment NAME --course-dir DIR --grades OUT             after `nmtkit grade --class DIR`

The exchange is `<state>/exchange/<course>` (hub/jupyterhub_config.py's: $NMTKIT_HUB_STATE, $NMTKIT_HUB_COURSE);
what goes in it and how is nmtkit.course.instructor.exchange's.
"""
from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

from nmtkit.course.instructor import exchange
from nmtkit.errors import CourseError
from nmtkit.files import atomic_write_text

RELEASE_MARK = "RELEASE.md"  # what `nmtkit release --out DIR` writes into every student release


def default_state() -> Path:
    """The hub's state directory, as hub/jupyterhub_config.py finds it."""
    return Path(os.environ.get("NMTKIT_HUB_STATE") or Path.home() / ".local/share/nmtkit-hub")


def exchange_course(args) -> Path:
    return Path(args.state or default_state()) / "exchange" / args.course


def release_notebooks(release: Path) -> list[Path]:
    """The student notebooks of a release `nmtkit release --out DIR` made; never an instructor's (solutions)."""
    from nmtkit.course.student import is_instructor
    if not release.is_dir():
        raise CourseError(f"--release {release}: no such directory; make the student release with "
                          f"`nmtkit release --out {release}` first")
    if not (release / RELEASE_MARK).is_file():
        raise CourseError(f"--release {release}: not a student release (no {RELEASE_MARK}); give the directory "
                          "`nmtkit release --out DIR` made, never the instructor's kit (its notebooks hold solutions)")
    notebooks = sorted((release / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        raise CourseError(f"--release {release}: no notebooks/NN_*.ipynb in it; make it again with "
                          f"`nmtkit release --out DIR`")
    for nb in notebooks:
        try:
            cells = json.loads(nb.read_text(encoding="utf-8")).get("cells", [])
        except (ValueError, UnicodeDecodeError) as e:
            raise CourseError(f"{nb}: not a notebook ({e}); make the release again") from None
        if any(is_instructor(c) for c in cells):
            raise CourseError(f"{nb}: holds instructor cells, so it is not a student copy; release what "
                              "`nmtkit release --out DIR` made")
    return notebooks


def cmd_release(args) -> int:
    due = exchange.parse_due(args.due)
    exchange.check_name(args.assignment)
    notebooks = release_notebooks(Path(args.release))
    target = exchange.release(exchange_course(args), notebooks, args.assignment, due)
    print(f"{target}: {len(notebooks)} notebooks released as {args.assignment!r} of course {args.course!r}, due "
          f"{due:%Y-%m-%d %H:%M %Z}; students fetch it from the Assignments tab "
          f"(nbgrader fetch_assignment {args.assignment})")
    return 0


def collected_csv(got) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["student", "submitted_at", "late"])
    for g in got:
        w.writerow([g.student, g.submitted_at.isoformat(), "late" if g.late else ""])
    return buf.getvalue()


def cmd_collect(args) -> int:
    exchange.check_name(args.assignment)
    ex = exchange_course(args)
    if not (ex / "inbound").is_dir():
        raise CourseError(f"--state {args.state or default_state()} --course {args.course}: {ex / 'inbound'} does "
                          "not exist; give the hub's state directory and course ($NMTKIT_HUB_STATE, "
                          "$NMTKIT_HUB_COURSE as the hub runs with)")
    record = exchange.record_of(ex, args.assignment)
    due = record.get("due") if record else None
    if due is None:
        print(f"{args.assignment!r} has no due date recorded ({ex / 'outbound'}: not released by `nmtkit hub "
              f"release`): none is marked late")
    got, refused = exchange.collect(ex, Path(args.course_dir), args.assignment, due=due)
    table = atomic_write_text(Path(args.course_dir) / exchange.SUBMITTED / f"{args.assignment}-collected.csv",
                              collected_csv(got))
    print(f"{len(got)} submissions of {args.assignment!r} collected into {Path(args.course_dir) / exchange.SUBMITTED}"
          + (f", due {due:%Y-%m-%d %H:%M %Z}" if due else "") + f"; {table}")
    for g in got:
        print(f"  {g.student}  {g.submitted_at:%Y-%m-%d %H:%M:%S %Z}" + ("  late" if g.late else ""))
    for r in refused:
        print(f"  refused: {r.name} in {r.box}'s box: {r.why}")
    return 0


def marks_of(grades: Path, student: str) -> list[dict]:
    """The student's marks of their written answers (nmtkit grade serve's store), if the class was marked."""
    from nmtkit.course.instructor import marks
    if not (grades / marks.DB).is_file():
        return []
    db = marks.connect(grades)
    try:
        return marks.marked(db, student)
    finally:
        db.close()


def cmd_feedback(args) -> int:
    from nmtkit.course.instructor.classgrade import results_file, results_of
    exchange.check_name(args.assignment)
    course, grades = Path(args.course_dir), Path(args.grades)
    if not (grades / "grades.csv").is_file():
        raise CourseError(f"--grades {grades}: no grades.csv; grade the class first: nmtkit grade --class {course} "
                          f"--out {grades}")
    students = sorted(p.parent.name for p in (course / exchange.SUBMITTED).glob(f"*/{args.assignment}")
                      if p.is_dir() and not p.parent.name.startswith("."))
    if not students:
        raise CourseError(f"--course-dir {course}: no submitted/<student>/{args.assignment}/; collect first: "
                          f"nmtkit hub collect --assignment {args.assignment} --course-dir {course}")
    ex, returned, missing = exchange_course(args), 0, []
    for s in students:
        graded, collected = results_file(grades, s), course / exchange.SUBMITTED / s / args.assignment
        link = exchange.view_dir(grades, args.assignment) / s
        if not link.is_symlink() or link.resolve() != collected.resolve():
            missing.append(f"{s}: {grades} holds no grading of {collected}; grade it: nmtkit grade --class {course} "
                           f"--out {grades}")
        elif not graded.is_file():
            missing.append(f"{s}: not graded (see {graded.with_suffix('.error.log')}, or grade the class again)")
        elif graded.stat().st_mtime < (collected / exchange.TIMESTAMP).stat().st_mtime:
            missing.append(f"{s}: {graded} is older than their collected submission; grade the class again")
        else:
            written = exchange.return_feedback(course, ex, s, args.assignment, results_of(grades, s),
                                               marks_of(grades, s))
            returned += 1
            print(f"  {s}: {len(written)} notebooks' feedback in {ex / 'feedback' / s}")
    print(f"feedback returned to {returned} of {len(students)} students of {args.assignment!r}")
    for line in missing:
        print(f"  no feedback: {line}")
    return 0 if not missing else 1


def add(sub) -> None:
    """`nmtkit hub ...`, the instructor's commands for the class's hub."""
    hub = sub.add_parser("hub", help="course staff: the class's hub on the host: release an assignment, collect the "
                                     "students' submissions, return their feedback (docs/hub.md)")
    cmds = hub.add_subparsers(dest="hub_command", required=True)

    def common(p):
        p.add_argument("--assignment", required=True, metavar="NAME", help="the assignment's name (nbgrader's)")
        p.add_argument("--state", default=None, metavar="DIR",
                       help="the hub's state directory (default $NMTKIT_HUB_STATE, else ~/.local/share/nmtkit-hub)")
        p.add_argument("--course", default=os.environ.get("NMTKIT_HUB_COURSE", "nmtkit"),
                       help="the course id (default $NMTKIT_HUB_COURSE, else nmtkit)")

    p = cmds.add_parser("release", help="put a student release's notebooks into the exchange's outbound, with a due "
                                        "date; students fetch them from the Assignments tab")
    p.add_argument("--release", required=True, metavar="DIR", help="the student release (nmtkit release --out DIR)")
    p.add_argument("--due", required=True, help='the due date, "YYYY-MM-DD HH:MM" in UTC (or ISO 8601 with an offset)')
    common(p)
    p.set_defaults(func=cmd_release)

    p = cmds.add_parser("collect", help="each student's latest submission into DIR/submitted/<student>/<NAME>/, late "
                                        "ones marked; a submission in another student's name is refused")
    p.add_argument("--course-dir", required=True, metavar="DIR", help="the course directory (then `nmtkit grade "
                                                                      "--class DIR --out OUT`)")
    common(p)
    p.set_defaults(func=cmd_collect)

    p = cmds.add_parser("feedback", help="each student's own grades into their feedback box, where the Assignments "
                                         "tab's fetch feedback finds them")
    p.add_argument("--course-dir", required=True, metavar="DIR", help="the course directory collect wrote")
    p.add_argument("--grades", required=True, metavar="OUT", help="the --out of `nmtkit grade --class DIR --out OUT`")
    common(p)
    p.set_defaults(func=cmd_feedback)
