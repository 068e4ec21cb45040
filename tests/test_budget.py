"""Spend only what learning needs: the projection, a budget that stops a run cleanly at a checkpoint (and a
relaunch with a larger one that resumes to the weights a straight run reaches), early stopping on a plateau of
dev BLEU, and one-line refusals of budgets that buy nothing."""
import json
import subprocess
import sys

import numpy as np
import pytest

from nmtkit import runs
from nmtkit.errors import ConfigError
from nmtkit.training.budget import Budget, Plateau, Projection, measured_step_s

from conftest import small_config

# --- the decisions, without training ------------------------------------------------------------------------

def test_the_budget_stops_before_the_next_checkpoint_interval_would_cross_it():
    b = Budget(max_hours=1.0, max_cost=0.0, price=3.0, nodes=2)
    # 0.9 h spent, 100 steps of 10 s to the next checkpoint = 0.28 h: 1.18 h > 1 h -> stop here
    assert b.exhausted(0.9, step=100, step_s=10.0, ckpt_every=200, total=10_000)
    assert not b.exhausted(0.5, step=100, step_s=10.0, ckpt_every=200, total=10_000)  # 0.78 h fits
    assert b.exhausted(0.7, step=100, step_s=10.0, ckpt_every=200, total=10_000, reserve_s=1000)  # + evaluation
    assert not b.exhausted(0.95, step=9_990, step_s=10.0, ckpt_every=200, total=10_000)  # only 10 steps left
    assert not Budget(0.0, 0.0, 3.0, 2).exhausted(99.0, 1, 10.0, 200, 10_000)  # no budget: never


def test_a_cost_budget_is_hours_at_the_price_of_every_node():
    assert Budget(0.0, 12.0, price=3.0, nodes=2).limit_h == pytest.approx(2.0)
    assert Budget(1.5, 12.0, price=3.0, nodes=2).limit_h == pytest.approx(1.5)  # the smaller limit rules
    cfg = small_config(**{"train.max_cost": 5.0, "monitor.price_per_node_hour": 0.0})
    with pytest.raises(ConfigError, match="monitor.price_per_node_hour"):  # price 0 is "unknown", never "free"
        Budget.of(cfg, nodes=1)


def test_a_budget_that_buys_no_step_is_refused_in_one_line():
    b = Budget(max_hours=0.01, max_cost=0.0, price=0.0, nodes=1)
    b.check_affordable(0.0, None)
    b.check_affordable(0.005, 10.0)
    with pytest.raises(ConfigError, match="buys no step") as e:
        b.check_affordable(0.0099, 60.0)  # 3.6 s left, a step takes 60 s
    assert "\n" not in str(e.value) and "--max-hours" in str(e.value)
    with pytest.raises(ConfigError, match="already spent"):
        b.check_affordable(0.02, None)


def test_projection_line_says_what_the_budget_buys_and_never_calls_price_zero_free():
    p = Projection(step=100, total=1100, step_s=3.6, spent_h=0.1, nodes=2, price=0.0)
    assert p.total_h == pytest.approx(1.1) and p.cost(p.total_h) is None
    assert "no cost shown" in p.line() and "$" not in p.line()
    priced = Projection(100, 1100, 3.6, 0.1, 2, 3.0)
    assert "$6.60 at $3/node-hour x 2 node(s)" in priced.line()
    line = priced.line(Budget(0.5, 0.0, 3.0, 2))
    assert "buys about 400 more steps, to step 500 of 1100" in line
    assert measured_step_s([9.0, 5.0, 0.1, 0.3, 0.2]) == pytest.approx(0.2)  # tracing steps left out


def test_plateau_stops_at_the_kth_flat_evaluation_and_continues_across_sessions():
    p = Plateau(patience=2, min_improvement=0.5)
    evals = [(100, 10.0), (200, 10.3), (300, 11.0), (400, 11.2), (500, 11.4)]
    assert [p.add(s, b) for s, b in evals] == [False, False, False, False, True]
    assert p.best == 11.0 and p.flat == 2
    again = Plateau.of(small_config(**{"eval.early_stopping": 2, "eval.min_improvement": 0.5}),
                       {"plateau": {"evaluations": [[100, 10.0], [200, 10.3]]}})
    assert again.flat == 1 and again.add(300, 10.4)
    assert not Plateau(0, 0.0).add(1, 0.0)  # early_stopping 0: off


def test_budget_and_early_stopping_settings_are_checked_at_their_fields():
    with pytest.raises(ConfigError, match="train.max_hours"):
        small_config(**{"train.max_hours": -1})
    with pytest.raises(ConfigError, match="eval.early_stopping"):
        small_config(**{"eval.early_stopping": -2})


# --- training ------------------------------------------------------------------------------------------------

def _weights(run):
    import tensorflow as tf
    r = tf.train.load_checkpoint(str(run / runs.CHECKPOINTS))
    return {n: r.get_tensor(n) for n in r.get_variable_to_shape_map() if "save_counter" not in n}


