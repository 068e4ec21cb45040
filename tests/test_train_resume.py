"""Resuming reads on from the saved input-pipeline position: the same next batches as an uninterrupted run,
without reading the batches before them again; and, with the profile's dropout on, a run stopped by SIGTERM or
killed mid-run and resumed ends with exactly the weights and Adam slots of the uninterrupted run."""
import os
import signal
import time

import numpy as np
import pytest

from nmtkit import runs
from nmtkit.data.pipeline import make_dataset
from nmtkit.keras2 import import_tf
from nmtkit.training.checkpoints import DataPosition
from nmtkit.training.dist import Single
from nmtkit.training.loop import train
from nmtkit.training.trainer import Trainer

from conftest import small_config

tf = import_tf()

pytestmark = [pytest.mark.long, pytest.mark.slow]  # the long tier (tests/conftest.py): make test leaves it out

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


def checkpoint_difference(a, b) -> dict:
    """max |difference| per variable between the newest checkpoints of two run directories (weights, Adam's
    m and v, the step, the optimizer's iterations); both must hold the same variables."""
    ra, rb = (tf.train.load_checkpoint(str(r / runs.CHECKPOINTS)) for r in (a, b))
    names = {n for n in ra.get_variable_to_shape_map() if not n.endswith("OBJECT_GRAPH") and "save_counter" not in n}
    assert names == {n for n in rb.get_variable_to_shape_map() if not n.endswith("OBJECT_GRAPH")
                     and "save_counter" not in n}
    weights = [n for n in names if n.startswith("model/")]
    slots = [n for n in names if n.startswith("optimizer/_variables/")]  # Adam's m and v for every weight
    assert weights and len(slots) >= 2 * len(weights), sorted(names)
    return {n: float(np.max(np.abs(ra.get_tensor(n).astype(np.float64) - rb.get_tensor(n).astype(np.float64))))
            for n in names}


RESUME = {"train.steps": 12, "train.ckpt_every": 4, "train.log_every": 1, "train.warmup_steps": 4,
          "eval.dev_sentences": 5, "eval.test_sentences": 5, "eval.beam_size": 1}


class Crash(Exception):
    """Stands for a process killed outright: the run ends without its stop checkpoint."""


@pytest.fixture(scope="module")
def straight(nmt_data, tmp_path_factory):
    """The uninterrupted run both ways of interrupting it are compared with (trained once: it is deterministic)."""
    run = tmp_path_factory.mktemp("straight") / "run"
    assert train(small_config(**RESUME), run, data_dir=nmt_data, progress=False)["status"] == "finished"
    return run


@pytest.mark.parametrize("how", ["sigterm", "killed"])
def test_resume_with_dropout_ends_with_the_uninterrupted_weights(straight, nmt_data, tmp_path, how):
    """SIGTERM at step 6: the stop checkpoints step 6. Killed at step 10: the resume starts from ckpt-8."""
    cfg = small_config(**RESUME)
    assert cfg.model.dropout == 0.1  # the profile's dropout, not 0.0

    def interrupt(rec):
        if how == "sigterm" and rec["step"] == 6:
            os.kill(os.getpid(), signal.SIGTERM)  # the loop stops at the next step, after a checkpoint
        if how == "killed" and rec["step"] == 10:
            raise Crash
    run = tmp_path / "resumed"
    if how == "sigterm":
        assert train(cfg, run, data_dir=nmt_data, progress=False, on_log=interrupt)["status"] == "stopped"
    else:
        with pytest.raises(Crash):
            train(cfg, run, data_dir=nmt_data, progress=False, on_log=interrupt)
    resumed = train(cfg, run, data_dir=nmt_data, progress=False)
    assert resumed["status"] == "finished" and resumed["step"] == 12
    diff = checkpoint_difference(straight, run)
    print(f"{how}: max |difference| {max(diff.values())} over {len(diff)} variables")
    assert max(diff.values()) == 0.0, {n: d for n, d in diff.items() if d}


class RankOne(Single):
    rank = 1


def test_dropout_seed_differs_by_rank_step_and_micro_batch_without_retracing():
    rng = np.random.default_rng(0)
    batch = (tf.constant(rng.integers(4, 400, (8, 12)), tf.int32), tf.constant(rng.integers(4, 400, (8, 13)), tf.int32))

    def first_loss(accum=1, dist=None, step=0):
        trainer = Trainer(small_config(**{"train.grad_accum": accum}), 400, dist)  # same initial weights each time
        trainer.step.assign(step)
        return float(trainer.run_step([batch] * accum)[0]), trainer

    base, trainer = first_loss()
    assert first_loss()[0] == base  # the same seed: the same masks
    assert first_loss(dist=RankOne())[0] != base  # each rank its own masks
    assert first_loss(step=1)[0] != base  # each step its own masks
    assert first_loss(accum=2)[0] != base  # the second micro-batch: its own masks (the first one's would repeat base)
    for _ in range(3):
        trainer.run_step([batch])
    assert trainer.train_step.experimental_get_tracing_count() == 1  # the seed is computed in the graph


def test_a_second_run_of_the_same_graph_reuses_the_trainer_and_trains_the_same_weights(straight, nmt_data, tmp_path):
    """A run after another of the same graph in this process (a notebook's second run, an in-process resume)
    reuses its Trainer, traced step and searches with every variable put back to its first value: the same
    checkpoint as a run in a fresh process (the straight run, or one trained on a freshly built Trainer)."""
    from nmtkit.training import trainer as trainers
    cfg = small_config(**RESUME)
    trainers._kept.clear()  # the first run builds a new Trainer
    assert train(cfg, tmp_path / "first", data_dir=nmt_data, progress=False)["status"] == "finished"
    (kept,) = trainers._kept
    traced = kept.train_step.experimental_get_tracing_count()
    searches = {k: s.fn.experimental_get_tracing_count() for k, s in kept.searchers.items()}
    assert searches and all(searches.values())  # the evaluation's beam search, traced by the first run
    # a run-only field changed (its length and checkpoints): the same Trainer, no new trace, the same weights
    run_only = cfg.with_overrides({"train.ckpt_every": 6, "train.log_every": 2, "train.max_hours": 1.0})
    second = train(run_only, tmp_path / "second", data_dir=nmt_data, progress=False)
    assert second["status"] == "finished" and trainers._kept == [kept]
    assert kept.train_step.experimental_get_tracing_count() == traced
    assert {k: s.fn.experimental_get_tracing_count() for k, s in kept.searchers.items()} == searches
    assert max(checkpoint_difference(tmp_path / "first", tmp_path / "second").values()) == 0.0
    assert max(checkpoint_difference(straight, tmp_path / "second").values()) == 0.0
    # a field the graph depends on: a new Trainer
    other = small_config(**{**RESUME, "train.steps": 2, "model.dropout": 0.2})
    train(other, tmp_path / "third", data_dir=nmt_data, progress=False)
    assert trainers._kept and trainers._kept[0] is not kept
    assert trainers.graph_key(other, 400, Single()) != trainers.graph_key(run_only, 400, Single())
    assert trainers.graph_key(cfg, 400, RankOne()) != trainers.graph_key(cfg, 400, Single())  # rank: its own masks
