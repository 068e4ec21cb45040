"""What float16 does to the kit's own gradients (notebook 02's mixed-precision section): how many values it flushes
to zero or rounds coarsely, with and without the loss scale, and which dtypes a mixed_float16 model computes,
keeps and sends.

    best = nk.restore(run)
    best.fp16_gradients(batch)      # a table: as computed, and multiplied by the dynamic loss scale's start
    best.mixed_dtypes(batch)        # {"weights": ["float32"], "compute ...": "float16", "gradients ...": ["float32"]}
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from nmtkit.keras2 import import_tf
from nmtkit.model.transformer import build, smoothed_loss

tf = import_tf()

FP16_MAX = 65504.0          # the largest finite float16
FP16_MIN_NORMAL = 2.0**-14  # below it float16 is subnormal: fewer than its 11 significant bits
INITIAL_SCALE = 2.0**15     # Keras' LossScaleOptimizer starts its dynamic loss scale here


def _gradients(model, batch, label_smoothing: float) -> list:
    src, tgt = batch
    with tf.GradientTape() as tape:
        loss_sum, ntok = smoothed_loss(model((src, tgt[:, :-1]), training=False), tgt[:, 1:], label_smoothing)
        loss = loss_sum / tf.maximum(ntok, 1.0)
    return tape.gradient(loss, model.trainable_variables)


def fp16_gradients(restored, batch, scale: float = INITIAL_SCALE) -> pd.DataFrame:
    """One batch's fp32 gradients of a restored model (nk.restore), cast to float16 as they are and multiplied by
    `scale` first: the share of the nonzero values that become 0, that are subnormal, that lose more than float16's
    rounding error (2^-11 relative), that overflow, and the largest value after scaling."""
    grads = _gradients(restored.model, batch, restored.config.model.label_smoothing)
    values = np.concatenate([np.abs(np.asarray(tf.convert_to_tensor(g), np.float64)).ravel() for g in grads])
    values = values[values > 0]
    rows = {}
    for name, factor in (("as computed", 1.0), (f"x {scale:,.0f} (loss scale)", scale)):
        x = values * factor
        with np.errstate(over="ignore"):
            h = x.astype(np.float16).astype(np.float64)
        finite = np.isfinite(h)
        rows[name] = {"become 0 (%)": 100 * np.mean(h == 0), "subnormal (%)": 100 * np.mean(x < FP16_MIN_NORMAL),
                      "lose digits (%)": 100 * np.mean(finite & (np.abs(h - x) > x * 2.0**-11)),
                      "overflow (%)": 100 * np.mean(~finite), "largest": float(x.max())}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = f"{values.size:,} nonzero gradient values"
    return frame


def mixed_dtypes(cfg, vocab_size: int, batch) -> dict:
    """A mixed_float16 model of `cfg.model`: the dtype of its weights (the master copy Adam updates), of its
    matmuls, and of the gradients a rank hands to the allreduce."""
    model = build(cfg.model, vocab_size, dtype="mixed_float16")
    grads = _gradients(model, batch, cfg.model.label_smoothing)
    return {"weights": sorted({v.dtype.name for v in model.trainable_variables}),
            "compute (matmuls, activations)": model.compute_dtype,
            "gradients (what the allreduce gets)": sorted({tf.convert_to_tensor(g).dtype.name for g in grads})}
