"""`nmtkit release --out DIR`: the kit students install and clone, made from the instructor's kit, as nbgrader's
source/release split makes an assignment's release: the same set-up, package, tests that apply and student docs,
with the student copies of the notebooks in notebooks/, and without anything that holds or computes an answer.

Left out (LEFT_OUT, the one list): the instructor's notebooks (replaced by their student copies: solutions
stubbed, instructor cells and outputs gone), the course's decisions, hidden checks, judgments, verdicts, rubric and
grader (INSTRUCTOR_MODULES; the release's `nk.check` then checks the form of a figure only), the instructor's docs
and tools (the rehearsal that makes reference runs), and the tests that need those (tests/instructor/, and the
sandboxed grading's suite in tests/heavy/). The README
is the students' (docs/students-readme.md). The shipped reference runs keep their logs as the runs wrote them, less
the run's MFU (question 4's answer: run.json's `summary.mfu` and the scalars' `mfu` tag, RUN_DROPS; a student's own
runs log it); their manifests and READMEs are reduced to how each run was made (the instructor's manifest also holds
checks and derived figures such as the ring model's bytes), the manifests' sizes and checksums those of the files
shipped.

The full kit stays the instructor's: `nmtkit grade` runs there, with the hidden checks. Nothing is written into a
directory that exists and is not empty.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from nmtkit.course import student
from nmtkit.errors import CourseError
from nmtkit.files import atomic_write_bytes, atomic_write_json, atomic_write_text, read_json

ROOT = Path(__file__).resolve().parents[3]  # the instructor's kit (its checkout)
# every module of the instructor's folder (the questions' instructor registry, book.py, with them), read from the folder
INSTRUCTOR_MODULES = tuple(sorted(p.stem for p in Path(__file__).parent.glob("*.py") if p.stem != "__init__"))
# What the release leaves out, the one list (tests/instructor/test_release.py reads it too): the instructor's two
# folders (the modules above; every test that needs them, the instructor's notebooks or tools/), the instructor's
# docs (the terminal lab's runs on the rehearsal's hosts), tools/ (the rehearsal that makes reference runs), the
# students' README's source (it becomes README.md), and
# the fields of a reference run's manifest that hold the rehearsal's checks and derived figures (the ring model's
# bytes, their ratio to the counted bytes: question 5's answer).
LEFT_OUT = ("nmtkit/course/instructor/", "tests/instructor/", "docs/instructors.md", "docs/rehearsal.md", "tools/",
            "docs/students-readme.md", "docs/terminal-lab.md", "tests/heavy/test_sandbox_grade.py",
            "tests/heavy/routes68.py",  # the sandbox suite's submissions that try to steer a grade
            # the class's hub: the instructor's to run (its config, roster, exchange; its tests and their schema)
            "hub/", "docs/hub.md", "tests/test_hub_config.py", "tests/test_hub_z2jh.py", "tests/data/",
            "tests/heavy/test_hub.py", "tests/heavy/hubtools.py",
            "tests/heavy/test_marking.py", "tests/heavy/test_marking_hub.py", "bench/marking.py",  # the grader's page
            # the GPU-shaped switch fakes TensorFlow's GPUs in any process that loads it, and the tests that use it
            "tests/gpushape/", "tests/test_gpushape.py", "tests/test_gpushape_long.py",
            # question 2's long run is made by the instructor (its freeze is in tools/); the run itself ships
            "scripts/plateau-run.sh")
MANIFEST_DROPS = ("checks", "bytes_per_step_by_counters")
# what a shipped reference run's own files lose: its MFU, question 4's graded figure (the steps it was taken over and
# the peak stay: they are the question's inputs). Every other file of a run ships as the run wrote it.
RUN_DROPS = {"run.json": "summary.mfu", "scalars.jsonl": "the records tagged mfu"}
STUDENT_README = "docs/students-readme.md"  # the release's README.md
SKIP_DIRS = {".git", ".venv", "workspace", "student", "__pycache__", ".ipynb_checkpoints", "nmtkit.egg-info",
             ".pytest_cache", "build", "dist"}


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


def instructor_only(rel: str) -> bool:
    """Whether a kit file stays with the instructor (LEFT_OUT)."""
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in LEFT_OUT)


def _unnamed(text: str) -> str:
    """A manifest's words without the names of what the release leaves out (the rehearsal's guide; its tools, as a
    path or a module): the release names nothing it lacks."""
    for path in LEFT_OUT:
        if path.endswith("/"):  # a folder: any path or module below it
            stem = path.rstrip("/")
            text = re.sub(rf"\b(?:{re.escape(stem)}|{re.escape(stem.replace('/', '.'))})\b[\w./]*",
                          "<the instructor's tools>", text)
        else:
            text = text.replace(path, "the instructor's guide")
    return text


def shipped_log(name: str, data: bytes) -> bytes:
    """A reference run's file `name` (relative to the run) as the release ships it: without what RUN_DROPS names."""
    if name == "run.json":
        status = json.loads(data)
        if isinstance(status.get("summary"), dict) and "mfu" in status["summary"]:
            status["summary"] = {k: v for k, v in status["summary"].items() if k != "mfu"}
            return (json.dumps(status, indent=2, sort_keys=True) + "\n").encode()  # as nmtkit.files writes it
    elif name == "scalars.jsonl":
        lines = data.decode().splitlines(keepends=True)
        return "".join(ln for ln in lines if not ln.strip() or json.loads(ln).get("tag") != "mfu").encode()
    return data


