"""nmtkit: a Jupyter course kit for distributed Transformer training (WMT16 en->de) with Horovod.

Importing nmtkit selects the Keras 2 API (tf-keras) for this process: Horovod 0.28.1 fails under Keras 3,
and TensorFlow reads TF_USE_LEGACY_KERAS when tf.keras is first touched.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# Quiet TensorFlow's C++ start-up banner unless the user asked for it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"
