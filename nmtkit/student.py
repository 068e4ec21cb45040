"""Student copies of the course notebooks (`make student`, `nmtkit student`), nbgrader style.

The committed notebooks are the instructor's: each exercise's reference solution sits between
`### BEGIN SOLUTION` and `### END SOLUTION` lines. A student copy replaces every such block, markers included,
with `raise NotImplementedError` at the BEGIN marker's indentation (in Markdown cells: "YOUR ANSWER HERE"), and
clears every output, so the copy runs up to the first exercise and stops there until the student fills it in.
The check cells that follow an exercise are left as they are: they grade the student's answer under nbval.
"""
from __future__ import annotations

from nmtkit.errors import NmtkitError

import copy
import os
import re
from pathlib import Path

from nmtkit.files import atomic_write_text

NOTEBOOKS_DIR = Path(__file__).resolve().parents[1] / "notebooks"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
CODE_STUB, MARKDOWN_STUB = "raise NotImplementedError", "YOUR ANSWER HERE"
_MARKER = re.compile(r"^(\s*)(### (?:BEGIN|END) SOLUTION)\s*$")


class StudentError(NmtkitError, ValueError):
    """A solution block that does not close (or closes without opening); the message names notebook and cell."""


def strip_solutions(source: str, stub: str = CODE_STUB, where: str = "cell") -> str:
    """`source` with each BEGIN/END SOLUTION block (markers included) replaced by `stub`, indented like BEGIN."""
    out, indent, start = [], None, 0
    for n, line in enumerate(source.splitlines(keepends=True), 1):
        m = _MARKER.match(line.rstrip("\n"))
        if m and m.group(2) == BEGIN:
            if indent is not None:
                raise StudentError(f"{where}, line {n}: {BEGIN} inside the solution opened on line {start}; "
                                   f"close it with {END} first")
            indent, start = m.group(1), n
            out.append(f"{indent}{stub}\n")
        elif m:
            if indent is None:
                raise StudentError(f"{where}, line {n}: {END} without a {BEGIN} above it")
            indent = None
        elif indent is None:
            out.append(line)
    if indent is not None:
        raise StudentError(f"{where}, line {start}: {BEGIN} is never closed; add a line {END!r}")
    text = "".join(out)
    # a block at the very end of a cell: no trailing newline, as Jupyter saves cell sources
    return text[:-1] if text.endswith("\n") and not source.endswith("\n") else text


def student_notebook(nb: dict, name: str = "notebook") -> tuple[dict, int]:
    """(a student copy of the nbformat-4 dict `nb`, how many solution blocks it replaced)."""
    nb = copy.deepcopy(nb)
    replaced = 0
    for i, cell in enumerate(nb.get("cells", [])):
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        stub = CODE_STUB if cell.get("cell_type") == "code" else MARKDOWN_STUB
        replaced += sum(1 for line in source.splitlines() if line.strip() == BEGIN)
        cell["source"] = strip_solutions(source, stub, where=f"{name}, cell {i}")
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
    # saved widget views belong to outputs that are gone now
    nb.get("metadata", {}).pop("widgets", None)
    return nb, replaced


def write_student_copies(out_dir: str | os.PathLike = "student", src_dir: str | os.PathLike = NOTEBOOKS_DIR
                         ) -> list[tuple[Path, int]]:
    """Write a student copy of every NN_*.ipynb in `src_dir` into `out_dir`: [(path, solutions replaced)]."""
    import nbformat

    src_dir, out_dir = Path(src_dir), Path(out_dir)
    sources = sorted(src_dir.glob("[0-9][0-9]_*.ipynb"))
    if not sources:
        raise StudentError(f"no notebooks (NN_name.ipynb) in {src_dir}")
    if out_dir.resolve() == src_dir.resolve():
        raise StudentError(f"{out_dir}: the student copies would overwrite the instructor's notebooks; "
                           f"choose another directory (default: student/)")
    written = []
    for path in sources:
        nb = nbformat.read(path, as_version=4)
        copy_, replaced = student_notebook(nb, name=path.name)
        nbformat.validate(copy_)
        written.append((atomic_write_text(out_dir / path.name, nbformat.writes(copy_) + "\n"), replaced))
    return written
