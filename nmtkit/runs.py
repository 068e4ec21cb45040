"""The layout of a run directory: the one contract between training (which writes) and analysis (which reads).

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

from pathlib import Path

CONFIG = "config.json"
DATA_STATS = "data_stats.json"
SCALARS = "scalars.jsonl"
RANKS_DIR = "ranks"
MONITOR_DIR = "monitor"
CHECKPOINTS = "checkpoints"
BEST = "checkpoints/best"
TRANSLATIONS = "translations"
STATUS = "run.json"

# The TensorBoard tags the homework's students know, plus ours.
TAGS = ("train_loss", "eval_loss", "Eval_BLEU_Score", "eval_chrF", "learning_rate", "global_step/sec",
        "tokens_per_sec", "step_time")


def rank_log(run: str | Path, rank: int) -> Path:
    return Path(run) / RANKS_DIR / f"rank{rank}.jsonl"


def monitor_log(run: str | Path, host: str, rank: int) -> Path:
    return Path(run) / MONITOR_DIR / f"{host}-rank{rank}.jsonl"


def workspace() -> Path:
    """Where notebooks keep data and runs: $NMTKIT_WORKDIR (the course runner sets it), else ./workspace.

    Notebooks run with cwd = notebooks/, so by default they share notebooks/workspace.
    """
    import os
    ws = Path(os.environ.get("NMTKIT_WORKDIR") or "workspace").resolve()
    ws.mkdir(parents=True, exist_ok=True)
    return ws
