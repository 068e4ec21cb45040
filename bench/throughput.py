"""Training throughput and MFU of nmtkit at the base, small and tiny shapes, side by side with OpenNMT-tf 2.32.

    python bench/throughput.py [--quick] [--shapes base,small,tiny] [--steps 20] [--rounds 3] [--no-onmt]
                               [--variant NAME:key=value,key=value ...] [--record-bf16 PATH]

Both train on the same text (the tiny profile's synthetic training split, the same sentencepiece pieces), the same
shapes, fp32, 2048-token batches, one after the other in this run; warm-up steps (tracing) are left out. Tokens are
source + target non-padding tokens. MFU is against the peak of the precision each variant runs in: on CPU a matmul
in that dtype (fp32, bf16, fp16) timed in this run just after the shape's runs, on GPU the device's table figure
(nmtkit.training.peaks; TF32 under float32). train()'s own MFU is rescaled from its peak to this one. OpenNMT-tf runs in
a bench-only venv (.cache/onmt-venv) built on first use; if it cannot run, the reference table measured earlier is
printed instead, with the reason.
Both bucket by the longer side of each example with the same width (--bucket-width, OpenNMT-tf's
length_bucket_width; 1 by default as OpenNMT-tf's Transformer recipes) and fill a 2048 budget the same way
(sentences x bucket length), so their tokens per step compare.
--variant: nmtkit again with config overrides, in the same run (e.g. `xla:train.xla=true`,
`bf16:train.precision=mixed_bfloat16`, `width8:data.bucket_width=8`; under XLA train() pads batches to their
length bucket), each with its ratio to OpenNMT-tf.
--rounds: each shape runs every variant and then OpenNMT-tf, that many times over (default 3); the ratios are the
median of the rounds' (the host drifts by tens of percent within minutes, so only side-by-side figures compare).
--record-bf16 PATH: with a variant in train.precision=mixed_bfloat16, write its tokens/s over fp32's per shape
(median of the rounds): the record train.precision=auto reads (nmtkit/training/bf16_speed.json).
--quick: the tiny shape only, a few steps each, one round (< 3 minutes once the venv exists).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the kit of this checkout

import _onmt

import nmtkit  # noqa: F401  (Keras 2 API before TensorFlow)
from nmtkit import config
from nmtkit.data.pipeline import make_dataset
from nmtkit.data.prepare import prepare
from nmtkit.keras2 import import_tf
from nmtkit.training import peaks
from nmtkit.training.dist import Single, set_threads, towers

tf = import_tf()

SHAPES = {  # layers (encoder = decoder), d_model, heads, d_ff
    "base": (6, 512, 8, 2048),
    "small": (3, 256, 4, 1024),
    "tiny": (2, 128, 4, 512),
}
REFERENCE = """reference (issue 14, quiet machine, one after the other; compare ratios, not absolute figures):
| shape | nmtkit (main then) | OpenNMT-tf 2.32 on TF 2.13 | nmtkit / OpenNMT-tf |
| base  | 973 tokens/s (2.93 s/step, ~2,850 tokens/step) | 1,199 tokens/s (3.26 s/step, 3,907 tokens/step) | 0.81 |
| small | 4,468 tokens/s (628 ms/step) | 6,029 tokens/s (649 ms/step) | 0.74 |"""


def matmul_peak(precision: str) -> float:
    """Peak FLOP/s of the compute dtype `precision` uses: the GPU table where there is a GPU, else a matmul
    timed now (the machine may be busy: best of a few trials)."""
    if tf.config.list_physical_devices("GPU"):
        from nmtkit.training.metrics import peak_flops
        return peak_flops(precision)[0]
    return peaks.timed_matmul(tf, peaks.COMPUTE_DTYPE[precision], n=2048, parts=towers(tf.config))  # as the step runs


def padding_fraction(data_dir: Path, cfg, batches: int) -> tuple[float, float, float]:
    """(padding fraction, mean padded tokens, mean sentence pairs) per batch over the first `batches` batches
    train() sees (same data, same seed)."""
    ds = make_dataset(data_dir, "train", cfg.data, seed=cfg.train.seed, shuffle=True, repeat=True,
                      pad_to_bucket=cfg.train.xla)  # as train() batches under XLA
    real = total = pairs = 0
    for src, tgt in ds.take(batches):
        real += int(np.count_nonzero(src.numpy())) + int(np.count_nonzero(tgt.numpy()))
        total += int(np.prod(src.shape)) + int(np.prod(tgt.shape))
        pairs += int(src.shape[0])
    return 1 - real / total, total / batches, pairs / batches


def run_nmtkit(base_cfg, data_dir: Path, shape: str, steps: int, warmup: int, work: Path, overrides: dict) -> dict:
    from nmtkit.training.loop import train
    layers, d, heads, ff = SHAPES[shape]
    cfg = base_cfg.with_overrides({
        "model.encoder_layers": layers, "model.decoder_layers": layers, "model.d_model": d,
        "model.num_heads": heads, "model.d_ff": ff, "train.steps": warmup + steps, "train.log_every": 1,
        "train.precision": "float32", **overrides})
    records: list[dict] = []
    summary = train(cfg, work / f"nmtkit-{shape}-{int(time.time())}", data_dir=data_dir, on_log=records.append,
                    progress=False, resume=False)
    kept = [r for r in records if r["step"] > warmup]
    seconds = sum(r["step_time"] for r in kept)
    tokens = sum(r["tokens_per_sec"] * r["step_time"] for r in kept)
    flops = sum(r["mfu"] * summary["peak_flops"] * r["step_time"] for r in kept)  # undo train()'s own peak
    pad, padded, pairs = padding_fraction(data_dir, cfg, warmup + steps)
    return {"tokens_per_sec": tokens / seconds, "ms_per_step": 1000 * seconds / len(kept),
            "tokens_per_step": tokens / len(kept), "flops_per_sec": flops / seconds, "padding": pad,
            "padded_per_step": padded, "pairs_per_step": pairs, "params": summary["params"], "steps": len(kept),
            "precision": summary["precision"]}


def profile_step(base_cfg, data_dir: Path, shape: str, reps: int = 5) -> dict:
    """Milliseconds of forward, backward and the optimizer update on one batch of this shape (best of
    `reps`): where a step's time goes."""
    from nmtkit.data.bpe import Tokenizer
    from nmtkit.model.transformer import smoothed_loss
    from nmtkit.training.trainer import Trainer
    layers, d, heads, ff = SHAPES[shape]
    cfg = base_cfg.with_overrides({"model.encoder_layers": layers, "model.decoder_layers": layers,
                                   "model.d_model": d, "model.num_heads": heads, "model.d_ff": ff,
                                   "train.precision": "float32"})
    trainer = Trainer(cfg, Tokenizer.from_data_dir(data_dir).vocab_size)
    model, smoothing = trainer.model, cfg.model.label_smoothing
    src, tgt = next(iter(make_dataset(data_dir, "train", cfg.data, seed=cfg.train.seed)))

    def loss(s, t):
        seed = tf.constant([cfg.train.seed, 0], tf.int64)  # the kit's stateless dropout, as the Trainer runs it
        total, n = smoothed_loss(model((s, t[:, :-1]), training=True, seed=seed), t[:, 1:], smoothing)
        return total / n

    def grads(s, t):
        with tf.GradientTape() as tape:
            value = loss(s, t)
        return tape.gradient(value, trainer.variables)

    def best(fn, *args):
        fn(*args)
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            tf.nest.map_structure(lambda x: x.numpy(), fn(*args))
            times.append(time.perf_counter() - t0)
        return 1000 * min(times)

    fwd = best(tf.function(loss, autograph=False), src, tgt)  # plain Python: nothing for autograph to convert
    fwd_bwd = best(tf.function(grads, autograph=False), src, tgt)
    step = best(trainer.run_step, [(src, tgt)])
    return {"batch": tuple(src.shape) + tuple(tgt.shape[1:]), "forward": fwd, "backward": fwd_bwd - fwd,
            "optimizer": step - fwd_bwd, "step": step}


