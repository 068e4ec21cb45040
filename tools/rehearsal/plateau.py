"""Question 2's long run, frozen: the tiny profile trained until dev BLEU stops improving (scripts/plateau-run.sh trains
it), shipped as nmtkit/reference/plateau-tiny/ with only its scalars (scalars.jsonl) and the per-sentence BLEU
statistics of the evaluations question 2's tests compare (bleu-stats.json: the last pair, and a pair from the run's
first third), with a manifest and a README. No translations, checkpoints or monitor samples.

    python -m tools.rehearsal.plateau --run runs/plateau/plateau-tiny --data runs/plateau/data
"""
from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from nmtkit import runs
from nmtkit.analysis.bleu import sentence_stats
from nmtkit.analysis.evidence import Options
from nmtkit.analysis.logs import load_run
from nmtkit.analysis.reference import MANIFEST, default_dir
from nmtkit.course.instructor.judgments import q2_pair
from nmtkit.files import atomic_write_json, atomic_write_text
from tools.rehearsal.lab import commit
from tools.rehearsal.reference import _machine, file_list, staged

NAME = "plateau-tiny"
TRAIN = ("train --profile tiny --data <data> --logdir <out>/plateau-tiny --fresh --set train.steps=3000 "
         "--set train.log_every=50 --set train.ckpt_every=0 --set eval.every=150 --set eval.dev_sentences=1000")


def compared(run, k: int) -> list[tuple[int, int]]:
    """The pairs the tests judge: the last evaluation against the one k before, and the last evaluation of the
    run's first third against the one k before it."""
    bleu = run.series("Eval_BLEU_Score")
    third = int(bleu[bleu["step"] <= bleu["step"].max() / 3]["step"].iloc[-1])
    return [q2_pair(bleu, k), q2_pair(bleu, k, third)]


def freeze(src: Path, dest: Path, wall_s: float | None = None) -> Path:
    run, k = load_run(src), Options().plateau_k
    pairs = compared(run, k)
    steps = sorted({s for p in pairs for s in p})
    stats = {str(s): sentence_stats(run, s).astype(int).tolist() for s in steps}

    def write(stage: Path) -> int:
        shutil.copyfile(src / runs.SCALARS, stage / runs.SCALARS)
        stage.chmod(0o755)  # package data, readable by all as the other shipped runs
        # one dev sentence's statistics a line: the file stays small and diffable
        rows = ",\n".join(f'  "{s}": [\n' + ",\n".join(f"   {json.dumps(r)}" for r in v) + "]"
                           for s, v in stats.items())
        atomic_write_text(stage / runs.BLEU_STATS, '{"what": "sacrebleu\'s BLEU statistics per dev sentence (hyp '
                          'length, ref length, matches and totals of 1-4-grams), per evaluation step",\n'
                          f' "stats": {{\n{rows}}}}}\n')
        atomic_write_text(stage / "README.md", readme(pairs, k, wall_s))
        atomic_write_json(stage / MANIFEST, {
            "what": "question 2's long run: the tiny profile until dev BLEU stops improving, one process",
            "command": f"scripts/plateau-run.sh (nmtkit {TRAIN}; python -m tools.rehearsal.plateau)",
            "made": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "commit": commit(), "machine": _machine(),
            "wall_s": wall_s, "compared": pairs, "k": k, "files": file_list(stage)})
        return sum(p.stat().st_size for p in stage.rglob("*") if p.is_file())
    return staged(dest, write)


def readme(pairs, k: int, wall_s) -> str:
    (a1, b1), (a2, b2) = pairs
    return (f"# {NAME}: question 2's long run\n\nThe tiny profile trained for 3,000 steps, dev BLEU on the dev split's "
            f"1,000 sentences every 150 steps, until it stopped improving (`scripts/plateau-run.sh`: `nmtkit {TRAIN}`, "
            f"then `python -m tools.rehearsal.plateau`){f', {wall_s:,.0f} s on 2 cores' if wall_s else ''}.\n\n"
            f"Shipped: scalars.jsonl and bleu-stats.json, the per-sentence BLEU statistics of the evaluations "
            f"question 2's rule compares (the evaluation k = {k} evaluations before the last against the last: "
            f"steps {a1} and {b1}; and a pair from the run's first third: {a2} and {b2}). Nothing else.\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="the trained run's directory")
    ap.add_argument("--data", type=Path, help="its data directory (unused: named for the record)")
    ap.add_argument("--wall-s", type=float, help="the training's wall time, for the README and the manifest")
    ap.add_argument("--dest", type=Path, default=default_dir(NAME))
    a = ap.parse_args(argv)
    print(f"frozen: {freeze(a.run, a.dest, a.wall_s)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
