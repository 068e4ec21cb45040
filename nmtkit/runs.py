"""The run directory: its names and the readers/writers of its JSON files, the one contract between training
(which writes) and analysis (which reads). Importable without TensorFlow.

    <run>/config.json            the Config the run used (nmtkit.config)
    <run>/data_stats.json        copied from the data directory at the start of training
    <run>/events.out.tfevents.*  TensorBoard scalars (rank 0): see TAGS
    <run>/scalars.jsonl          the same scalars, one {"step","wall_time","tag","value"} per line
    <run>/ranks/rank<R>.jsonl    every rank: {"step","wall_time","step_time","loss","tokens","rank","host"} per step
    <run>/monitor/<host>-rank<R>.jsonl   sampler records (nmtkit.monitor)
    <run>/checkpoints/           tf.train.CheckpointManager files (rank 0); best/ holds the best by dev BLEU
    <run>/checkpoints/data/rank<R>/   every rank's input position (tf.data iterator checkpoint data-<step>,
                                 saved with each model checkpoint; nmtkit.train.checkpoints.DataPosition)
    <run>/translations/          decoded dev/test output
    <run>/run.json               status: {"status": "running"|"finished"|"stopped"|"failed", "step", "ranks", ...}
    <run>/.lock                  one job per run directory: flock + owner {"pid","host","since","token"}; nmtkit.runlock
    <run>/nmtkit-error.log       the `nmtkit` command's tracebacks (the terminal gets one line naming this file)
"""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from nmtkit.files import atomic_write_json, read_json

CONFIG = "config.json"
DATA_STATS = "data_stats.json"
SCALARS = "scalars.jsonl"
RANKS_DIR = "ranks"
MONITOR_DIR = "monitor"
CHECKPOINTS = "checkpoints"
BEST = "checkpoints/best"
TRANSLATIONS = "translations"
STATUS = "run.json"
BEST_JSON = "checkpoints/best/best.json"
STATES = ("running", "finished", "stopped", "failed")

# The TensorBoard tags the homework's students know, plus ours.
TAGS = ("train_loss", "eval_loss", "Eval_BLEU_Score", "eval_chrF", "learning_rate", "global_step/sec",
        "tokens_per_sec", "step_time")


def rank_log(run: str | Path, rank: int) -> Path:
    return Path(run) / RANKS_DIR / f"rank{rank}.jsonl"


def monitor_log(run: str | Path, host: str, rank: int) -> Path:
    return Path(run) / MONITOR_DIR / f"{host}-rank{rank}.jsonl"


class RunDirError(ValueError):
    """A run directory's file is unreadable; the message names the file."""


def read_status(run: str | Path) -> dict:
    """run.json as a dict ({} when the run has none yet)."""
    return read_json(Path(run) / STATUS, RunDirError, missing={}, hint="it is the run's status, written by training")


def update_status(run: str | Path, **fields) -> dict:
    """Merge `fields` into run.json (atomically) and stamp `updated`; returns the new status."""
    path = Path(run) / STATUS
    try:
        state = read_status(run)
    except RunDirError:  # a torn or foreign run.json is replaced, not trusted
        state = {}
    state.update(fields, updated=time.time())
    atomic_write_json(path, state)
    return state


def read_best(run: str | Path) -> dict | None:
    """checkpoints/best/best.json: {"step", "bleu", "chrf"} of the best dev BLEU so far, or None."""
    return read_json(Path(run) / BEST_JSON, RunDirError, missing=None)


def write_best(run: str | Path, *, step: int, bleu: float, chrf: float) -> None:
    atomic_write_json(Path(run) / BEST_JSON, {"step": step, "bleu": bleu, "chrf": chrf})


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


def live_status(run: str | Path) -> dict:
    """run.json, except that "running" whose pid on this host is gone reads "failed" with the reason (a run
    killed outright cannot write its own end). A pid on another host cannot be checked from here: left as is."""
    state = dict(read_status(run))
    pid, host = state.get("pid"), state.get("host")
    if state.get("status") == "running" and isinstance(pid, int) and host in (socket.gethostname(), None) \
            and not _pid_alive(pid):
        state.update(status="failed", error=f"the training process (pid {pid} on {host}) died without a word "
                                            f"(killed, or out of memory); train again to resume")
    return state


def tail_records(path: str | Path, max_bytes: int = 8192) -> list[dict]:
    """The last whole JSON lines of a (possibly huge, possibly growing) JSONL file, without reading all of it."""
    import json
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - max_bytes))
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        return []
    if size > max_bytes:
        lines = lines[1:]  # the first one is cut
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # a torn last line or an empty one
    return out


def rank_progress(run: str | Path) -> list[dict]:
    """The latest step record of every rank (from ranks/rank<R>.jsonl), in rank order: what a live panel shows
    for a run started anywhere (the CLI, another kernel), read from its files alone."""
    rows = []
    for path in sorted((Path(run) / RANKS_DIR).glob("rank*.jsonl"), key=lambda p: int(p.stem[4:] or 0)):
        recs = tail_records(path)
        if recs:
            rows.append(recs[-1])
    return rows


def load_config(run: str | Path):
    """The Config a run started with (its config.json)."""
    from nmtkit.config import Config
    return Config.load_json(Path(run) / CONFIG)


def workspace() -> Path:
    """Where notebooks keep data and runs: $NMTKIT_WORKDIR (the course runner sets it), else ./workspace.

    Notebooks run with cwd = notebooks/, so by default they share notebooks/workspace.
    """
    ws = Path(os.environ.get("NMTKIT_WORKDIR") or "workspace").resolve()
    ws.mkdir(parents=True, exist_ok=True)
    return ws
