"""`nmtkit grade --class DIR --out OUTDIR [--jobs N]`: every submission of a class graded in parallel.

DIR holds one sub-directory per student (its name is the student's), each with the student's NN_*.ipynb and, when
they handed it in, their `workspace/` (its runs are then graded instead of the reference run). Each submission is
graded by `nmtkit.course.instructor.grade.grade` in a process of its own (`--jobs`, default the cores); one that fails
(no notebooks, a file that is not a notebook) gets one line in the table and never stops the others. OUTDIR receives:

    grades.csv         one row per student: points per exercise (columns <nb>-<q>), total, manual, error
    class-report.md    per exercise the share of the class whose check passed, the messages they failed with,
                       and a plot of the class's figures over the kit's own (1.0: the reference's value)
    students/<name>.json, students/<name>-executed/   each submission's grades and executed notebooks
"""
from __future__ import annotations

import math
import os
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from nmtkit.analysis import variants
from nmtkit.course.instructor import exchange
from nmtkit.errors import CourseError
from nmtkit.files import atomic_write_text, read_json

WORKSPACE = "workspace"  # a student's handed-in workspace, inside their submission


def submissions(class_dir: Path) -> list[Path]:
    subs = sorted(p for p in Path(class_dir).iterdir() if p.is_dir() and not p.name.startswith("."))
    if not subs:
        raise CourseError(f"{class_dir}: no sub-directories; put each student's notebooks in a directory of their own")
    return subs


def results_file(out_dir: Path, student: str) -> Path:
    """Where a student's grades go (the list of their notebooks' results), read back for their feedback."""
    return Path(out_dir) / "students" / f"{student}.json"


def results_of(out_dir: Path, student: str) -> list[dict]:
    return read_json(results_file(out_dir, student), CourseError,
                     hint=f"grade the class first: nmtkit grade --class DIR --out {out_dir}")


def grade_one(sub: Path, out_dir: Path, only: tuple = (), sandbox=None, roster=None) -> dict:
    """One student's grades, or the one line that says why there are none (the traceback goes to a log)."""
    from nmtkit.course.instructor.grade import grade
    students = out_dir / "students"
    ws = sub / WORKSPACE if (sub / WORKSPACE / "runs").is_dir() else None
    try:
        results = grade(sub, workspace=ws, only=only, out=results_file(out_dir, sub.name), sandbox=sandbox,
                        student=sub.name, roster=roster)
        return {"student": sub.name, "variant": variants.variant_of(sub.name), "results": results, "error": ""}
    except Exception as e:  # noqa: BLE001  one student's broken hand-in must not stop the class
        log = students / f"{sub.name}.error.log"
        atomic_write_text(log, traceback.format_exc())
        return {"student": sub.name, "variant": "", "results": [],
                "error": f"{type(e).__name__}: {' '.join(str(e).split())}"}


def table(rows: list[dict]):
    """grades.csv's frame: one row per student, the points of every check as a column <nb>-<q>."""
    import pandas as pd
    out = []
    for r in rows:
        row, notes = {"student": r["student"]}, []
        for nb in r["results"]:
            for c in nb["cells"]:
                if c["grade_id"].endswith("-check"):
                    row[c["grade_id"][: -len("-check")]] = c["points"]
                    if c["status"] != "passed":  # why this check scored nothing (or is the grader's)
                        notes.append(f"{c['grade_id'][: -len('-check')]}: {c['message'].split('. Hint')[0]}")
        row.update(variant=r.get("variant", ""), points=sum(nb["points"] for nb in r["results"]),
                   max_points=sum(nb["max_points"] for nb in r["results"]),
                   manual=sum(nb["manual"] for nb in r["results"]),
                   graded_in="; ".join(sorted({nb["graded_in"] for nb in r["results"]})),
                   stopped="; ".join(f"{nb['notebook'][:2]}: {nb['stopped']}" for nb in r["results"] if nb["stopped"]),
                   notes=" | ".join(notes), error=r["error"])
        out.append(row)
    frame = pd.DataFrame(out).set_index("student")
    checks = sorted(c for c in frame.columns if c not in TAIL)
    return frame[checks + list(TAIL)]


# grades.csv's last columns
TAIL = ("variant", "points", "max_points", "manual", "graded_in", "stopped", "notes", "error")


