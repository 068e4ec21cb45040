"""Question 2's BLEU plateau, decided by a paired bootstrap over the dev sentences (Koehn 2004): on synthetic
translations whose difference is known, and on the reference run's 20 dev sentences."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nmtkit import runs
from nmtkit.analysis import evidence, load_run, reference_run
from nmtkit.course.instructor import book, decisions, judgments

WORDS = ("haus katze hund baum fluss berg stadt wald auto buch tisch stuhl fenster garten strasse brot wasser "
         "feuer licht nacht").split()


def sentence(rng) -> list[str]:
    return list(rng.choice(WORDS, size=int(rng.integers(8, 14))))


def garble(words: list[str], rng, share: float) -> str:
    """The sentence with about `share` of its words replaced: a worse translation of it."""
    return " ".join(w if rng.random() >= share else "xx" for w in words)


def translations(tmp_path, n: int, worse: float, better: float, seed: int = 0):
    """A run directory with dev references and the translations of evaluations 100 and 200: each sentence with
    `worse`, then `better`, of its words garbled (evaluation 200 is better by a known margin when better < worse)."""
    rng = np.random.default_rng(seed)
    ref = [sentence(rng) for _ in range(n)]
    d = tmp_path / runs.TRANSLATIONS
    d.mkdir(parents=True)
    (d / runs.DEV_REFERENCES).write_text("\n".join(" ".join(r) for r in ref) + "\n", encoding="utf-8")
    for step, share in ((100, worse), (200, better)):
        (d / f"dev.{step}.de").write_text("\n".join(garble(r, rng, share) for r in ref) + "\n", encoding="utf-8")
    (tmp_path / runs.SCALARS).write_text('{"step": 100, "wall_time": 1.0, "tag": "train_loss", "value": 2.0}\n',
                                         encoding="utf-8")  # a run directory with logs
    return load_run(tmp_path)


def curve(run, steps=(100, 200)):
    bleu = {s: evidence.paired_bleu(run, s, s)["bleu_a"] for s in steps}
    return pd.DataFrame({"step": list(steps), "value": [bleu[s] for s in steps]})


def test_the_paired_bootstrap_decides_a_large_gain_on_enough_sentences(tmp_path):
    run = translations(tmp_path, 400, worse=0.5, better=0.1)
    pb = evidence.paired_bleu(run, 100, 200)
    assert pb["gain"] > 20 and pb["low"] > 10 and pb["p_value"] < 0.01 and pb["sentences"] == 400
    assert evidence.paired_bleu(run, 100, 200) == pb  # seeded: the same figures every time
    rule = judgments.bleu_rule(run, curve(run), 1, evidence.Options())
    assert rule["bleu_verdict"] == "rising" and rule["bleu_gain"] == pytest.approx(pb["gain"])


def test_the_paired_bootstrap_cannot_tell_a_small_gain_or_on_few_sentences(tmp_path):
    small = translations(tmp_path / "small", 400, worse=0.30, better=0.29, seed=1)
    rule = judgments.bleu_rule(small, curve(small), 1, evidence.Options())
    assert rule["bleu_verdict"] == "cannot tell" and "straddles zero" in rule["bleu_why"]
    assert rule["bleu_gain_low"] < 0 < rule["bleu_gain_high"] and rule["bleu_gain_high"] > rule["bleu_margin"]
    few = translations(tmp_path / "few", 20, worse=0.5, better=0.1)  # large gain, but 20 sentences
    rule = judgments.bleu_rule(few, curve(few), 1, evidence.Options())
    assert rule["bleu_verdict"] == "cannot tell" and "too few" in rule["bleu_why"]
    same = translations(tmp_path / "same", 400, worse=0.3, better=0.3, seed=2)
    twice = judgments.bleu_rule(same, curve(same, (100, 100)), 1, evidence.Options())  # one evaluation twice
    assert twice["bleu_verdict"] == "plateaued" and twice["bleu_gain_high"] == 0


def test_the_pair_is_fixed_in_steps_not_the_best_of_a_window():
    """The last evaluation against the one k before it, whatever the curve between them did: no post-hoc maxima."""
    bleu = pd.DataFrame({"step": [100, 200, 300, 400, 500], "value": [10.0, 30.0, 25.0, 20.0, 22.0]})
    assert judgments.q2_pair(bleu, 3) == (200, 500) and judgments.q2_pair(bleu, 1, at=300) == (200, 300)
    with pytest.raises(evidence.AnalysisError, match="4 evaluations up to step 300"):
        judgments.q2_pair(bleu, 3, at=300)


def test_the_bootstrap_draws_the_resamples_sacrebleu_draws(tmp_path):
    """The same seed draws the same resampled sentences as sacrebleu's own paired bootstrap: its mean score of the
    system under test over the resamples is the one our differences are taken from."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import _paired_bs_test
    run = translations(tmp_path, 60, worse=0.4, better=0.2)
    d = run.path / runs.TRANSLATIONS
    ref = (d / runs.DEV_REFERENCES).read_text().splitlines()
    a, b = ((d / f"dev.{s}.de").read_text().splitlines() for s in (100, 200))
    metric = BLEU()
    base = metric._extract_corpus_statistics(a, [ref])
    _, res = _paired_bs_test({"BLEU": (base, metric._aggregate_and_compute(base))}, "b", b, [ref],
                             {"BLEU": metric}, n_samples=1000, seed=evidence.PAIRED_SEED)
    pb = evidence.paired_bleu(run, 100, 200)
    assert res["BLEU"].score == pytest.approx(pb["bleu_b"]) and res["BLEU"].p_value < 0.01 and pb["p_value"] < 0.01


def test_q2_on_the_reference_runs_20_dev_sentences_cannot_tell():
    run = load_run(reference_run())
    a = book.answer(run, 2)
    assert a.evidence["bleu_verdict"] == "cannot tell" and a.evidence["bleu_sentences"] == 20
    assert "cannot tell whether dev BLEU has plateaued" in a.answer and "plateaued (" not in a.answer
    assert a.evidence["bleu_gain"] > 10  # the gain the old two-sigma-of-one-BLEU tolerance called a plateau
    d = decisions.q2(run, evidence.Options())
    assert d["bleu_gain"] == pytest.approx(a.evidence["bleu_gain"]) and d["trained"] is False
