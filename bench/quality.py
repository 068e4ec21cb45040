"""Quality bar for the tiny profile: BLEU on the synthetic test set after a time-boxed training run.

    .venv/bin/python bench/quality.py [--steps 1200] [--workdir /tmp/nmtkit-quality] [--set key=value ...]

Prepares the tiny data (if needed), trains `tiny` with the long schedule (the notebook uses the profile's
short default) and prints test BLEU, steps, training wall time and the whole command's wall time.
Target: BLEU >= 90 within 10 minutes of training on 2 CPU cores.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import nmtkit  # noqa: F401
from nmtkit import config

LONG_STEPS = 1200


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=LONG_STEPS, help="training steps (the long schedule)")
    p.add_argument("--workdir", default=os.environ.get("NMTKIT_BENCH_DIR", "/tmp/nmtkit-quality"))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)

    from nmtkit.data.prepare import prepare
    from nmtkit.training.loop import train
    work = Path(args.workdir)
    cfg = config.load("tiny", [f"train.steps={args.steps}", "eval.every=1000", *args.overrides])
    cfg.data.dir = str(work / "data")
    t0 = time.time()
    prepare(cfg, progress=False)
    run = work / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
    summary = train(cfg, run, progress=False)
    total = time.time() - t0
    print()
    print(f"tiny quality bench: test BLEU {summary.get('test_bleu', float('nan')):.2f} | chrF "
          f"{summary.get('test_chrf', float('nan')):.2f} | steps {summary['step']} | training "
          f"{summary['wall_time'] / 60:.1f} min | whole command {total / 60:.1f} min | "
          f"{summary.get('avg_step_time', 0) * 1000:.0f} ms/step | cores {os.cpu_count()}")
    print(f"sacrebleu: {summary.get('bleu_signature')}")
    print(f"target: BLEU >= 90 within 10 min of training -> "
          f"{'PASS' if summary.get('test_bleu', 0) >= 90 and summary['wall_time'] <= 600 else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
