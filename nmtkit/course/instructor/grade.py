"""`nmtkit grade`: grade a student's notebooks with the instructor's checks, without retraining, where the student's
code cannot reach a verdict.

    nmtkit grade --submission DIR [--workspace WS] [--only 04] [--out grades.json] [--trust-submissions]

For each of the student's NN_*.ipynb that the kit also ships, grading

1. assembles the graded notebook: the student's cells in the student's order, with every locked check cell (by its
   nbgrader grade id, nmtkit.course.student) put back from the instructor's notebook as nbgrader's autograde does, and
   made a recorder: it evaluates the check's arguments and writes them as a figures file (nmtkit.course.figures),
   deciding nothing. A check cell the student deleted is put back after the student's work cell of the same question.
2. leaves out the cells tagged "grade-skip" (training, starting a cluster: the minutes a notebook spends making
   runs). The cells after them read the runs the workspace already holds: the student's own (`--workspace`, the
   workspace they submitted), else a fresh one in which `runs/horovod` is the reference run shipped with the kit.
3. runs it in a container of the students' image (nmtkit.course.instructor.container: no network, read-only, capped;
   the image holds no answer, hidden check or instructor module), or with --trust-submissions in a local kernel, and
   receives the figures files, why it stopped, and the executed notebook.
4. scores every check here, in the instructor's process (nmtkit.course.instructor.scoring): the instructor's check
   on the recorded figures; a figure missing or not of its form scores 0 with the reason. Verdict cells (markdown)
   are graded by hand: listed as "manual", or "unanswered" when left as the stub.

Returns (and writes as JSON) one record per notebook: cells, points, time taken, where it ran and why it stopped.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from nmtkit.analysis import variants
from nmtkit.course.instructor import scoring
from nmtkit.course.instructor.container import Sandbox, execute, ready
from nmtkit.course.student import (
    MARKDOWN_STUB,
    NOTEBOOKS_DIR,
    cell_source,
    exercises,
    grade_id,
    is_instructor,
    read_notebook,
)
from nmtkit.errors import AnalysisError, CourseError
from nmtkit.files import atomic_write_json, atomic_write_text

SKIP_TAG = "grade-skip"
AFTER_SKIP = "nmtkit_after_grade_skip"  # a graded notebook's cell that follows a skipped one
NO_RUN = "no run submitted"


def _norm(source: str) -> str:
    """A cell's source compared with the instructor's: whitespace at line ends and blank lines aside."""
    return "\n".join(line.rstrip() for line in source.strip().splitlines() if line.strip())


def _instructor_cells(instructor: dict) -> tuple[dict, dict, set, set]:
    """(locked check cells, other locked cells, by grade id; the sources of the cells grading skips; the sources of
    the instructor-only cells). The skips are the instructor's: a student's own grade-skip tag skips nothing."""
    def meta(c):
        return c.metadata.get("nbgrader") or {}
    checks = {grade_id(c): c for c in instructor.cells if c.cell_type == "code" and meta(c).get("grade")
              and meta(c).get("locked")}
    locked = {grade_id(c): c for c in instructor.cells if meta(c).get("locked") and grade_id(c) not in checks}
    skips = {_norm(cell_source(c)) for c in instructor.cells if SKIP_TAG in c.metadata.get("tags", [])}
    only = {_norm(cell_source(c)) for c in instructor.cells if is_instructor(c)}
    return checks, locked, skips, only


def _trusted_metadata(cell, instructor_by_id: dict) -> None:
    """The cell's nbgrader metadata and tags as the instructor's notebook has them for its grade id: a student's own
    cell carries none (its points, grade id and tags are not the grader's)."""
    ins = instructor_by_id.get(grade_id(cell))
    cell.metadata.pop("nbgrader", None)
    cell.metadata.pop("tags", None)
    if ins is not None:
        import copy
        cell.metadata["nbgrader"] = copy.deepcopy(ins.metadata["nbgrader"])
        if ins.metadata.get("tags"):
            cell.metadata["tags"] = list(ins.metadata["tags"])


def assemble(student: dict, instructor: dict, name: str = "notebook") -> tuple[dict, dict]:
    """(the notebook to run, grade id -> its scoring.Call): the student's cells, each locked check cell put back from
    the instructor's notebook as a recorder of its figures, the instructor's skipped cells left out, every cell's
    nbgrader metadata and tags the instructor's for its grade id."""
    import copy

    import nbformat
    exercises(instructor, name)  # the instructor's notebook is well formed (CourseError naming it, else)
    checks, locked, skips, only = _instructor_cells(instructor)
    calls = {gid: scoring.parse(gid, cell_source(cell)) for gid, cell in checks.items()}
    by_id = {grade_id(c): c for c in instructor.cells if grade_id(c)}

    def restored(gid):
        cell = copy.deepcopy(checks[gid])
        cell.source = scoring.recorder(calls[gid])
        return cell

    nb = copy.deepcopy(student)
    cells, seen, skipped = [], set(), 0
    for cell in nb.cells:
        gid = grade_id(cell) if grade_id(cell) in by_id else None
        if gid in calls or gid in locked:
            if gid in seen:  # a duplicated locked cell runs once
                continue
            cell = restored(gid) if gid in calls else copy.deepcopy(locked[gid])
            seen.add(gid)
        elif _norm(cell_source(cell)) in skips:
            skipped += 1
            continue
        elif _norm(cell_source(cell)) in only:
            continue
        else:
            if gid is not None and gid in seen:  # a duplicated answer cell: the first is the answer
                gid = None
                cell.metadata.pop("nbgrader", None)
            seen.add(gid)
            _trusted_metadata(cell, by_id)
        if skipped:  # scoring reads it: this cell may need what a skipped training/cluster cell makes
            cell.metadata[AFTER_SKIP] = True
        cells.append(cell)
    _put_back(cells, locked, checks, seen, restored, skipped)
    for c in cells:
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    nb.cells = cells
    nbformat.validate(nb)
    return nb, calls


def _put_back(cells: list, locked: dict, checks: dict, seen: set, restored, skipped: int) -> None:
    import copy
    for gid in (g for g in locked if g not in seen):  # a deleted set-up cell goes back first
        cells.insert(0, copy.deepcopy(locked[gid]))
    for gid in checks:  # checks the student deleted go back after their work cell (else at the end)
        if gid in seen:
            continue
        work = gid[: -len("check")] + "work"
        at = next((i + 1 for i, c in enumerate(cells) if grade_id(c) == work), len(cells))
        cells.insert(at, restored(gid))
        if skipped and (at == len(cells) - 1 or cells[at - 1].metadata.get(AFTER_SKIP)):
            cells[at].metadata[AFTER_SKIP] = True


# checks that read what the instructor's skipped cells make, and where that lands in a workspace: with it missing,
# nobody's figures exist, and the check is "no run submitted" for every submission alike
NEEDS_RUN = {"03-link-check": "runs/compression", "06-batch-check": "runs/baseline"}


def score(nb: dict, calls: dict, figures: dict, decoder, stopped: str | None = None, instructor: dict | None = None,
          workspace: Path | None = None, pin=None) -> list[dict]:
    """One record per graded cell of the instructor's notebook (its points; the assembled notebook `nb` gives the
    answers): grade id, points, max points, status, message, the figures it recorded. Check cells are decided here
    on their figures files; verdicts are for the grader. A cell the student added counts for nothing."""
    graded = [c for c in (instructor or nb).cells if (c.get("metadata", {}).get("nbgrader") or {}).get("grade")]
    answers = {}
    for cell in nb.cells:
        answers.setdefault(grade_id(cell), cell)
    out = []
    for ins in graded:
        meta = ins.metadata["nbgrader"]
        gid = meta.get("grade_id")
        cell = answers.get(gid)
        rec = {"grade_id": gid, "max_points": meta.get("points", 0)}
        if ins.cell_type == "markdown":
            text = cell_source(cell).strip() if cell is not None and cell.cell_type == "markdown" else ""
            rec.update(points=None, status="unanswered" if not text or MARKDOWN_STUB in text else "manual",
                       message="", figures={})
        else:
            got = scoring.decide(calls[gid], figures.get(gid), decoder, pin)
            needs = NEEDS_RUN.get(gid)
            if got.pop("name_error", False) and cell is not None and cell.metadata.get(AFTER_SKIP) and needs \
                    and workspace is not None and not (Path(workspace) / needs).exists():
                # its inputs come from the training or cluster cells grading skips: the run was not handed in
                got.update(status=NO_RUN, message=f"this check reads what the skipped training/cluster cells "
                           f"make ({got['message']}); grade with the student's workspace (--workspace) holding "
                           f"that run")
            elif gid not in figures and stopped:
                got["message"] = f"not reached (the notebook was stopped at {stopped})"
            rec.update(got, points=rec["max_points"] if got["status"] == "passed" else
                       None if got["status"] in ("manual", NO_RUN) else 0)
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


def grade_notebook(path: Path, instructor_path: Path, workspace: Path, sandbox: Sandbox,
                   keep: Path | None = None, student: str | None = None) -> dict:
    """Assemble, run (sandboxed, or trusted) and score one notebook of a submission; the executed notebook is kept
    in `keep` if given."""
    from nmtkit.course.figures import Decoder
    from nmtkit.course.instructor.pinning import Pin
    instructor = read_notebook(instructor_path)
    nb, calls = assemble(read_notebook(path), instructor, path.name)
    variant = variants.variant_of(student) if student else variants.active()
    ran = execute(nb, workspace, sandbox, path.name, student, variant)
    cells = score(nb, calls, ran.figures, Decoder(ran.roots), ran.stopped, instructor, workspace,
                  Pin(variant, Path(workspace)))
    auto = [c for c in cells if c["points"] is not None]
    figures = {k: v for c in cells for k, v in c.pop("figures", {}).items()}
    out = {"notebook": path.name, "seconds": round(ran.seconds, 1), "cells": cells,
           "points": sum(c["points"] for c in auto), "max_points": sum(c["max_points"] for c in auto),
           "manual": sum(1 for c in cells if c["status"] == "manual"), "figures": figures,
           "graded_in": "this kit (trusted)" if sandbox.trusted else f"sandbox {sandbox.image}",
           "stopped": ran.stopped or "", "student": student or "", "variant": variant}
    if keep is not None and ran.notebook is not None:
        keep.mkdir(parents=True, exist_ok=True)
        # the graded notebook as the grader assembled it, with the outputs each of its cells printed
        out["executed"] = str(atomic_write_text(keep / path.name, json.dumps(executed(nb, ran.notebook), indent=1)
                                                + "\n"))
    return out


def executed(nb: dict, ran: dict) -> dict:
    """The notebook kept for the instructor: the grader's assembled `nb` (its cells, sources and metadata), each code
    cell given the outputs the driver reported for the same cell (same index and source), nothing else of `ran`."""
    import copy

    import nbformat
    out = copy.deepcopy(nb)
    theirs = ran.get("cells") if isinstance(ran, dict) and isinstance(ran.get("cells"), list) else []
    for i, cell in enumerate(out.cells):
        if cell.cell_type != "code" or i >= len(theirs) or not isinstance(theirs[i], dict):
            continue
        if cell_source(theirs[i]) != cell_source(cell) or not isinstance(theirs[i].get("outputs"), list):
            continue
        try:
            cell.outputs = [nbformat.from_dict(o) for o in theirs[i]["outputs"] if isinstance(o, dict)]
            count = theirs[i].get("execution_count")
            cell.execution_count = count if isinstance(count, int) else None
        except (TypeError, ValueError):
            cell.outputs = []
    for cell in out.cells:
        cell.metadata.pop(AFTER_SKIP, None)
    return json.loads(nbformat.writes(out))


def grade(submission: str | os.PathLike, workspace=None, only=(), out: str | os.PathLike | None = None,
          instructor_dir: str | os.PathLike = NOTEBOOKS_DIR, jobs: int = 1,
          sandbox: Sandbox | None = None, student: str | None = None, roster=None) -> list[dict]:
    """Grade every notebook of `submission` (or those whose NN is in `only`), `jobs` notebooks at once (each in its
    own sandbox), as student `student` (default: the submission folder's name; on `roster` if one is given), whose
    variant the notebooks read; write `out` (JSON) if given, and the executed notebooks beside it (<out's
    stem>-executed/)."""
    sandbox = sandbox or Sandbox()
    submission, instructor_dir = Path(submission), Path(instructor_dir)
    if not submission.is_dir():
        raise CourseError(f"{submission}: not a directory; pass the directory that holds the student's NN_*.ipynb")
    student = student or submission.resolve().name
    try:
        variants.check_id(student)
    except AnalysisError:
        raise CourseError(f"{submission}: {student!r} is no student id (letters, digits and . _ @ + -); name the "
                          f"folder by the student's id, or give --student ID") from None
    from nmtkit.course.instructor.roster import check
    check(student, roster, submission)
    paths = sorted(p for p in submission.glob("[0-9][0-9]_*.ipynb") if not only or p.name[:2] in only)
    if not paths:
        raise CourseError(f"{submission}: no notebooks NN_name.ipynb" + (f" numbered {', '.join(only)}" if only
                                                                         else ""))
    strange = [p.name for p in paths if not (instructor_dir / p.name).exists()]
    if strange:
        raise CourseError(f"{submission}: {', '.join(strange)} is not a notebook of the course ({instructor_dir})")
    for p in paths:  # every notebook readable before a kernel starts: a broken file is named at once
        read_notebook(p)
    ready(sandbox)
    ws, made = grading_workspace(workspace)
    try:
        keep = Path(out).with_name(Path(out).stem + "-executed") if out is not None else None
        def one(p):
            return grade_notebook(p, instructor_dir / p.name, ws, sandbox, keep, student)
        if jobs > 1 and len(paths) > 1:
            from concurrent.futures import ThreadPoolExecutor  # each notebook runs in its own process: threads wait
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
    lines = [f"student {results[0]['student']}: variant {results[0]['variant']}"] if results and \
        results[0].get("student") else []
    for r in results:
        lines.append(f"{r['notebook']}: {r['points']:g}/{r['max_points']:g} points from checks, {r['manual']} "
                     f"to grade by hand, {r['seconds']:.0f} s in {r['graded_in']}"
                     + (f"; stopped at {r['stopped']}" if r.get("stopped") else ""))
        lines += [f"  {c['grade_id']}: {c['status']}{': ' + c['message'] if c['message'] else ''}"
                  for c in r["cells"] if c["status"] in ("failed", "unanswered", NO_RUN)]
    return "\n".join(lines)
