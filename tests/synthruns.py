"""Synthetic run directories whose properties are known by construction (tests/test_analysis.py and the
instructor's tests/instructor/test_analysis_verdicts.py). Each is written in the run-dir layout of nmtkit/runs.py:
scalars.jsonl, ranks/rank<R>.jsonl, monitor/<host>-rank<R>.jsonl, config.json, data_stats.json, run.json and,
given one, a real (small) TF checkpoint (the `checkpoint_dir` fixture of tests/conftest.py)."""
import math
import shutil
from pathlib import Path

import numpy as np

from nmtkit import config as config_mod
from nmtkit import runs
from nmtkit.data.stats import DataStats
from nmtkit.files import append_jsonl, atomic_write_json

T0 = 1_700_000_000.0
WARMUP, D_MODEL, LR_SCALE = 200, 128, 2.0


def lr_at(step):
    return LR_SCALE * D_MODEL ** -0.5 * min(step ** -0.5, step * WARMUP ** -1.5)


def synth_run(path: Path, *, steps=1000, ranks=1, hosts=("hostA",), overfit=False, ckpt=None, seed=0,
              net_mean=12.5e6, net_coupling=1.0, eval_every=50, torn=False):
    """Write a run. Returns the generating arrays so tests can compute the expected answers themselves."""
    rng = np.random.default_rng(seed)
    cfg = config_mod.load("tiny", {"train.steps": 1000, "train.warmup_steps": WARMUP, "train.lr_scale": LR_SCALE,
                                   "model.d_model": D_MODEL, "eval.every": eval_every})
    cfg.save(path / runs.CONFIG)
    atomic_write_json(path / runs.STATUS, {"status": "finished" if steps == 1000 else "running", "step": steps,
                                           "ranks": ranks})
    DataStats(files={"train.en": {"bytes": 1_500_000, "lines": 20_000},
                     "train.de": {"bytes": 1_700_000, "lines": 20_000},
                     "dev.en": {"bytes": 9_000, "lines": 100}}, train_examples=19_000, max_tokens=64
              ).save(path / runs.DATA_STATS)
    # Network: one sample per second; sample j covers (T0 + j - 1, T0 + j]. Step i ends at T0 + i - 0.5 and its
    # time depends on the traffic of its second (known correlation, tuned by net_coupling).
    net = net_mean * (1 + 0.5 * rng.uniform(-1, 1, steps + 1))
    step_time = 0.2 + net_coupling * 1e-8 * net[1:] + 0.02 * rng.standard_normal(steps)
    step_time = np.clip(step_time, 0.05, 0.45)
    for r in range(ranks):
        host = hosts[r % len(hosts)]
        for i in range(1, steps + 1):
            append_jsonl(runs.rank_log(path, r), {"step": i, "wall_time": T0 + i - 0.5, "step_time": step_time[i - 1],
                                                  "loss": 5.0, "tokens": 1000, "rank": r, "host": host})
    for h, host in enumerate(hosts):
        for j in range(1, steps + 1):
            append_jsonl(runs.monitor_log(path, host, h), {
                "time": T0 + j, "host": host, "rank": h, "n_gpus": 2, "cpu_percent": 50.0,
                "proc_cpu_percent": 90.0, "mem_used_mib": 1000.0,
                "gpu0_util": 95.0, "gpu1_util": 60.0 if j % 2 else 100.0,  # gpu1: mean 80, above 80% half the time
                "net_lo_sent_Bps": 100.0, "net_lo_recv_Bps": 100.0,
                "net_eth0_sent_Bps": net[j], "net_eth0_recv_Bps": net[j] * 0.9})
    # Scalars: train loss every 10 steps, evaluations every eval_every.
    def train_l(s):
        return 5 * math.exp(-s / 120) + 1.0
    gap = (lambda s: 0.1 + max(0.0, (s - 500) / 500)) if overfit else (lambda s: 0.1)
    for s in range(10, steps + 1, 10):
        for tag, v in (("train_loss", train_l(s)), ("learning_rate", lr_at(s))):
            append_jsonl(path / runs.SCALARS, {"step": s, "wall_time": T0 + s - 0.5, "tag": tag, "value": v})
        if s % eval_every == 0:
            for tag, v in (("eval_loss", train_l(s) + gap(s)), ("Eval_BLEU_Score", 30 * (1 - math.exp(-s / 150)))):
                append_jsonl(path / runs.SCALARS, {"step": s, "wall_time": T0 + s - 0.4, "tag": tag, "value": v})
    if torn:
        with open(path / runs.SCALARS, "a") as f:
            f.write('{"step": 99999, "wall_ti')
    if ckpt is not None:
        shutil.copytree(ckpt, path / runs.CHECKPOINTS)
    return {"net": net, "step_time": step_time}
