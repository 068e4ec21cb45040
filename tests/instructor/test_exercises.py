"""Notebook exercises: notebook 05's solutions pass against the reference run's logs, a wrong answer fails (also under
nbval, which is how instructors grade), and the schedule and rank-plan exercises check what they claim."""
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from nmtkit.analysis import report
from nmtkit.analysis.questions import book
from nmtkit.analysis.reference import reference_run
from nmtkit.course.exercises import check, check_plan
from nmtkit.course.student import is_instructor
from nmtkit.errors import ExerciseError

NB = Path(__file__).resolve().parents[2] / "notebooks"

HAND = book.hand_graded()  # question -> why its check is graded by hand for now


def reference_analysis(out_dir):
    """notebook 05's `rep` before notebooks 02/03 ran: the shipped reference run alone."""
    from nmtkit.notebook import Analysis
    path = reference_run()
    return Analysis(report.analyse([path], out_dir), [path])


def test_notebook_04_solutions_pass_on_the_reference_run_and_wrong_figures_fail(tmp_path, capsys):
    import nmtkit as nk
    nb = nbformat.read(NB / "05_monitoring_analysis.ipynb", as_version=4)
    rep = reference_analysis(tmp_path / "report")
    ns = {"nk": nk, "ws": tmp_path, "rep": rep}
    code = [c.source for c in nb.cells if c.cell_type == "code" and not is_instructor(c)
            and 'nk.analyse(["baseline"' not in c.source]  # the other analyses (Q6's ablation runs) ship with the kit
    for src in code:  # the whole notebook after its analyse cell, as a student with every exercise solved runs it
        exec(src, ns)
    out = capsys.readouterr().out
    questions = [f"q{i}" for i in range(1, 12)]
    assert sorted(re.findall(r"✓ (q\d+):", out)) == sorted(q for q in questions if q not in HAND), out
    assert sorted(re.findall(r"✎ (q\d+): graded by hand", out)) == sorted(q for q in questions if q in HAND)
    assert "too " not in out and "not it" not in out  # the solutions agree with the logs, hand-graded ones too
    assert ns["run"] is ns["ref"]  # no runs of the student's own: the reference run answers everything
    with pytest.raises(ExerciseError, match="✗ q4 tokens_per_s: too high"):
        check(rep, "q4", run=ns["ref"], **{**{k: ns[k] for k in ("flops_per_step", "mfu")},
                                            "tokens_per_s": ns["tokens_per_s"] * 8})
    # a hand-graded question never fails; its comparison is for the grader, still without the expected figure
    check(rep, "q5", run=ns["ref"], **{**{k: ns[k] for k in ("bytes_per_param", "bound_mb", "measured_over_bound",
                                                             "link_s_10g")}, "link_s_1g": ns["link_s_1g"] * 8})
    assert "link_s_1g too high" in capsys.readouterr().out
    with pytest.raises(ExerciseError, match="✗ q2 trained: not it"):
        check(rep, "q2", bleu_gain=ns["bleu_gain"], loss_drop=ns["loss_drop"], trained=not ns["trained"])
    with pytest.raises(ExerciseError, match="✗ q8 files: not it"):  # an older checkpoint's files are no answer
        check(rep, "q8", files=[re.sub(r"ckpt-(\d+)", lambda m: f"ckpt-{int(m.group(1)) - 40}", f)
                                for f in ns["files"]])
    with pytest.raises(ExerciseError, match="✗ q7 train_mib: too high"):  # 10^6 bytes are no MiB
        check(rep, "q7", train_mb=ns["train_mb"], train_mib=ns["train_mb"])


RIGHT_PLAN = {0: (0, 0), 1: (1, 0), 2: (0, 1), 3: (1, 1)}  # vm1:2,vm2:2


def plan_reply(plan, hosts="vm1:2,vm2:2") -> str:
    """What check_plan says to `plan`: its printed line, or ExerciseError's message after "raised: "."""
    import contextlib
    import io
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            check_plan(plan, hosts)
    except ExerciseError as e:
        return buf.getvalue() + "raised: " + str(e)
    return buf.getvalue()


