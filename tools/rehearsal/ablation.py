"""The warm-up ablation question 6 reads: two short 1-rank runs of the tiny profile that differ only in
train.warmup_steps, each frozen into nmtkit/reference/<name>/ (nmtkit.analysis.ablation finds them).

    python -m tools.rehearsal.ablation --out runs/ablation --data workspace/data/tiny   # train both, then freeze
    python -m tools.rehearsal.ablation --out runs/ablation --data ... --freeze-only     # freeze earlier runs again

One process each (no rehearsal hosts: the schedule, not the network, is the subject), every 5 steps logged so that
each run's peak is on the curve. Frozen as the reference run is (tools.rehearsal.reference): the logs, the
checkpoint's listing in place of its data, machine paths replaced by placeholders, a manifest and a README.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from nmtkit import config, runs
from nmtkit.analysis import logs
from nmtkit.analysis import reference as shipped
from nmtkit.analysis.ablation import WARMUP_RUNS
from nmtkit.files import atomic_write_json, atomic_write_text
from tools.rehearsal.lab import commit
from tools.rehearsal.netns import RehearsalError
from tools.rehearsal.reference import COPY, COPY_GLOBS, _machine, _scrub, file_list, staged
from tools.rehearsal.run import CODE_ROOT

PROFILE = "tiny"
SHARED = {"train.log_every": 5}  # both runs: a logged point every 5 steps, so each run's peak step is logged
MAX_BYTES = 600_000  # both runs together: package data stays modest


def overrides(warmup: int) -> dict:
    return dict(SHARED, **{"train.warmup_steps": warmup})


def train_args(out: Path, data: Path, name: str, warmup: int | None = None) -> list[str]:
    """The `nmtkit train` arguments of one run (warm-up: WARMUP_RUNS[name] unless given)."""
    warmup = WARMUP_RUNS[name] if warmup is None else warmup
    sets = [a for k, v in overrides(warmup).items() for a in ("--set", f"{k}={v}")]
    return ["train", "--profile", PROFILE, "--data", str(data), "--logdir", str(out / name), "--fresh", *sets]


def train(out: Path, data: Path, plan: dict[str, int] | None = None) -> None:
    """The runs of `plan` (name -> warm-up; default both of WARMUP_RUNS), one after the other, each a fresh single
    process."""
    for name, warmup in (plan or WARMUP_RUNS).items():
        subprocess.run([sys.executable, "-m", "nmtkit.cli", *train_args(out, data, name, warmup)], check=True)


def copy_run(src: Path, dest: Path, places: dict[str, str]) -> None:
    """The files the analysis reads, machine paths replaced by placeholders, the checkpoint's listing for its data."""
    files = [src / f for f in COPY if (src / f).is_file()]
    files += [p for g in COPY_GLOBS for p in sorted(src.glob(g)) if p.is_file()]
    for p in files:
        text = _scrub(p.read_text(encoding="utf-8"), places)
        bad = [f for f in shipped.FORBIDDEN if f in text]
        if bad:
            raise RehearsalError(f"{p}: still names a path under {bad} after the placeholders")
        atomic_write_text(dest / p.relative_to(src), text)
    info = logs.checkpoint_info(src, with_variables=True)
    if info.prefix is None:
        raise RehearsalError(f"{src}: no readable checkpoint to list ({info.problem})")
    logs.write_checkpoint_listing(info, src, dest)


def readme(name: str, warmup: int, command: str) -> str:
    other = ", ".join(f"{n} (warm-up {w})" for n, w in WARMUP_RUNS.items() if n != name and w != warmup)
    return (f"# {name}: the tiny profile, one process, train.warmup_steps={warmup}\n\n"
            f"One of question 6's two warm-up ablation runs (notebook 05; `nk.warmup_runs()` finds them): the same "
            f"run as its twin {other}, same data, seed and steps, with only `train.warmup_steps` changed "
            f"(and `train.log_every=5` in both). Trained by `nmtkit "
            f"{' '.join(train_args(Path('<out>'), Path('<data>'), name, warmup))}` and frozen by `{command}`; "
            f"manifest.json says when, on what machine and at which commit.\n\n"
            f"Left out: the checkpoint's data (checkpoints/listing.json lists its files), TensorBoard event files "
            f"(scalars.jsonl has the same values), the tokenizer. Paths of the making machine are replaced by "
            f"`<out>`, `<data>`, `<repo>`, `<venv>`.\n")


def freeze(out: Path, data: Path, command: str, plan: dict[str, int] | None = None,
           dest_root: Path | None = None) -> list[Path]:
    """Freeze the runs of `plan` (default: both of WARMUP_RUNS) into nmtkit/reference/ (or `dest_root`)."""
    out, data = Path(out).resolve(), Path(data).resolve()
    places = {str(out): "<out>", str(data): "<data>", str(CODE_ROOT): "<repo>", sys.prefix: "<venv>"}
    made, total = [], 0
    for name, warmup in (plan or WARMUP_RUNS).items():
        src = out / name
        status = runs.read_status(src)
        if status.get("status") != "finished":
            raise RehearsalError(f"{src}: status {status.get('status')!r}; freeze only finished runs")

        def write(stage: Path, src=src, name=name, warmup=warmup, status=status) -> int:
            copy_run(src, stage, places)
            atomic_write_text(stage / "README.md", readme(name, warmup, command))
            made_at = status.get("updated")
            m = {"what": f"question 6's warm-up ablation: the tiny profile in one process, warm-up {warmup}",
                 "trained_by": "nmtkit " + " ".join(train_args(Path("<out>"), Path("<data>"), name, warmup)),
                 "command": command, "commit": commit(), "profile": PROFILE, "config_overrides": overrides(warmup),
                 "made": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(made_at)) if made_at else None,
                 "machine": _machine(),
                 "left_out": "checkpoint data (its listing is checkpoints/listing.json), TensorBoard event files "
                             "(the same scalars are in scalars.jsonl), spm.model/spm.vocab, the exported model",
                 "files": file_list(stage)}
            atomic_write_json(stage / shipped.MANIFEST, m)
            return sum(p.stat().st_size for p in stage.rglob("*") if p.is_file())
        made.append(staged(Path(dest_root) / name if dest_root else shipped.default_dir(name), write))
        total += sum(p.stat().st_size for p in made[-1].rglob("*") if p.is_file())
    if total > MAX_BYTES:
        raise RehearsalError(f"the ablation runs hold {total:,} B, over the {MAX_BYTES:,} B budget")
    return made


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.rehearsal.ablation", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="where the two runs are trained (one directory each)")
    ap.add_argument("--data", type=Path, required=True, help="the tiny profile's prepared data (nmtkit prepare)")
    ap.add_argument("--freeze-only", action="store_true", help="freeze runs trained earlier in --out")
    a = ap.parse_args(argv)
    config.profile(PROFILE)  # an unknown profile fails here, before any training
    if not a.freeze_only:
        train(a.out, a.data)
    made = freeze(a.out, a.data, "python -m tools.rehearsal.ablation --out <out> --data <data>"
                  + (" --freeze-only" if a.freeze_only else ""))
    for d in made:
        print(f"frozen: {d} ({sum(p.stat().st_size for p in d.rglob('*') if p.is_file()):,} B)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
