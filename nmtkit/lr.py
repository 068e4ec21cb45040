"""The Transformer learning-rate formula, once, TensorFlow-free: the Keras schedule (nmtkit.training.schedule) and
the analysis (question 6) both call it.

    lr(step) = factor * scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)

Linear warmup to a peak at step = warmup, then decay as 1/sqrt(step) (OpenSeq2Seq's `transformer_policy`,
the homework's rule). With N ranks the effective batch is N times larger; `lr_scaling` chooses what the
learning rate does about it: "none" (the homework: unchanged), "sqrt" (x sqrt(N)) or "linear" (x N).
"""
from __future__ import annotations

import math

SCALINGS = ("none", "sqrt", "linear")


def transformer_lr(step, d_model: int, warmup_steps: int, scale: float = 2.0, factor: float = 1.0, minimum=None):
    """The formula for a step >= 1: a float, a NumPy array (minimum=np.minimum) or a tensor (minimum=tf.minimum).

    Introduced in notebook 02_single_gpu_baseline."""
    if minimum is None:
        minimum = min
        step = max(float(step), 1.0)
    return factor * scale * d_model ** -0.5 * minimum(step ** -0.5, step * warmup_steps ** -1.5)


def rank_factor(lr_scaling: str, size: int) -> float:
    """How much N ranks multiply the learning rate."""
    if lr_scaling == "none":
        return 1.0
    if lr_scaling == "sqrt":
        return math.sqrt(size)
    if lr_scaling == "linear":
        return float(size)
    raise ValueError(f"train.lr_scaling={lr_scaling!r}: choose one of {', '.join(SCALINGS)}")


def lr_for(cfg, step, size: int = 1, minimum=None):
    """The learning rate a Config asks for at `step` with `size` ranks."""
    return transformer_lr(step, cfg.model.d_model, cfg.train.warmup_steps, cfg.train.lr_scale,
                          rank_factor(cfg.train.lr_scaling, size), minimum)
