"""Where the minutes go: the course (`nmtkit course`), grading one submission, and `make test`, by phase.

    python bench/course.py                  # run the course once: seconds per notebook and per phase, peak memory
    python bench/course.py --from runs/X    # the same table from an earlier `nmtkit course --out runs/X`
    python bench/course.py --grade [--jobs N]  # grade one submission (the instructor's notebooks): per notebook, phase
    python bench/course.py --tests [--from CLONE]  # make test's last run (.test-logs/*.xml): each file, each notebook
    python bench/course.py --tests --run   # make test's suites run here, then that table and the CPU per process

nbclient records when each cell started and ended (cell.metadata.execution), so an executed notebook says where its
time went. A cell's phase is read from its code (PHASES: the first pattern that matches); "kernel start" is a
notebook's wall time outside its cells; training cells are split into tracing (each run's first steps, from its
rank logs) and steps. The course's peak resident memory is the sum over its processes (the command, kernels,
engines), sampled every 0.5 s with psutil.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (phase, pattern in a code cell): the first that matches names the cell's phase
PHASES = (
    ("engines and cluster", r"Cluster\(|\.start\(\)|\.stop\(|check_ranks|preflight\(|attach\("),
    ("training", r"nk\.train\(|\.launch\(|\.wait\(|\.summary\(\)|compression_trials|panel\("),
    ("export", r"nk\.export\(|load_export|translate_in_fresh_process|latency\("),
    ("evaluation and decoding", r"Translator|restore\(|translate\(|translation_box"),
    ("data and BPE", r"prepare\(|Tokenizer|make_dataset|read_split|check_file_size|wmt16_facts"),
    ("analysis", r"analyse\(|rep\.|nk\.check|lab_runs|link_samples|plt\.|figure"),
    ("imports and set-up", r"import |setup\(|workspace\(|profile\(|config_table"),
)


def phase(source: str) -> str:
    return next((name for name, pat in PHASES if re.search(pat, source)), "other")


def _stamp(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def cell_times(nb) -> list[tuple[str, float]]:
    """(phase, seconds) of every executed code cell, from nbclient's timing metadata."""
    out = []
    for c in nb.cells:
        ex = c.get("metadata", {}).get("execution", {})
        if c.cell_type == "code" and "iopub.execute_input" in ex and "shell.execute_reply" in ex:
            out.append((phase(c.source), _stamp(ex["shell.execute_reply"]) - _stamp(ex["iopub.execute_input"])))
    return out


def tracing_seconds(workspace: Path, first: int = 3) -> float:
    """Seconds every run in `workspace` spent on its first steps (graph tracing), rank 0's log."""
    from nmtkit.analysis.logs import load_rank_logs
    total = 0.0
    for run in sorted((workspace / "runs").glob("*")):
        df = load_rank_logs(run) if (run / "ranks").is_dir() else None
        if df is not None and len(df) and "step_time" in df:
            r0 = df[df["rank"] == df["rank"].min()].sort_values("wall_time")
            total += float(r0["step_time"].head(first).sum())
    return total


def table(rows: list[tuple[str, str, float]]) -> str:
    """rows (notebook, phase, seconds) as a Markdown table: per notebook and phase, seconds and share."""
    import pandas as pd
    df = pd.DataFrame(rows, columns=["notebook", "phase", "seconds"])
    total = df["seconds"].sum()
    by = df.groupby(["notebook", "phase"], sort=False)["seconds"].sum().reset_index()
    by["share"] = (by["seconds"] / total).map("{:.0%}".format)
    phases = df.groupby("phase")["seconds"].sum().sort_values(ascending=False)
    out = by.round(1).to_markdown(index=False) + "\n\nby phase, all notebooks:\n\n"
    out += "\n".join(f"- {p}: {s:.1f} s ({s / total:.0%})" for p, s in phases.items())
    return out + f"\n\ntotal {total:.1f} s"


