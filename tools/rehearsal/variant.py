"""Record a graded variant: its own bottleneck-lab runs and warm-up ablation run, frozen into
nmtkit/reference/variant-<k>/ with a variant.json saying what differs (nmtkit.analysis.variants reads it).

    python -m tools.rehearsal.variant list                          # the plan, and which variants are installed
    python -m tools.rehearsal.variant record variant-3 --commit     # record one (as root), then git-commit it
    python -m tools.rehearsal.variant record --missing --commit --background   # every planned one not installed
    nmtkit variant record variant-3                                 # the same, from the instructor's kit

A variant changes what every graded figure of notebooks 04 and 05 is computed from: the model's shape (the
parameter count moves the FLOPs, the ring's bytes, the compute's share of a step), the slow and the ~200 Mbit/s
link rates, the short warm-up of question 6 and the data NIC's name. It records, on the rehearsal's two SSH hosts
(each pinned to a core, as tools.rehearsal.lab does): 2 x 2 ranks unshaped, at 1 Gbit/s, at the ~200 Mbit/s rate
(the variant's reference run: questions 4, 5, 11 and the lab's NIC part read it), at the slow rate with and
without fp16, 2 hosts x 1 rank at 1 Gbit/s and 1 rank alone, then one 1-rank run of the tiny profile with the short
warm-up (its twin, the default warm-up's run, is the practice variant's and shared).

Time: about 8-11 minutes a variant on 2 cores (bench/README.md "Graded variants" has each one's). The timings are
the lesson: record with nothing else on the machine (each variant waits, up to --quiet-wait seconds, for the
1-minute load average to fall below --max-load, and records the load it started at). Variants are recorded one
after the other; with --commit each is committed as soon as it is frozen, so a long session loses at most one.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from nmtkit import config
from nmtkit.analysis import variants
from nmtkit.model.memory import params_of
from tools.rehearsal import ablation
from tools.rehearsal.lab import STEPS, LabRehearsal, Spec, commit, freeze_all
from tools.rehearsal.netns import RehearsalError
from tools.rehearsal.reference import _machine, swap_in
from tools.rehearsal.run import CODE_ROOT, TINY, Options, rehearse


@dataclass(frozen=True)
class Plan:
    d_model: int
    d_ff: int
    slow: int        # Mbit/s: the lab's slowest link (with and without fp16)
    burst: int       # Mbit/s, 150-250: the reference run's link (the lab's bursts part reads it at about 200)
    warmup: int      # question 6's short warm-up (a multiple of the ablation's log interval, 5)
    iface: str       # the data NIC's name on both hosts

    def model(self) -> dict:
        return {"model.d_model": self.d_model, "model.d_ff": self.d_ff}

    def params(self) -> int:
        return params_of(config.load("tiny", dict(TINY, **self.model())).model, TINY["data.vocab_size"])

    def runs(self) -> tuple[Spec, ...]:
        slow, burst = f"{self.slow}mbit", f"{self.burst}mbit"
        return (Spec("lab-unshaped", 2, 2, None), Spec("lab-1gbit", 2, 2, "1gbit"),
                Spec(f"lab-{burst}", 2, 2, burst), Spec(f"lab-{slow}", 2, 2, slow),
                Spec(f"lab-{slow}-fp16", 2, 2, slow, "fp16"), Spec("lab-2x1-1gbit", 2, 1, "1gbit"),
                Spec("lab-1x1", 1, 1, None))


# Parameter counts 0.60M-1.99M, each at least 13% from the next (question 11's bytes are graded at 10%); none the
# practice variant's shape (256/512: 1.40M), rates (50, 100, 200 Mbit/s), warm-up (25) or NIC (nmt0).
PLANS = {
    "variant-1": Plan(160, 384, 60, 160, 10, "ens5"),
    "variant-2": Plan(160, 512, 90, 240, 15, "eth1"),
    "variant-3": Plan(192, 384, 70, 180, 20, "enp0s8"),
    "variant-4": Plan(192, 640, 80, 220, 30, "ens4"),
    "variant-5": Plan(224, 640, 60, 240, 35, "eno2"),
    "variant-6": Plan(256, 640, 90, 160, 40, "enp3s0"),
    "variant-7": Plan(288, 576, 70, 220, 50, "eth2"),
    "variant-8": Plan(320, 512, 80, 180, 60, "ens6"),
}


def wait_quiet(max_load: float, wait_s: float) -> float:
    """Wait until the 1-minute load average is below `max_load` (at most `wait_s` seconds); the load it starts at."""
    end = time.time() + wait_s
    while os.getloadavg()[0] >= max_load and time.time() < end:
        time.sleep(10)
    return round(os.getloadavg()[0], 2)


def record(name: str, out: Path, steps: int = STEPS, max_load: float = 0.5, wait_s: float = 600) -> Path:
    """Record variant `name` of PLANS in `out` and freeze it into nmtkit/reference/<name>/ (replacing an earlier
    recording of it only: a directory without variant.json is not ours)."""
    plan, t0 = PLANS[name], time.time()
    dest = variants.ROOT / name
    if dest.exists() and not (dest / variants.FILE).is_file():
        raise RehearsalError(f"{dest}: exists and holds no {variants.FILE}; not ours to replace")
    load0 = wait_quiet(max_load, wait_s)
    out = Path(out).resolve() / name
    LabRehearsal.runs, LabRehearsal.model, LabRehearsal.data_iface = plan.runs(), plan.model(), plan.iface
    LabRehearsal.only = ()
    cmd = f"python -m tools.rehearsal.variant record {name}"
    made = {"command": cmd, "commit": commit(), "made": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": _machine(), "steps": steps}
    r = rehearse(Options(out=out / "lab", rate=None, measure_rates=(), steps=steps, kill=False, compressions=()),
                 LabRehearsal, made)
    if not r["ok"]:
        raise RehearsalError(f"{out / 'lab' / 'report.md'}: the variant's lab rehearsal was not green")
    lab_s = time.time() - t0
    data = out / "ablation-data"
    from nmtkit.data.prepare import prepare
    prepare(config.load(ablation.PROFILE, {"data.dir": str(data)}), progress=False)
    short = {f"ablation-warmup-{plan.warmup}": plan.warmup}
    ablation.train(out / "ablation", data, short)
    stage = Path(tempfile.mkdtemp(dir=variants.ROOT, prefix=f".{name}.partial-"))
    try:
        freeze_all(out / "lab", stage)
        ablation.freeze(out / "ablation", data, f"{cmd} (its ablation run)", short, stage)
        variants.write_info(stage, {
            "name": name, "reference": f"lab-{plan.burst}mbit",
            "ablation": [variants.PRACTICE_INFO["ablation"][0], f"ablation-warmup-{plan.warmup}"],
            "plan": asdict(plan), "params": plan.params(), "runs": [s.name for s in plan.runs()],
            "what": "a graded variant: the lab's runs and the reference run at this model shape, link rates and NIC "
                    "name, and question 6's short warm-up run; the default warm-up's run is the practice variant's",
            **made, "load_avg_1m_at_start": load0, "seconds": {"lab": round(lab_s), "all": round(time.time() - t0)}})
        swap_in(stage, dest)
    finally:
        if stage.exists():
            shutil.rmtree(stage)
    return dest


def git_commit(dest: Path) -> str:
    """Commit the frozen variant alone (its directory); the commit's hash, or why it was not made."""
    git = ["git", "-C", str(CODE_ROOT)]
    add = subprocess.run([*git, "add", "--", str(dest)], capture_output=True, text=True)
    msg = f"{dest.name}: a graded variant recorded by tools.rehearsal.variant ({variants.info(dest.name)['made']})"
    done = add.returncode == 0 and subprocess.run([*git, "commit", "-q", "-m", msg, "--", str(dest)],
                                                  capture_output=True, text=True).returncode == 0
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return head if done else f"not committed ({(add.stderr or 'git commit failed').strip()[:80]}): commit it by hand"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.rehearsal.variant", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the planned variants, which are installed, and what each varies")
    rec = sub.add_parser("record", help="record variants (as root; about 8-11 minutes each on 2 cores)")
    rec.add_argument("names", nargs="*", help=f"variants to record ({', '.join(PLANS)})")
    rec.add_argument("--missing", action="store_true", help="every planned variant not installed yet")
    rec.add_argument("--out", type=Path, default=Path("runs") / "variants", help="where the raw runs go")
    rec.add_argument("--steps", type=int, default=STEPS, help="training steps of every lab run")
    rec.add_argument("--commit", action="store_true", help="git-commit each variant as soon as it is frozen")
    rec.add_argument("--background", action="store_true", help="detach; the log goes to <out>/record.log")
    rec.add_argument("--max-load", type=float, default=0.5, help="start a variant when the 1-min load is below")
    rec.add_argument("--quiet-wait", type=float, default=600, help="seconds to wait for that, then record anyway")
    a = ap.parse_args(argv)
    installed = set(variants.graded())
    if a.cmd == "list":
        for n, p in PLANS.items():
            print(f"{n}: {'installed' if n in installed else 'not recorded'}; d_model {p.d_model}, d_ff {p.d_ff} "
                  f"({p.params():,} parameters), links {p.slow} and {p.burst} Mbit/s, warm-up {p.warmup}, "
                  f"NIC {p.iface}")
        return 0
    names = [n for n in PLANS if n not in installed] if a.missing else a.names
    unknown = [n for n in names if n not in PLANS]
    if unknown or not names:
        print(f"record: name variants ({', '.join(PLANS)}) or --missing" + (f"; unknown: {unknown}" if unknown
                                                                                 else ""), file=sys.stderr)
        return 2
    from tools.rehearsal.netns import unavailable
    why = unavailable()
    if why:
        print(f"variants not recorded: {why}", file=sys.stderr)
        return 1
    if a.background:
        a.out.mkdir(parents=True, exist_ok=True)
        argv = [x for x in (argv if argv is not None else sys.argv[1:]) if x != "--background"]
        with open(a.out / "record.log", "ab") as log:
            p = subprocess.Popen([sys.executable, "-m", "tools.rehearsal.variant", *argv], cwd=CODE_ROOT,
                                 stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 start_new_session=True)
        print(f"recording {', '.join(names)} in the background (pid {p.pid}); log: {a.out / 'record.log'}")
        return 0
    for n in names:
        t0 = time.time()
        dest = record(n, a.out, a.steps, a.max_load, a.quiet_wait)
        size = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
        done = git_commit(dest) if a.commit else "not committed (no --commit)"
        print(f"{n}: frozen into {dest} ({size:,} B) in {time.time() - t0:.0f} s; {done}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
