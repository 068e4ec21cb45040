"""Where a training step's time goes, by TensorFlow's profiler: per shape, the step split into input, host,
forward, backward and optimizer, and the op types that take the most time.

    python bench/step_ops.py [--shapes tiny,small,base] [--steps 10] [--precision float32] [--top 15]

The tiny profile's synthetic data, 2048-token batches (bench/throughput.py's set-up), the kit's own Trainer and
input pipeline. Warm-up steps (tracing) are left out; then `--steps` steps run under `tf.profiler.experimental`
and the trace (an XSpace protobuf, read with TensorFlow's own `xplane_pb2`) is summed by op. Wall figures:
input = waiting for the next batch, graph = the step's graph call until its result is on the host, host = the
rest of the loop. Op figures are the kernels' own times summed over the threads that ran them (two threads run
ops side by side on a 2-core host, so they add up to more than the wall time): forward = ops in the model's
name scope, backward = ops under `gradient_tape/` and the written gradients (nmtkit.model.layers, no scope),
loss = the loss's forward, optimizer = Adam's, other = the rest. Figures depend on the host; compare shares and ratios.
"""
from __future__ import annotations

import argparse
import collections
import glob
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the kit of this checkout

import nmtkit  # noqa: F401  (Keras 2 API before TensorFlow)
from nmtkit import config
from nmtkit.data.bpe import Tokenizer
from nmtkit.data.pipeline import make_dataset
from nmtkit.data.prepare import prepare
from nmtkit.keras2 import import_tf
from nmtkit.training.dist import Single, set_threads

tf = import_tf()

SHAPES = {"base": (6, 512, 8, 2048), "small": (3, 256, 4, 1024), "tiny": (2, 128, 4, 512)}
WRAPPERS = ("Process", "Run", "__inference", "ExecutorState", "EagerExecute", "EagerLocalExecute")


def category(name: str) -> str:
    scope = name.split(":")[0]
    if "Adam" in name or scope.startswith(("Adam", "FusedAdam")):
        return "optimizer"
    if scope.startswith("loss/"):
        return "loss"  # nmtkit.model.transformer.smoothed_loss's forward
    if scope.startswith("gradient_tape/") or "/" not in scope:
        return "backward"  # a written gradient (tf.custom_gradient) runs outside any name scope
    if scope.startswith("transformer/"):
        return "forward"
    return "other"


def op_times(logdir: str, steps: int) -> tuple[collections.Counter, collections.Counter, collections.Counter]:
    """(ms per step by op type, by category, op count per step by type) from the profiler's trace."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    space = xplane_pb2.XSpace()
    space.ParseFromString(Path(glob.glob(f"{logdir}/plugins/profile/*/*.xplane.pb")[0]).read_bytes())
    by_type, by_cat, count = collections.Counter(), collections.Counter(), collections.Counter()
    for plane in space.planes:
        names = plane.event_metadata
        for line in plane.lines:
            if not line.name.startswith("tf_Compute") and "Eigen" not in line.name:
                continue
            for ev in line.events:
                name = names[ev.metadata_id].name
                if ":" not in name or name.split(":")[0].strip().startswith(WRAPPERS):
                    continue
                ms = ev.duration_ps / 1e9 / steps
                op = name.rsplit(":", 1)[1]
                by_type[op] += ms
                by_cat[category(name)] += ms
                count[op] += 1 / steps
    return by_type, by_cat, count


def profile_shape(cfg, data_dir: Path, shape: str, steps: int, warmup: int, top: int) -> None:
    from nmtkit.training.trainer import Trainer
    layers, d, heads, ff = SHAPES[shape]
    cfg = cfg.with_overrides({"model.encoder_layers": layers, "model.decoder_layers": layers, "model.d_model": d,
                              "model.num_heads": heads, "model.d_ff": ff})
    trainer = Trainer(cfg, Tokenizer.from_data_dir(data_dir).vocab_size, Single())
    batches = iter(make_dataset(data_dir, "train", cfg.data, seed=cfg.train.seed, shuffle=True, repeat=True))
    for _ in range(warmup):
        trainer.run_step([next(batches)]).numpy()
    logdir = tempfile.mkdtemp(prefix="nmtkit-step-ops-")
    wall = collections.Counter()
    tf.profiler.experimental.start(logdir)
    t_start = time.perf_counter()
    for _ in range(steps):
        t0 = time.perf_counter()
        batch = next(batches)
        t1 = time.perf_counter()
        trainer.run_step([batch]).numpy()
        t2 = time.perf_counter()
        wall["input"] += (t1 - t0) * 1000 / steps
        wall["graph"] += (t2 - t1) * 1000 / steps
    total = (time.perf_counter() - t_start) * 1000 / steps
    tf.profiler.experimental.stop()
    wall["host"] = total - wall["input"] - wall["graph"]
    by_type, by_cat, count = op_times(logdir, steps)
    ops = sum(by_type.values())
    print(f"\n{shape} ({layers}+{layers} layers, d{d}, {trainer.precision}): {total:.0f} ms a step under the profiler "
          f"(input {wall['input']:.1f}, graph {wall['graph']:.0f}, host {wall['host']:.1f} ms); "
          f"{ops:.0f} ms of op time a step")
    print("| part | op ms/step | share |\n|---|---|---|")
    for part in ("forward", "loss", "backward", "optimizer", "other"):
        print(f"| {part} | {by_cat[part]:.1f} | {100 * by_cat[part] / ops:.0f}% |")
    print("| op type | ms/step | share | ops/step |\n|---|---|---|---|")
    for op, ms in by_type.most_common(top):
        print(f"| {op} | {ms:.1f} | {100 * ms / ops:.1f}% | {count[op]:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", default="tiny,small,base")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--precision", default="float32")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--workdir", help="keep the prepared data here (default: a temp dir)")
    args = ap.parse_args()
    set_threads(Single())
    with tempfile.TemporaryDirectory(prefix="nmtkit-bench-ops-") as tmp:
        data_dir = Path(args.workdir or tmp) / "data"
        cfg = config.load("tiny", {"data.dir": str(data_dir), "data.batch_tokens": 2048, "data.bucket_width": 1,
                                   "train.precision": args.precision, "monitor.enabled": False})
        prepare(cfg, progress=False)
        for shape in args.shapes.split(","):
            profile_shape(cfg, data_dir, shape, args.steps, args.warmup, args.top)


if __name__ == "__main__":
    main()
