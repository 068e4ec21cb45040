"""The learning-rate policy against its formula, the multi-rank scaling rule and the precision decision."""
import math

import pytest

import nmtkit  # noqa: F401
from nmtkit import config
from nmtkit.errors import ConfigError
from nmtkit.keras2 import import_tf
from nmtkit.training.dist import Single
from nmtkit.training.precision import decide_precision
from nmtkit.training.schedule import TransformerSchedule, make_optimizer, make_schedule, rank_factor, transformer_lr

tf = import_tf()


def formula(step, d_model=512, warmup=8000):
    return 2.0 * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


@pytest.mark.parametrize("step", [1, 4000, 8000, 300_000])
def test_schedule_matches_formula(step):
    sched = TransformerSchedule(512, 8000, 2.0)
    assert float(sched(step)) == pytest.approx(formula(step), rel=1e-5)
    assert transformer_lr(step, 512, 8000) == pytest.approx(formula(step), rel=1e-12)


def test_schedule_shape():
    sched = TransformerSchedule(512, 8000, 2.0)
    assert float(sched(0)) == pytest.approx(formula(1), rel=1e-5)  # the first update is not lr=0
    peak = float(sched(8000))
    assert float(sched(4000)) == pytest.approx(peak / 2, rel=1e-4)        # linear warmup
    assert float(sched(32000)) == pytest.approx(peak / 2, rel=1e-4)       # 1/sqrt decay
    assert peak == pytest.approx(2.0 / math.sqrt(512) / math.sqrt(8000), rel=1e-5)


def test_rank_scaling():
    assert rank_factor("none", 4) == 1.0
    assert rank_factor("sqrt", 4) == 2.0
    assert rank_factor("linear", 4) == 4.0
    with pytest.raises(ConfigError, match="lr_scaling"):
        rank_factor("cubic", 4)
    cfg = config.profile("wmt16-base").with_overrides({"train.lr_scaling": "linear"})
    s = make_schedule(cfg.model, cfg.train, size=4)
    assert float(s(8000)) == pytest.approx(4 * formula(8000), rel=1e-5)


def test_choose_precision():
    assert decide_precision("auto", 0, flags=set())[0] == "float32"  # a CPU without native bf16
    assert decide_precision("auto", 2)[0] == "mixed_float16"
    assert decide_precision("float32", 8)[0] == "float32"
    assert decide_precision("mixed_float16", 0)[0] == "mixed_float16"
    with pytest.raises(ConfigError, match="train.precision"):
        decide_precision("bf17", 0)[0]


def test_optimizer_settings():
    cfg = config.profile("wmt16-base")
    sched = make_schedule(cfg.model, cfg.train)
    opt = make_optimizer(sched, cfg.train, "float32")
    assert isinstance(opt, tf.keras.optimizers.Adam)
    assert opt.beta_2 == pytest.approx(0.997) and opt.epsilon == pytest.approx(1e-9)
    mixed = make_optimizer(sched, cfg.train, "mixed_float16")
    assert isinstance(mixed, tf.keras.mixed_precision.LossScaleOptimizer)


def test_single_dist_is_identity():
    d = Single()
    assert (d.rank, d.size, d.is_chief) == (0, 1, True)
    assert d.any(True) and not d.any(False)
    assert d.mean(3.0) == 3.0 and d.sum(2) == 2.0 and d.mean_all((1.0, 2.0)) == [1.0, 2.0]


def test_gradients_fused_into_one_allreduce_except_on_nccl_gpus():
    from nmtkit.training.dist import fuse_gradients
    assert fuse_gradients(gpus=0, nccl_built=False) and fuse_gradients(gpus=0, nccl_built=True)
    assert fuse_gradients(gpus=1, nccl_built=False)  # a GPU without NCCL: the allreduce still runs on the CPU
    assert not fuse_gradients(gpus=1, nccl_built=True)


def test_gradient_compression_choice():
    import horovod.tensorflow as hvd

    from nmtkit.errors import StackError
    from nmtkit.training.dist import compressor
    assert compressor(hvd, "fp16") is hvd.Compression.fp16 and compressor(hvd, "none") is hvd.Compression.none
    with pytest.raises(StackError, match="train.compression"):
        compressor(hvd, "int8")
    assert config.load("tiny", {"train.compression": "fp16"}).train.compression == "fp16"
    with pytest.raises(ConfigError, match="train.compression"):
        config.load("tiny", {"train.compression": "zip"})
