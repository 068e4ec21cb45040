"""Student copies of the course notebooks (`make student`, `nmtkit student`), and the exercise convention they
share with nbgrader and `nmtkit grade`.

The committed notebooks are the instructor's. Every exercise is three cells, marked with nbgrader's own metadata
(so `nbgrader generate_assignment` / `autograde` work on them as they are) and a grade id `<nb>-<q>-<role>`:

    work     code, the student's computation between the BEGIN / END SOLUTION markers (`###` comments)
             {"nbgrader": {"solution": true, "grade": false, "locked": false, "grade_id": "05-q1-work", ...}}
    check    code, locked, graded: calls nk.check(...); anything between the BEGIN / END HIDDEN TESTS
             markers never reaches a student copy
             {"nbgrader": {"solution": false, "grade": true, "locked": true, "points": n, "grade_id": "05-q1-check"}}
    verdict  markdown, graded by hand: the student's verdict and the figure that decides it; the instructor's model
             verdict sits between the SOLUTION markers
             {"nbgrader": {"solution": true, "grade": true, "locked": false, "points": n, "grade_id": "05-q1-verdict"}}

Cells tagged "instructor" (the kit's own verdicts and rubric) are left out of student copies. A student copy
replaces every SOLUTION block, markers included, with `raise NotImplementedError` at the BEGIN marker's
indentation (in Markdown: "YOUR ANSWER HERE"), drops hidden tests, and clears every output. `nmtkit grade`
(nmtkit.course.instructor.grade) puts the instructor's check cells back by grade id before it runs a submission, so
deleting or editing a check cell changes nothing.
"""
from __future__ import annotations

import copy
import os
import re
import time
from pathlib import Path

from nmtkit.errors import CourseError
from nmtkit.files import atomic_write_json, atomic_write_text, read_json, sha256_file

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"  # the instructor's, in the kit's checkout
# Spelled in parts: a student release (nmtkit release) ships this module, and no file of it may hold a marker
# (a release is checked by searching its files for them).
BEGIN, END = "### BEGIN " + "SOLUTION", "### END " + "SOLUTION"
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN " + "HIDDEN TESTS", "### END " + "HIDDEN TESTS"
CODE_STUB, MARKDOWN_STUB = "raise NotImplementedError", "YOUR ANSWER HERE"
INSTRUCTOR_TAG = "instructor"
ROLES = ("work", "check", "verdict")
SCHEMA_VERSION = 3  # nbgrader's cell-metadata schema
_MARKER = re.compile(r"^(\s*)(### (?:BEGIN|END) " + "SOLUTION)\\s*$")
_HIDDEN = re.compile(rf"^\s*{HIDDEN_BEGIN}\s*$.*?^\s*{HIDDEN_END}\s*$\n?", re.S | re.M)
_GRADE_ID = re.compile(r"^(\d\d)-((?:q|lab)\d+)-(work|check|verdict)$")  # lab: notebook 04's bottleneck lab


# --- the convention ----------------------------------------------------------------------------------------

def nbgrader_metadata(nb: str, q: str, role: str, points: float = 0) -> dict:
    """The cell metadata of an exercise cell: nb "05", q "q1", role work | check | verdict."""
    if role not in ROLES:
        raise CourseError(f"role {role!r}: choose one of {', '.join(ROLES)}")
    meta = {"solution": role != "check", "grade": role != "work", "locked": role == "check",
            "grade_id": f"{nb}-{q}-{role}", "schema_version": SCHEMA_VERSION}
    if role != "work":
        meta["points"] = points
    return {"nbgrader": meta}


SETUP = "setup"  # a notebook's set-up cell: locked (nbgrader's read-only), put back as it ships when grading


def setup_metadata(nb: str) -> dict:
    """The cell metadata of a notebook's locked set-up cell (nb "05": grade id 05-setup)."""
    return {"nbgrader": {"solution": False, "grade": False, "locked": True, "grade_id": f"{nb}-{SETUP}",
                         "schema_version": SCHEMA_VERSION}}


