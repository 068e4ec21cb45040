"""Export a trained run as a SavedModel whose signature maps a batch of English strings to German strings.

Tokenisation lives inside the graph as sentencepiece itself: `tensorflow_text.SentencepieceTokenizer`, built from
the bytes of the run's own `spm.model`, tokenises and detokenises with the same model file as training (same
pieces, same NFKC normalisation, any word). `tensorflow-text` is imported only here, when exporting or loading:
the rest of the kit works without it. The SavedModel also holds the beam search, so serving is strings -> strings;
a reader needs `import tensorflow_text` (it registers the sentencepiece ops) before `tf.saved_model.load`.

    path = export("runs/baseline")                 # -> runs/baseline/saved_model
    translate = load(path); translate(["Hello ."])
    exported_ids(path, ["Hello ."])                # the ids the exported graph feeds its encoder
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from nmtkit import runs
from nmtkit.errors import ExportError
from nmtkit.files import atomic_write_json
from nmtkit.keras2 import import_tf
from nmtkit.model.decode import search
from nmtkit.model.transformer import BOS, EOS, PAD

tf = import_tf()

TF_TEXT_PIN = "tensorflow-text==2.18.1"  # the release built for TensorFlow 2.18 (pyproject.toml pins the same)


def _tensorflow_text():
    """tensorflow_text, or an ExportError in one line (no wheel for this platform, or a build for another TF)."""
    try:
        import tensorflow_text
    except (ImportError, tf.errors.NotFoundError, OSError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ExportError(f"export needs tensorflow-text for in-graph sentencepiece and cannot import it ({first}); "
                          f"`pip install {TF_TEXT_PIN}`, built for TensorFlow 2.18 (wheels: Linux x86-64/aarch64, "
                          f"macOS arm64; elsewhere export on such a machine); training and translating work without it"
                          ) from None
    return tensorflow_text


class Exported(tf.Module):
    """What the SavedModel holds: the Transformer, the sentencepiece model (as tensorflow-text ops), the search."""

    def __init__(self, model, spm_proto: bytes, beam_size: int, alpha: float, max_extra_len: int):
        super().__init__()
        text = _tensorflow_text()
        # the search's variables, not the Keras model: tracked as a model, SavedModel also traces every layer's own
        # call functions (Keras' legacy serialization), which doubled the export's and each load's time
        object.__setattr__(self, "model", model)
        self.weights = list(model.variables)
        # the same encoding as Tokenizer.encode: no BOS/EOS from sentencepiece, EOS appended below (as in training)
        self.sp = text.SentencepieceTokenizer(model=spm_proto, out_type=tf.int32, add_bos=False, add_eos=False)
        self.beam_size, self.alpha = beam_size, alpha
        self.max_extra_len, self.max_positions = max_extra_len, model.cfg.max_positions

    def encode(self, sentences):
        """[B] strings -> [B, S] int32: pieces cut to max_positions - 1, then EOS, PAD-padded (Translator.encode)."""
        ids = self.sp.tokenize(sentences)[:, :self.max_positions - 1]
        eos = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(sentences)[0], 1], EOS))
        return tf.concat([ids, eos], axis=1).to_tensor(PAD)

    def decode(self, ids):
        """[B, T] ids -> [B] strings as Tokenizer.decode: stop at the first EOS, drop PAD and BOS, sentencepiece."""
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS), tf.int32), axis=1), 0)
        keep = before_eos & tf.not_equal(ids, PAD) & tf.not_equal(ids, BOS)
        return self.sp.detokenize(tf.ragged.boolean_mask(ids, keep))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")], autograph=False)
    def tokenize(self, sentences):
        return {"ids": self.encode(sentences)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="sentences")], autograph=False)
    def translate(self, sentences):
        src = self.encode(sentences)
        max_len = tf.minimum(tf.shape(src)[1] + self.max_extra_len, self.max_positions)
        ids, logp = search(self.model, src, max_len, self.beam_size, self.alpha)
        return {"translations": self.decode(ids), "log_prob": logp}


MARKER = ".nmtkit-export"  # in every export: the only kind of existing directory an export replaces


def _is_export(path: Path) -> bool:
    """A previous export (ours carry MARKER; older kit versions' exports have nmtkit_export.json + the model)."""
    return (path / MARKER).is_file() or ((path / "nmtkit_export.json").is_file()
                                         and (path / "saved_model.pb").is_file())


def _check_out(run: Path, out: Path) -> None:
    """Refuse an --out whose replacement would delete something the export did not make."""
    r, o = run.resolve(), out.resolve()
    if o == r or o in r.parents:
        raise ExportError(f"--out {out}: is the run directory {run} or holds it, so replacing it would delete the "
                          f"run; choose another directory (default: {run}/saved_model)")
    if r in o.parents and o != r / runs.SAVED_MODEL:
        raise ExportError(f"--out {out}: is inside the run directory {run}, beside its checkpoints and logs; choose "
                          f"a directory outside it, or leave --out out for {run}/saved_model")
    if (out.exists() or out.is_symlink()) and not (out.is_dir() and (_is_export(out) or not any(out.iterdir()))):
        raise ExportError(f"--out {out}: exists and is not a previous nmtkit export (no {MARKER} in it); nothing was "
                          f"changed. Choose a new directory, or move that one away yourself")


def export(run_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None, *, which: str = "best") -> Path:
    """Write `<run>/saved_model` (or `out_dir`) from the run's best checkpoint and its own spm.model; returns its path.

    `out_dir` may be new, empty or a previous export (replaced: rename aside, rename into place, delete the old);
    anything else, the run directory and other places inside it are refused with ExportError.

    Introduced in notebook 06_inference_export."""
    import shutil
    import tempfile

    from nmtkit.errors import TrainError
    from nmtkit.training.checkpoints import load_model
    run = Path(run_dir)
    if not (run / runs.CONFIG).exists():
        raise ExportError(f"{run}/{runs.CONFIG}: not a run directory (train first, or pass the run's --logdir)")
    out = Path(out_dir) if out_dir else run / runs.SAVED_MODEL
    _check_out(run, out)  # before the slow part
    _tensorflow_text()  # before loading the model: say at once when it cannot serve here
    try:
        r = load_model(run, which)
        model, tok, cfg, ckpt = r.model, r.tokenizer, r.config, r.checkpoint
    except TrainError as e:
        raise ExportError(str(e)) from None
    module = Exported(model, tok.model_path.read_bytes(), cfg.eval.beam_size, cfg.eval.length_penalty,
                      cfg.eval.max_extra_len)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide the model from the other users of a shared machine
    old = out.with_name(f".{out.name}.old{tmp.suffixes[-2]}")  # same random part as tmp: never an existing name
    logger, level = tf.get_logger(), tf.get_logger().level
    logger.setLevel("ERROR")  # INFO "Assets written to <absolute path>"; WARNING about get_config we do not use
    try:
        tf.saved_model.save(module, str(tmp), signatures={"serving_default": module.translate,
                                                          "tokenize": module.tokenize})
        atomic_write_json(tmp / "nmtkit_export.json", {
            "checkpoint": os.path.relpath(ckpt, run), "beam_size": cfg.eval.beam_size,
            "length_penalty": cfg.eval.length_penalty, "vocab_size": tok.vocab_size, "spm_sha256": tok.sha256,
            "tokenizer": f"tensorflow_text.SentencepieceTokenizer ({TF_TEXT_PIN}); import tensorflow_text to load",
            "signatures": {"serving_default": "sentences: string[batch] -> translations: string[batch], log_prob",
                           "tokenize": "sentences: string[batch] -> ids: int32[batch, len] (pieces, EOS, PAD)"}})
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


class Served:
    """A loaded export: `served(sentences) -> list[str]` translates; `.ids(sentences)` gives its encoder input."""

    def __init__(self, path: str | os.PathLike):
        _tensorflow_text()  # registers the sentencepiece ops the SavedModel uses
        if not (Path(path) / "saved_model.pb").is_file():
            raise ExportError(f"{path}: no saved_model.pb; export first (nmtkit export --run <run dir>)")
        self.path = Path(path)
        self._loaded = tf.saved_model.load(str(path))
        self._translate = self._loaded.signatures["serving_default"]
        self._tokenize = self._loaded.signatures.get("tokenize")

    def __call__(self, sentences: Sequence[str]) -> list[str]:
        out = self._translate(sentences=tf.constant(list(sentences), tf.string))["translations"]
        return [s.decode("utf-8") for s in out.numpy()]

    def ids(self, sentences: Sequence[str]) -> list[list[int]]:
        """The ids the exported graph feeds its encoder, up to and including EOS (compare: Translator.encode)."""
        if self._tokenize is None:
            raise ExportError(f"{self.path}: an export from an older kit (no tokenize signature); export it again")
        rows = self._tokenize(sentences=tf.constant(list(sentences), tf.string))["ids"].numpy().tolist()
        return [row[:row.index(EOS) + 1] for row in rows]


def load(path: str | os.PathLike) -> Served:
    """The serving function of an exported model: fn(list[str]) -> list[str] (with `.ids`, the token ids).

    Introduced in notebook 06_inference_export."""
    return Served(path)


def exported_ids(path: str | os.PathLike, sentences: Sequence[str]) -> list[list[int]]:
    """The exported model's token ids for `sentences` (pieces + EOS), to compare with `Translator.encode`."""
    return load(path).ids(sentences)


# A plain serving process: TensorFlow and tensorflow_text only (checked: no nmtkit module loaded), Keras 3 default.
_FRESH = """\
import json, os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
import tensorflow_text  # registers the sentencepiece ops
f = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
out = f(sentences=tf.constant(json.loads(sys.stdin.read()), tf.string))["translations"].numpy()
assert not [m for m in sys.modules if m.split(".")[0] == "nmtkit"], "nmtkit was imported"
print("\\n@@" + json.dumps([x.decode("utf-8") for x in out]))
"""


def translate_in_fresh_process(path: str | os.PathLike, sentences: Sequence[str]) -> list[str]:
    """Load the SavedModel in a new Python process (TensorFlow + tensorflow_text, no nmtkit) and translate.

    Introduced in notebook 06_inference_export."""
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    proc = subprocess.run([sys.executable, "-c", _FRESH, str(path)], input=json.dumps(list(sentences)),
                          capture_output=True, text=True, timeout=600, env=env)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ExportError(f"{path}: loading the SavedModel in a fresh process failed: {last}")
    return json.loads(proc.stdout.rsplit("\n@@", 1)[1])


def latency(translate, sentences: Sequence[str], batch_size: int = 1, repeats: int = 1) -> dict:
    """Seconds per sentence translating `sentences` in batches of `batch_size` (after one warm-up call).

    Introduced in notebook 06_inference_export."""
    translate(list(sentences[:batch_size]))
    t0 = time.perf_counter()
    for _ in range(repeats):
        for i in range(0, len(sentences), batch_size):
            translate(list(sentences[i:i + batch_size]))
    total = time.perf_counter() - t0
    n = len(sentences) * repeats
    return {"sentences": n, "batch_size": batch_size, "seconds": total, "ms_per_sentence": 1000 * total / n}
