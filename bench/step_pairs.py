"""Two training steps compared in one process on the same batches, step by step: the way to see a 5-15% change on
a host whose speed drifts by tens of percent between processes (bench/README.md).

    python bench/step_pairs.py --shape tiny --against 623793b [--pairs 50]        # this checkout's model vs REV's
    python bench/step_pairs.py --shape tiny --precision float32,mixed_bfloat16     # two precisions, this model
    python bench/step_pairs.py --shape small --towers 1,2 [--pools 1,2]            # one tower vs two

Each side is the kit's Trainer (forward, backward, Adam) at the shape, on the tiny profile's synthetic data in
2048-token batches (bench/throughput.py's set-up). After two warm-up steps each, the sides take turns on the same
batch, the order flipping every pair; it prints each side's median step time and the median (quartiles) of the
per-pair speed-ups of the second side over the first. `--against REV` loads REV's nmtkit/model/transformer.py
and layers.py (`git show`) as the first side's model; its other imports from nmtkit resolve to this checkout.
`--towers a,b`: the same model with a and b towers (nmtkit.training.dist.towers) on this process's pools, which
`--pools INTRA,INTER` sets (default: what training sets, on 2 cores 1,2); pools differ only between processes.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
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
from nmtkit.training.dist import Single, set_threads

ROOT = Path(__file__).resolve().parents[1]

SHAPES = {"base": (6, 512, 8, 2048), "small": (3, 256, 4, 1024), "tiny": (2, 128, 4, 512)}


def model_of(rev: str, tmp: Path):
    """REV's transformer module, loaded under its own name, with REV's nmtkit/model/layers.py as its layers."""
    def load(name: str, rel: str):
        path = tmp / f"{name}.py"
        path.write_text(subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{rel}"],
                                       check=True, capture_output=True, text=True).stdout)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    own = importlib.import_module("nmtkit.model.layers")
    sys.modules["nmtkit.model.layers"] = load("layers_rev", "nmtkit/model/layers.py")
    try:  # the transformer's `from nmtkit.model.layers import ...` binds REV's while it loads
        return load("transformer_rev", "nmtkit/model/transformer.py")
    finally:
        sys.modules["nmtkit.model.layers"] = own


def trainer(cfg, vocab: int, build=None):
    from nmtkit.training import trainer as trainer_module
    own = trainer_module.build
    trainer_module.build = build or own  # the Trainer builds its model through this name
    try:
        return trainer_module.Trainer(cfg, vocab, Single())
    finally:
        trainer_module.build = own


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="tiny", choices=SHAPES)
    ap.add_argument("--against", help="a git revision: its model is the first side, this checkout's the second")
    ap.add_argument("--precision", default="float32", help="one precision, or two (first,second) to compare")
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--towers", help="two tower counts to compare (a,b), this model")
    ap.add_argument("--pools", help="INTRA,INTER: TensorFlow's thread pools for this process")
    args = ap.parse_args()
    precisions = args.precision.split(",")
    if (len(precisions) == 2) + bool(args.against) + bool(args.towers) != 1:
        raise SystemExit("give one of --against REV, two precisions (--precision a,b) or --towers a,b")
    if args.pools:
        import tensorflow as tf
        intra, inter = (int(n) for n in args.pools.split(","))
        tf.config.threading.set_intra_op_parallelism_threads(intra)
        tf.config.threading.set_inter_op_parallelism_threads(inter)
    else:
        set_threads(Single())
    layers, d, heads, ff = SHAPES[args.shape]
    with tempfile.TemporaryDirectory(prefix="nmtkit-bench-pairs-") as tmp:
        data_dir = Path(tmp) / "data"
        cfg = config.load("tiny", {"data.dir": str(data_dir), "data.batch_tokens": 2048, "data.bucket_width": 1,
                                   "model.encoder_layers": layers, "model.decoder_layers": layers,
                                   "model.d_model": d, "model.num_heads": heads, "model.d_ff": ff,
                                   "train.precision": precisions[0], "monitor.enabled": False})
        prepare(cfg, progress=False)
        vocab = Tokenizer.from_data_dir(data_dir).vocab_size
        batches = list(make_dataset(data_dir, "train", cfg.data, seed=1, shuffle=True, repeat=True)
                       .take(args.pairs + 2))
        if args.against:
            names = [args.against, "this checkout"]
            sides = [trainer(cfg, vocab, model_of(args.against, Path(tmp)).build), trainer(cfg, vocab)]
        elif args.towers:
            names = [f"{n} tower(s)" for n in args.towers.split(",")]
            sides = [trainer(cfg, vocab) for _ in names]
            for side, n in zip(sides, args.towers.split(",")):
                side.towers = int(n)  # read when the step is traced, at its first call
        else:
            names = precisions
            sides = [trainer(cfg.with_overrides({"train.precision": p}), vocab) for p in precisions]
        for side in sides:
            for b in batches[:2]:
                side.run_step([b]).numpy()
        times = [[], []]
        for i, b in enumerate(batches[2:]):
            for k in ((0, 1) if i % 2 == 0 else (1, 0)):
                t0 = time.perf_counter()
                sides[k].run_step([b]).numpy()
                times[k].append(time.perf_counter() - t0)
    ratios = sorted(a / b for a, b in zip(*times))
    q = len(ratios) // 4
    for name, t in zip(names, times):
        print(f"{args.shape} {name}: median {1000 * statistics.median(t):.1f} ms/step ({len(t)} steps)")
    print(f"{args.shape}: {names[1]} ÷ {names[0]} speed, median of {len(ratios)} paired steps "
          f"{statistics.median(ratios):.3f} (quartiles {ratios[q]:.3f}-{ratios[-q - 1]:.3f})")


if __name__ == "__main__":
    main()
