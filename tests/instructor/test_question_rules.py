"""Each question's rule, on the shipped runs (issue 70): the lab argues the CPU bound from the achieved rate only; Q4
on one rank names no exchange and halves no peak timed on both cores; Q5 and Q11 take one bound and one ratio and
Q11 decides from measurements only; the lab rubric compares the fit's intercept with the compute; Q2 compares fixed
steps with a BLEU margin (on the shipped plateau run: the last pair plateaued, a pair of its first third rising)."""
from __future__ import annotations

import json
import re
import shutil

import pytest

from nmtkit.analysis import evidence, load_run, reference_run
from nmtkit.analysis.lab import shipped
from nmtkit.analysis.reference import default_dir
from nmtkit.course.instructor import book, decisions, judgments, verdicts

OPTS = evidence.Options()


def test_the_lab_argues_the_cpu_bound_from_the_achieved_rate_only():
    text = verdicts.lab_verdict()
    p = decisions.lab(shipped())["lab_predict"]
    assert f"an achieved {p['baseline_achieved_mbit_s']:,.0f} Mbit/s" in text
    # no busiest-sample figure argues it: a 0.1 s sample reads at most a step's bytes over 0.1 s whatever the link
    assert "busiest 0.1 s sample" not in text and "link_peak" not in json.dumps(p)
    item = book.book["lab_predict"].rubric[-1]
    assert "achieved rate" in item.text and "busiest 0.1 s sample" in item.misconception


def test_the_lab_rubric_compares_the_fits_intercept_with_the_compute_as_the_verdict_does():
    fit = book.book["lab_fit"].rubric[0]
    assert "intercept compared with the compute" in fit.text and "baseline's whole step" in fit.misconception
    assert "against the compute's" in verdicts.lab_verdict()
    assert "near the baseline's step" not in book.lab_rubric()


@pytest.mark.parametrize("name, cores", [("ablation-warmup-100", 2), ("lab-1x1", 1)])
def test_q4_on_one_rank_names_what_idles_and_its_peak_with_no_exchange(name, cores):
    a = book.answer(load_run(default_dir(name)), 4)
    assert not re.search(r"exchange|allreduce|Gloo|waited on the", a.answer), a.answer
    assert a.evidence["peak_cores"] == cores and f"the {cores} core(s) a rank ran on" in a.answer
    # a peak timed on both cores is every core's peak: the one rank's MFU is not halved again
    assert a.evidence["mfu_all_cores"] == pytest.approx(a.evidence["mfu"] * cores / 2)


def test_q4_on_the_reference_run_keeps_its_exchange():
    a = book.answer(load_run(reference_run()), 4)
    assert "waited on the gradient exchange" in a.answer


def test_q5_and_q11_print_one_bound_and_one_ratio_from_one_function():
    run = load_run(reference_run())
    q5, q11 = book.answer(run, 5), book.answer(run, 11)
    net = judgments.network(run, OPTS)
    bound, ratio = f"{net['bound_bytes'] / 1e6:.2f} MB", f"{net['measured_over_bound']:.2f}x"
    assert bound in q5.answer and bound in q11.answer and ratio in q5.answer and ratio in q11.answer
    # the graded figure is that same ratio: the mean over the hosts, said once (machines.counted_per_step)
    assert decisions.q5(run, OPTS)["measured_over_bound"] == pytest.approx(net["measured_over_bound"])
    hosts = list(net["hosts"])
    assert net["counted_bytes_per_step"] == pytest.approx(sum(h["bytes_per_step"] for h in hosts) / len(hosts))


def test_q11_decides_from_measurements_only(tmp_path):
    """On a copy of the reference run whose link preflight did not measure (the config's rate assumed), Q11's
    verdict holds no figure derived from that link, and its decider refuses the share."""
    run_dir = tmp_path / "assumed"
    shutil.copytree(reference_run(), run_dir)
    status = json.loads((run_dir / "run.json").read_text())
    status.pop("link_measured_mbit_s", None)
    status.pop("link_measured", None)
    (run_dir / "run.json").write_text(json.dumps(status))
    run = load_run(run_dir)
    net = judgments.network(run, OPTS)
    assert not net["link_measured"] and net["measured_share_of_step"] is None
    a = book.answer(run, 11)
    share = f"{net['allreduce_share_of_step']:.0%}"
    assert share not in a.answer and "no link was measured" in a.answer, a.answer
    assert "q11" in book.decide(run)["missing"]


PLATEAU = default_dir("plateau-tiny")


def test_q2_plateaued_on_the_long_runs_last_pair_and_rising_in_its_first_third():
    run = load_run(PLATEAU)
    bleu = run.series("Eval_BLEU_Score")
    manifest = json.loads((PLATEAU / "manifest.json").read_text())
    (a, b), (c, d) = manifest["compared"]
    last = judgments.bleu_rule(run, bleu, OPTS.plateau_k, OPTS)
    assert last["bleu_steps"] == (a, b) and b == int(bleu["step"].max()) and last["bleu_k"] == 3
    assert last["bleu_verdict"] == "plateaued", last
    assert -OPTS.plateau_margin_bleu <= last["bleu_gain_low"] and last["bleu_gain_high"] <= OPTS.plateau_margin_bleu
    early = judgments.bleu_rule(run, bleu, OPTS.plateau_k, OPTS, at=d)
    assert d <= b / 3 and early["bleu_steps"] == (c, d) and early["bleu_verdict"] == "rising", early
    # the verdict's words state the same rule the code applies: fixed steps, k, the margin in BLEU
    text = book.answer(run, 2).answer
    assert f"step {b:,}'s BLEU" in text and f"step {a:,}'s" in text and "the one 3 evaluations earlier" in text
    assert "+-1 BLEU" in text
    assert OPTS.plateau_margin_bleu <= 1.0


def test_q2_on_the_baseline_stays_rising():
    """The tiny baseline (the default warm-up's shipped twin, notebook 02's configuration) early: rising."""
    run = load_run(default_dir("ablation-warmup-100"))
    bleu = run.series("Eval_BLEU_Score")
    steps = [int(s) for s in bleu["step"]]
    one = judgments.bleu_rule(run, bleu, 1, OPTS, at=steps[1])  # its first two evaluations
    assert one["bleu_steps"] == (steps[0], steps[1]) and one["bleu_verdict"] == "rising", one
    assert judgments.bleu_rule(run, bleu, OPTS.plateau_k, OPTS)["bleu_verdict"] == "rising"