@pytest.mark.slow
def test_a_budget_stops_at_a_checkpoint_and_a_larger_one_resumes_to_the_straight_runs_weights(nmt_data, tmp_path,
                                                                                             capsys, monkeypatch):
    from nmtkit.training.loop import train
    base = {"train.steps": 60, "train.ckpt_every": 10, "train.log_every": 2, "eval.dev_sentences": 4,
            "eval.test_sentences": 4, "eval.beam_size": 1}
    straight = train(small_config(**base), tmp_path / "straight", data_dir=nmt_data, progress=False)
    assert straight["status"] == "finished"
    capsys.readouterr()
    run = tmp_path / "budget"
    with monkeypatch.context() as m:  # the clock's verdict, made deterministic: the budget is spent at step 20
        # (when it is spent in real seconds is the unit tests' and the CLI checks' business)
        m.setattr(Budget, "exhausted", lambda self, spent_h, step, *args, **kw: step >= 20)
        stopped = train(small_config(**base, **{"train.max_hours": 1.0}), run, data_dir=nmt_data, progress=False)
    out = capsys.readouterr().out
    status = runs.read_status(run)
    assert stopped["status"] == "stopped" and stopped["reason"] == "budget" and status["reason"] == "budget"
    assert stopped["step"] == 20 and "ckpt-20" in (run / "checkpoints" / "checkpoint").read_text()
    assert "by its budget" in out and "test BLEU" in out  # evaluated: dev, then test
    assert "projection: " in out and status["projection"]["step_s"] > 0 and status["spent_hours"] > 0
    # the same budget again buys no step: refused before training, nothing lost
    with pytest.raises(ConfigError, match="buys no step"):
        train(small_config(**base, **{"train.max_hours": status["spent_hours"]}), run, data_dir=nmt_data,
              progress=False)
    assert runs.read_status(run)["status"] == "stopped"
    resumed = train(small_config(**base, **{"train.max_hours": 1.0}), run, data_dir=nmt_data, progress=False)
    assert resumed["status"] == "finished" and resumed["step"] == 60
    assert runs.read_status(run)["spent_hours"] > status["spent_hours"]
    a, b = _weights(tmp_path / "straight"), _weights(run)
    assert a.keys() == b.keys() and any(n.startswith("optimizer/_variables/") for n in a)  # Adam's m and v too
    numeric = [n for n in a if np.asarray(a[n]).dtype.kind in "fiu"]
    assert all(np.asarray(a[n]).tolist() == np.asarray(b[n]).tolist() for n in a if n not in numeric)
    worst = max(float(np.max(np.abs(a[n].astype(np.float64) - b[n].astype(np.float64)))) for n in numeric)
    assert worst == 0.0, f"max |difference| {worst}"


@pytest.mark.slow
def test_early_stopping_stops_after_the_kth_flat_evaluation(nmt_data, tmp_path):
    from nmtkit.training.loop import train
    cfg = small_config(**{"train.steps": 1000, "train.log_every": 5, "eval.every": 5, "eval.early_stopping": 2,
                          "eval.min_improvement": 100, "eval.dev_sentences": 4, "eval.test_sentences": 4,
                          "eval.beam_size": 1})
    summary = train(cfg, tmp_path / "run", data_dir=nmt_data, progress=False)
    status = runs.read_status(tmp_path / "run")
    assert summary["status"] == "stopped" and summary["step"] == 10 and status["reason"] == "plateau"
    assert [e[0] for e in status["plateau"]["evaluations"]] == [5, 10] and status["plateau"]["flat"] == 2
    assert "test_bleu" in status["summary"]


@pytest.mark.slow
def test_two_ranks_stop_on_the_budget_at_the_same_step_and_exit_zero(nmt_data, tmp_path):
    run = tmp_path / "run"
    sets = ["train.steps=100000", "train.ckpt_every=10", "train.log_every=5", "eval.dev_sentences=4",
            "eval.test_sentences=4", "eval.beam_size=1", "data.batch_sentences=16", "monitor.enabled=false",
            "model.d_model=64", "model.d_ff=128", "model.encoder_layers=1", "model.decoder_layers=1",
            "data.vocab_size=400"]
    args = [sys.executable, "-m", "nmtkit.cli", "train", "--np", "2", "--data", str(nmt_data), "--logdir", str(run),
            "--max-hours", str(12 / 3600)] + [a for s in sets for a in ("--set", s)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:] + p.stdout[-2000:]
    status = runs.read_status(run)
    assert status["status"] == "stopped" and status["reason"] == "budget" and status["ranks"] == 2
    last = [json.loads(runs.rank_log(run, r).read_text().splitlines()[-1])["step"] for r in (0, 1)]
    assert last[0] == last[1] == status["step"]  # every rank stopped at the same step, none left in a collective
    assert "by its budget" in p.stdout
