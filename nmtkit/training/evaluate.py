"""Dev and test evaluation during training: decode with beam search, score with sacrebleu, keep the best
checkpoint by dev BLEU. Every rank of a job decodes its share of the batches (the same batches as one process,
so the same translations) and rank 0 writes the results."""
from __future__ import annotations

import time
from pathlib import Path

from nmtkit import runs
from nmtkit.config import Config
from nmtkit.files import write_lines_atomic
from nmtkit.model.decode import Translator


def translate_shared(translator: Translator, sources: list[str], dist=None) -> list[str]:
    """translator.translate(sources), each of dist's ranks decoding every size-th batch; every rank gets all."""
    if dist is None or dist.size == 1:
        return translator.translate(sources)
    ids = translator.translate_ids(translator.encode(sources), part=(dist.rank, dist.size))
    merged: dict[int, list[int]] = {}
    for share in dist.gather({i: x for i, x in enumerate(ids) if x is not None}):
        merged.update(share)
    return [translator.tokenizer.decode(merged[i]) for i in range(len(sources))]


def evaluate_translations(translator: Translator, sources: list[str], references: list[str], dist=None) -> dict:
    """Decode `sources` (shared by dist's ranks) and score them against `references` with sacrebleu (detokenised
    BLEU and chrF)."""
    import sacrebleu
    t0 = time.perf_counter()
    hyps = translate_shared(translator, sources, dist)
    seconds = time.perf_counter() - t0
    bleu, chrf = sacrebleu.metrics.BLEU(), sacrebleu.metrics.CHRF()
    b, c = bleu.corpus_score(hyps, [references]), chrf.corpus_score(hyps, [references])
    return {"bleu": b.score, "chrf": c.score, "hypotheses": hyps, "seconds": seconds,
            "bleu_signature": str(bleu.get_signature()), "chrf_signature": str(chrf.get_signature())}


def _split(data_dir: Path, split: str, limit: int) -> tuple[list[str], list[str]]:
    from nmtkit.data.pipeline import read_split
    src, ref = read_split(data_dir, split)
    return (src[:limit], ref[:limit]) if limit else (src, ref)


class Evaluator:
    """The evaluations: dev BLEU/chrF/loss every eval.every steps (saving the best checkpoint), test at the end.
    Every rank calls them at the same steps and decodes its share; rank 0 (dist.is_chief) writes the scalars,
    translations and best checkpoint and prints. Holds the best dev BLEU so far (from best.json on resume)."""

    def __init__(self, cfg: Config, run: Path, data_dir: Path, trainer, tokenizer, scalars, checkpoints, dist=None):
        self.cfg, self.run, self.data_dir = cfg, run, data_dir
        self.trainer, self.scalars, self.checkpoints = trainer, scalars, checkpoints
        self.dist = dist
        self.chief = dist is None or dist.is_chief
        self.translator = Translator(trainer.model, tokenizer, max_extra_len=cfg.eval.max_extra_len,
                                     searcher=trainer.searcher(cfg.eval.beam_size, cfg.eval.length_penalty))
        self.dev_src, self.dev_ref = _split(data_dir, "dev", cfg.eval.dev_sentences)
        self.dev_cut = self.cut(self.dev_src)
        best = runs.read_best(run)
        self.best_bleu = best["bleu"] if best else -1.0
        self.last: dict = {}

    def dev(self, step: int) -> dict:
        from nmtkit.data.pipeline import make_dataset
        ev = evaluate_translations(self.translator, self.dev_src, self.dev_ref, self.dist)
        rank, size = (self.dist.rank, self.dist.size) if self.dist is not None else (0, 1)
        sums = self.trainer.eval_sums(make_dataset(self.data_dir, "dev", self.cfg.data, rank=rank, size=size,
                                                   shuffle=False, repeat=False, truncate=self.cfg.model.max_positions,
                                                   limit=self.cfg.eval.dev_sentences))
        shares = self.dist.gather(sums) if size > 1 else [sums]
        ev["eval_loss"] = sum(t for t, _ in shares) / max(sum(n for _, n in shares), 1.0)
        if not self.chief:
            self.last = ev
            return ev
        write_lines_atomic(self.run / runs.TRANSLATIONS / f"dev.{step}.de", ev["hypotheses"])
        if not (self.run / runs.TRANSLATIONS / runs.DEV_REFERENCES).exists():  # what BLEU's noise is measured against
            write_lines_atomic(self.run / runs.TRANSLATIONS / runs.DEV_REFERENCES, self.dev_ref)
        self.scalars.write(step, {"eval_loss": ev["eval_loss"], "Eval_BLEU_Score": ev["bleu"],
                                  "eval_chrF": ev["chrf"]})
        if ev["bleu"] > self.best_bleu:
            self.best_bleu = ev["bleu"]
            self.checkpoints.save(step, best=True)
            runs.write_best(self.run, step=step, bleu=ev["bleu"], chrf=ev["chrf"])
        print(f"eval step {step} | eval_loss {ev['eval_loss']:.3f} | dev BLEU {ev['bleu']:.2f} | chrF {ev['chrf']:.2f} "
              f"| best {self.best_bleu:.2f} | {len(self.dev_src)} sentences in {ev['seconds']:.1f}s{self.dev_cut}",
              flush=True)
        self.last = ev
        return ev

    def test(self, step: int) -> dict:
        """The final test-set score: summary fields test_bleu, test_chrf, test_seconds and the signatures."""
        src, ref = _split(self.data_dir, "test", self.cfg.eval.test_sentences)
        test = evaluate_translations(self.translator, src, ref, self.dist)
        if not self.chief:
            return {}
        cut = self.cut(src)
        write_lines_atomic(self.run / runs.TRANSLATIONS / f"test.{step}.de", test["hypotheses"])
        print(f"test BLEU {test['bleu']:.2f} | chrF {test['chrf']:.2f} | {len(src)} sentences in "
              f"{test['seconds']:.1f}s{cut} | {test['bleu_signature']}", flush=True)
        return {"test_bleu": test["bleu"], "test_chrf": test["chrf"], "test_seconds": test["seconds"],
                "bleu_signature": test["bleu_signature"], "chrf_signature": test["chrf_signature"]}

    def cut(self, sources: list[str]) -> str:
        """' | N cut to M tokens' when sources (BPE + EOS) exceed the model's positions (Translator cuts them)."""
        limit = self.translator.model.cfg.max_positions
        n = sum(len(self.translator.tokenizer.encode(s)) + 1 > limit for s in sources)
        return f" | {n} cut to {limit} tokens" if n else ""

    def summary(self) -> dict:
        """eval_loss, bleu, chrf of the last dev evaluation and the best BLEU ({} before any)."""
        if not self.last:
            return {}
        return {"eval_loss": self.last["eval_loss"], "bleu": self.last["bleu"], "chrf": self.last["chrf"],
                "best_bleu": self.best_bleu}
