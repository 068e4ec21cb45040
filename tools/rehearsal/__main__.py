"""python -m tools.rehearsal [--out DIR] [--rate 1gbit] [--steps 12] [--no-kill]: the two-VM rehearsal."""
import argparse
import sys
from pathlib import Path

from tools.rehearsal.netns import unavailable
from tools.rehearsal.run import Options, default_out, rehearse


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.rehearsal", description=__doc__)
    ap.add_argument("--out", type=Path, default=None, help="report directory (default: runs/rehearsal-<time>)")
    ap.add_argument("--rate", default="1gbit", help="tc rate of the data link during training")
    ap.add_argument("--steps", type=int, default=12, help="steps of the short run")
    ap.add_argument("--kill", action=argparse.BooleanOptionalAction, default=True,
                    help="kill -9 a remote engine mid-run, then resume (the default; --no-kill skips it)")
    a = ap.parse_args(argv)
    why = unavailable()
    if why:
        print(f"rehearsal skipped: {why}", file=sys.stderr)
        return 0
    out = a.out or default_out()
    r = rehearse(Options(out=out, rate=a.rate, steps=a.steps, kill=a.kill))
    print(f"report: {out / 'report.md'} ({'green' if r['ok'] else 'RED'}, {r['seconds']} s)")
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