def reduced_manifest(manifest: dict, shipped: dict[str, bytes] | None = None) -> dict:
    """The manifest without the instructor's fields; the listed size and checksum of each file in `shipped` (the
    run's files the release changes: name -> the bytes it ships) are those bytes' (the manifest lists every file
    of the run)."""
    out = {k: _unnamed(v) if isinstance(v, str) else v for k, v in manifest.items() if k not in MANIFEST_DROPS}
    listed = out.get("files", {})
    changed = {name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
               for name, data in (shipped or {}).items() if name in listed}
    if changed:
        out["files"] = {**listed, **changed}
    return out


def shipped_run(run: Path) -> dict[str, bytes]:
    """The files of reference run `run` that the release changes (RUN_DROPS, and the reduced README), name -> the
    bytes shipped."""
    manifest = read_json(run / "manifest.json", CourseError, missing={})
    out = {}
    for name in RUN_DROPS:
        if (run / name).is_file():
            data = (run / name).read_bytes()
            if shipped_log(name, data) != data:
                out[name] = shipped_log(name, data)
    out["README.md"] = reduced_readme(run.name, reduced_manifest(manifest, out)).encode()
    return out


def run_file(parts: tuple[str, ...]) -> bool:
    """Whether a kit file (its path's parts) is a file at the top of a shipped run: nmtkit/reference/<run>/<file>,
    or a graded variant's nmtkit/reference/variant-<k>/<run>/<file> (the same reductions apply to both)."""
    if parts[:2] != ("nmtkit", "reference"):
        return False
    return len(parts) == 4 or (len(parts) == 5 and parts[2].startswith("variant-"))


def kit_commit(root: Path = ROOT) -> str:
    """The kit's commit the release is made from (`+changes` when the checkout differs from it)."""
    def git(*args):
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    head = git("rev-parse", "HEAD")
    if head.returncode != 0:
        return "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    return head.stdout.strip() + ("+changes" if dirty else "")


def reduced_readme(name: str, manifest: dict) -> str:
    """The run's README in the release: how it was made (the manifest, without the README's own entry: the manifest
    lists the README's checksum, which the README cannot hold)."""
    files = {k: v for k, v in manifest.get("files", {}).items() if k != "README.md"}
    how = json.dumps({**manifest, "files": files} if "files" in manifest else manifest, indent=1, sort_keys=True)
    return (f"# Reference run {name}\n\nA run shipped with the kit so that the questions about machines and the "
            f"network can be answered on a real link. Its logs are as the run wrote them; what follows is how it was "
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
        if instructor_only(rel):
            continue
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        parts = Path(rel).parts
        if parts[0] == "notebooks" and rel.endswith(".ipynb") and re.fullmatch(r"\d\d_.*", parts[-1]):
            import nbformat
            copy_, _ = student.student_notebook(student.read_notebook(src), name=parts[-1])
            atomic_write_text(dest, nbformat.writes(copy_) + "\n")
        elif run_file(parts) and parts[-1] == "manifest.json":
            atomic_write_json(dest, reduced_manifest(read_json(src, CourseError), shipped_run(src.parent)))
        elif run_file(parts) and (parts[-1] == "README.md" or parts[-1] in RUN_DROPS):
            atomic_write_bytes(dest, shipped_run(src.parent).get(parts[-1], src.read_bytes()))
        elif rel == "README.md":
            atomic_write_text(dest, (root / STUDENT_README).read_text())
        else:
            shutil.copy2(src, dest)
        kept += 1
    # the practice variant's answers, fresh from its runs: there a student's checks say right or wrong
    from nmtkit.course.expected import NAME
    from nmtkit.course.instructor.variant_answers import write_practice_expected
    write_practice_expected(out / "nmtkit" / "reference" / NAME)
    commit = kit_commit(root)
    atomic_write_text(out / "COMMIT", commit + "\n")  # `make image` labels the students' image with it
    atomic_write_text(out / "RELEASE.md", f"# The student release of nmtkit\n\nMade by the release command from the "
                      f"instructor's kit at commit {commit}: {kept} files. The notebooks are the student copies; the "
                      f"checks in them check the form of a figure (units, shape); your instructor grades the "
                      f"notebooks you hand in.\n")
    return out
