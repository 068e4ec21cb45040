"""`nmtkit course` (what `make demo` runs): notebooks 01 -> 05 headless, in order, into runs/<timestamp>/.

The notebooks run in one kernel, its namespace cleared before each (`%reset -f`), with NMTKIT_WORKDIR pointing at
the course directory, so data, runs, figures and report.md all land there; the executed copies are written beside
them, failed ones included. One kernel saves four kernel starts and four TensorFlow imports (about a tenth of the
course); nbval and `nmtkit grade` run each notebook in a kernel of its own, so a notebook that leaned on another's
variables or modules would fail there.
"""
from __future__ import annotations

import os
import sys
import time
from datetime import datetime
from pathlib import Path

from nmtkit.course import unanswered
from nmtkit.course.student import NOTEBOOKS_DIR, kernel_name
from nmtkit.errors import CourseError


def notebooks(directory: Path = NOTEBOOKS_DIR) -> list[Path]:
    found = sorted(p for p in directory.glob("[0-9][0-9]_*.ipynb"))
    if not found:
        raise CourseError(f"no notebooks (NN_name.ipynb) in {directory}")
    return found


def _failing_cell(nb, allowed: set[int] = frozenset()) -> tuple[int, str]:
    """(index, first line of source) of the first cell whose output is an error (an unanswered exercise's aside)."""
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if i not in allowed else []:
            if out.get("output_type") == "error":
                first = next((line for line in cell.source.splitlines() if line.strip() and not line.startswith("#")),
                             "")
                return i, first
    return -1, ""


class SharedKernel:
    """One kernel for every notebook of a kind (`with SharedKernel(out_dir) as kernel: kernel.manager(nb)`): its
    start-up chatter goes to course.kernel.log; before each notebook but the first, the namespace is cleared and open
    figures closed, so each notebook starts from no variables, with the modules already imported."""

    RESET = "import matplotlib.pyplot as _plt\n_plt.close('all')\n%reset -f"

    def __init__(self, out_dir: Path):
        self.out_dir, self.owners, self.log = out_dir, {}, None

    def __enter__(self):
        return self

    def manager(self, nb, path: Path):
        """The kernel manager for `nb`'s kernel (started on first use, reset on every later one)."""
        import nbformat
        from nbclient import NotebookClient
        name = kernel_name(nb)
        if name not in self.owners:
            self.log = self.log or open(self.out_dir / "course.kernel.log", "wb")
            owner = NotebookClient(nb, kernel_name=name, resources={"metadata": {"path": str(path.parent)}})
            owner.km = owner.create_kernel_manager()
            owner.start_new_kernel(stderr=self.log, stdout=self.log)
            self.owners[name] = owner
        else:
            reset = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(self.RESET)])
            NotebookClient(reset, km=self.owners[name].km, timeout=60).execute()
        return self.owners[name].km

    def __exit__(self, *exc):
        for owner in self.owners.values():
            owner._cleanup_kernel()  # shuts the kernel down (nbclient's own cleanup, as each notebook's was)
        if self.log:
            self.log.close()


def execute(path: Path, out_dir: Path, timeout: int = 1200, kernel: SharedKernel | None = None) -> float:
    """Run one notebook (in `kernel`, else a fresh kernel of its own); write the executed copy to out_dir; raise
    CourseError naming the cell on failure. Its unanswered exercises and the cells that need them are run and skipped
    as nmtkit.course.unanswered says (execute_planned returns them too)."""
    return execute_planned(path, out_dir, timeout, kernel)[0]


