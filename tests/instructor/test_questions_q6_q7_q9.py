"""Questions 6, 7 and 9 ask something notebook 02 did not: Q6 reads the shipped warm-up ablation (two runs that
differ only in train.warmup_steps), Q7 grades the training set's line count its rubric asks for, and Q9's verdict
reconciles the seeds' three checkpoint sizes from the kit's measured bytes per parameter."""
from __future__ import annotations

import json
import re

import pytest

from nmtkit.analysis import report
from nmtkit.analysis.ablation import EARLY_STEP, WARMUP_RUNS, warmup_runs
from nmtkit.analysis.evidence import Options
from nmtkit.analysis.logs import load_run
from nmtkit.analysis.reference import FORBIDDEN, MANIFEST, reference_run
from nmtkit.course.instructor import decisions, hidden, seeds, verdicts
from nmtkit.course.targets import TARGETS
from nmtkit.errors import ExerciseError
from nmtkit.notebook import Analysis


@pytest.fixture(scope="module")
def ablation(tmp_path_factory):
    paths = warmup_runs()
    return Analysis(report.analyse(paths, tmp_path_factory.mktemp("abl")), paths)


def test_the_ablation_runs_differ_only_in_the_warm_up_and_stay_small():
    paths = warmup_runs()
    configs = [json.loads((p / "config.json").read_text()) for p in paths]
    flat = [{f"{s}.{k}": v for s, sec in c.items() if isinstance(sec, dict) for k, v in sec.items()} for c in configs]
    differ = {k for k in flat[0] if flat[0][k] != flat[1].get(k)}
    assert differ == {"train.warmup_steps"}, differ
    assert [f["train.warmup_steps"] for f in flat] == list(WARMUP_RUNS.values())
    files = [f for p in paths for f in p.rglob("*") if f.is_file()]
    assert sum(f.stat().st_size for f in files) < 600_000  # package data stays modest
    for p in paths:  # shipped like the reference run: a manifest, a README saying how, no machine paths
        assert (p / MANIFEST).is_file() and "tools.rehearsal.ablation" in (p / "README.md").read_text()
    assert not [(f, d) for f in files for d in FORBIDDEN if d in f.read_text(errors="replace")]


def test_q6_figures_come_from_each_runs_logs():
    for p, warmup in zip(warmup_runs(), WARMUP_RUNS.values()):
        run = load_run(p)
        d = decisions.q6(run, Options())
        rate, train = run.series("learning_rate"), run.series("train_loss")
        assert d["peak_step"] == warmup == int(rate.loc[rate.value.idxmax(), "step"])
        assert d["loss_at_100"] == pytest.approx(float(train[train.step == EARLY_STEP].value.iloc[0]))
        assert d["final_eval_loss"] == pytest.approx(float(run.series("eval_loss").value.iloc[-1]))


def test_q6_check_passes_each_runs_figures_and_fails_the_other_runs(ablation, capsys):
    figs = {r.name: decisions.q6(r, Options()) for r in ablation.runs}
    short, long = (figs[n] for n in reversed(WARMUP_RUNS))
    for name, f in figs.items():
        hidden.graded(ablation, "q6", name, {k: f[k] for k in TARGETS["q6"]})
    assert capsys.readouterr().out.count("✓ q6") == 2
    swapped = {**{k: long[k] for k in TARGETS["q6"]}, "peak_step": short["peak_step"]}
    want = "too low" if long["loss_at_100"] < short["loss_at_100"] else "too high"
    with pytest.raises(ExerciseError, match=f"✗ q6 loss_at_100: {want}"):
        hidden.graded(ablation, "q6", list(WARMUP_RUNS)[1], swapped)
    with pytest.raises(ExerciseError, match="✗ q6 peak_step: too high"):  # the config's default, not this run's
        hidden.graded(ablation, "q6", list(WARMUP_RUNS)[1], {**short, "peak_step": long["peak_step"]})


def test_q6_verdict_reads_the_ablations_direction_from_its_figures():
    text = verdicts.q6_learning_rate(load_run(reference_run()), None, Options()).answer
    figs = {p.name: decisions.q6(load_run(p), Options()) for p in warmup_runs()}
    for f in figs.values():
        assert f"{f['loss_at_100']:.2f}" in text and f"{f['final_eval_loss']:.2f}" in text
    short, long = (figs[n] for n in reversed(WARMUP_RUNS))
    early = "lower" if short["loss_at_100"] < long["loss_at_100"] else "higher"
    assert f"train loss is {early}" in text and "One seed each" in text


def test_q7_grades_the_pairs_as_one_sides_lines(tmp_path):
    rep = Analysis(report.analyse([reference_run()], tmp_path), [reference_run()])
    d = decisions.q7(rep.runs[0], Options())
    ok = {k: d[k] for k in TARGETS["q7"]}
    hidden.graded(rep, "q7", None, ok)
    with pytest.raises(ExerciseError, match="✗ q7 train_lines: too high"):  # both files' lines added
        hidden.graded(rep, "q7", None, {**ok, "train_lines": 2 * d["train_lines"]})
    with pytest.raises(ExerciseError, match="✗ q7 train_lines: missing"):
        hidden.graded(rep, "q7", None, {k: v for k, v in ok.items() if k != "train_lines"})


def test_q9_reconciles_the_seeds_three_sizes_from_the_measured_checkpoint():
    run = load_run(reference_run())
    ev = verdicts.questions.measured(9, run, None, Options())[0]
    r = seeds.reconciled(ev["total_bytes"], run.status["params"])
    assert 11.9 < r["bytes_per_param"] < 12.2  # the kit's checkpoint: weights + Adam's m, v, 4 B each, measured
    assert r["homework_params"] == 60_880_896
    assert abs(r["homework_mib"] - 695) / 695 < 0.01  # 695: the same bytes read in MiB
    assert 0 < 744 - r["homework_mb"] < 20  # 744: a graph file of a few MB beside the same bytes
    assert 12.5 < r["seeds"][830]["bytes_per_param"] < 14  # 830: more than 12 B, at most 14
    text = verdicts.q9_checkpoint_size(run, None, Options()).answer
    assert all(re.search(rf"\b{mb} MB is", text) for mb in (695, 744, 830)), text
