"""The GPU-shaped switch (tests/gpushape) across processes: two engines of a Cluster, each listing 2 Tesla T4s, pin
one GPU each, carry the NCCL settings and train with an allreduce per gradient (over Gloo: the tensors are on the
CPU); `bench/gpu.py --shape tiny` runs its cases on the listed GPU and reports its memory as not measured."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nmtkit import config

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "gpushape"))
import gpushape_switch as switch  # noqa: E402

pytestmark = [pytest.mark.long, pytest.mark.slow,  # the long tier (tests/conftest.py): make test leaves it out
              pytest.mark.skipif(not importlib.util.find_spec("horovod"), reason="Horovod is not installed")]


def shaped_environment(monkeypatch, gpus: int, record: Path) -> None:
    """This process's environment, which the processes it starts inherit: GPU-shaped (this one already runs)."""
    env = switch.environ(gpus, record)
    for key in (switch.SWITCH, switch.RECORD, "PYTHONPATH", "TF_USE_LEGACY_KERAS"):
        monkeypatch.setenv(key, env[key])


def test_two_gpu_shaped_ranks_pin_a_gpu_each_carry_nccl_settings_and_train(tmp_path_factory, monkeypatch):
    from test_cluster_train import TINY

    from nmtkit.cluster import Cluster
    from nmtkit.cluster.remote import rank_check
    from nmtkit.data.prepare import prepare
    from nmtkit.files import read_jsonl
    from nmtkit.training.dist import thread_counts
    tmp = tmp_path_factory.mktemp("ranks")
    cfg = config.load("tiny", dict(TINY, **{"data.dir": str(tmp / "data"), "train.steps": 4, "train.log_every": 1,
                                            "train.ckpt_every": 0, "eval.at_end": False}))
    prepare(cfg, progress=False)
    record = tmp / "calls.jsonl"
    shaped_environment(monkeypatch, 2, record)
    # what a GPU VM's driver may set for NCCL: every rank must get it
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    cluster = Cluster(engines=2, profile_dir=tmp / "ipython" / "profile_nmtkit").start()
    try:
        run = tmp / "run"
        results = cluster.launch(cfg, run).wait(timeout=600)  # preflight first: its facts choose NCCL's settings
        checks = cluster.submit(rank_check).wait(timeout=180)
    finally:
        cluster.stop()
    assert [f["gpus"] for f in sorted(cluster.facts, key=lambda f: f["rank"])] == [2, 2]
    assert all(f["nccl_built"] and f["tf_cuda"] == "CUDA build" for f in cluster.facts)
    summaries = [r.value for r in results]
    assert all(s["status"] == "finished" and s["step"] == 4 and s["ranks"] == 2 for s in summaries)
    assert summaries[0]["weights_checksum"] == summaries[1]["weights_checksum"]
    status = json.loads((run / "run.json").read_text())
    assert "an allreduce per gradient via NCCL" in status["dist"], status["dist"]
    assert status["precision"] == "mixed_float16" and status["device_memory_gib"] == 15.0
    for rank in (0, 1):
        losses = [r["loss"] for r in read_jsonl(run / "ranks" / f"rank{rank}.jsonl")]
        assert len(losses) == 4 and all(math.isfinite(x) for x in losses) and losses[-1] < losses[0], losses
    pins = {}
    for c in sorted(checks, key=lambda c: c.rank):
        v = c.value
        env = v["env"]
        assert env.get("HOROVOD_GPU_OPERATIONS") == "NCCL" and "HOROVOD_CYCLE_TIME" not in env, env
        assert env.get("NCCL_DEBUG") == "INFO" and env.get("NCCL_P2P_DISABLE") == "1", env
        assert v["pinned"]["gpus"] == 2 and v["pinned"]["device"] == c.rank
        assert v["gpus"] == [f"/physical_device:GPU:{c.rank}"]  # its own GPU, the other hidden
        # a GPU rank's pools (local engines: the launcher's TF_NUM_* settings, which TensorFlow reads itself)
        assert v["pinned"]["threads"] == thread_counts(len(os.sched_getaffinity(0)), 2, v["env"], gpu=True)
        pins[v["pid"]] = f"/physical_device:GPU:{c.rank}"
    # each engine pinned its GPU and grew its memory through TensorFlow's config, recorded instead of made
    calls = switch.calls(record)
    for pid, gpu in pins.items():
        mine = [c for c in calls if c["pid"] == pid]
        assert mine and all(c["devices"] == [gpu] for c in mine if c["call"] == "set_visible_devices"), mine
        assert {(c["device"], c["enable"]) for c in mine if c["call"] == "set_memory_growth"} == {(gpu, True)}


def test_bench_gpu_runs_its_cases_on_the_listed_gpu_and_says_memory_was_not_measured(tmp_path):
    env = dict(switch.environ(1, tmp_path / "calls.jsonl"), TF_CPP_MIN_LOG_LEVEL="2")
    p = subprocess.run([sys.executable, str(HERE.parent / "bench" / "gpu.py"), "--shape", "tiny", "--steps", "2",
                        "--warmup", "1", "--batch", "4", "--out", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=1200)
    data = json.loads((tmp_path / "gpu-report.json").read_text())
    assert data["ok"], p.stdout[-3000:] + p.stderr[-3000:]
    assert p.returncode == 0, p.stdout[-3000:]
    assert [c["name"] for c in data["cases"]] == ["one process", "one process, XLA", "one Horovod rank",
                                                  "one Horovod rank, XLA asked (refused)"]
    results = {c["name"]: c["results"][0] for c in data["cases"]}
    for r in results.values():
        assert r["precision"] == "mixed_float16" and r["gpu_mem_gb"] is None and r["loss_scale"] is not None
        assert r["peak_source"] == "T4 fp16 tensor cores, spec sheet"  # the card's table entry, not a CPU's matmul
    assert [results[n]["xla"] for n in results] == [False, True, False, False]  # XLA on a GPU, never under Horovod
    assert p.stdout.count("peak GPU mem not measured") == 4, p.stdout[-3000:]
    assert data["facts"]["gpus"][0]["name"] == "Tesla T4"
    assert len({c["pid"] for c in switch.calls(tmp_path / "calls.jsonl")}) >= 4  # every case's process was shaped
