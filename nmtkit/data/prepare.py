"""prepare(cfg): corpus -> cleaning -> joint BPE -> encoded splits -> data_stats.json, resumable step by step.

Every step writes its outputs atomically and then records them in manifest.json (parameters + size, mtime and
sha256 of each file). A rerun skips a step whose record matches its parameters and whose files are intact, and
redoes it otherwise; a step's parameters include the hashes of its inputs, so redoing one step redoes the
steps after it. A crash therefore never leaves a half-written file that a rerun (or training) takes as done.
"""
from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import time
from pathlib import Path

import numpy as np

import nmtkit.data.bpe as bpe_mod
import nmtkit.data.owncorpus as owncorpus
import nmtkit.data.pipeline as pipeline
import nmtkit.data.synthetic as synthetic
from nmtkit.data.clean import clean_pairs
from nmtkit.data.stats import FILE as STATS_FILE
from nmtkit.data.stats import DataStats
from nmtkit.data.text import read_lines, read_parallel
from nmtkit.errors import DataError
from nmtkit.files import atomic_write_json, read_json, sha256_file, write_lines_atomic

MANIFEST = pipeline.MANIFEST
STEPS = ["corpus", "bpe", "encode", "stats"]
VERSION = 1
TEXT_FILES = [f"{s}.{lang}" for s in pipeline.SPLITS for lang in (pipeline.SRC, pipeline.TGT)]


class Manifest:
    def __init__(self, data_dir: Path):
        self.path = data_dir / MANIFEST
        self.dir = data_dir
        try:
            d = read_json(self.path, DataError, missing={})
            self.steps = d["steps"] if d.get("version") == VERSION else {}
        except (DataError, KeyError, TypeError, AttributeError):
            self.steps = {}  # no or torn manifest: every step is redone

    def done(self, step: str, params: dict) -> str:
        """'' when the step is complete and current, else why it must run."""
        rec = self.steps.get(step)
        if rec is None:
            return "not done yet"
        if rec.get("params") != params:
            return "settings or inputs changed"
        for name, meta in rec["files"].items():
            path = self.dir / name
            try:
                st = path.stat()
            except FileNotFoundError:
                return f"{name} is missing"
            if st.st_size != meta["bytes"]:
                return f"{name} is incomplete or changed"
            if st.st_mtime_ns != meta["mtime_ns"] and sha256_file(path) != meta["sha256"]:
                return f"{name} changed"
        return ""

    def record(self, step: str, params: dict, files: list[str], info: dict | None = None) -> None:
        meta = {}
        for name in files:
            st = (self.dir / name).stat()
            meta[name] = {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256_file(self.dir / name)}
        self.steps[step] = {"params": params, "files": meta, "info": info or {}}
        atomic_write_json(self.path, {"version": VERSION, "steps": self.steps})

    def forget_from(self, step: str) -> None:
        """Drop this step and every later one: until they rerun, none of them counts as done."""
        later = STEPS[STEPS.index(step):]
        if any(s in self.steps for s in later):
            self.steps = {k: v for k, v in self.steps.items() if k not in later}
            atomic_write_json(self.path, {"version": VERSION, "steps": self.steps})

    def sha(self, step: str, name: str) -> str:
        return self.steps[step]["files"][name]["sha256"]


def _remove_leftovers(d: Path) -> None:
    """Temp files of a write that a crash interrupted (nmtkit.files and numpy writes use '.<name>...tmp')."""
    for p in d.glob(".*.tmp"):
        p.unlink(missing_ok=True)


# --- steps -------------------------------------------------------------------------------------------

def _corpus_params(dc, d: Path) -> dict:
    p = {"source": dc.source, "seed": dc.seed, "min_len": dc.min_len, "max_len": dc.max_len,
         "max_len_ratio": dc.max_len_ratio}
    if dc.source == "synthetic":
        p.update(train_size=dc.train_size, dev_size=dc.dev_size, test_size=dc.test_size)
    if dc.source == "files":
        p.update(owncorpus.input_params(dc, d))  # the input files' paths and sha256
    elif dc.train_src:
        raise DataError(f"data.train_src is set but data.source={dc.source!r}: set data.source=files to prepare "
                        f"your own corpus (the CLI does so for --train-src)")
    return p