def execute_planned(path: Path, out_dir: Path, timeout: int = 1200, kernel: SharedKernel | None = None,
                    until_first: bool = False) -> tuple[float, unanswered.Plan]:
    """`until_first`: no cell after the notebook's first unanswered exercise runs (a quick look at where a student's
    work starts); the plan still lists every unanswered exercise, and its skipped cells include those."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    plan = unanswered.plan(nb.cells)
    if until_first and plan.unanswered:
        first = min(plan.unanswered)
        plan.skipped = sorted(set(plan.skipped) | {i for i, c in enumerate(nb.cells)
                                                   if i > first and c.cell_type == "code"})
    run_stubs = [i for i in plan.unanswered if i not in plan.skipped]
    # Cells graders skip (# NBVAL_SKIP: e.g. starting a TensorBoard server) are skipped headless too, and so are the
    # cells that need an unanswered exercise; the exercise's own NotImplementedError is expected (checked below).
    tagged = [(c, "skip-execution") for i, c in enumerate(nb.cells) if c.cell_type == "code" and
              (c.source.lstrip().startswith("# NBVAL_SKIP") or i in plan.skipped)]
    tagged += [(nb.cells[i], "raises-exception") for i in run_stubs]
    for cell, tag in tagged:
        cell.metadata.setdefault("tags", []).append(tag)
    t0 = time.time()
    km = kernel.manager(nb, path) if kernel else None
    client = NotebookClient(nb, timeout=timeout, kernel_name=kernel_name(nb), km=km,
                            resources={"metadata": {"path": str(path.parent)}})
    # The kernel's stderr (TensorFlow's C++ start-up chatter) goes to a log beside the executed copy, keeping the
    # terminal to one line per notebook; cell errors still arrive through the notebook itself.
    log = None if kernel else open(out_dir / f"{path.stem}.kernel.log", "wb")
    try:
        client.execute(**({"stderr": log, "stdout": log} if log else {}))
        for i in run_stubs:  # a stub that failed otherwise (a half-made answer) is a failure like any other
            errors = [o for o in nb.cells[i].get("outputs", []) if o.get("output_type") == "error"]
            if errors and errors[0].get("ename") != "NotImplementedError":
                first = next((line for line in nb.cells[i].source.splitlines() if line.strip()), "")
                raise CourseError(f"{path.name}: cell {i} ({first.strip()[:60]!r}) failed: "
                                  f"{errors[0].get('ename')}: {errors[0].get('evalue')}")
    except CellExecutionError as e:
        index, first = _failing_cell(nb, allowed=set(plan.unanswered))
        last = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise CourseError(f"{path.name}: cell {index} ({first.strip()[:60]!r}) failed: {last}") from None
    finally:
        if log:
            log.close()
        for cell, tag in tagged:
            cell.metadata["tags"].remove(tag)
            if not cell.metadata["tags"]:
                del cell.metadata["tags"]
        nbformat.write(nb, out_dir / path.name)
    return time.time() - t0, plan


def _drop_noise(cell) -> None:
    """TensorFlow's C++ start-up and platform chatter on stderr (nmtkit.keras2.NOISE) is not a reference output."""
    from nmtkit.keras2 import NOISE
    kept = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stderr":
            text = "".join(line for line in out["text"].splitlines(True) if not NOISE.search(line))
            if not text.strip():
                continue
            out["text"] = text
        kept.append(out)
    if "outputs" in cell:
        cell["outputs"] = kept


def publish(executed_dir: Path, directory: Path = NOTEBOOKS_DIR) -> list[Path]:
    """Copy executed notebooks over the committed ones (course staff refreshing the reference outputs).

    Per-cell execution timestamps are dropped so that a refresh changes only what the cells printed.
    """
    import nbformat
    written = []
    for path in notebooks(directory):
        executed = Path(executed_dir) / path.name
        if not executed.exists():
            continue
        nb = nbformat.read(executed, as_version=4)
        for cell in nb.cells:
            cell.metadata.pop("execution", None)
            _drop_noise(cell)
        nbformat.write(nb, path)
        written.append(path)
    return written


def _text_outputs(cell) -> list[str]:
    """A cell's outputs as text (what nbval compares for text): streams, plain-text results, errors."""
    texts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            texts.append(out.get("text", ""))
        elif "data" in out and "text/plain" in out["data"]:
            texts.append(out["data"]["text/plain"])
        elif out.get("output_type") == "error":
            texts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return texts


