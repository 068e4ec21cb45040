"""A GPU-shaped run on CPU (issue 67): one process made to list a Tesla T4 (tests/gpushape, loaded before TensorFlow
builds anything) takes every branch a GPU takes, in tf-keras and in the kit, and trains 3 steps in float32 and in
mixed_float16. Before the fix its first step failed as every GPU run did: tf-keras compiles the optimizer's update per
variable with XLA wherever a GPU is listed, and FusedAdam handed one variable's trace a tensor of another's."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "gpushape"))
import gpushape_switch as switch  # noqa: E402


@pytest.mark.parametrize("precision", ["float32", "mixed_float16"])
def test_fused_adam_under_jit_compile_updates_each_variable_as_without(precision):
    # the reproduction: before the fix, InaccessibleTensorError ('Pow:0' ... is out of scope) here
    from one_process import three_variables  # its module imports TensorFlow: not at collection
    (on, with_jit), (off, without) = three_variables(precision, jit=True), three_variables(precision, jit=False)
    assert on and not off
    for a, b in zip(with_jit, without):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert all(np.all(np.asarray(a) < 0.5) for a in with_jit)  # every variable moved towards its target


def test_the_switch_is_off_unless_asked():
    env = switch.environ(0)
    p = subprocess.run([sys.executable, "-c", "import nmtkit.keras2 as k, pynvml; tf = k.import_tf(); "
                        "print(len(tf.config.list_physical_devices('GPU')), pynvml.__file__)"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    gpus, nvml = p.stdout.split()
    assert gpus == "0" and "gpushape" not in nvml


@pytest.fixture(scope="module")
def shaped(nmt_data, tmp_path_factory):
    """tests/gpushape/one_process.py under the switch (one GPU): (its RESULT record, the calls it recorded)."""
    out = tmp_path_factory.mktemp("shaped")
    record = out / "calls.jsonl"
    env = switch.environ(1, record)
    for var in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        env.pop(var, None)  # the kit picks the pools here, as on a GPU machine
    p = subprocess.run([sys.executable, str(HERE / "gpushape" / "one_process.py"), str(nmt_data), str(out / "runs")],
                       env=dict(env, TF_CPP_MIN_LOG_LEVEL="2"), capture_output=True, text=True, timeout=300)
    lines = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    assert p.returncode == 0 and lines, p.stdout[-2000:] + p.stderr[-3000:]
    res = json.loads(lines[-1][len("RESULT "):])
    errors = {k: v["error"] for k, v in res.items() if isinstance(v, dict) and "error" in v}
    assert not errors, "\n\n".join(f"{k}:\n{v}" for k, v in errors.items())
    return res, switch.calls(record)


def test_tensorflow_and_tf_keras_see_the_gpu_and_the_kit_decides_the_optimizers_xla(shaped):
    from nmtkit.training.schedule import OPTIMIZER_JIT
    res, _ = shaped
    assert res["gpus"] == ["/physical_device:GPU:0"] and res["capabilities"] == [[7, 5]]
    # tf-keras's own decision as constructed: XLA for the optimizer, the branch no CPU run took before
    assert res["keras_adam_jit"] is True and res["fused_adam_jit"] is True
    # the kit's: off (nmtkit.training.schedule.OPTIMIZER_JIT says why), for both precisions and in the runs
    assert OPTIMIZER_JIT is False
    assert res["kit_optimizer_jit_float32"] is False and res["kit_optimizer_jit_mixed_float16"] is False
    assert res["float32"]["optimizer_jit"] is False and res["auto"]["optimizer_jit"] is False


@pytest.mark.parametrize("precision", ["float32", "mixed_float16"])
def test_fused_adam_as_tf_keras_builds_it_on_a_gpu_updates_three_variables(shaped, precision):
    res, _ = shaped
    jit, values = res[f"jit_{precision}"]
    nojit, reference = res[f"nojit_{precision}"]
    assert jit is True and nojit is False
    for a, b in zip(values, reference):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_every_gpu_branch_of_the_kit_takes_its_gpu_side(shaped):
    res, calls = shaped
    assert res["decide_precision"] == "mixed_float16"
    assert res["auto"]["precision"] == "mixed_float16" and res["float32"]["precision"] == "float32"
    for run in (res["float32"], res["auto"]):
        assert run["towers"] == 1  # a 2-core CPU runs 2 towers; a GPU one
        assert run["device_memory_gib"] == 15.0 and run["micro_batches"] == 1  # the card's memory was fitted
        assert run["xla"] is False
    cores = len(os.sched_getaffinity(0))
    assert res["threads"] == [cores, cores]  # a GPU process's pools: every core, no towers' split
    # the wmt16-base profile's own 256 sentences on the 16 GB card, in the precision auto picks: 2 micro-batches
    assert res["wmt16_base"] == {"batch": 256, "device_bytes": 15.0 * 2**30, "micro_batches": 2}
    # a Horovod rank: one allreduce per gradient (NCCL's path), not the one fused allreduce of CPU ranks
    assert res["horovod"]["fused"] is False and "an allreduce per gradient via NCCL" in res["horovod"]["describe"]
    assert res["horovod"]["pinned"] == {"gpus": 1, "device": 0, "threads": [cores, cores]}
    # the pinning and memory growth reached TensorFlow's config, recorded instead of made
    pid = {c["pid"] for c in calls}
    assert len(pid) == 1 and calls, calls
    assert {"call": "set_visible_devices", "devices": ["/physical_device:GPU:0"], "device_type": "GPU"} in \
        [{k: v for k, v in c.items() if k != "pid"} for c in calls]
    assert [c["enable"] for c in calls if c["call"] == "set_memory_growth"] and \
        all(c["enable"] and c["device"] == "/physical_device:GPU:0" for c in calls if c["call"] == "set_memory_growth")


@pytest.mark.parametrize("run", ["float32", "auto"])
def test_three_gpu_shaped_steps_train_with_falling_loss(shaped, run):
    res, _ = shaped
    r = res[run]
    assert r["status"] == "finished" and r["step"] == 3
    losses = r["losses"]
    assert len(losses) == 3 and all(math.isfinite(x) for x in losses), losses
    assert losses[0] > losses[1] > losses[2], losses
