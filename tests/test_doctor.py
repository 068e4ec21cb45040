"""nmtkit doctor: the judging rules (with facts from machines we don't have) and the real stack here."""
import json
import os
import subprocess
import sys

import pytest

from nmtkit import doctor


def healthy(**changes) -> doctor.Facts:
    f = doctor.Facts(python=(3, 11, 7), tensorflow=doctor.TENSORFLOW_VERSION, keras_flavour="tf_keras",
                     tf_keras="2.18.0", horovod=doctor.HOROVOD_VERSION, horovod_tf_built=True, horovod_gloo=True,
                     versions={"ipyparallel": "9.0.1", "sentencepiece": "0.2.0", "sacrebleu": "2.5.1"},
                     disk_free_gb=50.0)
    for k, v in changes.items():
        setattr(f, k, v)
    return f


def failed(facts):
    return {r.name: r.fix for r in doctor.judge(facts) if not r.ok}


def test_healthy_facts_pass(capsys):
    assert failed(healthy()) == {}
    assert doctor.main(facts=healthy()) == 0
    out = capsys.readouterr().out
    assert "healthy" in out and "none: CPU mode" in out


def test_horovod_without_tensorflow_fails_with_the_rebuild_command(capsys):
    f = healthy(horovod_tf_built=False)
    fixes = failed(f)
    assert "built without TensorFlow support" in fixes["Horovod frameworks"]
    assert "--no-build-isolation" in fixes["Horovod frameworks"]
    assert doctor.main(facts=f) == 1
    assert "FAIL Horovod frameworks" in capsys.readouterr().out


def test_gpus_without_nccl_fail_and_cpu_without_nccl_passes():
    gpu = [{"name": "Tesla V100-SXM2-16GB", "memory_gb": 15.8, "driver": "535.104"}]
    fixes = failed(healthy(nvml_gpus=gpu, tf_gpus=["/physical_device:GPU:0"]))
    assert "HOROVOD_GPU_OPERATIONS=NCCL" in fixes["Horovod tensor ops"]
    assert "NCCL/CUDA" in failed(healthy(nvml_gpus=gpu, tf_gpus=["/physical_device:GPU:0"], horovod_nccl=True))[
        "Horovod tensor ops"]  # NCCL without CUDA ops is not a GPU build
    ok = healthy(nvml_gpus=gpu, tf_gpus=["/physical_device:GPU:0"], horovod_nccl=True, horovod_cuda=True,
                 horovod_libs={"libnccl.so.2": "/v/nvidia/nccl/lib/libnccl.so.2"})
    assert failed(ok) == {}


def test_nccl_that_does_not_resolve_fails():
    gpu = [{"name": "NVIDIA A10", "memory_gb": 22.0, "driver": "555.42"}]
    f = healthy(nvml_gpus=gpu, tf_gpus=["/physical_device:GPU:0"], horovod_nccl=True, horovod_cuda=True,
                horovod_libs={"libnccl.so.2": "not found"})
    assert "NMTKIT_REBUILD_HOROVOD=1" in failed(f)["Horovod GPU libraries"]


def test_driver_clues_are_shown_not_hidden(capsys):
    gpu = [{"name": "NVIDIA L4", "memory_gb": 22.0, "driver": "535.1"}]
    clue = "failed call to cuInit: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"
    f = healthy(nvml_gpus=gpu, horovod_nccl=True, horovod_cuda=True, driver_clues=[clue])
    assert "nvidia-smi" in failed(f)["TensorFlow's driver messages"]
    doctor.main(facts=f)
    assert clue in capsys.readouterr().out


def test_linked_libraries_reads_ldd(tmp_path):
    import shutil as sh
    if not sh.which("ldd"):
        pytest.skip("no ldd on this machine")
    lib = tmp_path / "mpi_lib.cpython-311-x86_64-linux-gnu.so"
    lib.symlink_to(sys.executable)  # any dynamic executable: ldd lists libc
    assert any(v != "not found" for v in doctor.linked_libraries(str(tmp_path), ("libc",)).values())


def test_gpu_seen_by_nvml_but_not_tensorflow():
    gpu = [{"name": "A100", "memory_gb": 40.0, "driver": "550"}]
    assert "tensorflow[and-cuda]==2.18.1" in failed(healthy(nvml_gpus=gpu, horovod_nccl=True))["GPUs (TensorFlow)"]


