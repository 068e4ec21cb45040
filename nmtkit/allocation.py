"""When a run's allocation ends: the one place that asks (a Slurm job's time left, `squeue -o %L`, today).

A lone `nmtkit train` (or a notebook's `nk.train`) inside a `salloc`/`sbatch` allocation learns its end here from
the CLI or the notebook face; the cluster's Slurm launcher asks here for its engines' job and hands the ranks the
end in DEADLINE_ENV. The training loop receives a plain deadline (epoch seconds, or None) and knows no scheduler.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Callable

DEADLINE_ENV = "NMTKIT_DEADLINE"  # the allocation's end (epoch seconds) in a rank's environment


def parse_time_left(text: str) -> float | None:
    """Slurm's [days-]hours:minutes:seconds (or minutes:seconds) in seconds; None for UNLIMITED, NOT_SET, INVALID."""
    text = text.strip()
    days, _, clock = text.rpartition("-") if "-" in text else ("", "", text)
    try:
        parts = [int(p) for p in clock.split(":")]
        d = int(days) if days else 0
    except ValueError:
        return None
    if not 1 <= len(parts) <= 3:
        return None
    while len(parts) < 3:
        parts.insert(0, 0)
    h, m, s = parts
    return float(((d * 24 + h) * 60 + m) * 60 + s)


def _quiet(cmd: list[str]) -> str | None:
    """A command's stdout, or None when it is missing, fails or hangs (a lone run goes on without a deadline)."""
    if shutil.which(cmd[0]) is None:
        return None
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def job_end(job_id: str, ask: Callable[[list[str]], str | None] = _quiet) -> float | None:
    """The end (epoch seconds) of Slurm job `job_id` by squeue's time left; None without a limit or an answer.
    `ask` runs the command (the Slurm launcher's raises its ClusterError line instead of answering None)."""
    out = ask(["squeue", "-h", "-j", str(job_id), "-o", "%L"])
    left = None if out is None else parse_time_left(out.strip() or "INVALID")
    return None if left is None else time.time() + left


def allocation_end(env: dict | None = None) -> float | None:
    """The end (epoch seconds) of the allocation this process runs in (SLURM_JOB_ID: `salloc`/`sbatch` running
    `nmtkit train` or Jupyter); None outside one, without a limit, or when squeue fails."""
    job = (os.environ if env is None else env).get("SLURM_JOB_ID")
    return job_end(job) if job else None


def rank_deadline(env: dict | None = None) -> float | None:
    """A rank's deadline, as its launcher put it in DEADLINE_ENV (None: no limit)."""
    value = (os.environ if env is None else env).get(DEADLINE_ENV)
    return float(value) if value else None