def wrong_plans():
    """Every plan of the right form for vm1:2,vm2:2 with local and cross ranks in 0..2, the right one left out."""
    import itertools
    pairs = list(itertools.product(range(3), repeat=2))
    for combo in itertools.product(pairs, repeat=4):
        plan = dict(enumerate(combo))
        if plan != RIGHT_PLAN:
            yield plan


def test_plan_exercise_graded_names_the_wrong_ranks_never_the_expected_pairs(capsys):
    check_plan(RIGHT_PLAN)
    assert "✓ the plan of vm1:2,vm2:2: rank 0 -> local 0, cross 0" in capsys.readouterr().out
    with pytest.raises(ExerciseError, match="ranks \\[2, 3\\] are not it. Hint: ranks fill a host"):
        check_plan({0: (0, 0), 1: (1, 0), 2: (2, 1), 3: (3, 1)})  # local ranks count within a host
    check_plan({"0": [0, 0], "1": [1, 0], "2": [0, 1], "3": [1, 1]})  # keys and pairs as JSON gives them
    capsys.readouterr()
    replies = {plan_reply(p) for p in wrong_plans()}
    assert all(r.startswith("raised: ✗ the plan of vm1:2,vm2:2: ranks [") for r in replies), list(replies)[:3]
    # the expected (local, cross) pairs in no form: no pair, no "local 0"-style listing, no word "expected"
    leaks = [r for r in replies if re.search(r"\(\s*\d+\s*,\s*\d+\s*\)|local \d|cross \d|expected", r)]
    assert leaks == [], leaks[:3]
    assert "expected " + "(local_rank" not in Path(check_plan.__code__.co_filename).read_text()


def test_plan_exercise_in_the_release_checks_form_only_with_one_reply(monkeypatch):
    from nmtkit.course import exercises
    monkeypatch.setattr(exercises, "INSTRUCTOR_KIT", False)  # a student's release: no nmtkit.course.instructor
    assert exercises._hidden() is None
    replies = {plan_reply(p) for p in [RIGHT_PLAN, *wrong_plans()]}
    assert len(replies) == 1, list(replies)[:3]  # right or wrong: one reply, nothing to bisect
    reply = replies.pop()
    assert reply.startswith("✓ the plan of vm1:2,vm2:2 has the right form") and "raised" not in reply
    assert not re.search(r"\d+\s*,\s*\d+|local \d|cross \d|rank \d", reply), reply
    # a plan of the wrong form fails on its form, the same for any values
    for bad, why in (({0: (0, 0), 1: (1, 0), 2: (0, 1)}, "not every rank 0..3 once"),
                     ({0: (0, 0), 1: (1, 0), 2: (0, 1), 3: (1, 1), 4: (0, 2)}, "not every rank 0..3 once"),
                     ({0: (0, 0), 1: (1, 0), 2: (0, 1), 3: (1,)}, "no pair"),
                     ({0: (0, 0), 1: (1, 0), 2: (0, 1), 3: (1.0, 1)}, "no pair"),
                     ({0: (0, 0), 1: (1, 0), 2: (0, 1), 3: (True, 1)}, "no pair"),
                     ([(0, 0), (1, 0), (0, 1), (1, 1)], "not a dict")):
        assert why in plan_reply(bad) and "raised: ✗" in plan_reply(bad), (bad, plan_reply(bad))
    assert plan_reply({0: (5, 5), 1: (1,)}) == plan_reply({0: (0, 0), 1: (0,)})


@pytest.mark.slow
def test_a_wrong_answer_fails_nbval(tmp_path):
    src = (f"from nmtkit.analysis import report\nfrom nmtkit.course.exercises import check\n"
           f"rep = report.analyse([{str(reference_run())!r}], {str(tmp_path / 'r')!r})\n")

    def notebook(answer):
        def cell(s):
            return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": s}
        checked = f"check(rep, 'q7', train_mb={answer}, train_mib={answer} * 1e6 / 2**20, train_lines={lines})"
        return {"cells": [cell(src), cell(checked)], "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}
    files = json.loads((reference_run() / "data_stats.json").read_text())["files"]
    train, lines = sum(files[f]["bytes"] for f in ("train.en", "train.de")), files["train.en"]["lines"]
    results = {}
    for name, answer in (("right", train / 1e6), ("wrong", files["train.en"]["bytes"] / 1e6)):  # one side only
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
