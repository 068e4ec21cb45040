"""The Transformer encoder-decoder (Vaswani et al., 2017) in the Keras 2 API, nanoGPT style: one readable file.

Pre-norm, not post-norm. The paper puts LayerNorm after each residual add (post-norm). OpenSeq2Seq's transformer
is a port of the TensorFlow official/MLPerf model, whose `PrePostProcessingWrapper` normalises the *input* of each
sub-layer and adds one final LayerNorm per stack (pre-norm), and so do we: pre-norm trains stably at the
homework's learning rate (peak ~1e-3 for d_model=512) and at our tiny profile's higher one without a long warmup,
and it is what the homework's reference numbers were measured with. Parameter count is the same either way
(2 LayerNorms more for the final norms).

Everything else follows the paper: one embedding matrix shared by source, target and the output projection
(joint BPE vocabulary), scaled by sqrt(d_model); sinusoidal positions; dropout on embeddings, attention weights,
the FFN's hidden layer and every residual branch; label-smoothed cross-entropy that ignores padding (id 0).

Dropout is stateless: training passes `seed` (the Trainer's, from train.seed, rank, step and micro-batch) down to
every Dropout layer, which folds in its own index. A mask is then a function of those numbers alone, so a resumed
run draws exactly the masks of the uninterrupted one, with no random state to checkpoint.

Masks are additive biases: 0 where attending is allowed, a large negative number where not (padded keys, and
future positions in the decoder's self-attention). Softmax runs in float32 so mixed precision cannot overflow it.
"""
from __future__ import annotations

import math

import numpy as np

from nmtkit.config import ModelConfig
from nmtkit.keras2 import import_tf
from nmtkit.model.layers import Dense, Dropout, LayerNorm, linear
from nmtkit.model.size import count_params  # noqa: F401  (the kit's and the tests' import of it)

tf = import_tf()

PAD, UNK, BOS, EOS = 0, 1, 2, 3
NEG_INF = -1e9


def positional_encoding(length: int, d_model: int) -> np.ndarray:
    """The paper's sinusoids, [length, d_model]: sin in the first half of the channels, cos in the second."""
    pos = np.arange(length, dtype=np.float64)[:, None]
    half = d_model // 2
    inv = np.exp(-math.log(10000.0) * np.arange(half, dtype=np.float64) / max(half - 1, 1))
    angles = pos * inv[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1).astype(np.float32)


def padding_bias(ids):
    """[B, T] ids -> [B, 1, 1, T] additive bias that hides PAD keys."""
    return tf.cast(tf.equal(ids, PAD), tf.float32)[:, None, None, :] * NEG_INF


def causal_bias(length):
    """[1, 1, T, T] additive bias that hides future positions."""
    allowed = tf.linalg.band_part(tf.ones([length, length]), -1, 0)
    return ((1.0 - allowed) * NEG_INF)[None, None]


class SharedEmbedding(tf.keras.layers.Layer):
    """One [vocab, d_model] matrix: token embedding (x sqrt(d_model)) and, transposed, the output projection."""

    def __init__(self, vocab_size: int, d_model: int, **kw):
        super().__init__(**kw)
        self.vocab_size, self.d_model = vocab_size, d_model

    def build(self, input_shape):
        self.weight = self.add_weight("weight", [self.vocab_size, self.d_model],
                                      initializer=tf.random_normal_initializer(0.0, self.d_model ** -0.5))
        super().build(input_shape)

    def call(self, ids):
        w = tf.cast(self.weight, self.compute_dtype)
        x = tf.gather(w, ids) * math.sqrt(self.d_model)
        # PAD embeds to zero, so a padded position carries nothing into the residual stream
        return x * tf.cast(tf.not_equal(ids, PAD), x.dtype)[..., None]

    def logits(self, x):
        w = tf.cast(self.weight, x.dtype)
        return tf.matmul(x, w, transpose_b=True)


