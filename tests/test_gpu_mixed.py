"""Mixed precision trained end to end on CPU: mixed_float16 and mixed_bfloat16 train the tiny model to a finite,
falling loss, checkpoint and resume exactly (the dynamic loss scale included, and logged); the gradients that
cross the wire are the loss-scaled ones (what train.compression=fp16 casts); 2 ranks end with equal weights, with
and without fp16 compression."""
import importlib.util
import math

import numpy as np
import pytest

from nmtkit import config
from nmtkit.files import read_jsonl

from conftest import small_config

pytestmark = [pytest.mark.long, pytest.mark.slow]  # the long tier (tests/conftest.py): make test leaves it out

# 8 sentences a step and 4 evaluated: a CPU has no float16 kernels worth the name (1.2 s a step at 32 sentences, and
# 10 s to decode 40), and what these tests assert (the loss falls, the resume is exact) does not need more
MIXED = {"model.dropout": 0.0, "train.steps": 24, "train.ckpt_every": 12, "train.warmup_steps": 10,
         "train.lr_scale": 1.0, "train.log_every": 6, "data.batch_sentences": 8, "eval.dev_sentences": 4,
         "eval.test_sentences": 4}


def _check_loss_scale_trace(precision, records, scalars):
    """mixed_float16 logs the dynamic loss scale (notebook 02 plots it): each step's scale in the rank log, a step
    marked overflowed exactly when the next one runs at half its scale, and the scale after each log interval as the
    `loss_scale` scalar; bfloat16 needs no loss scaling and logs none."""
    logged = {r["step"]: r["value"] for r in scalars if r["tag"] == "loss_scale"}
    if precision != "mixed_float16":
        assert not logged and not any("loss_scale" in r for r in records)
        return
    scales = [r["loss_scale"] for r in records]
    assert scales[0] == 2.0 ** 15, "Keras' initial dynamic loss scale"
    assert all(s >= 1 and math.log2(s) == int(math.log2(s)) for s in scales), scales  # powers of two
    for a, b in zip(records, records[1:]):
        assert (b["loss_scale"] == a["loss_scale"] / 2) == a["overflow"], (a, b)
        assert a["overflow"] or b["loss_scale"] == a["loss_scale"]  # no growth within 2,000 good steps
    assert sorted(logged) == [6, 12, 18, 24]
    for step, value in logged.items():
        last = records[step - 1]
        assert value == last["loss_scale"] / (2 if last["overflow"] else 1), (step, value, last)


def _final_state(run):
    from nmtkit.keras2 import import_tf
    tf = import_tf()
    reader = tf.train.load_checkpoint(str(run / "checkpoints"))
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map() if "save_counter" not in k}