def median_run(ks: list[dict]) -> dict:
    """One variant's rounds as one: the median of each figure (the rest from the first round)."""
    return {**ks[0], **{key: float(np.median([k[key] for k in ks])) for key in
                        ("tokens_per_sec", "ms_per_step", "tokens_per_step", "flops_per_sec", "mfu", "peak")}}


def median_onmt(os_: list):
    from types import SimpleNamespace
    return SimpleNamespace(**{key: float(np.median([getattr(o, key) for o in os_])) for key in
                              ("tokens_per_sec", "ms_per_step", "tokens_per_step", "steps_measured")})


def parse_variant(text: str) -> tuple[str, dict]:
    """"name:key=value,key=value" -> (name, overrides); "name:" alone is the plain config."""
    name, _, rest = text.partition(":")
    pairs = [p.split("=", 1) for p in rest.split(",") if p.strip()]
    if not name or any(len(p) != 2 for p in pairs):
        raise SystemExit(f"--variant {text!r}: expected NAME:key=value[,key=value]")
    return name, {k.strip(): v.strip() for k, v in pairs}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny shape only, few steps: checks the bench works")
    ap.add_argument("--shapes", default="base,small,tiny")
    ap.add_argument("--steps", type=int, default=20, help="measured steps per shape and toolkit (after warm-up)")
    ap.add_argument("--warmup", type=int, default=3, help="steps left out (tracing, first allocations)")
    ap.add_argument("--no-onmt", action="store_true", help="nmtkit only; print the reference table")
    ap.add_argument("--workdir", default=None, help="keep the prepared data and runs here (default: a temp dir)")
    ap.add_argument("--bucket-width", type=int, default=1, help="length-bucket width of both toolkits")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:key=value,...",
                    help="nmtkit again with these config overrides (repeatable)")
    ap.add_argument("--variant-shapes", default="", help="run the variants at these shapes only (default: all)")
    ap.add_argument("--profile", action="store_true", help="also time forward / backward / optimizer per shape")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds per shape (every variant, then OpenNMT-tf); medians are reported")
    ap.add_argument("--record-bf16", metavar="PATH", default=None,
                    help="write the bf16/fp32 speed per shape that train.precision=auto reads (needs a variant with "
                         "train.precision=mixed_bfloat16; nmtkit/training/bf16_speed.json is the kit's)")
    return ap


