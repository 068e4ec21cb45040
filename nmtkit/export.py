"""Export a trained run as a SavedModel whose signature maps a batch of English strings to German strings.

Tokenisation must live inside the graph, but sentencepiece has no TensorFlow ops here (no tensorflow-text) and a
`tf.py_function` is not serialisable. So the BPE is *precomputed*: sentencepiece never merges across
whitespace, so a sentence's pieces are the concatenation of its words' pieces, and every word seen on the source
side of the training corpus (up to `max_words`, most frequent first) is encoded once, here, with the real
sentencepiece model. The SavedModel holds that word -> ids table (`tf.lookup.StaticHashTable`) and splits input
on whitespace with `tf.strings`. A word not in the table falls back to "▁" + one piece per character, a valid
segmentation that the model understands, though not always the one sentencepiece would pick (it would merge
known character pairs). Detokenisation is exact: a gather of piece strings, joined, "▁" -> space.
Sentencepiece's NFKC normalisation is not reproduced (input is expected as clean text, like the corpus).

    path = export("runs/baseline")                 # -> runs/baseline/saved_model
    out = tf.saved_model.load(str(path)).signatures["serving_default"](sentences=tf.constant(["Hello ."]))
"""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from nmtkit import runs
from nmtkit.files import atomic_write_json
from nmtkit.model.decode import search
from nmtkit.model.transformer import BOS, EOS, PAD, UNK
from nmtkit.keras2 import import_tf

tf = import_tf()

WORD_BOUNDARY = "\u2581"  # sentencepiece's "▁"


class ExportError(RuntimeError):
    """The run cannot be exported (no checkpoint, no BPE model); the message says what to do."""


def _vocabulary_words(data_dir: Path, max_words: int) -> list[str]:
    """Most frequent whitespace-separated words of the training sources."""
    path = Path(data_dir) / "train.en"
    if not path.exists():
        raise ExportError(f"{path}: missing; the export precomputes the BPE of the training words. Pass the "
                          "prepared data directory (data_dir=..., or run from where config.json's data.dir points)")
    counts: collections.Counter = collections.Counter()
    with open(path, encoding="utf-8") as f:
        for line in f:
            counts.update(line.split())
    return [w for w, _ in counts.most_common(max_words)]


class Exported(tf.Module):
    """What the SavedModel holds: the Transformer, the word -> ids table, the piece strings."""

    def __init__(self, model, tokenizer, words: Sequence[str], beam_size: int, alpha: float, max_extra_len: int):
        super().__init__()
        self.model = model
        sp = tokenizer.sp
        pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
        keys = list(words)
        values = [" ".join(str(i) for i in tokenizer.encode(w)) for w in keys]
        self.words = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(keys or [""], tf.string),
                                                tf.constant(values or [""], tf.string)), default_value="")
        # single characters for the fallback; "▁" + char for a word's first character when the vocab has it
        chars = {p: i for i, p in enumerate(pieces) if len(p) == 1 and i > EOS}
        self.chars = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant(list(chars), tf.string),
                                                tf.constant([str(i) for i in chars.values()], tf.string)),
            default_value=str(UNK))
        self.boundary_id = str(sp.piece_to_id(WORD_BOUNDARY))
        text = [p for p in pieces]
        for special in (PAD, BOS, EOS):
            text[special] = ""
        text[UNK] = " \u2047 "  # what sentencepiece prints for <unk>
        self.pieces = tf.constant(text, tf.string)
        self.beam_size, self.alpha = beam_size, alpha
        self.max_extra_len, self.max_positions = max_extra_len, model.cfg.max_positions

    def encode(self, sentences):
        words = tf.strings.split(sentences)                       # ragged [B, W]
        flat = words.flat_values
        known = self.words.lookup(flat)
        chars = tf.strings.unicode_split(flat, "UTF-8")
        fallback = tf.strings.reduce_join(self.chars.lookup(chars), axis=-1, separator=" ")
        fallback = tf.strings.join([tf.fill(tf.shape(flat), self.boundary_id), fallback], separator=" ")
        ids_text = tf.where(tf.not_equal(known, ""), known, fallback)
        per_sentence = tf.strings.reduce_join(words.with_flat_values(ids_text), axis=1, separator=" ")
        ids = tf.strings.to_number(tf.strings.split(per_sentence), tf.int32)[:, :self.max_positions - 1]
        eos = tf.fill([tf.shape(sentences)[0], 1], EOS)
        return tf.concat([ids, tf.RaggedTensor.from_tensor(eos)], axis=1).to_tensor(PAD)

    def decode(self, ids):
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS), tf.int32), axis=1), 0)
        text = tf.where(before_eos, tf.gather(self.pieces, ids), "")
        text = tf.strings.regex_replace(tf.strings.reduce_join(text, axis=1), WORD_BOUNDARY, " ")
        return tf.strings.strip(tf.strings.regex_replace(text, " +", " "))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")])
    def translate(self, sentences):
        src = self.encode(sentences)
        max_len = tf.minimum(tf.shape(src)[1] + self.max_extra_len, self.max_positions)
        ids, logp = search(self.model, src, max_len, self.beam_size, self.alpha)
        return {"translations": self.decode(ids), "log_prob": logp}


MARKER = ".nmtkit-export"  # in every export: the only kind of existing directory an export replaces


def _is_export(path: Path) -> bool:
    """A previous export (ours carry MARKER; older kit versions' exports have nmtkit_export.json + the model)."""
    return (path / MARKER).is_file() or ((path / "nmtkit_export.json").is_file() and (path / "saved_model.pb").is_file())


