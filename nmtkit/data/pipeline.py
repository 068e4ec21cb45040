"""Encoded splits on disk and the tf.data input pipeline that feeds training.

Each split is stored as flat int32 id arrays plus row offsets (`<split>.<lang>.ids.npy`, `<split>.<lang>.off.npy`),
which numpy can memory-map, so WMT-sized data loads without parsing; `encoded.json` records the sha256 of the
sentencepiece model that made them, checked on every load.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from nmtkit.data.bpe import BOS, EOS, MODEL
from nmtkit.data.text import read_parallel
from nmtkit.errors import DataError
from nmtkit.files import atomic_path, atomic_write_json, read_json, sha256_file

SRC, TGT = "en", "de"
SPLITS = ("train", "dev", "test")
ENCODED = "encoded.json"
MANIFEST = "manifest.json"  # written by nmtkit.data.prepare, which owns it
_FIX = "rerun `nmtkit prepare` (or prepare(cfg)); it redoes what is missing or stale"


def ids_path(data_dir, split, lang) -> Path:
    return Path(data_dir) / f"{split}.{lang}.ids.npy"


def off_path(data_dir, split, lang) -> Path:
    return Path(data_dir) / f"{split}.{lang}.off.npy"


def _save_npy(path: Path, arr: np.ndarray) -> None:
    """np.save's bytes (format 1.0), written by the file object: numpy's own tofile() loses a full disk's errno."""
    from numpy.lib import format as npy
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        npy.write_array_header_1_0(f, npy.header_data_from_array_1_0(arr))
        f.write(np.ascontiguousarray(arr).data)


def write_encoded(data_dir, split: str, lang: str, ids: np.ndarray, lengths: np.ndarray) -> list[Path]:
    """Store one side of a split as flat int32 ids + int64 row offsets (atomically)."""
    off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    if int(off[-1]) != len(ids):
        raise ValueError(f"{split}.{lang}: {len(ids)} ids but the lengths sum to {int(off[-1])}")
    _save_npy(ids_path(data_dir, split, lang), np.asarray(ids, dtype=np.int32))
    _save_npy(off_path(data_dir, split, lang), off)
    return [ids_path(data_dir, split, lang), off_path(data_dir, split, lang)]


def write_encoded_header(data_dir, spm_sha256: str, counts: dict) -> Path:
    return atomic_write_json(Path(data_dir) / ENCODED, {"spm_sha256": spm_sha256, "splits": counts})


