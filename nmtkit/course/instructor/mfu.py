"""Question 4's figure from a run's logs: the model FLOPs of each logged step (nmtkit.model.flops.train_flops on the
step's own source and target tokens and padded lengths) and the MFU over named steps. The instructor's: applied to a
shipped reference run's rank logs it yields the graded answer, so the release leaves it out (the training loop counts
its own steps' FLOPs as it runs, for the log line).

Why each side with its own tokens: encoder weights see source tokens, decoder weights and the output projection see
target tokens; counting every weight against source + target tokens doubles the figure (the rubric's point).
"""
from __future__ import annotations

from nmtkit.config import ModelConfig
from nmtkit.model.flops import train_flops


def record_flops(rec: dict, cfg: ModelConfig, vocab_size: int) -> float:
    """train_flops of one rank-log record (its source and target tokens and padded lengths)."""
    return train_flops(cfg, vocab_size, rec["src_tokens"], rec["tgt_tokens"], rec["src_len"], rec["tgt_len"])


def steady_mfu(records, cfg: ModelConfig, vocab_size: int, peak: float) -> float:
    """Model FLOPs over step seconds over the peak, summed over the records given (one rank's or every rank's)."""
    records = list(records)
    flops = sum(record_flops(r, cfg, vocab_size) for r in records)
    return flops / sum(r["step_time"] for r in records) / peak
