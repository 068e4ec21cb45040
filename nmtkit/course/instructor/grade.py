"""`nmtkit grade`: grade a student's notebooks with the instructor's checks, without retraining.

    nmtkit grade --submission DIR [--workspace WS] [--only 04] [--out grades.json]

For each of the student's NN_*.ipynb that the kit also ships, grading

1. assembles the graded notebook: the student's cells in the student's order, with every check cell (by its
   nbgrader grade id, nmtkit.course.student) replaced by the instructor's, hidden tests included; a check cell the
   student deleted is put back after the student's work cell of the same question. Deleting or editing a check
   changes nothing.
2. leaves out the cells tagged "grade-skip" (training, starting a cluster: the minutes a notebook spends making
   runs). The cells after them read the runs the workspace already holds: the student's own (`--workspace`, the
   workspace they submitted), else a fresh one in which `runs/horovod` is the reference run shipped with the kit.
   Notebook 04 trains nothing: it reads the reference run, and the student's own runs when present.
3. runs it in a fresh kernel (NMTKIT_WORKDIR = that workspace, NMTKIT_GRADING=1) with errors allowed, and scores
   every check cell: its points when it ran without an error, else 0 with the error's last line (the check's hint).
   Verdict cells (markdown) are graded by hand: listed as "manual", or "unanswered" when left as the stub.

Returns (and writes as JSON) one record per notebook: cells, points, time taken.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from nmtkit.course.student import (
    MARKDOWN_STUB,
    NOTEBOOKS_DIR,
    cell_source,
    exercises,
    grade_id,
    is_instructor,
    kernel_name,
    read_notebook,
)
from nmtkit.errors import CourseError
from nmtkit.files import atomic_write_json, atomic_write_text

SKIP_TAG = "grade-skip"
AFTER_SKIP = "nmtkit_after_grade_skip"  # a graded notebook's cell that follows a skipped one
NO_RUN = "no run submitted"
FIGURES_TAG, FIGURES_MARK = "grade-figures", "NMTKIT-FIGURES "
FIGURES_CELL = ("import json as _json, numbers as _numbers\nfrom nmtkit.course.targets import TARGETS as _TARGETS\n"
                "print(%r + _json.dumps({_n: float(_v) for _n in sorted({n for f in _TARGETS.values() for n in f})\n"
                "    if isinstance(_v := globals().get(_n), _numbers.Real) and not isinstance(_v, bool)}))"
                % FIGURES_MARK)


def figures(nb) -> dict:
    """The student's figures the grading printed (FIGURES_CELL), by name; {} where the kernel never got there."""
    import json
    for c in nb.cells:
        if FIGURES_TAG in c.get("metadata", {}).get("tags", []):
            for o in c.get("outputs", []):
                for line in o.get("text", "").splitlines():
                    if line.startswith(FIGURES_MARK):
                        return json.loads(line[len(FIGURES_MARK):])
    return {}


def assemble(student: dict, instructor: dict, name: str = "notebook") -> dict:
    """The notebook to run: the student's cells, the instructor's check cells (by grade id), no skipped cells."""
    import copy

    import nbformat
    ex = exercises(instructor, name)
    checks = {grade_id(instructor.cells[c["check"]]): instructor.cells[c["check"]] for c in ex.values()}
    nb = copy.deepcopy(student)
    cells, seen, skipped = [], set(), 0
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in checks:
            if gid in seen:  # a duplicated check cell runs once
                continue
            cell = copy.deepcopy(checks[gid])
            seen.add(gid)
        elif is_instructor(cell) or SKIP_TAG in cell.get("metadata", {}).get("tags", []):
            skipped += SKIP_TAG in cell.get("metadata", {}).get("tags", [])
            continue
        if skipped:  # score() reads it: this cell may need what a skipped training/cluster cell makes
            cell.metadata[AFTER_SKIP] = True
        cells.append(cell)
    for q, roles in ex.items():  # checks the student deleted go back after their work cell (else at the end)
        gid = grade_id(instructor.cells[roles["check"]])
        if gid in seen:
            continue
        work = grade_id(instructor.cells[roles["work"]])
        at = next((i + 1 for i, c in enumerate(cells) if grade_id(c) == work), len(cells))
        cells.insert(at, copy.deepcopy(checks[gid]))
        if skipped and (at == len(cells) - 1 or cells[at - 1].metadata.get(AFTER_SKIP)):
            cells[at].metadata[AFTER_SKIP] = True
    if ex:  # the student's figures, read back for the class report (nmtkit.course.instructor.classgrade)
        cells.append(nbformat.v4.new_code_cell(FIGURES_CELL, metadata={"tags": [FIGURES_TAG]}))
    for c in cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    nb.cells = cells
    nbformat.validate(nb)
    return nb


def score(nb: dict) -> list[dict]:
    """One record per graded cell of an executed notebook: grade id, points, max points, status, message."""
    out = []
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader") or {}
        if not meta.get("grade"):
            continue
        rec = {"grade_id": meta.get("grade_id"), "max_points": meta.get("points", 0)}
        if cell.cell_type == "markdown":
            text = cell_source(cell).strip()
            rec.update(points=None, status="unanswered" if not text or MARKDOWN_STUB in text else "manual",
                       message="")
        else:
            err = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
            ran = cell.get("execution_count") is not None
            if err is not None and err.get("ename") == "NameError" and cell.get("metadata", {}).get(AFTER_SKIP):
                # its inputs come from the training or cluster cells grading skips: the run was not handed in
                rec.update(points=None, status=NO_RUN, message=f"this check reads what the skipped training/cluster "
                           f"cells make ({err.get('evalue')}); grade with the student's workspace "
                           f"(--workspace) holding that run")
                out.append(rec)
                continue
            rec.update(points=rec["max_points"] if ran and err is None else 0,
                       status="passed" if ran and err is None else "failed",
                       message="not run (an earlier cell stopped the kernel)" if not ran else
                       "" if err is None else f"{err.get('ename')}: {err.get('evalue')}")
        out.append(rec)
    return out


