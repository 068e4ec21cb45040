"""The TensorFlow/Keras stack this process runs on, and the check that it is the Keras 2 API."""
from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

from nmtkit.errors import StackError

KERAS3_FIX = ("Keras 3 was loaded in this process before nmtkit could select the Keras 2 API (tf-keras), and "
              "Horovod 0.28.1 does not work with Keras 3. Restart the kernel/process and import nmtkit (or set "
              "TF_USE_LEGACY_KERAS=1) before TensorFlow; in Jupyter pick the 'nmtkit' kernel, which sets it.")

# What TensorFlow's Linux wheel prints on every import on a machine without CUDA (it probes for the CUDA
# plugins), straight to file descriptor 2, before any log level applies. Other lines pass through.
_PROBE = (r"Unable to register cu(FFT|DNN|BLAS) factory|All log messages before absl::InitializeLog|"
          r"oneDNN custom operations are on|TF-TRT Warning|computation placer already registered|"
          r"This TensorFlow binary is optimized to use|rebuild TensorFlow with the appropriate compiler flags|"
          r"oneDNN supports DT_INT64 only on platforms with AVX-512")
# "failed call to cuInit" is noise without a driver, and the first clue of a broken one on a GPU machine.
DRIVER_CLUES = re.compile(r"failed call to cuInit|Cannot dlopen some GPU libraries|CUDA_ERROR|"
                          r"driver version is insufficient|kernel driver does not appear")
NOISE = re.compile(_PROBE + r"|failed call to cuInit")  # also what the course keeps out of published notebooks


def nvidia_driver_present() -> bool:
    """An NVIDIA kernel driver is loaded (its /proc entry), whatever TensorFlow makes of it."""
    return os.path.exists("/proc/driver/nvidia/version")


def probe_noise(driver: bool) -> re.Pattern:
    """What to drop from TensorFlow's start-up chatter: with a driver, its cuInit failure is kept (a clue)."""
    return re.compile(_PROBE) if driver else NOISE


_CUDA_PROBE_NOISE = probe_noise(nvidia_driver_present())


@contextlib.contextmanager
def _filter_fd2(noise: re.Pattern = _CUDA_PROBE_NOISE):
    """Capture file descriptor 2 for the duration, then re-emit every line that is not known noise."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real fd 2 (embedded interpreters): nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            kept = [line for line in tmp.read().decode("utf-8", "replace").splitlines() if line
                    and not noise.search(line)]
            if kept:
                sys.stderr.write("\n".join(kept) + "\n")


def _import_tensorflow():
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    # Memory growth in every process that imports TensorFlow through the kit (a notebook kernel included): a
    # process then holds the GPU memory it uses, not all of it until it exits. The user's own setting wins.
    os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")
    with _filter_fd2():
        import tensorflow as tf
        tf.config.list_physical_devices("GPU")  # the CUDA probe (cuInit) happens here, inside the filter
    return tf


def keras_flavour() -> str:
    """'tf_keras' when tf.keras is the Keras 2 API, 'keras3' otherwise. Imports TensorFlow."""
    tf = _import_tensorflow()
    module = tf.keras.Model.__module__
    return "tf_keras" if module.startswith("tf_keras") else "keras3"


def import_tf():
    """Import TensorFlow with the Keras 2 API, or raise StackError saying how to fix the process."""
    if "tensorflow" not in sys.modules or "keras" not in sys.modules:
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
    tf = _import_tensorflow()
    if keras_flavour() != "tf_keras":
        raise StackError(KERAS3_FIX)
    return tf