def notebook_rows(executed: list[tuple[str, Path, float]], workspace: Path | None) -> list[tuple[str, str, float]]:
    """(notebook, phase, seconds) for executed notebooks given as (name, path, wall seconds)."""
    import nbformat
    rows = []
    for name, path, wall in executed:
        cells = cell_times(nbformat.read(path, as_version=4))
        rows += [(name, p, s) for p, s in cells]
        rows.append((name, "kernel start and waiting", max(wall - sum(s for _, s in cells), 0.0)))
    if workspace is not None:  # tracing is part of the training cells' time: move it to a phase of its own
        tr = tracing_seconds(workspace)
        train = [i for i, r in enumerate(rows) if r[1] == "training"]
        if train and tr:
            n, p, s = rows[train[0]]
            rows[train[0]] = (n, p, max(s - tr, 0.0))
            rows.append((n, "tracing (first steps)", tr))
    return rows


class Sampler:
    """Calls `tick()` every `interval` s on a background thread while the `with` block runs."""

    def __init__(self, interval: float = 0.5):
        self.interval = interval
        self._stop = threading.Event()

    def tick(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        def loop():
            while not self._stop.is_set():
                self.tick()
                self._stop.wait(self.interval)
        self._t = threading.Thread(target=loop, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join(timeout=10)


class PeakMemory(Sampler):
    """The peak of the summed RSS of a process and all its descendants, sampled every `interval` s."""

    def __init__(self, pid: int, interval: float = 0.5):
        super().__init__(interval)
        self.pid, self.peak = pid, 0

    def tick(self) -> None:
        import psutil
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        total = 0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        self.peak = max(self.peak, total)


# (kind, pattern in a command line): the first that matches names a process's kind in `--tests --run`
KINDS = (
    ("ipyparallel engines (ranks)", r"ipyparallel\.engine|ipengine"),
    ("ipyparallel controllers", r"ipyparallel\.controller|ipcontroller"),
    ("Jupyter kernels", r"ipykernel"),
    ("pytest workers (in-process tests)", r"exec\(eval\(sys\.stdin|xdist|-m pytest"),
    ("nmtkit CLI and other kit processes", r"nmtkit|bench/"),
    ("SSH, Slurm, munge, Chromium", r"ssh|slurm|munge|chrom"),
    ("other Python processes", r"python"),
)


class CpuByKind(Sampler):
    """CPU seconds (user + system) of every process that starts after it, summed by KINDS, sampled every
    `interval` s with psutil (a process's last fraction of a second before it exits is missed)."""

    def __init__(self, interval: float = 0.5):
        super().__init__(interval)
        self.seen, self.t0 = {}, time.time()

    def tick(self) -> None:
        import psutil
        for p in psutil.process_iter(["pid", "create_time", "cmdline", "cpu_times"]):
            i = p.info
            # psutil's start times are only as exact as the boot time it counts from (a second)
            if i["create_time"] is None or i["create_time"] < self.t0 - 2 or i["pid"] == os.getpid() or \
                    i["cpu_times"] is None:
                continue
            cmd = " ".join(i["cmdline"] or [])
            self.seen[(i["pid"], i["create_time"])] = (cmd, i["cpu_times"].user + i["cpu_times"].system)

    def table(self) -> str:
        import pandas as pd
        rows = [(next((k for k, pat in KINDS if re.search(pat, cmd)), "other"), cpu) for cmd, cpu in self.seen.values()]
        df = pd.DataFrame(rows, columns=["kind", "cpu"]).groupby("kind")["cpu"].agg(["count", "sum", "median"])
        df = df.sort_values("sum", ascending=False)
        df["share"] = (df["sum"] / df["sum"].sum()).map("{:.0%}".format)
        df.columns = ["processes", "CPU s", "median CPU s a process", "share"]
        return df.round(1).to_markdown()


def run_tests() -> None:
    """make test's two suites here (scripts/test.sh, after set-up), sampling every process's CPU time."""
    t0 = time.time()
    with CpuByKind() as cpu:
        rc = subprocess.run(["bash", "scripts/test.sh"], cwd=ROOT, stdout=subprocess.DEVNULL).returncode
    print(f"make test's suites: {time.time() - t0:.0f} s wall, exit {rc}; CPU seconds by process kind:\n")
    print(cpu.table() + "\n")
    tests()


def course(out: Path | None) -> None:
    out = out or Path(tempfile.mkdtemp(prefix="bench-course-"))
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "nmtkit.cli", "course", "--out", str(out)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)
    with PeakMemory(proc.pid) as mem:
        log = proc.stdout.read()
        proc.wait()
    print(log.rstrip())
    print(f"\ncourse: {time.time() - t0:.0f} s wall, exit {proc.returncode}; peak resident memory of all its "
          f"processes {mem.peak / 2**30:.2f} GiB")
    report_course(out, log)


def report_course(out: Path, log: str | None = None) -> None:
    log = log if log is not None else ""
    walls = {m.group(1): float(m.group(2)) for m in re.finditer(r"\] (\d\d_\w+) \.\.\. ok \((\d+) s\)", log)}
    executed = [(p.stem, p, walls.get(p.stem, 0.0)) for p in sorted(out.glob("[0-9][0-9]_*.ipynb"))]
    if not executed:
        sys.exit(f"{out}: no executed notebooks (NN_*.ipynb); run `nmtkit course --out {out}` first")
    print("\n" + table(notebook_rows(executed, out)))


def grade(jobs: int) -> None:
    import nbformat  # noqa: F401

    from nmtkit.course.instructor.container import Sandbox
    from nmtkit.course.instructor.grade import grade as grade_submission
    from nmtkit.course.student import NOTEBOOKS_DIR
    with tempfile.TemporaryDirectory() as d:
        t0 = time.time()
        # trusted: a local kernel, as before the sandbox (bench/grading.py weighs the sandbox against it)
        results = grade_submission(NOTEBOOKS_DIR, out=Path(d) / "grades.json", jobs=jobs, sandbox=Sandbox(trusted=True))
        wall = time.time() - t0
        executed = [(r["notebook"][:-6], Path(r["executed"]), r["seconds"]) for r in results]
        print(table(notebook_rows(executed, None)))
    print(f"\ngrading one submission (the instructor's notebooks, {jobs} at once): {wall:.0f} s wall, "
          f"{sum(r['points'] for r in results):g}/{sum(r['max_points'] for r in results):g} points")


def tests(logs: Path = ROOT / ".test-logs") -> None:
    """make test's last run, from the JUnit XML its suites write: seconds per test file and per notebook."""
    rows = []
    for suite in ("unit", "notebooks"):
        path = logs / f"{suite}.xml"
        if not path.exists():
            print(f"{path}: missing; run `make test` first")
            continue
        per: dict[str, float] = {}
        for case in ET.parse(path).getroot().iter("testcase"):
            # unit: classname "tests.test_cli" (a file: tests/test_cli.py); notebooks: "notebooks.02_x.ipynb::..."
            name = case.get("classname", "")
            key = case.get("file") or (name.split("::")[0] if suite == "notebooks" else
                                       ".".join(name.split(".")[:2]) if name.startswith("tests.") else name) or "?"
            per[key] = per.get(key, 0.0) + float(case.get("time", 0))
        rows += [(suite, k, v) for k, v in per.items()]
    if rows:
        import pandas as pd
        df = pd.DataFrame(rows, columns=["suite", "file", "seconds"]).sort_values("seconds", ascending=False)
        print(df.round(1).to_markdown(index=False))
        print("\n" + "\n".join(f"{s}: {v:.0f} s summed over its tests (two unit workers run side by side)"
                               for s, v in df.groupby("suite")["seconds"].sum().items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="src", type=Path, help="an earlier `nmtkit course --out` directory")
    ap.add_argument("--out", type=Path, help="where the course runs (default: a temporary directory)")
    ap.add_argument("--grade", action="store_true", help="grade one submission instead")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="with --grade: notebooks graded at once, as `nmtkit grade` (default: the cores)")
    ap.add_argument("--tests", action="store_true", help="make test's last run instead (.test-logs/*.xml; with "
                                                         "--from CLONE, that checkout's, e.g. a CI clone)")
    ap.add_argument("--run", action="store_true", help="with --tests: run make test's suites first (after `make "
                                                       "setup`), sampling the CPU of every process they start")
    a = ap.parse_args()
    if a.grade:
        grade(a.jobs)
    elif a.tests and a.run:
        run_tests()
    elif a.tests:
        tests(a.src / ".test-logs" if a.src else ROOT / ".test-logs")
    elif a.src:
        report_course(a.src)
    else:
        course(a.out)


if __name__ == "__main__":
    main()
