"""What the kit's stateless dropout (nmtkit.model.transformer.Dropout: masks from a seed, exact resume) costs a
training step against Keras' own tf.keras.layers.Dropout (stateful random op), at the tiny and small shapes.

    python bench/dropout.py [--quick] [--shapes tiny,small] [--pairs 60]

Both run the kit's Trainer step (one tf.function: forward, backward, Adam) on the same fixed batch of random ids
(--batch x --length per side), dropout 0.1, fp32, on --threads TensorFlow threads (1: the work itself, not how
a busy machine schedules a pool). This host's speed drifts by tens of percent within seconds, so the two are timed
in adjacent pairs of single steps (stateless then Keras, then Keras then stateless, ...), each pair's ratio taken;
printed per shape, for wall time and for the process's CPU time: the median step time of each and the median and
quartiles of the pair ratios.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the kit of this checkout

import nmtkit  # noqa: F401  (Keras 2 API before TensorFlow)
from nmtkit import config
from nmtkit.keras2 import import_tf
from nmtkit.model import transformer
from nmtkit.training.trainer import Trainer

tf = import_tf()

SHAPES = {"tiny": (2, 128, 4, 512), "small": (3, 256, 4, 1024)}  # layers, d_model, heads, d_ff (throughput.py's)
VOCAB = 8000


class KerasDropout(tf.keras.layers.Dropout):
    """Keras' layer behind the kit's call signature (the seed is ignored)."""

    def __init__(self, rate, **kw):
        super().__init__(rate, **kw)
        self.index = 0

    def call(self, x, seed=None, training=False):
        return super().call(x, training=training)


def trainer(shape: str, keras: bool) -> Trainer:
    layers, d, heads, ff = SHAPES[shape]
    cfg = config.profile("tiny").with_overrides({
        "model.encoder_layers": layers, "model.decoder_layers": layers, "model.d_model": d,
        "model.num_heads": heads, "model.d_ff": ff, "model.dropout": 0.1, "train.precision": "float32"})
    kit = transformer.Dropout
    transformer.Dropout = KerasDropout if keras else kit
    try:
        return Trainer(cfg, VOCAB)
    finally:
        transformer.Dropout = kit


def step_ms(t: Trainer, batch) -> tuple[float, float]:
    """(wall, process CPU) milliseconds of one step."""
    t0, c0 = time.perf_counter(), time.process_time()
    t.run_step([batch])[0].numpy()
    return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="tiny,small")
    ap.add_argument("--pairs", type=int, default=60)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--length", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="tiny shape, 6 pairs")
    a = ap.parse_args(argv)
    shapes, pairs = (["tiny"], 6) if a.quick else (a.shapes.split(","), a.pairs)
    tf.config.threading.set_intra_op_parallelism_threads(a.threads)
    tf.config.threading.set_inter_op_parallelism_threads(a.threads)
    def ids(n):
        return tf.random.stateless_uniform([a.batch, n], [0, n], 4, VOCAB, tf.int32)
    batch = (ids(a.length), ids(a.length + 1))
    rows = []
    for shape in shapes:
        kit, keras = trainer(shape, keras=False), trainer(shape, keras=True)
        for _ in range(3):  # tracing and warm-up
            step_ms(kit, batch), step_ms(keras, batch)
        kit_ms, keras_ms = [], []
        for i in range(pairs):
            if i % 2 == 0:
                kit_ms.append(step_ms(kit, batch)), keras_ms.append(step_ms(keras, batch))
            else:
                keras_ms.append(step_ms(keras, batch)), kit_ms.append(step_ms(kit, batch))
        for i, clock in enumerate(("wall", "CPU")):
            k, ke = [m[i] for m in kit_ms], [m[i] for m in keras_ms]
            q1, med, q3 = statistics.quantiles([x / y for x, y in zip(k, ke)], n=4)
            rows.append((shape, clock, statistics.median(k), statistics.median(ke), med, q1, q3))
        print(f"{shape}: {pairs} pairs done", flush=True)
    print("\n| shape | clock | stateless ms/step | Keras Dropout ms/step | ratio, median of pairs (quartiles) |")
    for shape, clock, k, ke, med, q1, q3 in rows:
        print(f"| {shape} | {clock} | {k:.1f} | {ke:.1f} | {med:.3f} ({q1:.3f}-{q3:.3f}) |")


if __name__ == "__main__":
    main()