@pytest.mark.parametrize("changes, name, words", [
    ({"keras_flavour": "keras3"}, "Keras", "TF_USE_LEGACY_KERAS=1"),
    ({"tensorflow": "2.21.0"}, "TensorFlow", "tensorflow==2.18.1"),
    ({"python": (3, 13, 0)}, "Python", "python3.11"),
    ({"horovod": None, "horovod_error": "ModuleNotFoundError"}, "Horovod", "reinstall Horovod"),
    ({"horovod_gloo": False}, "Horovod controllers", "without Gloo"),
    ({"disk_free_gb": 0.2}, "free disk (data)", "GB profile tiny needs"),
])
def test_each_failure_says_how_to_fix(changes, name, words):
    assert words in failed(healthy(**changes))[name]


def test_doctor_on_this_machine_is_healthy():
    r = subprocess.run([sys.executable, "-m", "nmtkit.cli", "doctor", "--json"], capture_output=True, text=True,
                       timeout=180)
    report = json.loads(r.stdout)
    bad = [c for c in report["checks"] if not c["ok"]]
    assert r.returncode == 0 and report["ok"], bad
    assert "Unable to register" not in r.stderr  # TensorFlow's CUDA-probe chatter stays out of the output
    names = {c["name"]: c["value"] for c in report["checks"]}
    assert names["Horovod frameworks"] == "TensorFlow" and "Gloo" in names["Horovod controllers"]
    assert names["Keras"].startswith("tf-keras 2.18")


def test_keras3_loaded_first_gets_a_clear_error():
    code = ("import os; os.environ.pop('TF_USE_LEGACY_KERAS', None)\n"
            "import tensorflow as tf; tf.keras.Model  # Keras 3 gets loaded\n"
            "import nmtkit\n"
            "from nmtkit.keras2 import import_tf, StackError\n"
            "try:\n    import_tf()\nexcept StackError as e:\n    print('STACKERROR', e)\n")
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)
    assert "STACKERROR" in r.stdout, r.stderr[-2000:]
    assert "Restart" in r.stdout and "TF_USE_LEGACY_KERAS=1" in r.stdout


def test_h100_with_driver_535_is_refused_with_the_545_fix():
    # TensorFlow 2.18.1 has only PTX (ISA 8.3, CUDA 12.3) for compute_90; the driver's JIT needs 545+
    h100 = [{"name": "NVIDIA H100 80GB HBM3", "memory_gb": 79.6, "driver": "535.104.05", "capability": (9, 0)}]
    fixes = failed(healthy(nvml_gpus=h100, tf_gpus=["/physical_device:GPU:0"], horovod_nccl=True, horovod_cuda=True))
    assert any("9.0" in k for k in fixes), f"doctor passed an H100 on driver 535: {fixes}"
    [fix] = [v for k, v in fixes.items() if "9.0" in k]
    assert "545" in fix and "PTX" in fix and "driver 535.104.05" in fix
    newer = [dict(h100[0], driver="550.54.15")]
    assert failed(healthy(nvml_gpus=newer, tf_gpus=["/physical_device:GPU:0"], horovod_nccl=True,
                          horovod_cuda=True)) == {}
    a100 = [{"name": "NVIDIA A100-SXM4-40GB", "memory_gb": 39.4, "driver": "535.104.05", "capability": (8, 0)}]
    assert failed(healthy(nvml_gpus=a100, tf_gpus=["/physical_device:GPU:0"], horovod_nccl=True,
                          horovod_cuda=True)) == {}  # sm_80 machine code ships: no PTX to compile


def test_doctor_checks_the_disk_the_profile_needs():
    # the homework (wmt16-base) prepares WMT16 and keeps its checkpoints: far more than the old flat 1 GB
    fixes = failed(healthy(profile="wmt16-base", disk_free_gb=8.0))
    assert any(k.startswith("free disk") for k in fixes), f"8 GB free passed for wmt16-base: {fixes}"
    need = doctor.disk_need("wmt16-base")
    assert sum(need.values()) > 10 and "checkpoints" in need
    [fix] = [v for k, v in fixes.items() if k.startswith("free disk")]
    assert "wmt16-base" in fix and f"{sum(need.values()):.1f} GB" in fix
    assert failed(healthy(profile="tiny", disk_free_gb=8.0)) == {}
    assert failed(healthy(profile="wmt16-base", disk_free_gb=sum(need.values()) + 1)) == {}
