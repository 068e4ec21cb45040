"""Questions 6, 7 and 9 ask something notebook 02 did not: Q6 reads the shipped warm-up ablation (two runs that
differ only in train.warmup_steps), Q7 grades the training set's line count its rubric asks for, and Q9's verdict
reconciles the seeds' three checkpoint sizes from the kit's measured bytes per parameter."""
from __future__ import annotations

import json
import re

import pytest

from nmtkit.analysis import report
from nmtkit.analysis.ablation import DEFAULT, EARLY_STEP, SHORT, WARMUP_RUNS, warmup_runs
from nmtkit.analysis.evidence import Options
from nmtkit.analysis.logs import load_run
from nmtkit.analysis.reference import FORBIDDEN, MANIFEST, reference_run
from nmtkit.course.instructor import decisions, hidden, seeds, verdicts
from nmtkit.course.instructor.book import decide
from nmtkit.course.instructor.warmup import q6_learning_rate
from nmtkit.course.targets import targets
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
    runs = {p.name: load_run(p) for p in warmup_runs()}
    for name, warmup in WARMUP_RUNS.items():
        f, run = decisions.warmup_figures(runs[name]), runs[name]
        rate, train = run.series("learning_rate"), run.series("train_loss")
        assert f["peak_step"] == warmup == int(rate.loc[rate.value.idxmax(), "step"])
        assert f["loss_at_100"] == pytest.approx(float(train[train.step == EARLY_STEP].value.iloc[0]))
        assert f["final_eval_loss"] == pytest.approx(float(run.series("eval_loss").value.iloc[-1]))
    d = decisions.q6(runs[SHORT], Options())
    assert d["loss_gap_100"] == pytest.approx(d["runs"][SHORT]["loss_at_100"] - d["runs"][DEFAULT]["loss_at_100"])
    assert d["final_gap"] == pytest.approx(d["runs"][SHORT]["final_eval_loss"] - d["runs"][DEFAULT]["final_eval_loss"])
    assert "q6" not in decide(load_run(reference_run()))  # decided on the ablation, not on any run


def test_q6_check_passes_the_short_runs_figures_and_fails_swapped_or_absolute_ones(ablation, capsys):
    short = next(r for r in ablation.runs if r.name == SHORT)
    d = decisions.q6(short, Options())
    ok = {k: d[k] for k in targets("q6")}
    hidden.graded(ablation, "q6", short, ok)
    assert "✓ q6" in capsys.readouterr().out
    with pytest.raises(ExerciseError, match="✗ q6 peak_step: too high"):  # the default run's peak, not the short's
        hidden.graded(ablation, "q6", short, {**ok, "peak_step": WARMUP_RUNS[DEFAULT]})
    flipped = "too high" if d["loss_gap_100"] < 0 else "too low"
    with pytest.raises(ExerciseError, match=f"✗ q6 loss_gap_100: {flipped}"):  # default minus short
        hidden.graded(ablation, "q6", short, {**ok, "loss_gap_100": -d["loss_gap_100"]})
    with pytest.raises(ExerciseError, match="✗ q6 final_gap"):  # the short run's own loss, not the gap
        hidden.graded(ablation, "q6", short, {**ok, "final_gap": d["runs"][SHORT]["final_eval_loss"]})


def test_q6_verdict_reads_the_ablations_direction_from_its_figures():
    text = q6_learning_rate(load_run(reference_run()), None, Options()).answer
    d = decisions.q6(load_run(warmup_runs()[-1]), Options())
    for f in d["runs"].values():
        assert f"{f['loss_at_100']:.2f}" in text and f"{f['final_eval_loss']:.2f}" in text
    early = "lower" if d["loss_gap_100"] < 0 else "higher"
    assert f"train loss is {early}" in text and "One seed each" in text


def test_q7_grades_the_pairs_as_one_sides_lines(tmp_path):
    rep = Analysis(report.analyse([reference_run()], tmp_path), [reference_run()])
    d = decisions.q7(rep.runs[0], Options())
    ok = {k: d[k] for k in targets("q7")}
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


def _cells():
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "notebooks" / "05_monitoring_analysis.ipynb"
    return [(c["cell_type"], "".join(c["source"])) for c in json.loads(path.read_text())["cells"]]


def test_notebook_05_reconciles_the_seeds_sizes_in_one_cell_from_the_measured_checkpoint():
    cells = [src for kind, src in _cells() if kind == "code" and all(f"{mb}" in src for mb in (695, 744, 830))]
    assert len(cells) == 1 and "rep.evidence(9)" in cells[0] and "wmt16-base" in cells[0], cells


def test_notebook_05_meets_gpu_memory_at_100_percent_with_the_cited_allocator_and_the_kits_setting():
    from pathlib import Path
    q4 = next(src for kind, src in _cells() if kind == "markdown" and src.startswith("## Q4"))
    assert "https://www.tensorflow.org/guide/gpu" in q4 and "TF_FORCE_GPU_ALLOW_GROWTH=true" in q4
    init = (Path(__file__).resolve().parents[2] / "nmtkit" / "__init__.py").read_text()
    assert 'os.environ.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")' in init  # what the passage says the kit does
