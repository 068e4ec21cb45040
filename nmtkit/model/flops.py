"""Model FLOPs of a training step, the one count behind every MFU the kit shows: the log line, run.json's summary,
the report and question 4's check (TensorFlow-free).

    flops = train_flops(cfg.model, vocab, src_tokens, tgt_tokens, src_len, tgt_len)
    mfu = steady_mfu(records, cfg.model, vocab, peak)   # records: a rank log's steps (nmtkit.runs)
"""
from __future__ import annotations

from nmtkit.config import ModelConfig

SKIP_STEPS = 3  # each rank's first steps trace the graph: no guide to the steady state (nmtkit.analysis skips them too)


def train_flops(cfg: ModelConfig, vocab_size: int, src_tokens: float, tgt_tokens: float,
                src_len: float = 32.0, tgt_len: float = 32.0) -> float:
    """Model FLOPs of one training step (forward + backward = 3x forward), for MFU.

    2 FLOPs per weight per token through the matmuls, each side with its own tokens: encoder weights see source
    tokens, decoder weights and the output projection see target tokens (counting every weight against source +
    target tokens doubles the figure). Plus the attention score/value matmuls over the padded lengths; embedding
    lookups and element-wise ops are not counted (as in PaLM's and nanoGPT's MFU).
    """
    d, f = cfg.d_model, cfg.d_ff
    enc_layer = 4 * d * d + 2 * d * f
    dec_layer = 8 * d * d + 2 * d * f
    fwd = 2 * (cfg.encoder_layers * enc_layer * src_tokens + cfg.decoder_layers * dec_layer * tgt_tokens
               + vocab_size * d * tgt_tokens)
    # attention: QK^T and AV, 2 matmuls of 2*len*d FLOPs per token per attention block
    fwd += 2 * 2 * d * (cfg.encoder_layers * src_tokens * src_len
                        + cfg.decoder_layers * tgt_tokens * (tgt_len + src_len))
    return 3.0 * fwd


def record_flops(rec: dict, cfg: ModelConfig, vocab_size: int) -> float:
    """train_flops of one rank-log record (its source and target tokens and padded lengths)."""
    return train_flops(cfg, vocab_size, rec["src_tokens"], rec["tgt_tokens"], rec["src_len"], rec["tgt_len"])


def steady_mfu(records, cfg: ModelConfig, vocab_size: int, peak: float) -> float:
    """Model FLOPs over step seconds over the peak, summed over the records given (one rank's or every rank's)."""
    records = list(records)
    flops = sum(record_flops(r, cfg, vocab_size) for r in records)
    return flops / sum(r["step_time"] for r in records) / peak