def measure_variant(r: int, name: str, shape: str, shape_peaks: dict, run) -> dict:
    """One nmtkit run (`run()` -> its figures) with its MFU against the peak of its precision, timed beside it."""
    k = run()
    if k["precision"] not in shape_peaks:
        shape_peaks[k["precision"]] = matmul_peak(k["precision"])
    k["peak"] = shape_peaks[k["precision"]]
    k["mfu"] = k["flops_per_sec"] / k["peak"]
    print(f"round {r} {name} {shape}: {k['tokens_per_sec']:,.0f} tokens/s, {k['ms_per_step']:.0f} "
          f"ms/step, {k['tokens_per_step']:,.0f} tokens/step ({k['padded_per_step']:,.0f} with "
          f"padding, {100 * k['padding']:.1f}% padding), MFU {100 * k['mfu']:.1f}% of the "
          f"{peaks.COMPUTE_DTYPE[k['precision']]} peak ({k['peak'] / 1e9:.0f} GFLOP/s), "
          f"{k['precision']}, {k['params']:,} parameters, {k['steps']} steps measured", flush=True)
    return k


def record_ratios(r: int, shape: str, runs: dict, o, ratios: dict) -> None:
    """Each variant's latest run over this round's OpenNMT-tf run `o`, counted both ways, into `ratios`."""
    print(f"round {r} OpenNMT-tf {shape}: {o.tokens_per_sec:,.0f} tokens/s, {o.ms_per_step:.0f} "
          f"ms/step, {o.tokens_per_step:,.0f} tokens/step, {o.steps_measured} steps measured", flush=True)
    for name, ks_ in runs.items():
        k = ks_[-1]
        # nmtkit counts the source EOS it feeds the encoder; OpenNMT-tf feeds (and counts) none
        no_eos = k["tokens_per_sec"] * (1 - k["pairs_per_step"] / k["tokens_per_step"])
        ratios.setdefault(name, []).append((k["tokens_per_sec"] / o.tokens_per_sec, no_eos / o.tokens_per_sec))


