"""A Transformer's parameter count, TensorFlow-free: of a built model, or of a shape before anything is built."""
from __future__ import annotations

import math

from nmtkit.model.memory import params_of


def count_params(model, vocab_size: int | None = None) -> int:
    """Trainable parameters of a built model (`count_params(model)`), or of a shape and vocabulary without building
    one (`count_params(cfg.model, vocab)`): the homework's 61M-parameter model built takes seconds and TensorFlow,
    its count from the shape none. The two agree (tests/test_model.py).

    Introduced in notebook 02_single_gpu_baseline."""
    if vocab_size is None:
        return int(sum(math.prod(v.shape) for v in model.trainable_variables))
    return params_of(model, vocab_size) - vocab_size  # params_of also counts an output bias the model does not have
