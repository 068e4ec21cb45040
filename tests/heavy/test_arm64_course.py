"""`make test-arm64`: the longer runs of the students' linux/arm64 image (aarch64) under QEMU (the image and fixture of
tests/heavy/test_arm64.py): notebook 01 up to its first unanswered exercise, and two local Horovod ranks over Gloo
whose weights are equal bit for bit after their steps. Not in CI's arm64 tier (scripts/test-all.sh leaves this file
out): each takes minutes under emulation. Figures printed (pytest -s) for bench/README.md."""
from __future__ import annotations

import re

import pytest
from dockertools import why_not
from test_arm64 import arm64, emulated  # noqa: F401  (arm64: the image fixture)

pytestmark = pytest.mark.skipif(why_not() is not None, reason=why_not() or "")

# Each rank starts from its own random weights; Horovod's broadcast makes them rank 0's, then 3 steps of allreduced
# gradients on each rank's own batch: every rank must end with the same bytes. A digest of them per rank is printed.
RANKS = r"""
import hashlib, os, time
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import numpy as np, tensorflow as tf, horovod.tensorflow as hvd
hvd.init()
tf.random.set_seed(hvd.rank())
model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(4)])
model.build((None, 8))
opt = tf.keras.optimizers.SGD(0.1)
hvd.broadcast_variables(model.variables, root_rank=0)
rng = np.random.default_rng(hvd.rank())
t0 = time.time()
for step in range(3):
    x, y = rng.normal(size=(32, 8)).astype("float32"), rng.normal(size=(32, 4)).astype("float32")
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
    tape = hvd.DistributedGradientTape(tape)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
digest = hashlib.sha256(b"".join(v.numpy().tobytes() for v in model.variables)).hexdigest()
print(f"rank {hvd.rank()} of {hvd.size()} weights {digest} steps {time.time() - t0:.1f} s", flush=True)
"""


def test_notebook_01_to_its_first_exercise(arm64):  # noqa: F811
    out, took = emulated(arm64[0], "cd /tmp && python -c 'import sys; from nmtkit.course.runner import run_course; "
                         "sys.exit(run_course(\"/tmp/course\", only=[\"01\"], until_first=True))'", timeout=3600)
    print(f"\n[arm64] notebook 01 to its first exercise: {took:.0f} s\n{out.stdout[-1200:]}")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "01_" in out.stdout, out.stdout[-2000:]


def test_two_horovod_ranks_over_gloo_end_with_equal_weights(arm64):  # noqa: F811
    script = RANKS.replace("'", "'\\''")
    out, took = emulated(arm64[0], f"cd /tmp && printf '%s' '{script}' > ranks.py && "
                         "horovodrun --gloo -np 2 -H localhost:2 python ranks.py", timeout=1800)
    print(f"\n[arm64] two Horovod ranks over Gloo: {took:.0f} s\n{out.stdout[-800:]}")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    ranks = dict(re.findall(r"rank (\d) of 2 weights ([0-9a-f]{64})", out.stdout))
    assert sorted(ranks) == ["0", "1"] and ranks["0"] == ranks["1"], out.stdout[-2000:]
