"""`nmtkit release --out DIR`: the kit students install and clone, made from the instructor's kit, as nbgrader's
source/release split makes an assignment's release: the same set-up, package, tests that apply and student docs,
with the student copies of the notebooks in notebooks/, and without anything that holds or computes an answer.

Left out: the instructor's notebooks (replaced by their student copies: solutions stubbed, instructor cells and
outputs gone), the course's decisions, hidden checks, judgments, verdicts, rubric and grader (INSTRUCTOR_MODULES;
the release's `nk.check` then checks the form of a figure only), the instructor's docs and tools (the rehearsal
that makes reference runs), and the tests that exercise those. The shipped reference runs keep their logs as the
runs wrote them; their manifests and READMEs are reduced to how each run was made (the instructor's manifest also
holds checks and derived figures such as the ring model's bytes).

The full kit stays the instructor's: `nmtkit grade` runs there, with the hidden checks. Nothing is written into a
directory that exists and is not empty.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from nmtkit.course import student
from nmtkit.errors import CourseError
from nmtkit.files import atomic_write_json, atomic_write_text, read_json

ROOT = Path(__file__).resolve().parents[3]  # the instructor's kit (its checkout)
INSTRUCTOR_MODULES = ("decisions", "hidden", "judgments", "verdicts", "rubric", "grade", "classgrade", "release")
INSTRUCTOR_PATHS = ("nmtkit/course/instructor/", "docs/instructors.md", "docs/rehearsal.md", "tools/")
# a test that names one of these exercises the instructor's half: it does not apply to the release
INSTRUCTOR_WORDS = re.compile(r"course[. ]+(?:import\s+[\w, ]*)?\b(?:%s)\b|tools\.rehearsal|instructor|BEGIN SOLUTION"
                              % "|".join(INSTRUCTOR_MODULES))
SKIP_DIRS = {".git", ".venv", "workspace", "student", "__pycache__", ".ipynb_checkpoints", "nmtkit.egg-info",
             ".pytest_cache", "build", "dist"}
# a reference run's manifest keeps how the run was made: the rehearsal's checks and its derived figures (the ring
# model's bytes, their ratio to the counted bytes: question 5's answer) stay with the instructor
MANIFEST_DROPS = ("checks", "bytes_per_step_by_counters")


def kit_files(root: Path = ROOT) -> list[str]:
    """The kit's files, relative to `root`: git's list where the kit is a checkout (tracked, and new files git does not
    ignore), else a walk
    that leaves out environments, workspaces and caches."""
    if (root / ".git").exists():
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True)
        if out.returncode == 0:
            return sorted(f for f in out.stdout.split("\0") if f and (root / f).is_file())
    found = []
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS]
        found += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return sorted(found)


def instructor_only(rel: str, text: str | None) -> bool:
    """Whether a kit file stays with the instructor."""
    if any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in INSTRUCTOR_PATHS):
        return True
    if rel.startswith("notebooks/") and rel.endswith(".ipynb"):
        return False  # replaced by its student copy
    return rel.startswith("tests/") and rel.endswith(".py") and text is not None and bool(INSTRUCTOR_WORDS.search(text))


def reduced_manifest(manifest: dict) -> dict:
    return {k: v for k, v in manifest.items() if k not in MANIFEST_DROPS}


def reduced_readme(name: str, manifest: dict) -> str:
    how = json.dumps(manifest, indent=1, sort_keys=True)
    return (f"# Reference run {name}\n\nA run shipped with the kit so that the questions about machines and the network "
            f"can be answered on a real link. Its logs are as the run wrote them; what follows is how it was "
            f"made (manifest.json). What it shows is yours to measure.\n\n```json\n{how}\n```\n")


def build(out: str | os.PathLike, root: Path = ROOT) -> Path:
    """Write the student release into `out` (new, or an empty directory); returns it."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CourseError(f"{out}: exists and is not empty; nothing written: choose a new --out directory")
    files = kit_files(root)
    out.mkdir(parents=True, exist_ok=True)
    kept = 0
    for rel in files:
        src = root / rel
        try:
            text = src.read_text() if rel.endswith((".py", ".md", ".json")) else None
        except UnicodeDecodeError:
            text = None
        if instructor_only(rel, text):
            continue
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        parts = Path(rel).parts
        if parts[0] == "notebooks" and rel.endswith(".ipynb") and re.fullmatch(r"\d\d_.*", parts[-1]):
            import nbformat
            copy_, _ = student.student_notebook(student.read_notebook(src), name=parts[-1])
            atomic_write_text(dest, nbformat.writes(copy_) + "\n")
        elif parts[:2] == ("nmtkit", "reference") and parts[-1] == "manifest.json":
            atomic_write_json(dest, reduced_manifest(read_json(src, CourseError)))
        elif parts[:2] == ("nmtkit", "reference") and parts[-1] == "README.md" and len(parts) == 4:
            atomic_write_text(dest, reduced_readme(parts[2], reduced_manifest(read_json(src.parent / "manifest.json",
                                                                                      CourseError))))
        else:
            shutil.copy2(src, dest)
        kept += 1
    atomic_write_text(out / "RELEASE.md", f"# The student release of nmtkit\n\nMade by `nmtkit release` from the "
                      f"instructor's kit: {kept} files. The notebooks are the student copies; the checks in them "
                      f"check the form of a figure (units, shape), and the grader's checks run in the instructor's "
                      f"kit (`nmtkit grade`).\n")
    return out
