"""Dev BLEU's noise, from the per-sentence n-gram statistics of an evaluation: one BLEU's bootstrap spread, and the
paired bootstrap of two evaluations' difference (question 2's plateau rule reads it).

An evaluation's statistics come from its translations (translations/dev.<step>.de against dev.ref.de), or, for a run
shipped without its translations, from the run's bleu-stats.json (runs.BLEU_STATS: step -> one row of sacrebleu's
statistics per dev sentence), which `sentence_stats` writes from them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from nmtkit.analysis.logs import Run
from nmtkit.errors import AnalysisError


def bleu_noise(run: Run, resamples: int = 200, seed: int = 0) -> dict | None:
    """How much dev BLEU moves by which sentences the dev set happens to hold: the standard deviation of corpus BLEU
    over `resamples` bootstrap resamples (sentences drawn with replacement) of the last evaluation's translations
    against the dev references (translations/dev.<step>.de, dev.ref.de). None without those files."""
    cache = run.__dict__.setdefault("_bleu_noise", {})  # 200 corpus BLEUs: once per run and kernel
    if (resamples, seed) not in cache:
        cache[(resamples, seed)] = _bootstrap(run, resamples, seed)
    return cache[(resamples, seed)]


def _bootstrap(run: Run, resamples: int, seed: int) -> dict | None:
    import sacrebleu

    from nmtkit import runs
    d = run.path / runs.TRANSLATIONS
    steps = sorted(int(p.name.split(".")[1]) for p in d.glob("dev.*.de") if p.name.split(".")[1].isdigit())
    if not steps:
        return None
    hyp = (d / f"dev.{steps[-1]}.de").read_text(encoding="utf-8").splitlines()
    ref = _dev_references(run, d / runs.DEV_REFERENCES, len(hyp))
    if ref is None or len(hyp) != len(ref) or len(ref) < 2:
        return None
    # per-sentence n-gram statistics once, summed per resample: what sacrebleu's own paired bootstrap does
    # (sacrebleu.compat's significance tests), equal to corpus_bleu on the resampled sentences and ~100x faster
    bleu = sacrebleu.metrics.BLEU()
    stats = np.array(bleu._extract_corpus_statistics(hyp, [ref]))
    rng = np.random.default_rng(seed)
    scores = [bleu._compute_score_from_stats(list(stats[idx].sum(0))).score
              for idx in rng.integers(0, len(ref), size=(resamples, len(ref)))]
    return {"bleu_bootstrap_std": float(np.std(scores, ddof=1)), "bleu_bootstrap_resamples": resamples,
            "bleu_bootstrap_sentences": len(ref), "bleu_bootstrap_step": steps[-1]}


PAIRED_RESAMPLES, PAIRED_SEED = 1000, 12345  # sacrebleu's own defaults for its paired bootstrap (SACREBLEU_SEED)


def paired_bleu(run: Run, step_a: int, step_b: int, resamples: int = PAIRED_RESAMPLES,
                seed: int = PAIRED_SEED) -> dict:
    """The paired bootstrap (Koehn 2004, as sacrebleu.significance runs it) of dev BLEU at evaluation `step_b`
    minus at `step_a`: both evaluations' sentence statistics (sentence_stats) scored on the same resampled dev
    sentences, `resamples` times (seeded: the same figures every time). Returns the two BLEUs, their difference
    `gain`, its 95% interval `low`..`high` (the 2.5th and 97.5th percentiles of the resampled differences),
    `p_value` (the share of resamples where step_b did not beat step_a: one-sided, with +1 as sacrebleu counts it)
    and the number of `sentences`. A difference of two BLEUs on the same sentences is what a plateau rule compares;
    the spread of one BLEU is not its noise (the two move together)."""
    import sacrebleu
    bleu = sacrebleu.metrics.BLEU()
    stats = {s: sentence_stats(run, s) for s in (step_a, step_b)}
    n = len(stats[step_a])
    if n < 2 or len(stats[step_b]) != n:
        raise AnalysisError(f"{run.path}: evaluations {int(step_a)} and {int(step_b)} scored on one dev set of two "
                            f"or more sentences")
    # per-sentence n-gram statistics once, summed per resample (float32 and rng.choice as sacrebleu's own test)
    idx = np.random.default_rng(seed).choice(n, size=(resamples, n), replace=True)
    score = lambda st: np.array([bleu._compute_score_from_stats(x.sum(0)).score for x in st[idx]])  # noqa: E731
    diffs = score(stats[step_b]) - score(stats[step_a])
    a, b = (bleu._compute_score_from_stats(list(stats[s].sum(0))).score for s in (step_a, step_b))
    return {"step_a": int(step_a), "step_b": int(step_b), "bleu_a": float(a), "bleu_b": float(b),
            "gain": float(b - a), "low": float(np.percentile(diffs, 2.5)), "high": float(np.percentile(diffs, 97.5)),
            "p_value": float(((diffs <= 0).sum() + 1) / (resamples + 1)), "sentences": n,
            "resamples": resamples, "seed": seed}


def sentence_stats(run: Run, step: int) -> np.ndarray:
    """sacrebleu's n-gram statistics of evaluation `step`, one row per dev sentence (float32): from its translations
    against the dev references, else from the run's bleu-stats.json (a shipped run without its translations)."""
    import sacrebleu

    from nmtkit import runs
    from nmtkit.files import read_json
    d, step = run.path / runs.TRANSLATIONS, int(step)
    f = d / f"dev.{step}.de"
    if not f.is_file():
        saved = read_json(run.path / runs.BLEU_STATS, AnalysisError, missing={}) or {}
        if str(step) in saved.get("stats", {}):
            return np.array(saved["stats"][str(step)], dtype="float32")
        raise AnalysisError(f"{f}: the dev translations of evaluation {step} (training writes them)")
    hyp = f.read_text(encoding="utf-8").splitlines()
    ref = _dev_references(run, d / runs.DEV_REFERENCES, len(hyp))
    if ref is None or len(ref) != len(hyp):
        raise AnalysisError(f"{d / runs.DEV_REFERENCES}: the dev references, one per translated dev sentence")
    return np.array(sacrebleu.metrics.BLEU()._extract_corpus_statistics(hyp, [ref]), dtype="float32")


def _dev_references(run: Run, saved: Path, n: int) -> list[str] | None:
    """The dev references the hypotheses were scored against: saved beside them by training, else (a run from an
    older kit) the first n lines of dev.de in the run's data directory, when it is still there."""
    if saved.is_file():
        return saved.read_text(encoding="utf-8").splitlines()
    data = Path(run.config.data.dir) / "dev.de" if run.config and run.config.data.dir else None
    if data is None or not data.is_file():
        return None
    return data.read_text(encoding="utf-8").splitlines()[:n]