def grading_workspace(workspace: str | os.PathLike | None) -> tuple[Path, bool]:
    """(the workspace to grade in, made here): the student's, else a new one whose runs/horovod is the reference."""
    if workspace is not None:
        return Path(workspace).resolve(), False
    from nmtkit.analysis.reference import reference_run
    ws = Path(tempfile.mkdtemp(prefix="nmtkit-grade-"))
    shutil.copytree(reference_run(), ws / "runs" / "horovod")
    seed_data(ws)
    return ws, True


def seed_data(ws: Path) -> Path:
    """The profile's data (the notebooks' nk.setup(): $NMTKIT_PROFILE, else tiny), prepared once per machine in a
    cache and copied into the new workspace, so that the notebooks' prepare() finds every step done: corpus and
    BPE took most of a graded submission's time, once per submission."""
    from nmtkit import config
    from nmtkit.data.prepare import prepare
    cfg = config.load(None)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nmtkit" / "grading-data" / cfg.profile
    prepare(cfg, data_dir=cache, progress=False)  # a few ms once made; two graders at once take turns
    dest = ws / "data" / cfg.profile
    shutil.copytree(cache, dest)  # copy2 keeps the mtimes the manifest recorded: no file is hashed again
    return dest


def grade_notebook(path: Path, instructor_path: Path, workspace: Path, timeout: int = 300,
                   keep: Path | None = None) -> dict:
    """Assemble, run and score one notebook of a submission; the executed notebook is kept in `keep` if given
    (its temporary directory goes either way)."""
    import nbformat
    from nbclient import NotebookClient

    nb = assemble(read_notebook(path), read_notebook(instructor_path), path.name)
    env = {**os.environ, "NMTKIT_WORKDIR": str(workspace), "NMTKIT_GRADING": "1"}
    run_dir = Path(tempfile.mkdtemp(prefix="nmtkit-graded-"))
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name(nb), allow_errors=True,
                            resources={"metadata": {"path": str(run_dir)}})
    t0 = time.time()
    with open(run_dir / "kernel.log", "wb") as log:  # the kernel's start-up chatter stays out of the terminal
        client.execute(env=env, stdout=log, stderr=log)
    seconds = time.time() - t0
    shutil.rmtree(run_dir, ignore_errors=True)  # ours: the kernel's working directory and log
    cells = score(nb)
    auto = [c for c in cells if c["points"] is not None]
    out = {"notebook": path.name, "seconds": round(seconds, 1), "cells": cells,
           "points": sum(c["points"] for c in auto), "max_points": sum(c["max_points"] for c in auto),
           "manual": sum(1 for c in cells if c["status"] == "manual"), "figures": figures(nb)}
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        out["executed"] = str(atomic_write_text(keep / path.name, nbformat.writes(nb) + "\n"))
    return out


def grade(submission: str | os.PathLike, workspace=None, only=(), out: str | os.PathLike | None = None,
          instructor_dir: str | os.PathLike = NOTEBOOKS_DIR, timeout: int = 300, jobs: int = 1) -> list[dict]:
    """Grade every notebook of `submission` (or those whose NN is in `only`), `jobs` notebooks at once (each in its
    own kernel; with their training cells skipped they only read the workspace); write `out` (JSON) if given, and
    the executed notebooks beside it (<out's stem>-executed/)."""
    submission, instructor_dir = Path(submission), Path(instructor_dir)
    if not submission.is_dir():
        raise CourseError(f"{submission}: not a directory; pass the directory that holds the student's NN_*.ipynb")
    paths = sorted(p for p in submission.glob("[0-9][0-9]_*.ipynb") if not only or p.name[:2] in only)
    if not paths:
        raise CourseError(f"{submission}: no notebooks NN_name.ipynb" + (f" numbered {', '.join(only)}" if only
                                                                         else ""))
    strange = [p.name for p in paths if not (instructor_dir / p.name).exists()]
    if strange:
        raise CourseError(f"{submission}: {', '.join(strange)} is not a notebook of the course ({instructor_dir})")
    for p in paths:  # every notebook readable before a kernel starts: a broken file is named at once
        read_notebook(p)
    ws, made = grading_workspace(workspace)
    try:
        keep = Path(out).with_name(Path(out).stem + "-executed") if out is not None else None
        def one(p):
            return grade_notebook(p, instructor_dir / p.name, ws, timeout, keep)
        if jobs > 1 and len(paths) > 1:
            from concurrent.futures import ThreadPoolExecutor  # each kernel is its own process: threads only wait
            with ThreadPoolExecutor(max_workers=min(jobs, len(paths))) as pool:
                results = list(pool.map(one, paths))
        else:
            results = [one(p) for p in paths]
    finally:
        if made:
            shutil.rmtree(ws, ignore_errors=True)
    if out is not None:
        atomic_write_json(Path(out), results)
    return results


def summary(results: list[dict]) -> str:
    """The grades as text: one line per notebook, then every check that failed with its message."""
    lines = []
    for r in results:
        lines.append(f"{r['notebook']}: {r['points']:g}/{r['max_points']:g} points from checks, {r['manual']} "
                     f"verdict(s) to grade by hand, {r['seconds']:.0f} s")
        lines += [f"  {c['grade_id']}: {c['status']}{': ' + c['message'] if c['message'] else ''}"
                  for c in r["cells"] if c["status"] in ("failed", "unanswered", NO_RUN)]
    return "\n".join(lines)
