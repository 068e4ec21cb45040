"""Your own parallel corpus (data.source = "files"): train/dev[/test] text files in, the kit's data directory out.

The files go through the same steps as the built-in corpora (prepare.py): this module only reads them, undoes
Moses tokenization where it finds it, cleans the training pairs and writes {train,dev,test}.{en,de}.

Moses-tokenized text (the homework's files: `isn &apos;t`, `&quot; word &quot; .`) is detokenized with
sacremoses, so the model learns, translates and is scored (sacreBLEU) on ordinary text. Detection, per file, on a
sample of lines: the file counts as tokenized when at least SPLIT_SHARE of the sampled lines have punctuation
split off a word (`word ,` or a final `word .`) or at least ESCAPE_SHARE have a Moses escape (`&apos;`, `&#124;`).
Untokenized English or German essentially never writes a space before a comma or a final full stop.
"""
from __future__ import annotations

import os
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from nmtkit.data.clean import clean_pairs
from nmtkit.data.text import read_lines
from nmtkit.errors import DataError
from nmtkit.files import sha256_file, write_lines_atomic

ROLES = ("train_src", "train_tgt", "dev_src", "dev_tgt", "test_src", "test_tgt")
FLAGS = {r: "--" + r.replace("_", "-") for r in ROLES}
ESCAPES = ("&apos;", "&quot;", "&amp;", "&lt;", "&gt;", "&#124;", "&#91;", "&#93;")
_ESCAPE = re.compile("|".join(map(re.escape, ESCAPES)))
_SPLIT = re.compile(r"\w (?:,(?= )|\.$)")   # "word , ..." or "... word ." at the end of the line
SAMPLE = 2000        # lines per file that the detection looks at (spread over the file)
SPLIT_SHARE = 0.20
ESCAPE_SHARE = 0.02
RULE = f">= {SPLIT_SHARE:.0%} of lines with split punctuation or >= {ESCAPE_SHARE:.0%} with Moses escapes"
PARALLEL_MIN = 100_000  # detokenize in worker processes from this many lines (sacremoses: 4-8k lines/s)
TOKENIZED = {"auto": None, "yes": True, "no": False}


@dataclass
class Detection:
    tokenized: bool
    split_share: float   # share of sampled lines with split punctuation
    escape_share: float  # share of sampled lines with Moses escapes
    lines: int           # lines sampled

    def why(self) -> str:
        return (f"{self.split_share:.0%} of {self.lines:,} sampled lines have split punctuation (' ,' ' .'), "
                f"{self.escape_share:.0%} Moses escapes (&apos; &quot; ...); rule: {RULE}")