def cell_source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def grade_id(cell) -> str | None:
    return (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")


def role(cell) -> tuple[str, str, str] | None:
    """(nb, q, role) of an exercise cell, else None."""
    m = _GRADE_ID.match(grade_id(cell) or "")
    return (m.group(1), m.group(2), m.group(3)) if m else None


def is_instructor(cell) -> bool:
    return INSTRUCTOR_TAG in cell.get("metadata", {}).get("tags", [])


def exercises(nb: dict, name: str = "notebook") -> dict[str, dict[str, int]]:
    """q -> {role: cell index} for every exercise of `nb`; CourseError when one lacks a role, a grade id repeats,
    or a cell's nbgrader flags contradict its role."""
    out: dict[str, dict[str, int]] = {}
    for i, cell in enumerate(nb.get("cells", [])):
        r = role(cell)
        if r is None:
            continue
        _, q, kind = r
        if kind in out.setdefault(q, {}):
            raise CourseError(f"{name}, cell {i}: grade id {grade_id(cell)} repeats cell {out[q][kind]}")
        meta, want = cell["metadata"]["nbgrader"], nbgrader_metadata(r[0], q, kind)["nbgrader"]
        wrong = [k for k in ("solution", "grade", "locked") if bool(meta.get(k)) != want[k]]
        if wrong or (cell.get("cell_type") == "markdown") != (kind == "verdict"):
            raise CourseError(f"{name}, cell {i}: {grade_id(cell)} has the wrong cell type or nbgrader flags "
                               f"{wrong}; use nmtkit.course.student.nbgrader_metadata")
        out[q][kind] = i
    for q, cells in out.items():
        if set(cells) != set(ROLES):
            raise CourseError(f"{name}: exercise {q} lacks its {', '.join(sorted(set(ROLES) - set(cells)))} cell")
    return out


def read_notebook(path: str | os.PathLike):
    """The nbformat-4 notebook at `path`, or one CourseError line naming the file when it is not a notebook
    (an unreadable or directory path raises the OSError, which the CLI words itself)."""
    import nbformat
    try:
        return nbformat.read(path, as_version=4)
    except (nbformat.reader.NotJSONError, UnicodeDecodeError, ValueError) as e:
        raise CourseError(f"{path}: not a notebook ({type(e).__name__}: {str(e).splitlines()[0][:80]}); get the "
                          f"file as JupyterLab saved it (File > Download), or leave it out of the submission") from None


# --- running a notebook -------------------------------------------------------------------------------------

def kernel_name(nb) -> str:
    """The notebook's kernel if installed (the 'nmtkit' kernel sets TF_USE_LEGACY_KERAS), else python3."""
    from jupyter_client.kernelspec import KernelSpecManager
    wanted = nb.metadata.get("kernelspec", {}).get("name", "python3")
    return wanted if wanted in KernelSpecManager().find_kernel_specs() else "python3"


# --- student copies ----------------------------------------------------------------------------------------

def strip_solutions(source: str, stub: str = CODE_STUB, where: str = "cell") -> str:
    """`source` with each BEGIN/END SOLUTION block (markers included) replaced by `stub`, indented like BEGIN."""
    out, indent, start = [], None, 0
    for n, line in enumerate(source.splitlines(keepends=True), 1):
        m = _MARKER.match(line.rstrip("\n"))
        if m and m.group(2) == BEGIN:
            if indent is not None:
                raise CourseError(f"{where}, line {n}: {BEGIN} inside the solution opened on line {start}; "
                                   f"close it with {END} first")
            indent, start = m.group(1), n
            out.append(f"{indent}{stub}\n")
        elif m:
            if indent is None:
                raise CourseError(f"{where}, line {n}: {END} without a {BEGIN} above it")
            indent = None
        elif indent is None:
            out.append(line)
    if indent is not None:
        raise CourseError(f"{where}, line {start}: {BEGIN} is never closed; add a line {END!r}")
    text = "".join(out)
    # a block at the very end of a cell: no trailing newline, as Jupyter saves cell sources
    return text[:-1] if text.endswith("\n") and not source.endswith("\n") else text


def strip_hidden(source: str) -> str:
    """`source` without its HIDDEN TESTS blocks (the instructor's part of a check cell)."""
    return _HIDDEN.sub("", source).rstrip("\n")


def student_notebook(nb: dict, name: str = "notebook") -> tuple[dict, int]:
    """(a student copy of the nbformat-4 dict `nb`, how many solution blocks it replaced)."""
    nb = copy.deepcopy(nb)
    exercises(nb, name)  # refuse a notebook that breaks the convention before a student sees it
    nb["cells"] = [c for c in nb.get("cells", []) if not is_instructor(c)]
    replaced = 0
    for i, cell in enumerate(nb["cells"]):
        source = cell_source(cell)
        stub = CODE_STUB if cell.get("cell_type") == "code" else MARKDOWN_STUB
        replaced += sum(1 for line in source.splitlines() if line.strip() == BEGIN)
        cell["source"] = strip_hidden(strip_solutions(source, stub, where=f"{name}, cell {i}"))
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    # saved widget views belong to outputs that are gone now
    nb.get("metadata", {}).pop("widgets", None)
    return nb, replaced


def nbgrader_source(nb: dict, name: str = "notebook") -> tuple[dict, int]:
    """(nbgrader's source version of `nb`: solutions kept for `nbgrader generate_assignment` to strip, the
    instructor-tagged cells and outputs gone, how many exercises it holds)."""
    nb = copy.deepcopy(nb)
    n = len(exercises(nb, name))
    nb["cells"] = [c for c in nb.get("cells", []) if not is_instructor(c)]
    for cell in nb["cells"]:
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    nb.get("metadata", {}).pop("widgets", None)
    return nb, n


MANIFEST = ".nmtkit-student.json"  # in a directory of student copies: what the kit wrote there, by sha256


def write_student_copies(out_dir: str | os.PathLike = "student", src_dir: str | os.PathLike = NOTEBOOKS_DIR,
                         for_nbgrader: bool = False, force: bool = False) -> list[tuple[Path, int]]:
    """Write a student copy of every NN_*.ipynb in `src_dir` into `out_dir`: [(path, solutions replaced)]; with
    `for_nbgrader`, nbgrader's source version instead: [(path, exercises)].

    Never overwrites work: `out_dir` must be new, empty, or one this function wrote (its manifest), and a copy
    that changed since it was written is refused; `force` moves such files aside into `replaced-<time>/` first."""
    import nbformat

    src_dir, out_dir = Path(src_dir), Path(out_dir)
    sources = sorted(src_dir.glob("[0-9][0-9]_*.ipynb"))
    if not sources:
        raise CourseError(f"no notebooks (NN_name.ipynb) in {src_dir}")
    if out_dir.resolve() == src_dir.resolve():
        raise CourseError(f"{out_dir}: the student copies would overwrite the instructor's notebooks; "
                           f"choose another directory (default: student/)")
    copies = []
    for path in sources:
        nb = read_notebook(path)
        copy_, replaced = (nbgrader_source if for_nbgrader else student_notebook)(nb, name=path.name)
        nbformat.validate(copy_)
        copies.append((path.name, nbformat.writes(copy_) + "\n", replaced))
    ours = _clear_the_way(out_dir, [name for name, _, _ in copies], force)
    written = []
    for name, text, replaced in copies:
        written.append((atomic_write_text(out_dir / name, text), replaced))
        ours[name] = sha256_file(out_dir / name)
    atomic_write_json(out_dir / MANIFEST, {"written_by": "nmtkit student", "files": ours})
    return written


def _clear_the_way(out_dir: Path, names: list[str], force: bool) -> dict[str, str]:
    """The manifest's {name: sha256} of `out_dir` once nothing in the way is the student's or another tool's:
    refuses (CourseError) a file where the directory belongs, a non-empty directory the kit did not write, and a
    copy changed since it was written; with `force`, moves those notebooks aside (never deletes)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise CourseError(f"{out_dir}: a file where the student copies' directory belongs; choose another --out")
    if not out_dir.exists():
        return {}
    manifest = read_json(out_dir / MANIFEST, CourseError, missing=None)
    ours = dict((manifest or {}).get("files") or {})
    if manifest is None and any(out_dir.iterdir()) and not force:
        raise CourseError(f"{out_dir}: not a directory `nmtkit student` made (it holds other files); nothing "
                          f"written: choose a new --out directory, or add --force to move its notebooks aside first")
    changed = [n for n in names if (out_dir / n).exists() and ours.get(n) != sha256_file(out_dir / n)]
    if changed and not force:
        raise CourseError(f"{out_dir / changed[0]}: changed since `nmtkit student` wrote it ({len(changed)} such "
                          f"notebook(s)); nothing written: choose a new --out directory, or add --force to move "
                          f"the old copies aside first")
    if changed:
        aside = out_dir / time.strftime("replaced-%Y%m%d-%H%M%S")
        aside.mkdir()
        for n in changed:
            os.replace(out_dir / n, aside / n)
            ours.pop(n, None)
        print(f"{out_dir}: moved {len(changed)} notebook(s) the kit did not write, or that changed, into {aside}")
    return ours
