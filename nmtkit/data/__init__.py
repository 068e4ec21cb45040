"""Data: the corpus (embedded synthetic grammar or WMT16 en-de), cleaning, joint BPE, stats, tf.data input.

The names the layers above use (see docs/architecture.md, "Data directory"); importing this package does not
import TensorFlow:

    from nmtkit.data.prepare import prepare
    from nmtkit.data import Tokenizer, make_dataset, read_split, DataStats
"""
from __future__ import annotations

# (`prepare` is not re-exported: nmtkit.data.prepare is the module of that name.)
_LAZY = {"Tokenizer": "nmtkit.data.bpe", "make_dataset": "nmtkit.data.pipeline",
         "read_split": "nmtkit.data.pipeline", "DataStats": "nmtkit.data.stats"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'nmtkit.data' has no attribute {name!r}")
