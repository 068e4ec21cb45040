"""The instructor's solutions put into a release's student notebooks, as a student who answered everything would
have them: each work and verdict cell (by its nbgrader grade id) takes the instructor's source; the check cells stay
the release's (the instructor's carry hidden checks) and the instructor-only cells stay out. And `stubs`: the
unanswered exercises of a folder of notebooks, as the course runner lists them."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def put_solutions(release_notebooks: Path, out: Path) -> Path:
    """Copies of the release's notebooks (and what lies beside them) in `out`, every exercise answered."""
    import shutil

    import nbformat

    from nmtkit.course import student
    shutil.copytree(release_notebooks, out)
    for path in sorted(out.glob("[0-9][0-9]_*.ipynb")):
        instructor = student.read_notebook(ROOT / "notebooks" / path.name)
        answers = {student.grade_id(c): c.source for c in instructor.cells
                   if student.grade_id(c) and (student.role(c) or ("", "", ""))[2] != "check"}
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if student.grade_id(cell) in answers:
                cell.source = answers[student.grade_id(cell)]
        nbformat.write(nb, path)
    for p in [out, *out.rglob("*")]:  # readable by the image's jovyan when mounted
        p.chmod(0o755 if p.is_dir() else 0o644)
    return out


def stubs(directory: Path) -> list[tuple[str, str]]:
    """(notebook, heading) of every unanswered exercise, as the runner lists them."""
    import nbformat

    from nmtkit.course.unanswered import plan
    return [(p.stem, h) for p in sorted(directory.glob("[0-9][0-9]_*.ipynb"))
            for h in plan(nbformat.read(p, as_version=4).cells).unanswered.values()]
