"""What the sampler costs a training step: a busy TensorFlow matmul loop with and without nmtkit.monitor.Sampler.

    .venv/bin/python bench/monitor_overhead.py [--interval 1.0] [--rounds 6] [--block-seconds 5] [--size 768]

Two measurements, in one run:
1. direct: the CPU time of one sample (psutil + NVML + a JSONL line + TensorBoard), divided by the interval, is the
   share of one core the thread takes;
2. end to end: blocks of matmul steps alternate without / with the sampler running (ABAB..., so machine-load drift
   hits both alike); the ratio of the median step times is the slowdown a training step sees.
The target is <= 1% at the default 1 s interval.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import nmtkit  # noqa: F401  (Keras 2 API before TensorFlow)
from nmtkit.keras2 import import_tf
from nmtkit.monitor import Sampler


def sample_cost(tmp: Path, n: int = 200) -> float:
    """Seconds of this process's CPU time per sample (thread CPU time: what it takes from training)."""
    s = Sampler(tmp / "cost.jsonl", interval=3600, tb_dir=tmp / "tb-cost").start()  # the thread stays asleep
    s.tick()  # warm-up: first TensorBoard write opens the file
    t0 = time.thread_time()
    for _ in range(n):
        s.tick()
    cost = (time.thread_time() - t0) / n
    s.stop()
    return cost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=6, help="pairs of (without, with) blocks")
    ap.add_argument("--block-seconds", type=float, default=5.0)
    ap.add_argument("--size", type=int, default=768, help="matrix size of the busy loop")
    args = ap.parse_args()
    tf = import_tf()

    a = tf.random.normal((args.size, args.size))

    @tf.function
    def step(x):
        for _ in range(4):
            x = tf.tanh(tf.matmul(x, a) / args.size ** 0.5)
        return tf.reduce_sum(x)

    x = tf.random.normal((args.size, args.size))
    step(x).numpy()  # trace

    def block(seconds: float) -> list[float]:
        times, end = [], time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            step(x).numpy()
            times.append(time.perf_counter() - t0)
        return times

    block(2.0)  # warm-up
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cost = sample_cost(tmp)
        without, with_ = [], []
        for r in range(args.rounds):
            without += block(args.block_seconds)
            with Sampler(tmp / f"run{r}.jsonl", interval=args.interval, tb_dir=tmp / "tb") as s:
                with_ += block(args.block_seconds)
            samples = s.samples
    m0, m1 = statistics.median(without), statistics.median(with_)
    print(f"sampler: one sample costs {cost * 1e3:.2f} ms of CPU -> {cost / args.interval:.3%} of one core "
          f"at a {args.interval:g} s interval")
    print(f"busy loop ({args.size}x{args.size} matmuls): median step {m0 * 1e3:.2f} ms without the sampler "
          f"({len(without)} steps), {m1 * 1e3:.2f} ms with it ({len(with_)} steps, {samples} samples in the last "
          "block)")
    print(f"step-time ratio with/without: {m1 / m0:.4f} ({(m1 / m0 - 1):+.2%}); target <= +1%")


if __name__ == "__main__":
    main()
