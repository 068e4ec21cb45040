"""A broken driver's clues stay visible: TensorFlow's 'failed call to cuInit' is start-up noise only where no NVIDIA
driver is loaded; doctor's pattern catches both clues; every kit process asks for GPU memory growth."""
import os
import subprocess
import sys

from nmtkit.keras2 import DRIVER_CLUES, probe_noise

CUINIT = "E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:152] failed call to cuInit: UNKNOWN ERROR (303)"
DLOPEN = "W tensorflow/core/common_runtime/gpu/gpu_device.cc:2344] Cannot dlopen some GPU libraries. Please make sure"


def test_cuinit_is_noise_only_without_a_driver():
    assert probe_noise(driver=False).search(CUINIT)
    assert not probe_noise(driver=True).search(CUINIT)
    assert not probe_noise(driver=True).search(DLOPEN) and not probe_noise(driver=False).search(DLOPEN)
    assert probe_noise(driver=True).search("Unable to register cuDNN factory")  # the probe's chatter still goes


def test_doctor_pattern_catches_the_driver_clues():
    assert DRIVER_CLUES.search(CUINIT) and DRIVER_CLUES.search(DLOPEN)
    assert not DRIVER_CLUES.search("oneDNN custom operations are on")


def test_import_tf_turns_on_memory_growth_unless_the_user_chose():
    code = "import os; from nmtkit.keras2 import import_tf; import_tf(); print(os.environ['TF_FORCE_GPU_ALLOW_GROWTH'])"
    env = {k: v for k, v in os.environ.items() if k != "TF_FORCE_GPU_ALLOW_GROWTH"}
    run = lambda e: subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,  # noqa: E731
                                   timeout=120).stdout.strip()
    assert run(env) == "true"
    assert run(dict(env, TF_FORCE_GPU_ALLOW_GROWTH="false")) == "false"
