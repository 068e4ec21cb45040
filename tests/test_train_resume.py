"""Resuming reads on from the saved input-pipeline position: the same next batches as an uninterrupted run,
without reading the batches before them again."""
import time

import numpy as np
import pytest

from conftest import small_config
from nmtkit.data.pipeline import make_dataset
from nmtkit.train.checkpoints import DataPosition

pytestmark = pytest.mark.slow

STEPS = 1500  # about 12 epochs of the test corpus


def _batches(it, n):
    return [(s.numpy(), t.numpy()) for s, t in (next(it) for _ in range(n))]


def test_resume_continues_with_the_next_batches_without_replaying(nmt_data, tmp_path, capsys):
    cfg = small_config()
    straight = DataPosition.open(make_dataset(nmt_data, "train", cfg.data, seed=1), tmp_path, 0, 0, 1, keep=2)
    for _ in range(STEPS):
        next(straight.iterator)
    straight.save(STEPS)
    want = _batches(straight.iterator, 4)

    t0 = time.perf_counter()
    resumed = DataPosition.open(make_dataset(nmt_data, "train", cfg.data, seed=1), tmp_path, 0, STEPS, 1, keep=2)
    got = _batches(resumed.iterator, 4)
    t_resume = time.perf_counter() - t0
    assert "reading past" not in capsys.readouterr().out
    for (ws, wt), (gs, gt) in zip(want, got):
        np.testing.assert_array_equal(ws, gs)
        np.testing.assert_array_equal(wt, gt)

    t0 = time.perf_counter()
    replay = _batches(iter(make_dataset(nmt_data, "train", cfg.data, seed=1).skip(STEPS)), 4)
    t_replay = time.perf_counter() - t0
    np.testing.assert_array_equal(replay[0][0], want[0][0])  # the replay reaches the same place, slowly
    print(f"resume from the saved position {t_resume:.2f}s, replaying {STEPS} batches {t_replay:.2f}s")
    assert t_resume < t_replay / 2


def test_missing_position_falls_back_to_replaying(nmt_data, tmp_path, capsys):
    cfg = small_config()
    ds = make_dataset(nmt_data, "train", cfg.data, seed=2)
    want = _batches(iter(ds.skip(7)), 2)
    resumed = DataPosition.open(make_dataset(nmt_data, "train", cfg.data, seed=2), tmp_path, 0, 7, 1, keep=2)
    assert "no saved data position for step 7" in capsys.readouterr().out
    got = _batches(resumed.iterator, 2)
    for (ws, wt), (gs, gt) in zip(want, got):
        np.testing.assert_array_equal(ws, gs)
        np.testing.assert_array_equal(wt, gt)