def _check_out(run: Path, out: Path) -> None:
    """Refuse an --out whose replacement would delete something the export did not make."""
    r, o = run.resolve(), out.resolve()
    if o == r or o in r.parents:
        raise ExportError(f"--out {out}: is the run directory {run} or holds it, so replacing it would delete the "
                          f"run; choose another directory (default: {run}/saved_model)")
    if r in o.parents and o != r / "saved_model":
        raise ExportError(f"--out {out}: is inside the run directory {run}, beside its checkpoints and logs; choose "
                          f"a directory outside it, or leave --out out for {run}/saved_model")
    if (out.exists() or out.is_symlink()) and not (out.is_dir() and (_is_export(out) or not any(out.iterdir()))):
        raise ExportError(f"--out {out}: exists and is not a previous nmtkit export (no {MARKER} in it); nothing was "
                          f"changed. Choose a new directory, or move that one away yourself")


def export(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None, *, which: str = "best",
           data_dir: str | os.PathLike | None = None, max_words: int = 200_000) -> Path:
    """Write `<run>/saved_model` (or `out_dir`) from the run's best checkpoint; returns its path.

    `data_dir`: the prepared data (for the training words); default the run's config data.dir.
    `out_dir` may be new, empty or a previous export (replaced: rename aside, rename into place, delete the old);
    anything else, the run directory and other places inside it are refused with ExportError."""
    import shutil
    import tempfile
    from nmtkit.train.checkpoints import TrainError, load_model
    run = Path(run_dir)
    if not (run / runs.CONFIG).exists():
        raise ExportError(f"{run}/{runs.CONFIG}: not a run directory (train first, or pass the run's --logdir)")
    out = Path(out_dir) if out_dir else run / "saved_model"
    _check_out(run, out)  # before the slow part
    try:
        restored = load_model(run, which)
    except TrainError as e:
        raise ExportError(str(e)) from None
    model, tok, cfg, ckpt = restored.model, restored.tokenizer, restored.config, restored.checkpoint
    words = _vocabulary_words(Path(data_dir or cfg.data.dir), max_words)
    module = Exported(model, tok, words, cfg.eval.beam_size, cfg.eval.length_penalty, cfg.eval.max_extra_len)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide the model from the other users of a shared machine
    old = out.with_name(f".{out.name}.old{tmp.suffixes[-2]}")  # same random part as tmp: never an existing name
    logger, level = tf.get_logger(), tf.get_logger().level
    logger.setLevel("ERROR")  # INFO "Assets written to <absolute path>"; WARNING about get_config we do not use
    try:
        tf.saved_model.save(module, str(tmp), signatures={"serving_default": module.translate})
        atomic_write_json(tmp / "nmtkit_export.json", {
            "checkpoint": os.path.relpath(ckpt, run), "words_in_table": len(words), "beam_size": cfg.eval.beam_size,
            "length_penalty": cfg.eval.length_penalty, "vocab_size": tok.vocab_size,
            "signature": "serving_default(sentences: string[batch]) -> translations: string[batch], log_prob"})
        atomic_write_json(tmp / MARKER, {"run": str(run.resolve()), "checkpoint": os.path.relpath(ckpt, run)})
        _check_out(run, out)  # again: it may have changed during the export
        if out.exists():
            os.rename(out, old)  # the previous export stays whole until the new one is in place
        os.rename(tmp, out)  # a half-written export never sits at the final path
    except BaseException:
        if old.exists() and not out.exists():
            os.rename(old, out)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        logger.setLevel(level)
    if old.exists():
        shutil.rmtree(old)
    return out


def load(path: str | os.PathLike):
    """The serving function of an exported model: fn(list[str]) -> list[str]."""
    sig = tf.saved_model.load(str(path)).signatures["serving_default"]

    def translate(sentences: Sequence[str]) -> list[str]:
        out = sig(sentences=tf.constant(list(sentences), tf.string))["translations"]
        return [s.decode("utf-8") for s in out.numpy()]
    return translate


def translate_in_fresh_process(path: str | os.PathLike, sentences: Sequence[str]) -> list[str]:
    """Load the SavedModel in a new Python process (no nmtkit model code) and translate: the round-trip check."""
    code = ("import os, sys, json; os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3'); import tensorflow as tf; "
            "f = tf.saved_model.load(sys.argv[1]).signatures['serving_default']; "
            "s = json.loads(sys.stdin.read()); "
            "out = f(sentences=tf.constant(s))['translations'].numpy(); "
            "print('\\n@@' + json.dumps([x.decode('utf-8') for x in out]))")
    proc = subprocess.run([sys.executable, "-c", code, str(path)], input=json.dumps(list(sentences)),
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise ExportError(f"{path}: loading the SavedModel in a fresh process failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.rsplit("\n@@", 1)[1])


def latency(translate, sentences: Sequence[str], batch_size: int = 1, repeats: int = 1) -> dict:
    """Seconds per sentence translating `sentences` in batches of `batch_size` (after one warm-up call)."""
    translate(list(sentences[:batch_size]))
    t0 = time.perf_counter()
    for _ in range(repeats):
        for i in range(0, len(sentences), batch_size):
            translate(list(sentences[i:i + batch_size]))
    total = time.perf_counter() - t0
    n = len(sentences) * repeats
    return {"sentences": n, "batch_size": batch_size, "seconds": total, "ms_per_sentence": 1000 * total / n}
