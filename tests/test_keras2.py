"""TensorFlow with the Keras 2 API, imported without the CUDA-probe chatter that would fill every notebook."""
import os
import subprocess
import sys

from nmtkit.keras2 import _filter_fd2


def test_filter_drops_known_noise_and_keeps_the_rest(capfd):
    with _filter_fd2():
        os.write(2, b"E0000 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting ...\n"
                    b"a real warning\n")
    assert capfd.readouterr().err == "a real warning\n"


def test_import_tf_is_quiet_and_keras2():
    code = "import nmtkit\nfrom nmtkit.keras2 import import_tf\ntf = import_tf()\nprint(tf.keras.Model.__module__)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("tf_keras")
    assert "Unable to register" not in r.stderr and "cuInit" not in r.stderr, r.stderr
