"""The TensorFlow/Keras stack this process runs on, and the check that it is the Keras 2 API."""
from __future__ import annotations

import os
import sys


class StackError(RuntimeError):
    """The software stack is not the one nmtkit needs; the message says what to do."""


KERAS3_FIX = ("Keras 3 was loaded in this process before nmtkit could select the Keras 2 API (tf-keras), and "
              "Horovod 0.28.1 does not work with Keras 3. Restart the kernel/process and import nmtkit (or set "
              "TF_USE_LEGACY_KERAS=1) before TensorFlow; in Jupyter pick the 'nmtkit' kernel, which sets it.")


def keras_flavour() -> str:
    """'tf_keras' when tf.keras is the Keras 2 API, 'keras3' otherwise. Imports TensorFlow."""
    import tensorflow as tf
    module = tf.keras.Model.__module__
    return "tf_keras" if module.startswith("tf_keras") else "keras3"


def import_tf():
    """Import TensorFlow with the Keras 2 API, or raise StackError saying how to fix the process."""
    if "tensorflow" not in sys.modules or "keras" not in sys.modules:
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    if keras_flavour() != "tf_keras":
        raise StackError(KERAS3_FIX)
    return tf
