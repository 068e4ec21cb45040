"""The GPU path's first real run, in one command on a GPU machine (`make gpu-check` runs set-up, then this):

    NMTKIT_GPU=1 make setup && .venv/bin/python bench/gpu.py [--steps 200] [--batch 256] [--out DIR]

`nmtkit doctor`, then the wmt16-base shape in mixed precision (train.precision=auto: fp16 on tensor cores) at
`--batch` sentences per GPU of the homework's length (data.max_tokens + EOS: 57 tokens each side) on synthetic ids
(no data to prepare), split into the micro-batches the kit's memory projection picks (nmtkit.model.memory),
`--steps` timed steps after a warm-up, each case in a fresh process: one process and one Horovod rank (horovodrun
-np 1), XLA off and on (a Horovod job never compiles with XLA: that case shows the refusal), and with two GPUs or
more two Horovod ranks over NCCL. Prints ms/step, tokens/s, MFU against the device's peak for the precision used,
peak GPU memory against the projection, and the final loss scale. Two ranks sharing one GPU are not run: NCCL
refuses two ranks on one device and the kit pins one GPU per local rank, so that case could only fail.

Any case that fails makes the exit status 1, and every run leaves gpu-report.md and gpu-report.json in --out (the
GPU, driver, CUDA/cuDNN/NCCL/TensorFlow versions, Horovod's build, doctor's rows, each case's figures, the transport
NCCL chose from NCCL_DEBUG=INFO): keep them, or attach them to a bug report. Without a GPU it says so and exits 0
(`--allow-cpu --shape tiny --steps 3 --batch 8` runs the same machinery on a CPU: a check of this script, not a
measurement).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_fit import SHAPES, refit, refit_line  # noqa: E402  (bench/, beside this script)

import nmtkit  # noqa: E402,F401  (Keras 2 API before TensorFlow)
from nmtkit import config  # noqa: E402
from nmtkit.keras2 import import_tf  # noqa: E402

SHAPES_LEN = "57 (56 BPE tokens + EOS) each side"


def worker(args) -> None:
    """One case, in this process: train `args.steps` steps on synthetic ids, print one RESULT line."""
    tf = import_tf()
    from nmtkit.training.dist import Horovod, Single, set_threads
    from nmtkit.training.metrics import peak_flops, train_flops
    from nmtkit.training.trainer import Trainer
    if args.fail:
        raise SystemExit("forced failure (--fail): the report and the exit status must show it")
    dist = Horovod() if args.horovod else Single()
    set_threads(dist)  # pins (one process: every GPU, memory growth) before the first op
    cfg = case_config(args)
    vocab, length = cfg.data.vocab_size, cfg.data.max_tokens + 1  # the homework's longest sentences
    trainer = Trainer(cfg, vocab, dist)  # picks the micro-batches that fit (train.grad_accum=0: auto)
    trainer.sync_variables()
    size = trainer.micro.size
    rng = tf.random.Generator.from_seed(1 + dist.rank)
    micro = [(rng.uniform([size, length], 4, vocab, dtype=tf.int32),
              tf.concat([tf.fill([size, 1], 2), rng.uniform([size, length], 4, vocab, dtype=tf.int32)], 1))
             for _ in range(trainer.accum)]
    for _ in range(args.warmup):
        stats = trainer.run_step(micro)
    stats.numpy()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        stats = trainer.run_step(micro)
    loss = float(stats.numpy()[0])  # the one host sync: after the last step
    step = (time.perf_counter() - t0) / args.steps
    tokens = size * trainer.accum * length * 2
    peak, source = peak_flops(trainer.precision)
    memory = gpu_peak(tf)
    # the second size: the slope between the two is the per-sentence cost alone (bench/gpu_fit.py)
    half = max(1, size // 2)
    memory_half = gpu_peak(tf, reset=True) if memory is not None else None
    if memory_half is not None:
        trainer.run_step([(s[:half], t[:half]) for s, t in micro])[0].numpy()
        memory_half = gpu_peak(tf)
    scale = float(trainer.optimizer.loss_scale) if hasattr(trainer.optimizer, "loss_scale") else None
    print("RESULT " + json.dumps({
        "rank": dist.rank, "ranks": dist.size, "precision": trainer.precision, "reason": trainer.precision_reason,
        "xla": trainer.xla, "ms_per_step": step * 1000, "tokens_per_sec": tokens * dist.size / step,
        "mfu": train_flops(cfg.model, vocab, tokens / 2, tokens / 2, length, length) / step / peak,
        "peak": peak, "peak_source": source, "gpu_mem_gb": memory, "loss_scale": scale, "loss": loss,
        "micro_batches": trainer.accum, "micro_batch": size, "gpu_mem_gb_half": memory_half, "micro_batch_half": half,
        "dropout": cfg.model.dropout,
        "projected_gb": trainer.micro.projection.total / 2**30,
        "checksum": dist.weights_checksum() if args.horovod else None}), flush=True)


def case_config(args):
    """A case's config: the profile's own dropout (the masks are part of the peak the refit explains)."""
    return config.load("wmt16-base", {"train.precision": args.precision, "train.xla": args.xla,
                                      "data.batch_sentences": args.batch, **SHAPES[args.shape]})


def gpu_peak(tf, reset: bool = False) -> float | None:
    """GPU:0's peak allocated GiB since the last reset (None without a GPU TensorFlow runs on); `reset`: start a
    new peak from what is allocated now."""
    if not tf.config.list_physical_devices("GPU"):
        return None
    try:
        if reset:
            tf.config.experimental.reset_memory_stats("GPU:0")
        return tf.config.experimental.get_memory_info("GPU:0")["peak"] / 2**30
    except ValueError:  # a GPU listed that TensorFlow runs nothing on (the tests' GPU-shaped CPU): not measured
        return None


def run_case(args, name: str, *, xla: bool, ranks: int = 0, optional: str = "") -> dict:
    """A case in a fresh process (ranks > 0: under horovodrun with Gloo, NCCL_DEBUG=INFO): {"name", "ok", "results"
    (RESULT records, rank order), "error", "transport" (what NCCL said it used), "optional" (why its failure is
    reported but does not fail the check; "" when it counts)}."""
    cmd = [sys.executable, __file__, "--worker", "--steps", str(args.steps), "--warmup", str(args.warmup),
           "--batch", str(args.batch), "--shape", args.shape, "--precision", args.precision]
    cmd += ["--xla"] * xla + ["--horovod"] * bool(ranks) + (["--fail", name] if args.fail == name else [])
    if ranks:
        cmd = [sys.executable, "-m", "horovod.runner.launch", "-np", str(ranks), "-H", f"localhost:{ranks}",
               "--gloo", *cmd]
    env = dict(os.environ, NCCL_DEBUG=os.environ.get("NCCL_DEBUG", "INFO"), TF_CPP_MIN_LOG_LEVEL="0",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    if args.allow_cpu:  # the machinery on a CPU: the XLA cases too, which the kit refuses there for users
        env["NMTKIT_XLA_ON_CPU"] = "1"
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = f"{e.stdout or ''}{e.stderr or ''}\ntimed out after {args.timeout:.0f} s", -1
    found = sorted((json.loads(line.split("RESULT ", 1)[1]) for line in out.splitlines() if "RESULT {" in line),
                   key=lambda r: r["rank"])
    case = {"name": name, "ok": rc == 0 and bool(found), "results": found, "seconds": round(time.time() - t0, 1),
            "transport": sorted({m.group(0) for m in re.finditer(r"via (P2P/\S+|NET/\S+|SHM/\S+)", out)}),
            "error": None, "optional": optional}
    if not case["ok"]:
        case["error"] = f"exit {rc}: " + " | ".join(out.strip().splitlines()[-6:])
        print(f"{name}: FAILED ({case['error']})" + (f"; not counted: {optional}" if optional else ""), flush=True)
        return case
    r = found[0]
    cfg = config.load("wmt16-base", SHAPES[args.shape])
    case["memory"] = refit(cfg, cfg.data.vocab_size, cfg.data.max_tokens + 1, r, out)
    mem = f"{r['gpu_mem_gb']:.1f} GiB" if r["gpu_mem_gb"] is not None else "not measured"
    print(f"{name:<38} | {r['precision']:<14} | XLA {'on ' if r['xla'] else 'off'} | {r['ms_per_step']:8.1f} ms/step | "
          f"{r['tokens_per_sec']:>10,.0f} tok/s | MFU {100 * r['mfu']:5.1f}% | peak GPU mem {mem} (projected "
          f"{r['projected_gb']:.1f} GiB, {r['micro_batches']} x {r['micro_batch']}) | loss {r['loss']:.3f}", flush=True)
    if case["memory"]:
        print(refit_line(case["memory"]), flush=True)
    return case


# XLA is an option the course leaves off (train.xla=false): its case measures what it would give, and a failure there
# (an op without an XLA kernel on this GPU's stack) is reported with its reason without failing the check.
XLA_OPTIONAL = "train.xla is off by default and nothing in the course needs it"
CASES = (("one process", {"xla": False}), ("one process, XLA", {"xla": True, "optional": XLA_OPTIONAL}),
         ("one Horovod rank", {"xla": False, "ranks": 1}),
         ("one Horovod rank, XLA asked (refused)", {"xla": True, "ranks": 1}))


def versions(tf) -> dict:
    """What the report must name: GPU, driver, CUDA, cuDNN, NCCL, TensorFlow, Horovod's build."""
    build = tf.sysconfig.get_build_info()
    out = {"tensorflow": tf.__version__, "cuda": build.get("cuda_version"), "cudnn": build.get("cudnn_version")}
    try:
        import horovod.tensorflow as hvd
        out["horovod"] = {"nccl": bool(hvd.nccl_built()), "cuda": bool(hvd.cuda_built()),
                          "gloo": bool(hvd.gloo_built()), "mpi": bool(hvd.mpi_built())}
    except Exception as e:  # noqa: BLE001  named in the report
        out["horovod"] = f"does not import: {type(e).__name__}: {e}"
    try:
        import glob

        import nvidia.nccl  # the wheel tensorflow[and-cuda] brings
        lib = Path(list(nvidia.nccl.__path__)[0]) / "lib"
        out["nccl"] = [Path(p).name for p in glob.glob(str(lib / "libnccl.so*"))]
    except ImportError:
        out["nccl"] = None
    from nmtkit.gpus import nvml_gpus
    out["gpus"], _ = nvml_gpus()
    return out


