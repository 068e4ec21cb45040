"""The Transformer's building blocks that differ from Keras' own: the same variables (and so the same checkpoints)
computed in fewer ops. At the course's shapes a training step is mostly per-op cost, not FLOPs (bench/README.md),
so each block here trades TensorFlow's generic path for a shorter one.
"""
from __future__ import annotations

from nmtkit.keras2 import import_tf

tf = import_tf()


def linear(x, w, b=None):
    """[..., d_in] @ [d_in, d_out] (+ b) as one 2-D matmul: Keras' Dense on a 3-D input goes through tensordot,
    a dozen shape ops a call, forward and backward (OpenNMT-tf reshapes too)."""
    shape = tf.shape(x)
    y = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), tf.cast(w, x.dtype))
    if b is not None:
        y = tf.nn.bias_add(y, tf.cast(b, x.dtype))
    return tf.reshape(y, tf.concat([shape[:-1], [w.shape[-1]]], axis=0))


class Dense(tf.keras.layers.Dense):
    """Keras' Dense (same variables, same checkpoints) computed by `linear`."""

    def call(self, x):
        if x.dtype != self.compute_dtype:
            x = tf.cast(x, self.compute_dtype)
        y = linear(x, self.kernel, self.bias if self.use_bias else None)
        return self.activation(y) if self.activation is not None else y


class Dropout(tf.keras.layers.Layer):
    """Dropout whose mask is a function of `seed` and this layer's `index` (its place in the model, set by
    Transformer). Without a seed (a hand-written training loop): Keras' stateful dropout."""

    def __init__(self, rate: float, **kw):
        super().__init__(**kw)
        self.rate, self.index = rate, 0

    def call(self, x, seed=None, training=False):
        if not training or self.rate == 0.0:
            return x
        if seed is None:
            return tf.nn.dropout(x, self.rate)
        seed = tf.random.experimental.stateless_fold_in(seed, self.index)
        # 16 random bits an element, two from each uint32 the generator draws: at the course's shapes drawing the
        # masks is a large part of a step, and half the draws of a float mask cost half (the rate is exact to
        # 1/65536). The kept mask is a bool, a quarter of a float one.
        drop = round(self.rate * 65536)
        n = tf.size(x)
        bits = tf.random.stateless_uniform([(n + 1) // 2], seed, minval=None, maxval=None, dtype=tf.uint32)
        keep = tf.reshape(tf.reshape(tf.bitcast(bits, tf.uint16), [-1])[:n] >= drop, tf.shape(x))
        return _masked(x, keep, 65536 / (65536 - drop))


def _masked(x, keep, scale: float):
    """x * scale where `keep`, else 0; its gradient the same mask on dy (TensorFlow's own gradient of tf.where
    also computes the zero branch's)."""
    @tf.custom_gradient
    def apply(x):
        s = tf.cast(scale, x.dtype)
        return tf.where(keep, x * s, tf.zeros([], x.dtype)), lambda dy: tf.where(keep, dy * s, tf.zeros([], dy.dtype))
    return apply(x)


class LayerNorm(tf.keras.layers.LayerNormalization):
    """Keras' LayerNormalization over the last axis (the same variables and math, in float32 under mixed precision)
    with its gradient written out: TensorFlow's derived one takes about three times the ops, and at the course's
    shapes ops, not FLOPs, set a step's pace."""

    def call(self, x):
        gamma, beta = tf.cast(self.gamma, tf.float32), tf.cast(self.beta, tf.float32)
        return tf.cast(layer_norm(tf.cast(x, tf.float32), gamma, beta, self.epsilon), x.dtype)


def layer_norm(x, gamma, beta, epsilon: float):
    """(x - mean) / sqrt(var + epsilon) * gamma + beta over the last axis, and its gradient."""
    @tf.custom_gradient
    def norm(x, gamma, beta):
        xc = x - tf.reduce_mean(x, axis=-1, keepdims=True)
        inv = tf.math.rsqrt(tf.reduce_mean(tf.square(xc), axis=-1, keepdims=True) + epsilon)
        xhat = xc * inv

        def grad(dy):
            rows = tf.range(tf.rank(dy) - 1)
            g = dy * gamma
            dx = inv * (g - tf.reduce_mean(g, axis=-1, keepdims=True)
                        - xhat * tf.reduce_mean(g * xhat, axis=-1, keepdims=True))
            return dx, tf.reduce_sum(dy * xhat, axis=rows), tf.reduce_sum(dy, axis=rows)
        return xhat * gamma + beta, grad
    return norm(x, gamma, beta)