def check_outputs(executed_dir: Path, directory: Path = NOTEBOOKS_DIR,
                  not_run: dict[str, set[int]] | None = None) -> list[str]:
    """Differences between executed notebooks and the committed ones on every `# NBVAL_CHECK_OUTPUT` cell.

    Outputs are compared after notebooks/sanitize.cfg (timings, addresses, paths), as nbval does; [] = all match.
    Cells `not_run` (by notebook name: unanswered exercises and the cells that need them) are not compared, nor are
    committed cells without outputs (a student's copy has every output cleared: nothing to compare with).
    """
    import re

    import nbformat
    from nbval.plugin import find_comment_markers, get_sanitize_patterns
    patterns = get_sanitize_patterns((directory / "sanitize.cfg").read_text()) \
        if (directory / "sanitize.cfg").exists() else []

    def clean(texts):
        text = "".join(texts)
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    problems = []
    for path in notebooks(directory):
        executed = Path(executed_dir) / path.name
        if not executed.exists():
            continue
        ref = nbformat.read(path, as_version=4).cells
        new = nbformat.read(executed, as_version=4).cells
        for i, (a, b) in enumerate(zip(ref, new)):
            if a.cell_type != "code" or ("check", True) not in list(find_comment_markers(a.source)) or \
                    i in (not_run or {}).get(path.name, ()) or not a.get("outputs"):
                continue
            if a.source != b.source:
                problems.append(f"{path.name}: cell {i}: its source differs from the committed notebook")
            elif clean(_text_outputs(a)) != clean(_text_outputs(b)):
                problems.append(f"{path.name}: cell {i}: output differs from the committed notebook")
    return problems


def run_course(out_dir: str | os.PathLike | None = None, profile: str | None = None,
               only: list[str] | None = None, directory: Path = NOTEBOOKS_DIR, publish_outputs: bool = False,
               until_first: bool = False) -> int:
    if publish_outputs and until_first:
        raise CourseError("nmtkit course: --publish needs every cell run; drop --until-first")
    out = Path(out_dir or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ["NMTKIT_WORKDIR"] = str(out)         # kernels inherit it: workspace() == out
    os.environ["NMTKIT_PROFILE"] = profile or os.environ.get("NMTKIT_PROFILE") or "tiny"
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    # The venv's tools (tensorboard, ipengine) on the kernels' PATH even when the venv is not activated.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    books = [p for p in notebooks(directory) if not only or any(p.name.startswith(o) for o in only)]
    print(f"course: {len(books)} notebooks, profile {os.environ['NMTKIT_PROFILE']}, into {_rel(out)}"
          + (", each to its first unanswered exercise" if until_first else ""), flush=True)
    t0 = time.time()
    left: list[tuple[str, str]] = []  # (notebook, heading) of every unanswered exercise
    not_run: dict[str, set[int]] = {}
    with SharedKernel(out) as kernel:
        for i, path in enumerate(books, 1):
            print(f"[{i}/{len(books)}] {path.stem} ...", end=" ", flush=True)
            try:
                seconds, plan = execute_planned(path, out, kernel=kernel, until_first=until_first)
            except CourseError as e:
                print("FAILED", flush=True)
                print(f"course: {e}\ncourse: the executed copy (with the error) is {_rel(out / path.name)}",
                      file=sys.stderr)
                return 1
            left += [(path.stem, heading) for heading in plan.unanswered.values()]
            not_run[path.name] = set(plan.unanswered) | set(plan.skipped)
            aside = f"; {len(plan.unanswered)} unanswered, {len(plan.skipped)} cells after them skipped" \
                if plan.unanswered else ""
            print(f"ok ({seconds:.0f} s{aside})", flush=True)
    print(f"course: done in {(time.time() - t0) / 60:.1f} min", flush=True)
    reports = sorted(out.rglob("report.md"), key=lambda p: p.stat().st_mtime)  # notebook 05 writes it
    if not reports and not left:
        print(f"course: no report.md was written under {_rel(out)}", file=sys.stderr)
        return 1
    problems = check_outputs(out, directory, not_run)
    for problem in problems:
        print(f"course: NBVAL_CHECK_OUTPUT mismatch: {problem}", file=sys.stderr)
    if not problems:
        print("course: every NBVAL_CHECK_OUTPUT cell matches the committed notebooks", flush=True)
    if left:
        # the student's to-do list: every cell not downstream of these ran (nmtkit.course.unanswered: the rule)
        print(f"course: {len(left)} exercises are still unanswered (each raises NotImplementedError; the cells "
              "that need its answer were skipped):", flush=True)
        for book, heading in left:
            print(f"  {book}: {heading}", flush=True)
    if publish_outputs:
        for path in publish(out, directory):
            print(f"course: published outputs into {_rel(path)}")
    if reports:
        print(f"report: {_rel(reports[-1])}")
    return 0


def _rel(p: Path) -> str:
    try:
        return str(p.relative_to(Path.cwd()))
    except ValueError:
        return str(p)
