"""The dynamic loss scale's two config fields (train.loss_scale_start, train.loss_scale_growth) reach Keras'
LossScaleOptimizer, so a short run started too high with a short growth interval shows what notebook 02's figure
shows: steps skipped on overflow with the scale halved, the scale doubled after that many good steps, and a loss
that still falls. Fails on 0dab664: the config has no such fields (Keras' 2^15 and 2,000 steps were fixed)."""
import math

from nmtkit.files import read_jsonl

from conftest import small_config

# 8 sentences a step: a CPU's float16 is slow (tests/test_gpu_mixed.py), and the scale's moves need no more
SHORT = {"train.precision": "mixed_float16", "train.steps": 16, "data.batch_sentences": 8, "model.dropout": 0.0,
         "train.warmup_steps": 10, "train.lr_scale": 1.0, "eval.at_end": False,
         "train.loss_scale_start": 2.0**24, "train.loss_scale_growth": 3}


def test_a_scale_started_high_halves_on_overflow_and_doubles_after_good_steps(nmt_data, tmp_path):
    from nmtkit.training.loop import train
    train(small_config(**SHORT), tmp_path / "run", data_dir=nmt_data, progress=False)
    recs = list(read_jsonl(tmp_path / "run" / "ranks" / "rank0.jsonl"))
    scales, skipped = [r["loss_scale"] for r in recs], [r["overflow"] for r in recs]
    assert scales[0] == 2.0**24 and skipped[0], "the first step overflows at 2^24 and is skipped"
    halved = [i for i in range(1, len(recs)) if scales[i] == scales[i - 1] / 2]
    doubled = [i for i in range(1, len(recs)) if scales[i] == scales[i - 1] * 2]
    assert halved and doubled, scales
    assert all(skipped[i - 1] for i in halved)  # a halving follows a skipped step, and only one
    for i in doubled:  # a doubling follows exactly loss_scale_growth good steps
        assert i >= 3 and not any(skipped[i - 3:i]) and len(set(scales[i - 3:i])) == 1, scales
    losses = [r["loss"] for r in recs]
    assert all(math.isfinite(x) for x in losses)
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 0.3, losses  # it still learns


def test_the_loss_scale_fields_have_their_rules_at_the_field():
    import pytest

    from nmtkit import config
    from nmtkit.errors import ConfigError
    cfg = config.profile("tiny")
    assert (cfg.train.loss_scale_start, cfg.train.loss_scale_growth) == (2.0**15, 2000)  # Keras' defaults
    for bad in ({"train.loss_scale_start": 0}, {"train.loss_scale_growth": 0}):
        with pytest.raises(ConfigError):
            cfg.with_overrides(bad)
