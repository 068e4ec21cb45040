"""Notebook exercises: notebook 04's solutions pass against the reference run's logs, a wrong answer fails (also under
nbval, which is how instructors grade), and the schedule and rank-plan exercises check what they claim."""
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nmtkit.analysis import report
from nmtkit.analysis.reference import reference_run
from nmtkit.course.exercises import check, check_plan
from nmtkit.course.student import is_instructor
from nmtkit.errors import ExerciseError

NB = Path(__file__).resolve().parents[2] / "notebooks"


def reference_analysis(out_dir):
    """notebook 04's `rep` before notebooks 02/03 ran: the shipped reference run alone."""
    from nmtkit.notebook import Analysis
    path = reference_run()
    return Analysis(report.analyse([path], out_dir), [path])


def test_notebook_04_solutions_pass_on_the_reference_run_and_wrong_figures_fail(tmp_path, capsys):
    import nmtkit as nk
    nb = nbformat.read(NB / "04_monitoring_analysis.ipynb", as_version=4)
    rep = reference_analysis(tmp_path / "report")
    ns = {"nk": nk, "ws": tmp_path, "rep": rep}
    code = [c.source for c in nb.cells if c.cell_type == "code" and not is_instructor(c)
            and "nk.analyse(" not in c.source]
    for src in code:  # the whole notebook after its analyse cell, as a student with every exercise solved runs it
        exec(src, ns)
    out = capsys.readouterr().out
    assert sorted(re.findall(r"✓ (q\d+):", out)) == sorted(f"q{i}" for i in range(1, 12)), out
    assert ns["run"] is ns["ref"]  # no runs of the student's own: the reference run answers everything
    with pytest.raises(ExerciseError, match="✗ q5 link_s_1g: too high"):
        check(rep, "q5", run=ns["ref"], **{**{k: ns[k] for k in ("bytes_per_param", "bound_mb", "measured_over_bound",
                                                                  "link_s_10g")}, "link_s_1g": ns["link_s_1g"] * 8})
    with pytest.raises(ExerciseError, match="✗ q2 trained: not it"):
        check(rep, "q2", bleu_gain=ns["bleu_gain"], loss_drop=ns["loss_drop"], trained=not ns["trained"])
    with pytest.raises(ExerciseError, match="✗ q8 files: not it"):  # an older checkpoint's files are no answer
        check(rep, "q8", files=[re.sub(r"ckpt-(\d+)", lambda m: f"ckpt-{int(m.group(1)) - 40}", f)
                                for f in ns["files"]])
    with pytest.raises(ExerciseError, match="✗ q7 train_mib: too high"):  # 10^6 bytes are no MiB
        check(rep, "q7", train_mb=ns["train_mb"], train_mib=ns["train_mb"])


def test_plan_exercise():
    check_plan({0: (0, 0), 1: (1, 0), 2: (0, 1), 3: (1, 1)})
    with pytest.raises(ExerciseError, match="ranks \\[2, 3\\]"):
        check_plan({0: (0, 0), 1: (1, 0), 2: (2, 1), 3: (3, 1)})  # local ranks count within a host


@pytest.mark.slow
def test_a_wrong_answer_fails_nbval(tmp_path):
    src = (f"from nmtkit.analysis import report\nfrom nmtkit.course.exercises import check\n"
           f"rep = report.analyse([{str(reference_run())!r}], {str(tmp_path / 'r')!r})\n")

    def notebook(answer):
        def cell(s):
            return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": s}
        return {"cells": [cell(src), cell(f"check(rep, 'q9', predicted_mb={answer})")], "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}
    params = json.loads((reference_run() / "run.json").read_text())["params"]
    results = {}
    for name, answer in (("right", params * 12 / 1e6), ("wrong", params * 4 / 1e6)):
        path = tmp_path / f"{name}.ipynb"
        path.write_text(json.dumps(notebook(answer)))
        results[name] = subprocess.run([sys.executable, "-m", "pytest", "-q", "--nbval-lax", "--nbval-current-env",
                                        "-p", "no:cacheprovider", str(path)], capture_output=True, text=True,
                                       cwd=tmp_path).returncode
    assert results == {"right": 0, "wrong": 1}


def test_q3_eval_mode_losses_say_why_the_reference_run_cannot_give_them():
    from nmtkit.errors import TrainError
    from nmtkit.training.heldout import describe, eval_mode_losses
    with pytest.raises(TrainError, match="no checkpoint weights"):
        eval_mode_losses(reference_run())
    assert describe(reference_run()).startswith("eval-mode losses: cannot measure: rehearsal-200mbit: no checkpoint")
