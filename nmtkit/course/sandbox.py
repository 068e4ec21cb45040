"""`python -m nmtkit.course.sandbox NOTEBOOK --time S --output-bytes N [--scratch DIR]`: run a graded notebook (the
grader's: its check cells record figures, nmtkit.course.figures) and report on standard output, one
"NMTKIT-SANDBOX {json}" line each: every figures file as soon as the cell that wrote it ends, then why the run stopped
(None: it ran to its end), then the executed notebook. Run inside a container of the students' image by `nmtkit
grade` (nmtkit.course.instructor.container), or as a local process with --trust-submissions; the same code either way.

It stops at the notebook's limits and says which: the time (each cell's timeout is what remains), the output (the
notebook's messages past N bytes are dropped and the kernel interrupted), the scratch (its file system full), the
processes (the container's pids limit reached), the memory (the kernel killed by the container's OOM killer). The
host's own time limit and the container's caps stand behind it. No verdict, score or answer exists here.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import time
from pathlib import Path

from nmtkit.course.figures import DIR_ENV

MARK = "NMTKIT-SANDBOX "
CGROUP = Path("/sys/fs/cgroup")


TOKEN = {"value": ""}  # the grader's secret for this run, read from standard input (--token-stdin)


def emit(**what) -> None:
    what = {**what, "token": TOKEN["value"]}  # the grader keeps only lines that carry it
    sys.stdout.write(MARK + json.dumps(what, allow_nan=True) + "\n")
    sys.stdout.flush()


def seal() -> None:
    """Keep the kernel (a child of this process, under the same uid) out of this process: not dumpable, so
    /proc/<this>/fd (the report's pipe), /proc/<this>/mem (the token) and ptrace need CAP_SYS_PTRACE, which the
    container drops. The kernel's execve makes it dumpable again; it holds neither the pipe nor the token."""
    import ctypes
    import ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed: the report could be forged")


def read_token() -> None:
    """The token from standard input, then standard input is /dev/null: no child inherits the grader's pipe."""
    TOKEN["value"] = sys.stdin.readline().strip()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def _cgroup_value(*names: str) -> str | None:
    """The first of the cgroup files (v1 or v2 layout) that exists, read; None outside a container's cgroup."""
    for n in names:
        p = CGROUP / n
        if p.exists():
            try:
                return p.read_text()
            except OSError:
                return None
    return None


def pids_reached() -> int | None:
    """The container's pids limit when the processes in it have reached it (None: below it, or no limit)."""
    cur, top = _cgroup_value("pids/pids.current", "pids.current"), _cgroup_value("pids/pids.max", "pids.max")
    if not cur or not top or not top.strip().isdigit():
        return None
    return int(top) if int(cur) >= int(top) - 2 else None


def oom_killed() -> bool:
    text = _cgroup_value("memory/memory.oom_control", "memory.events") or ""
    return any(line.split()[0] == "oom_kill" and int(line.split()[1]) > 0 for line in text.splitlines()
               if len(line.split()) == 2 and line.split()[1].isdigit())


def scratch_full(scratch: Path | None) -> str | None:
    if scratch is None:
        return None
    u = shutil.disk_usage(scratch)
    return f"the scratch limit ({u.total / 2**20:.0f} MiB, full)" if u.free < max(1_000_000, 0.01 * u.total) else None


def _client_class():
    from nbclient import NotebookClient
    from nbclient.util import ensure_async

    class Capped(NotebookClient):
        """A NotebookClient that keeps at most `cap` bytes of the notebook's messages, then interrupts the kernel."""

        def output(self, outs, msg, display_id, cell_index):
            self.printed = getattr(self, "printed", 0) + len(json.dumps(msg.get("content", {}), default=str))
            if self.printed > self.cap:
                if not getattr(self, "over", False):
                    self.over = True
                    asyncio.ensure_future(ensure_async(self.km.interrupt_kernel()))
                return None
            return super().output(outs, msg, display_id, cell_index)

    return Capped


async def run(nb, seconds: float, output_bytes: int, scratch: Path | None, kernel: str, cwd: Path, log) -> str | None:
    """Execute `nb` cell by cell within the limits, emitting figures files as they appear; returns why it stopped."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    client = _client_class()(nb, timeout=max(1, int(seconds)), kernel_name=kernel, allow_errors=True,
                             resources={"metadata": {"path": str(cwd)}})
    client.cap = output_bytes
    figures = Path(os.environ[DIR_ENV])

    def send_figures(gid: str | None):
        """The figures file of the recorder cell that just ran (`gid`): the one report of that check. A file any
        other cell wrote, or one left before this cell ran (removed then), is never sent."""
        f = figures / f"{gid}.json"
        if gid is None or not f.is_file():
            return
        try:
            emit(figures=gid, text=f.read_text()[:3_000_000])
        except (OSError, UnicodeDecodeError) as e:
            emit(figures=gid, text="", error=str(e))

    deadline, stopped = time.monotonic() + seconds, None
    async with client.async_setup_kernel(stdout=log, stderr=log):
        count = 0
        for i, cell in enumerate(nb.cells):
            left = deadline - time.monotonic()
            if left <= 0:
                stopped = f"the time limit ({seconds:.0f} s)"
                break
            client.timeout = max(1, int(left))
            gid = recorder_of(cell)
            if gid is not None:
                (figures / f"{gid}.json").unlink(missing_ok=True)
            try:
                if cell.cell_type == "code":
                    count += 1
                await client.async_execute_cell(cell, i, execution_count=count)
            except CellTimeoutError:
                stopped = f"the time limit ({seconds:.0f} s)"
            except DeadKernelError:
                stopped = "the memory limit (the kernel was killed)" if oom_killed() else "the kernel died"
            send_figures(gid)
            if getattr(client, "over", False):
                stopped = f"the output limit ({output_bytes / 1e6:g} MB)"
            stopped = stopped or scratch_full(scratch) or (
                f"the process limit ({pids_reached()})" if pids_reached() else None)
            if stopped:
                break
        emit(stopped=stopped)
        emit(notebook=_trimmed(nb, output_bytes))
        sys.stdout.flush()
    return stopped


def recorder_of(cell) -> str | None:
    """The grade id of a check cell the grader made a recorder of (nmtkit.course.instructor.scoring.recorder), else
    None. The notebook this driver runs is the grader's, read-only: its cells' metadata are the grader's."""
    gid = (cell.get("metadata", {}).get("nbgrader") or {}).get("grade_id")
    return gid if cell.cell_type == "code" and isinstance(gid, str) and "_nmtkit_record(" in cell.source else None


def _trimmed(nb, output_bytes: int) -> dict:
    """The executed notebook, its outputs cut to what the output limit allows (kept for the instructor to read)."""
    import nbformat
    budget = output_bytes
    for cell in nb.cells:
        kept = []
        for o in cell.get("outputs", []):
            size = len(json.dumps(o, default=str))
            if size <= budget:
                kept.append(o)
                budget -= size
        if cell.cell_type == "code":
            cell.outputs = kept
    return json.loads(nbformat.writes(nb))


def main(argv=None) -> int:
    import nbformat
    p = argparse.ArgumentParser(prog="python -m nmtkit.course.sandbox")
    p.add_argument("notebook")
    p.add_argument("--time", type=float, default=900)
    p.add_argument("--output-bytes", type=int, default=5_000_000)
    p.add_argument("--scratch", default=None, help="the scratch file system to watch (the container's tmpfs)")
    p.add_argument("--kernel", default="nmtkit")
    p.add_argument("--workspace-from", default=None,
                   help="a read-only workspace to copy into the scratch: the notebook's NMTKIT_WORKDIR, writable")
    p.add_argument("--token-stdin", action="store_true",
                   help="read the grader's token from standard input (first line); every report line carries it")
    a = p.parse_args(argv)
    if a.token_stdin:
        read_token()
        seal()
    nb = nbformat.read(a.notebook, as_version=4)
    scratch = Path(a.scratch) if a.scratch else None
    cwd = Path(os.environ.get("TMPDIR") or "/tmp") / "nmtkit-graded"
    cwd.mkdir(parents=True, exist_ok=True)
    Path(os.environ[DIR_ENV]).mkdir(parents=True, exist_ok=True)
    if a.workspace_from:  # the notebooks write beside their runs (the analysis' report); the original stays as it was
        ws = cwd.parent / "ws"
        shutil.copytree(a.workspace_from, ws, symlinks=True)
        os.environ["NMTKIT_WORKDIR"] = str(ws)
    with open(cwd / "kernel.log", "wb") as log:  # the kernel's own chatter; its cells' output is in the notebook
        asyncio.run(run(nb, a.time, a.output_bytes, scratch, a.kernel, cwd, log))
    return 0


if __name__ == "__main__":
    sys.exit(main())