@pytest.mark.parametrize("precision", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision_trains_checkpoints_and_resumes_exactly(precision, nmt_data, tmp_path):
    from nmtkit.training.loop import train
    cfg = small_config(**MIXED, **{"train.precision": precision})
    straight = train(cfg, tmp_path / "straight", data_dir=nmt_data, progress=False)
    assert straight["precision"] == precision
    records = list(read_jsonl(tmp_path / "straight" / "ranks" / "rank0.jsonl"))
    losses = [r["loss"] for r in records]
    assert len(losses) == 24 and all(math.isfinite(x) for x in losses)
    assert np.mean(losses[-6:]) < np.mean(losses[:6]) - 0.5
    _check_loss_scale_trace(precision, records, list(read_jsonl(tmp_path / "straight" / "scalars.jsonl")))

    # the straight run evaluated at its end in this precision; the two halves need not (a float16 decode is slow here)
    half = cfg.with_overrides({"train.steps": 12, "eval.at_end": False})
    train(half, tmp_path / "resumed", data_dir=nmt_data, progress=False)
    train(half.with_overrides({"train.steps": 24}), tmp_path / "resumed", data_dir=nmt_data, progress=False)
    a, b = _final_state(tmp_path / "straight"), _final_state(tmp_path / "resumed")
    assert a.keys() == b.keys()
    if precision == "mixed_float16":
        assert any("loss_scale" in k for k in a), "the checkpoint holds the loss scale"
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_the_wire_carries_loss_scaled_gradients(nmt_data):
    """train.compression=fp16 casts what dist.mean_all gets: under mixed_float16 that must be the scaled
    gradients (unscaled ones underflow in fp16), unscaled only after the allreduce."""
    from nmtkit.data.pipeline import make_dataset
    from nmtkit.keras2 import import_tf
    from nmtkit.model.transformer import smoothed_loss
    from nmtkit.training.dist import Single
    from nmtkit.training.trainer import Trainer, loss_scale_variables
    tf = import_tf()
    seen = []

    class Recording(Single):
        def mean_all(self, xs):
            seen.append([np.array(tf.convert_to_tensor(x), dtype=np.float64) for x in xs])
            return list(xs)

    cfg = small_config(**MIXED, **{"train.precision": "mixed_float16"})
    trainer = Trainer(cfg, 400, Recording())
    src, tgt = next(iter(make_dataset(nmt_data, "train", cfg.data, shuffle=False)))
    scale = float(trainer.optimizer.loss_scale)
    assert scale > 1 and len(loss_scale_variables(trainer.optimizer)) == 2
    with tf.GradientTape() as tape:
        s, n = smoothed_loss(trainer.model((src, tgt[:, :-1]), training=True), tgt[:, 1:], 0.1)
        loss = s / n
    ref = tape.gradient(loss, trainer.variables)
    trainer._train_step(((src, tgt),))  # eagerly, so the recording sees values
    for got, want in zip(seen[0], ref):
        np.testing.assert_allclose(got, scale * np.array(tf.convert_to_tensor(want), dtype=np.float64),
                                   rtol=0.05, atol=scale * 2e-3)
    values = np.concatenate([np.abs(np.asarray(tf.convert_to_tensor(g), np.float32)).ravel() for g in ref])
    values = values[values > 0]

    def worst(x):  # largest relative error of the fp16 cast Horovod's compression makes
        return float(np.max(np.abs(x.astype(np.float16).astype(np.float64) - x) / x))

    # unscaled, small gradients fall below fp16's normal range and lose digits (or vanish); scaled, none do
    assert worst(values) > 2.0 ** -11
    assert worst(values.astype(np.float64) * scale) <= 2.0 ** -11


@pytest.mark.skipif(not importlib.util.find_spec("horovod"), reason="Horovod is not installed")
def test_two_ranks_mixed_float16_equal_weights_with_and_without_fp16_compression(tmp_path_factory):
    from test_cluster_train import TINY

    from nmtkit.cluster import Cluster
    from nmtkit.data.prepare import prepare
    data = tmp_path_factory.mktemp("data") / "tiny"
    cfg = config.load("tiny", dict(TINY, **{"data.dir": str(data), "train.steps": 12, "model.dropout": 0.0,
                                            "train.precision": "mixed_float16", "data.batch_sentences": 16}))
    prepare(cfg, progress=False)
    cluster = Cluster(engines=2, profile_dir=tmp_path_factory.mktemp("ipython") / "profile_nmtkit").start()
    try:
        out = {}
        for compression in ("none", "fp16"):
            # one of the two evaluates at its end (each rank decodes a share in mixed_float16), the other need not
            c = cfg.with_overrides({"train.compression": compression, "eval.at_end": compression == "none"})
            results = cluster.launch(c, tmp_path_factory.mktemp(compression) / "run", preflight=False).wait(timeout=300)
            sums = [r.value for r in results]
            assert [s["precision"] for s in sums] == ["mixed_float16"] * 2
            assert math.isfinite(sums[0]["train_loss"])
            assert sums[0]["weights_checksum"] == sums[1]["weights_checksum"], compression
            out[compression] = sums[0]["train_loss"]
        assert abs(out["fp16"] - out["none"]) < 0.05 * out["none"]  # compressing scaled gradients costs ~nothing
    finally:
        cluster.stop()
