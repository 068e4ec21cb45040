"""Timings of the notebook-driven Horovod cluster: engine start, preflight, rendezvous + hvd.init, a re-launch on the
same engines, and the step time of 2 ranks vs 1 rank on the same engines.

    .venv/bin/python bench/cluster_horovod.py [--steps 40] [--workdir /tmp/nmtkit-bench-cluster]

Prints figures only (no assertions); on a shared 2-core machine they vary with the load.
"""
import argparse
import statistics
import time
from pathlib import Path

import nmtkit  # noqa: F401  (Keras 2 before TensorFlow)
from nmtkit import config
from nmtkit.cluster import Cluster
from nmtkit.cluster.remote import rank_check
from nmtkit.data.prepare import prepare
from nmtkit.files import read_jsonl


def median_step_ms(run: Path, rank: int, skip: int = 5) -> float:
    times = [r["step_time"] for r in read_jsonl(run / "ranks" / f"rank{rank}.jsonl")][skip:]
    return 1000 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--workdir", default="/tmp/nmtkit-bench-cluster")
    args = ap.parse_args()
    work = Path(args.workdir)
    cfg = config.load("tiny", {"data.dir": str(work / "data"), "train.steps": args.steps, "train.log_every": 10,
                               "train.ckpt_every": 0, "eval.every": 0, "eval.dev_sentences": 10,
                               "eval.test_sentences": 10, "eval.beam_size": 1, "monitor.enabled": False})
    prepare(cfg, progress=False)
    t = time.time()
    cluster = Cluster(cfg, engines=2, profile_dir=work / "ipython").start()
    print(f"cluster start (controller + 2 engines registered): {time.time() - t:.1f} s")
    try:
        t = time.time()
        cluster.preflight(cfg.data.dir)
        print(f"preflight (imports TensorFlow + Horovod on the engines): {time.time() - t:.1f} s")
        for i in range(2):
            t = time.time()
            cluster.submit(rank_check).wait(timeout=300)
            print(f"launch {i + 1}: rendezvous + hvd.init() + one allreduce: {time.time() - t:.2f} s")
        for ranks in (1, 2):
            run = work / f"run{ranks}-{int(time.time())}"
            t = time.time()
            cluster.launch(cfg, run, preflight=False, ranks=ranks).wait(timeout=1200)
            per_rank = [median_step_ms(run, r) for r in range(ranks)]
            print(f"{ranks} rank(s), tiny profile, {args.steps} steps: median step "
                  f"{', '.join(f'{m:.0f}' for m in per_rank)} ms (rank order); whole launch {time.time() - t:.0f} s")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