class Attention(tf.keras.layers.Layer):
    """Multi-head scaled dot-product attention; `k`/`v` can be projected once and cached (for decoding)."""

    def __init__(self, d_model: int, num_heads: int, dropout: float, bias: bool = True, **kw):
        super().__init__(**kw)
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.h, self.dh = num_heads, d_model // num_heads
        # bias=False: OpenSeq2Seq's (and the TF official model's) projections, 4 * d_model parameters fewer per layer
        def dense(name):
            return Dense(d_model, use_bias=bias, name=name, dtype=self.dtype_policy)
        self.q, self.k, self.v, self.o = dense("q"), dense("k"), dense("v"), dense("o")
        self.drop = Dropout(dropout, dtype=self.dtype_policy)

    def split(self, x):  # [B, T, d] -> [B, H, T, dh]
        b, t = tf.shape(x)[0], tf.shape(x)[1]
        return tf.transpose(tf.reshape(x, [b, t, self.h, self.dh]), [0, 2, 1, 3])

    def project(self, x, dense):
        """x through several of q, k, v at once: one matmul with their kernels side by side (the variables stay
        apart). At the course's shapes a step is mostly per-op cost, and one wide matmul beats three narrow ones.
        """
        if not all(d.built for d in dense):  # the first call creates the variables
            return [d(x) for d in dense]
        w = tf.concat([d.kernel for d in dense], axis=1)
        b = tf.concat([d.bias for d in dense], axis=0) if dense[0].use_bias else None
        return tf.split(linear(x, w, b), len(dense), axis=-1)

    def keys_values(self, x):
        k, v = self.project(x, [self.k, self.v])
        return self.split(k), self.split(v)

    def attend(self, x, k, v, bias, training=False, seed=None, q=None):
        q = self.split(self.q(x) if q is None else q) * (self.dh ** -0.5)
        scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32) + bias
        weights = tf.cast(tf.nn.softmax(scores, axis=-1), q.dtype)
        out = tf.matmul(self.drop(weights, seed, training=training), v)  # [B, H, T, dh]
        b, t = tf.shape(out)[0], tf.shape(out)[2]
        return self.o(tf.reshape(tf.transpose(out, [0, 2, 1, 3]), [b, t, self.h * self.dh]))

    def call(self, x, memory, bias, training=False, seed=None):
        if x is memory:  # self-attention: queries, keys and values in one matmul
            q, k, v = self.project(x, [self.q, self.k, self.v])
            return self.attend(x, self.split(k), self.split(v), bias, training, seed, q=q)
        k, v = self.keys_values(memory)
        return self.attend(x, k, v, bias, training, seed)


class FeedForward(tf.keras.layers.Layer):
    def __init__(self, d_model: int, d_ff: int, dropout: float, **kw):
        super().__init__(**kw)
        self.up = Dense(d_ff, activation="relu", name="up", dtype=self.dtype_policy)
        self.down = Dense(d_model, name="down", dtype=self.dtype_policy)
        self.drop = Dropout(dropout, dtype=self.dtype_policy)

    def call(self, x, training=False, seed=None):
        return self.down(self.drop(self.up(x), seed, training=training))


def _norm(name, policy):
    return LayerNorm(epsilon=1e-6, name=name, dtype=policy)


def _attention(c: ModelConfig, name: str, policy):
    return Attention(c.d_model, c.num_heads, c.dropout, c.attention_bias, name=name, dtype=policy)


def _add_ffn(layer, c: ModelConfig, norm: str, branches: int) -> None:
    """The last sub-layer of every block (its norm, the feed-forward net) and one dropout per residual branch
    (each its own mask)."""
    p = layer.dtype_policy
    setattr(layer, norm, _norm(norm, p))
    layer.ffn = FeedForward(c.d_model, c.d_ff, c.dropout, name="ffn", dtype=p)
    layer.drops = [Dropout(c.dropout, dtype=p) for _ in range(branches)]


class EncoderLayer(tf.keras.layers.Layer):
    def __init__(self, c: ModelConfig, **kw):
        super().__init__(**kw)
        self.norm1, self.attn = _norm("norm1", self.dtype_policy), _attention(c, "self_attn", self.dtype_policy)
        _add_ffn(self, c, "norm2", branches=2)

    def call(self, x, bias, training=False, seed=None):
        h, (d1, d2) = self.norm1(x), self.drops
        x = x + d1(self.attn(h, h, bias, training=training, seed=seed), seed, training=training)
        return x + d2(self.ffn(self.norm2(x), training=training, seed=seed), seed, training=training)


