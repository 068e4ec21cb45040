"""A training step's memory on this CPU against the kit's projection (nmtkit.model.memory), and the loss's peak.

    .venv/bin/python bench/memory.py [--shape base|small] [--batches 32,64,128] [--loss-only | --step-only]
    .venv/bin/python bench/memory.py --micro [--shape small] [--batches 64] [--splits 1,2]

1. The step: peak resident memory (ru_maxrss) of one process per batch size, after two training steps at the
   shape (float32, 56-token sentences + EOS, synthetic ids, the profile's vocabulary), fitted by a line over the
   batch sizes: its slope is the measured bytes per sentence, printed against the projection's per-sentence
   figure (and their ratio). Constant costs (TensorFlow, the traced graph, the weights) fall into the intercept.
2. The loss: the peak of the label-smoothed loss's forward and gradient on [256, 57, 32768] float32 logits, the
   kit's loss against the log-softmax formula it replaced (each in a fresh process), in multiples of one tensor.
3. Micro-batches (--micro): the steady step's memory increment above the process's baseline after the build
   (VmHWM during the step less VmRSS before it) for the same sentences in 1, 2, ... micro-batches: micro-batches
   that run one after the other hold one micro-batch's activations at a time.
Figures go to bench/README.md with the machine and the date.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = {"base": {}, "small": {"model.d_model": 256, "model.encoder_layers": 3, "model.decoder_layers": 3,
                                "model.num_heads": 4, "model.d_ff": 1024}}


def _rss() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0


def _reset_peak() -> bool:
    """Start the process's peak resident memory (VmHWM) afresh (Linux >= 4.0): the steady step's peak, without the
    first step's tracing. False where it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _hwm() -> float:
    """VmHWM: the peak resident memory since the last _reset_peak()."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return float(line.split()[1]) * 1024.0
    return _rss()


def _vmrss() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return float(line.split()[1]) * 1024.0
    return _rss()


def step_worker(shape: str, batch: int, accum: int = 1) -> dict:
    import nmtkit  # noqa: F401  Keras 2 before TensorFlow
    from nmtkit import config
    from nmtkit.keras2 import import_tf
    from nmtkit.training.dist import Single, set_threads
    from nmtkit.training.trainer import Trainer
    tf = import_tf()
    cfg = config.load("wmt16-base", {"train.precision": "float32", "data.batch_sentences": batch,
                                     "train.grad_accum": accum, **SHAPES[shape]})
    vocab, length = cfg.data.vocab_size, cfg.data.max_tokens + 1
    dist = Single()
    set_threads(dist)
    trainer = Trainer(cfg, vocab, dist)
    trainer.sync_variables()
    g = tf.random.Generator.from_seed(1)
    src = g.uniform([batch, length], 4, vocab, dtype=tf.int32)
    tgt = tf.concat([tf.fill([batch, 1], 2), g.uniform([batch, length], 4, vocab, dtype=tf.int32)], 1)
    n = batch // accum
    micro = [(src[i * n:(i + 1) * n], tgt[i * n:(i + 1) * n]) for i in range(accum)]
    trainer.run_step(micro).numpy()  # traced; its peak is left out where the kernel lets us
    steady = _reset_peak()
    baseline = _vmrss()
    stats = trainer.run_step(micro)
    stats.numpy()
    peak = _hwm() if steady else _rss()
    return {"shape": shape, "batch": batch, "accum": accum, "peak_rss": peak, "steady": steady,
            "increment": peak - baseline, "vocab": vocab, "length": length}


def loss_worker(which: str, b: int, t: int, v: int) -> dict:
    import nmtkit  # noqa: F401
    from nmtkit.keras2 import import_tf
    from nmtkit.model.transformer import smoothed_loss
    tf = import_tf()
    sys.path.insert(0, str(ROOT / "tests"))
    from test_loss import log_softmax_loss  # the formula before, kept by the test as its reference
    fn = smoothed_loss if which == "kit" else log_softmax_loss
    logits = tf.Variable(tf.zeros([b, t, v]))
    labels = tf.ones([b, t], tf.int32)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            s, _ = fn(logits.read_value(), labels, 0.1)
        return s + tf.reduce_sum(tape.gradient(s, logits)[0, 0, :1])
    step.get_concrete_function()
    base = _rss()
    float(step())
    return {"loss": which, "tensor_bytes": b * t * v * 4, "peak_above_input": _rss() - base}


def _fresh(*args: str) -> dict:
    # TF_ENABLE_ONEDNN_OPTS=0: oneDNN (CPU only) keeps reordered copies whose size depends on the CPU's ISA
    # (bench/README.md); the GPU the projection is for has none, so the CPU stands in with TensorFlow's own kernels
    env = dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", TF_ENABLE_ONEDNN_OPTS="0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, __file__, *args], env=env, capture_output=True, text=True, timeout=3600)
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    if out.returncode or not lines:
        raise SystemExit(f"{' '.join(args)}: failed (exit {out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(lines[-1][7:])


def steps(shape: str, batches: list[int]) -> dict:
    import numpy as np

    from nmtkit import config
    from nmtkit.model.memory import project
    rows = [_fresh("--worker-step", shape, str(b)) for b in batches]
    for r in rows:
        print(f"  {shape} batch {r['batch']:>4}: peak RSS {r['peak_rss'] / 2**30:6.2f} GiB", flush=True)
    slope, intercept = np.polyfit([r["batch"] for r in rows], [r["peak_rss"] for r in rows], 1)
    cfg = config.load("wmt16-base", SHAPES[shape])
    est = project(cfg, rows[0]["vocab"], batches[-1], rows[0]["length"], "float32")
    ratio = slope / est.per_sentence
    print(f"{shape}: measured {slope / 2**20:.1f} MiB a sentence (intercept {intercept / 2**30:.2f} GiB), projected "
          f"{est.per_sentence / 2**20:.1f} MiB: measured / projected = {ratio:.2f}", flush=True)
    return {"shape": shape, "measured_per_sentence": slope, "projected_per_sentence": est.per_sentence, "ratio": ratio}


def micro_batches(shape: str, batch: int, splits: list[int]) -> dict:
    """{micro-batches: the steady step's increment above the baseline} for `batch` sentences split that many ways."""
    out = {}
    for k in splits:
        r = _fresh("--worker-step", shape, str(batch), str(k))
        out[k] = r["increment"]
        print(f"  {shape}: {k} x {batch // k}: step increment {r['increment'] / 2**20:8.1f} MiB above the baseline "
              f"(peak RSS {r['peak_rss'] / 2**30:.2f} GiB)", flush=True)
    for k in splits[1:]:
        print(f"{shape}: {k} x {batch // k} / 1 x {batch} = {out[k] / out[splits[0]]:.2f}", flush=True)
    return out


def losses(b: int = 256, t: int = 57, v: int = 32768) -> dict:
    out = {}
    for which in ("before", "kit"):
        r = _fresh("--worker-loss", which, str(b), str(t), str(v))
        out[which] = r["peak_above_input"] / r["tensor_bytes"]
        print(f"loss on [{b}, {t}, {v}] float32 logits ({r['tensor_bytes'] / 2**30:.2f} GiB a tensor), "
              f"{'log-softmax formula (before)' if which == 'before' else 'the kit (fused sparse CE)'}: peak "
              f"{r['peak_above_input'] / 2**30:.2f} GiB above the logits = {out[which]:.1f} tensors", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="base")
    ap.add_argument("--batches", default="32,64,128")
    ap.add_argument("--loss-only", action="store_true")
    ap.add_argument("--step-only", action="store_true")
    ap.add_argument("--micro", action="store_true", help="the step's increment for the batch in 1, 2, ... parts")
    ap.add_argument("--splits", default="1,2", help="--micro: micro-batch counts")
    ap.add_argument("--worker-step", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--worker-loss", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker_step:
        shape, *numbers = a.worker_step
        print("RESULT " + json.dumps(step_worker(shape, *map(int, numbers))), flush=True)
        return 0
    if a.micro:
        micro_batches(a.shape, int(a.batches.split(",")[0]), [int(k) for k in a.splits.split(",")])
        return 0
    if a.worker_loss:
        w, *dims = a.worker_loss
        print("RESULT " + json.dumps(loss_worker(w, *map(int, dims))), flush=True)
        return 0
    if not a.step_only:
        losses()
    if not a.loss_only:
        steps(a.shape, [int(b) for b in a.batches.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
