"""The commands of the instructor's kit: `nmtkit grade` (a submission, or a class) and `nmtkit release`. A student's
release leaves this module out, and its CLI has neither command."""
from __future__ import annotations

import os
from pathlib import Path

from nmtkit.errors import CourseError


def sandbox_of(args):
    from nmtkit.course.instructor.container import Sandbox
    return Sandbox(image=args.image, seconds=args.time_limit, trusted=args.trust_submissions)


def cmd_grade(args) -> int:
    from nmtkit.course.instructor.grade import grade, summary
    if args.action == "serve":  # `nmtkit grade serve`: the marking page (markpage.py)
        return __import__("nmtkit.course.instructor.markpage", fromlist=["x"]).cmd_serve(args)
    if args.jobs is not None and args.jobs < 1:
        raise CourseError(f"--jobs {args.jobs}: give 1 or more")
    sandbox = sandbox_of(args)
    if args.class_dir:
        from nmtkit.course.instructor.classgrade import grade_class
        if not args.out:
            raise CourseError("--class needs --out DIR: the directory for grades.csv and class-report.md")
        frame, report = grade_class(args.class_dir, args.out, jobs=args.jobs, only=args.only or (), sandbox=sandbox,
                                    roster=args.roster)
        bad = frame[frame["error"] != ""]
        print(f"{len(frame)} submissions, {len(frame) - len(bad)} graded: {Path(args.out) / 'grades.csv'}, {report}"
              + (" (TRUSTED: graded in this kit, no sandbox)" if sandbox.trusted else ""))
        for student, err in bad["error"].items():
            print(f"  {student}: {err}")
        return 0 if bad.empty else 1
    results = grade(args.submission, workspace=args.workspace, only=args.only or (), out=args.out,
                    jobs=args.jobs or os.cpu_count() or 1, sandbox=sandbox, student=args.student,
                    roster=args.roster)
    print(summary(results))
    return 0 if all(r["points"] == r["max_points"] for r in results) else 1


def cmd_release(args) -> int:
    from nmtkit.course.instructor.release import build
    out = build(args.out)
    print(f"{out}: the student release (student notebooks; no solutions, verdicts, rubric or hidden checks). "
          f"Publish it as the students' repository; keep this kit private: `nmtkit grade` runs here")
    return 0


def add(sub) -> None:
    """The commands that need the instructor's kit: grading with the hidden checks, and making the release."""
    from nmtkit.course.instructor.container import Sandbox
    p = sub.add_parser("grade",
                       help="course staff: grade a student's notebooks with the instructor's checks, no training; "
                            "each notebook runs in a container of the students' image")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--submission", help="directory holding the student's NN_*.ipynb")
    who.add_argument("--class", dest="class_dir", metavar="DIR",
                     help="a class: one sub-directory per student; --out then names a directory for grades.csv and "
                          "class-report.md")
    p.add_argument("--student", default=None,
                   help="the student id of --submission (default: its folder's name): it picks the student's variant")
    p.add_argument("--roster", default=None, metavar="FILE",
                   help="the class's student ids (the hub's roster CSV with a `username` column, or one id a line): "
                        "a submission whose id is not on it is refused")
    p.add_argument("--jobs", type=int, default=None,
                   help="submissions graded at once with --class, else the submission's notebooks (default: the cores)")
    p.add_argument("--workspace", default=None,
                   help="the student's workspace (their runs); default: a fresh one holding the reference run")
    p.add_argument("--only", nargs="*", help="grade only these notebooks, by number (e.g. 04)")
    p.add_argument("--out", default=None, help="also write the grades as JSON here")
    p.add_argument("--image", default=Sandbox.image,
                   help=f"the students' image of this kit's commit to grade in (default {Sandbox.image}: `make image` "
                        f"in this commit's release)")
    p.add_argument("--time-limit", type=float, default=Sandbox.seconds, metavar="S",
                   help=f"seconds a notebook may run before it is stopped and graded on what it wrote "
                        f"(default {Sandbox.seconds:g})")
    p.add_argument("--trust-submissions", action="store_true",
                   help="no sandbox: run the notebooks in this kit's own kernel (no Docker needed); a student's code "
                        "then runs with your rights, beside the answers. Marked in grades.csv and the class report")
    __import__("nmtkit.course.instructor.markpage", fromlist=["x"]).add_args(p)  # serve, --port, --grader, --merge
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("release", help="course staff: the kit students install, with student notebooks and no "
                                       "solutions, verdicts, rubric or hidden checks")
    p.add_argument("--out", required=True, help="a new (or empty) directory for the release")
    p.set_defaults(func=cmd_release)

    from nmtkit.course.instructor.hub_commands import add as add_hub  # `nmtkit hub release|collect|feedback`
    add_hub(sub)