def print_ratios(shape: str, ks: list, ratios: dict) -> None:
    for name, k in ks:
        if name in ratios:
            both = np.array(ratios[name])
            k["ratio"], k["ratio_no_eos"] = float(np.median(both[:, 0])), float(np.median(both[:, 1]))
            print(f"{shape}: {name} / OpenNMT-tf, median of {len(both)} interleaved round(s) "
                  f"{k['ratio']:.2f} (rounds: {', '.join(f'{x:.2f}' for x in both[:, 0])}); counted "
                  f"OpenNMT-tf's way (no source EOS, ~{k['pairs_per_step']:.0f} pairs/step) "
                  f"{k['ratio_no_eos']:.2f}", flush=True)
            # same shape, same FLOPs per token: OpenNMT-tf's MFU is nmtkit's scaled by the tokens/s ratio
            onmt_mfu = k["mfu"] / k["ratio"]
            print(f"{shape}: OpenNMT-tf runs at MFU {100 * onmt_mfu:.1f}% of {name}'s peak; 1.2x its "
                  f"tokens/s needs MFU {120 * onmt_mfu:.1f}% (nmtkit: {100 * k['mfu']:.1f}%)", flush=True)


def bf16_speed(shape: str, runs: dict) -> dict | None:
    """Per round, the bf16 variant over the fp32 one, as measured side by side (None without both)."""
    bf16 = [v for v in runs.values() if v and v[0]["precision"] == "mixed_bfloat16"]
    fp32 = [v for v in runs.values() if v and v[0]["precision"] == "float32"]
    if not (bf16 and fp32):
        return None
    per = [b["tokens_per_sec"] / f["tokens_per_sec"] for b, f in zip(bf16[0], fp32[0])]
    speed = {"d_model": SHAPES[shape][1], "ratio": round(float(np.median(per)), 3),
             "rounds": [round(x, 3) for x in per]}
    print(f"{shape}: mixed_bfloat16 / float32 tokens/s, median of {len(per)} round(s): {speed['ratio']:.2f}",
          flush=True)
    return speed


