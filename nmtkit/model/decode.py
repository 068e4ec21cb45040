"""Batched greedy and beam search with a key/value cache, traced once (dynamic batch and length shapes).

Beam search (Wu et al. 2016, GNMT): every step extends each of the K beams by every token and keeps the K best
candidates by length-normalised log-probability, score / lp(len) with lp = ((5 + len) / 6) ** alpha. A finished
beam (it emitted EOS) stays in the running with its final score and length, so shorter and longer hypotheses
compete on the same normalised scale. Greedy search is beam search with K = 1.

The decoder's self-attention keys/values live in fixed-size [B*K, heads, max_len, d_head] tensors (one per
layer), written one position per step; the encoder memory is projected to keys/values once. Shapes are
fixed inside the while-loop, so the graph is traced once per beam size, not per sentence or batch.
"""
from __future__ import annotations

from typing import Sequence

from nmtkit.keras2 import import_tf
from nmtkit.model.transformer import BOS, EOS, NEG_INF, PAD, Transformer

tf = import_tf()


def _length_penalty(length, alpha):
    return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, alpha)


def search(model: Transformer, src, max_len, beam_size: int = 4, alpha=0.6):
    """src [B, S] int32 (ids + EOS, PAD-padded) -> (ids [B, max_len] int32 ending in EOS then PAD, raw log-prob [B]).

    Not a tf.function itself: wrap it (see `Searcher`) so one trace serves every batch.
    """
    K = beam_size
    B = tf.shape(src)[0]
    V = model.vocab_size
    memory, memory_bias = model.encode(src, training=False)
    memory = tf.repeat(memory, K, axis=0)
    memory_bias = tf.repeat(memory_bias, K, axis=0)
    cache = model.init_cache(memory, max_len)

    seqs = tf.zeros([B, K, max_len], tf.int32)
    # all K beams start identical: only beam 0 is live at first, so the first top-k gives K distinct tokens
    logp = tf.tile(tf.constant([[0.0] + [NEG_INF] * (K - 1)]), [B, 1])
    lengths = tf.zeros([B, K], tf.int32)
    finished = tf.zeros([B, K], tf.bool)
    last = tf.fill([B * K], BOS)
    # a finished beam may only continue with PAD at no cost; a live one may never pick PAD or BOS
    pad_only = tf.one_hot(PAD, V, on_value=0.0, off_value=NEG_INF)
    banned = tf.one_hot(PAD, V, on_value=NEG_INF, off_value=0.0) + tf.one_hot(BOS, V, on_value=NEG_INF, off_value=0.0)
    offsets = tf.range(B)[:, None] * K

    def cond(t, last, seqs, logp, lengths, finished, cache):
        return tf.logical_and(t < max_len, tf.logical_not(tf.reduce_all(finished)))

    def body(t, last, seqs, logp, lengths, finished, cache):
        logits, cache = model.decode_step(last, t, cache, memory_bias)
        step = tf.reshape(tf.nn.log_softmax(logits), [B, K, V])
        step = tf.where(finished[..., None], pad_only, step + banned)
        cand = logp[..., None] + step                                     # [B, K, V]
        cand_len = tf.where(finished, lengths, t + 1)[..., None]
        norm = cand / _length_penalty(cand_len, alpha)
        _, idx = tf.math.top_k(tf.reshape(norm, [B, K * V]), k=K)
        beam, tok = idx // V, idx % V
        logp = tf.gather(tf.reshape(cand, [B, K * V]), idx, batch_dims=1)
        prev_finished = tf.gather(finished, beam, batch_dims=1)
        lengths = tf.where(prev_finished, tf.gather(lengths, beam, batch_dims=1), t + 1)
        finished = tf.logical_or(prev_finished, tf.equal(tok, EOS))
        seqs = tf.gather(seqs, beam, batch_dims=1) + tok[..., None] * tf.one_hot(t, max_len, dtype=tf.int32)
        flat = tf.reshape(beam + offsets, [-1])
        cache = tf.nest.map_structure(lambda x: tf.gather(x, flat), cache)
        return [t + 1, tf.reshape(tok, [-1]), seqs, logp, lengths, finished, cache]

    t0 = tf.constant(0)
    _, _, seqs, logp, lengths, finished, _ = tf.while_loop(
        cond, body, [t0, last, seqs, logp, lengths, finished, cache], maximum_iterations=max_len)
    norm = logp / _length_penalty(tf.maximum(lengths, 1), alpha)
    best = tf.argmax(norm, axis=1, output_type=tf.int32)
    return tf.gather(seqs, best, batch_dims=1), tf.gather(logp, best, batch_dims=1)


class Searcher:
    """`searcher(src, max_len)` -> (ids, log-prob), a tf.function traced once for any batch/length."""

    def __init__(self, model: Transformer, beam_size: int = 4, alpha: float = 0.6):
        self.model, self.beam_size, self.alpha = model, beam_size, alpha
        self.fn = tf.function(
            lambda src, max_len: search(model, src, max_len, beam_size, alpha),
            input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([], tf.int32)], autograph=False)

    def __call__(self, src, max_len):
        return self.fn(src, max_len)


class Translator:
    """Text in, text out: tokenise, sort by length, decode in batches, detokenise, restore the order.

    Introduced in notebook 02_single_gpu_baseline."""

    def __init__(self, model: Transformer, tokenizer, beam_size: int = 4, length_penalty: float = 0.6,
                 max_extra_len: int = 10, batch_size: int = 64, searcher: Searcher | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.max_extra_len, self.batch_size = max_extra_len, batch_size
        self.searcher = searcher or Searcher(model, beam_size, length_penalty)  # given: one already traced

    def encode(self, sentences: Sequence[str]) -> list[list[int]]:
        limit = self.model.cfg.max_positions - 1
        return [self.tokenizer.encode(s)[:limit] + [EOS] for s in sentences]

    def translate_ids(self, sources: list[list[int]], part: tuple[int, int] = (0, 1)) -> list[list[int] | None]:
        """Token ids in, ids out (EOS cut). `part` = (k, n): only every n-th batch from the k-th, the others
        None (the ranks of a job share an evaluation: the batches are the same whatever n, so are the results)."""
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        out: list[list[int] | None] = [None] * len(sources)
        max_pos = self.model.cfg.max_positions
        for start in range(part[0] * self.batch_size, len(order), part[1] * self.batch_size):
            chunk = order[start:start + self.batch_size]
            width = max(len(sources[i]) for i in chunk)
            batch = [sources[i] + [PAD] * (width - len(sources[i])) for i in chunk]
            max_len = min(width + self.max_extra_len, max_pos)
            ids, _ = self.searcher(tf.constant(batch, tf.int32), tf.constant(max_len, tf.int32))
            for i, row in zip(chunk, ids.numpy().tolist()):
                out[i] = row[:row.index(EOS)] if EOS in row else row
        return out

    def translate(self, sentences: Sequence[str]) -> list[str]:
        if isinstance(sentences, str):
            raise TypeError("translate() takes a list of sentences; wrap one sentence in a list")
        return [self.tokenizer.decode(ids) for ids in self.translate_ids(self.encode(sentences))]