class DecoderLayer(tf.keras.layers.Layer):
    def __init__(self, c: ModelConfig, **kw):
        super().__init__(**kw)
        p = self.dtype_policy
        self.norm1, self.self_attn = _norm("norm1", p), _attention(c, "self_attn", p)
        self.norm2, self.cross_attn = _norm("norm2", p), _attention(c, "cross_attn", p)
        _add_ffn(self, c, "norm3", branches=3)

    def call(self, x, memory, self_bias, memory_bias, training=False, cache=None, t=None, seed=None):
        """Whole sequence (training) or, with `cache` and position `t`, one new position (decoding)."""
        h, (d1, d2, d3) = self.norm1(x), self.drops
        if cache is None:
            a = self.self_attn(h, h, self_bias, training=training, seed=seed)
        else:  # write this position's key/value into the fixed-size cache, attend to positions <= t
            k, v = self.self_attn.keys_values(h)
            slot = tf.cast(tf.one_hot(t, tf.shape(cache["k"])[2]), k.dtype)[None, None, :, None]
            cache = {**cache, "k": cache["k"] + slot * k, "v": cache["v"] + slot * v}
            a = self.self_attn.attend(h, cache["k"], cache["v"], self_bias, training)
        x = x + d1(a, seed, training=training)
        h = self.norm2(x)
        if cache is None:
            a = self.cross_attn(h, memory, memory_bias, training=training, seed=seed)
        else:
            a = self.cross_attn.attend(h, cache["mk"], cache["mv"], memory_bias, training)
        x = x + d2(a, seed, training=training)
        x = x + d3(self.ffn(self.norm3(x), training=training, seed=seed), seed, training=training)
        return x, cache