def load_encoded(data_dir, split: str, *, mmap: bool = False) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{"en": (ids, offsets), "de": (ids, offsets)} for a split, after checking it matches spm.model."""
    d = Path(data_dir)
    header = d / ENCODED
    manifest = read_json(d / MANIFEST, DataError, missing=None,
                         hint=f"the data directory is not completely prepared; {_FIX}")
    if manifest is None:
        raise DataError(f"{d / MANIFEST}: no such file, so {d} is not a prepared data directory "
                                  f"(prepare() writes it as each step finishes); {_FIX}")
    try:  # prepare() records a step in manifest.json only once all its files are complete
        done = manifest["steps"]["encode"]["files"][ENCODED]["sha256"]
    except (KeyError, TypeError):
        done = None
    if done is None or not header.is_file() or sha256_file(header) != done:
        raise DataError(f"{d}: the data directory is not completely prepared (encoding not recorded "
                                  f"as finished in {MANIFEST}; a crash or an unfinished rerun?); {_FIX}")
    head = read_json(header, DataError, hint=_FIX)
    model = d / MODEL
    if not model.is_file():
        raise DataError(f"{model}: missing; {_FIX}")
    if sha256_file(model) != head.get("spm_sha256"):
        raise DataError(f"{d}: the encoded splits were made with a different sentencepiece model than "
                                 f"{model} (sha256 {head.get('spm_sha256', '?')[:12]} vs {sha256_file(model)[:12]}); "
                                 f"{_FIX}")
    if split not in head.get("splits", {}):
        raise DataError(f"{d}: no split {split!r} (have {', '.join(head.get('splits', {}))})")
    want = head["splits"][split]
    out = {}
    for lang in (SRC, TGT):
        try:
            ids = np.load(ids_path(d, split, lang), mmap_mode="r" if mmap else None)
            off = np.load(off_path(d, split, lang), mmap_mode="r" if mmap else None)
        except (FileNotFoundError, ValueError, EOFError) as e:
            raise DataError(f"{d}: {split}.{lang} encoded arrays missing or unreadable ({e}); {_FIX}") from None
        if len(off) != want["lines"] + 1 or int(off[-1]) != len(ids) or len(ids) != want[f"{lang}_tokens"]:
            raise DataError(f"{ids_path(d, split, lang)}: does not match {ENCODED} "
                                      f"({len(off) - 1:,} lines / {len(ids):,} ids, expected {want['lines']:,} / "
                                      f"{want[f'{lang}_tokens']:,}); {_FIX}")
        out[lang] = (ids, off)
    return out


def read_split(data_dir, split: str) -> tuple[list[str], list[str]]:
    """(English sources, German references) of a split, as raw text.

    Introduced in notebook 01_data_prep_bpe."""
    d = Path(data_dir)
    return read_parallel(d / f"{split}.{SRC}", d / f"{split}.{TGT}")


def example_lengths(enc) -> tuple[np.ndarray, np.ndarray]:
    """Model lengths of each example: source ids + EOS, target BOS + ids + EOS."""
    return np.diff(enc[SRC][1]) + 1, np.diff(enc[TGT][1]) + 2


def bucket_plan(max_len: int, data_cfg, pad_to_bucket: bool = False) -> tuple[list[int], list[int]]:
    """Length-bucket boundaries and the batch size of each bucket.

    Bucket i holds examples with boundaries[i-1] <= length < boundaries[i] (length: the longer side); with token
    batching (data.batch_tokens > 0) its batch size is batch_tokens // the bucket's longest length, as OpenNMT-tf's
    batch_type=tokens (its window size is batch_size // bucket_max_length), so batch size x padded length never
    exceeds the budget. With `pad_to_bucket` the last boundary lies past max_len (every example has a bucket
    to be padded to).
    """
    width, pad = max(1, data_cfg.bucket_width), pad_to_bucket
    boundaries = list(range(width + 1, max_len + 1 + (width if pad else 0), width)) or [max_len + 1]  # tf needs one
    longest = [b - 1 if pad else min(b - 1, max_len) for b in boundaries] + [max_len]
    if data_cfg.batch_tokens > 0:
        if data_cfg.batch_tokens < max(longest):
            raise DataError(f"data.batch_tokens={data_cfg.batch_tokens} is smaller than the longest (padded) "
                            f"example ({max(longest)} tokens); raise it or lower data.max_tokens")
        sizes = [data_cfg.batch_tokens // n for n in longest]
    else:
        if data_cfg.batch_sentences < 1:
            raise DataError("data.batch_sentences must be >= 1 when data.batch_tokens is 0")
        sizes = [data_cfg.batch_sentences] * len(longest)
    return boundaries, sizes


def shard_indices(keep: np.ndarray, rank: int, size: int) -> np.ndarray:
    """Rank r of n gets every n-th example starting at r: distinct parts that together cover all."""
    if not 0 <= rank < size:
        raise ValueError(f"rank {rank} is not in 0..{size - 1}")
    return keep[rank::size]


def make_dataset(data_dir, split: str, data_cfg, *, rank: int = 0, size: int = 1, seed: int = 0,
                 shuffle: bool = True, repeat: bool = True, truncate: int = 0, pad_to_bucket: bool = False,
                 limit: int = 0):
    """Padded (src, tgt) int32 batches: src = ids + [EOS], tgt = [BOS] + ids + [EOS], 0 = padding.

    Training examples longer than data.max_tokens (BPE tokens, either side) are left out; dev/test keep all.
    Batches hold up to data.batch_tokens tokens (padded length x sentences) when that is > 0, else
    data.batch_sentences sentence pairs, grouped by length (buckets of data.bucket_width) to save padding: training
    (`repeat`) by the buckets of both sides, a finite pass by the longer side's.
    Deterministic given `seed`; rank r of `size` sees a distinct 1/size of the examples each epoch.
    `truncate` > 0: examples are cut to fit a model of that many positions (evaluation of any line).
    `limit` > 0: the split's first `limit` examples only (the dev loss over the sentences dev BLEU translates).
    `pad_to_bucket`: both sides padded to the bucket's longest length, so there are at most one batch shape per
    bucket (what XLA needs: it compiles a program per shape); otherwise a batch is padded to its longest example.
    Introduced in notebook 01_data_prep_bpe."""
    from nmtkit.keras2 import import_tf
    tf = import_tf()
    enc = load_encoded(data_dir, split)
    src_len, tgt_len = example_lengths(enc)
    if split == "train" and data_cfg.max_tokens > 0:
        keep = np.nonzero((src_len - 1 <= data_cfg.max_tokens) & (tgt_len - 2 <= data_cfg.max_tokens))[0]
    else:
        keep = np.arange(len(src_len))
    if limit > 0:
        keep = keep[:limit]
    if len(keep) == 0:
        raise DataError(f"{data_dir}: split {split!r} has no examples within data.max_tokens={data_cfg.max_tokens}")
    mine = shard_indices(keep, rank, size)
    max_len = int(np.maximum(src_len, tgt_len)[keep].max())
    cut = None
    if truncate > 0:  # src: ids + EOS <= truncate; tgt: BOS + ids + EOS <= truncate + 1 (the model sees all but one)
        cut, max_len = truncate - 1, min(max_len, truncate + 1)
    boundaries, sizes = bucket_plan(max_len, data_cfg, pad_to_bucket)

    src_ids, src_off = tf.constant(enc[SRC][0]), tf.constant(enc[SRC][1])
    tgt_ids, tgt_off = tf.constant(enc[TGT][0]), tf.constant(enc[TGT][1])
    eos, bos = tf.constant([EOS], tf.int32), tf.constant([BOS], tf.int32)

    def fetch(i):
        src = src_ids[src_off[i]:src_off[i + 1]][:cut]
        tgt = tgt_ids[tgt_off[i]:tgt_off[i + 1]][:cut]
        return tf.concat([src, eos], 0), tf.concat([bos, tgt, eos], 0)

    if shuffle:  # each epoch a whole-epoch order from (seed, epoch) alone: no shuffle buffer, so a checkpoint of
        # the iterator (nmtkit.training resumes from one) holds a position, not the epoch's indices
        order = tf.constant(mine)
        ds = tf.data.Dataset.range(2 ** 62 if repeat else 1).flat_map(lambda epoch: tf.data.Dataset.from_tensor_slices(
            tf.random.experimental.stateless_shuffle(order, seed=tf.stack([tf.constant(seed, tf.int64), epoch]))))
    else:
        ds = tf.data.Dataset.from_tensor_slices(mine)
        ds = ds.repeat() if repeat else ds
    ds = ds.map(fetch, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if repeat and not pad_to_bucket:
        ds = _bucket_both_sides(tf, ds, boundaries, sizes)
    else:  # a finite pass (evaluation): fewer, fuller batches; XLA: one shape per bucket
        ds = ds.bucket_by_sequence_length(
            lambda s, t: tf.maximum(tf.shape(s)[0], tf.shape(t)[0]),
            bucket_boundaries=boundaries, bucket_batch_sizes=sizes, drop_remainder=False,
            pad_to_bucket_boundary=pad_to_bucket)
    return ds.prefetch(tf.data.AUTOTUNE).with_options(_without_autotuning(tf))


def _bucket_both_sides(tf, ds, boundaries, sizes):
    """Training batches grouped by the length bucket of each side, not only of the longer one: the batch size is
    still the longer side's (so the token budget is as OpenNMT-tf's), but the shorter side is no longer padded to
    the longest shorter side of the bucket (the tiny profile's 2048-token batches: ~8% of the padded tokens before,
    ~0 at bucket width 1; bench/README.md). Each (source bucket, target bucket) cell waits for a full batch."""
    bounds, batch = tf.constant(boundaries, tf.int64), tf.constant(sizes, tf.int64)
    cells = len(boundaries) + 1

    def bucket(n):
        return tf.searchsorted(bounds, tf.reshape(tf.cast(n, tf.int64), [1]), side="right", out_type=tf.int64)[0]

    def key(s, t):
        return bucket(tf.shape(s)[0]) * cells + bucket(tf.shape(t)[0])

    def window_size(k):  # the longer side's bucket sets the batch size, as with one-sided buckets
        return tf.gather(batch, tf.maximum(k // cells, k % cells))

    def batched(k, window):
        return window.padded_batch(window_size(k), padded_shapes=([None], [None]))

    return ds.group_by_window(key, batched, window_size_func=window_size)


def _without_autotuning(tf):
    """No autotuning: its model thread re-plans at periods that double up to a minute, and destroying the iterator
    waited for it (15-20 s after a 2-rank job's last step, in about one launch of four); the pipeline is index
    lookups and padding, well under a millisecond a step, with nothing for it to tune."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return options