def report(rows: list[dict], frame, out_dir: Path, expected: dict) -> Path:
    """class-report.md with a plot per question of the class's figures over the kit's (`expected`:
    question -> {figure: value})."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figs = out_dir / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    graded = frame[frame["error"] == ""]
    trusted = frame["graded_in"].str.contains("trusted").any()
    lines = [f"# Class report: {len(frame)} submissions, {len(graded)} graded", "",
             *(["**Graded with --trust-submissions**: the students' code ran in the instructor's kit, not in a "
                "sandbox; a grade here is only as good as that trust.", ""] if trusted else []),
             f"Mean {graded['points'].mean():.1f} of {graded['max_points'].max():g} points from checks"
             if len(graded) else "No submission could be graded.", ""]
    broken = frame[frame["error"] != ""]
    if len(broken):
        lines += ["## Not graded", ""] + [f"- **{s}**: {e}" for s, e in broken["error"].items()] + [""]
    messages: dict[str, list[str]] = {}
    figures: dict[str, list[float]] = {}
    for r in rows:
        for nb in r["results"]:
            for c in nb["cells"]:
                if c["status"] == "failed" and c["grade_id"].endswith("-check"):
                    messages.setdefault(c["grade_id"][: -len("-check")], []).append(c["message"].split(". Hint")[0])
            for name, v in (nb.get("figures") or {}).items():
                figures.setdefault(name, []).append(v)
    lines += variant_lines(rows, graded)
    lines += ["## Per exercise", "", "| exercise | passed | the failures' messages |", "|---|---|---|"]
    for col in [c for c in frame.columns if c not in TAIL]:
        got = graded[col].dropna()
        common = sorted(set(messages.get(col, [])), key=messages.get(col, []).count, reverse=True)[:3]
        lines.append(f"| {col} | {int((got > 0).sum())}/{len(got)} | {'; '.join(common)} |")
    lines += ["", "## The class's figures over the kit's", "",
              "Each dot is a student's figure divided by the kit's own for the same run (1.0 is right); a cluster "
              "away from 1.0 is a misconception many share.", ""]
    for q, want in expected.items():
        names = [n for n in want if n in figures and isinstance(want[n], (int, float)) and want[n]]
        if not names:
            continue
        fig, ax = plt.subplots(figsize=(6, 0.5 + 0.45 * len(names)))
        for i, n in enumerate(names):
            xs = [v / want[n] for v in figures[n] if isinstance(v, (int, float)) and math.isfinite(v)]
            ax.scatter(xs, [i] * len(xs), alpha=0.6)
        ax.axvline(1.0, color="grey", lw=0.8)
        ax.set_yticks(range(len(names)), names)
        ax.set_xlabel("student's figure / kit's figure")
        ax.set_title(q)
        fig.tight_layout()
        fig.savefig(figs / f"{q}.png", dpi=80)
        plt.close(fig)
        lines += [f"![{q}](figures/{q}.png)", ""]
    return atomic_write_text(out_dir / "class-report.md", "\n".join(lines) + "\n")


def variant_lines(rows: list[dict], graded) -> list[str]:
    """The report's variants: how many students each has, and the submissions whose figures match another's."""
    from nmtkit.course.instructor.copies import flags
    counts = graded["variant"].value_counts()
    lines = ["## Variants", "", "Each student's variant comes from their id (the submission folder's name), as in "
             "their notebook: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())) + ".", ""]
    for student, own, other, qs in flags(rows):
        lines.append(f"- **{student}** ({own}): the figures of {', '.join(qs)} match {other}'s answers and fail "
                     f"{own}'s: check for copying")
    return lines + [""]


def expected_figures() -> dict:
    """The kit's figures on what a default grading reads: the reference run's questions, the lab's shipped runs."""
    from nmtkit.analysis import load_run, reference_run
    from nmtkit.analysis.lab import shipped
    from nmtkit.course.instructor.book import decide
    from nmtkit.course.instructor.decisions import lab
    out = {q: v for q, v in decide(load_run(reference_run())).items() if q != "missing"}
    out.update({q: v for q, v in lab(shipped()).items() if q.startswith("lab_")})
    return out


def grade_class(class_dir, out_dir, jobs: int | None = None, only=(), sandbox=None, roster=None) -> tuple:
    """Grade every submission under `class_dir` with `jobs` processes (each folder's name its student's id, which
    must be on `roster` if one is given: else that row's error); write grades.csv and class-report.md into
    `out_dir`. Returns (the frame, class-report.md's path)."""
    from nmtkit.course.instructor.container import Sandbox, ready
    from nmtkit.course.instructor.roster import read
    from nmtkit.files import atomic_write_bytes
    sandbox = sandbox or Sandbox()
    # nbgrader's collected layout (submitted/<student>/<assignment>/) is read as a view of one folder per student
    subs, out_dir = submissions(exchange.class_view(Path(class_dir), out_dir)), Path(out_dir)
    ready(sandbox)  # once, before any student: no Docker or a stale image is one line, not a column of errors
    if roster is not None:
        read(roster)  # a broken roster is one line, not a column of errors
    (out_dir / "students").mkdir(parents=True, exist_ok=True)
    jobs = max(1, jobs or os.cpu_count() or 1)
    with ProcessPoolExecutor(max_workers=min(jobs, len(subs))) as pool:
        rows = list(pool.map(grade_one, subs, [out_dir] * len(subs), [tuple(only)] * len(subs),
                             [sandbox] * len(subs), [roster] * len(subs)))
    frame = table(rows)
    atomic_write_bytes(out_dir / "grades.csv", frame.to_csv().encode())
    return frame, report(rows, frame, out_dir, expected_figures())