class Transformer(tf.keras.Model):
    """Encoder-decoder. `model((src, tgt_in))` -> float32 logits [B, T, vocab]; training:
    `model((src, tgt_in), training=True, seed=seed)`, `seed` a [2] int tensor that fixes every dropout mask.

    `dtype` is a Keras dtype policy name ("float32" or "mixed_float16"): passed to every layer, so building a
    mixed-precision model never touches the process-wide global policy.
    """

    def __init__(self, cfg: ModelConfig, vocab_size: int, dtype: str = "float32", **kw):
        super().__init__(name="transformer", dtype=dtype, **kw)
        self.cfg, self.vocab_size = cfg, vocab_size
        p = self.dtype_policy
        self.embedding = SharedEmbedding(vocab_size, cfg.d_model, name="shared_embedding", dtype=p)
        self.positions = tf.constant(positional_encoding(cfg.max_positions, cfg.d_model))
        self.src_drop, self.tgt_drop = Dropout(cfg.dropout, dtype=p), Dropout(cfg.dropout, dtype=p)
        self.encoder_layers = [EncoderLayer(cfg, name=f"encoder_{i}", dtype=p) for i in range(cfg.encoder_layers)]
        self.decoder_layers = [DecoderLayer(cfg, name=f"decoder_{i}", dtype=p) for i in range(cfg.decoder_layers)]
        self.encoder_norm = _norm("encoder_norm", p)
        self.decoder_norm = _norm("decoder_norm", p)
        for i, layer in enumerate(m for m in self.submodules if isinstance(m, Dropout)):
            layer.index = i  # a fixed order (tf.Module's), so each layer draws its own masks in every process

    def _embed(self, ids, start=0):
        x = self.embedding(ids)
        pos = self.positions[start:start + tf.shape(ids)[1]]
        return x + tf.cast(pos, x.dtype)[None]

    def encode(self, src, training=False, seed=None):
        """-> (memory [B, S, d], memory_bias [B, 1, 1, S])."""
        bias = padding_bias(src)
        x = self.src_drop(self._embed(src), seed, training=training)
        for layer in self.encoder_layers:
            x = layer(x, bias, training=training, seed=seed)
        return self.encoder_norm(x), bias

    def decode(self, tgt_in, memory, memory_bias, training=False, seed=None):
        self_bias = causal_bias(tf.shape(tgt_in)[1])
        x = self.tgt_drop(self._embed(tgt_in), seed, training=training)
        for layer in self.decoder_layers:
            x, _ = layer(x, memory, self_bias, memory_bias, training=training, seed=seed)
        return tf.cast(self.embedding.logits(self.decoder_norm(x)), tf.float32)

    def call(self, inputs, training=False, seed=None):
        src, tgt_in = inputs
        memory, memory_bias = self.encode(src, training=training, seed=seed)
        return self.decode(tgt_in, memory, memory_bias, training=training, seed=seed)

    # --- incremental decoding (used by nmtkit.model.decode) ---------------------------------------------

    def init_cache(self, memory, max_len):
        """Per decoder layer: empty self-attention keys/values for `max_len` positions, and the encoder
        memory's keys/values projected once."""
        b = tf.shape(memory)[0]
        zeros = tf.zeros([b, self.cfg.num_heads, max_len, self.cfg.d_model // self.cfg.num_heads], memory.dtype)
        cache = []
        for layer in self.decoder_layers:
            mk, mv = layer.cross_attn.keys_values(memory)
            cache.append({"k": zeros, "v": zeros, "mk": mk, "mv": mv})
        return cache

    def decode_step(self, ids, t, cache, memory_bias):
        """ids [B] at position t -> (float32 logits [B, vocab], updated cache)."""
        x = self._embed(ids[:, None], start=t)
        max_len = tf.shape(cache[0]["k"])[2]
        self_bias = tf.where(tf.range(max_len) <= t, 0.0, NEG_INF)[None, None, None, :]
        new_cache = []
        for layer, c in zip(self.decoder_layers, cache):
            x, c = layer(x, None, self_bias, memory_bias, cache=c, t=t)
            new_cache.append(c)
        logits = self.embedding.logits(self.decoder_norm(x))[:, 0]
        return tf.cast(logits, tf.float32), new_cache


def build(cfg: ModelConfig, vocab_size: int, dtype: str = "float32") -> Transformer:
    """A Transformer with its variables created (called once on a dummy batch).

    Introduced in notebook 02_single_gpu_baseline."""
    model = Transformer(cfg, vocab_size, dtype=dtype)
    dummy = tf.constant([[4, 5, EOS]], tf.int32)
    model((dummy, tf.constant([[BOS, 4, 5]], tf.int32)), training=False)
    return model


def smoothed_loss(logits, labels, smoothing: float):
    """Label-smoothed cross-entropy summed over non-PAD positions -> (loss_sum, n_tokens), both float32.

    The smoothed target puts 1-smoothing on the label and spreads `smoothing` over the other vocab-1 ids. Memory
    is the point here: at the homework's batch one float32 [batch, length, vocab] tensor is 1.75 GiB. TensorFlow's
    fused sparse cross-entropy gives -log p(label) and its backprop (softmax - one-hot) in one kernel; the
    smoothing term, sum_v log p(v) = sum_v logit_v - vocab * logsumexp, needs only per-position sums; and the
    gradient is that backprop shifted by the smoothing (below). So one full-size float32 tensor stays alive
    after the forward, two during the backward (log-softmax's way kept four: bench/README.md).
    """
    with tf.name_scope("loss"):  # its ops by name in a profile (bench/step_ops.py)
        return _smoothed_loss(logits, labels, smoothing)


def _smoothed_loss(logits, labels, smoothing: float):
    logits = tf.cast(logits, tf.float32)
    mask = tf.cast(tf.not_equal(labels, PAD), tf.float32)
    vocab = tf.shape(logits)[-1]
    flat, ids = tf.reshape(logits, [-1, vocab]), tf.reshape(labels, [-1])
    n = tf.cast(vocab, tf.float32)
    low = smoothing / (n - 1.0)

    @tf.custom_gradient
    def xent(flat):
        nll, backprop = tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=flat, labels=ids)
        lse = tf.gather(flat, ids, batch_dims=1) + nll            # log-sum-exp of each position's logits
        sum_logp = tf.reduce_sum(flat, axis=-1) - n * lse
        per = (1.0 - smoothing - low) * nll - low * sum_logp

        def grad(dy):  # d/dlogits = softmax - smoothed target = backprop - low, plus (smoothing + low) at the label
            where = tf.stack([tf.range(tf.shape(ids)[0]), ids], 1)
            g = tf.tensor_scatter_nd_add(backprop - low, where, tf.fill(tf.shape(ids), smoothing + low))
            return g * dy[:, None]
        return per, grad
    per = tf.reshape(xent(flat), tf.shape(labels))
    return tf.reduce_sum(per * mask), tf.reduce_sum(mask)
