"""The run directory: its names and the readers/writers of its JSON files, the one contract between training
(which writes) and analysis (which reads). Importable without TensorFlow.

    <run>/config.json            the Config the run used (nmtkit.config)
    <run>/data_stats.json        copied from the data directory at the start of training
    <run>/events.out.tfevents.*  TensorBoard scalars (rank 0): see TAGS
    <run>/scalars.jsonl          the same scalars, one {"step","wall_time","tag","value"} per line
    <run>/ranks/rank<R>.jsonl    every rank: {"step","wall_time","step_time","loss","tokens","rank","host"} per step
    <run>/monitor/<host>-rank<R>.jsonl   sampler records (nmtkit.monitor)
    <run>/checkpoints/           tf.train.CheckpointManager files (rank 0); best/ holds the best by dev BLEU
    <run>/translations/          decoded dev/test output
    <run>/run.json               status: {"status": "running"|"finished"|"stopped"|"failed", "step", "ranks", ...}
"""
from __future__ import annotations

import os
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