def keep(fit: dict | None) -> str:
    if not fit or fit.get("keep_implied") is None:
        return "-"
    return f"{fit['keep_implied']:.2f} ({fit['keep_shipped']})" + ("" if fit["adopt"] else ", not adoptable")


def write_report(out: Path, args, facts: dict, doctor_rows: list, cases: list[dict]) -> Path:
    """gpu-report.json (everything) and gpu-report.md (the same, for people), written atomically."""
    from nmtkit.files import atomic_write_json, atomic_write_text
    ok = all(c["ok"] or c.get("optional") for c in cases)
    data = {"ok": ok, "when": time.strftime("%Y-%m-%d %H:%M:%S"), "args": {k: str(v) for k, v in vars(args).items()},
            "facts": facts, "doctor": doctor_rows, "cases": cases}
    atomic_write_json(out / "gpu-report.json", data)
    extra = [c["name"] for c in cases if not c["ok"] and c.get("optional")]
    head = "FAILED" if not ok else f"passed; not counted: {', '.join(extra)} failed" if extra else "all cases passed"
    lines = [f"# nmtkit first GPU run: {head}", "",
             f"{data['when']}; shape {args.shape}, {args.batch} sentences per GPU, {args.steps} timed steps.", "",
             "## Machine", "", *(f"- {k}: {v}" for k, v in facts.items()), "", "## doctor", "",
             *(f"- {'ok  ' if r['ok'] else 'FAIL'} {r['name']}: {r['value']}" for r in doctor_rows), "",
             "## Cases", "", "| case | result | ms/step | tokens/s | MFU | peak GPU GiB | projected GiB | "
             "micro-batches | KEEP implied (shipped) | loss scale | NCCL transport |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        r = c["results"][0] if c["results"] else {}
        cell = lambda k, f: f.format(r[k]) if r.get(k) is not None else "-"  # noqa: E731
        result = "ok" if c["ok"] else ("FAILED, not counted (" + c["optional"] + "): " if c.get("optional")
                                       else "FAILED: ") + (c["error"] or "")[:200]
        lines.append(f"| {c['name']} | {result} | "
                     f"{cell('ms_per_step', '{:.1f}')} | {cell('tokens_per_sec', '{:,.0f}')} | "
                     f"{cell('mfu', '{:.1%}')} | {cell('gpu_mem_gb', '{:.1f}')} | {cell('projected_gb', '{:.1f}')} | "
                     f"{cell('micro_batches', '{}')} | {keep(c.get('memory'))} | {cell('loss_scale', '{:g}')} | "
                     f"{', '.join(c['transport']) or '-'} |")
    fits = [c["memory"] for c in cases if c.get("memory")]
    adopt = next((f["adopt"] for f in fits if f.get("adopt")), None)
    if adopt:
        lines += ["", "The measured slope implies the KEEP above; to adopt the first case's (then commit it with "
                  "this report):", "", f"    {adopt}"]
    elif fits:
        lines += ["", f"No KEEP to adopt: {fits[0].get('why_not')}."]
    atomic_write_text(out / "gpu-report.md", "\n".join(lines) + "\n")
    return out / "gpu-report.md"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=256, help="sentences per GPU")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="wmt16-base")
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per case")
    ap.add_argument("--out", type=Path, default=Path("."), help="where gpu-report.md and .json go")
    ap.add_argument("--allow-cpu", action="store_true", help="run on a CPU anyway (checks this script)")
    ap.add_argument("--fail", default="", metavar="CASE", help="make the named case fail (tests the exit status)")
    ap.add_argument("--cases", default="", metavar="NAME;NAME",
                    help="run only these cases (default: all); ';' between names, which hold commas")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--horovod", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--xla", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    tf = import_tf()
    gpus = tf.config.list_physical_devices("GPU")  # lists devices without initialising them
    if not gpus and not args.allow_cpu:
        from nmtkit.gpus import nvml_gpus, tensorflow_blind
        nvml, _ = nvml_gpus()
        if nvml:  # the broken-CUDA first run: a GPU is there and TensorFlow cannot use it
            print("bench/gpu.py: " + tensorflow_blind(nvml, tf.test.is_built_with_cuda(),
                                                     os.environ.get("CUDA_VISIBLE_DEVICES")))
            return 1
        print("bench/gpu.py: no GPU found (NVML and TensorFlow list none): nothing to measure on this machine. On a "
              "GPU VM: make gpu-check (see docs/instructors.md)")
        return 0
    from nmtkit import doctor
    from nmtkit.config import PROFILE_ENV
    # the GPU VM is for the homework: its disk need, not the tiny profile's (NMTKIT_PROFILE names another)
    rows = doctor.judge(doctor.gather(args.out, os.environ.get(PROFILE_ENV) or "wmt16-base"))
    print(doctor.format_table(rows))
    doctor_rows = [{"name": r.name, "value": r.value, "ok": r.ok, "fix": r.fix} for r in rows]
    if not all(r.ok for r in rows) and not args.allow_cpu:
        print("doctor found problems (above): fix them first; the figures would not mean much")
    print(f"\n{args.shape} shape, {args.batch} sentences x {SHAPES_LEN} tokens per GPU, {args.steps} timed steps "
          f"after {args.warmup}; {len(gpus)} GPU(s)\n")
    chosen = [c.strip() for c in args.cases.split(";") if c.strip()]
    unknown = sorted(set(chosen) - {name for name, _ in CASES})
    if unknown:
        print(f"bench/gpu.py: --cases {'; '.join(unknown)}: no such case; the cases: {'; '.join(n for n, _ in CASES)}")
        return 2
    cases = [run_case(args, name, **kw) for name, kw in CASES if not chosen or name in chosen]
    if len(gpus) >= 2:
        cases.append(run_case(args, "two Horovod ranks (NCCL)", xla=False, ranks=2))
    if cases and cases[0]["ok"]:
        r = cases[0]["results"][0]
        print(f"  precision: {r['reason']}; peak {r['peak'] / 1e12:.1f} TFLOP/s ({r['peak_source']})")
    report = write_report(args.out, args, versions(tf), doctor_rows, cases)
    failed = [c["name"] for c in cases if not c["ok"] and not c["optional"]]
    extra = [c["name"] for c in cases if not c["ok"] and c["optional"]]
    print(f"report: {report}" + (f"; FAILED: {', '.join(failed)}" if failed else "; every counted case passed")
          + (f"; failed, not counted: {', '.join(extra)}" if extra else ""))
    return 1 if failed or (not all(r.ok for r in rows) and not args.allow_cpu) else 0


if __name__ == "__main__":
    sys.exit(main())
