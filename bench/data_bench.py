"""Data benchmarks: corpus generation, prepare() for the tiny profile, and input-pipeline throughput.

    .venv/bin/python bench/data_bench.py [--steps 300]

Prints figures; asserts nothing (timings depend on the machine and on what else runs on it).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import nmtkit  # noqa: F401  (Keras 2 API before TensorFlow)
from nmtkit import config
from nmtkit.data import synthetic
from nmtkit.data.pipeline import make_dataset
from nmtkit.data.prepare import prepare


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=300, help="batches to time per pipeline mode")
    args = ap.parse_args()
    cfg = config.load("tiny")

    t0 = time.perf_counter()
    pairs = synthetic.generate(50_000, 1_000, 1_000, seed=cfg.data.seed)
    gen = time.perf_counter() - t0
    train = pairs["train"]
    words = [len(en.split()) for en, _ in train] + [len(de.split()) for _, de in train]
    types = {w for en, de in train for w in en.split() + de.split()}
    print(f"synthetic corpus 50k/1k/1k: generated in {gen:.2f} s; {synthetic.lemmas()} lemmas, "
          f"{len(types):,} word types (en+de), mean sentence length "
          f"{statistics.mean(words[:len(train)]):.1f} en / {statistics.mean(words[len(train):]):.1f} de words")

    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        stats = prepare(cfg, data_dir=d, progress=False)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        prepare(cfg, data_dir=d, progress=False)
        again = time.perf_counter() - t0
        print(f"prepare(tiny): {first:.2f} s from scratch, {again:.3f} s when already done "
              f"({stats.train_lines:,} training pairs, BPE {stats.vocab_size:,}, mean "
              f"{stats.tokens['train']['en_bpe'] / stats.train_lines:.1f} en / "
              f"{stats.tokens['train']['de_bpe'] / stats.train_lines:.1f} de BPE tokens per sentence)")

        modes = {"sentences (batch_sentences=64)": cfg.data,
                 "tokens (batch_tokens=2048)": cfg.with_overrides({"data.batch_tokens": 2048}).data}
        for name, dc in modes.items():
            ds = make_dataset(d, "train", dc, seed=0)
            it = iter(ds)
            for _ in range(20):  # warm up: tracing, buffer fill
                next(it)
            n = tokens = 0
            t0 = time.perf_counter()
            for _ in range(args.steps):
                src, tgt = next(it)
                n += int(src.shape[0])
                tokens += int((src != 0).numpy().sum() + (tgt != 0).numpy().sum())
            dt = time.perf_counter() - t0
            print(f"pipeline, {name}: {n / dt:,.0f} examples/s, {tokens / dt:,.0f} tokens/s "
                  f"({args.steps} batches, mean batch {n / args.steps:.1f} pairs)")


if __name__ == "__main__":
    main()