def _step_corpus(d: Path, dc, progress: bool) -> tuple[str, dict, dict]:
    """Write {train,dev,test}.{en,de}; returns the message, the cleaning counts and (own corpus) what was done."""
    if dc.source == "synthetic":
        splits = synthetic.generate(dc.train_size, dc.dev_size, dc.test_size, seed=dc.seed)
        train, counts = clean_pairs(splits["train"], dc.min_len, dc.max_len, dc.max_len_ratio)
        splits["train"] = train
        for split, pairs in splits.items():
            write_lines_atomic(d / f"{split}.en", (en for en, _ in pairs))
            write_lines_atomic(d / f"{split}.de", (de for _, de in pairs))
        msg = (f"generated {len(train):,}/{len(splits['dev']):,}/{len(splits['test']):,} synthetic pairs "
               f"(train/dev/test)")
    elif dc.source == "wmt16":
        from nmtkit.data import wmt
        counts = wmt.fetch_and_clean(d, dc, progress=progress)
        msg = f"WMT16 en-de: {counts['kept']:,} training pairs kept of {counts['input']:,}"
    elif dc.source == "files":
        return owncorpus.prepare_files(d, dc, say=print if progress else (lambda *a, **k: None))
    else:
        raise DataError(f"data.source={dc.source!r}: choose 'synthetic', 'wmt16' or 'files'")
    return msg, counts, {}


def _step_bpe(d: Path, dc) -> str:
    train_en, train_de = read_parallel(d / "train.en", d / "train.de")
    sample = bpe_mod.sample_sentences([train_en, train_de], dc.bpe_sample, dc.seed)
    coverage = 1.0 if dc.source == "synthetic" else 0.9999  # real text has rare characters best left to UNK
    bpe_mod.train_bpe(sample, d, dc.vocab_size, character_coverage=coverage, threads=os.cpu_count() or 1)
    return f"joint BPE, {dc.vocab_size:,} pieces, learned on {len(sample):,} sentences"


def _encode_lines(tok, lines: list[str], chunk: int = 200_000) -> tuple[np.ndarray, np.ndarray]:
    """Flat int32 ids and per-line lengths; in chunks, so WMT's millions of lines never sit in Python lists."""
    ids, lengths = [], []
    for i in range(0, len(lines), chunk):
        seqs = tok.encode_batch(lines[i:i + chunk], threads=os.cpu_count() or 1)
        lengths.append(np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs)))
        ids.append(np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int32, count=int(lengths[-1].sum())))
    if not ids:
        return np.zeros(0, np.int32), np.zeros(0, np.int64)
    return np.concatenate(ids), np.concatenate(lengths)


def _step_encode(d: Path) -> tuple[str, list[str]]:
    tok = bpe_mod.Tokenizer(d / bpe_mod.MODEL)
    counts, files = {}, []
    for split in pipeline.SPLITS:
        src, tgt = read_parallel(d / f"{split}.{pipeline.SRC}", d / f"{split}.{pipeline.TGT}")
        counts[split] = {"lines": len(src)}
        for lang, lines in ((pipeline.SRC, src), (pipeline.TGT, tgt)):
            ids, lengths = _encode_lines(tok, lines)
            counts[split][f"{lang}_tokens"] = int(len(ids))
            files += [p.name for p in pipeline.write_encoded(d, split, lang, ids, lengths)]
    # The header goes last: without it the arrays count as not encoded.
    files.append(pipeline.write_encoded_header(d, tok.sha256, counts).name)
    total = sum(c["lines"] for c in counts.values())
    return f"encoded {total:,} sentence pairs to ids", files


