"""Notebook exercises: the reference solutions pass against nmtkit's evidence, a wrong answer fails (also under
nbval, which is how instructors grade), and the schedule and rank-plan exercises check what they claim."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_analysis import checkpoint_dir, synth_run  # noqa: F401  (fixture and writer of synthetic runs)

from nmtkit import config as config_mod, runs
from nmtkit.analysis import report
from nmtkit.analysis.exercises import ExerciseError, check, check_lr, check_plan
from nmtkit.files import atomic_write_json

NB = Path(__file__).resolve().parents[1] / "notebooks"
SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)


def cells(name):
    return ["".join(c["source"]) for c in json.loads((NB / name).read_text())["cells"] if c["cell_type"] == "code"]


def graded_run(tmp_path, ckpt, n_params):
    """A 2-rank synthetic run whose config points at real train files and whose status has the parameter count."""
    run = tmp_path / "horovod"
    run.mkdir()
    synth_run(run, ranks=2, hosts=("hostA", "hostB"), ckpt=ckpt, seed=4)
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.en").write_bytes(b"x" * 1_500_000)
    (data / "train.de").write_bytes(b"y" * 1_700_000)
    cfg = config_mod.Config.load_json(run / runs.CONFIG).with_overrides({"data.dir": str(data)})
    cfg.save(run / runs.CONFIG)
    atomic_write_json(run / runs.STATUS, {**runs.read_status(run), "params": n_params})
    return report.analyse([run], tmp_path / "report")


def test_reference_solutions_pass_and_wrong_answers_fail(tmp_path, checkpoint_dir, capsys):  # noqa: F811
    rep = graded_run(tmp_path, *checkpoint_dir)
    ns = {"rep": rep, "run": rep.runs[-1], "check": check}
    code = cells("04_monitoring_analysis.ipynb")
    exercises = [c for c in code if "### BEGIN SOLUTION" in c]
    checks = [c for c in code if c.startswith("check(rep, ")]
    assert len(exercises) == 11 and len(checks) == 11
    for ex, ck in zip(exercises, checks):
        exec(SOLUTION.search(ex).group(1), ns)
        exec(ck, ns)
    out = capsys.readouterr().out
    assert out.count("✓ Q") == 11, out
    with pytest.raises(ExerciseError, match="✗ Q10: .*Hint: the mean step_time"):
        check(rep, 10, ns["mean_ms"] * 1.2)
    with pytest.raises(ExerciseError, match="✗ Q3"):
        check(rep, 3, -ns["gap"] - 0.5)  # the sign matters


def test_schedule_and_plan_exercises():
    cfg = config_mod.load("tiny")
    t, m = cfg.train, cfg.model
    check_lr(lambda s: t.lr_scale * m.d_model ** -0.5 * min(s ** -0.5, s * t.warmup_steps ** -1.5), cfg)
    with pytest.raises(ExerciseError, match="lr"):
        check_lr(lambda s: 2.0 * m.d_model ** -0.5 * min(s ** -0.5, s * t.warmup_steps ** -1.5), cfg)  # not lr_scale
    check_plan({0: (0, 0), 1: (1, 0), 2: (0, 1), 3: (1, 1)})
    with pytest.raises(ExerciseError, match="ranks \\[2, 3\\]"):
        check_plan({0: (0, 0), 1: (1, 0), 2: (2, 1), 3: (3, 1)})  # local ranks count within a host


@pytest.mark.slow
def test_a_wrong_answer_fails_nbval(tmp_path, checkpoint_dir):  # noqa: F811
    graded_run(tmp_path, *checkpoint_dir)
    src = (f"from nmtkit.analysis import report\nfrom nmtkit.analysis.exercises import check\n"
           f"rep = report.analyse([{str(tmp_path / 'horovod')!r}], {str(tmp_path / 'r')!r})\n")
    def notebook(answer):
        cell = lambda s: {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],  # noqa: E731
                          "source": s}
        return {"cells": [cell(src), cell(f"check(rep, 2, {answer})")], "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}
    best = report.analyse([tmp_path / "horovod"], tmp_path / "r0").answers["horovod"][1].evidence["bleu_best"]
    results = {}
    for name, answer in (("right", best), ("wrong", best - 5)):
        path = tmp_path / f"{name}.ipynb"
        path.write_text(json.dumps(notebook(answer)))
        results[name] = subprocess.run([sys.executable, "-m", "pytest", "-q", "--nbval-lax", "--nbval-current-env",
                                        "-p", "no:cacheprovider", str(path)], capture_output=True, text=True,
                                       cwd=tmp_path).returncode
    assert results == {"right": 0, "wrong": 1}