def detect(lines: list[str], sample: int = SAMPLE) -> Detection:
    """Does this text look Moses-tokenized? Looks at up to `sample` lines spread evenly over the file."""
    step = max(1, len(lines) // sample)
    picked = [line for line in lines[::step][:sample] if line.strip()]
    n = max(1, len(picked))
    split = sum(1 for line in picked if _SPLIT.search(line.rstrip())) / n
    escape = sum(1 for line in picked if _ESCAPE.search(line)) / n
    return Detection(split >= SPLIT_SHARE or escape >= ESCAPE_SHARE, split, escape, len(picked))


@lru_cache(maxsize=None)
def _detokenizer(lang: str):
    try:
        from sacremoses import MosesDetokenizer
    except ImportError:
        raise DataError("Moses-tokenized input needs sacremoses: pip install sacremoses "
                        "(or set data.tokenized=no / --no-tokenized to keep the text as it is)") from None
    return MosesDetokenizer(lang=lang)


def _detok_chunk(args: tuple[str, list[str]]) -> list[str]:
    lang, lines = args
    md = _detokenizer(lang)
    return [md.detokenize(line.split(), unescape=True) for line in lines]


def detokenize(lines: list[str], lang: str) -> list[str]:
    """Moses detokenization with unescaping (`isn &apos;t` -> `isn't`); in worker processes for big files."""
    _detokenizer(lang)  # fail early, here, when sacremoses is missing
    workers = os.cpu_count() or 1
    if len(lines) < PARALLEL_MIN or workers == 1:
        return _detok_chunk((lang, lines))
    # joblib (a sacremoses dependency): its loky workers neither fork a kernel whose TensorFlow threads may hold
    # locks nor re-run the caller's __main__, as multiprocessing's spawn does with an unguarded script
    from joblib import Parallel, delayed
    size = -(-len(lines) // (workers * 4))
    parts = Parallel(n_jobs=workers)(delayed(_detok_chunk)((lang, lines[i:i + size]))
                                     for i in range(0, len(lines), size))
    return [line for part in parts for line in part]


# --- the corpus step ---------------------------------------------------------------------------------

def inputs(dc) -> dict[str, Path]:
    """role -> input file (absolute); checks that the set is complete and the settings valid."""
    given = {r: getattr(dc, r) for r in ROLES if getattr(dc, r)}
    need = [r for r in ROLES[:4] if r not in given]
    if need:
        raise DataError(f"data.source=files needs {', '.join('data.' + r for r in need)} "
                        f"({' '.join(FLAGS[r] + ' FILE' for r in need)})")
    if ("test_src" in given) != ("test_tgt" in given):
        raise DataError("give both data.test_src and data.test_tgt (--test-src and --test-tgt), or neither "
                        "(then dev is also the test set)")
    if dc.tokenized not in TOKENIZED:
        raise DataError(f"data.tokenized={dc.tokenized!r}: choose auto, yes or no")
    return {r: Path(p).expanduser().resolve() for r, p in given.items()}


def input_params(dc, out_dir: Path) -> dict:
    """What the corpus step depends on: each input's path and sha256 (a changed file redoes every step)."""
    outputs = {(Path(out_dir) / f"{s}.{lang}").resolve() for s in ("train", "dev", "test") for lang in ("en", "de")}
    files = {}
    for role, path in inputs(dc).items():
        if path in outputs:
            raise DataError(f"{path}: {FLAGS[role]} is a file that prepare writes; choose another data directory "
                            f"(--data / data.dir) than the one holding your corpus")
        try:
            files[role] = {"path": str(path), "sha256": sha256_file(path)}
        except FileNotFoundError:
            raise DataError(f"{path}: no such file; check {FLAGS[role]} (data.{role})") from None
        except IsADirectoryError:
            raise DataError(f"{path}: is a directory; {FLAGS[role]} (data.{role}) takes a text file") from None
    return {"inputs": files, "tokenized": dc.tokenized, "src_lang": dc.src_lang, "tgt_lang": dc.tgt_lang,
            "rule": RULE}


def _read_pair(paths: dict[str, Path], split: str) -> tuple[list[str], list[str]]:
    (s, fs), (t, ft) = [(paths[f"{split}_{side}"], FLAGS[f"{split}_{side}"]) for side in ("src", "tgt")]
    src, tgt = read_lines(s, hint=f"check {fs}"), read_lines(t, hint=f"check {ft}")
    if len(src) != len(tgt):
        raise DataError(f"{s} ({fs}) has {len(src):,} lines but {t} ({ft}) has {len(tgt):,}: line i of one "
                             f"must translate line i of the other; fix or re-export the pair of files")
    return src, tgt


def prepare_files(d: Path, dc, say=print) -> tuple[str, dict, dict]:
    """Read, detokenize where needed, clean (training only) and shuffle the corpus into d/{split}.{en,de}.

    Returns the step's message, the cleaning counts and what was done (for the manifest): per input, whether it
    was taken as Moses-tokenized and why; `test_is_dev` when no test split was given.
    """
    paths = inputs(dc)
    test_is_dev = "test_src" not in paths
    forced = TOKENIZED[dc.tokenized]
    text, detok, notes = {}, {}, []  # the notes are said once the corpus is usable: a refusal is one line
    for split in ("train", "dev") + (() if test_is_dev else ("test",)):
        src, tgt = _read_pair(paths, split)
        for side, lines, lang in (("src", src, dc.src_lang), ("tgt", tgt, dc.tgt_lang)):
            role = f"{split}_{side}"
            if forced is None:
                det = detect(lines)
                detok[role] = {"tokenized": det.tokenized, "why": det.why()}
            else:
                detok[role] = {"tokenized": forced, "why": f"data.tokenized={dc.tokenized}"}
            verdict = "Moses-tokenized, detokenizing" if detok[role]["tokenized"] else "not tokenized, kept as is"
            notes.append(f"  {paths[role]}: {verdict} ({detok[role]['why']})")
            text[role] = detokenize(lines, lang) if detok[role]["tokenized"] else lines
    if test_is_dev:
        notes.append("  no test split given (--test-src/--test-tgt): test.en/test.de are a copy of dev, so the test "
                     "BLEU is measured on dev")
        text["test_src"], text["test_tgt"] = text["dev_src"], text["dev_tgt"]
    train, counts = clean_pairs(zip(text["train_src"], text["train_tgt"]), dc.min_len, dc.max_len, dc.max_len_ratio)
    if not train:
        raise DataError(dropped_all(paths, counts, dc))
    random.Random(dc.seed).shuffle(train)
    write_lines_atomic(d / "train.en", (s for s, _ in train))
    write_lines_atomic(d / "train.de", (t for _, t in train))
    for split in ("dev", "test"):
        write_lines_atomic(d / f"{split}.en", text[f"{split}_src"])
        write_lines_atomic(d / f"{split}.de", text[f"{split}_tgt"])
    for note in notes:
        say(note)
    msg = (f"your corpus: {counts['kept']:,} training pairs kept of {counts['input']:,}, "
           f"{len(text['dev_src']):,} dev" + (" (also the test set)" if test_is_dev else
                                               f", {len(text['test_src']):,} test"))
    return msg, counts, {"detokenized": detok, "test_is_dev": test_is_dev}


def dropped_all(paths: dict[str, Path], counts: dict[str, int], dc) -> str:
    """The one line that says cleaning left no training pair: how many it dropped, why, and what to change."""
    why = {"empty": "an empty side", "too_short": f"a side under data.min_len={dc.min_len} words",
           "too_long": f"a side over data.max_len={dc.max_len} words",
           "ratio": f"a length ratio over data.max_len_ratio={dc.max_len_ratio:g}"}
    reasons = ", ".join(f"{counts[k]:,} for {v}" for k, v in why.items() if counts.get(k))
    return (f"{paths['train_src']} + {paths['train_tgt']}: cleaning dropped all {counts['input']:,} training "
            f"pair(s) ({reasons}); check the two files are aligned line by line (sentence n of one translates "
            f"sentence n of the other), or loosen the limit with --set data.max_len=... / data.max_len_ratio=...")


def summary(own: dict) -> str:
    """One line for the end of prepare: which inputs were detokenized, and whether test is dev."""
    detok = sorted(r for r, v in own.get("detokenized", {}).items() if v.get("tokenized"))
    parts = [f"Moses-detokenized: {', '.join(detok) if detok else 'nothing'}"]
    if own.get("test_is_dev"):
        parts.append("no test split: test.* is a copy of dev (test BLEU = dev BLEU)")
    return "your corpus: " + "; ".join(parts)
