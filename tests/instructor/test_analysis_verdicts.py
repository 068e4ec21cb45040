"""The course's verdicts and judgments on synthetic and real runs (the instructor's kit: nmtkit/course/instructor/)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from synthruns import T0, WARMUP, lr_at, synth_run

import nmtkit  # noqa: F401
from nmtkit import config as config_mod
from nmtkit import runs
from nmtkit.analysis import evidence, load_run
from nmtkit.course.instructor import book, judgments
from nmtkit.course.instructor import verdicts as questions
from nmtkit.errors import AnalysisError
from nmtkit.files import append_jsonl, atomic_write_json


def answers_of(path, figures=True, **opts):
    fig_dir = path / "figures" if figures else None
    return {a.number: a for a in book.answer_all(load_run(path), fig_dir, questions.Options(**opts))}


def test_baseline_answers(tmp_path, checkpoint_dir):
    ckpt, n_params = checkpoint_dir
    gen = synth_run(tmp_path, ckpt=ckpt)
    a = answers_of(tmp_path)
    assert all(x.answered for n, x in a.items() if n != 11), {n: x.missing for n, x in a.items() if not x.answered}
    # Q1: from the first step's start (it ended at T0 + 0.5) to the last record, the evaluation at T0 + 999.6.
    elapsed = (T0 + 999.6) - (T0 + 0.5 - gen["step_time"][0])
    assert a[1].evidence["elapsed_s"] == pytest.approx(elapsed)
    assert a[1].evidence["steps_per_s"] == pytest.approx(1.0)
    # ... and the homework's step count at this run's own steady step time; no cost for unpriced hardware
    target = config_mod.profile("wmt16-base").train.steps
    steady = gen["step_time"][3:].mean()
    assert a[1].evidence["hours_to_target"] == pytest.approx(target * steady / 3600)
    assert "cost" not in a[1].evidence and "No cost" in a[1].answer
    assert a[1].figure.exists()
    # Q2: BLEU 30(1-exp(-s/150)) over 1000 steps: the last 3 evaluations gain < 1%, and eval loss is flat; but no
    # translations were written, so no paired bootstrap can show BLEU's plateau: not shown trained.
    assert a[2].evidence["eval_loss_plateau"] is True and a[2].evidence["bleu_gain"] < 0.3
    assert a[2].evidence["bleu_verdict"] == "cannot tell" and "no paired bootstrap" in a[2].evidence["bleu_why"]
    assert a[2].evidence["fully_trained"] is False and a[2].answer.startswith("Cannot tell")
    # Q3: a constant 0.1 gap is no overfitting.
    assert a[3].evidence["verdict"] == "no" and a[3].evidence["gap_last"] == pytest.approx(0.1)
    # Q4: gpu0 always 95%, gpu1 alternates 60/100: mean 80, busy half the time.
    dev = {d["device"]: d for d in a[4].evidence["devices"]}
    assert dev["gpu0"]["mean"] == pytest.approx(95.0) and dev["gpu0"]["busy_share"] == 1.0
    assert dev["gpu1"]["mean"] == pytest.approx(80.0, abs=0.1)
    assert dev["gpu1"]["busy_share"] == pytest.approx(0.5, abs=0.01)
    # Q5: one rank, no gradient exchange.
    assert a[5].answered and a[5].answer.startswith("No: this is a single-rank run")
    # Q6: peak at warmup_steps, value from the formula, inverse-square-root decay.
    assert a[6].evidence["peak_step"] == WARMUP
    assert a[6].evidence["peak_lr"] == pytest.approx(a[6].evidence["predicted_peak_lr"])
    assert a[6].evidence["decay_exponent"] == pytest.approx(-0.5, abs=0.01)
    # Q7: bytes of both sides of the train split, lines = sentence pairs, in DataStats' own words.
    assert a[7].evidence["bytes"] == 3_200_000 and a[7].evidence["lines"] == 20_000
    assert a[7].answer.startswith("The training set is 3.2 MB") and "20,000 lines" in a[7].answer
    # Q8: the state file, the index and one data shard of the latest checkpoint.
    names = sorted(Path(f["file"]).name for f in a[8].evidence["files"])
    assert names == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
    # Q9: weights = the model's parameters in float32; Adam keeps two slots per parameter.
    assert a[9].evidence["weights_params"] == n_params
    assert a[9].evidence["weights_mb"] == pytest.approx(n_params * 4 / 1e6)
    assert a[9].evidence["optimizer_to_weights"] == pytest.approx(2.0, abs=0.01)
    # Q10: the mean of the steady steps (first 3 left out).
    assert a[10].evidence["mean_ms"] == pytest.approx(gen["step_time"][3:].mean() * 1000)
    assert a[10].evidence["std_ms"] == pytest.approx(gen["step_time"][3:].std(ddof=1) * 1000)
    for n in (1, 2, 3, 4, 6, 8, 9, 10):
        assert a[n].figure is not None and a[n].figure.exists(), n
    # figures are written atomically: nothing but finished PNGs in the folder
    assert {p.suffix for p in (tmp_path / "figures").iterdir()} == {".png"}


def test_known_correlation_and_byte_rate(tmp_path, checkpoint_dir):
    ckpt, n_params = checkpoint_dir
    gen = synth_run(tmp_path, ranks=2, hosts=("hostA", "hostB"), ckpt=ckpt, seed=1)
    a = answers_of(tmp_path)
    # Q11: step i is paired with sample i (its second); r is the one of the generating arrays.
    net, st = gen["net"][1:], gen["step_time"]
    want = np.corrcoef((net + 0.9 * net)[3:], st[3:])[0, 1]
    assert a[11].answered and a[11].evidence["iface"] == "eth0"
    assert a[11].evidence["pearson_r"] == pytest.approx(want, abs=1e-9)
    assert a[11].evidence["pearson_r"] > 0.7 and a[11].figure.exists()
    # Q5: the measured byte rate (the busier direction: sent) while the steady steps ran (sample i holds step i;
    # the first 3 steps are left out), against 1 Gbit/s, and the ring-allreduce estimate.
    hosts = {h["host"]: h for h in a[5].evidence["hosts"]}
    assert hosts["hostA"]["samples_while_stepping"] == 997
    assert hosts["hostA"]["mean_Bps"] == pytest.approx(net[3:].mean())
    assert hosts["hostA"]["link_share_mean"] == pytest.approx(net[3:].mean() / 125e6)
    per_step = 2 * (2 - 1) / 2 * n_params * 4
    assert a[5].evidence["allreduce_bytes_per_rank_per_step"] == pytest.approx(per_step)
    assert a[5].evidence["expected_Bps_per_rank"] == pytest.approx(per_step / st[3:].mean())
    # an assumed link decides nothing
    assert a[5].evidence["bottleneck"] is False and a[5].answer.startswith("Cannot tell")
    assert a[5].evidence["link_source"].startswith("assumed") and "assumed from monitor.link_gbps" in a[5].answer
    assert "(assumed (" not in a[5].answer and "measured by preflight" not in a[5].answer
    assert hosts["hostA"]["expected_Bps"] == pytest.approx(per_step / st[3:].mean())  # one ring edge per node
    # Bytes per step counted on the link from the end of the first steady step (4, at T0 + 3.5) to the end of the
    # last (1000, at T0 + 999.5): half of sample 4, samples 5..999, half of sample 1000, over 996 steps. (Not the
    # rate times the step time: steps fill 0.2-0.45 s of each second, the link's bytes are per second.)
    g = gen["net"]
    counted = (0.5 * g[4] + g[5:1000].sum() + 0.5 * g[1000]) / 996
    assert hosts["hostA"]["bytes_per_step"] == pytest.approx(counted)
    assert hosts["hostA"]["steps_counted"] == 996
    # Q11 argues from bytes per step against the model; r is only described
    assert a[11].evidence["bytes_per_step"] == pytest.approx(counted)
    assert "by construction" in a[11].answer and "As a description only" in a[11].answer
    assert "keeping up" not in a[11].answer
    # A 10 Mbit/s link is saturated by 12.5 MB/s: now the network is the bottleneck.
    assert answers_of(tmp_path, figures=False, link_gbps=0.01)[5].evidence["bottleneck"] is True
    # A link measured by preflight replaces the assumed one, and the answer says so.
    measured = {"from": "hostA", "to": "hostB", "at": "2026-11-22T18:30:00Z",
                "pairs": [{"from": "hostA", "to": "hostB", "mbit_s": 940.0}]}
    atomic_write_json(tmp_path / runs.STATUS, {**json.loads((tmp_path / runs.STATUS).read_text()),
                                               "link_measured_mbit_s": 940.0, "link_measured": measured})
    a5 = answers_of(tmp_path, figures=False)[5]
    assert a5.evidence["link_gbps"] == pytest.approx(0.94) and a5.evidence["link_Bps"] == pytest.approx(117.5e6)
    assert ("measured by preflight: 940 Mbit/s from hostA to hostB at 2026-11-22 18:30:00 UTC"
            in a5.answer) and "assumed" not in a5.answer
    assert a5.evidence["hosts"][0]["link_share_mean"] == pytest.approx(net[3:].mean() / 117.5e6)


def test_two_ranks_per_node_expect_one_ring_edge_per_node(tmp_path, checkpoint_dir):
    ckpt, n_params = checkpoint_dir
    synth_run(tmp_path, ranks=4, hosts=("vm1", "vm1", "vm2", "vm2"), ckpt=ckpt, steps=200, seed=3)
    a = answers_of(tmp_path, figures=False)
    per_step = 2 * (4 - 1) / 4 * n_params * 4
    for h in a[5].evidence["hosts"]:
        assert h["expected_bytes_per_step"] == pytest.approx(per_step)  # not x 2 GPUs per node


def test_answer_texts_explain_and_render(tmp_path, checkpoint_dir):
    ckpt, _ = checkpoint_dir
    synth_run(tmp_path, ckpt=ckpt)
    a = answers_of(tmp_path, figures=False)
    assert "$" not in a[1].answer and "transformer-base" in a[1].answer  # Markdown reads $...$ as LaTeX
    assert ".meta" in a[8].answer and "MetaGraphDef" in a[8].answer
    assert "1 MB = 10^6 bytes" in a[9].answer and "MiB" not in a[9].answer
    assert "one synchronous optimizer update" in a[10].answer
    assert "NVML's 'utilization' is the share of time" in a[4].answer


def test_uncorrelated_traffic_gives_small_r(tmp_path):
    synth_run(tmp_path, ranks=2, hosts=("hostA", "hostB"), net_coupling=0.0, seed=2)
    r = answers_of(tmp_path, figures=False)[11].evidence["pearson_r"]
    assert abs(r) < 0.15


def test_rising_eval_loss_is_overfitting(tmp_path):
    synth_run(tmp_path, overfit=True)
    a = answers_of(tmp_path)[3]
    assert a.evidence["verdict"] == "overfitting" and a.answer.startswith("Yes")
    assert a.evidence["gap_last"] == pytest.approx(1.1) and a.evidence["eval_trend"] == "rising"
    assert a.figure.exists()


def _gap_run(path, train, evals):
    """A run with given train-loss and eval-loss values at evaluations 100, 200, ..."""
    cfg = config_mod.load("tiny", {})
    cfg.save(path / runs.CONFIG)
    atomic_write_json(path / runs.STATUS, {"status": "finished", "step": 100 * len(evals), "ranks": 2})
    for i, (t, e) in enumerate(zip(train, evals), 1):
        for tag, v in (("train_loss", t), ("eval_loss", e), ("Eval_BLEU_Score", 10.0 + i)):
            append_jsonl(path / runs.SCALARS, {"step": 100 * i, "wall_time": T0 + i, "tag": tag, "value": v})


def test_a_shrinking_negative_gap_with_eval_loss_falling_is_no_overfitting(tmp_path):
    # the Horovod run of the committed notebooks: gap -0.673 -> -0.383 while eval loss kept falling
    evals = [3.0, 2.2, 1.7, 1.4, 1.25, 1.15]
    train = [e + g for e, g in zip(evals, [0.673, 0.62, 0.55, 0.48, 0.42, 0.383])]
    _gap_run(tmp_path, train, evals)
    a = answers_of(tmp_path, figures=False)[3]
    assert a.evidence["verdict"] == "no" and a.answer.startswith("No:")
    assert a.evidence["gap_first"] == pytest.approx(-0.673) and a.evidence["gap_last"] == pytest.approx(-0.383)
    assert "eval loss is still falling" in a.answer and "dev BLEU is at its best" in a.answer
    assert "sits below train loss because" in a.answer and "dropout" in a.answer
    assert "shrank" in a.answer and "widen" not in a.answer


def test_eval_loss_stalling_while_the_gap_rises_is_early_signs(tmp_path):
    evals = [3.0, 2.0, 1.5, 1.30, 1.30, 1.30, 1.30]
    train = [3.5, 2.3, 1.6, 1.30, 1.20, 1.10, 1.00]
    _gap_run(tmp_path, train, evals)
    a = answers_of(tmp_path, figures=False)[3]
    assert a.evidence["verdict"] == "early signs" and a.answer.startswith("Not yet")
    assert "has stopped improving" in a.answer and "widen" not in a.answer


def test_still_improving_is_not_fully_trained(tmp_path):
    synth_run(tmp_path, steps=300)  # BLEU still climbing steeply at step 300
    a = answers_of(tmp_path, figures=False)
    assert a[2].evidence["fully_trained"] is False and a[2].answer.startswith("No")
    assert a[2].evidence["bleu_plateau"] is False
    # Q1 says how long the rest of the run's own plan takes at 1 step/s.
    assert a[1].evidence["remaining_s_to_planned"] == pytest.approx(700.0)


def test_plateau_rule():
    assert judgments.plateau_rule([10, 20, 25, 25.1, 25.0, 25.2], 3, 0.01, True, 0.1) == (True, pytest.approx(0.2))
    assert judgments.plateau_rule([10, 20, 22, 23, 24, 26], 3, 0.01, True)[0] is False
    assert judgments.plateau_rule([3.0, 2.5, 2.4, 2.399, 2.398, 2.397], 3, 0.01, False)[0] is True


def test_unfinished_run_says_what_is_missing(tmp_path):
    synth_run(tmp_path, steps=120, torn=True, eval_every=100)  # killed mid-write, one evaluation, no checkpoint
    run = load_run(tmp_path)
    assert run.last_step == 120  # the torn last line is skipped
    a = answers_of(tmp_path)
    assert a[1].answered
    assert not a[2].answered and "at least 4 evaluations" in a[2].missing
    assert not a[3].answered and "2 eval_loss" in a[3].missing
    for n in (8, 9):
        assert not a[n].answered and "no checkpoint" in a[n].missing and a[n].figure is None
    assert a[6].answered and "still inside the warmup" in a[6].answer


def test_bad_run_files_are_one_line_errors_naming_the_file(tmp_path):
    synth_run(tmp_path, steps=30)
    (tmp_path / runs.STATUS).write_text('{"status": "runn')
    with pytest.raises(AnalysisError, match=r"run.json: line 1: not valid JSON"):
        load_run(tmp_path)
    atomic_write_json(tmp_path / runs.STATUS, {"status": "running"})
    (tmp_path / runs.DATA_STATS).write_text("{\n oops")
    with pytest.raises(AnalysisError, match=r"data_stats.json: line 2: not valid JSON"):
        load_run(tmp_path)
    (tmp_path / runs.DATA_STATS).unlink()
    a = answers_of(tmp_path, figures=False)[7]
    assert not a.answered and "data_stats.json" in a.missing


def test_learning_rate_prediction_follows_the_rank_scaling(tmp_path):
    synth_run(tmp_path, ranks=2, hosts=("hostA", "hostB"), steps=400)
    cfg = config_mod.Config.load_json(tmp_path / runs.CONFIG).with_overrides({"train.lr_scaling": "sqrt"})
    cfg.save(tmp_path / runs.CONFIG)
    ev = answers_of(tmp_path, figures=False)[6].evidence
    assert ev["rank_factor"] == pytest.approx(math.sqrt(2))
    assert ev["predicted_peak_lr"] == pytest.approx(math.sqrt(2) * lr_at(WARMUP))


def test_importing_the_analysis_leaves_tensorflow_out():
    code = ("import sys, nmtkit.analysis, nmtkit.course.instructor.verdicts, nmtkit.runs; "
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_q2_bleu_plateau_compares_two_evaluations_on_the_same_dev_sentences():
    """The plateau rule's BLEU figure is a difference of two BLEUs on one dev set: decided by the paired bootstrap
    of those two evaluations (tests/instructor/test_verdicts_q2_bootstrap.py), not by the spread of one BLEU."""
    from nmtkit.analysis import reference_run
    from nmtkit.course.instructor.decisions import q2
    run = load_run(reference_run())
    noise = evidence.bleu_noise(run)
    assert noise["bleu_bootstrap_sentences"] == run.config.eval.dev_sentences and noise["bleu_bootstrap_std"] > 0.5
    ev, _, _ = evidence.measure_plateau(run, evidence.Options())
    assert "paired bootstrap" in ev["rule"]
    b = judgments.q2(run, evidence.Options())
    gain = q2(run, evidence.Options())["bleu_gain"]
    assert b["bleu_gain"] == pytest.approx(gain) and b["bleu_steps"] == (360, 480)
    assert b["bleu_gain_low"] < gain < b["bleu_gain_high"] and b["bleu_plateau"] is False
