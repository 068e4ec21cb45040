"""The kit's GPU memory and speed figures checked on a GPU machine that has PyTorch but no TensorFlow, in one command
(a few minutes on one H100/H200):

    python bench/gpu_probe.py [--out DIR] [--shape wmt16-base] [--batches 64,128,256]

A PyTorch replica of the kit's own unfused training step (bench/gpu_probe_torch.py) at the profile's shapes (the
homework's longest sentences, 57 tokens each side, synthetic ids) measures: the peak memory of a step at 64, 128
and 256 sentences, in mixed_float16 and float32, dropout at the profile's rate and off; whether one micro-batch of
256 fits a 16 GB cap; a timed matmul against the kit's peak table's entry for this GPU; PyTorch's FLOP counter
against the kit's FLOP count. Each figure is written beside the kit's projection, fit()'s plan and the KEEP the
measured slope implies, with the ratio (bench/gpu_probe_report.py): gpu-probe.json and gpu-probe.md in --out.

Needs only PyTorch with CUDA and this checkout (the kit's TensorFlow-free modules): `pip install torch` into any
Python 3.10+ environment, never into the kit's (PyTorch is no dependency of the kit). Without torch or a GPU it
says so in one line, exits non-zero and still writes what it could (`--allow-cpu --shape tiny` runs the machinery
on a CPU: no memory figures, a check of this script).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from gpu_fit import SHAPES  # noqa: E402
from gpu_probe_report import compare, markdown, shape_of  # noqa: E402

from nmtkit.files import atomic_write_json, atomic_write_text  # noqa: E402

CAP_BYTES = 16e9  # a "16 GB" card (a T4 reports 15.0 GiB, a V100 16 GB 15.8): does 1 x 256 fit it?
PRECISIONS = ("mixed_float16", "float32")
FLOP_BATCH = 4  # the count depends on the shape alone: a small batch is enough


def measure(data: dict, args) -> None:
    """Fill `data` in place with what torch measures on its device (each part written as it completes)."""
    import gpu_probe_torch as pt
    torch = pt.torch
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    props = torch.cuda.get_device_properties(0) if cuda else None
    data["device"] = {"name": props.name if cuda else "CPU", "total_bytes": props.total_memory if cuda else None,
                      "capability": f"{props.major}.{props.minor}" if cuda else None, "torch": torch.__version__}
    cfg, vocab, length = shape_of(data)
    data["flops"] = pt.counted_flops(cfg, vocab, length, FLOP_BATCH, device)
    save(args.out, data)
    if not cuda and not args.allow_cpu:
        raise RuntimeError(f"PyTorch {torch.__version__} sees no CUDA GPU: wrote the FLOP count only")
    rates = sorted({cfg.model.dropout, 0.0}, reverse=True)
    for precision in PRECISIONS:
        for dropout in rates:
            for b in args.batches:
                run = pt.peak_step(cfg, vocab, length, b, precision, dropout, device)
                data["params"] = run.pop("params", data.get("params"))
                data["memory"].append(run)
                save(args.out, data)
        if cuda:  # a CPU has no allocator to cap
            capped = pt.peak_step(cfg, vocab, length, max(args.batches), precision, cfg.model.dropout, device,
                                  CAP_BYTES)
            capped.pop("params", None)
            data["cap"].append({**capped, "cap_bytes": CAP_BYTES})
        data["matmul"].append(pt.timed_matmul(precision, device, args.matmul_n))
        save(args.out, data)


def save(out: Path, data: dict) -> None:
    atomic_write_json(out / "gpu-probe.json", data)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=Path("."), help="where gpu-probe.json and gpu-probe.md go")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="wmt16-base")
    ap.add_argument("--batches", default="64,128,256", help="sentences per step, comma-separated")
    ap.add_argument("--vocab", type=int, default=0, help="vocabulary (default: the profile's)")
    ap.add_argument("--matmul-n", type=int, default=8192)
    ap.add_argument("--allow-cpu", action="store_true", help="run on a CPU anyway (checks this script)")
    args = ap.parse_args(argv)
    args.batches = sorted(int(b) for b in args.batches.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    from nmtkit import config
    cfg = config.load("wmt16-base", SHAPES[args.shape])
    data = {"probe": 1, "when": time.strftime("%Y-%m-%d %H:%M:%S"), "profile": "wmt16-base", "shape": args.shape,
            "vocab": args.vocab or cfg.data.vocab_size, "length": cfg.data.max_tokens + 1, "device": None,
            "memory": [], "cap": [], "matmul": [], "flops": None, "errors": []}
    failure = None
    try:
        measure(data, args)
    except ImportError as e:
        failure = f"no PyTorch here ({e}): pip install torch (with CUDA) into a scratch environment, not the kit's"
    except Exception as e:  # noqa: BLE001  one line, the JSON keeps what was measured before it
        failure = f"{type(e).__name__}: {e}"
    if failure:
        data["errors"].append(failure)
    save(args.out, data)
    atomic_write_text(args.out / "gpu-probe.md", markdown(compare(data)))
    if failure:
        print(f"bench/gpu_probe.py: FAILED: {failure}; what it measured: {args.out / 'gpu-probe.json'}")
        return 1
    print(f"bench/gpu_probe.py: report {args.out / 'gpu-probe.md'}, figures {args.out / 'gpu-probe.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