def print_table(rows: list, onmt_why: str | None, bucket_width: int) -> None:
    print()
    print("| shape | nmtkit variant | tokens/s | ms/step | tokens/step | padding | MFU (peak of its precision) "
          "| OpenNMT-tf tokens/s | ms/step | tokens/step | nmtkit / OpenNMT-tf |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for shape, name, k, o in rows:
        other = (f"{o.tokens_per_sec:,.0f} | {o.ms_per_step:.0f} | {o.tokens_per_step:,.0f} | "
                 f"{k['ratio']:.2f}") if o and "ratio" in k else "- | - | - | -"
        print(f"| {shape} | {name} | {k['tokens_per_sec']:,.0f} | {k['ms_per_step']:.0f} | "
              f"{k['tokens_per_step']:,.0f} | {100 * k['padding']:.1f}% | {100 * k['mfu']:.1f}% | {other} |")
    if onmt_why:
        print(f"\nOpenNMT-tf not measured: {onmt_why}\n{REFERENCE}")
    else:
        print(f"(both fill the 2048 budget as sentences x bucket length, bucket width {bucket_width}; "
              "nmtkit's lengths count the source EOS and target BOS/EOS it feeds, so a few % fewer pairs fit. "
              "Target: >= 1.2x at base and small.)")


def prepared(args, work: Path, data_dir: Path):
    """(the config, OpenNMT-tf's corpus files or None, why OpenNMT-tf is not measured or None) for one bench run."""
    cfg = config.load("tiny", {
        "data.dir": str(data_dir), "data.batch_tokens": 2048, "data.bucket_width": args.bucket_width,
        "train.ckpt_every": 0, "eval.every": 0,
        "eval.dev_sentences": 1, "eval.test_sentences": 1, "eval.beam_size": 1, "eval.max_extra_len": 1,
        "monitor.enabled": False})
    prepare(cfg, progress=False)
    onmt_why = "--no-onmt" if args.no_onmt else None
    files = None
    if onmt_why is None:
        try:
            _onmt.ensure_venv(print)
            files = _onmt.write_corpus(data_dir, work / "onmt-data", cfg.data.max_tokens)
        except _onmt.OnmtUnavailable as e:
            onmt_why = str(e)
    return cfg, files, onmt_why


def main() -> None:
    args = parser().parse_args()
    set_threads(Single())  # the pools train() would set (on a CPU: towers), before any op fixes TensorFlow's defaults
    variants = [("nmtkit", {})] + [parse_variant(v) for v in args.variant]
    os.environ["NMTKIT_XLA_ON_CPU"] = "1"  # measure XLA on a CPU too: what the kit's refusal there rests on
    shapes = ["tiny"] if args.quick else [s.strip() for s in args.shapes.split(",") if s.strip()]
    steps, warmup = (6, 2) if args.quick else (args.steps, args.warmup)
    if args.quick:
        args.rounds = 1
    report_every = 2 if args.quick else 5
    warmup_onmt = max(warmup, report_every)  # OpenNMT-tf reports per interval: skip the first interval whole
    onmt_steps = -(-steps // report_every) * report_every  # whole report intervals, at least `steps`

    with tempfile.TemporaryDirectory(prefix="nmtkit-bench-tp-") as tmp:
        work = Path(args.workdir or tmp)
        data_dir = work / "data"
        cfg, files, onmt_why = prepared(args, work, data_dir)
        rows, speed = [], {}
        for shape in shapes:
            runs: dict[str, list[dict]] = {}
            onmts, ratios = [], {}  # ratios: variant -> per-round tokens/s ratio to OpenNMT-tf (both ways)
            for r in range(1, args.rounds + 1):  # interleaved: the host drifts by tens of percent within minutes
                shape_peaks = {}
                for name, overrides in variants:
                    if overrides and args.variant_shapes and shape not in args.variant_shapes.split(","):
                        continue
                    runs.setdefault(name, []).append(measure_variant(r, name, shape, shape_peaks, lambda: run_nmtkit(
                        cfg, data_dir, shape, steps, warmup, work, overrides)))
                if onmt_why is None:
                    layers, d, heads, ff = SHAPES[shape]
                    try:
                        o = _onmt.run(files, work / f"onmt-{shape}-{int(time.time())}", layers=layers, d_model=d,
                                      heads=heads, d_ff=ff, steps=warmup_onmt + onmt_steps, warmup=warmup_onmt,
                                      report_every=report_every, batch_tokens=2048, max_tokens=cfg.data.max_tokens,
                                      timeout=1800, bucket_width=args.bucket_width)
                    except _onmt.OnmtUnavailable as e:
                        onmt_why = str(e)
                        continue
                    onmts.append(o)
                    record_ratios(r, shape, runs, o, ratios)
            ks = [(name, median_run(v)) for name, v in runs.items()]
            o = median_onmt(onmts) if onmts else None
            print_ratios(shape, ks, ratios)
            if args.profile:
                pr = profile_step(cfg, data_dir, shape)
                print(f"profile {shape}, one batch {pr['batch']} (src pairs, src len, tgt len): forward "
                      f"{pr['forward']:.0f} ms, backward {pr['backward']:.0f} ms, optimizer {pr['optimizer']:.0f} ms, "
                      f"step {pr['step']:.0f} ms", flush=True)
            if (measured := bf16_speed(shape, runs)) is not None:
                speed[shape] = measured
            rows.extend((shape, name, k, o) for name, k in ks)
        if args.record_bf16 and speed:
            from nmtkit.training.precision import write_bf16_speed
            command = "bench/throughput.py " + " ".join(sys.argv[1:])
            print(f"wrote {write_bf16_speed(Path(args.record_bf16), speed, command)}")
        print_table(rows, onmt_why, args.bucket_width)

if __name__ == "__main__":
    main()
