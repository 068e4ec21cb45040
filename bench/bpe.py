"""Joint BPE, learn and apply: the kit's whole path (what prepare() does) vs subword-nmt, on one 20k-line corpus.

    python bench/bpe.py [--quick] [--lines 20000] [--merges 8000]

Corpus (offline): 10k English lines of varied technical prose from Vim's documentation (/usr/share/vim/*/doc, else
Python's pydoc topics) as the "en" side, and 10k German sentences of nmtkit.data.synthetic as the "de" side; the
synthetic corpus alone has ~2k word types, too few for 8k BPE pieces.

The kit's path, timed from files on disk to files on disk, as prepare() does it: learn = read train.en/train.de,
sample_sentences, train_bpe (writes spm.model + spm.vocab); apply = load the Tokenizer, encode both sides to ids,
flatten and write the .ids/.offsets arrays. subword-nmt (a bench-only install, .cache/subword-nmt) runs its
command line: learn-bpe -s MERGES on both sides, apply-bpe on each side. The last 3 lines are the ratios.
"""
from __future__ import annotations

import argparse
import glob
import itertools
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the kit of this checkout

from nmtkit.data import bpe, pipeline, synthetic
from nmtkit.data.text import read_parallel

ROOT = Path(__file__).resolve().parents[1]
SUBWORD_DIR = ROOT / ".cache" / "subword-nmt"


def english_lines(n: int) -> tuple[list[str], str]:
    """n varied English lines (>= 4 words), spread over the whole source so every topic shows up."""
    files = sorted(glob.glob("/usr/share/vim/vim*/doc/*.txt"))
    if files:
        text, where = "\n".join(Path(f).read_text(errors="replace") for f in files), "Vim's documentation"
    else:
        import pydoc_data.topics
        text, where = "\n".join(pydoc_data.topics.topics.values()), "Python's pydoc topics"
    lines = [" ".join(line.split()) for line in text.splitlines() if len(line.split()) >= 4]
    step = max(1, len(lines) // n)
    picked = lines[::step][:n]
    picked += list(itertools.islice(itertools.cycle(lines), n - len(picked)))  # a short source repeats
    return picked, where


def subword_nmt() -> list[str]:
    """The subword-nmt command (installed on first use into .cache/subword-nmt, never into the kit's venv)."""
    if not (SUBWORD_DIR / "subword_nmt").is_dir():
        print(f"installing subword-nmt into {SUBWORD_DIR} (bench-only) ...", flush=True)
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(SUBWORD_DIR), "subword-nmt"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"pip install --target {SUBWORD_DIR} subword-nmt failed: {r.stderr.strip()[-400:]}")
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(SUBWORD_DIR)!r}); "
            "from subword_nmt.subword_nmt import main; sys.argv[0] = 'subword-nmt'; main()"]


def kit_learn(d: Path, pieces: int) -> None:
    en, de = read_parallel(d / "train.en", d / "train.de")
    sample = bpe.sample_sentences([en, de], len(en) + len(de), seed=1234)
    bpe.train_bpe(sample, d, pieces, character_coverage=0.9999, threads=os.cpu_count() or 1)


def kit_apply(d: Path) -> int:
    tok = bpe.Tokenizer(d / bpe.MODEL)
    en, de = read_parallel(d / "train.en", d / "train.de")
    total = 0
    for lang, lines in (("en", en), ("de", de)):
        seqs = tok.encode_batch(lines, threads=os.cpu_count() or 1)
        lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        ids = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int32, count=int(lengths.sum()))
        pipeline.write_encoded(d, "train", lang, ids, lengths)
        total += len(ids)
    return total


def run_quiet(cmd: list[str], src: Path, dst: Path) -> None:
    """A subword-nmt command from file to file; its progress bar (stderr) shown only if it fails."""
    with open(src) as i, open(dst, "w") as o:
        r = subprocess.run(cmd, stdin=i, stdout=o, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[-3:])} failed: {r.stderr.strip()[-400:]}")


def timed(fn, *args) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="5k lines, 4k merges (checks the bench works)")
    ap.add_argument("--lines", type=int, default=20_000, help="corpus lines, both sides together")
    ap.add_argument("--merges", type=int, default=8_000, help="subword-nmt merges = sentencepiece pieces")
    args = ap.parse_args()
    lines, merges = (5_000, 4_000) if args.quick else (args.lines, args.merges)
    cmd = subword_nmt()

    half = lines // 2
    en, where = english_lines(half)
    de = [d for _, d in synthetic.generate(half, 0, 0, seed=1234)["train"]][:half]
    en = en[:len(de)]
    with tempfile.TemporaryDirectory(prefix="nmtkit-bench-bpe-") as tmp:
        d = Path(tmp)
        (d / "train.en").write_text("\n".join(en) + "\n")
        (d / "train.de").write_text("\n".join(de) + "\n")
        words = sum(len(line.split()) for line in en + de)
        print(f"corpus: {len(en) + len(de):,} lines ({len(en):,} English from {where}, {len(de):,} synthetic German), "
              f"{words:,} words, {len(set(w for line in en + de for w in line.split())):,} word types")

        t_kit_learn, _ = timed(kit_learn, d, merges)
        t_kit_apply, n_ids = timed(kit_apply, d)
        print(f"nmtkit (sentencepiece BPE, {merges:,} pieces): learn {t_kit_learn:.2f} s, apply {t_kit_apply:.2f} s "
              f"({n_ids:,} ids written)")

        both = d / "both.txt"
        both.write_text((d / "train.en").read_text() + (d / "train.de").read_text())
        t0 = time.perf_counter()
        run_quiet(cmd + ["learn-bpe", "-s", str(merges)], both, d / "codes")
        t_sw_learn = time.perf_counter() - t0
        t0 = time.perf_counter()
        for lang in ("en", "de"):
            run_quiet(cmd + ["apply-bpe", "-c", str(d / "codes")], d / f"train.{lang}", d / f"train.bpe.{lang}")
        t_sw_apply = time.perf_counter() - t0
        n_sw = sum(len(line.split()) for lang in ("en", "de")
                   for line in (d / f"train.bpe.{lang}").read_text().splitlines())
        print(f"subword-nmt ({merges:,} merges): learn {t_sw_learn:.2f} s, apply {t_sw_apply:.2f} s "
              f"({n_sw:,} subword tokens)")

    print(f"learn: nmtkit {t_sw_learn / t_kit_learn:.1f}x faster than subword-nmt (target >= 20x)")
    print(f"apply: nmtkit {t_sw_apply / t_kit_apply:.1f}x faster than subword-nmt (target >= 5x)")
    print(f"ratios: learn {t_sw_learn / t_kit_learn:.1f}x, apply {t_sw_apply / t_kit_apply:.1f}x "
          f"({'quick, ' if args.quick else ''}{lines:,} lines, {merges:,} merges)")


if __name__ == "__main__":
    main()
