"""The GPU path's first real run, in one command on a GPU machine:

    NMTKIT_GPU=1 make setup && .venv/bin/python bench/gpu.py [--steps 200] [--batch 256]

`nmtkit doctor`, then the wmt16-base shape in mixed precision (train.precision=auto: fp16 on tensor cores) at
`--batch` sentences per GPU on synthetic ids (no data to prepare), `--steps` timed steps after a warm-up, each case
in a fresh process: one process and one Horovod rank (horovodrun -np 1), XLA off and on (a Horovod job never
compiles with XLA: that case shows the refusal). Prints ms/step, tokens/s, MFU against the device's peak for the
precision used, peak GPU memory and the final loss scale. With one GPU it also runs two ranks sharing it, their
gradients over Gloo on the host (NCCL refuses two ranks on one device), and checks both end with equal weights.
Without a GPU it says so and exits 0. `--allow-cpu --shape tiny --steps 5 --batch 16` runs the same machinery on a
CPU (a check of this script, not a measurement).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import nmtkit  # noqa: E402,F401  (Keras 2 API before TensorFlow)
from nmtkit import config  # noqa: E402
from nmtkit.keras2 import import_tf  # noqa: E402

SHAPES = {"wmt16-base": {}, "tiny": {"model.d_model": 64, "model.d_ff": 128, "model.encoder_layers": 1,
                                     "model.decoder_layers": 1, "model.num_heads": 2}}
LEN = 32  # source and target tokens per synthetic sentence


def worker(args) -> None:
    """One case, in this process: train `args.steps` steps on synthetic ids, print one RESULT line."""
    tf = import_tf()
    from nmtkit.train.dist import Horovod, Single, set_threads
    from nmtkit.train.metrics import peak_flops, train_flops
    from nmtkit.train.trainer import Trainer
    dist = Horovod(host_allreduce=args.host_allreduce) if args.horovod else Single()
    set_threads(dist)  # pins (one process: every GPU, memory growth) before the first op
    vocab = 32000
    cfg = config.load("wmt16-base", {"train.precision": args.precision, "train.xla": args.xla,
                                     "model.dropout": 0.0, **SHAPES[args.shape]})
    trainer = Trainer(cfg, vocab, dist)
    trainer.sync_variables()
    rng = tf.random.Generator.from_seed(1 + dist.rank)
    src = rng.uniform([args.batch, LEN], 4, vocab, dtype=tf.int32)
    tgt = tf.concat([tf.fill([args.batch, 1], 2), rng.uniform([args.batch, LEN], 4, vocab, dtype=tf.int32)], 1)
    for _ in range(args.warmup):
        stats = trainer.run_step([(src, tgt)])
    stats.numpy()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        stats = trainer.run_step([(src, tgt)])
    loss = float(stats.numpy()[0])  # the one host sync: after the last step
    step = (time.perf_counter() - t0) / args.steps
    tokens = args.batch * LEN * 2
    peak, source = peak_flops(trainer.precision)
    gpus = tf.config.list_physical_devices("GPU")
    memory = tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**30 if gpus else None
    scale = float(trainer.optimizer.loss_scale) if hasattr(trainer.optimizer, "loss_scale") else None
    print("RESULT " + json.dumps({
        "rank": dist.rank, "ranks": dist.size, "precision": trainer.precision, "reason": trainer.precision_reason,
        "xla": trainer.xla, "ms_per_step": step * 1000, "tokens_per_sec": tokens * dist.size / step,
        "mfu": train_flops(cfg.model, vocab, args.batch * LEN, args.batch * LEN, LEN, LEN) / step / peak,
        "peak": peak, "peak_source": source, "gpu_mem_gb": memory, "loss_scale": scale, "loss": loss,
        "checksum": dist.weights_checksum() if args.horovod else None}), flush=True)


def run_case(args, name: str, *, xla: bool, ranks: int = 0, host_allreduce: bool = False) -> list[dict]:
    """A case in a fresh process (ranks > 0: under horovodrun with Gloo); its RESULT records, rank order."""
    cmd = [sys.executable, __file__, "--worker", "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--batch", str(args.batch), "--shape", args.shape, "--precision", args.precision]
    cmd += ["--xla"] * xla + ["--horovod"] * bool(ranks) + ["--host-allreduce"] * host_allreduce
    if ranks:
        cmd = [sys.executable, "-m", "horovod.runner.launch", "-np", str(ranks), "-H", f"localhost:{ranks}",
               "--gloo", *cmd]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    t0 = time.time()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
    found = [json.loads(line.split("RESULT ", 1)[1]) for line in p.stdout.splitlines() if "RESULT {" in line]
    if p.returncode or not found:
        tail = "\n    ".join((p.stdout + p.stderr).strip().splitlines()[-15:])
        print(f"{name}: FAILED (exit {p.returncode}, {time.time() - t0:.0f} s):\n    {tail}", flush=True)
        return []
    found.sort(key=lambda r: r["rank"])
    r = found[0]
    mem = f"{r['gpu_mem_gb']:.1f} GB" if r["gpu_mem_gb"] is not None else "-"
    scale = f"{r['loss_scale']:g}" if r["loss_scale"] is not None else "-"
    print(f"{name:<38} | {r['precision']:<14} | XLA {'on ' if r['xla'] else 'off'} | {r['ms_per_step']:8.1f} ms/step | "
          f"{r['tokens_per_sec']:>10,.0f} tok/s | MFU {100 * r['mfu']:5.1f}% | peak GPU mem {mem} | "
          f"loss scale {scale} | loss {r['loss']:.3f}", flush=True)
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256, help="sentences per GPU")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="wmt16-base")
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per case")
    ap.add_argument("--allow-cpu", action="store_true", help="run on a CPU anyway (checks this script)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--horovod", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--host-allreduce", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--xla", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    tf = import_tf()
    gpus = tf.config.list_physical_devices("GPU")  # lists devices without initialising them
    if not gpus and not args.allow_cpu:
        print("bench/gpu.py: no GPU found (TensorFlow lists none): nothing to measure on this machine. On a GPU VM: "
              "NMTKIT_GPU=1 make setup && .venv/bin/python bench/gpu.py (see docs/instructors.md)")
        return 0
    from nmtkit import doctor
    if doctor.main() != 0 and not args.allow_cpu:
        print("doctor found problems (above): fix them first; the figures would not mean much")
        return 1
    print(f"\n{args.shape} shape, {args.batch} sentences x {LEN}+{LEN} synthetic tokens per GPU, {args.steps} timed "
          f"steps after {args.warmup}; {len(gpus)} GPU(s)\n")
    for name, kw in (("one process", {"xla": False}), ("one process, XLA", {"xla": True}),
                     ("one Horovod rank", {"xla": False, "ranks": 1}),
                     ("one Horovod rank, XLA asked (refused)", {"xla": True, "ranks": 1})):
        got = run_case(args, name, **kw)
        if got and name.startswith("one process") and kw["xla"] is False:
            print(f"  precision: {got[0]['reason']}; peak {got[0]['peak'] / 1e12:.1f} TFLOP/s ({got[0]['peak_source']})")
    if len(gpus) <= 1:
        got = run_case(args, "two ranks sharing one GPU (Gloo)", xla=False, ranks=2, host_allreduce=True)
        if len(got) == 2:
            same = got[0]["checksum"] == got[1]["checksum"]
            print(f"  weights equal on both ranks: {'yes' if same else 'NO'} ({got[0]['checksum']!r} vs "
                  f"{got[1]['checksum']!r})")
            if not same:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