def _step_stats(d: Path, dc, cleaning: dict, max_positions: int) -> DataStats:
    files = {}
    words = {}
    for name in TEXT_FILES:
        lines = read_lines(d / name, allow_empty=True)
        files[name] = {"bytes": (d / name).stat().st_size, "lines": len(lines)}
        words[name] = sum(len(line.split()) for line in lines)
    tokens, hist, bin_w = {}, {}, 4
    tok = bpe_mod.Tokenizer(d / bpe_mod.MODEL)
    train_examples, too_long = 0, {}
    for split in pipeline.SPLITS:
        enc = pipeline.load_encoded(d, split, mmap=True)
        tokens[split] = {"en_words": words[f"{split}.en"], "de_words": words[f"{split}.de"],
                         "en_bpe": int(len(enc["en"][0])), "de_bpe": int(len(enc["de"][0]))}
        if split != "train":  # + EOS: what the encoder would have to hold
            too_long[split] = int(np.sum(np.diff(enc["en"][1]) + 1 > max_positions))
        if split == "train":
            le, ld = np.diff(enc["en"][1]), np.diff(enc["de"][1])
            train_examples = int(np.sum((le <= dc.max_tokens) & (ld <= dc.max_tokens)))
            top = int(max(le.max(initial=0), ld.max(initial=0)))
            for lang, lens in (("en", le), ("de", ld)):
                hist[lang] = np.bincount(lens // bin_w, minlength=top // bin_w + 1).astype(int).tolist()
    return DataStats(source=dc.source, files=files, tokens=tokens, cleaning=cleaning, vocab_size=tok.vocab_size,
                     spm_sha256=tok.sha256, max_tokens=dc.max_tokens, train_examples=train_examples,
                     hist_bin=bin_w, length_hist=hist, max_positions=max_positions, too_long=too_long)


def prepare(cfg, data_dir=None, force: bool = False, progress: bool = True) -> DataStats:
    """Make (or download), clean, learn BPE, encode and count the data; quick when already done.

    Introduced in notebook 01_data_prep_bpe."""
    dc = cfg.data
    d = Path(data_dir or dc.dir)
    with _exclusive(d):
        return _prepare(cfg, d, force, progress)


@contextlib.contextmanager
def _exclusive(d: Path):
    """One preparation of a data directory at a time (two kernels, notebooks graded side by side): the second
    waits, then finds the steps done instead of removing the first's temp files. The flock goes with its process."""
    if d.exists() and not d.is_dir():
        raise DataError(f"{d}: a file where the data directory belongs; pass a directory for --data (data.dir): a "
                        f"new one, or one `nmtkit prepare` made")
    d.mkdir(parents=True, exist_ok=True)
    fd = os.open(d, os.O_RDONLY)  # the directory itself is the lock: no file of ours in it, read-only ones too
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # a file system without flock on directories (some NFS): unguarded, as before
            pass
        yield
    finally:
        os.close(fd)


def _prepare(cfg, d: Path, force: bool, progress: bool) -> DataStats:
    dc = cfg.data
    _remove_leftovers(d)  # an interrupted earlier run's temp files (under the lock: not a live one's)
    man = Manifest(d)
    say = print if progress else (lambda *a, **k: None)
    n = len(STEPS)

    def run(i: int, step: str, params: dict, fn):
        why = "forced" if force else man.done(step, params)
        if not why:
            say(f"prepare [{i}/{n}] {step}: already done")
            return False
        man.forget_from(step)
        t0 = time.perf_counter()
        msg = fn()
        say(f"prepare [{i}/{n}] {step}: {msg} ({time.perf_counter() - t0:.1f} s)")
        return True

    corpus_params = _corpus_params(dc, d)

    def corpus():
        msg, counts, own = _step_corpus(d, dc, progress)
        man.record("corpus", corpus_params, TEXT_FILES, info={"cleaning": counts, **({"own": own} if own else {})})
        return msg
    run(1, "corpus", corpus_params, corpus)

    bpe_params = {"vocab_size": dc.vocab_size, "bpe_sample": dc.bpe_sample, "seed": dc.seed,
                  "train.en": man.sha("corpus", "train.en"), "train.de": man.sha("corpus", "train.de")}

    def learn():
        msg = _step_bpe(d, dc)
        man.record("bpe", bpe_params, [bpe_mod.MODEL, bpe_mod.VOCAB])
        return msg
    run(2, "bpe", bpe_params, learn)

    enc_params = {"spm": man.sha("bpe", bpe_mod.MODEL), **{f: man.sha("corpus", f) for f in TEXT_FILES}}

    def encode():
        msg, files = _step_encode(d)
        man.record("encode", enc_params, files)
        return msg
    run(3, "encode", enc_params, encode)

    max_pos = cfg.model.max_positions
    stats_params = {"encoded": man.sha("encode", pipeline.ENCODED), "max_tokens": dc.max_tokens,
                    "source": dc.source, "max_positions": max_pos}

    def stats():
        st = _step_stats(d, dc, man.steps["corpus"].get("info", {}).get("cleaning", {}), max_pos)
        st.save(d / STATS_FILE)
        man.record("stats", stats_params, [STATS_FILE])
        return f"{st.train_lines:,} training lines, {st.train_mb:.1f} MB"
    run(4, "stats", stats_params, stats)
    return _closing(d, dc, man, say)


def _closing(d: Path, dc, man: "Manifest", say) -> DataStats:
    """The data's statistics, and what the user should know about them (own corpus, sentences cut to fit)."""
    if dc.source == "files":
        say(owncorpus.summary(man.steps["corpus"].get("info", {}).get("own", {})))
    st = DataStats.load(d / STATS_FILE)
    if any(st.too_long.values()):
        say(f"prepare: {st.too_long.get('dev', 0):,} dev and {st.too_long.get('test', 0):,} test sentences are longer "
            f"than model.max_positions ({st.max_positions} BPE tokens with EOS); evaluation cuts them to fit")
    return st
